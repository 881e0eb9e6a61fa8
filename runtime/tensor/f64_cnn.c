/* f64_cnn.c -- float64 on the tape for the convolutional layers and the
 * normalizations (precision="64-true"): conv1d/conv2d, conv_transpose2d,
 * max, average and adaptive average pooling, batch norm, group norm and RMS
 * norm, forward and backward.  Their entry points (cnn_grad.c, norm_grad.c)
 * check the inputs and compute the geometry; here the ops allocate on the
 * inputs' device, call its float64 table (fsB_of(t)->f64->cnn,
 * f64_cnn_kernels.h) and record the backward, as f64.c's ops do.
 *
 * Invariant: nothing is staged: the kernels take device pointers, so
 * emulated cuda runs these bit for bit as the cpu and never reads device
 * memory on the host, and a device without the kernels (cuda) is refused by
 * the op's name before anything is allocated.  Gradients are float64 on the
 * device (fsG_grad_buf_f64).  The formulas are the float32 kernels' text
 * (cnn_typed.h, norm_typed.h) over double.  The other half: f64_cnn.h. */
#include "f64_cnn.h"
#include "f64_cnn_kernels.h"

#include <stdlib.h>

/* The inputs' device's kernels, or NULL + an error naming op and device */
static const fsB_f64_cnn *cnn_of(const char *op, const fs_tensor *x) {
  const fsB_backend *be = fsB_of(x);
  if (!be->f64->cnn)
    fsT_seterr("%s: float64 has no %s kernel in this runtime (its float32 one runs staged through the host); "
               "run 64-true on the cpu, or convert with .float()",
               op, be->name);
  return be->f64->cnn;
}

static const fsB_f64_cnn *cnn_at(const fs_tensor *t) { return fsB_of(t)->f64->cnn; }

static fs_tensor *new64(const fs_tensor *like, int rank, const int64_t *shape) {
  return fsT_new(FS_F64, like->device, rank, shape);
}

static double *f64_or_null(const fs_tensor *t) { return t ? fsT_f64(t) : NULL; }

/* out and the saved statistics, released on a failure before fsG_record */
static fs_tensor *fail3(fs_tensor *a, fs_tensor *b, fs_tensor *c) {
  fsT_release(a);
  fsT_release(b);
  fsT_release(c);
  return NULL;
}

/* out recorded with fn and the geometry g (mode in the spare slot) */
static fs_tensor *record_geom(fs_tensor *out, backward_fn fn, int n, fs_tensor *const *ins, fs_tensor *saved,
                              const fsN_conv *g, int64_t mode) {
  out = fsG_record(out, fn, n, ins, saved, NULL, 0, 0);
  if (out && out->node) {
    fsG_geom_save(out->node, g);
    out->node->iv[FSN_CONV_FIELDS] = mode;
  }
  return out;
}

/* ---- convolution: out = x (*) W + b ---- */

static int conv64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *W = n->in[1], *b = n->in[2];
  double *dx, *dW, *db;
  fsN_conv g;
  if (fsG_grad_buf_f64(x, &dx) || fsG_grad_buf_f64(W, &dW) || fsG_grad_buf_f64(b, &db)) return -1;
  fsG_geom_load(n, &g);
  return cnn_at(x)->conv2d_backward(dx, dW, db, fsT_f64(out->grad), fsT_f64(x), fsT_f64(W), &g);
}

fs_tensor *fsG_conv_f64(const char *op, fs_tensor *const *ins, const fsN_conv *g) {
  fs_tensor *x = ins[0], *out;
  const fsB_f64_cnn *k = cnn_of(op, x);
  int64_t shape[4] = {g->N, g->OC, g->OH, g->OW};
  if (x->rank == 3) shape[2] = g->OW;
  if (!k || !(out = new64(x, x->rank, shape))) return NULL;
  if (k->conv2d_forward(fsT_f64(out), fsT_f64(x), fsT_f64(ins[1]), f64_or_null(ins[2]), g) < 0)
    return fail3(out, NULL, NULL);
  return record_geom(out, conv64_bw, 3, ins, NULL, g, 0);
}

/* ---- transposed convolution: conv2d's data gradient (g is that conv's) ---- */

static int conv_transpose64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *W = n->in[1], *b = n->in[2];
  const fsB_f64_cnn *k = cnn_at(x);
  double *dx, *dW, *db, *dy = fsT_f64(out->grad);
  fsN_conv g;
  if (fsG_grad_buf_f64(x, &dx) || fsG_grad_buf_f64(W, &dW) || fsG_grad_buf_f64(b, &db)) return -1;
  fsG_geom_load(n, &g);
  if (dx) { /* dx += conv2d(dy, W): computed aside, then added */
    fs_tensor *tmp = new64(x, x->rank, x->shape);
    int rc = tmp ? k->conv2d_forward(fsT_f64(tmp), dy, fsT_f64(W), NULL, &g) : -1;
    if (!rc) fsB_of(x)->f64->axpy((size_t)x->numel, 1.0, fsT_f64(tmp), dx);
    fsT_release(tmp);
    if (rc) return -1;
  }
  if (dW && k->conv2d_backward(NULL, dW, NULL, fsT_f64(x), dy, fsT_f64(W), &g) < 0) return -1;
  if (db) k->chanbias_backward(db, dy, g.N, g.C, g.H * g.W);
  return 0;
}

fs_tensor *fsG_conv_transpose2d_f64(fs_tensor *const *ins, const fsN_conv *g) {
  fs_tensor *x = ins[0], *out;
  const fsB_f64_cnn *k = cnn_of("conv_transpose2d", x);
  int64_t shape[4] = {g->N, g->C, g->H, g->W};
  if (!k || !(out = fsT_zeros(FS_F64, x->device, 4, shape))) return NULL;
  if (k->conv2d_backward(fsT_f64(out), NULL, NULL, fsT_f64(x), NULL, fsT_f64(ins[1]), g) < 0)
    return fail3(out, NULL, NULL);
  if (ins[2]) k->chanbias_forward(fsT_f64(out), fsT_f64(ins[2]), g->N, g->C, g->H * g->W);
  return record_geom(out, conv_transpose64_bw, 3, ins, NULL, g, 0);
}

/* ---- pooling ---- */

/* x's shape with the last two dims replaced by OH, OW */
static void pooled(const fs_tensor *x, const fsN_conv *g, int64_t *shape) {
  memcpy(shape, x->shape, (size_t)x->rank * sizeof *shape);
  shape[x->rank - 2] = g->OH;
  shape[x->rank - 1] = g->OW;
}

/* saved[0]: the flat h*W+w of each output's maximum */
static int maxpool64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dx;
  fsN_conv g;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  fsG_geom_load(n, &g);
  if (dx) cnn_at(x)->maxpool2d_backward(dx, fsT_f64(out->grad), fsT_i64(n->saved[0]), &g);
  return 0;
}

fs_tensor *fsG_max_pool2d_f64(fs_tensor *x, const fsN_conv *g) {
  const fsB_f64_cnn *k = cnn_of("max_pool2d", x);
  int64_t shape[4];
  pooled(x, g, shape);
  fs_tensor *out = k ? new64(x, x->rank, shape) : NULL, *idx = out ? fsT_new(FS_I64, x->device, x->rank, shape) : NULL;
  if (!idx) return fail3(out, NULL, NULL);
  k->maxpool2d_forward(fsT_f64(out), fsT_i64(idx), fsT_f64(x), g);
  return record_geom(out, maxpool64_bw, 1, &x, idx, g, 0);
}

static int avgpool64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dx;
  fsN_conv g;
  fsN_avgwin w;
  int64_t *mem;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  fsG_geom_load(n, &g);
  if (!dx) return 0;
  if (fsN_avgwin_make(&w, &mem, &g, (int)n->iv[FSN_CONV_FIELDS]) < 0) return -1;
  cnn_at(x)->avgpool2d_backward(dx, fsT_f64(out->grad), g.N * g.C, &w);
  free(mem);
  return 0;
}

fs_tensor *fsG_avg_pool_f64(const char *op, fs_tensor *x, const fsN_conv *g, int mode) {
  const fsB_f64_cnn *k = cnn_of(op, x);
  fsN_avgwin w;
  int64_t *mem, shape[4];
  pooled(x, g, shape);
  fs_tensor *out = k ? new64(x, x->rank, shape) : NULL;
  if (!out) return NULL;
  if (fsN_avgwin_make(&w, &mem, g, mode) < 0) return fail3(out, NULL, NULL);
  k->avgpool2d_forward(fsT_f64(out), fsT_f64(x), g->N * g->C, &w);
  free(mem);
  return record_geom(out, avgpool64_bw, 1, &x, NULL, g, mode);
}

/* ---- normalizations: saved[0], saved[1] the statistics (mean, rstd) ---- */

/* x [N, C, S...] seen as N, C, S */
static void ncs(const fs_tensor *x, int64_t *N, int64_t *C, int64_t *S) {
  *N = x->shape[0];
  *C = x->shape[1];
  *S = *N * *C != 0 ? x->numel / (*N * *C) : 0;
}

/* out like x and two statistics of n values each (the second when two) */
static bool norm_new(const fs_tensor *x, int64_t n, bool two, fs_tensor **out, fs_tensor **s0, fs_tensor **s1) {
  *out = new64(x, x->rank, x->shape);
  *s0 = *out ? new64(x, 1, &n) : NULL;
  *s1 = *s0 && two ? new64(x, 1, &n) : NULL;
  if (*s0 && (!two || *s1)) return true;
  fail3(*out, *s0, *s1);
  return false;
}

/* k: training */
static int batchnorm64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
  double *dx, *dw, *db;
  int64_t N, C, S;
  if (fsG_grad_buf_f64(x, &dx) || fsG_grad_buf_f64(w, &dw) || fsG_grad_buf_f64(b, &db)) return -1;
  ncs(x, &N, &C, &S);
  cnn_at(x)->batchnorm_backward(dx, dw, db, fsT_f64(out->grad), fsT_f64(x), f64_or_null(w), fsT_f64(n->saved[0]),
                                fsT_f64(n->saved[1]), N, C, S, n->k != 0);
  return 0;
}

fs_tensor *fsG_batch_norm_f64(fs_tensor *const *ins, fs_tensor *rm, fs_tensor *rv, bool training, double momentum,
                              double eps) {
  fs_tensor *x = ins[0], *out, *mean, *rstd;
  const fsB_f64_cnn *k = cnn_of("batch_norm", x);
  int64_t N, C, S;
  ncs(x, &N, &C, &S);
  if (!k || !norm_new(x, C, true, &out, &mean, &rstd)) return NULL;
  k->batchnorm_forward(fsT_f64(out), fsT_f64(mean), fsT_f64(rstd), fsT_f64(x), f64_or_null(ins[1]),
                       f64_or_null(ins[2]), f64_or_null(rm), f64_or_null(rv), N, C, S, training, momentum, eps);
  return fsG_record(out, batchnorm64_bw, 3, ins, mean, rstd, eps, training);
}

/* k: groups */
static int groupnorm64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
  double *dx, *dw, *db;
  int64_t N, C, S;
  if (fsG_grad_buf_f64(x, &dx) || fsG_grad_buf_f64(w, &dw) || fsG_grad_buf_f64(b, &db)) return -1;
  ncs(x, &N, &C, &S);
  cnn_at(x)->groupnorm_backward(dx, dw, db, fsT_f64(out->grad), fsT_f64(x), f64_or_null(w), fsT_f64(n->saved[0]),
                                fsT_f64(n->saved[1]), N, C, S, n->k);
  return 0;
}

fs_tensor *fsG_group_norm_f64(fs_tensor *const *ins, int64_t groups, double eps) {
  fs_tensor *x = ins[0], *out, *mean, *rstd;
  const fsB_f64_cnn *k = cnn_of("group_norm", x);
  int64_t N, C, S;
  ncs(x, &N, &C, &S);
  if (!k || !norm_new(x, N * groups, true, &out, &mean, &rstd)) return NULL;
  k->groupnorm_forward(fsT_f64(out), fsT_f64(mean), fsT_f64(rstd), fsT_f64(x), f64_or_null(ins[1]),
                       f64_or_null(ins[2]), N, C, S, groups, eps);
  return fsG_record(out, groupnorm64_bw, 3, ins, mean, rstd, eps, groups);
}

static int rmsnorm64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *w = n->in[1];
  double *dx, *dw;
  if (fsG_grad_buf_f64(x, &dx) || fsG_grad_buf_f64(w, &dw)) return -1;
  int64_t M = n->saved[0]->numel, D = M ? out->numel / M : 0;
  cnn_at(x)->rmsnorm_backward(dx, dw, fsT_f64(out->grad), fsT_f64(x), f64_or_null(w), fsT_f64(n->saved[0]), M, D);
  return 0;
}

fs_tensor *fsG_rms_norm_f64(fs_tensor *const *ins, int64_t M, int64_t D, int nd, double eps) {
  fs_tensor *x = ins[0], *out, *rstd, *none;
  const fsB_f64_cnn *k = cnn_of("rms_norm", x);
  if (!k || !norm_new(x, M, false, &out, &rstd, &none)) return NULL;
  k->rmsnorm_forward(fsT_f64(out), fsT_f64(rstd), fsT_f64(x), f64_or_null(ins[1]), M, D, eps);
  return fsG_record(out, rmsnorm64_bw, 3, ins, rstd, NULL, eps, nd);
}
