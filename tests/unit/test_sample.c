/* test_sample.c -- sample.h: the draw rule (temperature, top_k and its
 * ties, the ends of [0, 1)), the byte-level model check, and the loop's
 * cropping, counter and autograd switch, on a fake forward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "module.h"
#include "rt_testutil.h"
#include "sample.h"

static void flat(float *l, float v) {
  for (int i = 0; i < FSSM_VOCAB; i++) l[i] = v;
}

static void test_pick_follows_the_cumulative_probability(void **state) {
  float l[FSSM_VOCAB];
  flat(l, 0);
  assert_int_equal(fsSM_pick(l, 1.0, FSSM_ALL, 0.0), 0);
  assert_int_equal(fsSM_pick(l, 1.0, FSSM_ALL, 0.5), 128);
  assert_int_equal(fsSM_pick(l, 1.0, FSSM_ALL, 1 - 0x1p-53), 255);
  l[7] = 5;
  assert_int_equal(fsSM_pick(l, 1e-3, FSSM_ALL, 0.999), 7); /* cold: the largest */
  assert_int_equal(fsSM_pick(l, 1e300, FSSM_ALL, 0.5), 128); /* hot: uniform */
}

static void test_top_k_keeps_the_largest_and_their_ties(void **state) {
  float l[FSSM_VOCAB];
  flat(l, 0);
  l[3] = 2, l[9] = 1, l[200] = 2;
  for (double u = 0; u < 1; u += 1.0 / 64) {
    int t = fsSM_pick(l, 1.0, 2, u);
    assert_true(t == 3 || t == 200);
    t = fsSM_pick(l, 1.0, 3, u);
    assert_true(t == 3 || t == 9 || t == 200);
  }
  assert_int_equal(fsSM_pick(l, 1.0, 1, 0.99), 200); /* a tie with the 1st stays */
  assert_int_equal(fsSM_pick(l, 1.0, 1000, 0.0), 0); /* beyond the vocabulary: all */
}

static void test_pick_rejects_a_non_finite_logit(void **state) {
  float l[FSSM_VOCAB];
  flat(l, 0);
  l[65] = NAN;
  assert_int_equal(fsSM_pick(l, 1.0, FSSM_ALL, 0.5), -1);
  assert_non_null(strstr(fsT_error(), "logit for byte 65 is nan"));
}

static void test_options(void **state) {
  char err[160];
  fsSM_opts o = {(const unsigned char *)"x", 1, 3, 0.8, 40};
  assert_int_equal(fsSM_check_opts(&o, err, sizeof err), 0);
  o.temperature = INFINITY;
  assert_int_equal(fsSM_check_opts(&o, err, sizeof err), -1);
  assert_string_equal(err, "generate(): temperature must be > 0 and finite, not inf");
  o.temperature = 1, o.top_k = -2;
  assert_int_equal(fsSM_check_opts(&o, err, sizeof err), -1);
  assert_string_equal(err, "generate(): top_k must be >= 1 or None, not -2");
}

static fs_module *lm(fs_module *first, int64_t context, int64_t vocab) {
  fs_module *m = fsM_sequential();
  assert_int_equal(fsM_append(m, "wte", first), 0);
  if (context) assert_int_equal(fsM_append(m, "wpe", fsM_posemb(context, 8)), 0);
  assert_int_equal(fsM_append(m, "lm_head", fsM_linear(8, vocab, false)), 0);
  return m;
}

static void test_byte_lm(void **state) {
  int64_t ctx = -1;
  fs_module *m = lm(fsM_embedding(256, 8), 16, 256);
  assert_int_equal(fsSM_byte_lm(m, &ctx), 0);
  assert_int_equal(ctx, 16);
  fsM_release(m);
  m = lm(fsM_embedding(256, 8), 0, 256);
  assert_int_equal(fsSM_byte_lm(m, &ctx), 0);
  assert_int_equal(ctx, 0);
  fsM_release(m);
  m = lm(fsM_linear(256, 8, true), 0, 256);
  assert_int_equal(fsSM_byte_lm(m, &ctx), -1);
  assert_non_null(strstr(fsT_error(), "this one's is Linear"));
  fsM_release(m);
  m = lm(fsM_embedding(50, 8), 0, 256);
  assert_int_equal(fsSM_byte_lm(m, &ctx), -1);
  assert_non_null(strstr(fsT_error(), "this one's is Embedding(50, 8)"));
  fsM_release(m);
  m = lm(fsM_embedding(256, 8), 4, 100);
  assert_int_equal(fsSM_byte_lm(m, &ctx), -1);
  assert_non_null(strstr(fsT_error(), "this one maps [1, 4] to [1, 4, 100]"));
  fsM_release(m);
}

/* Logits [1, T, V] that make the byte after b almost surely b + 1. */
static int64_t longest;
static fs_tensor *successor(void *ud, fs_tensor *idx) {
  assert_false(fsG_grad_enabled());
  int64_t T = idx->shape[1];
  longest = T > longest ? T : longest;
  fs_tensor *l = fsT_zeros(FS_F32, FS_DEV_CPU, 3, (int64_t[]){1, T, FSSM_VOCAB});
  for (int64_t t = 0; t < T; t++) fsT_f32(l)[t * FSSM_VOCAB + (fsT_i64(idx)[t] + 1) % FSSM_VOCAB] = 50;
  return l;
}

static void test_generate_crops_counts_and_restores_grad(void **state) {
  fsSM_opts o = {(const unsigned char *)"abcdef", 6, 10, 1.0, FSSM_ALL};
  uint64_t counter = 5;
  unsigned char *out = NULL;
  longest = 0;
  assert_int_equal(fsSM_generate(successor, NULL, 4, &o, fsR_key(1, "generate"), &counter, &out), 0);
  assert_memory_equal(out, "abcdefghijklmnop", 16);
  assert_int_equal(longest, 4);
  assert_int_equal(counter, 15);
  assert_true(fsG_grad_enabled());
  free(out);
}

static fs_tensor *broken(void *ud, fs_tensor *idx) {
  fsT_seterr("broken forward");
  return NULL;
}

static void test_generate_passes_a_forward_error_on(void **state) {
  fsSM_opts o = {(const unsigned char *)"a", 1, 3, 1.0, FSSM_ALL};
  uint64_t counter = 0;
  unsigned char *out = NULL;
  assert_int_equal(fsSM_generate(broken, NULL, 0, &o, 1, &counter, &out), -1);
  assert_string_equal(fsT_error(), "broken forward");
  assert_null(out);
  assert_true(fsG_grad_enabled());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pick_follows_the_cumulative_probability),
      cmocka_unit_test(test_top_k_keeps_the_largest_and_their_ties),
      cmocka_unit_test(test_pick_rejects_a_non_finite_logit),
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_byte_lm),
      cmocka_unit_test(test_generate_crops_counts_and_restores_grad),
      cmocka_unit_test(test_generate_passes_a_forward_error_on),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
