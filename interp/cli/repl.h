/* repl.h -- the interactive session: libedit line editing, multi-line
 * blocks, history, completion, and each statement checked against everything
 * entered before it, then run. */
#ifndef FS_REPL_H
#define FS_REPL_H

#include <stdio.h>
#include "ast.h"
#include "diag.h"

/* What the session does with a statement: the pipeline behind the REPL. */
typedef struct fsRP_engine {
  void *ud;
  /* Check the whole session text `src` (already parsed to `ast`); append the
   * diagnostics to diags. */
  void (*check)(void *ud, const fs_source *src, const fs_node *ast, fs_diags *diags);
  /* Run the statements stmts[0..n) of `src` in the persistent session,
   * printing the value of an expression statement. Returns 0, or non-zero
   * after reporting a run-time error (the session goes on). */
  int (*exec)(void *ud, const fs_source *src, fs_node *const *stmts, size_t n, fs_diags *diags);
  /* Print the per-rank memory plan of the whole session (`fabricscript plan`). */
  void (*plan)(void *ud, const fs_source *src, const fs_node *ast, fs_diags *diags);
} fsRP_engine;

typedef struct fsRP_options {
  fs_render_opts render;
  const fsRP_engine *engine;
  const char *history_path; /* NULL: ~/.fabricscript_history */
} fsRP_options;

/* Runs the session on the terminal until :quit or Ctrl-D; returns the exit status. */
int fsRP_main(const fsRP_options *opt);

/* --- pure helpers, exposed for tests ------------------------------------- */

/* Whether `text` (the lines of one entry so far) needs more lines: open
 * brackets, a trailing backslash, or a block header not yet ended by a
 * blank line. */
int fsRP_needs_more(const char *text, int last_line_blank);

#endif
