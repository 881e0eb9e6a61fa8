/* testrun.h -- `fabricscript test`: runs annotated regression scripts.
 *
 * Annotations are `#` comments (outside string literals):
 *   code  # error: TEXT    a diagnostic of severity error whose message
 *   code  # warning: TEXT  contains TEXT (trimmed) is reported at this line;
 *                          one such annotation per line, and a comment-only
 *                          line may carry one too
 *   code  # help: TEXT     an error is reported at this line whose help
 *                          contains TEXT ("did you mean": the annotation
 *                          expects the error, whatever its message)
 *   code  # note: TEXT     a note (a diagnostic of severity note) whose
 *                          message contains TEXT is reported at this line
 *   # out: TEXT            the next expected line of standard output (the
 *                          one space after the colon is not part of TEXT)
 *   # args: -D lr=0.1      options for the script, split on whitespace, with
 *                          '...' and "..." grouping; several lines add up
 *   # mode: check          run `fabricscript check` instead (or `run`)
 *   # warnings: exact      an unannotated warning fails the script too (or
 *                          `allowed`, the default)
 * out, args, mode and warnings must be whole-line comments.
 *
 * A script passes when every expected error and warning is reported at its
 * line, no other error is (other warnings, unless `# warnings: exact`, and
 * notes are allowed), the exit
 * status is 1 if errors are expected and 0 otherwise, and, when it has `out`
 * lines, its standard output is exactly those lines (also for a script
 * expected to fail). Standard error must hold only JSON diagnostic lines. */
#ifndef FS_TESTRUN_H
#define FS_TESTRUN_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "diag.h"

typedef struct fsX_expect {
  fs_severity severity; /* FS_SEV_ERROR, FS_SEV_WARNING or FS_SEV_NOTE */
  uint32_t line;
  char *text;
  int in_help;          /* `# help:`: text is in the error's help, not its message */
} fsX_expect;

typedef struct fsX_spec {
  fsX_expect *expects; size_t nexpects;
  char **out; size_t nout;   /* expected stdout lines, checked when nout > 0 */
  char **args; size_t nargs;
  int check_mode;            /* `# mode:` 0 run, 1 check, 2 plan */
  int exact_warnings;        /* `# warnings: exact`: unannotated warnings fail */
  char *error;               /* a malformed annotation, or NULL */
} fsX_spec;

/* Parses the annotations of a script's text. Always fills spec (free it with
 * fsX_spec_free); a malformed annotation sets spec->error and returns -1. */
int fsX_parse_spec(const char *text, size_t len, fsX_spec *spec);
void fsX_spec_free(fsX_spec *spec);

typedef struct fsX_reported {
  fs_severity severity;
  uint32_t line;             /* 0: the diagnostic has no location */
  char *message;
  char *help;                /* "" when it has none */
} fsX_reported;

/* What one run of a script did. */
typedef struct fsX_result {
  int status;                /* exit status, or -1 when killed by a signal */
  int signal;                /* the signal when status is -1 */
  int timed_out, overflowed; /* killed by the runner: too slow, too much output */
  double timeout;            /* the limit it ran under, in seconds */
  char *out; size_t out_len; /* captured stdout */
  char *err; size_t err_len; /* captured stderr */
  fsX_reported *diags; size_t ndiags;
  char *bad_stderr;          /* the first stderr line that is not a diagnostic
                                (and has a letter in it, if one does) */
} fsX_result;

/* Runs exe with argv (NULL-terminated) and stdin from /dev/null,
 * capturing both output streams, for at most timeout seconds; the child and
 * its process group are killed when it runs over. Returns -1 (errno set) if
 * the child could not be started. */
int fsX_spawn(const char *exe, char *const argv[], double timeout, fsX_result *r);
/* r is filled in, and must be freed, whether or not the child started. */
/* Parses r->err into r->diags and r->bad_stderr. */
void fsX_parse_stderr(fsX_result *r);
void fsX_result_free(fsX_result *r);

/* NULL if the run meets the spec, else a malloc'd "; "-separated list of
 * what was missing or unexpected. */
char *fsX_compare(const fsX_spec *spec, const fsX_result *r);

/* How `fabricscript test` reports: `PASS path` lines, TAP 13 (a YAML block
 * with the reason and the diagnostics under each `not ok`), or one JUnit XML
 * document (a <failure> per failed script) once every script has run. */
typedef enum fsX_format { FSX_PLAIN, FSX_TAP, FSX_JUNIT } fsX_format;

/* `fabricscript test PATH...`: paths are .fab files or directories searched
 * recursively for *.fab (sorted). Each script runs as
 * `self_exe [args] --diagnostics-format=json FILE`, or
 * `self_exe check --diagnostics-format=json [args] FILE` in check mode, with
 * a timeout of FABRICSCRIPT_TEST_TIMEOUT seconds (default 120). Prints
 * `PASS path` or `FAIL path: reason` per script, then `N passed, N failed`.
 * Returns 0 if all passed, 1 if any failed, 2 on bad usage. */
int fsX_main(int argc, char **argv, const char *self_exe, fsX_format format);
/* fsX_main after its argument checks: reports to out. */
int fsX_run_paths(FILE *out, char **paths, size_t npaths, const char *exe, double timeout, fsX_format format);

#endif
