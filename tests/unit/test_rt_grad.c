/* test_rt_grad.c -- every layer's and loss's backward against central finite
 * differences through the autograd tape, plus tape semantics: accumulation,
 * no_grad, graph freeing, scalar arithmetic, comparisons. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "autograd_int.h"
#include "cnn.h"
#include "rt_testutil.h"

#define MAXIN 3

/* The function under test: builds an output from inputs on the tape. */
typedef fs_tensor *(*fn_t)(fs_tensor **in, const void *ctx);

/* loss = sum(f(in) * R) for a fixed random R, so every output element
 * weighs in differently. */
static double weighted_loss(fn_t f, fs_tensor **in, const void *ctx, fs_tensor *R, fs_tensor **keep) {
  fs_tensor *out = rt_ok(f(in, ctx));
  fs_tensor *prod = rt_ok(fsG_binary(FSB_MUL, out, R));
  fs_tensor *loss = rt_ok(fsG_sum(prod));
  double v;
  assert_int_equal(fsG_item(loss, &v), 0);
  fsT_release(out);
  fsT_release(prod);
  if (keep) *keep = loss;
  else fsT_release(loss);
  return v;
}

/* Checks d loss / d in[k] for every float input with requires_grad. */
static void gradcheck(fn_t f, fs_tensor **in, int nin, const void *ctx, double h, double tol) {
  fs_tensor *probe = rt_ok(f(in, ctx));
  fs_tensor *R = rt_rand("R", -1, 1, probe->rank, probe->shape);
  fsT_release(probe);
  fs_tensor *loss;
  weighted_loss(f, in, ctx, R, &loss);
  assert_int_equal(fsG_backward(loss), 0);
  fsT_release(loss);
  bool old = fsG_set_grad_enabled(false);
  for (int k = 0; k < nin; k++) {
    fs_tensor *x = in[k];
    if (!x || !x->requires_grad) continue;
    assert_non_null(x->grad);
    float *xv = fsT_f32(x);
    for (int64_t i = 0; i < x->numel; i++) {
      float save = xv[i];
      xv[i] = save + (float)h;
      double lp = weighted_loss(f, in, ctx, R, NULL);
      xv[i] = save - (float)h;
      double lm = weighted_loss(f, in, ctx, R, NULL);
      xv[i] = save;
      double num = (lp - lm) / (2 * h), ana = fsT_f32(x->grad)[i];
      if (fabs(num - ana) > tol * (1 + fabs(num)))
        fail_msg("input %d element %lld: analytic %.6g vs numeric %.6g", k, (long long)i, ana, num);
    }
  }
  fsG_set_grad_enabled(old);
  fsT_release(R);
}

static fs_tensor *param(const char *name, int rank, const int64_t *shape) {
  fs_tensor *t = rt_rand(name, -1, 1, rank, shape);
  t->requires_grad = true;
  return t;
}

static void release_all(fs_tensor **in, int n) {
  for (int i = 0; i < n; i++) fsT_release(in[i]);
}

/* ---- layers ---- */

static fs_tensor *f_linear(fs_tensor **in, const void *ctx) { return fsG_linear(in[0], in[1], in[2]); }

static void test_linear(void **state) {
  int64_t xs[3] = {2, 3, 5}, ws[2] = {4, 5}, bs[1] = {4};
  fs_tensor *in[3] = {param("x", 3, xs), param("W", 2, ws), param("b", 1, bs)};
  gradcheck(f_linear, in, 3, NULL, 1e-2, 2e-3);
  release_all(in, 3);
  /* without bias */
  fs_tensor *in2[3] = {param("x", 3, xs), param("W", 2, ws), NULL};
  gradcheck(f_linear, in2, 3, NULL, 1e-2, 2e-3);
  release_all(in2, 3);
}

static void test_linear_shape_error(void **state) {
  int64_t xs[2] = {64, 256}, ws[2] = {10, 128};
  fs_tensor *x = param("x", 2, xs), *W = param("W", 2, ws);
  assert_null(fsG_linear(x, W, NULL));
  assert_string_equal(fsT_error(), "mat1 and mat2 shapes cannot be multiplied (64x256 and 128x10)");
  fsT_release(x);
  fsT_release(W);
}

static fs_tensor *f_embedding(fs_tensor **in, const void *ctx) { return fsG_embedding((fs_tensor *)ctx, in[0]); }

static void test_embedding(void **state) {
  int64_t ws[2] = {5, 3}, is[2] = {2, 3};
  fs_tensor *idx = fsT_new(FS_I64, FS_DEV_CPU, 2, is);
  int64_t v[6] = {0, 4, 2, 4, 4, 1}; /* repeated rows accumulate */
  memcpy(idx->data, v, sizeof v);
  fs_tensor *in[1] = {param("W", 2, ws)};
  gradcheck(f_embedding, in, 1, idx, 1e-2, 2e-3);
  fsT_i64(idx)[2] = 5;
  assert_null(fsG_embedding(idx, in[0]));
  assert_non_null(strstr(fsT_error(), "index out of range in self"));
  release_all(in, 1);
  fsT_release(idx);
}

static fs_tensor *f_posemb(fs_tensor **in, const void *ctx) { return fsG_posemb(in[0], in[1]); }

static void test_posemb(void **state) {
  int64_t xs[3] = {2, 3, 4}, ws[2] = {5, 4}; /* T = 3 of context 5 */
  fs_tensor *in[2] = {param("x", 3, xs), param("W", 2, ws)};
  gradcheck(f_posemb, in, 2, NULL, 1e-2, 2e-3);
  for (int64_t i = 12; i < 20; i++) assert_true(fsT_f32(in[1]->grad)[i] == 0); /* unused rows */
  release_all(in, 2);
}

static fs_tensor *f_layernorm(fs_tensor **in, const void *ctx) {
  return fsG_layernorm(in[0], in[1], in[2], 1e-5);
}

static void test_layernorm(void **state) {
  int64_t xs[2] = {3, 6}, ws[1] = {6};
  fs_tensor *in[3] = {param("x", 2, xs), param("w", 1, ws), param("b", 1, ws)};
  gradcheck(f_layernorm, in, 3, NULL, 1e-2, 5e-3);
  release_all(in, 3);
}

static fs_tensor *f_act(fs_tensor **in, const void *ctx) { return fsG_act(*(const fsN_act *)ctx, in[0]); }

static void test_activations(void **state) {
  int64_t xs[2] = {4, 5};
  for (fsN_act a = FSN_GELU; a <= FSN_SILU; a++) {
    fs_tensor *in[1] = {rt_rand("x", -3, 3, 2, xs)};
    in[0]->requires_grad = true;
    gradcheck(f_act, in, 1, &a, 1e-2, 2e-3);
    release_all(in, 1);
  }
  /* relu: keep inputs away from the kink */
  fs_tensor *in[1] = {rt_rand("x", 0.1f, 2, 2, xs)};
  for (int i = 0; i < 10; i++) fsT_f32(in[0])[i] = -fsT_f32(in[0])[i];
  in[0]->requires_grad = true;
  fsN_act relu = FSN_RELU;
  gradcheck(f_act, in, 1, &relu, 1e-2, 2e-3);
  release_all(in, 1);
}

static void test_gelu_values(void **state) {
  /* torch.nn.functional.gelu(torch.tensor([-1., 0.5, 2.]), approximate=...) */
  float x[3] = {-1.0f, 0.5f, 2.0f}, y[3];
  const float exact[3] = {-0.15865529f, 0.34573123f, 1.95449972f};
  const float tanh_[3] = {-0.15880796f, 0.34571401f, 1.95459771f};
  fsN_act_forward(FSN_GELU, y, x, 3);
  for (int i = 0; i < 3; i++) assert_float_equal(y[i], exact[i], 1e-6);
  fsN_act_forward(FSN_GELU_TANH, y, x, 3);
  for (int i = 0; i < 3; i++) assert_float_equal(y[i], tanh_[i], 1e-6);
}

static fs_tensor *f_attention(fs_tensor **in, const void *ctx) { return fsG_attention(in[0], 2); }

static void test_attention(void **state) {
  int64_t xs[3] = {2, 4, 3 * 6}; /* B 2, T 4, C 6, 2 heads */
  fs_tensor *in[1] = {param("qkv", 3, xs)};
  gradcheck(f_attention, in, 1, NULL, 1e-2, 3e-3);
  release_all(in, 1);
}

static void test_attention_causal(void **state) {
  /* Changing the last position's k/v must not change earlier outputs. */
  int64_t xs[3] = {1, 3, 6};
  fs_tensor *a = rt_rand("qkv", -1, 1, 3, xs), *b = fsT_copy(a);
  for (int i = 2 * 6; i < 3 * 6; i++) fsT_f32(b)[i] += 1.0f;
  fs_tensor *ya = rt_ok(fsG_attention(a, 1)), *yb = rt_ok(fsG_attention(b, 1));
  for (int i = 0; i < 2 * 2; i++) assert_true(fsT_f32(ya)[i] == fsT_f32(yb)[i]);
  assert_true(fsT_f32(ya)[4] != fsT_f32(yb)[4]);
  /* the first position attends only to itself: its output is its v */
  for (int i = 0; i < 2; i++) assert_float_equal(fsT_f32(ya)[i], fsT_f32(a)[4 + i], 1e-6);
  fsT_release(a); fsT_release(b); fsT_release(ya); fsT_release(yb);
}

/* F.scaled_dot_product_attention's fused float32 node (compose.c) */
static fs_tensor *f_sdpa(fs_tensor **in, const void *ctx) {
  return fsG_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, *(const bool *)ctx, 0);
}

static fs_tensor *f_sdpa_self(fs_tensor **in, const void *ctx) { /* q, k and v one tensor */
  return fsG_scaled_dot_product_attention(in[0], in[0], in[0], NULL, 0.0, true, 0);
}

static void test_sdpa_fused(void **state) {
  static const int64_t Ls[2] = {3, 5}, Ss[2] = {5, 3};
  for (int c = 0; c < 4; c++) { /* causal or not; L < S, L > S */
    bool causal = c & 1;
    int64_t L = Ls[c >> 1], S = Ss[c >> 1];
    int64_t qs[4] = {2, 2, L, 4}, ks[4] = {2, 2, S, 4}, vs[4] = {2, 2, S, 3};
    fs_tensor *in[3] = {param("q", 4, qs), param("k", 4, ks), param("v", 4, vs)};
    fs_tensor *y = rt_ok(f_sdpa(in, &causal));
    assert_null(y->node->saved[1]); /* one fused node: the probabilities are its only saved buffer */
    assert_int_equal(y->node->saved[0]->numel, 2 * 2 * L * S);
    fsT_release(y);
    gradcheck(f_sdpa, in, 3, &causal, 1e-2, 3e-3);
    release_all(in, 3);
  }
  int64_t xs[3] = {2, 4, 6};
  fs_tensor *x = param("x", 3, xs);
  gradcheck(f_sdpa_self, &x, 1, NULL, 1e-2, 3e-3);
  fsT_release(x);
}

static fs_tensor *f_dropout(fs_tensor **in, const void *ctx) { return fsG_dropout(in[0], 0.3, 77); }

static void test_dropout(void **state) {
  int64_t xs[1] = {4000};
  fs_tensor *in[1] = {param("x", 1, xs)};
  gradcheck(f_dropout, in, 1, NULL, 1e-2, 2e-3);
  fs_tensor *y = rt_ok(fsG_dropout(in[0], 0.3, 77));
  int zeros = 0;
  for (int i = 0; i < 4000; i++) {
    float v = fsT_f32(y)[i];
    if (v == 0) zeros++;
    else assert_float_equal(v, fsT_f32(in[0])[i] / 0.7f, 1e-5);
  }
  assert_in_range(zeros, 1000, 1400); /* ~1200 expected */
  fsT_release(y);
  release_all(in, 1);
}

static fs_tensor *f_flatten(fs_tensor **in, const void *ctx) {
  int64_t shape[2] = {2, 12}; /* Flatten of [2, 3, 4], then a layer that mixes */
  fs_tensor *v = fsG_reshape(in[0], 2, shape);
  fs_tensor *out = v ? fsG_act(FSN_TANH, v) : NULL;
  fsT_release(v);
  return out;
}

static void test_flatten(void **state) {
  int64_t xs[3] = {2, 3, 4};
  fs_tensor *in[1] = {param("x", 3, xs)};
  gradcheck(f_flatten, in, 1, NULL, 1e-2, 2e-3);
  release_all(in, 1);
}

/* ---- losses ---- */

static fs_tensor *f_ce(fs_tensor **in, const void *ctx) { return fsG_cross_entropy(in[0], (fs_tensor *)ctx); }

static void test_cross_entropy(void **state) {
  int64_t ls[3] = {2, 3, 5}, ts[2] = {2, 3};
  fs_tensor *t = fsT_new(FS_I64, FS_DEV_CPU, 2, ts);
  int64_t v[6] = {0, 4, 2, 1, 3, 3};
  memcpy(t->data, v, sizeof v);
  fs_tensor *in[1] = {param("logits", 3, ls)};
  gradcheck(f_ce, in, 1, t, 1e-2, 2e-3);
  release_all(in, 1);
  int64_t l2[2] = {6, 5}, t1[1] = {6}; /* the [N, C] form */
  fs_tensor *t6 = fsT_new(FS_I64, FS_DEV_CPU, 1, t1);
  memcpy(t6->data, v, sizeof v);
  fs_tensor *in2[1] = {param("logits2", 2, l2)};
  gradcheck(f_ce, in2, 1, t6, 1e-2, 2e-3);
  release_all(in2, 1);
  fsT_release(t6);
  /* value: uniform logits give log(C) */
  int64_t ls2[2] = {2, 4}, ts2[1] = {2};
  fs_tensor *z = fsT_zeros(FS_F32, FS_DEV_CPU, 2, ls2), *t2 = fsT_zeros(FS_I64, FS_DEV_CPU, 1, ts2);
  fs_tensor *loss = rt_ok(fsG_cross_entropy(z, t2));
  assert_float_equal(fsT_f32(loss)[0], logf(4), 1e-6);
  fsT_i64(t2)[1] = 4;
  assert_null(fsG_cross_entropy(z, t2));
  assert_string_equal(fsT_error(), "Target 4 is out of bounds.");
  fsT_release(loss); fsT_release(z); fsT_release(t2); fsT_release(t);
}

static fs_tensor *f_mse(fs_tensor **in, const void *ctx) { return fsG_mse_loss(in[0], in[1]); }

static void test_mse(void **state) {
  int64_t s[2] = {3, 4};
  fs_tensor *in[2] = {param("p", 2, s), param("t", 2, s)};
  gradcheck(f_mse, in, 2, NULL, 1e-2, 2e-3);
  release_all(in, 2);
}

/* ---- tape semantics ---- */

static fs_tensor *f_arith(fs_tensor **in, const void *ctx) {
  /* (a * b - a / b) + 0.5 * a, with a scalar tensor c broadcast: ... * c */
  fs_tensor *ab = fsG_binary(FSB_MUL, in[0], in[1]);
  fs_tensor *q = fsG_binary(FSB_DIV, in[0], in[1]);
  fs_tensor *d = fsG_binary(FSB_SUB, ab, q);
  fs_tensor *h = fsG_binary_scalar(FSB_MUL, in[0], 0.5, false, true);
  fs_tensor *s = fsG_binary(FSB_ADD, d, h);
  fs_tensor *out = fsG_binary(FSB_MUL, s, in[2]);
  fsT_release(ab); fsT_release(q); fsT_release(d); fsT_release(h); fsT_release(s);
  return out;
}

static void test_arithmetic(void **state) {
  int64_t s[2] = {2, 3};
  fs_tensor *in[3] = {param("a", 2, s), rt_rand("b", 0.5f, 2, 2, s), param("c", 0, NULL)};
  in[1]->requires_grad = true;
  gradcheck(f_arith, in, 3, NULL, 1e-2, 2e-3);
  release_all(in, 3);
}

/* Intermediates whose first gradient is written, not added to a zeroed
 * buffer (autograd.c's fsG_grad_whole and grad_first): a sum's output gradient
 * taken over as a view (y, r) or copied (the second side of y + y and of
 * r + u); a product's and a quotient's fresh sides, a * a and u / u with
 * one buffer, u - u; a linear's fresh dx. */
static fs_tensor *f_first_grads(fs_tensor **in, const void *ctx) {
  int64_t flat[1] = {6};
  fs_tensor *u = fsG_binary(FSB_MUL, in[0], in[1]), *y = fsG_binary(FSB_ADD, u, u);
  fs_tensor *r = fsG_reshape(y, 1, flat), *sq = fsG_binary(FSB_MUL, r, r);
  fs_tensor *q = fsG_binary(FSB_DIV, u, u), *qf = fsG_reshape(q, 1, flat), *uf = fsG_reshape(u, 1, flat);
  fs_tensor *d = fsG_binary(FSB_SUB, uf, uf), *e = fsG_binary(FSB_DIV, sq, uf);
  fs_tensor *t1 = fsG_binary(FSB_ADD, r, e), *t2 = fsG_binary(FSB_ADD, t1, d), *t3 = fsG_binary(FSB_MUL, t2, qf);
  int64_t two[2] = {2, 3};
  fs_tensor *m = fsG_reshape(t3, 2, two), *out = fsG_linear(m, in[2], NULL);
  fs_tensor *all[] = {u, y, r, sq, q, qf, uf, d, e, t1, t2, t3, m};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fsT_release(all[i]);
  return out;
}

static void test_first_gradients(void **state) {
  int64_t s[2] = {2, 3}, ws[2] = {4, 3};
  fs_tensor *in[3] = {param("a", 2, s), rt_rand("b", 0.5f, 2, 2, s), param("W", 2, ws)};
  in[1]->requires_grad = true;
  gradcheck(f_first_grads, in, 3, NULL, 1e-2, 3e-3);
  release_all(in, 3);
}

static void test_accumulate_and_free(void **state) {
  int64_t xs[2] = {2, 3}, ws[2] = {2, 3};
  fs_tensor *x = rt_rand("x", -1, 1, 2, xs), *W = param("W", 2, ws);
  float first[6];
  for (int pass = 0; pass < 2; pass++) {
    fs_tensor *y = rt_ok(fsG_linear(x, W, NULL));
    fs_tensor *l = rt_ok(fsG_mean(y));
    fs_tensor *l2 = rt_ok(fsG_binary_scalar(FSB_MUL, l, 0.5, false, false)); /* loss * 0.5 + loss */
    fs_tensor *l3 = rt_ok(fsG_binary(FSB_ADD, l2, l));
    assert_int_equal(fsG_backward(l3), 0);
    assert_null(l3->node); /* graph freed */
    assert_int_equal(fsG_backward(l3), -1);
    if (pass == 0) memcpy(first, W->grad->data, sizeof first);
    else
      for (int i = 0; i < 6; i++) assert_float_equal(fsT_f32(W->grad)[i], 2 * first[i], 1e-6);
    fsT_release(y); fsT_release(l); fsT_release(l2); fsT_release(l3);
  }
  /* d/dW of 1.5 * mean(x W^T): column j of row o is 1.5 * x[n, j] / 4 summed over n */
  for (int o = 0; o < 2; o++)
    for (int j = 0; j < 3; j++) {
      float want = 1.5f * (fsT_f32(x)[j] + fsT_f32(x)[3 + j]) / 4;
      assert_float_equal(fsT_f32(W->grad)[o * 3 + j], 2 * want, 1e-5);
    }
  assert_null(x->grad); /* an input that does not require grad gets none */
  fsT_release(x);
  fsT_release(W);
}

static void test_long_chain_release(void **state) {
  /* total = total + w over 300k steps: releasing the end of the chain must
   * not recurse once per op (stack overflow) */
  int64_t s[1] = {1};
  fs_tensor *w = param("w", 1, s), *total = rt_ok(fsT_zeros(FS_F32, FS_DEV_CPU, 1, s));
  fsT_f32(w)[0] = 0.5f; /* sums stay exact in float */
  for (int i = 0; i < 300000; i++) {
    fs_tensor *next = rt_ok(fsG_binary(FSB_ADD, total, w));
    fsT_release(total);
    total = next;
  }
  assert_true(fsT_f32(total)[0] == 150000.0f);
  fsT_release(total);
  fsT_release(w);
}

static void test_no_grad(void **state) {
  int64_t s[1] = {3};
  fs_tensor *w = param("w", 1, s);
  bool old = fsG_set_grad_enabled(false);
  fs_tensor *y = rt_ok(fsG_sum(w));
  assert_false(y->requires_grad);
  assert_null(y->node);
  assert_int_equal(fsG_backward(y), -1);
  assert_string_equal(fsT_error(), "element 0 of tensors does not require grad and does not have a grad_fn");
  fsG_set_grad_enabled(old);
  assert_true(fsG_grad_enabled());
  fsT_release(y);
  fsT_release(w);
}

static void test_compare_and_item(void **state) {
  int64_t s[2] = {3, 4}, ts[1] = {3};
  fs_tensor *logits = rt_rand("l", -1, 1, 2, s), *y = fsT_new(FS_I64, FS_DEV_CPU, 1, ts);
  float *l = fsT_f32(logits);
  l[2] = 5; l[4 + 1] = 5; l[8 + 3] = 5;   /* argmax 2, 1, 3 */
  int64_t yv[3] = {2, 0, 3};
  memcpy(y->data, yv, sizeof yv);
  fs_tensor *pred = rt_ok(fsG_argmax(logits, 1));
  assert_int_equal(pred->dtype, FS_I64);
  assert_int_equal(pred->rank, 1);
  fs_tensor *eq = rt_ok(fsG_compare(FSG_EQ, pred, y));
  fs_tensor *cnt = rt_ok(fsG_sum(eq));
  double v;
  assert_int_equal(fsG_item(cnt, &v), 0);
  assert_int_equal(cnt->dtype, FS_I64);
  assert_true(v == 2);
  fs_tensor *f = rt_ok(fsT_to_dtype(cnt, FS_F32));
  fs_tensor *r = rt_ok(fsG_binary_scalar(FSB_DIV, f, 4, true, false));
  assert_int_equal(fsG_item(r, &v), 0);
  assert_float_equal(v, 0.5, 1e-7);
  assert_int_equal(fsG_item(logits, &v), -1);
  assert_string_equal(fsT_error(), "a Tensor with 12 elements cannot be converted to Scalar");
  fs_tensor *gt = rt_ok(fsG_compare_scalar(FSG_GT, logits, 4.0, false));
  fs_tensor *ngt = rt_ok(fsG_sum(gt));
  assert_int_equal(fsT_i64(ngt)[0], 3);
  int64_t bad[1] = {4};
  fs_tensor *z = fsT_zeros(FS_I64, FS_DEV_CPU, 1, bad);
  assert_null(fsG_compare(FSG_EQ, pred, z));
  assert_string_equal(fsT_error(), "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0");
  assert_null(fsG_mean(eq));
  fs_tensor *tensors[] = {logits, y, pred, eq, cnt, f, r, gt, ngt, z};
  for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++) fsT_release(tensors[i]);
}

static void test_meta_rejected(void **state) {
  int64_t s[2] = {2, 2};
  fs_tensor *m = fsT_new(FS_F32, FS_DEV_META, 2, s), *x = rt_rand("x", -1, 1, 2, s);
  assert_null(m->data);
  assert_null(fsG_linear(x, m, NULL));
  assert_non_null(strstr(fsT_error(), "meta"));
  fsT_release(m);
  fsT_release(x);
}

/* An op that must fail: NULL and a message containing want. */
static void expect_err(fs_tensor *got, const char *want) {
  if (got) fail_msg("expected the error \"%s\"", want);
  if (!strstr(fsT_error(), want)) fail_msg("expected \"%s\", got \"%s\"", want, fsT_error());
}

/* Every op rejects bad input with a message, never a crash. */
static void test_bad_inputs(void **state) {
  int64_t s23[2] = {2, 3}, s3[1] = {3}, s234[3] = {2, 3, 4}, s2[1] = {2};
  fs_tensor *x = rt_rand("x", -1, 1, 2, s23), *v = rt_rand("v", -1, 1, 1, s3);
  fs_tensor *x3 = rt_rand("x3", -1, 1, 3, s234), *i2 = fsT_zeros(FS_I64, FS_DEV_CPU, 1, s2);
  expect_err(fsG_embedding(x, x), "Expected tensor for argument #1 'indices'");
  expect_err(fsG_layernorm(x3, v, v, 1e-5), "Given normalized_shape=[3], expected input with shape [*, 3]");
  expect_err(fsG_attention(x3, 2), "attention: expected input [B, T, 3*C]");
  expect_err(fsG_posemb(x3, x), "PositionalEmbedding(2, 3): expected input [..., T, 3]");
  int64_t s24[2] = {2, 4};
  fs_tensor *w24 = rt_rand("w", -1, 1, 2, s24);
  expect_err(fsG_posemb(x3, w24), "PositionalEmbedding: sequence length 3 exceeds the context 2");
  fsT_release(w24);
  expect_err(fsG_cross_entropy(x, v), "expected scalar type Long");
  expect_err(fsG_cross_entropy(x3, i2), "cross_entropy: logits [2, 3, 4] do not match targets [2]");
  expect_err(fsG_mse_loss(x, v), "mse_loss: input [2, 3] and target [3] must have the same shape");
  expect_err(fsG_argmax(x, 2), "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  expect_err(fsG_binary(FSB_ADD, x, x3),
             "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 2"); /* torch 1.13 */
  fsT_release(x); fsT_release(v); fsT_release(x3); fsT_release(i2);
}

/* ---- the tensor API's ops (ops_grad.c): finite differences ---- */

typedef struct op_case { int which; } op_case;

static fs_tensor *api_op(fs_tensor **in, const void *ctx) {
  int which = ((const op_case *)ctx)->which;
  int perm[3] = {2, 0, 1};
  int64_t e[3] = {4, 2, 3};
  fs_tensor *pair[2] = {in[0], in[0]};
  switch (which) {
  case 0: return fsG_binary(FSB_MUL, in[0], in[1]);             /* [2,3] * [3]: broadcast */
  case 1: return fsG_binary(FSB_DIV, in[0], in[2]);             /* [2,3] / [2,1] */
  case 2: return fsG_binary_op(FSU_MAXIMUM, in[0], in[1]);
  case 3: return fsG_unary(FSU_TANH, in[0], 0, 0);
  case 4: return fsG_unary(FSU_POW, in[0], 3, 0);
  case 5: return fsG_unary(FSU_CLAMP, in[2], NAN, 1.0); /* c lies in [0.5, 1.5]: one side clamps */
  case 6: return fsG_softmax(in[0], 1, false);
  case 7: return fsG_softmax(in[0], 0, true);
  case 8: return fsG_sum_dim(in[0], 0, false, true);
  case 9: return fsG_extreme(true, in[0], 1, true, NULL);
  case 10: return fsG_logsumexp(in[0], 1, false);
  case 11: return fsG_cumsum(in[0], 1);
  case 12: return fsG_permute(in[3], perm);
  case 13: return fsG_expand(in[2], 3, e);
  case 14: return fsG_slice(in[0], 1, 0, 3, 2);
  case 15: return fsG_select(in[0], 1, -1);
  case 16: return fsG_cat(pair, 2, 1);
  case 17: return fsG_matmul(in[0], in[4]);                      /* [2,3] @ [3,2] */
  case 18: return fsG_matmul(in[3], in[1]);                      /* [2,3,4]... via [4] below */
  case 19: return fsG_unary(FSU_SIGMOID, in[0], 0, 0);
  }
  return NULL;
}

static void test_api_ops(void **state) {
  int64_t s23[2] = {2, 3}, s3[1] = {3}, s21[2] = {2, 1}, s234[3] = {2, 3, 4}, s32[2] = {3, 2};
  fs_tensor *in[5] = {rt_rand("a", -1, 1, 2, s23), rt_rand("b", 0.5, 1.5, 1, s3), rt_rand("c", 0.5, 1.5, 2, s21),
                      rt_rand("d", -1, 1, 3, s234), rt_rand("e", -1, 1, 2, s32)};
  for (int i = 0; i < 5; i++) in[i]->requires_grad = true;
  for (int w = 0; w < 20; w++) {
    if (w == 18) { /* [2,3,4] @ [4]: a 1-d right operand */
      int64_t s4[1] = {4};
      fs_tensor *v = rt_rand("v", -1, 1, 1, s4);
      v->requires_grad = true;
      fsT_release(in[1]);
      in[1] = v;
    }
    /* the inputs each case reads (bit i: in[i]); only those require grad */
    static const unsigned uses[20] = {3, 5, 3, 1, 1, 4, 1, 1, 1, 1, 1, 1, 8, 4, 1, 1, 1, 17, 10, 1};
    for (int i = 0; i < 5; i++) in[i]->requires_grad = uses[w] >> i & 1;
    op_case c = {w};
    print_message("api op case %d\n", w);
    gradcheck(api_op, in, 5, &c, 1e-2, 2e-2);
    for (int i = 0; i < 5; i++) {
      fsT_release(in[i]->grad);
      in[i]->grad = NULL;
    }
  }
  for (int i = 0; i < 5; i++) fsT_release(in[i]);
}

/* Broadcast shapes and torch's messages for the new ops. */
static void test_api_errors(void **state) {
  int64_t s23[2] = {2, 3}, s4[1] = {4}, s2[1] = {2};
  fs_tensor *x = rt_rand("x", -1, 1, 2, s23), *v = rt_rand("v", -1, 1, 1, s4), *u = rt_rand("u", -1, 1, 1, s2);
  expect_err(fsG_matmul(x, v), "size mismatch");
  expect_err(fsG_matmul(x, x), "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)");
  expect_err(fsG_softmax(x, 2, false), "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  expect_err(fsG_expand(x, 2, (int64_t[]){4, 3}), "The expanded size of the tensor (4) must match the existing size (2) at non-singleton dimension 0");
  expect_err(fsG_binary_op(FSU_ADD, x, u), "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1");
  fs_tensor *pair[2] = {x, v};
  expect_err(fsG_cat(pair, 2, 0), "Tensors must have same number of dimensions: got 2 and 1");
  int64_t s13[2] = {1, 3};
  fs_tensor *row = rt_rand("r", -1, 1, 2, s13), *sum = rt_ok(fsG_binary(FSB_ADD, x, row));
  assert_true(fsT_same_shape(sum, x));
  fsT_release(sum); fsT_release(row);
  fsT_release(x); fsT_release(v); fsT_release(u);
}

/* ---- indexing, index assignment, topk (index.c) ---- */

static fs_tensor *i64_of(int n, const int64_t *v) {
  int64_t len = n;
  fs_tensor *t = fsT_new(FS_I64, FS_DEV_CPU, 1, &len);
  memcpy(t->data, v, (size_t)n * sizeof *v);
  return t;
}

static fs_tensor *bool_of(int rank, const int64_t *shape, const char *bits) {
  fs_tensor *t = fsT_new(FS_BOOL, FS_DEV_CPU, rank, shape);
  for (int64_t i = 0; i < t->numel; i++) fsT_bool(t)[i] = bits[i] == '1';
  return t;
}

typedef struct index_case { fsG_subscript ix[4]; int n; } index_case;

static fs_tensor *f_index(fs_tensor **in, const void *ctx) {
  const index_case *c = ctx;
  return fsG_index(in[0], c->ix, c->n);
}

/* x[ix] = v written on the tape: x is a product so it is not a leaf */
static fs_tensor *f_index_put(fs_tensor **in, const void *ctx) {
  const index_case *c = ctx;
  fs_tensor *x = rt_ok(fsG_binary_scalar(FSB_MUL, in[0], 2, false, false));
  fs_tensor *r = fsG_index_put(x, c->ix, c->n, in[1]);
  fsT_release(x);
  return r;
}

static fs_tensor *f_topk(fs_tensor **in, const void *ctx) {
  fs_tensor *idx = NULL, *v = fsG_topk(in[0], 2, *(const int *)ctx, *(const int *)ctx == 0, &idx);
  fsT_release(idx);
  return v;
}

static void test_index_backward(void **state) {
  int64_t s34[2] = {3, 4}, s334[3] = {3, 3, 4}, s4[1] = {4};
  fs_tensor *dup = i64_of(4, (int64_t[]){2, 0, 2, -1}), *rows = i64_of(2, (int64_t[]){0, 2});
  fs_tensor *mask = bool_of(2, s34, "100101100011");
  const fsG_subscript slice_step = {.kind = FSG_IX_SLICE, .has_start = true, .start = 1, .step = 2};
  const fsG_subscript all = {.kind = FSG_IX_SLICE, .step = 1};
  const index_case cases[] = {
    {{slice_step, {.kind = FSG_IX_NONE}, {.kind = FSG_IX_INT, .i = -1}}, 3},  /* x[1::2, None, -1] */
    {{{.kind = FSG_IX_TENSOR, .t = dup}}, 1},                                 /* repeated rows sum */
    {{all, {.kind = FSG_IX_TENSOR, .t = dup}}, 2},                            /* x[:, idx] */
    {{{.kind = FSG_IX_TENSOR, .t = mask}}, 1},                                /* x[mask] */
    {{{.kind = FSG_IX_TENSOR, .t = rows}, {.kind = FSG_IX_ELLIPSIS}, {.kind = FSG_IX_TENSOR, .t = rows}}, 3},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fs_tensor *in[1] = {param("x", k == 4 ? 3 : 2, k == 4 ? s334 : s34)};
    print_message("index case %zu\n", k);
    gradcheck(f_index, in, 1, &cases[k], 1e-2, 2e-2);
    fsT_release(in[0]);
  }
  /* x[:, idx] = v with v broadcast from [4]: v's gradient sums over rows */
  const index_case put_rows = {{{.kind = FSG_IX_TENSOR, .t = rows}}, 1};
  fs_tensor *in2[2] = {param("x", 2, s34), param("v", 1, s4)};
  gradcheck(f_index_put, in2, 2, &put_rows, 1e-2, 2e-2);
  release_all(in2, 2);
  const index_case put_mask = {{{.kind = FSG_IX_TENSOR, .t = mask}}, 1};
  int64_t s1[1] = {1};
  fs_tensor *in3[2] = {param("x", 2, s34), param("v", 1, s1)};
  gradcheck(f_index_put, in3, 2, &put_mask, 1e-2, 2e-2);
  release_all(in3, 2);
  for (int dim = 0; dim < 2; dim++) { /* largest over dim 0, smallest over dim 1 */
    fs_tensor *in[1] = {param("x", 2, s34)};
    gradcheck(f_topk, in, 1, &dim, 1e-3, 2e-2);
    fsT_release(in[0]);
  }
  fsT_release(dup);
  fsT_release(rows);
  fsT_release(mask);
}

/* Views share storage; writes land in place; torch's messages. */
static void test_index_semantics(void **state) {
  int64_t s34[2] = {3, 4};
  fs_tensor *x = rt_rand("x", -1, 1, 2, s34);
  fsG_subscript row = {.kind = FSG_IX_INT, .i = 1}, col[2] = {{.kind = FSG_IX_SLICE, .step = 1}, {.kind = FSG_IX_INT, .i = 0}};
  fs_tensor *v = rt_ok(fsG_index(x, &row, 1));
  assert_ptr_equal(v->data, fsT_f32(x) + 4); /* x[1] is a view */
  fs_tensor *c = rt_ok(fsG_index(x, col, 2));
  assert_ptr_not_equal(c->base, x);          /* x[:, 0] is a copy */
  fs_tensor *seven = fsT_scalar(7), *w = rt_ok(fsG_index_put(x, col, 2, seven));
  assert_ptr_equal(w, x);                    /* written in place */
  assert_float_equal(fsT_f32(x)[8], 7, 0);
  fsT_release(w);
  fsG_subscript five = {.kind = FSG_IX_INT, .i = 5}, step0 = {.kind = FSG_IX_SLICE, .step = 0};
  expect_err(fsG_index(x, &five, 1), "index 5 is out of bounds for dimension 0 with size 3");
  expect_err(fsG_index(x, &step0, 1), "slice step cannot be zero");
  fsG_subscript three[3] = {row, row, row};
  expect_err(fsG_index(x, three, 3), "too many indices for tensor of dimension 2");
  int64_t s2[1] = {2};
  fs_tensor *m = bool_of(1, s2, "10");
  fsG_subscript bad = {.kind = FSG_IX_TENSOR, .t = m};
  expect_err(fsG_index(x, &bad, 1), "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 4] at index 0");
  x->requires_grad = true;
  expect_err(fsG_index_put(x, col, 2, seven), "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  fs_tensor *idx = NULL;
  expect_err(fsG_topk(x, 5, 1, true, &idx), "selected index k out of range");
  int64_t s3[1] = {3};
  fs_tensor *p = rt_rand("p", 0, 1, 1, s3);
  expect_err(fsG_multinomial(p, 4, false, 1, 0), "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  fsT_f32(p)[0] = 5, fsT_f32(p)[1] = 0, fsT_f32(p)[2] = 0;
  fs_tensor *draw = rt_ok(fsG_multinomial(p, 3, false, 1, 0)); /* the positive one first, then the unused */
  assert_int_equal(fsT_i64(draw)[0], 0);
  assert_int_equal(fsT_i64(draw)[1], 1);
  assert_int_equal(fsT_i64(draw)[2], 2);
  fsT_release(draw); fsT_release(p); fsT_release(m);
  fsT_release(seven); fsT_release(v); fsT_release(c); fsT_release(x);
}

/* ---- convolutional layers (cnn_grad.c) ---- */

typedef struct conv_case { int nd; int64_t stride[2], pad[2], dil[2], groups; } conv_case;

static fs_tensor *f_conv(fs_tensor **in, const void *ctx) {
  const conv_case *c = ctx;
  return fsG_conv(c->nd, in[0], in[1], in[2], c->stride, c->pad, c->dil, c->groups);
}

static void test_conv(void **state) {
  static const conv_case cases[] = {
    {2, {1, 1}, {0, 0}, {1, 1}, 1},
    {2, {2, 1}, {1, 2}, {1, 2}, 1},   /* stride, asymmetric padding, dilation */
    {2, {1, 2}, {1, 0}, {2, 1}, 2},   /* groups */
    {2, {1, 1}, {0, 0}, {1, 1}, 4},   /* depthwise */
    {2, {1, 1}, {2, 1}, {2, 1}, 1},   /* 'same' width and height: im2col's shifted planes */
    {2, {1, 1}, {4, 1}, {4, 1}, 1},   /* shifts of most of the image's height */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const conv_case *c = &cases[i];
    int64_t xs[4] = {2, 4, 6, 5}, ws[4] = {4, 4 / c->groups, 3, 2}, bs[1] = {4};
    fs_tensor *in[3] = {param("x", 4, xs), param("W", 4, ws), param("b", 1, bs)};
    gradcheck(f_conv, in, 3, c, 1e-2, 5e-3);
    release_all(in, 3);
  }
  /* 1x1 (no im2col) without bias */
  conv_case pw = {2, {1, 1}, {0, 0}, {1, 1}, 1};
  int64_t xs[4] = {2, 3, 4, 4}, ws[4] = {5, 3, 1, 1};
  fs_tensor *in[3] = {param("x", 4, xs), param("W", 4, ws), NULL};
  gradcheck(f_conv, in, 3, &pw, 1e-2, 5e-3);
  release_all(in, 3);
  /* grouped 1x1: each group's channels are a slice of the image */
  conv_case pwg = {2, {1, 1}, {0, 0}, {1, 1}, 2};
  int64_t xg[4] = {3, 4, 3, 2}, wg[4] = {6, 2, 1, 1}, bg[1] = {6};
  fs_tensor *ing[3] = {param("x", 4, xg), param("W", 4, wg), param("b", 1, bg)};
  gradcheck(f_conv, ing, 3, &pwg, 1e-2, 5e-3);
  release_all(ing, 3);
  /* Conv1d */
  conv_case c1 = {1, {2}, {1}, {2}, 1};
  int64_t x1[3] = {2, 3, 9}, w1[3] = {4, 3, 3}, b1[1] = {4};
  fs_tensor *in1[3] = {param("x", 3, x1), param("W", 3, w1), param("b", 1, b1)};
  gradcheck(f_conv, in1, 3, &c1, 1e-2, 5e-3);
  fs_tensor *y = rt_ok(f_conv(in1, &c1));
  assert_int_equal(y->rank, 3);
  assert_int_equal(y->shape[2], 4); /* (9 + 2 - 2*2 - 1) / 2 + 1 */
  fsT_release(y);
  release_all(in1, 3);
}

/* The backward takes images in chunks side by side (a batch of 5 here
 * makes chunks of 3 and 2); image by image, each chunk is one image and
 * reads the output gradient in place: both give the same gradients. */
static void test_conv_chunks(void **state) {
  (void)state;
  fsN_conv g = {.N = 5, .C = 8, .H = 32, .W = 32, .OC = 4, .KH = 3, .KW = 3, .sh = 1, .sw = 1,
                .ph = 1, .pw = 1, .dh = 1, .dw = 1, .G = 1, .OH = 32, .OW = 32};
  int64_t xs[1] = {5 * 8 * 32 * 32}, ys[1] = {5 * 4 * 32 * 32}, ws[1] = {4 * 8 * 9};
  fs_tensor *x = rt_rand("x", -1, 1, 1, xs), *dy = rt_rand("dy", -1, 1, 1, ys), *W = rt_rand("W", -1, 1, 1, ws);
  float *dx = calloc((size_t)xs[0], sizeof *dx), *dx1 = calloc((size_t)xs[0], sizeof *dx1);
  float dW[4 * 8 * 9] = {0}, dW1[4 * 8 * 9] = {0}, db[4] = {0}, db1[4] = {0};
  assert_non_null(dx);
  assert_non_null(dx1);
  assert_int_equal(fsN_conv2d_backward(dx, dW, db, fsT_f32(dy), fsT_f32(x), fsT_f32(W), &g), 0);
  fsN_conv one = g;
  one.N = 1;
  for (int64_t n = 0; n < g.N; n++)
    assert_int_equal(fsN_conv2d_backward(dx1 + n * 8 * 32 * 32, dW1, db1, fsT_f32(dy) + n * 4 * 32 * 32,
                                         fsT_f32(x) + n * 8 * 32 * 32, fsT_f32(W), &one), 0);
  for (int64_t i = 0; i < xs[0]; i++) assert_float_equal(dx[i], dx1[i], 1e-4);
  for (int i = 0; i < 4 * 8 * 9; i++) assert_float_equal(dW[i], dW1[i], 1e-2);
  for (int i = 0; i < 4; i++) assert_float_equal(db[i], db1[i], 1e-2);
  free(dx);
  free(dx1);
  fsT_release(x);
  fsT_release(dy);
  fsT_release(W);
}

typedef struct convt_case { int64_t stride[2], pad[2], opad[2], dil[2], groups; } convt_case;

static fs_tensor *f_convt(fs_tensor **in, const void *ctx) {
  const convt_case *c = ctx;
  return fsG_conv_transpose2d(in[0], in[1], in[2], c->stride, c->pad, c->opad, c->dil, c->groups);
}

static void test_conv_transpose(void **state) {
  static const convt_case cases[] = {{{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}, {{2, 3}, {1, 0}, {1, 2}, {1, 2}, 2}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t xs[4] = {2, 4, 3, 3}, ws[4] = {4, 6 / cases[i].groups, 3, 2}, bs[1] = {6};
    fs_tensor *in[3] = {param("x", 4, xs), param("W", 4, ws), param("b", 1, bs)};
    gradcheck(f_convt, in, 3, &cases[i], 1e-2, 5e-3);
    release_all(in, 3);
  }
}

static void test_conv_errors(void **state) {
  int64_t xs[4] = {2, 3, 5, 5}, ws[4] = {8, 1, 3, 3};
  fs_tensor *x = param("x", 4, xs), *W = param("W", 4, ws);
  int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  assert_null(fsG_conv(2, x, W, NULL, one, zero, one, 1));
  assert_string_equal(fsT_error(), "Given groups=1, weight of size [8, 1, 3, 3], expected input[2, 3, 5, 5] to have 1 channels, but got 3 channels instead");
  int64_t big[2] = {3, 3};
  assert_null(fsG_max_pool2d(x, big, one, big, one, false));
  assert_string_equal(fsT_error(), "pad should be at most half of effective kernel size, but got pad=3, kernel_size=3 and dilation=1");
  fsT_release(x);
  fsT_release(W);
}

typedef struct pool_case { int kind; int64_t k[2], s[2], p[2], d[2]; bool ceil, incl; } pool_case;

static fs_tensor *f_pool(fs_tensor **in, const void *ctx) {
  const pool_case *c = ctx;
  if (c->kind == 0) return fsG_max_pool2d(in[0], c->k, c->s, c->p, c->d, c->ceil);
  if (c->kind == 1) return fsG_avg_pool2d(in[0], c->k, c->s, c->p, c->ceil, c->incl);
  return fsG_adaptive_avg_pool2d(in[0], c->k);
}

static void test_pooling(void **state) {
  static const pool_case cases[] = {
    {0, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true},
    {0, {3, 2}, {2, 1}, {1, 1}, {1, 2}, true, true},
    {1, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true},
    {1, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, true},
    {1, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, false},
    {2, {3, 2}, {0, 0}, {0, 0}, {0, 0}, false, false},  /* adaptive to 3x2 */
    {2, {4, -1}, {0, 0}, {0, 0}, {0, 0}, false, false}, /* None keeps W */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t xs[4] = {2, 3, 7, 6};
    fs_tensor *in[1] = {param("x", 4, xs)};
    gradcheck(f_pool, in, 1, &cases[i], 1e-3, 5e-3);
    release_all(in, 1);
  }
  /* values: a 4x4 ramp pooled 2x2 */
  int64_t xs[3] = {1, 4, 4};
  fs_tensor *x = fsT_new(FS_F32, FS_DEV_CPU, 3, xs);
  for (int i = 0; i < 16; i++) fsT_f32(x)[i] = (float)i;
  fs_tensor *mx = rt_ok(f_pool(&x, &cases[0])), *av = rt_ok(f_pool(&x, &cases[2]));
  const float want_max[4] = {5, 7, 13, 15}, want_avg[4] = {2.5f, 4.5f, 10.5f, 12.5f};
  for (int i = 0; i < 4; i++) {
    assert_true(fsT_f32(mx)[i] == want_max[i]);
    assert_true(fsT_f32(av)[i] == want_avg[i]);
  }
  fsT_release(mx);
  fsT_release(av);
  fsT_release(x);
}

/* max pooling keeps the first maximum of a window and lets a NaN win: the
 * rows here are wide enough for the kernel's vector span, full of ties and
 * NaNs, and checked against a tap-by-tap scan */
static void test_maxpool_ties_nan(void **state) {
  (void)state;
  static const fsN_conv geoms[] = {
      {.N = 2, .C = 1, .H = 5, .W = 41, .KH = 2, .KW = 2, .sh = 2, .sw = 2, .dh = 1, .dw = 1},
      {.N = 2, .C = 1, .H = 5, .W = 41, .KH = 3, .KW = 3, .sh = 1, .sw = 2, .ph = 1, .pw = 1, .dh = 1, .dw = 2},
  };
  float x[2 * 5 * 41], out[2 * 5 * 20];
  int64_t idx[2 * 5 * 20];
  for (int i = 0; i < 2 * 5 * 41; i++) x[i] = (i * 7) % 5 == 0 ? NAN : (float)((i * 13) % 3);
  for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
    fsN_conv g = geoms[k];
    g.OC = g.G = g.C;
    g.OH = (g.H + 2 * g.ph - g.dh * (g.KH - 1) - 1) / g.sh + 1;
    g.OW = (g.W + 2 * g.pw - g.dw * (g.KW - 1) - 1) / g.sw + 1;
    assert_true(g.OH * g.OW <= 5 * 20);
    fsN_maxpool2d_forward(out, idx, x, &g);
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t o = 0; o < g.OH * g.OW; o++) {
        int64_t oh = o / g.OW, ow = o % g.OW, at = -1;
        float best = -INFINITY;
        for (int64_t kh = 0; kh < g.KH; kh++)
          for (int64_t kw = 0; kw < g.KW; kw++) {
            int64_t h = oh * g.sh - g.ph + kh * g.dh, w = ow * g.sw - g.pw + kw * g.dw;
            if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
            float v = x[(n * g.H + h) * g.W + w];
            if (at < 0 || v > best || (isnan(v) && !isnan(best))) {
              best = v;
              at = h * g.W + w;
            }
          }
        int64_t i = n * g.OH * g.OW + o;
        assert_int_equal(idx[i], at);
        assert_true(isnan(best) ? isnan(out[i]) : out[i] == best);
      }
  }
}

typedef struct bn_case { bool training, affine; fs_tensor *rm, *rv; } bn_case;

static fs_tensor *f_bn(fs_tensor **in, const void *ctx) {
  const bn_case *c = ctx;
  return fsG_batch_norm(in[0], c->rm, c->rv, c->affine ? in[1] : NULL, c->affine ? in[2] : NULL,
                        c->training, 0.1, 1e-5);
}

static void test_batchnorm(void **state) {
  int64_t xs[4] = {3, 2, 2, 3}, cs[1] = {2}, x1[2] = {5, 2};
  fs_tensor *rm = fsT_zeros(FS_F32, FS_DEV_CPU, 1, cs), *rv = fsT_zeros(FS_F32, FS_DEV_CPU, 1, cs);
  fsT_f32(rv)[0] = 1.5f;
  fsT_f32(rv)[1] = 0.5f;
  fsT_f32(rm)[1] = 0.25f;
  /* training with batch statistics (no running ones) and in eval mode */
  bn_case train = {true, true, NULL, NULL}, eval = {false, true, rm, rv}, plain = {true, false, NULL, NULL};
  const bn_case *cases[3] = {&train, &eval, &plain};
  for (int i = 0; i < 3; i++) { /* fresh inputs: gradients accumulate */
    fs_tensor *in[3] = {param("x", 4, xs), cases[i]->affine ? param("w", 1, cs) : NULL,
                        cases[i]->affine ? param("b", 1, cs) : NULL};
    gradcheck(f_bn, in, 3, cases[i], 1e-2, 5e-3);
    release_all(in, 3);
  }
  fs_tensor *in1[3] = {param("x", 2, x1), param("w", 1, cs), param("b", 1, cs)};
  gradcheck(f_bn, in1, 3, &train, 1e-2, 5e-3);
  /* the running statistics move by momentum, the variance unbiased */
  fs_tensor *m = fsT_zeros(FS_F32, FS_DEV_CPU, 1, cs), *v = fsT_zeros(FS_F32, FS_DEV_CPU, 1, cs);
  fsT_f32(v)[0] = fsT_f32(v)[1] = 1.0f;
  bool old = fsG_set_grad_enabled(false);
  fs_tensor *y = rt_ok(fsG_batch_norm(in1[0], m, v, NULL, NULL, true, 0.1, 1e-5));
  fsG_set_grad_enabled(old);
  for (int c = 0; c < 2; c++) {
    double s = 0, ss = 0;
    for (int n = 0; n < 5; n++) s += fsT_f32(in1[0])[n * 2 + c];
    for (int n = 0; n < 5; n++) ss += pow(fsT_f32(in1[0])[n * 2 + c] - s / 5, 2);
    assert_true(fabs(fsT_f32(m)[c] - 0.1 * s / 5) < 1e-6);
    assert_true(fabs(fsT_f32(v)[c] - (0.9 + 0.1 * ss / 4)) < 1e-6);
  }
  fsT_release(y);
  fsT_release(m);
  fsT_release(v);
  release_all(in1, 3);
  fsT_release(rm);
  fsT_release(rv);
}

/* ---- normalization and activations (norm_grad.c, ops.c) ---- */

static fs_tensor *f_groupnorm(fs_tensor **in, const void *ctx) {
  return fsG_group_norm(in[0], *(const int64_t *)ctx, in[1], in[2], 1e-5);
}

static fs_tensor *f_rmsnorm(fs_tensor **in, const void *ctx) {
  const int64_t *shape = ctx;
  return fsG_rms_norm(in[0], (int)shape[0], shape + 1, in[1], 1e-6);
}

static fs_tensor *f_unary_param(fs_tensor **in, const void *ctx) {
  const double *c = ctx;
  return fsG_unary((fsU_unary)c[0], in[0], c[1], 0);
}

static void test_norms_and_activations(void **state) {
  int64_t xs[4] = {2, 6, 2, 3}, cs[1] = {6}, groups = 3, one = 2;
  fs_tensor *in[3] = {param("x", 4, xs), param("w", 1, cs), param("b", 1, cs)};
  gradcheck(f_groupnorm, in, 3, &groups, 1e-2, 5e-3);
  release_all(in, 3);
  fs_tensor *in2[3] = {param("x", 4, xs), NULL, NULL}; /* affine=False */
  gradcheck(f_groupnorm, in2, 3, &one, 1e-2, 5e-3);
  release_all(in2, 3);
  const int64_t last[2] = {1, 3}, two[3] = {2, 2, 3};
  int64_t ws[2] = {2, 3};
  fs_tensor *in3[2] = {param("x", 4, xs), param("w", 1, ws + 1)};
  gradcheck(f_rmsnorm, in3, 2, last, 1e-2, 5e-3);
  release_all(in3, 2);
  fs_tensor *in4[2] = {param("x", 4, xs), param("w", 2, ws)};
  gradcheck(f_rmsnorm, in4, 2, two, 1e-2, 5e-3);
  release_all(in4, 2);
  static const double leaky[2] = {FSU_LEAKY_RELU, 0.2}, mish[2] = {FSU_MISH, 0};
  const double *acts[2] = {leaky, mish};
  for (int i = 0; i < 2; i++) { /* fresh inputs: gradients accumulate */
    fs_tensor *in5[1] = {param("x", 4, xs)};
    gradcheck(f_unary_param, in5, 1, acts[i], 1e-3, 5e-3);
    release_all(in5, 1);
  }
}

/* ---- losses with options (loss_grad.c) ---- */

typedef struct nll_case { fs_tensor *target, *weight; bool logits; int64_t ignore; double ls; fsG_reduction red; } nll_case;

static fs_tensor *f_nll(fs_tensor **in, const void *ctx) {
  const nll_case *c = ctx;
  return fsG_nll(in[0], c->target ? c->target : in[1], c->weight, c->logits, c->ignore, c->ls, c->red);
}

static void test_class_losses(void **state) {
  int64_t xs[2] = {5, 4}, ts[1] = {5}, ws[1] = {4}, x3[3] = {2, 4, 3}, t3[2] = {2, 3};
  fs_tensor *t = fsT_new(FS_I64, FS_DEV_CPU, 1, ts), *w = rt_rand("w", 0.2, 1, 1, ws);
  const int64_t tv[5] = {0, 3, 2, 3, 1};
  memcpy(t->data, tv, sizeof tv);
  const nll_case cases[] = {
    {t, NULL, true, -100, 0, FSG_MEAN}, {t, w, true, 3, 0.2, FSG_MEAN}, {t, w, true, 1, 0.1, FSG_SUM},
    {t, NULL, true, -100, 0.3, FSG_NONE}, {t, w, false, 2, 0, FSG_MEAN},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fs_tensor *in[1] = {param("x", 2, xs)};
    gradcheck(f_nll, in, 1, &cases[i], 1e-2, 5e-3);
    release_all(in, 1);
  }
  /* probability targets: gradients for both sides */
  nll_case probs = {NULL, w, true, -100, 0.2, FSG_MEAN};
  fs_tensor *pin[2] = {param("x", 2, xs), param("p", 2, xs)};
  gradcheck(f_nll, pin, 2, &probs, 1e-2, 5e-3);
  release_all(pin, 2);
  /* torch's layout [N, C, d] with [N, d] */
  fs_tensor *t2 = fsT_new(FS_I64, FS_DEV_CPU, 2, t3);
  const int64_t tv2[6] = {0, 3, 1, 2, 2, 0};
  memcpy(t2->data, tv2, sizeof tv2);
  nll_case dim1 = {t2, NULL, true, -100, 0.1, FSG_MEAN};
  fs_tensor *in3[1] = {param("x", 3, x3)};
  gradcheck(f_nll, in3, 1, &dim1, 1e-2, 5e-3);
  release_all(in3, 1);
  /* an out-of-range target that is not ignore_index is torch's error */
  fsT_i64(t)[2] = 7;
  fs_tensor *x = param("x", 2, xs);
  assert_null(fsG_nll(x, t, NULL, true, -100, 0, FSG_MEAN));
  assert_string_equal(fsT_error(), "Target 7 is out of bounds.");
  fsT_release(x);
  fsT_release(t);
  fsT_release(t2);
  fsT_release(w);
}

typedef struct ploss_case { fsN_ploss kind; double param; bool pos_weight, weight; fsG_reduction red; } ploss_case;

static fs_tensor *f_ploss(fs_tensor **in, const void *ctx) {
  const ploss_case *c = ctx;
  return fsG_ploss(c->kind, in[0], in[1], c->param, c->pos_weight ? in[2] : NULL, c->weight ? in[2] : NULL, c->red);
}

static void test_pointwise_losses(void **state) {
  static const ploss_case cases[] = {
    {FSN_MSE, 0, false, false, FSG_NONE}, {FSN_L1, 0, false, false, FSG_SUM},
    {FSN_SMOOTH_L1, 0.5, false, false, FSG_MEAN}, {FSN_HUBER, 0.7, false, false, FSG_MEAN},
    {FSN_BCE, 0, false, true, FSG_MEAN}, {FSN_BCE_LOGITS, 0, true, false, FSG_MEAN},
    {FSN_BCE_LOGITS, 0, false, false, FSG_SUM}, {FSN_KL_DIV, 0, false, false, FSG_BATCHMEAN},
    {FSN_KL_DIV, 1, false, false, FSG_SUM},
  };
  int64_t xs[2] = {3, 4}, ws[1] = {4};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const ploss_case *c = &cases[i];
    bool probs = c->kind == FSN_BCE || (c->kind == FSN_KL_DIV && c->param == 0);
    fs_tensor *in[3] = {probs && c->kind == FSN_BCE ? rt_rand("x", 0.1, 0.9, 2, xs) : param("x", 2, xs),
                        probs ? rt_rand("y", 0.05, 1, 2, xs) : param("y", 2, xs),
                        c->pos_weight || c->weight ? rt_rand("w", 0.5, 2, 1, ws) : NULL};
    in[0]->requires_grad = in[1]->requires_grad = true;
    /* h stays inside BCE's (0, 1) and off |x - y| = beta's kink for these draws */
    gradcheck(f_ploss, in, 2, c, 1e-3, 1e-2);
    release_all(in, 3);
  }
}

static fs_tensor *f_cosine(fs_tensor **in, const void *ctx) { return fsG_cosine_similarity(in[0], in[1], 1, 1e-8); }

static void test_cosine_similarity(void **state) {
  int64_t as[3] = {3, 4, 2}, bs[3] = {1, 4, 2};
  fs_tensor *in[2] = {param("a", 3, as), param("b", 3, bs)}; /* b broadcasts over the batch */
  gradcheck(f_cosine, in, 2, NULL, 1e-2, 5e-3);
  release_all(in, 2);
}

/* A failed check longjmps out of gradcheck with grad mode off. */
static int reset_grad_mode(void **state) {
  fsG_set_grad_enabled(true);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(test_linear, reset_grad_mode),
    cmocka_unit_test_setup(test_api_ops, reset_grad_mode),
    cmocka_unit_test_setup(test_api_errors, reset_grad_mode),
    cmocka_unit_test_setup(test_index_backward, reset_grad_mode),
    cmocka_unit_test_setup(test_index_semantics, reset_grad_mode),
    cmocka_unit_test_setup(test_linear_shape_error, reset_grad_mode),
    cmocka_unit_test_setup(test_embedding, reset_grad_mode),
    cmocka_unit_test_setup(test_posemb, reset_grad_mode),
    cmocka_unit_test_setup(test_layernorm, reset_grad_mode),
    cmocka_unit_test_setup(test_activations, reset_grad_mode),
    cmocka_unit_test_setup(test_gelu_values, reset_grad_mode),
    cmocka_unit_test_setup(test_attention, reset_grad_mode),
    cmocka_unit_test_setup(test_attention_causal, reset_grad_mode),
    cmocka_unit_test_setup(test_sdpa_fused, reset_grad_mode),
    cmocka_unit_test_setup(test_dropout, reset_grad_mode),
    cmocka_unit_test_setup(test_flatten, reset_grad_mode),
    cmocka_unit_test_setup(test_cross_entropy, reset_grad_mode),
    cmocka_unit_test_setup(test_mse, reset_grad_mode),
    cmocka_unit_test_setup(test_arithmetic, reset_grad_mode),
    cmocka_unit_test_setup(test_accumulate_and_free, reset_grad_mode),
    cmocka_unit_test_setup(test_first_gradients, reset_grad_mode),
    cmocka_unit_test_setup(test_no_grad, reset_grad_mode),
    cmocka_unit_test_setup(test_long_chain_release, reset_grad_mode),
    cmocka_unit_test_setup(test_compare_and_item, reset_grad_mode),
    cmocka_unit_test_setup(test_meta_rejected, reset_grad_mode),
    cmocka_unit_test_setup(test_bad_inputs, reset_grad_mode),
    cmocka_unit_test_setup(test_conv, reset_grad_mode),
    cmocka_unit_test_setup(test_conv_transpose, reset_grad_mode),
    cmocka_unit_test_setup(test_conv_errors, reset_grad_mode),
    cmocka_unit_test_setup(test_pooling, reset_grad_mode),
    cmocka_unit_test(test_maxpool_ties_nan),
    cmocka_unit_test(test_conv_chunks),
    cmocka_unit_test_setup(test_batchnorm, reset_grad_mode),
    cmocka_unit_test_setup(test_norms_and_activations, reset_grad_mode),
    cmocka_unit_test_setup(test_class_losses, reset_grad_mode),
    cmocka_unit_test_setup(test_pointwise_losses, reset_grad_mode),
    cmocka_unit_test_setup(test_cosine_similarity, reset_grad_mode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
