/* check.h -- the static checker: an abstract interpreter over the AST that
 * tracks every Fabric object's state (fabric.h) along each path and reports
 * Fabric's rules, name/call/type errors and layer shape mismatches before
 * anything runs. It has no side effects: no tensors, no files, no processes. */
#ifndef FS_CHECK_H
#define FS_CHECK_H

#include <stddef.h>
#include "ast.h"
#include "diag.h"
#include "fabric.h"

typedef struct fsC_options {
  fsF_machine machine;       /* the target: fsF_machine_detect(), then --gpus/--assume */
  /* pre-flight: where `machine` lacks what a Fabric(...) declares (GPUs,
   * DeepSpeed, XLA, ...), resolve for the declared machine and say so in one
   * note (check, plan, the REPL; not a run, not --here/--gpus/--assume) */
  int preflight;
  fsF_overrides overrides;   /* --accelerator --strategy --devices --num-nodes --precision */
  const char *const *defines;/* -D values as given: "name=value" */
  size_t ndefines;
  /* the script is going to be run by this runtime (check, run, fix, the
   * REPL; not `plan`, which sizes any target): rule `unsupported` for what
   * it cannot run of a Fabric(...) configuration (fsF_check_runnable) */
  int will_run;
} fsC_options;

/* This machine, no overrides, no -D. */
void fsC_options_init(fsC_options *o);

/* Parses one command-line argument the checker owns (fsF_parse_arg's set).
 * Returns the arguments consumed (1 or 2), 0 if not ours, -1 on a bad value
 * with *err set. */
int fsC_parse_arg(fsC_options *o, const char *arg, const char *next, const char **err);

/* Checks a parsed script; appends diagnostics (all of them, in source order
 * once the caller runs fsD_sort). Returns the number of errors added. */
int fsC_check(const fs_source *src, const fs_node *ast, const fsC_options *o, fs_diags *d);

#endif
