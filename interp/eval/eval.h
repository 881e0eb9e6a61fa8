/* eval.h -- the tree-walking evaluator: runs a parsed script.
 *
 * Run-time errors become diagnostics (rule "runtime") at the failing
 * construct, with a `note:` per active call; the run stops at the first. */
#ifndef FS_EVAL_H
#define FS_EVAL_H

#include <signal.h>
#include <stdio.h>
#include "ast.h"
#include "diag.h"
#include "fabric.h"
#include "signatures.h"
#include "value.h"

typedef struct fsE_options {
  const char *const *defines; size_t ndefines; /* "-D name=value" texts, in order */
  /* `fabric run`-style overrides (--accelerator ...), NULL where not given */
  const char *accelerator, *strategy, *devices, *num_nodes, *precision;
  FILE *out;                                   /* print() output; stdout when NULL */
  /* the machine Fabric(...) resolves against, the check's (--gpus, --assume);
   * NULL: this machine (fsF_machine_detect) */
  const fsF_machine *machine;
  bool emulate_cuda;                           /* --emulate-cuda: accelerator cuda on fsB_cpu */
  /* plan: Fabric(...) resolves for the machine the script declares where
   * this one lacks it (fsF_declared_machine), as the check did */
  bool preflight;
  /* where a loop over a data loader shows its progress (rank 0): in place
   * on a terminal, else plain lines every progress_interval seconds
   * (progress.h); NULL: nowhere */
  FILE *progress;
  double progress_interval;
  /* `fabricscript plan`: nothing is materialized; the first call of the
   * set-up model (or the first use of its values: save, load, backward, or
   * the end of the script) prints the plan (plan.h) here and stops the run;
   * launch() starts no ranks */
  FILE *plan;
  const struct fsPL_options *plan_options; /* plan.h; NULL: text, the script's batch, no fit check */
} fsE_options;

/* Runs the script. Returns 0 ok, 1 the script failed (diagnostic added),
 * 2 a -D value does not parse for its param() (usage error), 3 system
 * failure (out of memory). (An unused -D name is the checker's warning.) */
int fsE_run(const fs_source *src, const fs_node *ast, const fsE_options *opt, fs_diags *diags);

/* A persistent run for the REPL: entries execute one after another in the
 * same globals. fsE_session_exec runs stmts[0..n) of src (src may grow from
 * entry to entry, as the REPL's session text does) and, with echo, prints
 * the repr of an expression statement's value unless it is None. Returns as
 * fsE_run; the session survives a failed entry. */
typedef struct fsE_session fsE_session;
fsE_session *fsE_session_new(const fsE_options *opt); /* NULL: out of memory */
int fsE_session_exec(fsE_session *S, const fs_source *src, fs_node *const *stmts, size_t n,
                     fs_diags *diags, int echo);
void fsE_session_free(fsE_session *S);

/* Set from a signal handler (Ctrl-C in the REPL): a running loop stops at
 * its next iteration with a "KeyboardInterrupt" error. */
extern volatile sig_atomic_t fsE_interrupt;

#endif
