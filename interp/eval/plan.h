/* plan.h -- `fabricscript plan`: what each rank holds for a model under a
 * strategy, computed from shapes only (the model stays on meta).
 *
 * Per rank, with N parameters, w bytes per parameter element (4 for 32-true
 * and the mixed precisions, 2 for bf16-true and 16-true, 8 for 64-true) and
 * k optimizer states per element (SGD 0, SGD with momentum 1, Adam and
 * AdamW 2; float32):
 *   single device, DDP: parameters w*N, gradients 4*N, optimizer 4*k*N;
 *   FSDP over W ranks, units u of n_u elements (fsdp.h):
 *     shard_u = ceil(n_u / W); parameters w*S, gradients 4*S, optimizer
 *     4*k*S with S = sum of shard_u; gathered: the largest unit's parameters
 *     and gradients while its backward runs, (w + 4) * W * max shard_u.
 * Activations and the data are not counted (as DeepSpeed's
 * estimate_zero3_model_states_mem_needs and accelerate's estimate-memory). */
#ifndef FS_PLAN_H
#define FS_PLAN_H

#include <stdbool.h>
#include <stdio.h>
#include "module.h"

typedef struct fsPL_input {
  const char *strategy, *accelerator, *precision; /* names as resolved */
  int world;                  /* ranks */
  bool sharded;               /* FSDP */
  int param_bytes;            /* w */
  fs_module *model;           /* on meta */
  const char *model_class;
  const char *optimizer;      /* "Adam", or NULL: none set up */
  int states;                 /* k */
} fsPL_input;

typedef struct fsPL_rank { uint64_t params, grads, optim, gathered, total; } fsPL_rank;

/* One rank's bytes (every rank holds the same). -1 + fsT_error (out of memory). */
int fsPL_rank_bytes(const fsPL_input *in, fsPL_rank *out);
/* The table: a header line, then one line per rank. -1 + fsT_error. */
int fsPL_print(FILE *out, const fsPL_input *in);

#endif
