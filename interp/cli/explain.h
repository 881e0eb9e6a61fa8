/* explain.h -- `fabricscript explain ID`: a rule in words, why Fabric has
 * it, and a before/after pair from its regression scripts.  The words live
 * in explain.c; the examples are generated at build time from
 * docs/rules.md's trigger/near-miss table (scripts/gen-explain). */
#ifndef FS_EXPLAIN_H
#define FS_EXPLAIN_H

#include <stdio.h>

/* Prints the explanation of id to out; 0, or 2 (a usage error, said on
 * err with the nearest known id) when id is unknown. */
int fsW_explain(FILE *out, FILE *err, const char *id);
/* Every rule id with its sentence, a line each (`fabricscript explain`
 * without an id; the bash completion reads the ids from it). */
void fsW_list(FILE *out);
/* The rule in words (one sentence), or NULL for an unknown id: SARIF's
 * shortDescription. */
const char *fsW_rule_words(const char *id);

#endif
