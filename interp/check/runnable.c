/* runnable.c -- rule `unsupported`: in a script that will run (not a .py
 * file, which is checked and never run), every construct the evaluator
 * refuses (fsA_run_unsupported, the one list both read) and every import it
 * cannot bind (fsSig_run_importable) is an error before anything runs, so a
 * training run never stops halfway at something check accepted. Syntactic,
 * over the whole tree: a construct is reported whether or not a path
 * reaches it. Calls of torch or Lightning names the runtime does not have
 * are reported where the checker evaluates them (check.c). */
#include <stdlib.h>
#include <string.h>

#include "check_int.h"
#include "pynames.h"

static const char help_text[] =
    "the check understands it, but this runtime does not run it yet: rewrite it with what a run "
    "executes (docs/language.md, section 2), or check a Python script as a .py file, which is "
    "checked and not run";

static void report(C *c, fs_loc loc, const char *fmt, const char *what) {
  fs_diag *g = fsC_report(c, FS_SEV_ERROR, "unsupported", loc, fmt, what);
  if (g) fsD_help(g, "%s", help_text);
}

/* One node's reports. */
static void visit(C *c, const fs_node *n) {
  const char *what = fsA_run_unsupported(n);
  if (what) report(c, n->kind == FS_N_FMT && n->nkids > 1 && n->kids[1] ? n->kids[1]->loc : n->loc,
                   "%s is not supported at run time yet", what);
  if (n->kind == FS_N_IMPORT)
    for (uint32_t i = 0; i < n->nkids; i++)
      if (!fsSig_run_importable(n->kids[i]->str))
        report(c, n->kids[i]->loc, "module '%s' is not available at run time", n->kids[i]->str);
  if (n->kind == FS_N_IMPORTFROM && !what && !fsSig_run_importable(n->str))
    report(c, n->loc, "module '%s' is not available at run time", n->str);
}

/* Every node, with a stack of its own: a long flat expression is a deep tree. */
void fsC_runnable(C *c, const fs_node *root) {
  if (c->python || !root) return;
  size_t n = 0, cap = 64;
  const fs_node **stack = fsA_xrealloc(NULL, cap * sizeof *stack);
  stack[n++] = root;
  while (n) {
    const fs_node *t = stack[--n];
    visit(c, t);
    if (n + t->nkids > cap) {
      while (n + t->nkids > cap) cap *= 2;
      stack = fsA_xrealloc(stack, cap * sizeof *stack);
    }
    for (uint32_t i = t->nkids; i-- > 0;)
      if (t->kids[i]) stack[n++] = t->kids[i];
  }
  free(stack);
}
