/* test_rt_sched.c -- the LR schedulers of lr_sched.h against torch 1.13:
 * values printed by torch (float.hex) for one group at lr 0.1, compared bit
 * for bit, and torch's errors.  tests/parity/sched_parity.py covers 1,000
 * steps of every scheduler; these pin the branches of the chainable forms. */
#include <math.h>
#include <string.h>
#include "lr_sched.h"
#include "rt_testutil.h"

static fsY_sched *start(fsY_kind kind, fsY_opts o, double *lr) {
  double init = 0.1;
  *lr = 0.1;
  fsY_sched *s = fsY_new(kind, &o, 1, &init);
  if (!s) fail_msg("scheduler: %s", fsT_error());
  assert_int_equal(fsY_start(s, lr, NULL), 0);
  return s;
}

static void steps(fsY_sched *s, double *lr, int n, const double *want) {
  for (int i = 0; i < n; i++) {
    assert_int_equal(fsY_step(s, lr, NULL), 0);
    if (*lr != want[i]) fail_msg("step %d: %a, torch %a", i + 1, *lr, want[i]);
    assert_true(s->last_lr[0] == *lr);
  }
}

/* the restart branch ((e - 1 - T) % 2T == 0) and the chained ratio */
static void test_cosine(void **state) {
  double lr;
  fsY_sched *s = start(FSY_COSINE, (fsY_opts){.last_epoch = -1, .T_max = 3, .eta_min = 0.01}, &lr);
  steps(s, &lr, 7, (double[]){0x1.3d70a3d70a3d7p-4, 0x1.0a3d70a3d70a6p-5, 0x1.47ae147ae147bp-7, 0x1.0a3d70a3d70a4p-5,
                              0x1.3d70a3d70a3dbp-4, 0x1.999999999999fp-4, 0x1.3d70a3d70a3dcp-4});
  fsY_release(s);
}

static void test_linear(void **state) {
  double lr;
  fsY_sched *s = start(FSY_LINEAR, (fsY_opts){.last_epoch = -1, .start_factor = 0.5, .end_factor = 1.0, .total_iters = 4}, &lr);
  assert_true(lr == 0x1.999999999999ap-5);
  steps(s, &lr, 5, (double[]){0x1.0p-4, 0x1.3333333333333p-4, 0x1.6666666666667p-4, 0x1.999999999999ap-4, 0x1.999999999999ap-4});
  fsY_release(s);
}

static void test_onecycle_and_epochs(void **state) {
  double lr, mom, max_lr = 1.0, init = 0.1;
  fsY_opts o = {.last_epoch = -1, .max_lrs = &max_lr, .total_steps = 3, .epochs = FSY_NONE, .steps_per_epoch = FSY_NONE,
                .pct_start = 0.3, .div_factor = 25, .final_div_factor = 1e4, .anneal_cos = true};
  fsY_sched *s = fsY_new(FSY_ONECYCLE, &o, 1, &init);
  assert_int_equal(fsY_start(s, &lr, &mom), 0);
  steps(s, &lr, 3, (double[]){0x1.d9bd8a677bc0bp-2, 0x1.0c6f7a0b5ed8dp-18, 0x1.d9bd8a677bc0fp-2});
  assert_int_equal(fsY_step(s, &lr, &mom), -1);
  assert_string_equal(fsT_error(), "Tried to step 5 times. The specified number of total steps is 3");
  fsY_release(s);
  s = start(FSY_WARM_RESTARTS, (fsY_opts){.last_epoch = -1, .T_0 = 2, .T_mult = 1}, &lr);
  assert_int_equal(fsY_step_at(s, 1.5, &lr, NULL), 0); /* fractional epochs, as torch documents */
  assert_true(lr == 0x1.dfe051e68da4p-7);
  assert_int_equal(s->last_epoch, 1);
  fsY_release(s);
}

static int failing(void *ud, int64_t g, int64_t e, double *f) {
  if (e == 2) return -1;
  *f = 1.0 / (double)(e + 1);
  return 0;
}

static void test_errors(void **state) {
  double init = 0.1, lr = 0.1;
  assert_null(fsY_new(FSY_CONSTANT, &(fsY_opts){.last_epoch = -1, .factor = 2}, 1, &init));
  assert_string_equal(fsT_error(), "Constant multiplicative factor expected to be between 0 and 1.");
  assert_null(fsY_new(FSY_WARM_RESTARTS, &(fsY_opts){.last_epoch = -1, .T_0 = 0, .T_mult = 1}, 1, &init));
  assert_string_equal(fsT_error(), "Expected positive integer T_0, but got 0");
  fsY_opts o = {.last_epoch = -1, .total_steps = FSY_NONE, .epochs = 3, .steps_per_epoch = FSY_NONE, .pct_start = 0.3};
  assert_null(fsY_new(FSY_ONECYCLE, &o, 1, &init));
  assert_string_equal(fsT_error(), "Expected positive integer steps_per_epoch, but got None");
  assert_null(fsY_new(FSY_PLATEAU, &(fsY_opts){.gamma = 1.0}, 1, &init));
  assert_string_equal(fsT_error(), "Factor should be < 1.0.");
  fsY_sched *lam = start(FSY_LAMBDA, (fsY_opts){.last_epoch = -1, .lambda = failing}, &lr);
  steps(lam, &lr, 1, (double[]){0.1 * 0.5});
  assert_int_equal(fsY_step(lam, &lr, NULL), -1); /* the function's failure stops the step */
  fsY_sched *kids[1] = {lam};
  int64_t at[1] = {3};
  assert_null(fsY_sequential(kids, 1, &(fsY_opts){.last_epoch = -1, .milestones = at, .nmilestones = 1}, 1, &init, &lr, NULL));
  assert_non_null(strstr(fsT_error(), "number of schedulers 1 and the number of milestones to be equal to 1"));
  fsY_release(lam);
}

/* ReduceLROnPlateau: patience, cooldown, min_lr and eps as torch */
static void test_plateau(void **state) {
  double init = 0, min_lr = 0.3, lr = 1.0;
  fsY_opts o = {.gamma = 0.5, .patience = 1, .cooldown = 1, .threshold = 1e-4, .eps = 1e-8, .min_lrs = &min_lr};
  fsY_sched *s = fsY_new(FSY_PLATEAU, &o, 1, &init);
  double metrics[] = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, want[] = {1.0, 1.0, 0.5, 0.5, 0.5, 0.3, 0.3, 0.3};
  for (int i = 0; i < 8; i++) {
    assert_int_equal(fsY_plateau_step(s, metrics[i], &lr), 0);
    if (lr != want[i]) fail_msg("epoch %d: %g, torch %g", i + 1, lr, want[i]);
  }
  assert_int_equal(s->last_epoch, 8);
  fsY_release(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cosine),
    cmocka_unit_test(test_linear),
    cmocka_unit_test(test_onecycle_and_epochs),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_plateau),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
