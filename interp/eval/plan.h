/* plan.h -- `fabricscript plan`: what each rank holds for a model under a
 * strategy and a precision, computed from shapes only (the model stays on
 * meta), and whether that fits a GPU.
 *
 * Per rank, with N parameters, element sizes from the precision (fsPL_sizes:
 * parameters p, gradients g, optimizer states s, activations a) and k
 * optimizer states per element (SGD 0, SGD with momentum 1, Adam and AdamW
 * 2):
 *   single device, DDP: parameters p*N (+ 2*N under *-mixed: autocast's
 *     low-precision copies of the weights), gradients g*N, optimizer s*k*N;
 *   FSDP over W ranks, units u of n_u elements (fsdp.h): shard_u =
 *     ceil(n_u / W), S = sum of shard_u; parameters p*S, gradients g*S,
 *     optimizer s*k*S; gathered: the largest unit's parameters and
 *     gradients while its backward runs, (p' + g') * W * max shard_u (p' =
 *     g' = the low type under *-mixed: FSDP's mixed-precision gather);
 *   activations (plan_act.c): what the runtime keeps for backward, per layer
 *     kind, for the per-rank input shape, plus the activation gradients
 *     alive at once during backward (per distinct size: the cpu allocator
 *     reuses blocks by exact size) and the largest scratch of one backward
 *     (attention's, a convolution's im2col); with activation checkpointing of every
 *     FSDP unit only the units' outputs stay, plus one unit's recomputed
 *     activations.
 * The total is their sum: everything is alive at the end of a backward once
 * the optimizer holds its states.  The program itself (code, libraries, the
 * data set) is not counted.  The rule that governs this file: every figure
 * is derived from what the runtime allocates (autograd.c's saved tensors,
 * optim.c's states, fsdp.c's units), so scripts/bench-memory can hold it to
 * the measured peak; the other half lives in docs/distributed.md ("Memory
 * plan"). */
#ifndef FS_PLAN_H
#define FS_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "module.h"

/* Bytes per element of each kind of state, as a precision gives them. */
typedef struct fsPL_sizes {
  int param, grad, state;  /* parameters, gradients, optimizer states */
  int act_low;             /* outputs of matrix products (linear, attention) */
  int act_high;            /* outputs of normalizations and embeddings */
  bool autocast;           /* *-mixed: float32 weights, low-precision copies while computing */
} fsPL_sizes;
/* The sizes of a precision name ("32-true", "bf16-mixed", "16", ...); -1 when unknown. */
int fsPL_precision_sizes(const char *precision, fsPL_sizes *out);
/* Whether the runtime executes this precision on that accelerator and
 * strategy class (all but R70's: 64-true other than on one device or
 * DDP, 16-mixed off CUDA or under DeepSpeed, Transformer Engine;
 * ModelParallel's is Fabric's R12); the
 * figures are torch's layout either way. */
bool fsPL_precision_runs(const char *precision, const char *accelerator, const char *strategy);

/* Activations for one input shape (plan_act.c). */
typedef struct fsPL_acts {
  uint64_t saved;        /* kept for backward, the input batch included */
  uint64_t transient;    /* activation gradients alive at once in backward, and scratch */
  uint64_t ckpt_saved;   /* with checkpointing: the units' outputs and what
                            the layers between units keep */
  uint64_t ckpt_unit;    /* ... plus the largest unit's recomputed activations */
} fsPL_acts;
/* m's activations for an input of shape in[0..rank) whose elements have
 * in_bytes bytes (8: token ids).  -1 with a message in err when a layer has
 * no activation model or the shape does not fit (PyTorch's words). */
int fsPL_activations(const fs_module *m, int rank, const int64_t *in, int in_bytes,
                     const fsPL_sizes *sz, fsPL_acts *out, char *err, size_t errlen);

/* What `plan` is asked beyond the script (command-line options). */
typedef enum fsPL_format { FSPL_TEXT, FSPL_JSON } fsPL_format;
typedef struct fsPL_options {
  fsPL_format format;
  int64_t batch_size;      /* --batch-size: the per-rank batch; 0: the script's */
  int64_t context;         /* --context: the sequence length; 0: the script's */
  uint64_t gpu_bytes;      /* --gpu-memory; 0: no fit check */
  char gpu_name[32];       /* "H100" when given by name, else "" */
} fsPL_options;
/* --gpu-memory's value: "80GiB", "80GB", "40G", "1024MiB", a plain number of
 * bytes, or a GPU name of the table (H100, A100-40GB, ...; any case).  -1
 * when it is none of these. */
int fsPL_parse_gpu_memory(const char *text, fsPL_options *o);

typedef struct fsPL_input {
  const char *strategy, *accelerator, *precision; /* names as resolved */
  int world, devices, num_nodes; /* ranks = devices per node x nodes */
  bool sharded;               /* FSDP */
  fs_module *model;           /* on meta */
  const struct fsSH_policy *policy; /* FSDP's auto_wrap_policy, or NULL (runtime/dist/fsdp.h) */
  const char *model_class;
  const char *optimizer;      /* "Adam", or NULL: none set up */
  int states;                 /* k */
  /* the per-rank input: the script's first call of the model, else built
   * from --batch-size/--context; in_rank 0: unknown (no activations) */
  int in_rank;
  int64_t in_shape[8];
  int in_bytes;               /* element size of the input (8: token ids) */
  const char *in_source;      /* "the script's first call of the model", ... */
} fsPL_input;

typedef struct fsPL_rank {
  uint64_t params, grads, optim, gathered, acts, acts_ckpt, total, total_ckpt;
  bool acts_known;
} fsPL_rank;

/* Rank r's bytes.  -1 + fsT_error (out of memory, unknown precision). */
int fsPL_rank_bytes(const fsPL_input *in, int r, fsPL_rank *out);
/* The whole plan in o->format: a header, one line per distinct rank layout,
 * the total over ranks, the fit against o->gpu_bytes with the smallest
 * change that fits.  -1 + fsT_error. */
int fsPL_print(FILE *out, const fsPL_input *in, const fsPL_options *o);

#endif
