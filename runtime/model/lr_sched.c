/* lr_sched.c -- learning-rate schedulers (see lr_sched.h).  Each formula is
 * torch 1.13's lr_scheduler.py expression, operand for operand: do not
 * "simplify" one, the rounding would differ from torch's after a few
 * hundred chained steps.  tests/parity/sched_parity.py checks 1,000 steps. */
#include "lr_sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensor.h"

static const double PI = 3.141592653589793; /* math.pi */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static double *dup_doubles(const double *src, int64_t n) {
  double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
  if (d && src) memcpy(d, src, (size_t)n * sizeof *d);
  return d;
}

/* An optional count as Python prints it, in buf[32]. */
static const char *count_text(int64_t v, char *buf) {
  if (v == FSY_NONE) return "None";
  snprintf(buf, 32, "%lld", (long long)v);
  return buf;
}

/* torch's constructor checks, its words */
static int check_opts(fsY_kind kind, const fsY_opts *o) {
  char num[32];
  switch (kind) {
  case FSY_STEP:
    if (o->step_size <= 0) return fsT_seterr("StepLR: step_size must be a positive integer, got %lld", (long long)o->step_size), -1;
    return 0;
  case FSY_CONSTANT:
    if (o->factor > 1.0 || o->factor < 0)
      return fsT_seterr("Constant multiplicative factor expected to be between 0 and 1."), -1;
    return 0;
  case FSY_LINEAR:
    if (o->start_factor > 1.0 || o->start_factor < 0)
      return fsT_seterr("Starting multiplicative factor expected to be between 0 and 1."), -1;
    if (o->end_factor > 1.0 || o->end_factor < 0)
      return fsT_seterr("Ending multiplicative factor expected to be between 0 and 1."), -1;
    return 0;
  case FSY_COSINE:
    if (o->T_max <= 0) return fsT_seterr("CosineAnnealingLR: T_max must be a positive integer, got %lld", (long long)o->T_max), -1;
    return 0;
  case FSY_WARM_RESTARTS:
    if (o->T_0 <= 0) return fsT_seterr("Expected positive integer T_0, but got %lld", (long long)o->T_0), -1;
    if (o->T_mult < 1) return fsT_seterr("Expected integer T_mult >= 1, but got %lld", (long long)o->T_mult), -1;
    return 0;
  case FSY_ONECYCLE:
    if (o->total_steps == FSY_NONE && o->epochs == FSY_NONE && o->steps_per_epoch == FSY_NONE)
      return fsT_seterr("You must define either total_steps OR (epochs AND steps_per_epoch)"), -1;
    if (o->total_steps != FSY_NONE) {
      if (o->total_steps <= 0)
        return fsT_seterr("Expected positive integer total_steps, but got %lld", (long long)o->total_steps), -1;
    } else {
      if (o->epochs == FSY_NONE || o->epochs <= 0)
        return fsT_seterr("Expected positive integer epochs, but got %s", count_text(o->epochs, num)), -1;
      if (o->steps_per_epoch == FSY_NONE || o->steps_per_epoch <= 0)
        return fsT_seterr("Expected positive integer steps_per_epoch, but got %s", count_text(o->steps_per_epoch, num)), -1;
    }
    if (o->pct_start < 0 || o->pct_start > 1)
      return fsT_seterr("Expected float between 0 and 1 pct_start, but got %g", o->pct_start), -1;
    if (o->cycle_momentum && o->momentum_key == 0)
      return fsT_seterr("optimizer must support momentum with `cycle_momentum` option enabled"), -1;
    if (o->last_epoch != -1) return fsT_seterr("OneCycleLR: resuming with last_epoch is not supported; use load_state_dict"), -1;
    return 0;
  case FSY_PLATEAU:
    if (o->gamma >= 1.0) return fsT_seterr("Factor should be < 1.0."), -1;
    return 0;
  default:
    return 0;
  }
}

fsY_sched *fsY_new(fsY_kind kind, const fsY_opts *o, int64_t ngroups, const double *initial_lrs) {
  if (check_opts(kind, o) < 0) return NULL;
  fsY_sched *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  s->refcount = 1;
  s->kind = kind;
  s->ngroups = ngroups;
  s->o = *o;
  s->o.milestones = NULL, s->o.max_lrs = NULL, s->o.min_lrs = NULL; /* copies below */
  s->last_epoch = kind == FSY_PLATEAU ? 0 : o->last_epoch;
  if (!(s->base_lrs = dup_doubles(initial_lrs, ngroups)) || !(s->last_lr = dup_doubles(initial_lrs, ngroups)))
    goto oom;
  if (o->nmilestones) {
    if (!(s->milestones = malloc((size_t)o->nmilestones * sizeof *s->milestones))) goto oom;
    memcpy(s->milestones, o->milestones, (size_t)o->nmilestones * sizeof *s->milestones);
    if (kind == FSY_MULTISTEP) qsort(s->milestones, (size_t)o->nmilestones, sizeof *s->milestones, cmp_i64);
  }
  if (kind == FSY_WARM_RESTARTS) s->T_i = o->T_0, s->T_cur = (double)o->last_epoch;
  if (kind == FSY_PLATEAU) {
    if (!(s->min_lrs = dup_doubles(o->min_lrs, ngroups))) goto oom;
    s->best = o->mode_max ? -INFINITY : INFINITY; /* _reset: mode_worse */
  }
  if (kind == FSY_ONECYCLE) {
    int64_t total = o->total_steps != FSY_NONE ? o->total_steps : o->epochs * o->steps_per_epoch;
    s->o.total_steps = total;
    if (!(s->max_lrs = dup_doubles(o->max_lrs, ngroups)) || !(s->min_lrs = dup_doubles(NULL, ngroups))) goto oom;
    for (int64_t g = 0; g < ngroups; g++) {
      s->base_lrs[g] = s->max_lrs[g] / o->div_factor;   /* group['initial_lr'] */
      s->min_lrs[g] = s->base_lrs[g] / o->final_div_factor;
    }
    if (o->three_phase) {
      s->nphases = 3;
      s->phase_end[0] = (double)(o->pct_start * (double)total) - 1;
      s->phase_end[1] = (double)(2 * o->pct_start * (double)total) - 2;
      s->phase_end[2] = (double)(total - 1);
    } else {
      s->nphases = 2;
      s->phase_end[0] = (double)(o->pct_start * (double)total) - 1;
      s->phase_end[1] = (double)(total - 1);
    }
    s->writes_momentum = o->cycle_momentum;
  }
  return s;
oom:
  fsY_release(s);
  fsT_seterr("out of memory");
  return NULL;
}

fsY_sched *fsY_retain(fsY_sched *s) {
  if (s) s->refcount++;
  return s;
}

void fsY_release(fsY_sched *s) {
  if (!s || --s->refcount > 0) return;
  for (int64_t i = 0; i < s->nchildren; i++) fsY_release(s->children[i]);
  free(s->children);
  free(s->base_lrs);
  free(s->last_lr);
  free(s->milestones);
  free(s->max_lrs);
  free(s->min_lrs);
  free(s);
}

/* ---- get_lr: the chainable forms (lr[] is each group's current lr) ---- */

static double anneal(bool cos_, double start, double end, double pct) {
  if (cos_) {
    double cos_out = cos(PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

/* OneCycleLR.get_lr for every group; momentum[] too when it cycles. */
static int onecycle_lr(fsY_sched *s, double *lr, double *momentum) {
  int64_t step_num = s->last_epoch;
  if (step_num > s->o.total_steps) {
    fsT_seterr("Tried to step %lld times. The specified number of total steps is %lld", (long long)(step_num + 1),
               (long long)s->o.total_steps);
    return -1;
  }
  for (int64_t g = 0; g < s->ngroups; g++) {
    /* phase i anneals lrs[from[i]] -> lrs[to[i]] and momenta the other way */
    double lrs[3] = {s->base_lrs[g], s->max_lrs[g], s->min_lrs[g]};
    double moms[2] = {s->o.max_momentum, s->o.base_momentum};
    static const int from2[] = {0, 1}, to2[] = {1, 2}, mfrom2[] = {0, 1}, mto2[] = {1, 0};
    static const int from3[] = {0, 1, 0}, to3[] = {1, 0, 2}, mfrom3[] = {0, 1, 0}, mto3[] = {1, 0, 0};
    const int *from = s->nphases == 3 ? from3 : from2, *to = s->nphases == 3 ? to3 : to2;
    const int *mfrom = s->nphases == 3 ? mfrom3 : mfrom2, *mto = s->nphases == 3 ? mto3 : mto2;
    double start_step = 0;
    for (int i = 0; i < s->nphases; i++) {
      double end_step = s->phase_end[i];
      if ((double)step_num <= end_step || i == s->nphases - 1) {
        double pct = ((double)step_num - start_step) / (end_step - start_step);
        lr[g] = anneal(s->o.anneal_cos, lrs[from[i]], lrs[to[i]], pct);
        if (s->o.cycle_momentum) momentum[g] = anneal(s->o.anneal_cos, moms[mfrom[i]], moms[mto[i]], pct);
        break;
      }
      start_step = end_step;
    }
  }
  return 0;
}

static int get_lr(fsY_sched *s, double *lr, double *momentum) {
  const fsY_opts *o = &s->o;
  int64_t e = s->last_epoch;
  for (int64_t g = 0; s->kind != FSY_ONECYCLE && g < s->ngroups; g++) {
    double base = s->base_lrs[g];
    switch (s->kind) {
    case FSY_LAMBDA: {
      double f;
      if (o->lambda(o->lambda_ud, g, e, &f) < 0) return -1;
      lr[g] = base * f;
      break;
    }
    case FSY_STEP:
      if (!(e == 0 || e % o->step_size != 0)) lr[g] = lr[g] * o->gamma;
      break;
    case FSY_MULTISTEP: {
      int64_t count = 0;
      for (int64_t i = 0; i < o->nmilestones; i++) count += s->milestones[i] == e;
      if (count) lr[g] = lr[g] * pow(o->gamma, (double)count);
      break;
    }
    case FSY_CONSTANT:
      if (e == 0) lr[g] = lr[g] * o->factor;
      else if (e == o->total_iters) lr[g] = lr[g] * (1.0 / o->factor);
      break;
    case FSY_LINEAR:
      if (e == 0) lr[g] = lr[g] * o->start_factor;
      else if (e <= o->total_iters)
        lr[g] = lr[g] * (1. + (o->end_factor - o->start_factor) /
                                  ((double)o->total_iters * o->start_factor +
                                   (double)(e - 1) * (o->end_factor - o->start_factor)));
      break;
    case FSY_EXPONENTIAL:
      if (e != 0) lr[g] = lr[g] * o->gamma;
      break;
    case FSY_COSINE: {
      double T = (double)o->T_max, eta = o->eta_min;
      if (e == 0) break;
      if (s->step_count == 1 && e > 0)
        lr[g] = eta + (base - eta) * (1 + cos((double)e * PI / T)) / 2;
      else if ((e - 1 - o->T_max) % (2 * o->T_max) == 0)
        lr[g] = lr[g] + (base - eta) * (1 - cos(PI / T)) / 2;
      else
        lr[g] = (1 + cos(PI * (double)e / T)) / (1 + cos(PI * (double)(e - 1) / T)) * (lr[g] - eta) + eta;
      break;
    }
    case FSY_WARM_RESTARTS:
      lr[g] = o->eta_min + (base - o->eta_min) * (1 + cos(PI * s->T_cur / (double)s->T_i)) / 2;
      break;
    default:
      break;
    }
  }
  return s->kind == FSY_ONECYCLE ? onecycle_lr(s, lr, momentum) : 0;
}

/* _get_closed_form_lr, for the kinds that have one; 1: none (use get_lr) */
static int closed_form(fsY_sched *s, double *lr) {
  const fsY_opts *o = &s->o;
  int64_t e = s->last_epoch;
  for (int64_t g = 0; g < s->ngroups; g++) {
    double base = s->base_lrs[g];
    switch (s->kind) {
    case FSY_STEP: { /* Python's // floors */
      int64_t q = e / o->step_size - (e % o->step_size != 0 && e < 0);
      lr[g] = base * pow(o->gamma, (double)q);
      break;
    }
    case FSY_MULTISTEP: {
      int64_t k = 0; /* bisect_right */
      while (k < o->nmilestones && s->milestones[k] <= e) k++;
      lr[g] = base * pow(o->gamma, (double)k);
      break;
    }
    case FSY_CONSTANT: lr[g] = base * (o->factor + (e >= o->total_iters) * (1 - o->factor)); break;
    case FSY_LINEAR:
      lr[g] = base * (o->start_factor + (o->end_factor - o->start_factor) *
                                            (double)(o->total_iters < e ? o->total_iters : e) / (double)o->total_iters);
      break;
    case FSY_EXPONENTIAL: lr[g] = base * pow(o->gamma, (double)e); break;
    case FSY_COSINE:
      lr[g] = o->eta_min + (base - o->eta_min) * (1 + cos(PI * (double)e / (double)o->T_max)) / 2;
      break;
    default: return 1;
    }
  }
  return 0;
}

static void remember(fsY_sched *s, const double *lr) {
  memcpy(s->last_lr, lr, (size_t)s->ngroups * sizeof *lr);
}

/* CosineAnnealingWarmRestarts.step(epoch); has_epoch false: step() */
static int warm_step(fsY_sched *s, bool has_epoch, double epoch, double *lr) {
  const fsY_opts *o = &s->o;
  if (!has_epoch && s->last_epoch < 0) has_epoch = true, epoch = 0;
  if (!has_epoch) {
    epoch = (double)(s->last_epoch + 1);
    s->T_cur = s->T_cur + 1;
    if (s->T_cur >= (double)s->T_i) {
      s->T_cur = s->T_cur - (double)s->T_i;
      s->T_i = s->T_i * o->T_mult;
    }
  } else {
    if (epoch < 0) return fsT_seterr("Expected non-negative epoch, but got %g", epoch), -1;
    if (epoch >= (double)o->T_0) {
      if (o->T_mult == 1) {
        s->T_cur = fmod(epoch, (double)o->T_0);
      } else {
        double m = (double)o->T_mult;
        int64_t n = (int64_t)(log(epoch / (double)o->T_0 * (m - 1) + 1) / log(m));
        int64_t mn = 1;
        for (int64_t i = 0; i < n; i++) mn *= o->T_mult;
        s->T_cur = epoch - (double)(o->T_0 * (mn - 1)) / (double)(o->T_mult - 1);
        s->T_i = o->T_0 * mn;
      }
    } else {
      s->T_i = o->T_0;
      s->T_cur = epoch;
    }
  }
  s->last_epoch = (int64_t)floor(epoch);
  if (get_lr(s, lr, NULL) < 0) return -1;
  remember(s, lr);
  return 0;
}

/* _LRScheduler.step(epoch) */
static int base_step(fsY_sched *s, bool has_epoch, double epoch, double *lr, double *momentum) {
  if (s->kind == FSY_WARM_RESTARTS) return warm_step(s, has_epoch, epoch, lr);
  s->step_count++;
  int rc;
  if (!has_epoch) {
    s->last_epoch++;
    rc = get_lr(s, lr, momentum);
  } else {
    s->last_epoch = (int64_t)epoch;
    rc = closed_form(s, lr);
    if (rc == 1) rc = get_lr(s, lr, momentum);
  }
  if (rc < 0) return -1;
  remember(s, lr);
  return 0;
}

int fsY_start(fsY_sched *s, double *lr, double *momentum) {
  s->step_count = 0;
  return base_step(s, false, 0, lr, momentum);
}

static int sequential_step(fsY_sched *s, double *lr, double *momentum) {
  s->last_epoch++;
  int64_t idx = 0; /* bisect_right(milestones, last_epoch) */
  while (idx < s->o.nmilestones && s->milestones[idx] <= s->last_epoch) idx++;
  fsY_sched *c = s->children[idx];
  bool restart = idx > 0 && s->milestones[idx - 1] == s->last_epoch;
  if (base_step(c, restart, 0, lr, momentum) < 0) return -1;
  memcpy(s->last_lr, c->last_lr, (size_t)s->ngroups * sizeof *lr);
  return 0;
}

fsY_sched *fsY_sequential(fsY_sched **children, int64_t n, const fsY_opts *o, int64_t ngroups,
                          const double *initial_lrs, double *lr, double *momentum) {
  if (o->nmilestones != n - 1) {
    fsT_seterr("Sequential Schedulers expects number of schedulers provided to be one more than the number of "
               "milestone points, but got number of schedulers %lld and the number of milestones to be equal to %lld",
               (long long)n, (long long)o->nmilestones);
    return NULL;
  }
  for (int64_t i = 0; i < n; i++)
    if (children[i]->kind == FSY_PLATEAU || children[i]->kind == FSY_SEQUENTIAL) {
      fsT_seterr("SequentialLR: scheduler %lld cannot be sequenced (ReduceLROnPlateau and SequentialLR are not)",
                 (long long)i);
      return NULL;
    }
  fsY_opts so = *o;
  so.last_epoch = o->last_epoch + 1;
  fsY_sched *s = fsY_new(FSY_SEQUENTIAL, &so, ngroups, initial_lrs);
  if (!s) return NULL;
  if (!(s->children = calloc((size_t)(n ? n : 1), sizeof *s->children))) {
    fsY_release(s);
    fsT_seterr("out of memory");
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) {
    s->children[s->nchildren++] = fsY_retain(children[i]);
    s->writes_momentum |= children[i]->writes_momentum;
  }
  memcpy(lr, initial_lrs, (size_t)ngroups * sizeof *lr); /* group["lr"] = group["initial_lr"] */
  for (int64_t i = 0; i < n; i++) children[i]->last_epoch -= 1;
  if (fsY_start(children[0], lr, momentum) < 0) {
    fsY_release(s);
    return NULL;
  }
  remember(s, children[0]->last_lr);
  return s;
}

int fsY_step(fsY_sched *s, double *lr, double *momentum) {
  if (s->kind == FSY_SEQUENTIAL) return sequential_step(s, lr, momentum);
  if (s->kind == FSY_PLATEAU) return fsT_seterr("ReduceLROnPlateau.step() needs the metric"), -1;
  return base_step(s, false, 0, lr, momentum);
}

int fsY_step_at(fsY_sched *s, double epoch, double *lr, double *momentum) {
  if (s->kind == FSY_SEQUENTIAL) return fsT_seterr("SequentialLR.step() takes no epoch"), -1;
  if (s->kind == FSY_PLATEAU) return fsT_seterr("ReduceLROnPlateau.step() needs the metric"), -1;
  if (s->kind != FSY_WARM_RESTARTS && epoch != floor(epoch))
    return fsT_seterr("step(epoch): epoch must be an integer, got %g", epoch), -1;
  return base_step(s, true, epoch, lr, momentum);
}

static bool is_better(const fsY_sched *s, double a) {
  const fsY_opts *o = &s->o;
  if (!o->mode_max && !o->threshold_abs) return a < s->best * (1. - o->threshold);
  if (!o->mode_max) return a < s->best - o->threshold;
  if (!o->threshold_abs) return a > s->best * (o->threshold + 1.);
  return a > s->best + o->threshold;
}

int fsY_plateau_step(fsY_sched *s, double current, double *lr) {
  s->last_epoch += 1;
  if (is_better(s, current)) {
    s->best = current;
    s->num_bad_epochs = 0;
  } else {
    s->num_bad_epochs += 1;
  }
  if (s->cooldown_counter > 0) {
    s->cooldown_counter -= 1;
    s->num_bad_epochs = 0;
  }
  if (s->num_bad_epochs > s->o.patience) {
    for (int64_t g = 0; g < s->ngroups; g++) { /* _reduce_lr */
      double old_lr = lr[g], new_lr = old_lr * s->o.gamma;
      if (s->min_lrs[g] > new_lr) new_lr = s->min_lrs[g]; /* max(old * factor, min_lr) */
      if (old_lr - new_lr > s->o.eps) lr[g] = new_lr;
    }
    s->cooldown_counter = s->o.cooldown;
    s->num_bad_epochs = 0;
  }
  remember(s, lr);
  return 0;
}
