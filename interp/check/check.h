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

/* What the checker knows of one expression or assigned name, for an
 * editor's hover and completion: point fsC_options.query at one with span
 * set; the check fills the rest (query.c). A span the check never evaluates
 * (dead code, a syntax error before it) leaves found 0. */
typedef struct fsC_query {
  fs_loc span;       /* in: the expression's or assigned name's exact span */
  int found;         /* out: the check evaluated it */
  char type[64];     /* out: its type for members ("Fabric", "Module", ...), "" if not known */
  char builtin[64];  /* out: the builtin row it is ("Fabric", "zeros", "math"), "" if none */
  char ns[128];      /* out: the torch/lightning namespace it is, not modelled ("torch.nn"), "" if none */
  char about[512];   /* out: what is known of it, in words ("GPT — parameters on ..."), "" if nothing */
} fsC_query;

typedef struct fsC_options {
  fsF_machine machine;       /* the target: fsF_machine_detect(), then --gpus/--assume */
  /* pre-flight: where `machine` lacks what a Fabric(...) declares (GPUs,
   * DeepSpeed, XLA, ...), resolve for the declared machine and say so in one
   * note (check, plan, the REPL; not a run, not --here/--gpus/--assume) */
  int preflight;
  fsF_overrides overrides;   /* --accelerator --strategy --devices --num-nodes --precision */
  const char *const *defines;/* -D values as given: "name=value" */
  size_t ndefines;
  /* The evaluation budget (--check-budget=SECONDS[,BYTES]); 0: the default,
   * FSC_BUDGET_SECONDS and FSC_BUDGET_BYTES. A check that spends it stops
   * analysing and says where (warning[budget]): check always ends. */
  double budget_seconds;
  size_t budget_bytes;
  fsC_query *query;          /* NULL, or the one expression to describe (query.c) */
  /* the script is going to be run by this runtime (check, run, fix, the
   * REPL; not `plan`, which sizes any target): rule `unsupported` for what
   * it cannot run of a Fabric(...) configuration (fsF_check_runnable) */
  int will_run;
  /* --here: the script runs on this machine, so the files its strategy
   * objects read when created (a DeepSpeed config, R95) are checked here */
  int files_here;
} fsC_options;

#define FSC_BUDGET_SECONDS 10.0
#define FSC_BUDGET_BYTES ((size_t)1 << 30)

/* Parses --check-budget's value, SECONDS[,BYTES] (BYTES: a count with an
 * optional unit K, M, G, KiB, MiB, GiB, KB, MB, GB). -1 with *err set. */
int fsC_parse_budget(fsC_options *o, const char *text, const char **err);

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
