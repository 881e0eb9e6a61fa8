/* lib_metrics.c -- torchmetrics' metrics as values: MulticlassAccuracy
 * (Accuracy(task="multiclass")), MeanMetric, SumMetric, MaxMetric,
 * RunningMean and MeanSquaredError, with update / compute / reset / to and
 * the forward call metric(...).
 *
 * The invariant, as torchmetrics keeps it: a metric's state is a fixed
 * vector of numbers that ranks combine with one reduction (a sum, or the
 * maximum for MaxMetric), and compute() is a pure function of the combined
 * vector.  So under DDP/FSDP compute() gathers every rank's vector, reduces
 * it (in rank order, in double precision, so the result does not depend on
 * a transport's summation order) and computes from that: the value a
 * single device gets from all the data.  The rank's own state stays local,
 * as torchmetrics unsyncs after compute.  A forward call returns the
 * batch's own value (not synced, as torchmetrics' dist_sync_on_step=False)
 * and adds the batch to the state.
 *
 * States live in host memory whatever the device (to(device) records it);
 * tensors a metric reads are copied to the host.  Sig rows:
 * lang/signatures.c ("Accuracy", "Metric.update"); names:
 * lang/pynames.c (torchmetrics, torchmetrics.classification, ...). */
#include <math.h>
#include <string.h>

#include "eval_int.h"

typedef enum mkind { MK_ACCURACY, MK_MEAN, MK_SUM, MK_MAX, MK_RUNNING, MK_MSE } mkind;

typedef struct metricv {
  mkind kind;
  const char *cls;      /* torchmetrics' class name: "MulticlassAccuracy" */
  int64_t classes;      /* accuracy: num_classes */
  int64_t top_k;        /* accuracy */
  int64_t ignore;       /* accuracy: ignore_index, or INT64_MIN */
  bool macro;           /* accuracy: average="macro" (else micro) */
  bool squared;         /* MeanSquaredError */
  int64_t window;       /* RunningMean */
  int64_t updates;      /* RunningMean: updates so far (the ring's cursor) */
  size_t n;             /* the state's numbers */
  double *state;        /* accuracy: tp[C], fp[C], fn[C]; mean: sum, weight;
                         * sum: sum; max: max; running: window x (sum, weight);
                         * mse: sum of squares, count */
  fs_device dev;
} metricv;

static void metricv_free(void *p) {
  metricv *m = p;
  free(m->state);
  free(m);
}

static char *metric_repr(fs_value *v) {
  fsV_buf b = {0};
  fsV_buf_printf(&b, "%s()", ((metricv *)v->u.obj.data)->cls);
  return fsV_buf_take(&b);
}

static fs_value *metric_call(fsE_ctx *E, fs_value *self, const fsV_args *a);
static const fsV_class metric_class = {.name = "Metric", .call = metric_call, .repr = metric_repr,
                                       .free = metricv_free};
#define MV(self) ((metricv *)(self)->u.obj.data)

/* The state's initial value: zeros, or -inf for a maximum. */
static void reset_state(metricv *m) {
  for (size_t i = 0; i < m->n; i++) m->state[i] = m->kind == MK_MAX ? -INFINITY : 0;
  m->updates = 0;
}

static fs_value *make_metric(metricv proto, size_t n) {
  metricv *m = malloc(sizeof *m);
  double *st = calloc(n ? n : 1, sizeof *st);
  if (!m || !st) {
    free(m);
    free(st);
    fsV_seterr("out of memory");
    return NULL;
  }
  *m = proto;
  m->n = n;
  m->state = st;
  m->dev = FS_DEV_CPU;
  reset_state(m);
  return fsV_obj(&metric_class, m);
}

/* ---- constructors ------------------------------------------------------------------ */

/* Metric.__init__'s keyword arguments: accepted (one process computes them
 * all the same way), any other name torchmetrics' ValueError. */
static int metric_kwargs(const fs_value *kw) {
  static const char *const known[] = {"compute_on_cpu", "dist_sync_on_step", "process_group", "dist_sync_fn",
                                      "distributed_available_fn", "sync_on_compute", "compute_with_cache"};
  fsV_buf b = {0};
  for (size_t i = 0; i < kw->u.dict.n; i++) {
    const char *k = kw->u.dict.keys[i]->u.str.s;
    bool ok = false;
    for (size_t j = 0; j < sizeof known / sizeof *known; j++) ok |= strcmp(k, known[j]) == 0;
    if (!ok) fsV_buf_printf(&b, "%s`%s`", b.n ? ", " : "", k);
  }
  if (!b.n) return 0;
  char *names = fsV_buf_take(&b);
  fsV_seterr("Unexpected keyword arguments: %s", names ? names : "?");
  free(names);
  return -1;
}

static fs_value *accuracy(int64_t classes, const fs_value *top_k, const fs_value *average,
                          const fs_value *ignore) {
  const char *avg = average->type == FSV_NONE ? "none" : average->u.str.s;
  if (strcmp(avg, "micro") && strcmp(avg, "macro")) {
    fsV_seterr("MulticlassAccuracy: average='%s' is not supported yet (this build has 'micro' and 'macro')", avg);
    return NULL;
  }
  if (classes < 2) { /* torchmetrics' words */
    fsV_seterr("Expected argument `num_classes` to be an integer larger than 1, but got %lld", (long long)classes);
    return NULL;
  }
  int64_t k = top_k->type == FSV_NONE ? 1 : fsE_ival(top_k);
  if (k < 1) {
    fsV_seterr("Expected argument `top_k` to be an integer larger than or equal to 1, but got %lld", (long long)k);
    return NULL;
  }
  if (k > classes) {
    fsV_seterr("Expected argument `top_k` to be smaller or equal to `num_classes` but got %lld and %lld",
               (long long)k, (long long)classes);
    return NULL;
  }
  metricv p = {.kind = MK_ACCURACY, .cls = "MulticlassAccuracy", .classes = classes, .top_k = k,
               .macro = strcmp(avg, "macro") == 0,
               .ignore = ignore->type == FSV_NONE ? INT64_MIN : fsE_ival(ignore)};
  return make_metric(p, 3 * (size_t)classes);
}

/* slots: task, threshold, num_classes, num_labels, average, multidim_average, top_k, ignore_index, validate_args */
NATIVE(metrics_accuracy) {
  if (metric_kwargs(s[9]) < 0) return NULL;
  const char *task = s[0]->u.str.s;
  if (strcmp(task, "binary") == 0 || strcmp(task, "multilabel") == 0) {
    fsV_seterr("Accuracy(task='%s') is not supported yet: this build has task='multiclass'", task);
    return NULL;
  }
  if (strcmp(task, "multiclass") != 0) {
    fsV_seterr("Invalid Classification: expected one of ('binary', 'multiclass', 'multilabel') but got %s", task);
    return NULL;
  }
  if (s[2]->type != FSV_INT) {
    fsV_seterr("Optional arg `num_classes` must be type `int` when task is multiclass. Got %s",
               s[2]->type == FSV_NONE ? "<class 'NoneType'>" : fsV_type_name(s[2]));
    return NULL;
  }
  if (strcmp(s[5]->u.str.s, "global") != 0) {
    fsV_seterr("Accuracy: multidim_average='%s' is not supported yet", s[5]->u.str.s);
    return NULL;
  }
  return accuracy(s[2]->u.i, s[6], s[4], s[7]);
}

/* slots: num_classes, top_k, average, multidim_average, ignore_index, validate_args */
NATIVE(metrics_multiclass_accuracy) {
  if (metric_kwargs(s[6]) < 0) return NULL;
  if (strcmp(s[3]->u.str.s, "global") != 0) {
    fsV_seterr("MulticlassAccuracy: multidim_average='%s' is not supported yet", s[3]->u.str.s);
    return NULL;
  }
  return accuracy(s[0]->u.i, s[1], s[2], s[4]);
}

/* nan_strategy: 'warn' (the default: NaNs dropped) and 'ignore' drop them;
 * 'error' and a number are not modelled yet. */
static int nan_strategy(const fs_value *v, const char *cls) {
  if (v->type == FSV_STR && (!strcmp(v->u.str.s, "warn") || !strcmp(v->u.str.s, "ignore"))) return 0;
  if (v->type == FSV_STR && strcmp(v->u.str.s, "error") && strcmp(v->u.str.s, "disable")) {
    fsV_seterr("Arg `nan_strategy` should either be a float or one of ('error', 'warn', 'ignore', 'disable') "
               "but got %s.", v->u.str.s);
    return -1;
  }
  fsV_seterr("%s: this nan_strategy is not supported yet ('warn' and 'ignore' are)", cls);
  return -1;
}

static fs_value *aggregation(mkind kind, const char *cls, fs_value **s, size_t n) {
  if (metric_kwargs(s[1]) < 0 || nan_strategy(s[0], cls) < 0) return NULL;
  return make_metric((metricv){.kind = kind, .cls = cls}, n);
}

/* slots: nan_strategy, kwargs */
NATIVE(metrics_mean) { return aggregation(MK_MEAN, "MeanMetric", s, 2); }
NATIVE(metrics_sum) { return aggregation(MK_SUM, "SumMetric", s, 1); }
NATIVE(metrics_max) { return aggregation(MK_MAX, "MaxMetric", s, 1); }

/* slots: window, nan_strategy, kwargs */
NATIVE(metrics_running_mean) {
  int64_t w = s[0]->u.i;
  if (w < 1) {
    fsV_seterr("Expected argument `window` to be a positive integer but got %lld", (long long)w);
    return NULL;
  }
  if (metric_kwargs(s[2]) < 0 || nan_strategy(s[1], "RunningMean") < 0) return NULL;
  return make_metric((metricv){.kind = MK_RUNNING, .cls = "RunningMean", .window = w}, 2 * (size_t)w);
}

/* slots: squared, num_outputs, kwargs */
NATIVE(metrics_mse) {
  if (metric_kwargs(s[2]) < 0) return NULL;
  if (fsE_ival(s[1]) != 1) {
    fsV_seterr("MeanSquaredError: num_outputs=%lld is not supported yet", (long long)fsE_ival(s[1]));
    return NULL;
  }
  return make_metric((metricv){.kind = MK_MSE, .cls = "MeanSquaredError", .squared = fsV_truthy(s[0])}, 2);
}

/* ---- update ------------------------------------------------------------------------ */

/* A number or a tensor as a host tensor (a new reference). */
static fs_tensor *host_tensor(const fs_value *v, const char *cls, const char *what) {
  fs_tensor *t = fsE_as_tensor(v);
  if (t) {
    if (!t->data) {
      fsV_seterr("%s: %s is on the meta device and has no values", cls, what);
      return NULL;
    }
    fs_tensor *h = fsT_to_device(t, FS_DEV_CPU);
    if (!h) fsE_rt_fail();
    return h;
  }
  if (fsV_is_number(v)) {
    fs_tensor *h = fsT_new(FS_F32, FS_DEV_CPU, 0, NULL);
    if (!h) return (fs_tensor *)fsE_rt_fail();
    fsT_f32(h)[0] = (float)fsV_to_double(v);
    return h;
  }
  fsV_seterr("%s: %s must be a tensor or a number, not %s", cls, what, fsV_type_name(v));
  return NULL;
}

/* Classes of one sample: its top_k scores (ties: the lower index, as argmax) in out. */
static void top_classes(const fs_tensor *p, int64_t row, int64_t c, int64_t k, int64_t *out) {
  for (int64_t j = 0; j < k; j++) {
    int64_t best = -1;
    for (int64_t i = 0; i < c; i++) {
      bool taken = false;
      for (int64_t q = 0; q < j; q++) taken |= out[q] == i;
      if (!taken && (best < 0 || fsT_get(p, row * c + i) > fsT_get(p, row * c + best))) best = i;
    }
    out[j] = best;
  }
}

/* preds (N, C) scores or (N,) labels, target (N,) labels. */
static int update_accuracy(metricv *m, const fs_tensor *p, const fs_tensor *t) {
  int64_t C = m->classes;
  bool scores = p->rank == t->rank + 1;
  int64_t n = t->numel;
  if (!(scores ? p->rank == 2 && p->shape[0] == t->shape[0] : fsT_same_shape(p, t))) {
    char a[64], b[64];
    fsV_seterr("%s: expected preds of shape (N, C) or (N,) with target of shape (N,), got preds %s and target %s",
               m->cls, fsT_shape_str(p, a, sizeof a), fsT_shape_str(t, b, sizeof b));
    return -1;
  }
  if (scores && p->shape[1] != C) {
    fsV_seterr("%s: preds has %lld classes in dim 1, but num_classes=%lld", m->cls, (long long)p->shape[1],
               (long long)C);
    return -1;
  }
  if (t->dtype != FS_I64 || (!scores && p->dtype != FS_I64)) {
    fsV_seterr("%s: target%s must hold integer labels (int64), not %s", m->cls, scores ? "" : " and preds",
               fsT_dtype_name(t->dtype != FS_I64 ? t->dtype : p->dtype));
    return -1;
  }
  int64_t *top = malloc((size_t)m->top_k * sizeof *top);
  if (!top) {
    fsV_seterr("out of memory");
    return -1;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t y = fsT_i64(t)[i];
    if (y == m->ignore) continue;
    if (y < 0 || y >= C || (!scores && (fsT_i64(p)[i] < 0 || fsT_i64(p)[i] >= C))) {
      fsV_seterr("%s: Detected more unique values in `%s` than expected. Expected only %lld but found %lld",
                 m->cls, y < 0 || y >= C ? "target" : "preds", (long long)C,
                 (long long)(y < 0 || y >= C ? y : fsT_i64(p)[i]));
      free(top);
      return -1;
    }
    int64_t k = scores ? m->top_k : 1;
    if (scores) top_classes(p, i, C, k, top);
    else top[0] = fsT_i64(p)[i];
    bool hit = false;
    for (int64_t j = 0; j < k; j++) {
      hit |= top[j] == y;
      if (top[j] != y) m->state[C + top[j]]++; /* fp */
    }
    m->state[(hit ? 0 : 2 * C) + y]++; /* tp or fn */
  }
  free(top);
  return 0;
}

static int update_mse(metricv *m, const fs_tensor *p, const fs_tensor *t) {
  if (!fsT_same_shape(p, t)) {
    char a[64], b[64];
    fsV_seterr("Predictions and targets are expected to have the same shape, but got %s and %s.",
               fsT_shape_str(p, a, sizeof a), fsT_shape_str(t, b, sizeof b));
    return -1;
  }
  for (int64_t i = 0; i < p->numel; i++) {
    double d = fsT_get(p, i) - fsT_get(t, i);
    m->state[0] += d * d;
  }
  m->state[1] += (double)p->numel;
  return 0;
}

/* value (and weight: a number, or a tensor of value's numel); NaN values are
 * dropped, as nan_strategy='warn' does. */
static int update_aggregate(metricv *m, const fs_tensor *v, const fs_tensor *w) {
  if (w && w->numel != 1 && w->numel != v->numel) {
    char a[64], b[64];
    fsV_seterr("%s: weight of shape %s does not broadcast to value of shape %s", m->cls,
               fsT_shape_str(w, a, sizeof a), fsT_shape_str(v, b, sizeof b));
    return -1;
  }
  double sum = 0, weight = 0, max = -INFINITY;
  for (int64_t i = 0; i < v->numel; i++) {
    double x = fsT_get(v, i), wi = w ? fsT_get(w, w->numel == 1 ? 0 : i) : 1;
    if (isnan(x)) continue;
    sum += x * wi;
    weight += wi;
    max = fmax(max, x);
  }
  switch (m->kind) {
  case MK_MEAN: m->state[0] += sum, m->state[1] += weight; break;
  case MK_SUM: m->state[0] += sum; break;
  case MK_MAX: m->state[0] = fmax(m->state[0], max); break;
  default: { /* MK_RUNNING: the ring slot of this update */
    double *slot = m->state + 2 * (m->updates++ % m->window);
    slot[0] = sum;
    slot[1] = weight;
  }
  }
  return 0;
}

/* update(*args, **kwargs) of any metric: args as the metric's update takes them. */
static int update(metricv *m, fs_value *const *args, size_t nargs, const fs_value *weight) {
  bool pair = m->kind == MK_ACCURACY || m->kind == MK_MSE;
  size_t want = pair ? 2 : 1;
  if (nargs != want || (weight && m->kind != MK_MEAN)) {
    fsV_seterr("%s.update() takes %s, got %zu positional argument%s%s", m->cls,
               pair ? "(preds, target)" : m->kind == MK_MEAN ? "(value, weight=1.0)" : "(value)", nargs,
               nargs == 1 ? "" : "s", weight && m->kind != MK_MEAN ? " and a weight" : "");
    return -1;
  }
  fs_tensor *a = host_tensor(args[0], m->cls, pair ? "preds" : "value");
  fs_tensor *b = !a ? NULL : pair ? host_tensor(args[1], m->cls, "target")
                 : weight ? host_tensor(weight, m->cls, "weight") : NULL;
  int rc = -1;
  if (a && (b || (!pair && !weight)))
    rc = m->kind == MK_ACCURACY ? update_accuracy(m, a, b) : m->kind == MK_MSE ? update_mse(m, a, b)
                                                                               : update_aggregate(m, a, b);
  fsT_release(a);
  fsT_release(b);
  return rc;
}

/* ---- compute ----------------------------------------------------------------------- */

static double safe_div(double a, double b) { return b == 0 ? 0 : a / b; }

/* The metric's value from a state vector st (combined over ranks or not). */
static double value_of(const metricv *m, const double *st) {
  switch (m->kind) {
  case MK_ACCURACY: {
    int64_t C = m->classes;
    const double *tp = st, *fp = st + C, *fn = st + 2 * C;
    double t = 0, f = 0, score = 0, weights = 0;
    for (int64_t c = 0; c < C; c++) {
      t += tp[c];
      f += fn[c];
      /* macro: each class's recall; a class never seen nor predicted counts for nothing */
      double w = tp[c] + fp[c] + fn[c] == 0 ? 0 : 1;
      score += w * safe_div(tp[c], tp[c] + fn[c]);
      weights += w;
    }
    return m->macro ? safe_div(score, weights) : safe_div(t, t + f);
  }
  case MK_MEAN: return st[1] == 0 ? NAN : st[0] / st[1]; /* nothing seen: nan, as torch's 0/0 */
  case MK_SUM:
  case MK_MAX: return st[0];
  case MK_RUNNING: {
    double sum = 0, weight = 0;
    for (int64_t i = 0; i < m->window; i++) sum += st[2 * i], weight += st[2 * i + 1];
    return weight == 0 ? NAN : sum / weight;
  }
  case MK_MSE: return st[1] == 0 ? NAN : m->squared ? st[0] / st[1] : sqrt(st[0] / st[1]);
  }
  return NAN;
}

/* The states of every rank combined into out (m->n numbers): each rank's
 * vector gathered bit for bit, then reduced here in rank order. */
static int synced_state(fsE_ctx *E, const metricv *m, double *out) {
  memcpy(out, m->state, m->n * sizeof *out);
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fsE_fabric_class) : NULL;
  if (!fv || !fv->comm || fv->env.world_size < 2) return 0;
  int64_t shape[1] = {(int64_t)m->n};
  fs_tensor *mine = fsT_new(FS_I64, FS_DEV_CPU, 1, shape);
  if (mine) memcpy(mine->data, m->state, m->n * sizeof *m->state); /* the doubles' bits */
  fs_tensor *sent = mine ? fsT_to_device(mine, fv->comm->device) : NULL;
  fs_tensor *all = sent ? fsCC_all_gather_tensor(fv->comm, sent) : NULL;
  fs_tensor *host = all ? fsT_to_device(all, FS_DEV_CPU) : NULL;
  int rc = host ? 0 : -1;
  for (int r = 1; host && r < fv->env.world_size; r++) {
    const double *st = (const double *)host->data + (size_t)r * m->n;
    for (size_t i = 0; i < m->n; i++) out[i] = m->kind == MK_MAX ? fmax(out[i], st[i]) : out[i] + st[i];
  }
  fsT_release(host);
  fsT_release(all);
  fsT_release(sent);
  fsT_release(mine);
  if (rc < 0) fsE_comm_fail();
  return rc;
}

static fs_value *scalar_value(double v) { return fsE_tensor_value(fsT_scalar((float)v)); }

NATIVE(metric_compute) {
  (void)s, (void)a;
  metricv *m = MV(self);
  double *st = malloc(m->n * sizeof *st);
  if (!st) {
    fsV_seterr("out of memory");
    return NULL;
  }
  fs_value *r = synced_state(E, m, st) < 0 ? NULL : scalar_value(value_of(m, st));
  free(st);
  return r;
}

/* slots: args, kwargs */
NATIVE(metric_update) {
  (void)E, (void)a;
  const fs_value *weight = fsV_dict_getstr(s[1], "weight");
  if (s[1]->u.dict.n > (weight ? 1u : 0u)) {
    fsV_seterr("%s.update() got an unexpected keyword argument", MV(self)->cls);
    return NULL;
  }
  return update(MV(self), s[0]->u.seq.items, s[0]->u.seq.n, weight) < 0 ? NULL : fsV_none();
}

/* metric(...): the batch's own value, and the batch added to the state. */
static fs_value *metric_call(fsE_ctx *E, fs_value *self, const fsV_args *a) {
  (void)E;
  metricv *m = MV(self);
  const fs_value *weight = NULL;
  for (size_t i = 0; i < a->nkw; i++) {
    if (strcmp(a->kwnames[i], "weight") != 0) {
      fsV_seterr("%s.forward() got an unexpected keyword argument '%s'", m->cls, a->kwnames[i]);
      return NULL;
    }
    weight = a->kw[i];
  }
  metricv batch = *m;
  batch.state = malloc(m->n * sizeof *batch.state);
  if (!batch.state) {
    fsV_seterr("out of memory");
    return NULL;
  }
  reset_state(&batch);
  fs_value *r = NULL;
  if (update(&batch, a->pos, a->npos, weight) == 0 && update(m, a->pos, a->npos, weight) == 0)
    r = scalar_value(value_of(&batch, batch.state));
  free(batch.state);
  return r;
}

NATIVE(metric_reset) {
  (void)E, (void)s, (void)a;
  reset_state(MV(self));
  return fsV_none();
}

/* to(device): the metric itself, as torchmetrics returns self */
NATIVE(metric_to) {
  (void)E, (void)a;
  ctxv *d = fsV_objdata(s[0], &fsE_ctx_class);
  const char *name = s[0]->type == FSV_STR ? s[0]->u.str.s : NULL;
  if (d && d->kind == 0) MV(self)->dev = d->dev;
  else if (name && (!strncmp(name, "cpu", 3) || !strncmp(name, "cuda", 4))) MV(self)->dev = name[1] == 'p' ? FS_DEV_CPU : FS_DEV_CUDA;
  else {
    fsV_seterr("%s.to(): expected a device or 'cpu' / 'cuda', got %s", MV(self)->cls, fsV_type_name(s[0]));
    return NULL;
  }
  return fsV_retain(self);
}

NATIVE(metric_device) {
  (void)E, (void)s, (void)a;
  return fsE_make_ctx(0, MV(self)->dev);
}

static const fsE_reg metrics_funcs[] = {
  {"Accuracy", metrics_accuracy}, {"MulticlassAccuracy", metrics_multiclass_accuracy},
  {"MeanMetric", metrics_mean}, {"SumMetric", metrics_sum}, {"MaxMetric", metrics_max},
  {"RunningMean", metrics_running_mean}, {"MeanSquaredError", metrics_mse},
  {"Metric.update", metric_update}, {"Metric.compute", metric_compute}, {"Metric.reset", metric_reset},
  {"Metric.to", metric_to}, {"Metric.device", metric_device},
  {NULL, NULL},
};
const fsE_lib fsE_lib_metrics = {"metrics", metrics_funcs};
