/* f64_kernels.c -- the cpu's float64 kernels (fsB_f64_cpu, f64_kernels.h):
 * the typed kernels of ops_typed.h, nn_typed.h, loss_typed.h and
 * blas1_typed.h instantiated over double (NAME_f64, static here),
 * OpenBLAS's dgemm, two small loops of f64.c's own, and torch's SGD,
 * Adam(W), RMSprop, Adagrad and Adadelta rules over double (f64_rules.h,
 * shared with cuda's kernels).
 *
 * Invariant: every loop runs in element order, so a host loop over the same
 * values gives the same bits; backend_emu.c serves this table behind its
 * device pointers, which makes emulated cuda bit for bit the cpu.  The
 * other half: f64.c and optim_f64.c call it through fsB_of(t)->f64. */
#include "f64_kernels.h"
#include "f64_cnn_kernels.h"
#include "blas.h"
#include "f64_rules.h"
#define FS_REAL_DOUBLE 1 /* the shared kernel bodies, instantiated over double */
#include "ops_typed.h"
#include "nn_typed.h"
#include "loss_typed.h"
#include "blas1_typed.h"

#include <math.h>

/* the loops float32 has no use for */
static void shift(size_t n, double v, double *y) {
  for (size_t i = 0; i < n; i++) y[i] += v;
}
static void divide(size_t n, double d, double *x) {
  for (size_t i = 0; i < n; i++) x[i] /= d;
}

static void sgd_update(const fsB_update *u, double *p, const double *g, double *buf) {
  for (size_t i = 0; i < u->n; i++) fsB_sgd64(u, i, p, g, buf);
}

static void adam_update(const fsB_update *u, double *p, const double *g, double *m, double *v, double *vmax) {
  fsB_adam64_bias bc = fsB_adam64_bias_of(u);
  for (size_t i = 0; i < u->n; i++) fsB_adam64(u, bc, i, p, g, m, v, vmax);
}

static void rmsprop_update(const fsB_update *u, double *p, const double *g, double *sq, double *ga, double *buf) {
  for (size_t i = 0; i < u->n; i++) fsB_rmsprop64(u, i, p, g, sq, ga, buf);
}

static void adagrad_update(const fsB_update *u, double *p, const double *g, double *sum) {
  for (size_t i = 0; i < u->n; i++) fsB_adagrad64(u, i, p, g, sum);
}

static void adadelta_update(const fsB_update *u, double *p, const double *g, double *sq, double *acc) {
  for (size_t i = 0; i < u->n; i++) fsB_adadelta64(u, i, p, g, sq, acc);
}

/* nn_typed.h's and loss_typed.h's forward and backward kernel of a layer */
#define LAYER(name) .name##_forward = fsN_##name##_forward_f64, .name##_backward = fsN_##name##_backward_f64

const fsB_f64_kernels fsB_f64_cpu = {
  .gemm = fsB_dgemm, .shift = shift, .divide = divide, FS_BLAS1_TYPED_ENTRIES, FS_OPS_TYPED_ENTRIES,
  LAYER(linear), LAYER(act), LAYER(embedding), LAYER(posemb), LAYER(layernorm), LAYER(attention),
  LAYER(cross_entropy), LAYER(dropout), .sgd_update = sgd_update, .adam_update = adam_update,
  .ploss_forward = ploss_forward_f64, .ploss_backward = ploss_backward_f64, .rmsprop_update = rmsprop_update,
  .adagrad_update = adagrad_update, .adadelta_update = adadelta_update,
  .cnn = &fsB_f64_cnn_cpu,
};
