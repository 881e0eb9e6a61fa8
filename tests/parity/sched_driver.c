/* sched_driver.c -- runs every learning-rate scheduler of lr_sched.h for 1,000
 * steps over two parameter groups (lr 0.1 and 0.02) and prints each step's
 * lrs (and OneCycleLR's momenta) with 17 digits, so sched_parity.py can
 * replay the same schedules in torch 1.13 and require equality.
 *   sched_driver > lrs.txt
 * Each case is a line "case NAME", then one line per step: the lrs after
 * construction, then after each of the 1,000 step() calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lr_sched.h"
#include "tensor.h"

enum { STEPS = 1000, G = 2 };

static void die(const char *what) {
  fprintf(stderr, "sched_driver: %s: %s\n", what, fsT_error());
  exit(1);
}

static void print(const double *lr, const double *mom, bool with_mom) {
  printf("%.17g %.17g", lr[0], lr[1]);
  if (with_mom) printf(" %.17g %.17g", mom[0], mom[1]);
  printf("\n");
}

/* LambdaLR's functions, written as sched_parity.py's lambdas */
static int decay(void *ud, int64_t g, int64_t e, double *f) {
  *f = pow(0.95, (double)e);
  return 0;
}
static int warmup(void *ud, int64_t g, int64_t e, double *f) { /* min(1.0, (e + 1) / 100) */
  double w = (double)(e + 1) / 100;
  *f = g == 0 ? (1.0 < w ? 1.0 : w) : pow(0.95, (double)e);
  return 0;
}

static fsY_opts base(void) { return (fsY_opts){.last_epoch = -1}; }

static fsY_sched *make(fsY_kind kind, fsY_opts o, double *lr, double *mom) {
  static const double initial[G] = {0.1, 0.02};
  memcpy(lr, initial, sizeof initial);
  fsY_sched *s = fsY_new(kind, &o, G, initial);
  if (!s) die("constructor");
  if (kind == FSY_ONECYCLE) memcpy(lr, s->base_lrs, sizeof initial);
  if (kind != FSY_PLATEAU && fsY_start(s, lr, mom) < 0) die("initial step");
  return s;
}

static void run(const char *name, fsY_sched *s, double *lr, double *mom) {
  printf("case %s\n", name);
  print(lr, mom, s->writes_momentum);
  for (int64_t e = 0; e < STEPS; e++) {
    int rc;
    if (s->kind == FSY_PLATEAU) { /* a falling, then noisy flat metric */
      int64_t m = e < 300 ? e : 300;
      double metric = 1.0 / (1 + (double)m) + (double)((e * 7919) % 13) * 1e-4;
      rc = fsY_plateau_step(s, s->o.mode_max ? -metric : metric, lr);
    } else {
      rc = fsY_step(s, lr, mom);
    }
    if (rc < 0) die(name);
    print(lr, mom, s->writes_momentum);
  }
  fsY_release(s);
}

int main(void) {
  double lr[G], mom[G] = {0.9, 0.9};
  fsY_opts o = base();
  o.step_size = 30, o.gamma = 0.1;
  run("StepLR", make(FSY_STEP, o, lr, mom), lr, mom);
  int64_t ms[] = {500, 30, 80, 80};
  o = base(), o.milestones = ms, o.nmilestones = 4, o.gamma = 0.5;
  run("MultiStepLR", make(FSY_MULTISTEP, o, lr, mom), lr, mom);
  o = base(), o.gamma = 0.99;
  run("ExponentialLR", make(FSY_EXPONENTIAL, o, lr, mom), lr, mom);
  o = base(), o.T_max = 100, o.eta_min = 0.001;
  run("CosineAnnealingLR", make(FSY_COSINE, o, lr, mom), lr, mom);
  o = base(), o.T_0 = 10, o.T_mult = 2, o.eta_min = 1e-4;
  run("CosineAnnealingWarmRestarts", make(FSY_WARM_RESTARTS, o, lr, mom), lr, mom);
  o = base(), o.T_0 = 7, o.T_mult = 1;
  run("CosineAnnealingWarmRestarts1", make(FSY_WARM_RESTARTS, o, lr, mom), lr, mom);
  o = base(), o.start_factor = 0.25, o.end_factor = 1.0, o.total_iters = 100;
  run("LinearLR", make(FSY_LINEAR, o, lr, mom), lr, mom);
  o = base(), o.factor = 0.5, o.total_iters = 40;
  run("ConstantLR", make(FSY_CONSTANT, o, lr, mom), lr, mom);
  o = base(), o.lambda = decay;
  run("LambdaLR", make(FSY_LAMBDA, o, lr, mom), lr, mom);
  o = base(), o.lambda = warmup;
  run("LambdaLR2", make(FSY_LAMBDA, o, lr, mom), lr, mom);
  double max_lrs[G] = {0.1, 0.05};
  o = base(), o.max_lrs = max_lrs, o.total_steps = STEPS, o.epochs = o.steps_per_epoch = FSY_NONE;
  o.pct_start = 0.3, o.div_factor = 25, o.final_div_factor = 1e4, o.base_momentum = 0.85;
  o.max_momentum = 0.95, o.anneal_cos = true, o.cycle_momentum = true, o.momentum_key = 1;
  run("OneCycleLR", make(FSY_ONECYCLE, o, lr, mom), lr, mom);
  o.anneal_cos = false, o.three_phase = true, o.momentum_key = 2, o.total_steps = FSY_NONE;
  o.epochs = 10, o.steps_per_epoch = 100, o.pct_start = 0.25;
  run("OneCycleLR3", make(FSY_ONECYCLE, o, lr, mom), lr, mom);
  {
    fsY_opts lo = base(), co = base(), so = base();
    lo.start_factor = 0.1, lo.end_factor = 1.0, lo.total_iters = 50;
    co.T_max = 950;
    fsY_sched *kids[2] = {make(FSY_LINEAR, lo, lr, mom), NULL};
    static const double initial[G] = {0.1, 0.02};
    fsY_sched *cos = fsY_new(FSY_COSINE, &co, G, initial); /* its own initial step sees lr as Linear left it */
    if (!cos || fsY_start(cos, lr, mom) < 0) die("cosine");
    kids[1] = cos;
    int64_t at[] = {50};
    so.milestones = at, so.nmilestones = 1;
    fsY_sched *s = fsY_sequential(kids, 2, &so, G, initial, lr, mom);
    if (!s) die("sequential");
    fsY_release(kids[0]);
    fsY_release(kids[1]);
    run("SequentialLR", s, lr, mom);
  }
  double min_lrs[G] = {1e-5, 0};
  o = base(), o.gamma = 0.5, o.patience = 5, o.cooldown = 2, o.min_lrs = min_lrs, o.threshold = 1e-4;
  o.eps = 1e-8;
  run("ReduceLROnPlateau", make(FSY_PLATEAU, o, lr, mom), lr, mom);
  o.mode_max = true, o.threshold_abs = true, o.threshold = 1e-3, o.patience = 3, o.cooldown = 0;
  run("ReduceLROnPlateauMaxAbs", make(FSY_PLATEAU, o, lr, mom), lr, mom);
  return 0;
}
