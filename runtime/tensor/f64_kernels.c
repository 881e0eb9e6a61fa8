/* f64_kernels.c -- the cpu's float64 kernels (fsB_f64_cpu, f64_kernels.h):
 * the typed kernels of ops_typed.h, nn_typed.h and loss_typed.h
 * instantiated over double (NAME_f64, static here), OpenBLAS's dgemm, the
 * small loops f64.c's reductions and gradients need, and torch's SGD and
 * Adam(W) rules over double (f64_rules.h, shared with cuda's kernels).
 *
 * Invariant: every loop runs in element order, so a host loop over the same
 * values gives the same bits; backend_emu.c serves this table behind its
 * device pointers, which makes emulated cuda bit for bit the cpu.  The
 * other half: f64.c and optim_f64.c call it through fsB_of(t)->f64. */
#include "f64_kernels.h"
#include "blas.h"
#include "f64_rules.h"
#define FS_REAL_DOUBLE 1 /* the shared kernel bodies, instantiated over double */
#include "ops_typed.h"
#include "nn_typed.h"
#include "loss_typed.h"

#include <math.h>

static void axpy(size_t n, double alpha, const double *x, double *y) {
  for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}
static void shift(size_t n, double v, double *y) {
  for (size_t i = 0; i < n; i++) y[i] += v;
}
static void scale(size_t n, double alpha, double *x) {
  for (size_t i = 0; i < n; i++) x[i] *= alpha;
}
static void divide(size_t n, double d, double *x) {
  for (size_t i = 0; i < n; i++) x[i] /= d;
}
static void clamp(size_t n, double lo, double hi, double *x) {
  for (size_t i = 0; i < n; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}
static double sum(size_t n, const double *x) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += x[i];
  return s;
}
static double sumsq(size_t n, const double *x) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += x[i] * x[i];
  return s;
}
static double absmax(size_t n, const double *x) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s = fabs(x[i]) > s || isnan(x[i]) ? fabs(x[i]) : s;
  return s;
}
static void take_backward(int64_t n, const int64_t *at, double *dx, const double *dy) {
  for (int64_t i = 0; i < n; i++) dx[at[i]] += dy[i];
}

static void sgd_update(const fsB_update *u, double *p, const double *g, double *buf) {
  for (size_t i = 0; i < u->n; i++) fsB_sgd64(u, i, p, g, buf);
}

static void adam_update(const fsB_update *u, double *p, const double *g, double *m, double *v, double *vmax) {
  fsB_adam64_bias bc = fsB_adam64_bias_of(u);
  for (size_t i = 0; i < u->n; i++) fsB_adam64(u, bc, i, p, g, m, v, vmax);
}

const fsB_f64_kernels fsB_f64_cpu = {
  .gemm = fsB_dgemm, .axpy = axpy, .shift = shift, .scale = scale, .divide = divide, .clamp = clamp,
  .sum = sum, .sumsq = sumsq, .absmax = absmax, .take_backward = take_backward,
  .unary_forward = cpu_unary_forward_f64, .unary_backward = cpu_unary_backward_f64,
  .binary_forward = cpu_binary_forward_f64, .binary_backward = cpu_binary_backward_f64,
  .sum_dim_forward = cpu_sum_dim_forward_f64, .sum_dim_backward = cpu_sum_dim_backward_f64,
  .softmax_forward = cpu_softmax_forward_f64, .softmax_backward = cpu_softmax_backward_f64,
  .linear_forward = fsN_linear_forward_f64, .linear_backward = fsN_linear_backward_f64,
  .act_forward = fsN_act_forward_f64, .act_backward = fsN_act_backward_f64,
  .embedding_forward = fsN_embedding_forward_f64, .embedding_backward = fsN_embedding_backward_f64,
  .posemb_forward = fsN_posemb_forward_f64, .posemb_backward = fsN_posemb_backward_f64,
  .layernorm_forward = fsN_layernorm_forward_f64, .layernorm_backward = fsN_layernorm_backward_f64,
  .attention_forward = fsN_attention_forward_f64, .attention_backward = fsN_attention_backward_f64,
  .cross_entropy_forward = fsN_cross_entropy_forward_f64, .cross_entropy_backward = fsN_cross_entropy_backward_f64,
  .sgd_update = sgd_update, .adam_update = adam_update,
};
