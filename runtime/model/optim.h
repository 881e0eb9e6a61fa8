/* optim.h -- SGD, Adam, AdamW with PyTorch 1.13's update rules (the
 * single-tensor, non-foreach paths), and gradient clipping as
 * torch.nn.utils.clip_grad_{norm,value}_.
 *
 * State (momentum buffer, exp_avg, exp_avg_sq, step) is per parameter and
 * created on its first step, as torch's lazily built state.  A parameter
 * whose grad is NULL is skipped, as torch skips grad None.  zero_grad uses
 * set_to_none=True (torch 2.x's default; 1.13 defaulted to False): grads are
 * freed, so the next backward allocates them zeroed; the one observable
 * difference from 1.13's default is that a parameter left without a gradient
 * is not updated (its Adam moments do not decay). */
#ifndef FS_OPTIM_H
#define FS_OPTIM_H

#include "tensor.h"

typedef enum fsO_kind { FSO_SGD, FSO_ADAM, FSO_ADAMW } fsO_kind;

typedef struct fs_optim {
  int refcount;
  fsO_kind kind;
  double lr;                          /* settable between steps */
  double momentum, dampening;         /* SGD */
  bool nesterov;                      /* SGD */
  double beta1, beta2, eps;           /* Adam, AdamW */
  double weight_decay;
  int64_t nparams;
  fs_tensor **params;                 /* held */
  fs_tensor **buf0;                   /* momentum_buffer / exp_avg; NULL until first step */
  fs_tensor **buf1;                   /* exp_avg_sq */
  int64_t *steps;                     /* per parameter, as torch's state['step'] */
} fs_optim;

/* NULL + torch's message on an invalid hyperparameter ("Invalid learning
 * rate: -0.1", "Nesterov momentum requires a momentum and zero dampening"). */
fs_optim *fsO_sgd(fs_tensor **params, int64_t n, double lr, double momentum,
                  double dampening, double weight_decay, bool nesterov);
/* Adam (decoupled = false: L2 added to the gradient) or AdamW (decoupled:
 * p *= 1 - lr * weight_decay before the update). */
fs_optim *fsO_adam(fs_tensor **params, int64_t n, bool decoupled, double lr, double beta1,
                   double beta2, double eps, double weight_decay);
fs_optim *fsO_retain(fs_optim *o);
void fsO_release(fs_optim *o);

/* Replaces the parameters of an optimizer that holds no state yet (FSDP's
 * setup swaps a model's parameters for its flat shards). -1 + fsT_error. */
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
/* clip_grad_value_: every grad element clamped to [-clip, clip]. */
void fsO_clip_grad_value(fs_tensor *const *params, int64_t n, double clip);

#endif
