/* optim.h -- SGD, Adam, AdamW, RMSprop, Adagrad and Adadelta with PyTorch 1.13's
 * update rules (the single-tensor `_single_tensor_*` paths, foreach=False,
 * the default there), in parameter groups, and gradient clipping as
 * torch.nn.utils.clip_grad_{norm,value}_.
 *
 * Parameter groups are torch's param_groups: each group has its own
 * hyper-parameters (fsO_hyper, torch's keys) and a run of the optimizer's
 * parameters; a parameter belongs to one group.  Hyper-parameters are
 * settable between steps (a scheduler writes lr).  The arithmetic is torch's
 * element by element: Python-float scalars (bias corrections, step sizes)
 * in double, rounded to float where torch passes them to a kernel, and a
 * fused multiply-add where torch's CPU kernels fuse one (add with alpha,
 * addcmul); backend_cpu.c says which, and tests/parity checks the result.
 *
 * State is per parameter, torch's state[p], created on its first step as
 * torch's lazily built state: buf0/buf1/buf2 hold the buffers that
 * fsO_state_name names for the optimizer's kind.  A parameter whose grad is
 * NULL is skipped, as torch skips grad None.  zero_grad uses set_to_none=True
 * (torch 2.x's default; 1.13 defaulted to False): grads are freed, so the
 * next backward allocates them zeroed; the one observable difference from
 * 1.13's default is that a parameter left without a gradient is not updated
 * (its Adam moments do not decay).  Adagrad creates its `sum` at the first
 * step too (torch: at construction), filled with initial_accumulator_value. */
#ifndef FS_OPTIM_H
#define FS_OPTIM_H

#include "backend.h" /* fsB_update */
#include "tensor.h"

typedef enum fsO_kind { FSO_SGD, FSO_ADAM, FSO_ADAMW, FSO_RMSPROP, FSO_ADAGRAD, FSO_ADADELTA } fsO_kind;

/* One group's hyper-parameters; each kind reads the fields torch's class has. */
typedef struct fsO_hyper {
  double lr, weight_decay;
  double momentum, dampening;                 /* SGD; momentum also RMSprop */
  bool nesterov;                              /* SGD */
  double beta1, beta2;                        /* Adam, AdamW */
  bool amsgrad;                               /* Adam, AdamW */
  double eps;                                 /* Adam, AdamW, RMSprop, Adagrad, Adadelta */
  double alpha;                               /* RMSprop */
  bool centered;                              /* RMSprop */
  double lr_decay, initial_accumulator_value; /* Adagrad */
  double rho;                                 /* Adadelta */
  bool maximize;
} fsO_hyper;

typedef struct fsO_group {
  fsO_hyper h;
  int64_t first, n; /* its parameters: params[first .. first + n) */
} fsO_group;

typedef struct fs_optim {
  int refcount;
  fsO_kind kind;
  int64_t ngroups;
  fsO_group *groups;
  int64_t nparams;
  fs_tensor **params;                 /* held, group after group */
  fs_tensor **buf0, **buf1, **buf2;   /* state buffers (fsO_state_name); NULL until needed */
  int64_t *steps;                     /* per parameter, as torch's state['step'] */
  bool unscaled, found_inf;           /* a GradScaler's per-optimizer state (grad_scaler.c) */
} fs_optim;

/* torch 1.13's defaults for kind (SGD's lr is required: NAN here). */
fsO_hyper fsO_defaults(fsO_kind kind);
/* 0, or -1 + torch's ValueError message for an invalid hyper-parameter
 * ("Invalid learning rate: -0.1", "Nesterov momentum requires a momentum and
 * zero dampening"). */
int fsO_check(fsO_kind kind, const fsO_hyper *h);
/* The name torch gives state buffer `which` (0..2) of kind, or NULL when the
 * kind has no such buffer: SGD momentum_buffer; Adam(W) exp_avg, exp_avg_sq,
 * max_exp_avg_sq; RMSprop square_avg, momentum_buffer, grad_avg; Adagrad sum;
 * Adadelta square_avg, acc_delta. */
const char *fsO_state_name(fsO_kind kind, int which);

/* How many state buffers of a parameter's size a step keeps (the most over
 * the groups): SGD 0 or 1, Adam(W) 2 or 3 (amsgrad), RMSprop 1 to 3, Adagrad 1,
 * Adadelta 2. */
int fsO_state_buffers(const fs_optim *o);

/* An optimizer with one group of params (torch's Optimizer(params, ...));
 * NULL + fsT_error on an invalid h or an empty list. */
fs_optim *fsO_new(fsO_kind kind, fs_tensor *const *params, int64_t n, const fsO_hyper *h);
/* add_param_group: -1 + fsT_error (torch's words) when h is invalid, the
 * list is empty or a parameter is already in a group. */
int fsO_add_group(fs_optim *o, fs_tensor *const *params, int64_t n, const fsO_hyper *h);
fs_optim *fsO_retain(fs_optim *o);
void fsO_release(fs_optim *o);

/* Replaces the parameters of a one-group optimizer that holds no state yet
 * (FSDP's setup swaps a model's parameters for its flat shards).
 * -1 + fsT_error. */
int fsO_replace_params(fs_optim *o, fs_tensor *const *params, int64_t n);
int fsO_step(fs_optim *o);          /* -1 + fsT_error (a parameter on meta, OOM) */
void fsO_zero_grad(fs_optim *o);    /* set_to_none */

/* clip_grad_norm_: total norm of all grads (norm_type 2 or INFINITY),
 * grads scaled by min(1, max_norm / (total + 1e-6)).  Returns 0 and the
 * total norm in *total, or -1 + fsT_error for another norm_type. */
int fsO_clip_grad_norm(fs_tensor *const *params, int64_t n, double max_norm,
                       double norm_type, double *total);
/* The same over grads sharded across ranks (FSDP): combine(ud, acc, inf)
 * turns this rank's sum of squared norms (inf: its largest magnitude) into
 * the global one, e.g. an all-reduce SUM (MAX); -1 + fsT_error stops. */
typedef int (*fsO_combine)(void *ud, float *acc, bool inf);
int fsO_clip_grad_norm_with(fs_tensor *const *params, int64_t n, double max_norm, double norm_type,
                            fsO_combine combine, void *ud, double *total);
/* clip_grad_value_: every grad element clamped to [-clip, clip]; -1 +
 * fsT_error (out of memory widening a low-precision gradient). */
int fsO_clip_grad_value(fs_tensor *const *params, int64_t n, double clip);

/* optim_f64.c: one float64 parameter's update (p, its gradient g and the
 * states s[0..2] in fsO_state_name's order, NULL where unused, all double
 * arrays of backend be, which computes it) under u's hyperparameters (u's
 * float pointers unused); -1 + fsT_error for an optimizer without a double
 * rule. */
int fsO_update_f64(const fsB_update *u, const fsB_backend *be, double *p, const double *g, double *const *s);
/* Whether any of params has a float64 gradient; clipping them (unsharded:
 * 64-true runs on one device or under DDP) in double on their devices, as
 * the fsO_clip_* functions do, which call these. */
bool fsO_grads_f64(fs_tensor *const *params, int64_t n);
int fsO_clip_norm_f64(fs_tensor *const *params, int64_t n, double max_norm, bool inf, double *total);
int fsO_clip_value_f64(fs_tensor *const *params, int64_t n, double clip);

/* grad_scaler.c: torch.cuda.amp.GradScaler (16-mixed), with torch's
 * defaults (init_scale 65536, growth 2.0 every 2000 clean steps, backoff
 * 0.5).  The loss is multiplied by scale before backward; unscale_
 * multiplies every gradient of o by 1/scale and notes inf/NaN among them
 * (-1 + fsT_error when called twice before update, or on a low-precision
 * gradient, as torch); step unscales unless done, then steps o unless a
 * gradient was not finite (*stepped says which); update backs off or grows
 * the scale and clears o's per-step state.
 * fsO_scaler_shard makes it torch's ShardedGradScaler (FSDP): o holds this
 * rank's shards only, so unscale_ sums the found-inf flag over the process
 * group with any_rank(ud, &flag, false) (an all-reduce SUM, a collective:
 * every rank unscales at the same points) and all ranks skip together. */
typedef struct fsO_scaler {
  float scale, growth_factor, backoff_factor;
  int64_t growth_interval, growth_tracker;
  fsO_combine any_rank; /* NULL: GradScaler; else ShardedGradScaler's all-reduce */
  void *ud;
} fsO_scaler;
void fsO_scaler_init(fsO_scaler *s);
void fsO_scaler_shard(fsO_scaler *s, fsO_combine any_rank, void *ud);
int fsO_scaler_unscale(fsO_scaler *s, fs_optim *o);
int fsO_scaler_step(fsO_scaler *s, fs_optim *o, bool *stepped);
void fsO_scaler_update(fsO_scaler *s, fs_optim *o);

#endif
