/* fsdp.h -- FSDP full shard of a module tree over a communicator
 * (docs/distributed.md, "How DDP and FSDP use it").
 *
 * Wrapped units (fsSH_layout_of, the one choice `plan` and the run share):
 * each child of a Sequential root, each copy of a top-level repeat on its
 * own; any other declared root is one unit.  A script class's root
 * (FSM_CUSTOM): without a policy each child, each module of a top-level
 * ModuleList/ModuleDict, and each of the root's own parameters; with an
 * auto_wrap_policy each module it wraps as torch's _recursive_wrap would,
 * at any depth (the outermost one where they nest: a unit holds everything
 * under it, where torch would nest a unit in a unit), and the root's unit
 * with the rest (embeddings, final norm, head).  A parameter two units
 * hold (weight tying across units) also goes to the root's unit.  The
 * root's unit and the root's own parameters are "held": gathered, with
 * their gradients, from the start of the forward to the end of the
 * backward, as torch keeps its root FSDP unit unsharded.  A unit's
 * parameters, in state-dict order, make one flat parameter of n elements padded to
 * fsCC_padded(n, world); this rank owns the shard [rank * shard, (rank + 1)
 * * shard), a float32 tensor that requires grad: it is what parameters()
 * gives the optimizer, so gradients and optimizer states exist for the shard
 * only.  The module's own parameter tensors keep their shapes and have no
 * storage except while their unit is gathered: then they point into the
 * gathered flat buffer (a view of it).
 *
 * forward: per unit, all-gather, run it, release the gathered buffer; its
 * output carries a tape hook (fsG_hook) that gathers it again, with a zeroed
 * flat gradient the parameters' grads point into, just before its backward.
 * The next hook (or fsSH_backward_done) reduce-scatters (mean) that
 * gradient into the shard's grad and releases the unit: at most one unit is
 * gathered at a time.  With reduce_dtype float16 (16-mixed: MixedPrecision's
 * reduce_dtype) the mean is torch's in that type: the gradient rounded to
 * it, divided by the predivide factor, summed, divided by the rest of the
 * world size, each result rounded. */
#ifndef FS_FSDP_H
#define FS_FSDP_H

#include "comm.h"
#include "module.h"

/* An auto_wrap_policy, torch's protocol (torch.distributed.fsdp.wrap):
 * wraps(m, recurse=true, n) asks whether to look for units inside m (n: its
 * parameters' elements), wraps(m, false, n) whether m is a unit itself (n:
 * its elements outside the units found inside it); 1 yes, 0 no, -1 +
 * fsT_error when the test fails (the evaluator's: isinstance against the
 * policy's classes, or a script's callable policy). */
typedef struct fsSH_policy {
  int (*wraps)(fs_module *m, bool recurse, int64_t nonwrapped_numel, void *ud);
  void *ud;
} fsSH_policy;

/* The units root is wrapped into. */
typedef struct fsSH_layout {
  fsM_param *all; int64_t nall; /* the root's parameters (state-dict order) */
  int *unit;                    /* all[i]'s unit */
  fs_module **m;                /* unit k's module (the root for the root's unit) */
  bool *held;                   /* unit k is gathered for the whole step */
  int64_t *numel;               /* unit k's elements */
  int n;
} fsSH_layout;
/* policy NULL: no auto_wrap_policy (it applies to script class roots
 * only).  -1 + fsT_error (a declared model's parameter tied across units,
 * a failed policy test, out of memory); free with fsSH_layout_free. */
int fsSH_layout_of(fs_module *root, const fsSH_policy *policy, fsSH_layout *out);
void fsSH_layout_free(fsSH_layout *l);
/* The most elements gathered at once on world ranks: the held units
 * (padded) plus the largest other one. */
int64_t fsSH_layout_gathered(const fsSH_layout *l, int world);

typedef struct fsSH_unit {
  fs_module *m;          /* borrowed from the root */
  bool held;             /* gathered for the whole step (fsSH_begin .. fsSH_backward_done) */
  fsM_param *ps;         /* its parameters (copies of the layout's entries), in state-dict order */
  int64_t np;
  int64_t *off;          /* ps[i]'s first element in the flat parameter */
  int64_t n, shard;      /* elements; per rank (padded = shard * world) */
  fs_tensor *flat;       /* [shard] this rank's slice; requires grad */
  fs_tensor *full, *gfull; /* gathered parameter and gradient [padded], or NULL */
} fsSH_unit;

typedef struct fsSH_model {
  fs_module *root;       /* held */
  fsCC_comm *comm;       /* borrowed; NULL: one rank */
  int rank, world;
  fs_device dev;
  fsSH_layout layout;
  fsM_param *all; int64_t nall;  /* the root's parameters: the layout's */
  int64_t *pos;                  /* all[i] is units[layout.unit[i]].ps[pos[i]] */
  fsSH_unit *units; int nunits;
  fs_module **steps; int *step_unit; int nsteps; /* forward order; unit index or -1 (no parameters) */
  int pending;           /* the unit whose gradient awaits its reduce-scatter, or -1 */
  fs_dtype reduce_dtype; /* FS_F32 (fsSH_wrap's), or FS_F16: the type gradients are reduced in */
  int64_t gathered, gathered_peak; /* bytes of gathered parameters and gradients: now, the most so far */
} fsSH_model;

/* Shards root (held) on dev: a parameter still on meta is initialized for
 * this rank's slice only (fsM_init_param: the same values as on one
 * device); one with values is copied, then its storage freed.  Dropout keys
 * are set as fsM_materialize sets them.  NULL + fsT_error on failure. */
fsSH_model *fsSH_wrap(fs_module *root, const fsSH_policy *policy, fsCC_comm *comm, fs_device dev, uint64_t seed);
void fsSH_free(fsSH_model *s);
/* model.reset_parameters(): every shard from its parameters' rules again. */
int fsSH_reset_parameters(fsSH_model *s, uint64_t seed);

/* model(x) with the gathers and hooks above; a new reference or NULL. */
fs_tensor *fsSH_forward(fsSH_model *s, fs_tensor *x);
/* A script class's root runs its own forward (the evaluator's): fsSH_begin
 * before it gathers the held units (with gradients, for the whole step);
 * each call of a unit module m (m->shard == s) is bracketed by
 * fsSH_enter(s, m->shard_unit) and fsSH_leave, which releases the gathered
 * unit and returns the unit's output out (borrowed) behind the tape hook
 * that gathers it again for its backward (a new reference; NULL stays NULL).
 * -1 / NULL + fsT_error. */
int fsSH_begin(fsSH_model *s);
int fsSH_enter(fsSH_model *s, int k);
fs_tensor *fsSH_leave(fsSH_model *s, int k, fs_tensor *out);
/* After fsG_backward: the last pending unit's reduce-scatter; on a failed
 * backward it only releases what is gathered.  -1 + fsT_error. */
int fsSH_backward_done(fsSH_model *s, bool ok);

/* Where parameter i (0 <= i < nall) lies in this rank's shard: elements
 * [*first, *first + *count) of the parameter are at shard + *at of its
 * unit's flat tensor (*count 0: none here); returns the unit index. */
int fsSH_param_slice(const fsSH_model *s, int64_t i, int64_t *first, int64_t *count, int64_t *at);

#endif
