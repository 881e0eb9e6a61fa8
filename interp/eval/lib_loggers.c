/* lib_loggers.c -- lightning.fabric.loggers' CSVLogger and TensorBoardLogger
 * as values over runtime/io/logger.h, and the metric conversion fabric.log /
 * log_dict share with them.
 *
 * The rule, as Lightning's rank_zero_only: only global rank 0 touches
 * files; on every other rank log_metrics, log_hyperparams, save and
 * finalize do nothing (the version a rank > 0 reads is looked up the same
 * way, without creating anything). A logger's files are created at its
 * first write and closed when the value goes (the run's end), which is
 * when metrics.svg is drawn and a note says where the files are. Logging
 * never stops training: a file error is one warning, then that logger is
 * off. Sig rows: lang/signatures.c ("CSVLogger", "Logger.log_metrics");
 * Fabric(loggers=...) keeps the values (lib_fabric.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>

#include "eval_int.h"

typedef struct loggerv {
  fsLG *lg;
  fsLG_format format;
  char *root, *name;
  fs_value *version; /* as given: None, int or str */
  fs_diags *diags;   /* for the warnings and the closing note (the run outlives the value) */
  bool wrote;
} loggerv;

static const char *format_name(fsLG_format f) { return f == FSLG_CSV ? "CSVLogger" : "TensorBoardLogger"; }

void fsE_logger_close(fs_diags *diags, fsLG *lg, fsLG_format format) {
  if (!lg) return;
  const char *dir = fsLG_dir(lg);
  char *where = dir ? strdup(dir) : NULL;
  char *err = NULL;
  if (fsLG_close(lg, &err) < 0)
    fsD_add(diags, FS_SEV_WARNING, "log", NULL, (fs_loc){0, 0}, "%s; logging is off", err ? err : "out of memory");
  else if (where)
    fsD_add(diags, FS_SEV_NOTE, "log", NULL, (fs_loc){0, 0}, "%s: metrics in %s/ (%s, metrics.svg)",
            format_name(format), where, format == FSLG_CSV ? "metrics.csv" : "events.out.tfevents.*");
  free(err);
  free(where);
}

static void loggerv_free(void *p) {
  loggerv *l = p;
  fsE_logger_close(l->diags, l->lg, l->format);
  free(l->root);
  free(l->name);
  fsV_release(l->version);
  free(l);
}

static char *logger_repr(fs_value *v) {
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<%s object>", format_name(((loggerv *)v->u.obj.data)->format));
  return fsV_buf_take(&b);
}

const fsV_class fsE_logger_class = {.name = "Logger", .repr = logger_repr, .free = loggerv_free};
#define LV(self) ((loggerv *)(self)->u.obj.data)

/* slots: root_dir, name, version, then CSV: prefix, flush_logs_every_n_steps; TensorBoard:
 * default_hp_metric, prefix, sub_dir, kwargs */
static fs_value *make_logger(fsE_ctx *E, fs_value **s, fsLG_format format, const fs_value *prefix,
                             int64_t flush_every) {
  if (prefix->type == FSV_STR && prefix->u.str.s[0]) {
    fsV_seterr("%s(prefix=...) is not supported yet", format_name(format));
    return NULL;
  }
  if (s[2]->type == FSV_FLOAT || s[2]->type == FSV_BOOL) {
    fsV_seterr("%s(): version must be an int, a str or None, not %s", format_name(format), fsV_type_name(s[2]));
    return NULL;
  }
  loggerv *l = calloc(1, sizeof *l);
  char vname[40];
  if (s[2]->type == FSV_INT) snprintf(vname, sizeof vname, "version_%lld", (long long)s[2]->u.i);
  const char *version = s[2]->type == FSV_INT ? vname : s[2]->type == FSV_STR ? s[2]->u.str.s : NULL;
  const char *name = s[1]->type == FSV_STR ? s[1]->u.str.s : ""; /* None: the versions directly in root */
  if (l) {
    l->root = strdup(s[0]->u.str.s);
    l->name = strdup(name);
    l->lg = fsLG_new(&(fsLG_where){l->root, name, version, format, flush_every});
  }
  if (!l || !l->root || !l->name || !l->lg) {
    if (l) fsLG_close(l->lg, NULL), free(l->root), free(l->name);
    free(l);
    fsV_seterr("out of memory");
    return NULL;
  }
  l->format = format;
  l->version = fsV_retain(s[2]);
  l->diags = E->diags;
  return fsV_obj(&fsE_logger_class, l);
}

NATIVE(loggers_csv) {
  if (s[4]->u.i < 1) {
    fsV_seterr("CSVLogger(): flush_logs_every_n_steps must be a positive int, got %lld", (long long)s[4]->u.i);
    return NULL;
  }
  return make_logger(E, s, FSLG_CSV, s[3], s[4]->u.i);
}

NATIVE(loggers_tensorboard) {
  if (s[5]->type != FSV_NONE) {
    fsV_seterr("TensorBoardLogger(sub_dir=...) is not supported yet");
    return NULL;
  }
  if (!fsV_truthy(s[3])) {
    fsV_seterr("TensorBoardLogger(default_hp_metric=False) is not supported yet");
    return NULL;
  }
  return make_logger(E, s, FSLG_TENSORBOARD, s[4], 0); /* SummaryWriter's kwargs change nothing here */
}

/* ---- writing ------------------------------------------------------------------------- */

static void off_warning(loggerv *l, char *err) {
  fsD_add(l->diags, FS_SEV_WARNING, "log", NULL, (fs_loc){0, 0}, "%s; logging is off", err ? err : "out of memory");
  free(err);
}

/* Metrics names[i] = values[i] (numbers or one-element tensors) as the
 * logger's records: m and texts (texts[i] malloc'd, n of them) filled; -1 +
 * fsV_error on a value that is not a scalar. */
static int metric_rows(fs_value *const *names, fs_value *const *values, size_t n, fsLG_metric *m, char **texts) {
  for (size_t k = 0; k < n; k++) {
    fs_tensor *t = fsE_as_tensor(values[k]);
    fs_value *item = t ? fsE_item_value(t) : fsV_retain(values[k]);
    if (!item) return -1;
    if (names[k]->type != FSV_STR || !fsV_is_number(item)) {
      fsV_seterr("log: %s must be a number or a one-element tensor, not %s",
                 names[k]->type == FSV_STR ? names[k]->u.str.s : "a metric", fsV_type_name(item));
      fsV_release(item);
      return -1;
    }
    texts[k] = fsV_tostr(item);
    m[k] = (fsLG_metric){names[k]->u.str.s, texts[k] ? texts[k] : "", fsV_to_double(item)};
    fsV_release(item);
  }
  return 0;
}

int fsE_log_metrics(fsE_ctx *E, fsLG *const *lgs, const fs_value *loggers, fs_value *const *names,
                    fs_value *const *values, size_t n, const fs_value *step) {
  fsLG_metric *m = calloc(n + 1, sizeof *m);
  char **texts = calloc(n + 1, sizeof *texts);
  int rc = -1;
  if (!m || !texts) fsV_seterr("out of memory");
  else if (metric_rows(names, values, n, m, texts) == 0) {
    int64_t at = step->type == FSV_NONE ? FSLG_STEP_NONE : fsE_ival(step);
    char *err = NULL;
    if (lgs && *lgs && fsLG_log(*lgs, m, n, at, &err) < 0)
      fsD_add(E->diags, FS_SEV_WARNING, "log", NULL, (fs_loc){0, 0}, "%s; logging is off", err ? err : "out of memory"),
          free(err);
    for (size_t i = 0; loggers && i < loggers->u.seq.n; i++) {
      loggerv *l = fsV_objdata(loggers->u.seq.items[i], &fsE_logger_class);
      err = NULL;
      if (l && fsLG_log(l->lg, m, n, at, &err) < 0) off_warning(l, err);
    }
    rc = 0;
  }
  for (size_t i = 0; texts && i < n; i++) free(texts[i]);
  free(texts);
  free(m);
  return rc;
}

/* slots: metrics, step */
NATIVE(logger_log_metrics) {
  (void)a;
  if (fsE_current_rank(E) != 0) return fsV_none();
  fs_value *one = fsV_list(1);
  if (!one || fsV_list_append(one, fsV_retain(self)) < 0) {
    fsV_release(one);
    return NULL;
  }
  int rc = fsE_log_metrics(E, NULL, one, s[0]->u.dict.keys, s[0]->u.dict.vals, s[0]->u.dict.n, s[1]);
  fsV_release(one);
  return rc < 0 ? NULL : fsV_none();
}

/* params flattened as Lightning's _flatten_dict ("a/b" for nested dicts)
 * into h; what is not a number, str, bool or None becomes its str(), as
 * _sanitize_params does.  Names and texts in owned. */
static int flatten(const fs_value *d, const char *prefix, fsLG_hparam **h, size_t *n, size_t *cap,
                   fs_value *owned, int depth) {
  if (depth > FS_MAX_DEPTH) {
    fsV_seterr("log_hyperparams(): the parameters are nested more than %d deep", FS_MAX_DEPTH);
    return -1;
  }
  for (size_t i = 0; i < d->u.dict.n; i++) {
    const fs_value *k = d->u.dict.keys[i], *v = d->u.dict.vals[i];
    char *ks = fsV_tostr(k);
    fsV_buf b = {0};
    fsV_buf_printf(&b, "%s%s%s", prefix, prefix[0] ? "/" : "", ks ? ks : "");
    free(ks);
    char *name = fsV_buf_take(&b);
    fs_value *nv = name ? fsV_str_own(name, strlen(name)) : NULL;
    if (!nv || fsV_list_append(owned, nv) < 0) return -1;
    if (v->type == FSV_DICT) {
      if (flatten(v, nv->u.str.s, h, n, cap, owned, depth + 1) < 0) return -1;
      continue;
    }
    if (*n == *cap) {
      size_t c = *cap ? *cap * 2 : 16;
      fsLG_hparam *g = realloc(*h, c * sizeof *g);
      if (!g) {
        fsV_seterr("out of memory");
        return -1;
      }
      *h = g;
      *cap = c;
    }
    fsLG_hparam p = {.name = nv->u.str.s};
    fs_tensor *t = fsE_as_tensor(v);
    fs_value *item = t && t->numel == 1 ? fsE_item_value(t) : fsV_retain((fs_value *)v);
    if (!item) return -1;
    p.kind = item->type == FSV_NONE ? FSLG_NONE : item->type == FSV_BOOL ? FSLG_BOOL
             : fsV_is_number(item) ? FSLG_NUMBER : FSLG_STRING;
    p.value = fsV_is_number(item) ? fsV_to_double(item) : NAN;
    char *text = item->type == FSV_STR ? strdup(item->u.str.s) : fsV_tostr(item);
    fsV_release(item);
    fs_value *tv = text ? fsV_str_own(text, strlen(text)) : NULL;
    if (!tv || fsV_list_append(owned, tv) < 0) return -1;
    p.text = tv->u.str.s;
    (*h)[(*n)++] = p;
  }
  return 0;
}

/* slots: params, metrics, step */
NATIVE(logger_log_hyperparams) {
  (void)a;
  loggerv *l = LV(self);
  if (s[1]->type != FSV_NONE) {
    fsV_seterr("%s.log_hyperparams(metrics=...) is not supported yet", format_name(l->format));
    return NULL;
  }
  if (fsE_current_rank(E) != 0) return fsV_none();
  fsLG_hparam *h = NULL;
  size_t n = 0, cap = 0;
  fs_value *owned = fsV_list(0);
  fs_value *r = NULL;
  if (owned && flatten(s[0], "", &h, &n, &cap, owned, 0) == 0) {
    char *err = NULL;
    if (fsLG_hparams(l->lg, h, n, s[2]->type == FSV_NONE ? FSLG_STEP_NONE : fsE_ival(s[2]), &err) < 0)
      off_warning(l, err);
    r = fsV_none();
  }
  free(h);
  fsV_release(owned);
  return r;
}

/* save() and finalize(status): metrics.csv as it is now (event records
 * are written as they come); the plot is drawn at the run's end. */
NATIVE(logger_save) {
  (void)s, (void)a;
  loggerv *l = LV(self);
  char *err = NULL;
  if (fsE_current_rank(E) == 0 && fsLG_flush(l->lg, &err) < 0) off_warning(l, err);
  return fsV_none();
}

/* ---- attributes ---------------------------------------------------------------------- */

NATIVE(logger_name) {
  (void)E, (void)s, (void)a;
  return fsV_cstr(LV(self)->name);
}

NATIVE(logger_root_dir) {
  (void)E, (void)s, (void)a;
  return fsV_cstr(LV(self)->root);
}

/* The version as Lightning's property gives it: the int or str passed, or
 * the next free N (an int) once looked up. */
NATIVE(logger_version) {
  (void)E, (void)s, (void)a;
  loggerv *l = LV(self);
  if (l->version->type != FSV_NONE) return fsV_retain(l->version);
  const char *v = fsLG_version(l->lg);
  if (!v) {
    fsV_seterr("out of memory");
    return NULL;
  }
  return fsV_int(strtoll(v + strlen("version_"), NULL, 10));
}

NATIVE(logger_log_dir) {
  (void)E, (void)s, (void)a;
  loggerv *l = LV(self);
  const char *v = fsLG_version(l->lg);
  fsV_buf b = {0};
  if (v) fsV_buf_printf(&b, "%s%s%s/%s", l->root, l->name[0] ? "/" : "", l->name, v);
  char *dir = v ? fsV_buf_take(&b) : NULL;
  if (!dir) {
    fsV_seterr("out of memory");
    return NULL;
  }
  return fsV_str_own(dir, strlen(dir));
}

static const fsE_reg loggers_funcs[] = {
  {"CSVLogger", loggers_csv}, {"TensorBoardLogger", loggers_tensorboard},
  {"Logger.log_metrics", logger_log_metrics}, {"Logger.log_hyperparams", logger_log_hyperparams},
  {"Logger.save", logger_save}, {"Logger.finalize", logger_save},
  {"Logger.name", logger_name}, {"Logger.version", logger_version}, {"Logger.root_dir", logger_root_dir},
  {"Logger.log_dir", logger_log_dir},
  {NULL, NULL},
};
const fsE_lib fsE_lib_loggers = {"loggers", loggers_funcs};
