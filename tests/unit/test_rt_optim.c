/* test_rt_optim.c -- SGD/Adam/AdamW and clipping against PyTorch 1.13.
 * Expected values were printed by torch 1.13 (float.hex) for the same
 * parameter, gradients and schedule: three steps with grads
 * [0.1, -0.3, 0.2] * (step + 1) and lr halved before the third. */
#include <math.h>
#include <string.h>
#include "optim.h"
#include "rt_testutil.h"

/* Allowed error: a few float ulps (summation order of constants). */
#define ULPS 4e-7

static void run(fs_optim *o, fs_tensor *p, const double want[3]) {
  if (!o) fail_msg("optimizer: %s", fsT_error());
  int64_t s[1] = {3};
  for (int step = 0; step < 3; step++) {
    fs_tensor *g = rt_ok(fsT_new(FS_F32, FS_DEV_CPU, 1, s));
    float base[3] = {0.1f, -0.3f, 0.2f};
    for (int i = 0; i < 3; i++) fsT_f32(g)[i] = base[i] * (float)(step + 1);
    fsO_zero_grad(o);
    assert_null(p->grad);
    p->grad = g;
    if (step == 2) o->lr *= 0.5;
    assert_int_equal(fsO_step(o), 0);
  }
  for (int i = 0; i < 3; i++)
    if (fabs(fsT_f32(p)[i] - want[i]) > ULPS * fabs(want[i]))
      fail_msg("element %d: %.9g, torch %.9g", i, fsT_f32(p)[i], want[i]);
  fsO_release(o);
}

static fs_tensor *param(void) {
  int64_t s[1] = {3};
  fs_tensor *p = rt_ok(fsT_new(FS_F32, FS_DEV_CPU, 1, s));
  float v[3] = {1.0f, -2.0f, 0.5f};
  memcpy(p->data, v, sizeof v);
  p->requires_grad = true;
  return p;
}

static void test_sgd(void **state) {
  struct { double mom, damp, wd; bool nesterov; double want[3]; } cases[] = {
    {0, 0, 0, false, {0x1.e8f5c4p-1, -0x1.dd70a4p+0, 0x1.a3d70ap-2}},
    {0.9, 0.1, 0.01, false, {0x1.dddc6ap-1, -0x1.cdd488p+0, 0x1.7dad1cp-2}},
    {0.9, 0, 0, true, {0x1.ca1038p-1, -0x1.af1852p+0, 0x1.2840e2p-2}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    fs_tensor *p = param();
    run(fsO_sgd(&p, 1, 0.1, cases[c].mom, cases[c].damp, cases[c].wd, cases[c].nesterov), p, cases[c].want);
    fsT_release(p);
  }
}

static void test_adam(void **state) {
  fs_tensor *p = param();
  run(fsO_adam(&p, 1, false, 0.01, 0.9, 0.999, 1e-8, 0.01), p,
      (double[]){0x1.f372b4p-1, -0x1.f9bae2p+0, 0x1.e6f386p-2});
  fsT_release(p);
  p = param();
  run(fsO_adam(&p, 1, true, 0.01, 0.9, 0.999, 1e-8, 0.1), p,
      (double[]){0x1.f2378cp-1, -0x1.f87812p+0, 0x1.e5b680p-2});
  fsT_release(p);
}

static void test_skip_without_grad_and_errors(void **state) {
  fs_tensor *p = param();
  fs_optim *o = fsO_adam(&p, 1, false, 0.01, 0.9, 0.999, 1e-8, 0);
  assert_int_equal(fsO_step(o), 0); /* no grad: untouched, no state */
  assert_float_equal(fsT_f32(p)[0], 1.0f, 0);
  assert_int_equal(o->steps[0], 0);
  assert_null(o->buf0[0]);
  fsO_release(o);
  assert_null(fsO_sgd(&p, 1, -0.1, 0, 0, 0, false));
  assert_string_equal(fsT_error(), "Invalid learning rate: -0.1");
  assert_null(fsO_sgd(&p, 1, 0.1, 0, 0, 0, true));
  assert_string_equal(fsT_error(), "Nesterov momentum requires a momentum and zero dampening");
  assert_null(fsO_adam(&p, 1, true, 0.1, 1.0, 0.999, 1e-8, 0));
  assert_string_equal(fsT_error(), "Invalid beta parameter at index 0: 1");
  fsT_release(p);
}

static void test_clip(void **state) {
  int64_t s2[1] = {2}, s1[1] = {1};
  fs_tensor *ps[2] = {rt_ok(fsT_zeros(FS_F32, FS_DEV_CPU, 1, s2)), rt_ok(fsT_zeros(FS_F32, FS_DEV_CPU, 1, s1))};
  ps[0]->grad = rt_ok(fsT_zeros(FS_F32, FS_DEV_CPU, 1, s2));
  ps[1]->grad = rt_ok(fsT_zeros(FS_F32, FS_DEV_CPU, 1, s1));
  float *a = fsT_f32(ps[0]->grad), *b = fsT_f32(ps[1]->grad);
  double total;
  a[0] = 3, a[1] = 0, b[0] = 4;
  assert_int_equal(fsO_clip_grad_norm(ps, 2, 1.0, 2.0, &total), 0);
  assert_float_equal(total, 5.0, 1e-6);
  assert_float_equal(a[0], 0x1.333330p-1, 1e-7);
  assert_float_equal(b[0], 0x1.999994p-1, 1e-7);
  a[0] = 3, a[1] = -7, b[0] = 4;
  assert_int_equal(fsO_clip_grad_norm(ps, 2, 2.0, INFINITY, &total), 0);
  assert_float_equal(total, 7.0, 0);
  assert_float_equal(a[1], -0x1.fffffap+0, 1e-7);
  assert_float_equal(b[0], 0x1.249246p+0, 1e-7);
  a[0] = 0.5, a[1] = -7, b[0] = 4; /* under the limit: unchanged */
  assert_int_equal(fsO_clip_grad_norm(ps, 2, 100.0, 2.0, &total), 0);
  assert_float_equal(a[0], 0.5, 0);
  assert_int_equal(fsO_clip_grad_norm(ps, 2, 1.0, 1.0, &total), -1);
  fsO_clip_grad_value(ps, 2, 1.0);
  assert_true(a[0] == 0.5f && a[1] == -1.0f && b[0] == 1.0f);
  fsT_release(ps[0]);
  fsT_release(ps[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sgd),
    cmocka_unit_test(test_adam),
    cmocka_unit_test(test_skip_without_grad_and_errors),
    cmocka_unit_test(test_clip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
