/* lib_sched.c -- torch.optim.lr_scheduler's schedulers as values, over
 * runtime/model/lr_sched.h (which holds the arithmetic and its parity rule).
 *
 * The rule: a scheduler owns no learning rate.  As torch's, each call reads
 * every group's current "lr" from the optimizer's param_groups dicts
 * (lib_optim.c's live dicts), lets the runtime compute, and writes "lr" back
 * (and "momentum" or betas[0] for OneCycleLR), so a script's own writes to
 * g["lr"] and a scheduler's compose exactly as in torch.  The construction
 * sets "initial_lr" as torch's does (OneCycleLR also "max_lr", "min_lr",
 * "max_momentum", "base_momentum").  Sig rows: lang/signatures.c ("StepLR",
 * "LRScheduler.step"); values of class LRScheduler, or ReduceLROnPlateau,
 * whose step takes the metric. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eval_int.h"
#include "lr_sched.h"

typedef struct schedv {
  fsY_sched *s;
  fs_value *opt;      /* held: the optimizer */
  fs_value *lambdas;  /* LambdaLR: list of functions, one per group (held) */
  fs_value *children; /* SequentialLR: list of scheduler values (held) */
  const char *cls;    /* "StepLR" */
  bool verbose;
  fsE_ctx *E;         /* while a call runs: for LambdaLR's functions */
} schedv;

static void schedv_free(void *p) {
  schedv *sv = p;
  fsY_release(sv->s);
  fsV_release(sv->opt);
  fsV_release(sv->lambdas);
  fsV_release(sv->children);
  free(sv);
}

static char *sched_repr(fs_value *v) {
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<%s object>", ((schedv *)v->u.obj.data)->cls);
  return fsV_buf_take(&b);
}

const fsV_class fsE_sched_class = {.name = "LRScheduler", .repr = sched_repr, .free = schedv_free};
static const fsV_class plateau_class = {.name = "ReduceLROnPlateau", .repr = sched_repr, .free = schedv_free};

static schedv *sched_of(const fs_value *v) {
  schedv *sv = fsV_objdata(v, &fsE_sched_class);
  return sv ? sv : fsV_objdata(v, &plateau_class);
}

/* ---- the optimizer's group dicts <-> arrays ------------------------------------ */

static optv *opt_of(const schedv *sv) { return sv->opt->u.obj.data; }
static fs_value *group(const schedv *sv, int64_t g) { return opt_of(sv)->groups->u.seq.items[g]; }

static int get_num(const fs_value *d, int64_t g, const char *key, double *out) {
  const fs_value *v = d->type == FSV_DICT ? fsV_dict_getstr(d, key) : NULL;
  if (!v || !fsV_is_number(v)) {
    fsV_seterr("param_groups[%lld]['%s'] must be a number, not %s", (long long)g, key, v ? fsV_type_name(v) : "missing");
    return -1;
  }
  *out = fsV_to_double(v);
  return 0;
}

static int put(fs_value *d, const char *key, fs_value *v) { /* takes v */
  fs_value *k = v ? fsV_cstr(key) : NULL;
  int rc = k ? fsV_dict_set(d, k, v) : (fsV_release(v), -1);
  fsV_release(k);
  return rc;
}

/* The momentum a OneCycleLR cycles: 1 "momentum", 2 betas[0], 0 none. */
static int momentum_key(const optv *ov) {
  if (fsV_dict_getstr(ov->defaults, "betas")) return 2;
  return fsV_dict_getstr(ov->defaults, "momentum") ? 1 : 0;
}

/* lr[g] (and momentum[g]) from the groups. */
static int read_groups(const schedv *sv, double *lr, double *mom) {
  int mk = momentum_key(opt_of(sv));
  for (int64_t g = 0; g < opt_of(sv)->o->ngroups; g++) {
    if (get_num(group(sv, g), g, "lr", &lr[g]) < 0) return -1;
    const fs_value *b = fsV_dict_getstr(group(sv, g), "betas");
    if (mk == 1 && get_num(group(sv, g), g, "momentum", &mom[g]) < 0) return -1;
    bool pair = b && (b->type == FSV_TUPLE || b->type == FSV_LIST) && b->u.seq.n == 2 && fsV_is_number(b->u.seq.items[0]);
    if (mk == 2 && !pair) return fsV_seterr("param_groups[%lld]['betas'] must be a pair of numbers", (long long)g), -1;
    if (mk == 2) mom[g] = fsV_to_double(b->u.seq.items[0]);
  }
  return 0;
}

static int write_momentum(const schedv *sv, int64_t g, double m) {
  fs_value *d = group(sv, g);
  if (momentum_key(opt_of(sv)) == 1) return put(d, "momentum", fsV_float(m));
  const fs_value *b = fsV_dict_getstr(d, "betas");
  fs_value *b2 = b && (b->type == FSV_TUPLE || b->type == FSV_LIST) && b->u.seq.n == 2 ? fsV_retain(b->u.seq.items[1])
                                                                                        : fsV_float(0.999);
  return put(d, "betas", fsV_pair(fsV_float(m), b2));
}

/* Writes lr[] (and momentum[] when the schedule cycles it) into the groups;
 * verbose prints torch's line per group. */
static int write_groups(schedv *sv, const double *lr, const double *mom) {
  for (int64_t g = 0; g < sv->s->ngroups; g++) {
    if (put(group(sv, g), "lr", fsV_float(lr[g])) < 0) return -1;
    if (sv->s->writes_momentum && write_momentum(sv, g, mom[g]) < 0) return -1;
    if (sv->verbose && sv->s->kind != FSY_PLATEAU) fprintf(fsE_out(sv->E), "Adjusting learning rate of group %lld to %.4e.\n", (long long)g, lr[g]);
  }
  return 0;
}

/* ---- construction ------------------------------------------------------------------ */

static void bind_ctx(schedv *sv, fsE_ctx *E) { /* a call's context, for LambdaLR's functions */
  sv->E = E;
  for (size_t i = 0; sv->children && i < sv->children->u.seq.n; i++) bind_ctx(sched_of(sv->children->u.seq.items[i]), E);
}

/* LambdaLR: lr_lambda[group](epoch) through the evaluator */
static int call_lambda(void *ud, int64_t g, int64_t epoch, double *factor) {
  schedv *sv = ud;
  fs_value *arg = fsV_int(epoch);
  fsV_args a = {&arg, 1, NULL, NULL, 0, {0, 0}};
  fs_value *r = arg ? fsE_call(sv->E, sv->lambdas->u.seq.items[g], &a) : NULL;
  fsV_release(arg);
  if (!r) return fsT_seterr("%s", fsV_error()), -1; /* the runtime passes the function's error on */
  int rc = 0;
  if (fsE_as_tensor(r) && fsE_as_tensor(r)->numel == 1) {
    fs_value *item = fsE_item_value(fsE_as_tensor(r));
    fsV_release(r);
    r = item;
  }
  if (r && fsV_is_number(r)) *factor = fsV_to_double(r);
  else rc = (fsT_seterr("lr_lambda must return a number, not %s", r ? fsV_type_name(r) : "nothing"), -1);
  fsV_release(r);
  return rc;
}

/* A list of n numbers from a number or a sequence of n (torch's _format_param). */
static double *per_group(const fs_value *v, int64_t n, const char *name) {
  double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
  if (!d) return fsV_seterr("out of memory"), NULL;
  bool seq = v->type == FSV_LIST || v->type == FSV_TUPLE;
  if (seq && (int64_t)v->u.seq.n != n) {
    fsV_seterr("expected %lld values for %s, got %zu", (long long)n, name, v->u.seq.n);
    free(d);
    return NULL;
  }
  for (int64_t g = 0; g < n; g++) {
    const fs_value *x = seq ? v->u.seq.items[g] : v;
    if (!fsV_is_number(x)) {
      fsV_seterr("%s must be a number or a list of numbers, not %s", name, fsV_type_name(x));
      free(d);
      return NULL;
    }
    d[g] = fsV_to_double(x);
  }
  return d;
}

static int64_t opt_count(const fs_value *v) { return v->type == FSV_NONE ? FSY_NONE : fsE_ival(v); }

/* The options of kind from the constructor's slots (the sig row's order). */
static int read_opts(fsY_kind kind, fs_value **s, fsY_opts *o, int64_t ngroups, int64_t **ms, double **arr) {
  switch (kind) {
  case FSY_STEP: o->step_size = fsE_ival(s[1]), o->gamma = fsV_to_double(s[2]); break;
  case FSY_MULTISTEP:
  case FSY_SEQUENTIAL: {
    const fs_value *m = s[kind == FSY_MULTISTEP ? 1 : 2];
    if (!(*ms = malloc((m->u.seq.n + 1) * sizeof **ms))) return fsV_seterr("out of memory"), -1;
    for (size_t i = 0; i < m->u.seq.n; i++) {
      if (m->u.seq.items[i]->type != FSV_INT) return fsV_seterr("milestones must be integers"), -1;
      (*ms)[i] = m->u.seq.items[i]->u.i;
    }
    o->milestones = *ms, o->nmilestones = (int64_t)m->u.seq.n;
    if (kind == FSY_MULTISTEP) o->gamma = fsV_to_double(s[2]);
    break;
  }
  case FSY_EXPONENTIAL: o->gamma = fsV_to_double(s[1]); break;
  case FSY_COSINE: o->T_max = fsE_ival(s[1]), o->eta_min = fsV_to_double(s[2]); break;
  case FSY_WARM_RESTARTS: o->T_0 = fsE_ival(s[1]), o->T_mult = fsE_ival(s[2]), o->eta_min = fsV_to_double(s[3]); break;
  case FSY_LINEAR:
    o->start_factor = fsV_to_double(s[1]), o->end_factor = fsV_to_double(s[2]), o->total_iters = fsE_ival(s[3]);
    break;
  case FSY_CONSTANT: o->factor = fsV_to_double(s[1]), o->total_iters = fsE_ival(s[2]); break;
  case FSY_ONECYCLE: /* max_lr total_steps epochs steps_per_epoch pct_start anneal_strategy cycle_momentum
                        base_momentum max_momentum div_factor final_div_factor three_phase */
    if (!(*arr = per_group(s[1], ngroups, "max_lr"))) return -1;
    o->max_lrs = *arr;
    o->total_steps = opt_count(s[2]), o->epochs = opt_count(s[3]), o->steps_per_epoch = opt_count(s[4]);
    o->pct_start = fsV_to_double(s[5]);
    if (strcmp(s[6]->u.str.s, "cos") && strcmp(s[6]->u.str.s, "linear"))
      return fsV_seterr("anneal_strategy must by one of 'cos' or 'linear', instead got %s", s[6]->u.str.s), -1;
    o->anneal_cos = !strcmp(s[6]->u.str.s, "cos");
    o->cycle_momentum = fsV_truthy(s[7]);
    o->base_momentum = fsV_to_double(s[8]), o->max_momentum = fsV_to_double(s[9]);
    o->div_factor = fsV_to_double(s[10]), o->final_div_factor = fsV_to_double(s[11]);
    o->three_phase = fsV_truthy(s[12]);
    break;
  case FSY_PLATEAU: /* mode factor patience threshold threshold_mode cooldown min_lr eps */
    if (strcmp(s[1]->u.str.s, "min") && strcmp(s[1]->u.str.s, "max"))
      return fsV_seterr("mode %s is unknown!", s[1]->u.str.s), -1;
    if (strcmp(s[5]->u.str.s, "rel") && strcmp(s[5]->u.str.s, "abs"))
      return fsV_seterr("threshold mode %s is unknown!", s[5]->u.str.s), -1;
    o->mode_max = !strcmp(s[1]->u.str.s, "max"), o->threshold_abs = !strcmp(s[5]->u.str.s, "abs");
    o->gamma = fsV_to_double(s[2]), o->patience = fsE_ival(s[3]), o->threshold = fsV_to_double(s[4]);
    o->cooldown = fsE_ival(s[6]), o->eps = fsV_to_double(s[8]);
    if (!(*arr = per_group(s[7], ngroups, "min_lr"))) return -1;
    o->min_lrs = *arr;
    break;
  default: break;
  }
  return 0;
}

/* the slot of last_epoch and verbose: the sig rows end with them */
static int64_t tail(fsY_kind kind) {
  static const int64_t at[] = {[FSY_LAMBDA] = 2, [FSY_STEP] = 3, [FSY_MULTISTEP] = 3, [FSY_CONSTANT] = 3,
                               [FSY_LINEAR] = 4, [FSY_EXPONENTIAL] = 2, [FSY_COSINE] = 3, [FSY_WARM_RESTARTS] = 4,
                               [FSY_ONECYCLE] = 13, [FSY_SEQUENTIAL] = 3, [FSY_PLATEAU] = 9};
  return at[kind];
}

/* torch's _LRScheduler.__init__ bookkeeping: "initial_lr" in every group */
static int initial_lrs(schedv *sv, int64_t n, int64_t last_epoch, double *init) {
  for (int64_t g = 0; g < n; g++) {
    fs_value *d = group(sv, g);
    if (!fsV_dict_getstr(d, "initial_lr")) {
      if (last_epoch != -1) {
        fsV_seterr("param 'initial_lr' is not specified in param_groups[%lld] when resuming an optimizer", (long long)g);
        return -1;
      }
      if (put(d, "initial_lr", fsV_retain(fsV_dict_getstr(d, "lr"))) < 0) return -1;
    }
    if (get_num(d, g, "initial_lr", &init[g]) < 0) return -1;
  }
  return 0;
}

static fs_value *make_sched(fsE_ctx *E, fs_value **s, fsY_kind kind, const char *cls) {
  optv *ov = fsV_objdata(s[0], &fsE_optim_class);
  if (!ov) return fsV_seterr("%s is not an Optimizer", fsV_type_name(s[0])), NULL;
  if (fsE_optim_sync(ov) < 0) return NULL;
  int64_t n = ov->o->ngroups, *ms = NULL;
  double *arr = NULL, *buf = malloc((size_t)(3 * n) * sizeof *buf), *lr = buf, *mom = buf + n, *init = buf + 2 * n;
  schedv *sv = buf ? calloc(1, sizeof *sv) : NULL;
  fs_value *v = sv ? fsV_obj(kind == FSY_PLATEAU ? &plateau_class : &fsE_sched_class, sv) : NULL;
  if (!v) {
    free(buf);
    return sv ? NULL : (fsV_seterr("out of memory"), NULL);
  }
  sv->opt = fsV_retain(s[0]), sv->cls = cls, sv->E = E;
  int64_t t = tail(kind);
  sv->verbose = fsV_truthy(s[kind == FSY_PLATEAU ? t : t + 1]);
  fsY_opts o = {.last_epoch = kind == FSY_PLATEAU ? -1 : fsE_ival(s[t]), .momentum_key = momentum_key(ov)};
  int rc = read_opts(kind, s, &o, n, &ms, &arr);
  if (rc == 0 && kind == FSY_LAMBDA) { /* one function, or one per group */
    fs_value *f = s[1];
    bool seq = f->type == FSV_LIST || f->type == FSV_TUPLE;
    if (seq && (int64_t)f->u.seq.n != n) rc = (fsV_seterr("Expected %lld lr_lambdas, but got %zu", (long long)n, f->u.seq.n), -1);
    if (rc == 0 && !(sv->lambdas = fsV_list((size_t)n))) rc = -1;
    for (int64_t g = 0; rc == 0 && g < n; g++) rc = fsV_list_append(sv->lambdas, fsV_retain(seq ? f->u.seq.items[g] : f));
    o.lambda = call_lambda, o.lambda_ud = sv;
  }
  if (rc == 0 && kind == FSY_SEQUENTIAL) {
    fs_value *c = s[1];
    fsY_sched **kids = malloc((c->u.seq.n + 1) * sizeof *kids);
    rc = kids ? 0 : (fsV_seterr("out of memory"), -1);
    if (rc == 0 && !(sv->children = fsV_list(c->u.seq.n))) rc = -1;
    for (size_t i = 0; rc == 0 && i < c->u.seq.n; i++) {
      schedv *k = fsV_objdata(c->u.seq.items[i], &fsE_sched_class);
      if (!k) rc = (fsV_seterr("SequentialLR: schedulers[%zu] is a %s, not an LR scheduler", i, fsV_type_name(c->u.seq.items[i])), -1);
      else if (k->opt != s[0])
        rc = (fsV_seterr("Sequential Schedulers expects all schedulers to belong to the same optimizer, but got "
                         "schedulers at index %zu to be different than the optimizer passed in.", i), -1);
      else kids[i] = k->s, rc = fsV_list_append(sv->children, fsV_retain(c->u.seq.items[i]));
    }
    if (rc == 0) bind_ctx(sv, E);
    for (int64_t g = 0; rc == 0 && g < n; g++) rc = get_num(group(sv, g), g, "initial_lr", &init[g]);
    if (rc == 0) rc = read_groups(sv, lr, mom);
    if (rc == 0 && !(sv->s = fsY_sequential(kids, (int64_t)c->u.seq.n, &o, n, init, lr, mom))) rc = (fsE_rt_fail(), -1);
    free(kids);
  } else if (rc == 0) {
    if (kind == FSY_ONECYCLE && o.last_epoch == -1) { /* fsY_new checks; the groups get their keys below */
      rc = (sv->s = fsY_new(kind, &o, n, NULL)) ? 0 : (fsE_rt_fail(), -1);
      for (int64_t g = 0; rc == 0 && g < n; g++) {
        fs_value *d = group(sv, g);
        rc = put(d, "initial_lr", fsV_float(sv->s->base_lrs[g]));
        if (rc == 0) rc = put(d, "max_lr", fsV_float(sv->s->max_lrs[g]));
        if (rc == 0) rc = put(d, "min_lr", fsV_float(sv->s->min_lrs[g]));
        if (rc == 0 && o.cycle_momentum) {
          rc = write_momentum(sv, g, o.max_momentum);
          if (rc == 0) rc = put(d, "max_momentum", fsV_float(o.max_momentum));
          if (rc == 0) rc = put(d, "base_momentum", fsV_float(o.base_momentum));
        }
      }
    } else {
      if (kind != FSY_PLATEAU) rc = initial_lrs(sv, n, o.last_epoch, init);
      else for (int64_t g = 0; g < n; g++) init[g] = 0;
      if (rc == 0) rc = (sv->s = fsY_new(kind, &o, n, init)) ? 0 : (fsE_rt_fail(), -1);
    }
    if (rc == 0) rc = read_groups(sv, lr, mom);
    if (rc == 0 && kind == FSY_PLATEAU) memcpy(sv->s->last_lr, lr, (size_t)n * sizeof *lr);
    if (rc == 0 && kind != FSY_PLATEAU) rc = fsY_start(sv->s, lr, mom) < 0 ? (fsE_rt_fail(), -1) : 0;
  }
  if (rc == 0 && kind != FSY_PLATEAU) rc = write_groups(sv, lr, mom);
  free(ms);
  free(arr);
  free(buf);
  if (rc < 0) {
    fsV_release(v);
    return NULL;
  }
  return v;
}

NATIVE(sched_steplr) { return make_sched(E, s, FSY_STEP, "StepLR"); }
NATIVE(sched_multisteplr) { return make_sched(E, s, FSY_MULTISTEP, "MultiStepLR"); }
NATIVE(sched_explr) { return make_sched(E, s, FSY_EXPONENTIAL, "ExponentialLR"); }
NATIVE(sched_cosinelr) { return make_sched(E, s, FSY_COSINE, "CosineAnnealingLR"); }
NATIVE(sched_warmrestarts) { return make_sched(E, s, FSY_WARM_RESTARTS, "CosineAnnealingWarmRestarts"); }
NATIVE(sched_linearlr) { return make_sched(E, s, FSY_LINEAR, "LinearLR"); }
NATIVE(sched_constantlr) { return make_sched(E, s, FSY_CONSTANT, "ConstantLR"); }
NATIVE(sched_lambdalr) { return make_sched(E, s, FSY_LAMBDA, "LambdaLR"); }
NATIVE(sched_onecycle) { return make_sched(E, s, FSY_ONECYCLE, "OneCycleLR"); }
NATIVE(sched_sequentiallr) { return make_sched(E, s, FSY_SEQUENTIAL, "SequentialLR"); }
NATIVE(sched_plateau) { return make_sched(E, s, FSY_PLATEAU, "ReduceLROnPlateau"); }

/* ---- methods ---------------------------------------------------------------------- */

#define SV(self) ((schedv *)(self)->u.obj.data)

/* A scheduler call over the groups' arrays: read, run, write. */
static fs_value *with_groups(fsE_ctx *E, schedv *sv, int (*run)(schedv *sv, const fs_value *arg, double *lr, double *mom),
                             const fs_value *arg) {
  int64_t n = sv->s->ngroups;
  if (opt_of(sv)->o->ngroups != n) return fsV_seterr("the optimizer's parameter groups changed after the scheduler was made"), NULL;
  double *lr = malloc((size_t)(2 * n) * sizeof *lr);
  if (!lr) return fsV_seterr("out of memory"), NULL;
  bind_ctx(sv, E);
  int rc = read_groups(sv, lr, lr + n);
  if (rc == 0) rc = run(sv, arg, lr, lr + n);
  if (rc == 0) rc = write_groups(sv, lr, lr + n);
  free(lr);
  return rc < 0 ? NULL : fsV_none();
}

static int run_step(schedv *sv, const fs_value *epoch, double *lr, double *mom) {
  int rc = epoch->type == FSV_NONE ? fsY_step(sv->s, lr, mom) : fsY_step_at(sv->s, fsV_to_double(epoch), lr, mom);
  return rc < 0 ? (fsE_rt_fail(), -1) : 0;
}

NATIVE(sched_step) { return with_groups(E, SV(self), run_step, s[0]); }

/* ReduceLROnPlateau.step(metrics, epoch=None): float(metrics) */
static int run_plateau(schedv *sv, const fs_value *metric, double *lr, double *mom) {
  int64_t n = sv->s->ngroups;
  double *before = malloc((size_t)(n ? n : 1) * sizeof *before);
  if (!before) return fsV_seterr("out of memory"), -1;
  memcpy(before, lr, (size_t)n * sizeof *lr);
  fsY_plateau_step(sv->s, fsV_to_double(metric), lr);
  for (int64_t g = 0; sv->verbose && g < n; g++)
    if (lr[g] != before[g])
      fprintf(fsE_out(sv->E), "Epoch %05lld: reducing learning rate of group %lld to %.4e.\n",
              (long long)sv->s->last_epoch, (long long)g, lr[g]);
  free(before);
  return 0;
}

NATIVE(sched_plateau_step) {
  fs_value *metric = s[0];
  fs_tensor *t = fsE_as_tensor(metric);
  fs_value *item = t && t->numel == 1 ? fsE_item_value(t) : NULL;
  if (item) metric = item;
  if (!fsV_is_number(metric)) {
    fsV_release(item);
    return fsV_seterr("float() argument must be a string or a number, not '%s'", fsV_type_name(metric)), NULL;
  }
  schedv *sv = SV(self);
  if (s[1]->type != FSV_NONE) sv->s->last_epoch = (int64_t)fsV_to_double(s[1]) - 1; /* step sets it to epoch */
  fs_value *r = with_groups(E, sv, run_plateau, metric);
  fsV_release(item);
  return r;
}

static fs_value *float_list(const double *d, int64_t n) {
  fs_value *l = fsV_list((size_t)n);
  for (int64_t i = 0; l && i < n; i++)
    if (fsV_list_append(l, fsV_float(d[i])) < 0) {
      fsV_release(l);
      l = NULL;
    }
  return l;
}

NATIVE(sched_get_last_lr) { return float_list(SV(self)->s->last_lr, SV(self)->s->ngroups); }
NATIVE(sched_last_epoch) { return fsV_int(SV(self)->s->last_epoch); }
NATIVE(sched_base_lrs) { return float_list(SV(self)->s->base_lrs, SV(self)->s->ngroups); }
NATIVE(sched_optimizer) { return fsV_retain(SV(self)->opt); }

/* ---- state_dict: torch's keys for each kind's state ---------------------------- */

typedef struct sfield { const char *key; char type; void *p; } sfield; /* 'i' int64, 'd' double */

static size_t fields(fsY_sched *h, sfield *f) {
  size_t n = 0;
  f[n++] = (sfield){"last_epoch", 'i', &h->last_epoch};
  if (h->kind != FSY_PLATEAU) f[n++] = (sfield){"_step_count", 'i', &h->step_count};
  switch (h->kind) {
  case FSY_STEP: f[n++] = (sfield){"step_size", 'i', &h->o.step_size}; /* fall through */
  case FSY_MULTISTEP:
  case FSY_EXPONENTIAL: f[n++] = (sfield){"gamma", 'd', &h->o.gamma}; break;
  case FSY_CONSTANT: f[n++] = (sfield){"factor", 'd', &h->o.factor}, f[n++] = (sfield){"total_iters", 'i', &h->o.total_iters}; break;
  case FSY_LINEAR:
    f[n++] = (sfield){"start_factor", 'd', &h->o.start_factor}, f[n++] = (sfield){"end_factor", 'd', &h->o.end_factor};
    f[n++] = (sfield){"total_iters", 'i', &h->o.total_iters};
    break;
  case FSY_COSINE: f[n++] = (sfield){"T_max", 'i', &h->o.T_max}, f[n++] = (sfield){"eta_min", 'd', &h->o.eta_min}; break;
  case FSY_WARM_RESTARTS:
    f[n++] = (sfield){"T_0", 'i', &h->o.T_0}, f[n++] = (sfield){"T_i", 'i', &h->T_i};
    f[n++] = (sfield){"T_mult", 'i', &h->o.T_mult}, f[n++] = (sfield){"eta_min", 'd', &h->o.eta_min};
    f[n++] = (sfield){"T_cur", 'd', &h->T_cur};
    break;
  case FSY_ONECYCLE: f[n++] = (sfield){"total_steps", 'i', &h->o.total_steps}; break;
  case FSY_PLATEAU:
    f[n++] = (sfield){"factor", 'd', &h->o.gamma}, f[n++] = (sfield){"patience", 'i', &h->o.patience};
    f[n++] = (sfield){"cooldown", 'i', &h->o.cooldown}, f[n++] = (sfield){"cooldown_counter", 'i', &h->cooldown_counter};
    f[n++] = (sfield){"threshold", 'd', &h->o.threshold}, f[n++] = (sfield){"best", 'd', &h->best};
    f[n++] = (sfield){"num_bad_epochs", 'i', &h->num_bad_epochs}, f[n++] = (sfield){"eps", 'd', &h->o.eps};
    break;
  default: break;
  }
  return n;
}

static fs_value *state_of(const fs_value *v) {
  schedv *sv = sched_of(v);
  fsY_sched *h = sv->s;
  sfield f[16];
  size_t nf = fields(h, f);
  fs_value *d = fsV_dict();
  int rc = d ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < nf; i++)
    rc = put(d, f[i].key, f[i].type == 'i' ? fsV_int(*(int64_t *)f[i].p) : fsV_float(*(double *)f[i].p));
  if (rc == 0 && h->kind != FSY_PLATEAU) rc = put(d, "base_lrs", float_list(h->base_lrs, h->ngroups));
  if (rc == 0 && h->kind != FSY_PLATEAU) rc = put(d, "_get_lr_called_within_step", fsV_bool(false));
  if (rc == 0 && h->kind == FSY_PLATEAU) rc = put(d, "mode_worse", fsV_float(h->o.mode_max ? -INFINITY : INFINITY));
  if (rc == 0) rc = put(d, "_last_lr", float_list(h->last_lr, h->ngroups));
  if (rc == 0) rc = put(d, "verbose", fsV_bool(sv->verbose));
  if (rc == 0 && h->kind == FSY_MULTISTEP) { /* a Counter: milestone -> count */
    fs_value *m = fsV_dict();
    rc = m ? 0 : -1;
    for (int64_t i = 0; rc == 0 && i < h->o.nmilestones; i++) {
      fs_value *k = fsV_int(h->milestones[i]), *c = k ? fsV_dict_get(m, k) : NULL;
      rc = k ? fsV_dict_set(m, k, fsV_int(c ? c->u.i + 1 : 1)) : -1;
      fsV_release(k);
    }
    if (rc == 0) rc = put(d, "milestones", m);
    else fsV_release(m);
  }
  if (rc == 0 && h->kind == FSY_PLATEAU) rc = put(d, "min_lrs", float_list(h->min_lrs, h->ngroups));
  if (rc == 0 && h->kind == FSY_PLATEAU) rc = put(d, "mode", fsV_cstr(h->o.mode_max ? "max" : "min"));
  if (rc == 0 && h->kind == FSY_PLATEAU) rc = put(d, "threshold_mode", fsV_cstr(h->o.threshold_abs ? "abs" : "rel"));
  if (rc == 0 && h->kind == FSY_LAMBDA) { /* torch: None for each plain function */
    fs_value *l = fsV_list((size_t)h->ngroups);
    for (int64_t g = 0; l && g < h->ngroups; g++) fsV_list_append(l, fsV_none());
    rc = put(d, "lr_lambdas", l);
  }
  if (rc == 0 && h->kind == FSY_SEQUENTIAL) {
    fs_value *l = fsV_list(sv->children->u.seq.n), *ms = fsV_list((size_t)h->o.nmilestones);
    for (size_t i = 0; l && i < sv->children->u.seq.n; i++) fsV_list_append(l, state_of(sv->children->u.seq.items[i]));
    for (int64_t i = 0; ms && i < h->o.nmilestones; i++) fsV_list_append(ms, fsV_int(h->milestones[i]));
    rc = put(d, "_schedulers", l);
    if (rc == 0) rc = put(d, "_milestones", ms);
    else fsV_release(ms);
  }
  if (rc < 0) {
    fsV_release(d);
    return NULL;
  }
  return d;
}

NATIVE(sched_state_dict) { return state_of(self); }

static int load_list(const fs_value *sd, const char *key, double *out, int64_t n) {
  const fs_value *l = fsV_dict_getstr(sd, key);
  if (!l) return 0;
  if ((l->type != FSV_LIST && l->type != FSV_TUPLE) || (int64_t)l->u.seq.n != n)
    return fsV_seterr("state_dict['%s'] must be a list of %lld numbers", key, (long long)n), -1;
  for (int64_t i = 0; i < n; i++) {
    if (!fsV_is_number(l->u.seq.items[i])) return fsV_seterr("state_dict['%s'] must be a list of numbers", key), -1;
    out[i] = fsV_to_double(l->u.seq.items[i]);
  }
  return 0;
}

/* load_state_dict: torch updates the scheduler's attributes from the dict */
static int load_state(const fs_value *v, const fs_value *sd) {
  schedv *sv = sched_of(v);
  fsY_sched *h = sv->s;
  sfield f[16];
  size_t nf = fields(h, f);
  for (size_t i = 0; i < nf; i++) {
    const fs_value *x = fsV_dict_getstr(sd, f[i].key);
    if (!x) continue;
    if (!fsV_is_number(x)) return fsV_seterr("state_dict['%s'] must be a number, not %s", f[i].key, fsV_type_name(x)), -1;
    if (f[i].type == 'i') *(int64_t *)f[i].p = (int64_t)fsV_to_double(x);
    else *(double *)f[i].p = fsV_to_double(x);
  }
  if (load_list(sd, "base_lrs", h->base_lrs, h->ngroups) < 0 || load_list(sd, "_last_lr", h->last_lr, h->ngroups) < 0)
    return -1;
  if (h->kind == FSY_PLATEAU && load_list(sd, "min_lrs", h->min_lrs, h->ngroups) < 0) return -1;
  const fs_value *kids = h->kind == FSY_SEQUENTIAL ? fsV_dict_getstr(sd, "_schedulers") : NULL;
  if (kids && (kids->type != FSV_LIST || kids->u.seq.n != sv->children->u.seq.n))
    return fsV_seterr("state_dict['_schedulers'] must hold one state per scheduler"), -1;
  for (size_t i = 0; kids && i < kids->u.seq.n; i++) {
    if (kids->u.seq.items[i]->type != FSV_DICT) return fsV_seterr("state_dict['_schedulers'][%zu] must be a dict", i), -1;
    if (load_state(sv->children->u.seq.items[i], kids->u.seq.items[i]) < 0) return -1;
  }
  return 0;
}

/* load_state reads field by field; all or nothing: a failure puts back the
 * state before, which load_state always accepts (it wrote it). */
static int load_whole(const fs_value *v, const fs_value *sd) {
  fs_value *before = state_of(v);
  if (!before) return -1;
  int rc = load_state(v, sd);
  if (rc < 0) {
    char why[1024];
    snprintf(why, sizeof why, "%s", fsV_error());
    (void)load_state(v, before);
    fsV_seterr("%s", why);
  }
  fsV_release(before);
  return rc;
}

NATIVE(sched_load_state_dict) { return load_whole(self, s[0]) < 0 ? NULL : fsV_none(); }

bool fsE_is_sched(const fs_value *v) { return sched_of(v) != NULL; }
fs_value *fsE_sched_state(const fs_value *v) { return state_of(v); }
int fsE_sched_load(const fs_value *v, const fs_value *sd) { return load_whole(v, sd); }

static const fsE_reg sched_funcs[] = {
  {"StepLR", sched_steplr}, {"MultiStepLR", sched_multisteplr}, {"ExponentialLR", sched_explr},
  {"CosineAnnealingLR", sched_cosinelr}, {"CosineAnnealingWarmRestarts", sched_warmrestarts},
  {"LinearLR", sched_linearlr}, {"ConstantLR", sched_constantlr}, {"LambdaLR", sched_lambdalr},
  {"OneCycleLR", sched_onecycle}, {"SequentialLR", sched_sequentiallr}, {"ReduceLROnPlateau", sched_plateau},
  {"LRScheduler.step", sched_step}, {"LRScheduler.get_last_lr", sched_get_last_lr},
  {"LRScheduler.state_dict", sched_state_dict}, {"LRScheduler.load_state_dict", sched_load_state_dict},
  {"LRScheduler.last_epoch", sched_last_epoch}, {"LRScheduler.base_lrs", sched_base_lrs},
  {"LRScheduler.optimizer", sched_optimizer},
  {"ReduceLROnPlateau.step", sched_plateau_step}, {"ReduceLROnPlateau.get_last_lr", sched_get_last_lr},
  {"ReduceLROnPlateau.state_dict", sched_state_dict}, {"ReduceLROnPlateau.load_state_dict", sched_load_state_dict},
  {"ReduceLROnPlateau.last_epoch", sched_last_epoch}, {"ReduceLROnPlateau.optimizer", sched_optimizer},
  {NULL, NULL},
};
const fsE_lib fsE_lib_sched = {"sched", sched_funcs};
