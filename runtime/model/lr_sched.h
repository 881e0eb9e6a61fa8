/* lr_sched.h -- learning-rate schedulers as torch.optim.lr_scheduler (1.13):
 * StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR,
 * CosineAnnealingWarmRestarts, LinearLR, ConstantLR, LambdaLR, OneCycleLR,
 * SequentialLR and ReduceLROnPlateau ("fsH_": hyper-parameter schedules).
 *
 * The rule: every learning rate equals torch's bit for bit.  torch's step()
 * uses the chainable get_lr(), which reads each group's *current* lr and
 * multiplies or shifts it, so the result depends on the order of the double
 * operations; each formula here is torch's expression with its evaluation
 * order (Python floats are C doubles; ints become doubles where Python's
 * arithmetic converts them; math.cos and ** are libm's cos and pow, as
 * CPython's).  step(epoch) uses the closed form where torch has one.
 *
 * A scheduler owns no optimizer: each call takes the groups' lrs (lr[g],
 * read and written, torch's param_group['lr']) and, for OneCycleLR's
 * momentum cycling, momentum[g] (written: 'momentum' or betas[0], as
 * writes_momentum says).  The interpreter's other half is
 * interp/eval/lib_sched.c, which keeps the optimizer's group dicts and these
 * arrays in step.  Errors: -1 / NULL + fsT_error, torch's words. */
#ifndef FS_LR_SCHED_H
#define FS_LR_SCHED_H

#include <stdbool.h>
#include <stdint.h>

typedef enum fsH_kind {
  FSH_LAMBDA, FSH_STEP, FSH_MULTISTEP, FSH_CONSTANT, FSH_LINEAR, FSH_EXPONENTIAL, FSH_COSINE,
  FSH_WARM_RESTARTS, FSH_ONECYCLE, FSH_SEQUENTIAL, FSH_PLATEAU
} fsH_kind;

/* LambdaLR's lr_lambda[group](epoch): 0 and *factor, or -1 (the caller's error). */
typedef int (*fsH_lambda)(void *ud, int64_t group, int64_t epoch, double *factor);

/* Constructor options: torch's parameters (each kind reads its own);
 * FSH_NONE marks an optional count left None. */
#define FSH_NONE INT64_MIN
typedef struct fsH_opts {
  int64_t last_epoch;                         /* -1: a fresh schedule */
  double gamma;                               /* Step, MultiStep, Exponential; Plateau's factor */
  int64_t step_size;                          /* Step */
  const int64_t *milestones; int64_t nmilestones; /* MultiStep (any order, repeats count), Sequential */
  double factor; int64_t total_iters;         /* Constant; total_iters also Linear */
  double start_factor, end_factor;            /* Linear */
  int64_t T_max; double eta_min;              /* Cosine; eta_min also WarmRestarts */
  int64_t T_0, T_mult;                        /* WarmRestarts */
  fsH_lambda lambda; void *lambda_ud;         /* Lambda */
  /* OneCycle: max_lrs[ngroups]; total_steps, or epochs * steps_per_epoch */
  const double *max_lrs; int64_t total_steps, epochs, steps_per_epoch;
  double pct_start, div_factor, final_div_factor, base_momentum, max_momentum;
  bool anneal_cos, three_phase, cycle_momentum;
  int momentum_key;                           /* the optimizer's: 0 none, 1 'momentum', 2 'betas' */
  /* Plateau: min_lrs[ngroups] */
  bool mode_max, threshold_abs;
  double threshold, eps; const double *min_lrs;
  int64_t patience, cooldown;
} fsH_opts;

typedef struct fsH_sched {
  int refcount;
  fsH_kind kind;
  int64_t ngroups;
  double *base_lrs, *last_lr;   /* torch's base_lrs and _last_lr */
  int64_t last_epoch, step_count;
  fsH_opts o;                   /* arrays copied into the fields below */
  int64_t *milestones;          /* sorted */
  double T_cur; int64_t T_i;    /* WarmRestarts (T_cur is fractional after step(epoch)) */
  double *max_lrs, *min_lrs;    /* OneCycle, Plateau (min_lrs) */
  double phase_end[3]; int nphases;
  bool writes_momentum;         /* step() writes momentum[] (OneCycle cycling, or a child's) */
  struct fsH_sched **children;  /* Sequential: held */
  int64_t nchildren;
  double best;                  /* Plateau */
  int64_t cooldown_counter, num_bad_epochs;
} fsH_sched;

/* A scheduler over ngroups groups whose 'initial_lr' are initial_lrs (the
 * base lrs), validated as torch's constructor; not yet stepped (fsH_start).
 * OneCycleLR ignores initial_lrs: its base lrs are max_lr / div_factor
 * (fresh schedules only). */
fsH_sched *fsH_new(fsH_kind kind, const fsH_opts *o, int64_t ngroups, const double *initial_lrs);
/* The constructor's initial step (_initial_step): lr[] as the first epoch's. */
int fsH_start(fsH_sched *s, double *lr, double *momentum);
/* SequentialLR(children, milestones): resets lr[] to initial_lrs, rewinds the
 * children one epoch and starts the first.  Holds the children. */
fsH_sched *fsH_sequential(fsH_sched **children, int64_t n, const fsH_opts *o, int64_t ngroups,
                          const double *initial_lrs, double *lr, double *momentum);
fsH_sched *fsH_retain(fsH_sched *s);
void fsH_release(fsH_sched *s);

/* step(): the next epoch's lrs into lr[] (and momentum[]). */
int fsH_step(fsH_sched *s, double *lr, double *momentum);
/* step(epoch), deprecated in torch: the closed form where torch has one;
 * fractional epochs only for CosineAnnealingWarmRestarts. */
int fsH_step_at(fsH_sched *s, double epoch, double *lr, double *momentum);
/* ReduceLROnPlateau.step(metrics). */
int fsH_plateau_step(fsH_sched *s, double metric, double *lr);

#endif
