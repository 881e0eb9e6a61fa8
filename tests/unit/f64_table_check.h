/* f64_table_check.h -- a device's float64 table (f64_kernels.h) against the
 * cpu's: every kernel on the same inputs, forward and backward, through the
 * device's own memory (alloc, from_host, to_host), so emulated cuda's
 * device pointers fault if a kernel reads them on the host.
 *
 * Invariant: |device - cpu| <= rtol (1 + |cpu|) element by element, NaN
 * matching NaN; rtol 0 asks for the same bits (emulated cuda, whose table
 * is the cpu's behind its pointers: test_rt_f64.c), a small rtol for a GPU's
 * own kernels (test_cuda.c, with a device).  Include after rt_testutil.h. */
#ifndef FS_F64_TABLE_CHECK_H
#define FS_F64_TABLE_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "f64_cnn_kernels.h"
#include "f64_kernels.h"

typedef struct f64chk {
  const fsB_backend *be; /* the device: its alloc, copies and f64 table */
  double rtol;
  void *dev[64]; /* device buffers, freed by f64chk_done */
  double *host[64];
  int ndev, nhost;
} f64chk;

/* n doubles in [lo, hi), a fixed sequence per seed */
static double *f64chk_rnd(f64chk *c, unsigned seed, size_t n, double lo, double hi) {
  double *h = malloc((n ? n : 1) * sizeof *h);
  assert_non_null(h);
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    h[i] = lo + (hi - lo) * (double)(s >> 11) / 9007199254740992.0;
  }
  assert_true(c->nhost < 64);
  return c->host[c->nhost++] = h;
}

/* a device copy of n bytes of host memory */
static void *f64chk_up(f64chk *c, const void *h, size_t nbytes) {
  void *d = c->be->alloc(nbytes ? nbytes : 1);
  if (!d) fail_msg("alloc: %s", fsT_error());
  if (nbytes && c->be->from_host(d, h, nbytes) < 0) fail_msg("from_host: %s", fsT_error());
  assert_true(c->ndev < 64);
  return c->dev[c->ndev++] = d;
}

static double *f64chk_upd(f64chk *c, const double *h, size_t n) { return f64chk_up(c, h, n * sizeof *h); }

static void f64chk_expect(f64chk *c, const double *dev, const double *ref, size_t n, const char *what) {
  double *h = malloc((n ? n : 1) * sizeof *h);
  assert_non_null(h);
  if (c->be->sync() < 0 || (n && c->be->to_host(h, dev, n * sizeof *h) < 0)) fail_msg("%s: %s", what, fsT_error());
  for (size_t i = 0; i < n; i++) {
    bool same = c->rtol == 0 ? !memcmp(&h[i], &ref[i], sizeof *h)
                             : fabs(h[i] - ref[i]) <= c->rtol * (1 + fabs(ref[i])) || (isnan(h[i]) && isnan(ref[i]));
    if (!same) {
      fprintf(stderr, "%s[%zu]: %s %.17g cpu %.17g\n", what, i, c->be->name, h[i], ref[i]);
      free(h);
      fail_msg("%s differs", what);
    }
  }
  free(h);
}

static void f64chk_expect_scalar(f64chk *c, double got, double ref, const char *what) {
  bool same = c->rtol == 0 ? !memcmp(&got, &ref, sizeof got)
                           : fabs(got - ref) <= c->rtol * (1 + fabs(ref)) || (isnan(got) && isnan(ref));
  if (!same) fail_msg("%s: %s %.17g cpu %.17g", what, c->be->name, got, ref);
}

static void f64chk_done(f64chk *c) {
  for (int i = 0; i < c->ndev; i++) c->be->free(c->dev[i], 0);
  for (int i = 0; i < c->nhost; i++) free(c->host[i]);
  c->ndev = c->nhost = 0;
}

/* The elementwise, reduction and optimizer kernels */
static void f64chk_elementwise(f64chk *c) {
  const fsB_f64_kernels *k = &fsB_f64_cpu, *g = c->be->f64;
  const size_t n = 1000;
  double *x = f64chk_rnd(c, 1, n, -2, 2), *y = f64chk_rnd(c, 2, n, -2, 2);
  double *gx = f64chk_upd(c, x, n), *gy = f64chk_upd(c, y, n);
  k->axpy(n, 0.3, x, y), g->axpy(n, 0.3, gx, gy);
  f64chk_expect(c, gy, y, n, "axpy");
  k->shift(n, -0.7, y), g->shift(n, -0.7, gy);
  f64chk_expect(c, gy, y, n, "shift");
  k->scale(n, 1.3, y), g->scale(n, 1.3, gy);
  f64chk_expect(c, gy, y, n, "scale");
  k->divide(n, 3.0, y), g->divide(n, 3.0, gy);
  f64chk_expect(c, gy, y, n, "divide");
  k->clamp(n, -0.5, 0.4, y), g->clamp(n, -0.5, 0.4, gy);
  f64chk_expect(c, gy, y, n, "clamp");
  f64chk_expect_scalar(c, g->sum(n, gx), k->sum(n, x), "sum");
  f64chk_expect_scalar(c, g->sumsq(n, gx), k->sumsq(n, x), "sumsq");
  f64chk_expect_scalar(c, g->absmax(n, gx), k->absmax(n, x), "absmax");
  /* scatter-add with repeated targets */
  int64_t at[200];
  for (int i = 0; i < 200; i++) at[i] = (i * 37) % 50;
  double *d = f64chk_rnd(c, 3, 50, -1, 1), *dy = f64chk_rnd(c, 4, 200, -1, 1);
  int64_t *gat = f64chk_up(c, at, sizeof at);
  double *gd = f64chk_upd(c, d, 50), *gdy = f64chk_upd(c, dy, 200);
  k->take_backward(200, at, d, dy), g->take_backward(200, gat, gd, gdy);
  f64chk_expect(c, gd, d, 50, "take_backward");
  /* SGD (nesterov, weight decay) and AdamW with amsgrad, two steps each */
  double *p = f64chk_rnd(c, 5, n, -1, 1), *buf = f64chk_rnd(c, 6, n, 0, 0), *m = f64chk_rnd(c, 7, n, 0, 0);
  double *v = f64chk_rnd(c, 8, n, 0, 0), *vmax = f64chk_rnd(c, 9, n, 0, 0);
  double *gp = f64chk_upd(c, p, n), *gbuf = f64chk_upd(c, buf, n), *gm = f64chk_upd(c, m, n);
  double *gv = f64chk_upd(c, v, n), *gvmax = f64chk_upd(c, vmax, n);
  for (int step = 1; step <= 2; step++) {
    fsB_update u = {.kind = FSB_UPD_SGD, .n = n, .lr = 0.1, .momentum = 0.9, .wd = 1e-3, .nesterov = true,
                    .first = step == 1};
    k->sgd_update(&u, p, x, buf), g->sgd_update(&u, gp, gx, gbuf);
    fsB_update a = {.kind = FSB_UPD_ADAM, .n = n, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                    .wd = 0.1, .decoupled = true, .step = step};
    k->adam_update(&a, p, y, m, v, vmax), g->adam_update(&a, gp, gy, gm, gv, gvmax);
  }
  f64chk_expect(c, gp, p, n, "sgd and adam: parameter");
  f64chk_expect(c, gbuf, buf, n, "sgd: momentum buffer");
  f64chk_expect(c, gvmax, vmax, n, "adam: max_exp_avg_sq");
  f64chk_done(c);
}

/* The tensor API's kernels: every unary function and binary op (with
 * broadcasting), sums over a dim, softmax and log_softmax, logsumexp and
 * cumsum over a dim, a product */
static void f64chk_ops(f64chk *c) {
  const fsB_f64_kernels *k = &fsB_f64_cpu, *g = c->be->f64;
  const size_t n = 300;
  double *x = f64chk_rnd(c, 10, n, 0.1, 2), *y = f64chk_rnd(c, 11, n, 0, 0), *dy = f64chk_rnd(c, 12, n, -1, 1);
  double *dx = f64chk_rnd(c, 13, n, -1, 1);
  double *gx = f64chk_upd(c, x, n), *gy = f64chk_upd(c, y, n), *gdy = f64chk_upd(c, dy, n), *gdx = f64chk_upd(c, dx, n);
  for (int op = FSU_EXP; op <= FSU_MISH; op++) {
    char what[64];
    snprintf(what, sizeof what, "unary %d", op);
    k->unary_forward(op, n, x, y, 0.6, 1.2), g->unary_forward(op, n, gx, gy, 0.6, 1.2);
    f64chk_expect(c, gy, y, n, what);
    k->unary_backward(op, n, dx, dy, x, y, 0.6, 1.2), g->unary_backward(op, n, gdx, gdy, gx, gy, 0.6, 1.2);
    f64chk_expect(c, gdx, dx, n, what);
  }
  /* a [4, 1, 5] op b [3, 1]: out [4, 3, 5] */
  fsU_bcast bc = {0};
  int64_t as[3] = {4, 1, 5}, bs[2] = {3, 1};
  bc.rank = 3, bc.shape[0] = 4, bc.shape[1] = 3, bc.shape[2] = 5, bc.numel = 60;
  fsU_bcast_strides(3, as, 3, bc.shape, bc.st[0]);
  fsU_bcast_strides(2, bs, 3, bc.shape, bc.st[1]);
  double *a = f64chk_rnd(c, 14, 20, 0.5, 2), *b = f64chk_rnd(c, 15, 3, 0.5, 2), *o = f64chk_rnd(c, 16, 60, 0, 0);
  double *da = f64chk_rnd(c, 17, 20, -1, 1), *db = f64chk_rnd(c, 18, 3, -1, 1), *dout = f64chk_rnd(c, 19, 60, -1, 1);
  double *ga = f64chk_upd(c, a, 20), *gb = f64chk_upd(c, b, 3), *go = f64chk_upd(c, o, 60);
  double *gda = f64chk_upd(c, da, 20), *gdb = f64chk_upd(c, db, 3), *gdout = f64chk_upd(c, dout, 60);
  for (int op = FSU_ADD; op <= FSU_MINIMUM; op++) {
    char what[64];
    snprintf(what, sizeof what, "binary %d", op);
    k->binary_forward(op, &bc, a, b, o), g->binary_forward(op, &bc, ga, gb, go);
    f64chk_expect(c, go, o, 60, what);
    k->binary_backward(op, &bc, da, db, dout, a, b, o), g->binary_backward(op, &bc, gda, gdb, gdout, ga, gb, go);
    f64chk_expect(c, gda, da, 20, what);
    f64chk_expect(c, gdb, db, 3, what);
  }
  /* x [6, 10, 5]: sum and softmax over the middle dim */
  k->sum_dim_forward(6, 10, 5, x, y), g->sum_dim_forward(6, 10, 5, gx, gy);
  f64chk_expect(c, gy, y, 30, "sum_dim_forward");
  k->sum_dim_backward(6, 10, 5, dx, dy), g->sum_dim_backward(6, 10, 5, gdx, gdy);
  f64chk_expect(c, gdx, dx, n, "sum_dim_backward");
  for (int lg = 0; lg < 2; lg++) {
    k->softmax_forward(lg, 6, 10, 5, x, y), g->softmax_forward(lg, 6, 10, 5, gx, gy);
    f64chk_expect(c, gy, y, n, lg ? "log_softmax" : "softmax");
    k->softmax_backward(lg, 6, 10, 5, dx, dy, y), g->softmax_backward(lg, 6, 10, 5, gdx, gdy, gy);
    f64chk_expect(c, gdx, dx, n, lg ? "log_softmax backward" : "softmax backward");
  }
  /* logsumexp and cumsum over the middle dim of x [6, 10, 5] */
  k->logsumexp_forward(6, 10, 5, x, y), g->logsumexp_forward(6, 10, 5, gx, gy);
  f64chk_expect(c, gy, y, 30, "logsumexp_forward");
  k->logsumexp_backward(6, 10, 5, dx, dy, x, y), g->logsumexp_backward(6, 10, 5, gdx, gdy, gx, gy);
  f64chk_expect(c, gdx, dx, n, "logsumexp_backward");
  k->cumsum_forward(6, 10, 5, x, y), g->cumsum_forward(6, 10, 5, gx, gy);
  f64chk_expect(c, gy, y, n, "cumsum_forward");
  k->cumsum_backward(6, 10, 5, dx, dy), g->cumsum_backward(6, 10, 5, gdx, gdy);
  f64chk_expect(c, gdx, dx, n, "cumsum_backward");
  /* [12, 25] @ [25, 12]^T accumulated into y */
  assert_int_equal(k->gemm(false, true, 12, 12, 25, 0.5, x, 25, dy, 25, 1.0, y, 12), 0);
  assert_int_equal(g->gemm(false, true, 12, 12, 25, 0.5, gx, 25, gdy, 25, 1.0, gy, 12), 0);
  f64chk_expect(c, gy, y, 144, "gemm");
  f64chk_done(c);
}

/* The layer kernels: linear, activations, embeddings, layer norm,
 * attention, cross entropy */
static void f64chk_layers(f64chk *c) {
  const fsB_f64_kernels *k = &fsB_f64_cpu, *g = c->be->f64;
  const int64_t N = 24, C = 12, OC = 18;
  double *x = f64chk_rnd(c, 20, N * C, -1, 1), *W = f64chk_rnd(c, 21, OC * C, -0.5, 0.5);
  double *b = f64chk_rnd(c, 22, OC, -1, 1);
  double *out = f64chk_rnd(c, 23, N * OC, 0, 0), *dout = f64chk_rnd(c, 24, N * OC, -1, 1);
  double *dx = f64chk_rnd(c, 25, N * C, -1, 1), *dW = f64chk_rnd(c, 26, OC * C, -1, 1);
  double *db = f64chk_rnd(c, 27, OC, -1, 1);
  double *gx = f64chk_upd(c, x, N * C), *gW = f64chk_upd(c, W, OC * C), *gb = f64chk_upd(c, b, OC);
  double *gout = f64chk_upd(c, out, N * OC), *gdout = f64chk_upd(c, dout, N * OC);
  double *gdx = f64chk_upd(c, dx, N * C), *gdW = f64chk_upd(c, dW, OC * C), *gdb = f64chk_upd(c, db, OC);
  assert_int_equal(k->linear_forward(out, x, W, b, N, C, OC), 0);
  assert_int_equal(g->linear_forward(gout, gx, gW, gb, N, C, OC), 0);
  f64chk_expect(c, gout, out, N * OC, "linear_forward");
  assert_int_equal(k->linear_backward(dx, dW, db, dout, x, W, N, C, OC), 0);
  assert_int_equal(g->linear_backward(gdx, gdW, gdb, gdout, gx, gW, N, C, OC), 0);
  f64chk_expect(c, gdx, dx, N * C, "linear_backward dinp");
  f64chk_expect(c, gdW, dW, OC * C, "linear_backward dW");
  f64chk_expect(c, gdb, db, OC, "linear_backward db");
  for (int act = FSN_RELU; act <= FSN_SILU; act++) {
    k->act_forward(act, out, dout, (size_t)(N * OC)), g->act_forward(act, gout, gdout, (size_t)(N * OC));
    f64chk_expect(c, gout, out, N * OC, "act_forward");
    k->act_backward(act, dx, x, dout, out, (size_t)(N * C));
    g->act_backward(act, gdx, gx, gdout, gout, (size_t)(N * C));
    f64chk_expect(c, gdx, dx, N * C, "act_backward");
  }
  /* embeddings: 24 indices into 18 rows of 12; positions of [2, 12, 12] */
  int64_t idx[24];
  for (int i = 0; i < 24; i++) idx[i] = (i * 7) % 18;
  int64_t *gidx = f64chk_up(c, idx, sizeof idx);
  k->embedding_forward(x, idx, W, N, C), g->embedding_forward(gx, gidx, gW, N, C);
  f64chk_expect(c, gx, x, N * C, "embedding_forward");
  k->embedding_backward(dW, dx, idx, N, C), g->embedding_backward(gdW, gdx, gidx, N, C);
  f64chk_expect(c, gdW, dW, OC * C, "embedding_backward");
  k->posemb_forward(dx, x, W, 2, 12, 12), g->posemb_forward(gdx, gx, gW, 2, 12, 12);
  f64chk_expect(c, gdx, dx, N * C, "posemb_forward");
  k->posemb_backward(x, W, dx, 2, 12, 12), g->posemb_backward(gx, gW, gdx, 2, 12, 12);
  f64chk_expect(c, gx, x, N * C, "posemb_backward dinp");
  f64chk_expect(c, gW, W, OC * C, "posemb_backward dW");
  /* layer norm over rows of 12 (weight and bias: rows of W) */
  double *st = f64chk_rnd(c, 28, 2 * N, 0, 0), *gst = f64chk_upd(c, st, 2 * N);
  k->layernorm_forward(dx, st, st + N, x, W, W + C, N, C, 1e-5);
  g->layernorm_forward(gdx, gst, gst + N, gx, gW, gW + C, N, C, 1e-5);
  f64chk_expect(c, gdx, dx, N * C, "layernorm_forward");
  f64chk_expect(c, gst, st, 2 * N, "layernorm_forward mean, rstd");
  /* dinp a buffer of its own: the cpu finishes dw of a row before writing its
   * dinp, the device all dinp before dw, so an alias of inp differs */
  double *di = f64chk_rnd(c, 50, N * C, -1, 1), *gdi = f64chk_upd(c, di, N * C);
  k->layernorm_backward(di, dW, dW + C, dx, x, W, st, st + N, N, C);
  g->layernorm_backward(gdi, gdW, gdW + C, gdx, gx, gW, gst, gst + N, N, C);
  f64chk_expect(c, gdi, di, N * C, "layernorm_backward dinp");
  f64chk_expect(c, gdW, dW, 2 * C, "layernorm_backward dw, db");
  /* attention: qkv [2, 4, 3 * 6] (N * C = 24 * 12 = 288 >= 144), 2 heads */
  double *att = f64chk_rnd(c, 29, 2 * 2 * 4 * 4, 0, 0), *gatt = f64chk_upd(c, att, 64);
  assert_int_equal(k->attention_forward(out, att, x, 2, 4, 6, 2), 0);
  assert_int_equal(g->attention_forward(gout, gatt, gx, 2, 4, 6, 2), 0);
  f64chk_expect(c, gout, out, 48, "attention_forward");
  f64chk_expect(c, gatt, att, 64, "attention_forward probabilities");
  assert_int_equal(k->attention_backward(dx, dout, x, att, 2, 4, 6, 2), 0);
  assert_int_equal(g->attention_backward(gdx, gdout, gx, gatt, 2, 4, 6, 2), 0);
  f64chk_expect(c, gdx, dx, 144, "attention_backward");
  /* cross entropy: 24 rows of 18 logits */
  int64_t t[24];
  for (int i = 0; i < 24; i++) t[i] = (i * 5) % 18;
  int64_t *gt = f64chk_up(c, t, sizeof t);
  f64chk_expect_scalar(c, g->cross_entropy_forward(gout, gt, N, OC), k->cross_entropy_forward(out, t, N, OC),
                       "cross_entropy_forward");
  k->cross_entropy_backward(dout, out, t, N, OC, 0.7), g->cross_entropy_backward(gdout, gout, gt, N, OC, 0.7);
  f64chk_expect(c, gdout, dout, N * OC, "cross_entropy_backward");
  f64chk_done(c);
}

/* The kernels of f64_ops.c's ops: where (broadcast, and one gradient
 * buffer for both sides), max/min over a dim, topk, dropout, every elementwise
 * loss (BCE_LOGITS with a pos_weight), RMSprop (centered, momentum),
 * Adagrad and Adadelta */
static void f64chk_more(f64chk *c) {
  const fsB_f64_kernels *k = &fsB_f64_cpu, *g = c->be->f64;
  /* where(cond [4, 1, 5], a [3, 1], b [4, 3, 5]) */
  fsU_bcast bc = {.rank = 3, .shape = {4, 3, 5}, .numel = 60};
  int64_t cs[3] = {4, 1, 5}, as[2] = {3, 1}, cond[20];
  fsU_bcast_strides(3, cs, 3, bc.shape, bc.st[0]);
  fsU_bcast_strides(2, as, 3, bc.shape, bc.st[1]);
  fsU_bcast_strides(3, bc.shape, 3, bc.shape, bc.st[2]);
  for (int i = 0; i < 20; i++) cond[i] = (i * 7) % 3 == 0;
  double *a = f64chk_rnd(c, 30, 3, -1, 1), *b = f64chk_rnd(c, 31, 60, -1, 1), *o = f64chk_rnd(c, 32, 60, 0, 0);
  double *da = f64chk_rnd(c, 33, 3, -1, 1), *db = f64chk_rnd(c, 34, 60, -1, 1), *dout = f64chk_rnd(c, 35, 60, -1, 1);
  int64_t *gcond = f64chk_up(c, cond, sizeof cond);
  double *ga = f64chk_upd(c, a, 3), *gb = f64chk_upd(c, b, 60), *go = f64chk_upd(c, o, 60);
  double *gda = f64chk_upd(c, da, 3), *gdb = f64chk_upd(c, db, 60), *gdout = f64chk_upd(c, dout, 60);
  k->where_forward(&bc, cond, a, b, o), g->where_forward(&bc, gcond, ga, gb, go);
  f64chk_expect(c, go, o, 60, "where_forward");
  k->where_backward(&bc, cond, da, db, dout), g->where_backward(&bc, gcond, gda, gdb, gdout);
  f64chk_expect(c, gda, da, 3, "where_backward da");
  f64chk_expect(c, gdb, db, 60, "where_backward db");
  fsU_bcast same = bc; /* where(cond, x, x): both gradients into one buffer */
  memcpy(same.st[1], same.st[2], sizeof same.st[1]);
  k->where_backward(&same, cond, db, db, dout), g->where_backward(&same, gcond, gdb, gdb, gdout);
  f64chk_expect(c, gdb, db, 60, "where_backward, one buffer");
  /* max and min over the middle dim of [4, 3, 5], a NaN in one column */
  int64_t idx[20], *gidx = f64chk_up(c, idx, sizeof idx);
  b[17] = NAN;
  gb = f64chk_upd(c, b, 60);
  for (int mx = 0; mx < 2; mx++) {
    k->extreme_forward(mx, 4, 3, 5, b, o, idx), g->extreme_forward(mx, 4, 3, 5, gb, go, gidx);
    f64chk_expect(c, go, o, 20, mx ? "max" : "min");
    int64_t got[20];
    assert_int_equal(c->be->to_host(got, gidx, sizeof got), 0);
    assert_memory_equal(got, idx, sizeof got);
    k->extreme_backward(4, 3, 5, db, dout, idx), g->extreme_backward(4, 3, 5, gdb, gdout, gidx);
    f64chk_expect(c, gdb, db, 60, mx ? "max backward" : "min backward");
  }
  /* the 2 largest and smallest over the middle dim of [4, 3, 5], the NaN among them */
  int64_t tki[40], *gtki = f64chk_up(c, tki, sizeof tki);
  for (int lg = 0; lg < 2; lg++) {
    assert_int_equal(k->topk_forward(lg, 4, 3, 5, 2, b, o, tki), 0);
    assert_int_equal(g->topk_forward(lg, 4, 3, 5, 2, gb, go, gtki), 0);
    f64chk_expect(c, go, o, 40, lg ? "topk largest" : "topk smallest");
    int64_t got[40];
    assert_int_equal(c->be->to_host(got, gtki, sizeof got), 0);
    assert_memory_equal(got, tki, sizeof got);
    k->topk_backward(4, 3, 5, 2, db, dout, tki), g->topk_backward(4, 3, 5, 2, gdb, gdout, gtki);
    f64chk_expect(c, gdb, db, 60, "topk backward");
  }
  /* dropout: the mask of key 7, p 0.3 and 1 */
  for (int i = 0; i < 2; i++) {
    double p = i ? 1.0 : 0.3;
    k->dropout_forward(o, dout, 60, p, 7), g->dropout_forward(go, gdout, 60, p, 7);
    f64chk_expect(c, go, o, 60, "dropout_forward");
    k->dropout_backward(db, dout, 60, p, 7), g->dropout_backward(gdb, gdout, 60, p, 7);
    f64chk_expect(c, gdb, db, 60, "dropout_backward");
  }
  /* the elementwise losses of x in (0, 1) (BCE's probabilities) against y in
   * (0, 1), with a pos_weight of 5 over the last dim */
  double *x = f64chk_rnd(c, 36, 60, 0.05, 0.95), *y = f64chk_rnd(c, 37, 60, 0.05, 0.95);
  double *pw = f64chk_rnd(c, 38, 5, 0.5, 2);
  double *gx = f64chk_upd(c, x, 60), *gy = f64chk_upd(c, y, 60), *gpw = f64chk_upd(c, pw, 5);
  for (int op = FSN_MSE; op <= FSN_KL_DIV; op++)
    for (int v = 0; v < 2; v++) {
      char what[64];
      double param = op == FSN_KL_DIV ? v : 0.2 + v;
      const double *w = op == FSN_BCE_LOGITS && v ? pw : NULL, *gw = w ? gpw : NULL;
      snprintf(what, sizeof what, "loss %d, variant %d", op, v);
      k->ploss_forward(op, param, w, 5, o, x, y, 60), g->ploss_forward(op, param, gw, 5, go, gx, gy, 60);
      f64chk_expect(c, go, o, 60, what);
      k->ploss_backward(op, param, w, 5, da, db, dout, x, y, 3);
      g->ploss_backward(op, param, gw, 5, gda, gdb, gdout, gx, gy, 3);
      k->ploss_backward(op, param, w, 5, NULL, db, dout, x, y, 60);
      g->ploss_backward(op, param, gw, 5, NULL, gdb, gdout, gx, gy, 60);
      f64chk_expect(c, gda, da, 3, what);
      f64chk_expect(c, gdb, db, 60, what);
    }
  /* RMSprop centered with momentum, Adagrad, Adadelta: two steps each */
  double *p = f64chk_rnd(c, 39, 60, -1, 1), *s0 = f64chk_rnd(c, 40, 60, 0, 0), *s1 = f64chk_rnd(c, 41, 60, 0, 0);
  double *s2 = f64chk_rnd(c, 42, 60, 0, 0), *gp = f64chk_upd(c, p, 60), *gs0 = f64chk_upd(c, s0, 60);
  double *gs1 = f64chk_upd(c, s1, 60), *gs2 = f64chk_upd(c, s2, 60);
  for (int step = 1; step <= 2; step++) {
    fsB_update r = {.kind = FSB_UPD_RMSPROP, .n = 60, .lr = 0.01, .alpha = 0.9, .eps = 1e-8, .wd = 1e-3,
                    .momentum = 0.5, .maximize = step == 2};
    k->rmsprop_update(&r, p, x, s0, s1, s2), g->rmsprop_update(&r, gp, gx, gs0, gs1, gs2);
    fsB_update u = {.kind = FSB_UPD_ADAGRAD, .n = 60, .lr = 0.1 / step, .eps = 1e-10, .wd = 1e-3};
    k->adagrad_update(&u, p, y, s2), g->adagrad_update(&u, gp, gy, gs2);
    fsB_update d = {.kind = FSB_UPD_ADADELTA, .n = 60, .lr = 1.0, .rho = 0.9, .eps = 1e-6, .wd = 1e-3};
    k->adadelta_update(&d, p, dout, s0, s1), g->adadelta_update(&d, gp, gdout, gs0, gs1);
  }
  f64chk_expect(c, gp, p, 60, "rmsprop, adagrad, adadelta: parameter");
  f64chk_expect(c, gs0, s0, 60, "rmsprop/adadelta square_avg");
  f64chk_expect(c, gs1, s1, 60, "rmsprop grad_avg / adadelta acc_delta");
  f64chk_expect(c, gs2, s2, 60, "rmsprop momentum / adagrad sum");
  f64chk_done(c);
}

/* The convolutional layers and the normalizations (f64_cnn_kernels.h), on a
 * device that has them: a grouped, strided, padded, dilated convolution, a
 * pointwise one, the channel bias, max and average pooling (with padding,
 * adaptive), batch norm training (running statistics) and not, group norm,
 * RMS norm, each forward and backward */
static void f64chk_cnn(f64chk *c) {
  const fsB_f64_cnn *k = fsB_f64_cpu.cnn, *g = c->be->f64->cnn;
  assert_non_null(g);
  /* x [3, 4, 7, 6] by W [6, 2, 3, 2] in 2 groups: stride (2, 1), padding (1, 1), dilation (1, 2) */
  fsN_conv cv = {.N = 3, .C = 4, .H = 7, .W = 6, .OC = 6, .KH = 3, .KW = 2, .sh = 2, .sw = 1, .ph = 1, .pw = 1,
                 .dh = 1, .dw = 2, .G = 2, .OH = 4, .OW = 6};
  fsN_conv pw = {.N = 3, .C = 4, .H = 7, .W = 6, .OC = 2, .KH = 1, .KW = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
                 .G = 1, .OH = 7, .OW = 6};
  const int64_t nx = 3 * 4 * 7 * 6, nW = 6 * 2 * 3 * 2, no = 3 * 6 * 4 * 6;
  double *x = f64chk_rnd(c, 40, nx, -1, 1), *W = f64chk_rnd(c, 41, nW, -0.5, 0.5), *b = f64chk_rnd(c, 42, 6, -1, 1);
  /* o and dy serve every layer: as large as x (504 >= the conv's 432 outputs) */
  double *o = f64chk_rnd(c, 43, nx, 0, 0), *dy = f64chk_rnd(c, 44, nx, -1, 1), *dx = f64chk_rnd(c, 45, nx, -1, 1);
  double *dW = f64chk_rnd(c, 46, nW, -1, 1), *db = f64chk_rnd(c, 47, 6, -1, 1);
  double *gx = f64chk_upd(c, x, nx), *gW = f64chk_upd(c, W, nW), *gb = f64chk_upd(c, b, 6), *go = f64chk_upd(c, o, nx);
  double *gdy = f64chk_upd(c, dy, nx), *gdx = f64chk_upd(c, dx, nx), *gdW = f64chk_upd(c, dW, nW);
  double *gdb = f64chk_upd(c, db, 6);
  for (int i = 0; i < 2; i++) {
    const fsN_conv *q = i ? &pw : &cv;
    int64_t n = q->N * q->OC * q->OH * q->OW;
    assert_int_equal(k->conv2d_forward(o, x, W, b, q), 0);
    assert_int_equal(g->conv2d_forward(go, gx, gW, gb, q), 0);
    f64chk_expect(c, go, o, n, "conv2d_forward");
    assert_int_equal(k->conv2d_backward(dx, dW, db, dy, x, W, q), 0);
    assert_int_equal(g->conv2d_backward(gdx, gdW, gdb, gdy, gx, gW, q), 0);
    f64chk_expect(c, gdx, dx, nx, "conv2d_backward dx");
    f64chk_expect(c, gdW, dW, nW, "conv2d_backward dW");
    f64chk_expect(c, gdb, db, 6, "conv2d_backward db");
  }
  k->chanbias_forward(o, b, 3, 6, 24), g->chanbias_forward(go, gb, 3, 6, 24);
  f64chk_expect(c, go, o, no, "chanbias_forward");
  k->chanbias_backward(db, dy, 3, 6, 24), g->chanbias_backward(gdb, gdy, 3, 6, 24);
  f64chk_expect(c, gdb, db, 6, "chanbias_backward");
  /* max pooling 3x2, stride 2, padding 1, dilation (2, 1) over x's 12 planes */
  fsN_conv mp = {.N = 3, .C = 4, .H = 7, .W = 6, .OC = 4, .KH = 3, .KW = 2, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
                 .dh = 2, .dw = 1, .G = 4, .OH = 3, .OW = 4};
  int64_t idx[144], *gidx = f64chk_up(c, idx, sizeof idx);
  k->maxpool2d_forward(o, idx, x, &mp), g->maxpool2d_forward(go, gidx, gx, &mp);
  f64chk_expect(c, go, o, 144, "maxpool2d_forward");
  k->maxpool2d_backward(dx, dy, idx, &mp), g->maxpool2d_backward(gdx, gdy, gidx, &mp);
  f64chk_expect(c, gdx, dx, nx, "maxpool2d_backward");
  /* average pooling 3x3, stride 2, padding 1 (with and without the padding counted), adaptive 3x4 */
  for (int mode = FSN_POOL_EXCL; mode <= FSN_POOL_ADAPTIVE; mode++) {
    fsN_conv ap = {.N = 3, .C = 4, .H = 7, .W = 6, .OC = 4, .KH = 3, .KW = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
                   .dh = 1, .dw = 1, .G = 4, .OH = mode == FSN_POOL_ADAPTIVE ? 3 : 4, .OW = mode == FSN_POOL_ADAPTIVE ? 4 : 3};
    fsN_avgwin w;
    int64_t *mem;
    assert_int_equal(fsN_avgwin_make(&w, &mem, &ap, mode), 0);
    k->avgpool2d_forward(o, x, 12, &w), g->avgpool2d_forward(go, gx, 12, &w);
    f64chk_expect(c, go, o, 144, "avgpool2d_forward");
    k->avgpool2d_backward(dx, dy, 12, &w), g->avgpool2d_backward(gdx, gdy, 12, &w);
    f64chk_expect(c, gdx, dx, nx, "avgpool2d_backward");
    free(mem);
  }
  /* batch norm over x [3, 4, 42]: training (running statistics move), then not */
  double *st = f64chk_rnd(c, 48, 12, 0, 0), *run = f64chk_rnd(c, 49, 8, 0.5, 1.5);
  double *gst = f64chk_upd(c, st, 12), *grun = f64chk_upd(c, run, 8);
  for (int training = 1; training >= 0; training--) {
    k->batchnorm_forward(o, st, st + 4, x, W, b, run, run + 4, 3, 4, 42, training, 0.1, 1e-5);
    g->batchnorm_forward(go, gst, gst + 4, gx, gW, gb, grun, grun + 4, 3, 4, 42, training, 0.1, 1e-5);
    f64chk_expect(c, go, o, nx, "batchnorm_forward");
    f64chk_expect(c, gst, st, 8, "batchnorm_forward mean, rstd");
    f64chk_expect(c, grun, run, 8, "batchnorm_forward running statistics");
    k->batchnorm_backward(dx, dW, db, o, x, W, st, st + 4, 3, 4, 42, training);
    g->batchnorm_backward(gdx, gdW, gdb, go, gx, gW, gst, gst + 4, 3, 4, 42, training);
    f64chk_expect(c, gdx, dx, nx, "batchnorm_backward dx");
    f64chk_expect(c, gdW, dW, 4, "batchnorm_backward dw");
    f64chk_expect(c, gdb, db, 4, "batchnorm_backward db");
  }
  /* group norm, 2 groups of 2 channels; RMS norm over rows of 6 */
  k->groupnorm_forward(o, st, st + 6, x, W, b, 3, 4, 42, 2, 1e-5);
  g->groupnorm_forward(go, gst, gst + 6, gx, gW, gb, 3, 4, 42, 2, 1e-5);
  f64chk_expect(c, go, o, nx, "groupnorm_forward");
  k->groupnorm_backward(dx, dW, db, dy, x, W, st, st + 6, 3, 4, 42, 2);
  g->groupnorm_backward(gdx, gdW, gdb, gdy, gx, gW, gst, gst + 6, 3, 4, 42, 2);
  f64chk_expect(c, gdx, dx, nx, "groupnorm_backward dx");
  f64chk_expect(c, gdW, dW, 4, "groupnorm_backward dw");
  f64chk_expect(c, gdb, db, 4, "groupnorm_backward db");
  double *rs = f64chk_rnd(c, 50, 84, 0, 0), *grs = f64chk_upd(c, rs, 84);
  k->rmsnorm_forward(o, rs, x, W, 84, 6, 1e-6), g->rmsnorm_forward(go, grs, gx, gW, 84, 6, 1e-6);
  f64chk_expect(c, go, o, nx, "rmsnorm_forward");
  k->rmsnorm_backward(dx, dW, dy, x, W, rs, 84, 6), g->rmsnorm_backward(gdx, gdW, gdy, gx, gW, grs, 84, 6);
  f64chk_expect(c, gdx, dx, nx, "rmsnorm_backward dx");
  f64chk_expect(c, gdW, dW, 6, "rmsnorm_backward dw");
  f64chk_done(c);
}

#endif
