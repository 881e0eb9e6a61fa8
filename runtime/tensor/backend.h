/* backend.h -- what a device must provide, as one function table (ggml-style).
 *
 * Tensors reach their device's table with fsB_of(t); layers, autograd and
 * optimizers call only through it, so a CUDA backend (or a sharded-parameter
 * one) is a new table, not new layer code.  All float pointers are device
 * pointers of that backend; sizes are element counts unless named nbytes. */
#ifndef FS_BACKEND_H
#define FS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nn.h"
#include "tensor.h"

typedef struct fsU_kernels fsU_kernels; /* ops.h: the tensor API's kernels */
typedef struct fsB_f64_kernels fsB_f64_kernels; /* f64_kernels.h: float64's (64-true) */

typedef enum fsB_binop { FSB_ADD, FSB_SUB, FSB_MUL, FSB_DIV } fsB_binop;

/* Elementwise kernels that load and store bfloat16/float16 themselves
 * (optional, fsB_backend.low; autograd.c's direct low paths call them).
 * Types are FS_F32, FS_BF16 or FS_F16; the arithmetic is the cpu's direct
 * path's (autograd_int.h's FSG_LOW_BLOCK): the float32 op on the widened
 * values, rounded once (to nearest even) into the output's type; a
 * gradient d of type dt is float32 holding dt's values, and a contribution
 * c reaches it as fsG_low_grad_add adds (dt low: d = round(d + round(c)),
 * fresh: d = round(c) + 0) or, dt float32, d += c (fresh: d = c).
 * 0, or -1 + fsT_error. */
typedef struct fsB_low_kernels {
  /* out[i] = a[i*sa] op b[i*sb]; strides 0 or 1 */
  int (*binary)(fsB_binop op, size_t n, fs_dtype ta, const void *a, size_t sa, fs_dtype tb, const void *b,
                size_t sb, fs_dtype to, void *out);
  /* the gradient of side `side` (0: a, 1: b; stride 1) from dout[n]: dout,
   * -dout, dout * the other side, dout / b, -(dout / b) (a / b) */
  int (*binary_backward)(fsB_binop op, int side, size_t n, const float *dout, fs_dtype ta, const void *a,
                         size_t sa, fs_dtype tb, const void *b, size_t sb, fs_dtype dt, float *d, bool fresh);
  /* y[n] = act(x[n]), x and y of type dt; dx (x's gradient) gets
   * dout[n] * act'(x[n]): ReLU, GELU (both forms), tanh; fsN_act_low_table's bits */
  int (*act_forward)(fsN_act act, fs_dtype dt, size_t n, const void *x, void *y);
  int (*act_backward)(fsN_act act, fs_dtype dt, size_t n, float *dx, bool fresh, const float *dout,
                      const void *x);
} fsB_low_kernels;

typedef struct fsB_backend {
  const char *name;
  void *(*alloc)(size_t nbytes);               /* uninitialized; NULL on OOM */
  void (*free)(void *p, size_t nbytes);
  void (*zero)(void *p, size_t nbytes);
  void (*copy)(void *dst, const void *src, size_t nbytes);
  /* host memory <-> this device's (blocking); -1 + fsT_error on failure */
  int (*from_host)(void *dst, const void *src_host, size_t nbytes);
  int (*to_host)(void *dst_host, const void *src, size_t nbytes);
  /* waits for queued work: before another library (NCCL) reads buffers on
   * its own stream, and at step boundaries; -1 + fsT_error if any failed */
  int (*sync)(void);
  void (*fill)(float *dst, size_t n, float v);
  /* stream elements [offset, offset + n) of rng key `key` (rng.h) */
  void (*fill_uniform)(float *dst, size_t n, uint64_t key, size_t offset, float lo, float hi);
  void (*fill_normal)(float *dst, size_t n, uint64_t key, size_t offset, float mean, float std);
  /* row-major C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C; -1 + fsT_error
   * when the BLAS cannot be loaded */
  int (*gemm)(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb,
              float beta, float *C, int64_t ldc);
  /* out[i] = a[i*sa] op b[i*sb]; strides 0 or 1 (0 broadcasts a scalar) */
  void (*binary)(fsB_binop op, size_t n, const float *a, size_t sa,
                 const float *b, size_t sb, float *out);
  void (*axpy)(size_t n, float alpha, const float *x, float *y); /* y += alpha x */
  void (*scale)(size_t n, float alpha, float *x);                /* x *= alpha */
  void (*clamp)(size_t n, float lo, float hi, float *x);
  double (*sum)(size_t n, const float *x);
  double (*sumsq)(size_t n, const float *x);
  float (*absmax)(size_t n, const float *x);
  /* optimizer updates (optim.h documents the rules): one parameter's
   * elements; hyperparameters are doubles, rounded to float where torch
   * rounds its Python scalars; a NULL state buffer is one the options do not
   * use (SGD without momentum, Adam without amsgrad, RMSprop's optional ones) */
  void (*sgd_update)(size_t n, float *p, const float *g, float *buf, bool first,
                     double lr, double momentum, double dampening, double wd, bool nesterov,
                     bool maximize);
  void (*adam_update)(size_t n, float *p, const float *g, float *m, float *v, float *vmax,
                      double lr, double beta1, double beta2, double eps, double wd,
                      bool decoupled, bool maximize, int64_t step);
  void (*rmsprop_update)(size_t n, float *p, const float *g, float *square_avg, float *grad_avg,
                         float *buf, double lr, double alpha, double eps, double wd,
                         double momentum, bool maximize);
  /* clr: lr / (1 + (step - 1) lr_decay), as torch computes it in Python */
  void (*adagrad_update)(size_t n, float *p, const float *g, float *sum, double clr, double eps,
                         double wd, bool maximize);
  void (*adadelta_update)(size_t n, float *p, const float *g, float *square_avg, float *acc_delta,
                          double lr, double rho, double eps, double wd, bool maximize);
  const fsN_kernels *nn;
  /* optional: NULL stages the tensor API's ops through host memory (ops_grad.c) */
  const fsU_kernels *ops;
  const fsB_f64_kernels *f64; /* float64 (64-true): every backend has one (f64_kernels.h) */
  /* n elements between float types (float32, float64, bfloat16, float16) on
   * this device with fsT_convert's rounding; -1 for other types (the caller
   * converts on the host) */
  int (*convert)(fs_dtype to, void *dst, fs_dtype from, const void *src, size_t n);
  /* optional: NULL runs low-precision elementwise ops on float32 copies
   * (fsG_low_begin); the cpu has its own direct paths (FSG_LOW_BLOCK) */
  const fsB_low_kernels *low;
} fsB_backend;

extern const fsB_backend fsB_cpu;

/* ---- optimizer updates of low-precision parameters (issue 16) ----
 * One parameter's update as torch computes it for a bfloat16 or float16
 * parameter: every tensor op of torch's _single_tensor_* rule rounds its
 * result to the parameter's type.  The arrays are host float32 copies
 * holding values of that type (optim.c converts around the call); s[] are
 * the optimizer's state buffers 0..2 in fsO_state_name's order (NULL where
 * unused); lr is Adagrad's clr. */
typedef enum fsB_update_kind {
  FSB_UPD_SGD, FSB_UPD_ADAM, FSB_UPD_RMSPROP, FSB_UPD_ADAGRAD, FSB_UPD_ADADELTA
} fsB_update_kind;
typedef struct fsB_update {
  fsB_update_kind kind;
  size_t n;
  float *p, *s[3];
  const float *g;
  double lr, momentum, dampening, wd, beta1, beta2, eps, alpha, rho;
  bool first, nesterov, decoupled, maximize;
  int64_t step;
} fsB_update;
void fsB_update_low(fs_dtype low, const fsB_update *u);

/* The table of a device: NULL for meta (no compute) and for cuda when no CUDA
 * backend is built (fsT_error says so). */
const fsB_backend *fsB_get(fs_device dev);
static inline const fsB_backend *fsB_of(const fs_tensor *t) { return fsB_get(t->device); }

/* nbytes from src on src_dev to dst on dst_dev, through host memory when
 * both are devices; -1 + fsT_error on failure. */
int fsB_transfer(fs_device dst_dev, void *dst, fs_device src_dev, const void *src, size_t nbytes);

/* From now on cuda is fsB_emu_cuda, the cpu table under the name "cuda
 * (emulated)": a script for GPUs runs its device placement and transfers on
 * this machine (--emulate-cuda).  Its device pointers fault when the host
 * dereferences them, as a GPU's would (backend_emu.c).  Call before any
 * tensor is on cuda. */
void fsB_emulate_cuda(void);
extern const fsB_backend fsB_emu_cuda;
/* The host address of an fsB_emu_cuda pointer (NULL stays NULL): only for
 * the shm transport, which copies emulated ranks' buffers itself. */
void *fsB_emu_host(const void *p);

#endif
