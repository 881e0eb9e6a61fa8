/* fsdp.h -- FSDP full shard of a module tree over a communicator
 * (docs/distributed.md, "How DDP and FSDP use it").
 *
 * Wrapped units: each child of a Sequential root, each copy of a top-level
 * repeat on its own; for a script class's root (FSM_CUSTOM) each child,
 * each module of a top-level ModuleList/ModuleDict, and each of the root's
 * own parameters; any other root is one unit.  A unit's parameters, in
 * state-dict order, make one flat parameter of n elements padded to
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
 * gathered at a time. */
#ifndef FS_FSDP_H
#define FS_FSDP_H

#include "comm.h"
#include "module.h"

typedef struct fsSH_unit {
  fs_module *m;          /* borrowed from the root */
  fsM_param *ps;         /* its parameters (full state-dict names): a slice of the root's */
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
  fsM_param *all; int64_t nall;  /* the root's parameters */
  fsSH_unit *units; int nunits;
  fs_module **steps; int *step_unit; int nsteps; /* forward order; unit index or -1 (no parameters) */
  int pending;           /* the unit whose gradient awaits its reduce-scatter, or -1 */
} fsSH_model;

/* Shards root (held) on dev: a parameter still on meta is initialized for
 * this rank's slice only (fsM_init_param: the same values as on one
 * device); one with values is copied, then its storage freed.  Dropout keys
 * are set as fsM_materialize sets them.  NULL + fsT_error on failure. */
fsSH_model *fsSH_wrap(fs_module *root, fsCC_comm *comm, fs_device dev, uint64_t seed);
void fsSH_free(fsSH_model *s);
/* model.reset_parameters(): every shard from its parameters' rules again. */
int fsSH_reset_parameters(fsSH_model *s, uint64_t seed);

/* model(x) with the gathers and hooks above; a new reference or NULL. */
fs_tensor *fsSH_forward(fsSH_model *s, fs_tensor *x);
/* A script class's root runs its own forward (the evaluator's): fsSH_begin
 * before it gathers the root's own parameters (with gradients, for the
 * whole step); each call of a unit module m (m->shard == s) is bracketed by
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

/* The units root would be wrapped into: *out gets their sizes (elements,
 * malloc'd); returns the count or -1 (out of memory).  For `plan`. */
int fsSH_unit_sizes(fs_module *root, int64_t **out);

/* Where parameter i (0 <= i < nall) lies in this rank's shard: elements
 * [*first, *first + *count) of the parameter are at shard + *at of its
 * unit's flat tensor (*count 0: none here); returns the unit index. */
int fsSH_param_slice(const fsSH_model *s, int64_t i, int64_t *first, int64_t *count, int64_t *at);

#endif
