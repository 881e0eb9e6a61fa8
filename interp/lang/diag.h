/* diag.h -- every diagnostic (syntax, check, run time) goes through here.
 * A diagnostic has a severity, an optional rule id ("R36", "W4", "E-syntax",
 * ...), a primary span with its message, secondary spans rendered as `note:`,
 * a `help:` text, and an optional mechanical fix (byte-range edits) that
 * `fabricscript fix` applies. Rendering is text (GCC/Clang shape, optional
 * colour) or JSON lines. */
#ifndef FS_DIAG_H
#define FS_DIAG_H

#include <stdio.h>
#include "ast.h"

typedef enum fs_severity { FS_SEV_NOTE, FS_SEV_WARNING, FS_SEV_ERROR } fs_severity;

typedef struct fs_note {
  const fs_source *src; /* may differ from the diagnostic's (never NULL) */
  fs_loc loc;
  char *message;
} fs_note;

typedef struct fs_edit {
  fs_loc loc;      /* bytes replaced in the diagnostic's source */
  char *text;      /* replacement */
} fs_edit;

typedef struct fs_diag {
  fs_severity severity;
  char *rule;               /* "R36", "W4", "syntax", "name", ... never NULL */
  const fs_source *src;     /* NULL for diagnostics without a location */
  fs_loc loc;
  char *message;
  fs_note *notes; size_t nnotes;
  char *help;               /* may be NULL; may span lines */
  fs_edit *edits; size_t nedits; /* the mechanical fix, if any */
} fs_diag;

typedef enum fs_diag_format { FS_DIAG_TEXT, FS_DIAG_JSON, FS_DIAG_SARIF } fs_diag_format;

typedef struct fs_diags {
  fs_diag *items; size_t n, cap;
  size_t nerrors, nwarnings;
} fs_diags;

void fsD_init(fs_diags *d);
void fsD_free(fs_diags *d);
/* Adds a diagnostic and returns it for notes/help/edits; message is printf-style.
 * The pointer is valid until the next fsD_add on d. Out of memory exits 3. */
fs_diag *fsD_add(fs_diags *d, fs_severity sev, const char *rule,
                 const fs_source *src, fs_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void fsD_note(fs_diag *g, const fs_source *src, fs_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void fsD_help(fs_diag *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fsD_edit(fs_diag *g, fs_loc loc, const char *text);
/* Removes from d the warnings that seen already holds (same rule and
 * message, wherever they point): a run repeats the warnings its pre-flight
 * check printed, and a user should read each once. */
void fsD_drop_repeated_warnings(fs_diags *d, const fs_diags *seen);
/* Stable sort by (source order of primary location); keeps insertion order on ties. */
void fsD_sort(fs_diags *d);

typedef struct fs_sarif fs_sarif;

/* --error-limit, as clang's -ferror-limit: text output shows the first
 * `max` errors (0: no limit) and, once they are shown, nothing more; the
 * closing line says how many more there were. JSON and SARIF carry every
 * diagnostic (their readers filter). Counts span a whole command. */
#define FS_DIAG_ERROR_LIMIT 20
typedef struct fs_diag_limit { size_t max, shown_errors, hidden_errors, hidden_warnings; } fs_diag_limit;

typedef struct fs_render_opts {
  fs_diag_format format;
  int color; /* 0/1, already resolved from --color=auto|always|never */
  fs_sarif *sarif; /* FS_DIAG_SARIF: rendering adds results here, written at the end */
  fs_diag_limit *limit; /* NULL: no limit (the REPL: each input is shown whole) */
} fs_render_opts;

/* One SARIF 2.1.0 log (one run) for a whole command: results are added as
 * diagnostics are rendered and the log is written once, at the end. The
 * ranks of a multi-rank run are processes of their own: they write their
 * diagnostics as JSON lines (with "rank"), the log has the check's.
 * describe(rule) gives a rule's description in words (NULL: none). */
fs_sarif *fsD_sarif_new(const char *tool_version, const char *(*describe)(const char *rule));
void fsD_sarif_write(FILE *out, const fs_sarif *s);
void fsD_sarif_free(fs_sarif *s);

/* The JSON lines' "version": bumped when a key changes meaning or goes
 * (docs/diagnostics.schema.json describes this one). */
#define FS_DIAG_JSON_VERSION 1

/* This process is rank `rank` of a multi-rank run: its JSON diagnostics
 * carry "rank" (-1, the default: a single process, no "rank"). */
void fsD_set_rank(int rank);
int fsD_rank(void);
/* 1-based column of offset in UTF-16 code units (LSP's and SARIF's). */
uint32_t fsD_column_utf16(const fs_source *src, uint32_t offset);

void fsD_render(FILE *out, const fs_diag *g, const fs_render_opts *opt);
void fsD_render_all(FILE *out, const fs_diags *d, const fs_render_opts *opt);

int fsD_has_errors(const fs_diags *d);

/* What a command's diagnostics add up to, for its closing line. */
typedef struct fs_diag_totals { size_t errors, warnings, fixes; } fs_diag_totals;
void fsD_count(const fs_diags *d, fs_diag_totals *t); /* adds d's to *t */
/* Text only, when there is an error or a warning: `2 errors, 1 warning;
 * fabricscript fix can apply 1 fix`; after it, when the error limit hid
 * some, one line saying how many. */
void fsD_render_totals(FILE *out, const fs_diag_totals *t, const fs_render_opts *opt);
/* 1-based line and code-point column of a byte offset, as diagnostics show
 * it: an invalid UTF-8 byte is one column. */
void fsD_position(const fs_source *src, uint32_t offset, uint32_t *line, uint32_t *column);

/* "Did you mean": the candidate closest to word by edit distance (case
 * folded, a swap of neighbours counting as one edit), within a third of
 * word's length (at least 1); NULL when none is that close. word itself is
 * never suggested; ties go to the first candidate. */
const char *fsD_closest(const char *word, const char *const *cands, size_t n);

/* src's text with the edits of every diagnostic on src applied (`fix`).
 * Edits are taken in diagnostic order; one that is out of range or overlaps
 * one already taken (intersecting ranges, an insertion inside a replaced
 * range, two insertions at one offset) is skipped. Returns a malloc'd
 * NUL-terminated buffer of *out_len bytes. */
char *fsD_apply_fixes(const fs_source *src, const fs_diags *d, size_t *out_len);
/* `diff -u`-shaped line diff (Myers, 3 lines of context) with `--- a/PATH`
 * and `+++ b/PATH` headers; prints nothing when the texts are equal. */
void fsD_print_unified_diff(FILE *out, const char *path, const char *old, size_t old_len,
                            const char *new_, size_t new_len);

#endif
