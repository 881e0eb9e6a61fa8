/* test_rt_f64.c -- float64 (runtime/tensor/f64.c, runtime/model/optim_f64.c):
 * the dtype's size, name and conversions; the double path's gradients
 * against central differences of the forward in double (linear, every
 * activation and elementwise function, softmax/log_softmax, arithmetic,
 * cross_entropy, matmul/bmm, windows, indexing, sum/mean over a dim,
 * logsumexp, cumsum, mse_loss, where, max/min over a dim, maximum,
 * index_select, every elementwise loss, cross_entropy's options, topk,
 * dropout, index assignment, cat, masked attention, convolutions,
 * pooling, batch/group/RMS norm); gradients in the leaf's dtype; torch's
 * promotion between float64 and float32; what has no double path refuses
 * float64; multinomial's samples from float64 probabilities; the
 * optimizers' double rules; emulated cuda's float64 table against the
 * cpu's, bit for bit, through device pointers (f64_table_check.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "autograd_int.h"
#include "optim.h"
#include "rt_testutil.h"
#include "f64_table_check.h"

static fs_tensor *f64_of(const double *v, int rank, const int64_t *shape) {
  fs_tensor *t = rt_ok(fsT_new(FS_F64, FS_DEV_CPU, rank, shape));
  memcpy(t->data, v, (size_t)t->numel * sizeof *v);
  return t;
}

static void test_dtype(void **state) {
  (void)state;
  assert_int_equal(fsT_dtype_size(FS_F64), 8);
  assert_string_equal(fsT_dtype_name(FS_F64), "float64");
  assert_true(fsT_is_floating(FS_F64) && !fsT_is_float(FS_F64));
  double d[4] = {0.1, -2.75, 1e300, -3.9};
  float f[4];
  int64_t i[4];
  fsT_convert(FS_F32, f, FS_F64, d, 4);
  assert_true(f[0] == 0.1f && f[1] == -2.75f && f[2] == INFINITY);
  fsT_convert(FS_I64, i, FS_F64, d, 4);
  assert_true(i[1] == -2 && i[3] == -3); /* toward zero */
  double back[4];
  fsT_convert(FS_F64, back, FS_F32, f, 4);
  assert_true(back[0] == (double)0.1f && back[1] == -2.75);
  fs_tensor *t = f64_of(d, 1, (int64_t[]){4});
  assert_true(fsT_get(t, 0) == 0.1);
  fs_tensor *c = rt_ok(fsT_to_dtype(t, FS_F32));
  assert_true(fsT_f32(c)[0] == 0.1f);
  assert_int_equal(fsT_set_dtype(c, FS_F64), 0);
  assert_true(fsT_f64(c)[0] == (double)0.1f && c->dtype == FS_F64);
  fsT_release(t);
  fsT_release(c);
}

/* A chain through every double op: x [4, 5] -> linear(W [6, 5], b) -> act
 * -> unary -> * 0.7 + (y / 1.3) -> log_softmax/softmax mix -> sum /
 * cross_entropy.  Returns the scalar loss (float64), on the tape. */
static fs_tensor *chain(fs_tensor *x, fs_tensor *W, fs_tensor *b, int variant) {
  static const fsN_act acts[] = {FSN_RELU, FSN_GELU, FSN_GELU_TANH, FSN_TANH, FSN_SIGMOID, FSN_SILU};
  static const fsU_unary unaries[] = {FSU_EXP, FSU_SQRT, FSU_ABS, FSU_SIN, FSU_COS, FSU_TANH, FSU_SIGMOID,
                                      FSU_POW, FSU_LEAKY_RELU, FSU_MISH, FSU_CLAMP, FSU_RSQRT};
  fs_tensor *h = rt_ok(fsG_linear(x, W, b));
  fs_tensor *a = rt_ok(fsG_act(acts[variant % 6], h));
  fsU_unary u = unaries[variant % 12];
  /* sqrt and rsqrt take exp(a) > 0 */
  fs_tensor *pos = u == FSU_SQRT || u == FSU_RSQRT ? rt_ok(fsG_unary(FSU_EXP, a, 0, 0)) : fsT_retain(a);
  fs_tensor *v = rt_ok(fsG_unary(u, pos, u == FSU_POW ? 3.0 : 0.1, u == FSU_CLAMP ? 0.4 : 0));
  fs_tensor *s = rt_ok(fsG_binary_scalar(FSB_MUL, v, 0.7, false, false));
  fs_tensor *q = rt_ok(fsG_binary_scalar(FSB_DIV, h, 1.3, false, false));
  fs_tensor *z = rt_ok(fsG_binary(variant & 1 ? FSB_SUB : FSB_ADD, s, q));
  fs_tensor *m = rt_ok(fsG_binary(FSB_MUL, z, h));
  fs_tensor *loss;
  if (variant & 2) {
    fs_tensor *t = rt_ok(fsT_new(FS_I64, FS_DEV_CPU, 1, (int64_t[]){4}));
    for (int k = 0; k < 4; k++) fsT_i64(t)[k] = (k * 5 + variant) % 6;
    loss = rt_ok(fsG_cross_entropy(m, t));
    fsT_release(t);
  } else {
    fs_tensor *sm = rt_ok(fsG_softmax(m, variant & 4 ? 0 : 1, variant & 8));
    fs_tensor *w = rt_ok(fsG_binary(FSB_MUL, sm, h));
    loss = rt_ok(fsG_sum(w));
    fsT_release(sm);
    fsT_release(w);
  }
  fs_tensor *all[] = {h, a, pos, v, s, q, z, m};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) fsT_release(all[k]);
  return loss;
}

/* an int64 tensor of shape (rank dims) holding v */
static fs_tensor *i64_of(const int64_t *v, int rank, const int64_t *shape) {
  fs_tensor *t = rt_ok(fsT_new(FS_I64, FS_DEV_CPU, rank, shape));
  memcpy(t->data, v, (size_t)t->numel * sizeof *v);
  return t;
}

/* a + b, consuming both */
static fs_tensor *plus(fs_tensor *a, fs_tensor *b) {
  fs_tensor *s = rt_ok(fsG_binary(FSB_ADD, a, b));
  fsT_release(a);
  fsT_release(b);
  return s;
}

/* sum(t), consuming t */
static fs_tensor *total(fs_tensor *t) {
  fs_tensor *s = rt_ok(fsG_sum(t));
  fsT_release(t);
  return s;
}

/* x [4, 5] W [6, 5] b [6]: x @ W^T (a transposed window and matmul), a
 * strided slice, select, sum/mean over a dim, bmm of the row with itself,
 * rows taken by an index tensor, mse_loss against b (broadcast),
 * logsumexp over a dim (kept or not), the running sums along the other
 * weighted by the values */
static fs_tensor *chain_views(fs_tensor *x, fs_tensor *W, fs_tensor *b, int variant) {
  fs_tensor *t = rt_ok(fsG_transpose(W, 0, 1));
  fs_tensor *p = rt_ok(fsG_matmul(x, t));
  fs_tensor *q = rt_ok(fsG_binary(FSB_ADD, p, b));
  fs_tensor *s = rt_ok(fsG_slice(q, 1, variant % 2, 6, 2));
  fs_tensor *r = rt_ok(fsG_sum_dim(s, variant & 2 ? 0 : 1, variant & 4, variant & 8));
  fs_tensor *r3 = rt_ok(fsG_reshape(r, 3, (int64_t[]){1, 1, r->numel}));
  fs_tensor *c3 = rt_ok(fsG_reshape(r, 3, (int64_t[]){1, r->numel, 1}));
  fs_tensor *o = rt_ok(fsG_bmm(r3, c3));
  fs_tensor *e = rt_ok(fsG_select(q, 0, variant % 4));
  fs_tensor *idx = rt_ok(fsT_new(FS_I64, FS_DEV_CPU, 1, (int64_t[]){3}));
  for (int k = 0; k < 3; k++) fsT_i64(idx)[k] = (k * 2 + variant) % 4; /* repeats: gradients add up */
  fs_tensor *g = rt_ok(fsG_index(q, &(fsG_subscript){.kind = FSG_IX_TENSOR, .t = idx}, 1));
  fs_tensor *m = rt_ok(fsG_mse_loss(g, b));
  fs_tensor *es = rt_ok(fsG_sum(e)), *os = rt_ok(fsG_sum(o)), *d = rt_ok(fsG_binary(FSB_SUB, os, es));
  fs_tensor *loss = rt_ok(fsG_binary(FSB_ADD, d, m));
  fs_tensor *lse = rt_ok(fsG_logsumexp(q, variant & 1, variant & 4));
  fs_tensor *cs = rt_ok(fsG_cumsum(q, !(variant & 1))), *cq = rt_ok(fsG_binary(FSB_MUL, cs, q));
  loss = plus(loss, plus(total(lse), total(cq)));
  fs_tensor *all[] = {t, p, q, s, r, r3, c3, o, e, idx, g, m, es, os, d, cs};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) fsT_release(all[k]);
  return loss;
}

/* x [4, 5] W [6, 5] b [6]: where against a scaled copy, max or min over a
 * dim, maximum, index_select, dropout, topk, index assignment, cat, one elementwise loss (variant % 7) with a
 * reduction, cross_entropy with class weights, smoothing and an ignored
 * row (or probability targets), attention with a boolean mask */
static fs_tensor *chain_ops(fs_tensor *x, fs_tensor *W, fs_tensor *b, int variant) {
  fs_tensor *h = rt_ok(fsG_linear(x, W, b)); /* [4, 6] */
  int64_t cv[24], sel[3] = {5, 0, 5}, tv[4] = {1, 4, 2, 0}, mv[4] = {1, 0, 1, 1};
  for (int k = 0; k < 24; k++) cv[k] = (k * 5 + variant) % 3 == 0;
  fs_tensor *cond = i64_of(cv, 2, (int64_t[]){4, 6}), *idx = i64_of(sel, 1, (int64_t[]){3});
  fs_tensor *hs = rt_ok(fsG_binary_scalar(FSB_MUL, h, 0.3, false, false)), *w = rt_ok(fsG_where(cond, hs, h));
  fs_tensor *mi, *mx = rt_ok(fsG_extreme(variant & 1, w, 1, variant & 2, &mi));
  assert_int_equal(mi->dtype, FS_I64);
  fs_tensor *mt = total(mx), *loss = rt_ok(fsG_binary_scalar(FSB_MUL, mt, 0.5, false, false));
  fsT_release(mt);
  loss = plus(loss, total(rt_ok(fsG_binary_op(FSU_MAXIMUM, w, hs))));
  /* the elementwise loss of index_select(w) [4, 3] (its sigmoid for BCE) against y */
  double yv[12], pwv[3] = {2.0, 0.5, 1.5};
  for (int k = 0; k < 12; k++) yv[k] = 0.1 + 0.07 * k;
  fs_tensor *y = f64_of(yv, 2, (int64_t[]){4, 3}), *pw = f64_of(pwv, 1, (int64_t[]){3});
  fs_tensor *s = rt_ok(fsG_index_select(w, 1, idx));
  fsN_ploss kind = (fsN_ploss)(variant % 7);
  fs_tensor *in = kind == FSN_BCE ? rt_ok(fsG_unary(FSU_SIGMOID, s, 0, 0)) : fsT_retain(s);
  double param = kind == FSN_KL_DIV ? variant / 8 : kind == FSN_HUBER ? 0.7 : 0.5;
  fsG_reduction red = kind == FSN_KL_DIV ? FSG_BATCHMEAN : (fsG_reduction)(variant % 3);
  fs_tensor *pl =
    rt_ok(fsG_ploss(kind, in, y, param, kind == FSN_BCE_LOGITS ? pw : NULL, kind == FSN_BCE ? pw : NULL, red));
  loss = plus(loss, total(pl));
  /* dropout of w (p 0.3, a fixed key: the same mask in every evaluation), squared */
  fs_tensor *dr = rt_ok(fsG_dropout(w, 0.3, 77));
  loss = plus(loss, total(rt_ok(fsG_binary(FSB_MUL, dr, dr))));
  /* the 2 largest or smallest of each row of w, doubled */
  fs_tensor *ti, *tk = rt_ok(fsG_topk(w, 2, 1, variant & 1, &ti));
  loss = plus(loss, total(rt_ok(fsG_binary(FSB_MUL, tk, tk))));
  /* a copy of w [4, 6] with s's first column [4] written at (r, c[r]) (distinct: torch gives a
   * repeated position's every value its gradient, no derivative of the forward), squared */
  int64_t rv[4] = {0, 1, 3, 2}, colv[4] = {1, 5, 2, 2};
  fs_tensor *rows = i64_of(rv, 1, (int64_t[]){4}), *cols = i64_of(colv, 1, (int64_t[]){4});
  fs_tensor *s0 = rt_ok(fsG_select(s, 1, 0));
  fsG_subscript at[2] = {{.kind = FSG_IX_TENSOR, .t = rows}, {.kind = FSG_IX_TENSOR, .t = cols}};
  fs_tensor *w1 = rt_ok(fsG_binary_scalar(FSB_MUL, w, 1.0, false, false)); /* written in place without grad */
  fs_tensor *put = rt_ok(fsG_index_put(w1, at, 2, s0));
  loss = plus(loss, total(rt_ok(fsG_binary(FSB_MUL, put, put))));
  /* cat of w [4, 6] and s [4, 3] along dim 1, squared */
  fs_tensor *ws[2] = {w, s}, *wc = rt_ok(fsG_cat(ws, 2, 1));
  loss = plus(loss, total(rt_ok(fsG_binary(FSB_MUL, wc, wc))));
  /* cross_entropy over w's rows */
  fs_tensor *t = i64_of(tv, 1, (int64_t[]){4}), *cw = f64_of((double[]){1, 2, 0.5, 1, 3, 1}, 1, (int64_t[]){6});
  fs_tensor *pr = rt_ok(fsG_softmax(hs, 1, false));
  fs_tensor *ce = variant & 4 ? rt_ok(fsG_nll(w, pr, NULL, true, -100, 0.2, FSG_SUM))
                              : rt_ok(fsG_nll(w, t, cw, !(variant & 8), 2, variant & 1 ? 0.1 : 0, FSG_MEAN));
  loss = plus(loss, ce);
  /* attention of h as [1, 2, 2, 6] with itself, a boolean mask [2, 2] */
  fs_tensor *q = rt_ok(fsG_reshape(h, 4, (int64_t[]){1, 2, 2, 6})), *m = i64_of(mv, 2, (int64_t[]){2, 2});
  loss = plus(loss, total(rt_ok(fsG_scaled_dot_product_attention(q, q, q, m, 0, false, 0))));
  fs_tensor *all[] = {h, cond, idx, hs, w, mi, y, pw, s, in, rows, cols, s0, w1, put, wc, tk, ti, dr, t, cw, pr, q, m};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) fsT_release(all[k]);
  return loss;
}

/* The convolutional layers and the norms (f64_cnn.c): x [4, 5] as one image
 * [1, 1, 4, 5] and as a sequence [1, 4, 5]; W's first 27 values as a conv2d
 * weight [3, 1, 3, 3] (also conv_transpose2d's), 24 of them as a conv1d
 * weight [2, 4, 3]; slices of b as biases and norms' weights.  conv2d ->
 * batch norm (training, or on fixed running statistics) -> group norm (1
 * or 3 groups) -> max pool (padded or not) -> conv_transpose2d (stride 2)
 * -> average pool (padding counted or not) -> adaptive average pool -> RMS
 * norm, squared and summed, plus conv1d's output squared and summed. */
static fs_tensor *chain_cnn(fs_tensor *x, fs_tensor *W, fs_tensor *b, int variant) {
  static const int64_t one[2] = {1, 1}, two[2] = {2, 2}, three[2] = {3, 3}, zero[2] = {0, 0};
  int64_t three1 = 3, two1 = 2;
  fs_tensor *rm = f64_of((double[]){0.1, -0.2, 0.3}, 1, &three1), *rv = f64_of((double[]){0.5, 1.5, 2.0}, 1, &three1);
  fs_tensor *img = rt_ok(fsG_reshape(x, 4, (int64_t[]){1, 1, 4, 5})), *seq = rt_ok(fsG_reshape(x, 3, (int64_t[]){1, 4, 5}));
  fs_tensor *flat = rt_ok(fsG_reshape(W, 1, (int64_t[]){30}));
  fs_tensor *w27 = rt_ok(fsG_slice(flat, 0, 0, 27, 1)), *Wc = rt_ok(fsG_reshape(w27, 4, (int64_t[]){3, 1, 3, 3}));
  fs_tensor *w24 = rt_ok(fsG_slice(flat, 0, variant % 6, variant % 6 + 24, 1));
  fs_tensor *W1 = rt_ok(fsG_reshape(w24, 3, (int64_t[]){2, 4, 3}));
  fs_tensor *b0 = rt_ok(fsG_slice(b, 0, 0, 3, 1)), *b1 = rt_ok(fsG_slice(b, 0, 3, 6, 1));
  fs_tensor *b2 = rt_ok(fsG_slice(b, 0, 5, 6, 1)), *b3 = rt_ok(fsG_slice(b, 0, 1, 3, 1));
  bool eval = variant & 1;
  fs_tensor *c = rt_ok(fsG_conv(2, img, Wc, b0, one, one, one, 1));
  fs_tensor *n = rt_ok(fsG_batch_norm(c, eval ? rm : NULL, eval ? rv : NULL, b1, b0, !eval, 0.1, 1e-5));
  fs_tensor *g = rt_ok(fsG_group_norm(n, variant & 2 ? 3 : 1, b1, b0, 1e-5));
  fs_tensor *mp = rt_ok(fsG_max_pool2d(g, two, one, variant & 4 ? one : zero, one, false));
  fs_tensor *ct = rt_ok(fsG_conv_transpose2d(mp, Wc, b2, two, zero, zero, one, 1));
  fs_tensor *ap = rt_ok(fsG_avg_pool2d(ct, three, two, one, false, variant & 8));
  fs_tensor *aa = rt_ok(fsG_adaptive_avg_pool2d(ap, two));
  fs_tensor *r = rt_ok(fsG_rms_norm(aa, 1, &two1, b3, 1e-6)), *rr = rt_ok(fsG_binary(FSB_MUL, r, r));
  fs_tensor *c1 = rt_ok(fsG_conv(1, seq, W1, NULL, one, one, one, 1)), *cc = rt_ok(fsG_binary(FSB_MUL, c1, c1));
  fs_tensor *s1 = rt_ok(fsG_sum(rr)), *s2 = rt_ok(fsG_sum(cc)), *loss = rt_ok(fsG_binary(FSB_ADD, s1, s2));
  fs_tensor *all[] = {rm, rv, img, seq, flat, w27, Wc, w24, W1, b0, b1, b2, b3, c, n, g, mp, ct, ap, aa, r, rr, c1, cc, s1, s2};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) fsT_release(all[k]);
  return loss;
}

typedef fs_tensor *(*chain_fn)(fs_tensor *x, fs_tensor *W, fs_tensor *b, int variant);

static double loss_at(chain_fn f, fs_tensor *x, fs_tensor *W, fs_tensor *b, int variant) {
  bool old = fsG_set_grad_enabled(false);
  fs_tensor *l = f(x, W, b, variant);
  fsG_set_grad_enabled(old);
  double v = fsT_f64(l)[0];
  fsT_release(l);
  return v;
}

/* every leaf's float64 gradient against central differences of f */
static void check_gradients(chain_fn f) {
  for (int variant = 0; variant < 16; variant++) {
    double xv[20], wv[30], bv[6];
    for (int k = 0; k < 20; k++) xv[k] = sin(k * 1.7 + variant) * 1.5;
    for (int k = 0; k < 30; k++) wv[k] = cos(k * 0.9 + variant) * 0.6;
    for (int k = 0; k < 6; k++) bv[k] = 0.1 * k - 0.2;
    fs_tensor *x = f64_of(xv, 2, (int64_t[]){4, 5}), *W = f64_of(wv, 2, (int64_t[]){6, 5});
    fs_tensor *b = f64_of(bv, 1, (int64_t[]){6});
    x->requires_grad = W->requires_grad = b->requires_grad = true;
    fs_tensor *l = f(x, W, b, variant);
    assert_int_equal(l->dtype, FS_F64);
    assert_int_equal(fsG_backward(l), 0);
    fsT_release(l);
    fs_tensor *leaves[] = {x, W, b};
    for (int j = 0; j < 3; j++) {
      fs_tensor *t = leaves[j];
      assert_non_null(t->grad);
      assert_int_equal(t->grad->dtype, FS_F64);
      for (int64_t k = 0; k < t->numel; k++) {
        double keep = fsT_f64(t)[k], h = 1e-6;
        fsT_f64(t)[k] = keep + h;
        double up = loss_at(f, x, W, b, variant);
        fsT_f64(t)[k] = keep - h;
        double down = loss_at(f, x, W, b, variant);
        fsT_f64(t)[k] = keep;
        double num = (up - down) / (2 * h), got = fsT_f64(t->grad)[k];
        if (fabs(num - got) > 1e-8 * (1 + fabs(num)))
          fail_msg("variant %d leaf %d [%lld]: backward %.12g, central difference %.12g", variant, j, (long long)k,
                   got, num);
      }
    }
    fsT_release(x);
    fsT_release(W);
    fsT_release(b);
  }
}

static void test_gradients(void **state) {
  (void)state;
  check_gradients(chain);
  check_gradients(chain_views);
  check_gradients(chain_ops);
  check_gradients(chain_cnn);
}

/* torch's promotion: a float64 with dims wins over float32; a 0-dim float64
 * does not win over float32 with dims; a float32 leaf cast to float64 gets a
 * float32 gradient. */
static void test_promotion_and_casts(void **state) {
  (void)state;
  int64_t s3[1] = {3};
  fs_tensor *f = rt_rand("f", -1, 1, 1, s3), *d = f64_of((double[]){0.5, 1.5, -2}, 1, s3);
  fs_tensor *d0 = f64_of((double[]){0.1}, 0, NULL);
  f->requires_grad = true;
  fs_tensor *a = rt_ok(fsG_binary(FSB_ADD, f, d)), *m = rt_ok(fsG_binary(FSB_MUL, f, d0));
  assert_int_equal(a->dtype, FS_F64);
  assert_int_equal(m->dtype, FS_F32);
  assert_true(fsT_f64(a)[0] == (double)fsT_f32(f)[0] + 0.5);
  fs_tensor *sa = rt_ok(fsG_sum(a)), *sm = rt_ok(fsG_sum(m));
  fs_tensor *total = rt_ok(fsG_binary(FSB_ADD, sa, sm));
  assert_int_equal(total->dtype, FS_F64);
  assert_int_equal(fsG_backward(total), 0);
  assert_int_equal(f->grad->dtype, FS_F32);
  assert_true(fabsf(fsT_f32(f->grad)[1] - (1.0f + 0.1f)) < 1e-6f);
  /* a Python float stays a double against a float64 tensor */
  fs_tensor *p = rt_ok(fsG_binary_scalar(FSB_MUL, d, 0.1, false, false));
  assert_true(fsT_f64(p)[1] == 1.5 * 0.1);
  fs_tensor *all[] = {f, d, d0, a, m, sa, sm, total, p};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) fsT_release(all[k]);
}

/* What has no double path refuses float64 by name: every op dispatches
 * float64 before fsG_low_begin, whose refusal guards one that would not;
 * a float64 value requiring grad written into a float32 tensor */
static void test_refusal(void **state) {
  (void)state;
  int64_t s[2] = {2, 3};
  fs_tensor *x = f64_of((double[]){1, 2, 3, 4, 5, 6}, 2, s);
  fsG_low lp;
  assert_true(fsG_low_begin_in("fsG_new_op", &lp, FSG_AC_KEEP, 1, &x) && lp.failed);
  assert_non_null(strstr(fsT_error(), "new_op: this op has no float64 path"));
  fs_tensor *f = rt_rand("f", -1, 1, 2, s), *row = f64_of((double[]){7, 8, 9}, 1, (int64_t[]){3});
  row->requires_grad = true;
  fsG_subscript first = {.kind = FSG_IX_INT, .i = 0};
  assert_null(fsG_index_put(f, &first, 1, row));
  assert_non_null(strstr(fsT_error(), "index_put_: this op has no float64 backward into a float32 tensor"));
  fsT_release(f);
  fsT_release(row);
  /* the layers do not promote: a float64 image with a float32 weight is torch's error */
  static const int64_t one[2] = {1, 1};
  fs_tensor *img = f64_of((double[]){1, 2, 3, 4, 5, 6}, 4, (int64_t[]){1, 1, 2, 3});
  fs_tensor *w = rt_rand("w", -1, 1, 4, (int64_t[]){1, 1, 1, 1});
  assert_null(fsG_conv(2, img, w, NULL, one, one, one, 1));
  assert_string_equal(fsT_error(), "expected scalar type Double but found Float");
  assert_null(fsG_group_norm(img, 1, w, NULL, 1e-5));
  assert_string_equal(fsT_error(), "expected scalar type Double but found Float");
  fsT_release(img);
  fsT_release(w);
  fsT_release(x);
}

/* multinomial of float64 probabilities: the weights in double against the
 * script's float32 uniforms, so values a float32 copy holds exactly draw
 * that copy's samples, with and without replacement; a weight below
 * float32's range is still a weight (the copy flushes it to 0, so its
 * last draw is the lowest unused zero instead) */
static void test_multinomial(void **state) {
  (void)state;
  double v[24], total[3] = {0};
  for (int k = 0; k < 24; k++) total[k / 8] += v[k] = k % 5 == 3 ? 0 : (k % 7 + 1) / 16.0;
  fs_tensor *p = f64_of(v, 2, (int64_t[]){3, 8}), *p32 = rt_ok(fsT_to_dtype(p, FS_F32));
  for (int repl = 0; repl < 2; repl++) {
    int64_t n = repl ? 500 : 6;
    fs_tensor *a = rt_ok(fsG_multinomial(p, n, repl, 21, 5)), *b = rt_ok(fsG_multinomial(p32, n, repl, 21, 5));
    assert_int_equal(a->numel, 3 * n);
    assert_memory_equal(fsT_i64(a), fsT_i64(b), (size_t)a->numel * sizeof(int64_t));
    int64_t hits[24] = {0};
    for (int64_t k = 0; k < a->numel; k++) hits[k / n * 8 + fsT_i64(a)[k]]++;
    for (int c = 0; c < 24; c++) { /* zeros never drawn; each drawn once at most, or near its share */
      assert_true(v[c] > 0 || hits[c] == 0);
      assert_true(repl ? fabs((double)hits[c] / n - v[c] / total[c / 8]) < 0.06 : hits[c] <= 1);
    }
    fsT_release(a);
    fsT_release(b);
  }
  fs_tensor *tiny = f64_of((double[]){0, 1e-50, 1}, 1, (int64_t[]){3}), *t32 = rt_ok(fsT_to_dtype(tiny, FS_F32));
  fs_tensor *a = rt_ok(fsG_multinomial(tiny, 2, false, 21, 5)), *b = rt_ok(fsG_multinomial(t32, 2, false, 21, 5));
  assert_true(fsT_i64(a)[0] == 2 && fsT_i64(a)[1] == 1);
  assert_true(fsT_i64(b)[0] == 2 && fsT_i64(b)[1] == 0);
  fs_tensor *all[] = {p, p32, tiny, t32, a, b};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) fsT_release(all[k]);
}

/* dropout in double: each element dropped (0) or kept as x / (1 - p)
 * computed in double; p = 1 drops everything */
static void test_dropout(void **state) {
  (void)state;
  double v[64];
  for (int k = 0; k < 64; k++) v[k] = 0.1 * k - 3.0;
  fs_tensor *x = f64_of(v, 1, (int64_t[]){64});
  fs_tensor *d = rt_ok(fsG_dropout(x, 0.3, 9)), *all = rt_ok(fsG_dropout(x, 1.0, 9));
  assert_int_equal(d->dtype, FS_F64);
  int kept = 0;
  for (int k = 0; k < 64; k++) {
    double y = fsT_f64(d)[k];
    assert_true(y == 0 || y == v[k] * (1 / (1 - 0.3)));
    kept += y != 0;
    assert_true(fsT_f64(all)[k] == 0);
  }
  assert_true(kept > 32 && kept < 60); /* about 45 of 64 */
  fsT_release(x);
  fsT_release(d);
  fsT_release(all);
}

static void test_optimizers(void **state) {
  (void)state;
  double p[2] = {1.0, -2.0}, g[2] = {0.5, 0.25}, buf[2] = {0, 0};
  fsB_update u = {.kind = FSB_UPD_SGD, .n = 2, .lr = 0.1, .momentum = 0.9, .first = true};
  assert_int_equal(fsO_update_f64(&u, &fsB_cpu, p, g, (double *[3]){buf, NULL, NULL}), 0);
  assert_true(p[0] == 1.0 + -0.1 * 0.5 && buf[0] == 0.5);
  u.first = false;
  assert_int_equal(fsO_update_f64(&u, &fsB_cpu, p, g, (double *[3]){buf, NULL, NULL}), 0);
  assert_true(buf[1] == 0.25 * 0.9 + 0.25);
  /* Adam's first step moves each parameter by lr (m / sqrt(v) = sign g) */
  double q[2] = {1.0, -2.0}, m[2] = {0, 0}, v[2] = {0, 0};
  fsB_update a = {.kind = FSB_UPD_ADAM, .n = 2, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 0, .step = 1};
  assert_int_equal(fsO_update_f64(&a, &fsB_cpu, q, g, (double *[3]){m, v, NULL}), 0);
  assert_true(fabs(q[0] - 0.99) < 1e-15 && fabs(q[1] + 2.01) < 1e-15);
  /* RMSprop's first step: sq = (1 - alpha) g^2, p -= lr g / (sqrt(sq) + eps) */
  double r0[2] = {1.0, -2.0}, sq[2] = {0, 0};
  fsB_update r = {.kind = FSB_UPD_RMSPROP, .n = 2, .lr = 0.01, .alpha = 0.99, .eps = 1e-8};
  assert_int_equal(fsO_update_f64(&r, &fsB_cpu, r0, g, (double *[3]){sq, NULL, NULL}), 0);
  assert_true(sq[0] == (1 - 0.99) * 0.5 * 0.5 && r0[0] == 1.0 + -0.01 * 0.5 / (sqrt(sq[0]) + 1e-8));
}

/* emulated cuda's float64 kernels are the cpu's, bit for bit, and never
 * read their device pointers on the host (that would fault) */
static void test_emulated_cuda_table(void **state) {
  (void)state;
  f64chk c = {.be = &fsB_emu_cuda, .rtol = 0};
  f64chk_elementwise(&c);
  f64chk_ops(&c);
  f64chk_layers(&c);
  f64chk_more(&c);
  f64chk_cnn(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dtype), cmocka_unit_test(test_gradients), cmocka_unit_test(test_promotion_and_casts),
    cmocka_unit_test(test_refusal), cmocka_unit_test(test_multinomial), cmocka_unit_test(test_dropout),
    cmocka_unit_test(test_optimizers),
    cmocka_unit_test(test_emulated_cuda_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
