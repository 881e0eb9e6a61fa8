/* f64_kernels.h -- the float64 kernels of a device, as one table
 * (precision="64-true"), reached from the tensor's backend:
 * fsB_of(t)->f64.
 *
 * Invariant: f64.c and optim_f64.c check, allocate and record the tape
 * once and call only through this table, so float64 runs on every device
 * that has one: the cpu (fsB_f64_cpu, f64_kernels.c: the typed kernels of
 * ops_typed.h, nn_typed.h and loss_typed.h instantiated over double, dgemm
 * from OpenBLAS), emulated cuda (backend_emu.c: the cpu table behind device
 * pointers the host cannot read) and cuda (f64_cuda.cu).  Every double and
 * int64 pointer is a device pointer of that backend; scalars come back to
 * the host as return values.  Backward kernels accumulate (+=) as nn.h's
 * do; a NULL gradient is one not needed.  Shapes follow nn.h and ops.h. */
#ifndef FS_F64_KERNELS_H
#define FS_F64_KERNELS_H

#include "backend.h"
#include "loss.h"
#include "nn.h"
#include "ops.h"

typedef struct fsB_f64_cnn fsB_f64_cnn; /* f64_cnn_kernels.h */

struct fsB_f64_kernels {
  /* row-major dgemm, as fsB_backend's gemm; -1 + fsT_error on failure */
  int (*gemm)(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
              const double *B, int64_t ldb, double beta, double *C, int64_t ldc);
  void (*axpy)(size_t n, double alpha, const double *x, double *y); /* y += alpha x */
  void (*shift)(size_t n, double v, double *y);                     /* y += v */
  void (*scale)(size_t n, double alpha, double *x);                 /* x *= alpha */
  void (*divide)(size_t n, double d, double *x);                    /* x /= d (a mean's rounding) */
  void (*clamp)(size_t n, double lo, double hi, double *x);
  /* in element order, as a host loop would add them (the bits of the cpu's) */
  double (*sum)(size_t n, const double *x);
  double (*sumsq)(size_t n, const double *x);
  double (*absmax)(size_t n, const double *x); /* the largest |x|; a NaN wins */
  /* dx[at[i]] += dy[i] in i's order (windows' and indexing's backward) */
  void (*take_backward)(int64_t n, const int64_t *at, double *dx, const double *dy);
  /* ops.h's fsU_kernels over double */
  void (*unary_forward)(fsU_unary op, size_t n, const double *x, double *y, double p0, double p1);
  void (*unary_backward)(fsU_unary op, size_t n, double *dx, const double *dy, const double *x, const double *y,
                         double p0, double p1);
  void (*binary_forward)(fsU_binary op, const fsU_bcast *bc, const double *a, const double *b, double *out);
  void (*binary_backward)(fsU_binary op, const fsU_bcast *bc, double *da, double *db, const double *dout,
                          const double *a, const double *b, const double *out);
  void (*sum_dim_forward)(int64_t O, int64_t L, int64_t I, const double *x, double *y);
  void (*sum_dim_backward)(int64_t O, int64_t L, int64_t I, double *dx, const double *dy);
  void (*softmax_forward)(bool log, int64_t O, int64_t L, int64_t I, const double *x, double *y);
  void (*softmax_backward)(bool log, int64_t O, int64_t L, int64_t I, double *dx, const double *dy,
                           const double *y);
  void (*logsumexp_forward)(int64_t O, int64_t L, int64_t I, const double *x, double *y);
  void (*logsumexp_backward)(int64_t O, int64_t L, int64_t I, double *dx, const double *dy, const double *x,
                             const double *y);
  void (*cumsum_forward)(int64_t O, int64_t L, int64_t I, const double *x, double *y);
  void (*cumsum_backward)(int64_t O, int64_t L, int64_t I, double *dx, const double *dy);
  /* nn.h's fsN_kernels over double */
  int (*linear_forward)(double *out, const double *inp, const double *W, const double *b, int64_t N, int64_t C,
                        int64_t OC);
  int (*linear_backward)(double *dinp, double *dW, double *db, const double *dout, const double *inp,
                         const double *W, int64_t N, int64_t C, int64_t OC);
  void (*act_forward)(fsN_act act, double *out, const double *inp, size_t n);
  void (*act_backward)(fsN_act act, double *dinp, const double *dout, const double *inp, const double *out,
                       size_t n);
  void (*embedding_forward)(double *out, const int64_t *idx, const double *W, int64_t N, int64_t D);
  void (*embedding_backward)(double *dW, const double *dout, const int64_t *idx, int64_t N, int64_t D);
  void (*posemb_forward)(double *out, const double *inp, const double *W, int64_t B, int64_t T, int64_t D);
  void (*posemb_backward)(double *dinp, double *dW, const double *dout, int64_t B, int64_t T, int64_t D);
  void (*layernorm_forward)(double *out, double *mean, double *rstd, const double *inp, const double *w,
                            const double *b, int64_t N, int64_t C, double eps);
  void (*layernorm_backward)(double *dinp, double *dw, double *db, const double *dout, const double *inp,
                             const double *w, const double *mean, const double *rstd, int64_t N, int64_t C);
  int (*attention_forward)(double *out, double *att, const double *inp, int64_t B, int64_t T, int64_t C,
                           int64_t NH);
  int (*attention_backward)(double *dinp, const double *dout, const double *inp, const double *att, int64_t B,
                            int64_t T, int64_t C, int64_t NH);
  double (*cross_entropy_forward)(const double *logits, const int64_t *targets, int64_t N, int64_t C);
  void (*cross_entropy_backward)(double *dlogits, const double *logits, const int64_t *targets, int64_t N,
                                 int64_t C, double dloss);
  /* torch 1.13's _single_tensor_sgd / _single_tensor_adam(w) on double
   * tensors, every quantity a double (u: hyperparameters, n, step; its
   * float pointers unused); NULL state buffers as fsB_backend's updates */
  void (*sgd_update)(const fsB_update *u, double *p, const double *g, double *buf);
  void (*adam_update)(const fsB_update *u, double *p, const double *g, double *m, double *v, double *vmax);
  /* ---- the kernels of f64_ops.c's ops (and the optimizers') ---- */
  /* ops.h's where, max/min over a dim and topk, over double */
  void (*where_forward)(const fsU_bcast *bc, const int64_t *cond, const double *a, const double *b, double *out);
  void (*where_backward)(const fsU_bcast *bc, const int64_t *cond, double *da, double *db, const double *dout);
  void (*extreme_forward)(bool want_max, int64_t O, int64_t L, int64_t I, const double *x, double *y,
                          int64_t *idx);
  void (*extreme_backward)(int64_t O, int64_t L, int64_t I, double *dx, const double *dy, const int64_t *idx);
  /* ops.h's topk over double (forward: -1 when out of memory) */
  int (*topk_forward)(bool largest, int64_t O, int64_t L, int64_t I, int64_t K, const double *x, double *y,
                      int64_t *idx);
  void (*topk_backward)(int64_t O, int64_t L, int64_t I, int64_t K, double *dx, const double *dy, const int64_t *idx);
  /* nn.h's dropout over double: the float32 mask (u(key, i) >= p), the
   * kept elements scaled by 1 / (1 - p) in double */
  void (*dropout_forward)(double *out, const double *inp, size_t n, double p, uint64_t key);
  void (*dropout_backward)(double *dinp, const double *dout, size_t n, double p, uint64_t key);
  /* loss.h's elementwise losses over double (param: beta, delta, log_target;
   * pw: BCE_LOGITS' pos_weight [n_pw] over the last dim, or NULL) */
  void (*ploss_forward)(fsN_ploss op, double param, const double *pw, int64_t n_pw, double *out, const double *x,
                        const double *y, size_t n);
  void (*ploss_backward)(fsN_ploss op, double param, const double *pw, int64_t n_pw, double *dx, double *dy,
                         const double *g, const double *x, const double *y, size_t n);
  /* torch 1.13's _single_tensor_rmsprop (sq, ga: grad_avg, buf: momentum),
   * _single_tensor_adagrad (u->lr: clr) and _single_tensor_adadelta on double */
  void (*rmsprop_update)(const fsB_update *u, double *p, const double *g, double *sq, double *ga, double *buf);
  void (*adagrad_update)(const fsB_update *u, double *p, const double *g, double *sum);
  void (*adadelta_update)(const fsB_update *u, double *p, const double *g, double *sq, double *acc);
  /* convolutions, pooling, batch/group/RMS norm; NULL: none on this device */
  const fsB_f64_cnn *cnn;
};

extern const fsB_f64_kernels fsB_f64_cpu;

#endif
