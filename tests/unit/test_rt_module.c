/* test_rt_module.c -- module tree: state-dict keys, shapes, meta building
 * (RSS), materialization and its slice property, reset/to_empty, forward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "module.h"
#include "rt_testutil.h"

static fs_module *ok(fs_module *m) {
  if (!m) fail_msg("builder failed: %s", fsT_error());
  return m;
}

static void append(fs_module *seq, const char *key, fs_module *child) {
  if (fsM_append(seq, key, child)) fail_msg("append: %s", fsT_error());
}

/* model MLP: Flatten(); fc1 = Linear(784, h); ReLU(); fc2 = Linear(h, 10) */
static fs_module *mlp(int64_t hidden) {
  fs_module *m = ok(fsM_sequential());
  append(m, NULL, ok(fsM_activation(FSM_FLATTEN)));
  append(m, "fc1", ok(fsM_linear(784, hidden, true)));
  append(m, NULL, ok(fsM_activation(FSM_RELU)));
  append(m, "fc2", ok(fsM_linear(hidden, 10, true)));
  return m;
}

/* model Block(dim, heads): residual: LayerNorm, CSA; residual: LayerNorm,
 * Linear(dim, 4 dim), GELU, Linear(4 dim, dim) */
static fs_module *block(int64_t dim, int64_t heads) {
  fs_module *b = ok(fsM_sequential()), *r1 = ok(fsM_residual()), *r2 = ok(fsM_residual());
  append(r1, NULL, ok(fsM_layernorm(dim, 1e-5)));
  append(r1, NULL, ok(fsM_attention(dim, heads, true)));
  append(r2, NULL, ok(fsM_layernorm(dim, 1e-5)));
  append(r2, NULL, ok(fsM_linear(dim, 4 * dim, true)));
  append(r2, NULL, ok(fsM_gelu(false)));
  append(r2, NULL, ok(fsM_linear(4 * dim, dim, true)));
  append(b, NULL, r1);
  append(b, NULL, r2);
  return b;
}

static fs_module *gpt(int64_t vocab, int64_t context, int64_t dim, int64_t heads, int64_t layers) {
  fs_module *m = ok(fsM_sequential());
  append(m, "wte", ok(fsM_embedding(vocab, dim)));
  append(m, "wpe", ok(fsM_posemb(context, dim)));
  fs_module *body = ok(fsM_sequential()); /* `h = repeat layers: Block(dim, heads)` */
  append(body, NULL, block(dim, heads));
  append(m, "h", ok(fsM_repeat(layers, body)));
  append(m, "ln_f", ok(fsM_layernorm(dim, 1e-5)));
  append(m, "lm_head", ok(fsM_linear(dim, vocab, false)));
  return m;
}

static void test_mlp_keys(void **state) {
  fs_module *m = mlp(256);
  fsM_param *ps;
  int64_t n = fsM_parameters(m, &ps);
  const char *want[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  assert_int_equal(n, 4);
  for (int i = 0; i < 4; i++) assert_string_equal(ps[i].name, want[i]);
  assert_int_equal(ps[0].t->shape[0], 256);
  assert_int_equal(ps[0].t->shape[1], 784);
  assert_int_equal(fsM_num_parameters(m), 784 * 256 + 256 + 256 * 10 + 10);
  fsM_params_free(ps, n);
  /* anonymous layers take their index among all children */
  fs_module *s = ok(fsM_sequential());
  append(s, NULL, ok(fsM_activation(FSM_FLATTEN)));
  append(s, NULL, ok(fsM_linear(4, 3, false)));
  n = fsM_parameters(s, &ps);
  assert_int_equal(n, 1);
  assert_string_equal(ps[0].name, "1.weight");
  fsM_params_free(ps, n);
  assert_int_equal(fsM_append(s, "1", ok(fsM_activation(FSM_RELU))), -1);
  assert_string_equal(fsT_error(), "duplicate layer name '1'");
  fsM_release(s);
  fsM_release(m);
}

static void test_gpt_keys(void **state) {
  fs_module *m = gpt(256, 16, 32, 2, 2);
  fsM_param *ps;
  int64_t n = fsM_parameters(m, &ps);
  const char *want[] = {
    "wte.weight", "wpe.weight",
    "h.0.0.0.weight", "h.0.0.0.bias", "h.0.0.1.c_attn.weight", "h.0.0.1.c_attn.bias",
    "h.0.0.1.c_proj.weight", "h.0.0.1.c_proj.bias", "h.0.1.0.weight", "h.0.1.0.bias",
    "h.0.1.1.weight", "h.0.1.1.bias", "h.0.1.3.weight", "h.0.1.3.bias",
  };
  assert_int_equal(n, 2 + 2 * 12 + 3);
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) assert_string_equal(ps[i].name, want[i]);
  assert_string_equal(ps[14].name, "h.1.0.0.weight");
  assert_string_equal(ps[n - 1].name, "lm_head.weight");
  assert_int_equal(ps[4].t->shape[0], 96);
  fsM_params_free(ps, n);
  fsM_release(m);
}

static void test_repeat_named_body(void **state) {
  /* `h = repeat 2: blk = Linear(..)` keeps the name; several statements
   * make a Sequential per copy */
  fs_module *body = ok(fsM_sequential());
  append(body, "blk", ok(fsM_linear(2, 2, false)));
  fs_module *m = ok(fsM_sequential());
  append(m, "h", ok(fsM_repeat(2, body)));
  fs_module *body2 = ok(fsM_sequential());
  append(body2, NULL, ok(fsM_linear(2, 2, false)));
  append(body2, NULL, ok(fsM_activation(FSM_RELU)));
  append(m, NULL, ok(fsM_repeat(1, body2)));
  fsM_param *ps;
  int64_t n = fsM_parameters(m, &ps);
  assert_int_equal(n, 3);
  assert_string_equal(ps[0].name, "h.0.blk.weight");
  assert_string_equal(ps[1].name, "h.1.blk.weight");
  assert_string_equal(ps[2].name, "1.0.0.weight");
  assert_ptr_not_equal(ps[0].t, ps[1].t); /* copies, not shared */
  fsM_params_free(ps, n);
  fsM_release(m);
}

static void test_out_shape(void **state) {
  fs_module *m = mlp(256);
  int64_t in[4] = {-1, 1, 28, 28}, out[FS_MAX_RANK];
  int rank;
  const fs_module *bad = NULL;
  char err[256];
  assert_int_equal(fsM_out_shape(m, 4, in, &rank, out, &bad, err, sizeof err), 0);
  assert_int_equal(rank, 2);
  assert_true(out[0] == -1 && out[1] == 10);
  fsM_release(m);

  fs_module *s = ok(fsM_sequential());
  append(s, NULL, ok(fsM_linear(784, 256, true)));
  append(s, NULL, ok(fsM_linear(128, 10, true)));
  int64_t x[2] = {-1, 784};
  assert_int_equal(fsM_out_shape(s, 2, x, &rank, out, &bad, err, sizeof err), -1);
  assert_ptr_equal(bad, s->kids[1]);
  assert_string_equal(err, "mat1 and mat2 shapes cannot be multiplied (?x256 and 128x10)");
  fsM_release(s);

  fs_module *g = gpt(256, 16, 32, 2, 2);
  int64_t idx[2] = {4, 16};
  assert_int_equal(fsM_out_shape(g, 2, idx, &rank, out, &bad, err, sizeof err), 0);
  assert_true(rank == 3 && out[0] == 4 && out[1] == 16 && out[2] == 256);
  int64_t longer[2] = {4, 17};
  assert_int_equal(fsM_out_shape(g, 2, longer, &rank, out, &bad, err, sizeof err), -1);
  assert_int_equal(bad->kind, FSM_POSEMB);
  fsM_release(g);
}

static long rss_pages(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, rss = 0;
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%ld %ld", &size, &rss), 2);
  fclose(f);
  return rss;
}

static void test_meta_7b_allocates_nothing(void **state) {
  long before = rss_pages();
  fs_module *m = gpt(32000, 4096, 4096, 32, 32);
  long after = rss_pages();
  int64_t n = fsM_num_parameters(m);
  assert_true(n > 6500000000LL);       /* ~6.9e9 parameters */
  assert_true((after - before) * 4096L < 2L << 20); /* under 2 MiB for 28 GB of fp32 */
  fsM_param *ps;
  int64_t np = fsM_parameters(m, &ps);
  for (int64_t i = 0; i < np; i++) {
    assert_null(ps[i].t->data);
    assert_int_equal(ps[i].t->device, FS_DEV_META);
  }
  fsM_params_free(ps, np);
  fsM_release(m);
}

static uint64_t hash_floats(const float *v, size_t n, uint64_t h) {
  const unsigned char *b = (const unsigned char *)v;
  for (size_t i = 0; i < n * sizeof *v; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static void test_materialize_slices(void **state) {
  fs_module *m = gpt(64, 8, 16, 2, 1);
  assert_int_equal(fsM_materialize(m, FS_DEV_CPU, 42), 0);
  fsM_param *ps;
  int64_t n = fsM_parameters(m, &ps);
  for (int64_t i = 0; i < n; i++) {
    fs_tensor *t = ps[i].t;
    assert_non_null(t->data);
    size_t cnt = (size_t)t->numel, cut = cnt / 3 | 1; /* an odd split point */
    float *buf = malloc(cnt * sizeof *buf);
    assert_int_equal(fsM_init_param(ps[i].owner, ps[i].index, ps[i].name, 42, FS_DEV_CPU, buf, 0, cut), 0);
    assert_int_equal(fsM_init_param(ps[i].owner, ps[i].index, ps[i].name, 42, FS_DEV_CPU, buf + cut,
                                    cut, cnt - cut), 0);
    assert_true(hash_floats(buf, cnt, 1) == hash_floats(fsT_f32(t), cnt, 1));
    free(buf);
  }
  /* distributions: Linear U(+-1/sqrt(in)), Embedding N(0,1), LayerNorm 1/0 */
  const float *w = fsT_f32(ps[0].t); /* wte [64,16] */
  double mean = 0, var = 0;
  for (int i = 0; i < 1024; i++) mean += w[i];
  mean /= 1024;
  for (int i = 0; i < 1024; i++) var += (w[i] - mean) * (w[i] - mean);
  var /= 1023;
  assert_true(fabs(mean) < 0.1 && fabs(var - 1) < 0.15);
  const float *ln_w = fsT_f32(ps[2].t), *ln_b = fsT_f32(ps[3].t);
  for (int i = 0; i < 16; i++) assert_true(ln_w[i] == 1.0f && ln_b[i] == 0.0f);
  const fs_tensor *attn = ps[4].t; /* c_attn.weight [48,16]: bound 1/4 */
  float mx = 0;
  for (int64_t i = 0; i < attn->numel; i++) mx = fmaxf(mx, fabsf(fsT_f32(attn)[i]));
  assert_true(mx <= 0.25f && mx > 0.24f);
  assert_string_equal(ps[n - 1].name, "lm_head.weight");

  /* a second model built "directly" with the same seed is bitwise equal;
   * another seed differs; to_empty + reset_parameters restores */
  fs_module *m2 = gpt(64, 8, 16, 2, 1), *m3 = gpt(64, 8, 16, 2, 1);
  assert_int_equal(fsM_materialize(m2, FS_DEV_CPU, 42), 0);
  assert_int_equal(fsM_materialize(m3, FS_DEV_CPU, 43), 0);
  fsM_param *p2, *p3;
  fsM_parameters(m2, &p2);
  fsM_parameters(m3, &p3);
  assert_int_equal(fsM_to_empty(m, FS_DEV_CPU), 0);
  assert_int_equal(fsM_reset_parameters(m, 42), 0);
  for (int64_t i = 0; i < n; i++) {
    size_t cnt = (size_t)ps[i].t->numel;
    assert_memory_equal(ps[i].t->data, p2[i].t->data, cnt * sizeof(float));
    if (ps[i].owner->kind != FSM_LAYERNORM)
      assert_memory_not_equal(ps[i].t->data, p3[i].t->data, cnt * sizeof(float));
  }
  fsM_params_free(ps, n);
  fsM_params_free(p2, n);
  fsM_params_free(p3, n);
  fsM_release(m);
  fsM_release(m2);
  fsM_release(m3);
}

static void test_reset_needs_storage(void **state) {
  fs_module *m = mlp(8);
  assert_int_equal(fsM_reset_parameters(m, 1), -1);
  assert_string_equal(fsT_error(), "reset_parameters: parameter 'fc1.weight' is on the meta device; call to_empty first");
  fs_tensor *x = rt_rand("x", 0, 1, 2, (int64_t[]){2, 784});
  assert_null(fsM_forward(m, x));
  assert_non_null(strstr(fsT_error(), "meta"));
  fsT_release(x);
  fsM_release(m);
}

static void test_forward_and_modes(void **state) {
  fs_module *m = ok(fsM_sequential());
  append(m, NULL, mlp(32));
  append(m, NULL, ok(fsM_dropout(0.5)));
  assert_int_equal(fsM_materialize(m, FS_DEV_CPU, 7), 0);
  int64_t xs[4] = {3, 1, 28, 28};
  fs_tensor *x = rt_rand("x", 0, 1, 4, xs);
  fs_tensor *y = rt_ok(fsM_forward(m, x));
  assert_true(y->rank == 2 && y->shape[0] == 3 && y->shape[1] == 10);
  assert_true(y->requires_grad);
  fsM_train(m, false);
  assert_false(m->kids[1]->training);
  assert_false(m->kids[0]->kids[1]->training);
  fs_tensor *a = rt_ok(fsM_forward(m, x)), *b = rt_ok(fsM_forward(m, x));
  assert_memory_equal(a->data, b->data, 30 * sizeof(float)); /* eval: no dropout */
  int dropped = 0;
  for (int i = 0; i < 30; i++) dropped += fsT_f32(y)[i] == 0 && fsT_f32(a)[i] != 0;
  assert_true(dropped > 0);
  /* a clone has equal values and its own storage */
  fs_module *c = ok(fsM_clone(m));
  fs_tensor *cy = rt_ok(fsM_forward(c, x));
  assert_memory_equal(cy->data, a->data, 30 * sizeof(float));
  assert_ptr_not_equal(c->kids[0]->kids[1]->params[0]->data, m->kids[0]->kids[1]->params[0]->data);
  fsT_release(cy);
  fsM_release(c);
  fsT_release(a);
  fsT_release(b);
  fsT_release(y);
  fsT_release(x);
  fsM_release(m);
}

static void test_bad_builders(void **state) {
  assert_null(fsM_linear(0, 3, true));
  assert_string_equal(fsT_error(), "Linear: in_features must be positive, got 0");
  assert_null(fsM_attention(10, 3, true));
  assert_string_equal(fsT_error(), "CausalSelfAttention: dim 10 is not divisible by heads 3");
  assert_null(fsM_dropout(1.5));
  assert_null(fsM_repeat(-1, ok(fsM_sequential())));
  fs_module *s = ok(fsM_sequential());
  assert_int_equal(fsM_append(s, NULL, fsM_linear(-1, 2, true)), -1); /* a failed builder */
  assert_int_equal(s->nkids, 0);
  fsM_release(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_mlp_keys),
    cmocka_unit_test(test_gpt_keys),
    cmocka_unit_test(test_repeat_named_body),
    cmocka_unit_test(test_out_shape),
    cmocka_unit_test(test_meta_7b_allocates_nothing),
    cmocka_unit_test(test_materialize_slices),
    cmocka_unit_test(test_reset_needs_storage),
    cmocka_unit_test(test_forward_and_modes),
    cmocka_unit_test(test_bad_builders),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
