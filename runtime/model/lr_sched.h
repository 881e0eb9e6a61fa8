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

typedef enum fsY_kind {
  FSY_LAMBDA, FSY_STEP, FSY_MULTISTEP, FSY_CONSTANT, FSY_LINEAR, FSY_EXPONENTIAL, FSY_COSINE,
  FSY_WARM_RESTARTS, FSY_ONECYCLE, FSY_SEQUENTIAL, FSY_PLATEAU
} fsY_kind;

/* LambdaLR's lr_lambda[group](epoch): 0 and *factor, or -1 (the caller's error). */
typedef int (*fsY_lambda)(void *ud, int64_t group, int64_t epoch, double *factor);

/* Constructor options: torch's parameters (each kind reads its own);
 * FSY_NONE marks an optional count left None. */
#define FSY_NONE INT64_MIN
typedef struct fsY_opts {
  int64_t last_epoch;                         /* -1: a fresh schedule */
  double gamma;                               /* Step, MultiStep, Exponential; Plateau's factor */
  int64_t step_size;                          /* Step */
  const int64_t *milestones; int64_t nmilestones; /* MultiStep (any order, repeats count), Sequential */
  double factor; int64_t total_iters;         /* Constant; total_iters also Linear */
  double start_factor, end_factor;            /* Linear */
  int64_t T_max; double eta_min;              /* Cosine; eta_min also WarmRestarts */
  int64_t T_0, T_mult;                        /* WarmRestarts */
  fsY_lambda lambda; void *lambda_ud;         /* Lambda */
  /* OneCycle: max_lrs[ngroups]; total_steps, or epochs * steps_per_epoch */
  const double *max_lrs; int64_t total_steps, epochs, steps_per_epoch;
  double pct_start, div_factor, final_div_factor, base_momentum, max_momentum;
  bool anneal_cos, three_phase, cycle_momentum;
  int momentum_key;                           /* the optimizer's: 0 none, 1 'momentum', 2 'betas' */
  /* Plateau: min_lrs[ngroups] */
  bool mode_max, threshold_abs;
  double threshold, eps; const double *min_lrs;
  int64_t patience, cooldown;
} fsY_opts;

typedef struct fsY_sched {
  int refcount;
  fsY_kind kind;
  int64_t ngroups;
  double *base_lrs, *last_lr;   /* torch's base_lrs and _last_lr */
  int64_t last_epoch, step_count;
  fsY_opts o;                   /* arrays copied into the fields below */
  int64_t *milestones;          /* sorted */
  double T_cur; int64_t T_i;    /* WarmRestarts (T_cur is fractional after step(epoch)) */
  double *max_lrs, *min_lrs;    /* OneCycle, Plateau (min_lrs) */
  double phase_end[3]; int nphases;
  bool writes_momentum;         /* step() writes momentum[] (OneCycle cycling, or a child's) */
  struct fsY_sched **children;  /* Sequential: held */
  int64_t nchildren;
  double best;                  /* Plateau */
  int64_t cooldown_counter, num_bad_epochs;
} fsY_sched;

/* A scheduler over ngroups groups whose 'initial_lr' are initial_lrs (the
 * base lrs), validated as torch's constructor; not yet stepped (fsY_start).
 * OneCycleLR ignores initial_lrs: its base lrs are max_lr / div_factor
 * (fresh schedules only). */
fsY_sched *fsY_new(fsY_kind kind, const fsY_opts *o, int64_t ngroups, const double *initial_lrs);
/* The constructor's initial step (_initial_step): lr[] as the first epoch's. */
int fsY_start(fsY_sched *s, double *lr, double *momentum);
/* SequentialLR(children, milestones): resets lr[] to initial_lrs, rewinds the
 * children one epoch and starts the first.  Holds the children. */
fsY_sched *fsY_sequential(fsY_sched **children, int64_t n, const fsY_opts *o, int64_t ngroups,
                          const double *initial_lrs, double *lr, double *momentum);
fsY_sched *fsY_retain(fsY_sched *s);
void fsY_release(fsY_sched *s);

/* step(): the next epoch's lrs into lr[] (and momentum[]). */
int fsY_step(fsY_sched *s, double *lr, double *momentum);
/* step(epoch), deprecated in torch: the closed form where torch has one;
 * fractional epochs only for CosineAnnealingWarmRestarts. */
int fsY_step_at(fsY_sched *s, double epoch, double *lr, double *momentum);
/* ReduceLROnPlateau.step(metrics). */
int fsY_plateau_step(fsY_sched *s, double metric, double *lr);

#endif
