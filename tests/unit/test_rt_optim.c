/* test_rt_optim.c -- the optimizers, their groups and clipping against
 * PyTorch 1.13.  Expected values were printed by torch 1.13 (float.hex) for
 * the same parameter, gradients and schedule: three steps with grads
 * [0.1, -0.3, 0.2] * (step + 1) and every group's lr halved before the
 * third.  The runtime replays torch's CPU rounding (fused multiply-adds
 * included), so results are compared bit for bit. */
#include <math.h>
#include <string.h>
#include "optim.h"
#include "rt_testutil.h"

static fs_tensor *vec(int n, const float *v) {
  int64_t s[1] = {n};
  fs_tensor *p = rt_ok(fsT_new(FS_F32, FS_DEV_CPU, 1, s));
  memcpy(p->data, v, (size_t)n * sizeof *v);
  p->requires_grad = true;
  return p;
}

static fs_tensor *param(void) { return vec(3, (float[]){1.0f, -2.0f, 0.5f}); }

/* Three steps of o; q (may be NULL) is a second group's parameter with grads
 * [-0.5, 0.4] * (step + 1). */
static void steps(fs_optim *o, fs_tensor *p, fs_tensor *q) {
  if (!o) fail_msg("optimizer: %s", fsT_error());
  for (int step = 0; step < 3; step++) {
    fsO_zero_grad(o);
    assert_null(p->grad);
    float f = (float)(step + 1);
    p->grad = vec(3, (float[]){0.1f * f, -0.3f * f, 0.2f * f});
    if (q) q->grad = vec(2, (float[]){-0.5f * f, 0.4f * f});
    if (step == 2)
      for (int64_t k = 0; k < o->ngroups; k++) o->groups[k].h.lr *= 0.5;
    assert_int_equal(fsO_step(o), 0);
  }
}

static void expect(const fs_tensor *p, const double *want) {
  for (int64_t i = 0; i < p->numel; i++)
    if (fsT_f32(p)[i] != (float)want[i])
      fail_msg("element %lld: %a, torch %a", (long long)i, fsT_f32(p)[i], want[i]);
}

static void check(fsO_kind kind, fsO_hyper h, const double want[3]) {
  fs_tensor *p = param();
  fs_optim *o = fsO_new(kind, &p, 1, &h);
  steps(o, p, NULL);
  expect(p, want);
  fsO_release(o);
  fsT_release(p);
}

static fsO_hyper with(fsO_kind kind, double lr) {
  fsO_hyper h = fsO_defaults(kind);
  h.lr = lr;
  return h;
}

static void test_sgd(void **state) {
  fsO_hyper h = with(FSO_SGD, 0.1);
  check(FSO_SGD, h, (double[]){0x1.e8f5c4p-1, -0x1.dd70a4p+0, 0x1.a3d70ap-2});
  h.momentum = 0.9, h.dampening = 0.1, h.weight_decay = 0.01;
  check(FSO_SGD, h, (double[]){0x1.dddc6ap-1, -0x1.cdd488p+0, 0x1.7dad1cp-2});
  h = with(FSO_SGD, 0.1), h.momentum = 0.9, h.nesterov = true;
  check(FSO_SGD, h, (double[]){0x1.ca1038p-1, -0x1.af1852p+0, 0x1.2840e2p-2});
  h = with(FSO_SGD, 0.1), h.momentum = 0.9, h.maximize = true;
  check(FSO_SGD, h, (double[]){0x1.112a3p+0, -0x1.19bf48p+1, 0x1.44a8c2p-1});
}

static void test_adam(void **state) {
  fsO_hyper h = with(FSO_ADAM, 0.01);
  h.weight_decay = 0.01;
  check(FSO_ADAM, h, (double[]){0x1.f372b4p-1, -0x1.f9bae2p+0, 0x1.e6f386p-2});
  h.amsgrad = true; /* v only grows here: the same values */
  check(FSO_ADAM, h, (double[]){0x1.f372b4p-1, -0x1.f9bae2p+0, 0x1.e6f386p-2});
  h = with(FSO_ADAMW, 0.01), h.weight_decay = 0.1;
  check(FSO_ADAMW, h, (double[]){0x1.f2378cp-1, -0x1.f87812p+0, 0x1.e5b68p-2});
  h = with(FSO_ADAMW, 0.01), h.amsgrad = true, h.maximize = true;
  check(FSO_ADAMW, h, (double[]){0x1.06314cp+0, -0x1.031076p+1, 0x1.0c72fep-1});
}

static void test_rmsprop_adagrad(void **state) {
  check(FSO_RMSPROP, with(FSO_RMSPROP, 0.01), (double[]){0x1.8a63ccp-1, -0x1.c531e6p+0, 0x1.14c79p-2});
  fsO_hyper h = with(FSO_RMSPROP, 0.01);
  h.momentum = 0.9, h.centered = true, h.weight_decay = 0.1;
  check(FSO_RMSPROP, h, (double[]){0x1.38a732p-1, -0x1.9b2c44p+0, 0x1.9fd536p-4});
  check(FSO_ADAGRAD, with(FSO_ADAGRAD, 0.1), (double[]){0x1.8a7acap-1, -0x1.c53d66p+0, 0x1.14f594p-2});
  h = with(FSO_ADAGRAD, 0.1);
  h.lr_decay = 0.01, h.weight_decay = 0.1, h.initial_accumulator_value = 0.5;
  check(FSO_ADAGRAD, h, (double[]){0x1.d3e4aep-1, -0x1.d7907cp+0, 0x1.8c42d4p-2});
}

/* torch: SGD([{"params": [p]}, {"params": [q], "lr": 0.05}], lr=0.1, momentum=0.9) */
static void test_groups(void **state) {
  fs_tensor *p = param(), *q = vec(2, (float[]){0.25f, 3.0f});
  fsO_hyper h = with(FSO_SGD, 0.1);
  h.momentum = 0.9;
  fs_optim *o = fsO_new(FSO_SGD, &p, 1, &h);
  h.lr = 0.05;
  assert_int_equal(fsO_add_group(o, &q, 1, &h), 0);
  assert_int_equal(fsO_add_group(o, &q, 1, &h), -1);
  assert_string_equal(fsT_error(), "some parameters appear in more than one parameter group");
  h.lr = -1;
  assert_int_equal(fsO_add_group(o, &q, 0, &h), -1);
  assert_string_equal(fsT_error(), "Invalid learning rate: -1");
  assert_int_equal(o->ngroups, 2);
  steps(o, p, q);
  expect(p, (double[]){0x1.ddaba0p-1, -0x1.cc8170p+0, 0x1.76ae7cp-2});
  expect(q, (double[]){0x1.aba5e4p-2, 0x1.6ed5d0p+1});
  fs_tensor *flat = param(); /* FSDP's swap needs one group */
  assert_int_equal(fsO_replace_params(o, &flat, 1), -1);
  fsT_release(flat);
  fsO_release(o);
  fsT_release(p);
  fsT_release(q);
}

static void test_skip_without_grad_and_errors(void **state) {
  fs_tensor *p = param();
  fsO_hyper h = with(FSO_ADAM, 0.01);
  fs_optim *o = fsO_new(FSO_ADAM, &p, 1, &h);
  assert_int_equal(fsO_step(o), 0); /* no grad: untouched, no state */
  assert_float_equal(fsT_f32(p)[0], 1.0f, 0);
  assert_int_equal(o->steps[0], 0);
  assert_null(o->buf0[0]);
  fsO_release(o);
  h = with(FSO_SGD, -0.1);
  assert_null(fsO_new(FSO_SGD, &p, 1, &h));
  assert_string_equal(fsT_error(), "Invalid learning rate: -0.1");
  h = with(FSO_SGD, 0.1), h.nesterov = true;
  assert_null(fsO_new(FSO_SGD, &p, 1, &h));
  assert_string_equal(fsT_error(), "Nesterov momentum requires a momentum and zero dampening");
  h = with(FSO_ADAMW, 0.1), h.beta1 = 1.0;
  assert_null(fsO_new(FSO_ADAMW, &p, 1, &h));
  assert_string_equal(fsT_error(), "Invalid beta parameter at index 0: 1");
  h = with(FSO_RMSPROP, 0.1), h.alpha = -1;
  assert_null(fsO_new(FSO_RMSPROP, &p, 1, &h));
  assert_string_equal(fsT_error(), "Invalid alpha value: -1");
  h = with(FSO_ADAGRAD, 0.1), h.lr_decay = -1;
  assert_null(fsO_new(FSO_ADAGRAD, &p, 1, &h));
  assert_string_equal(fsT_error(), "Invalid lr_decay value: -1");
  h = with(FSO_ADADELTA, 1.0), h.rho = 1.5;
  assert_null(fsO_new(FSO_ADADELTA, &p, 1, &h));
  assert_string_equal(fsT_error(), "Invalid rho value: 1.5");
  assert_string_equal(fsO_state_name(FSO_ADADELTA, 1), "acc_delta");
  h = with(FSO_SGD, 0.1);
  assert_null(fsO_new(FSO_SGD, &p, 0, &h));
  assert_string_equal(fsT_error(), "optimizer got an empty parameter list");
  assert_string_equal(fsO_state_name(FSO_RMSPROP, 2), "grad_avg");
  assert_null(fsO_state_name(FSO_SGD, 1));
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
    cmocka_unit_test(test_rmsprop_adagrad),
    cmocka_unit_test(test_groups),
    cmocka_unit_test(test_skip_without_grad_and_errors),
    cmocka_unit_test(test_clip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
