/* lib_math.c -- Python's `math`, `time` and `functools` modules (the parts a
 * training script uses: a hand-written warmup + cosine schedule, timing a
 * loop, functools.partial for FSDP's transformer_auto_wrap_policy).
 *
 * The rule: a module is a first-class value.  Its sig row (kind
 * FSSIG_MODULE, lang/signatures.c) is bound to what its row here returns,
 * one object of its class, whose name ("math") is the type its members'
 * rows ("math.cos", "math.pi") are keyed by; so `math.cos(x)` is an
 * ordinary method call, `f = math.cos` a bound method, and `import math`
 * (the Python grammar) will bind the same value.  Results and errors are
 * CPython's: libm's functions, "math domain error" / "math range error",
 * ceil and floor give ints. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "eval_int.h"

/* ---- the module values -------------------------------------------------------- */

static char *math_repr(fs_value *v) {
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<module '%s' (built-in)>", v->u.obj.cls->name);
  return fsV_buf_take(&b);
}

static const fsV_class math_class = {.name = "math", .repr = math_repr};
static const fsV_class time_class = {.name = "time", .repr = math_repr};
static const fsV_class functools_class = {.name = "functools", .repr = math_repr};

NATIVE(math_module) { return fsV_obj(&math_class, NULL); }
NATIVE(time_module) { return fsV_obj(&time_class, NULL); }
NATIVE(functools_module) { return fsV_obj(&functools_class, NULL); }

/* ---- math ------------------------------------------------------------------------ */

/* r = f(x...) with CPython's errors: NaN from numbers that were not NaN is a
 * domain error, an infinity from finite numbers a range error. */
static fs_value *checked(double r, double x, double y) {
  if (isnan(r) && !isnan(x) && !isnan(y)) {
    fsV_seterr("math domain error");
    return NULL;
  }
  if (isinf(r) && isfinite(x) && isfinite(y)) {
    fsV_seterr("math range error");
    return NULL;
  }
  return fsV_float(r);
}

#define X (fsV_to_double(s[0]))
NATIVE(math_cos) { return checked(cos(X), X, 0); }
NATIVE(math_sin) { return checked(sin(X), X, 0); }
NATIVE(math_tan) { return checked(tan(X), X, 0); }
NATIVE(math_exp) { return checked(exp(X), X, 0); }
NATIVE(math_sqrt) { return checked(sqrt(X), X, 0); }
NATIVE(math_pow) { return checked(pow(X, fsV_to_double(s[1])), X, fsV_to_double(s[1])); }

static bool log_domain(double x) {
  if (x > 0 || isnan(x)) return true;
  fsV_seterr("math domain error");
  return false;
}

/* log(x[, base]) = log(x) / log(base), as CPython divides */
NATIVE(math_log) {
  if (!log_domain(X)) return NULL;
  if (s[1]->type == FSV_NONE) return fsV_float(log(X));
  double b = fsV_to_double(s[1]);
  if (!log_domain(b)) return NULL;
  if (log(b) == 0) {
    fsV_seterr("float division by zero");
    return NULL;
  }
  return fsV_float(log(X) / log(b));
}

NATIVE(math_log2) { return log_domain(X) ? fsV_float(log2(X)) : NULL; }

/* ceil/floor: an int (an int argument is returned as it is) */
static fs_value *to_int(const fs_value *v, double r) {
  if (v->type == FSV_INT) return fsV_int(v->u.i);
  if (isnan(r)) return fsV_seterr("cannot convert float NaN to integer"), NULL;
  if (isinf(r)) return fsV_seterr("cannot convert float infinity to integer"), NULL;
  if (r >= 9223372036854775808.0 || r < -9223372036854775808.0)
    return fsV_seterr("integer result %g does not fit in 64 bits", r), NULL;
  return fsV_int((int64_t)r);
}

NATIVE(math_ceil) { return to_int(s[0], ceil(X)); }
NATIVE(math_floor) { return to_int(s[0], floor(X)); }
NATIVE(math_isfinite) { return fsV_bool(isfinite(X)); }
NATIVE(math_isinf) { return fsV_bool(isinf(X)); }
NATIVE(math_isnan) { return fsV_bool(isnan(X)); }
#undef X

NATIVE(math_pi) { return fsV_float(3.141592653589793); }
NATIVE(math_e) { return fsV_float(2.718281828459045); }
NATIVE(math_tau) { return fsV_float(6.283185307179586); }
NATIVE(math_inf) { return fsV_float(INFINITY); }
NATIVE(math_nan) { return fsV_float(NAN); }

/* ---- time -------------------------------------------------------------------------- */

static fs_value *clock_value(clockid_t id) {
  struct timespec ts;
  if (clock_gettime(id, &ts) < 0) {
    fsV_seterr("clock_gettime failed");
    return NULL;
  }
  return fsV_float((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
}

NATIVE(time_time) { return clock_value(CLOCK_REALTIME); }
NATIVE(time_perf_counter) { return clock_value(CLOCK_MONOTONIC); }
NATIVE(time_monotonic) { return clock_value(CLOCK_MONOTONIC); }

NATIVE(time_sleep) {
  double secs = fsV_to_double(s[0]);
  if (isnan(secs)) return fsV_seterr("Invalid value NaN (not a number)"), NULL;
  if (secs < 0) return fsV_seterr("sleep length must be non-negative"), NULL;
  if (secs > 1e9) return fsV_seterr("sleep length is too large"), NULL;
  struct timespec left = {(time_t)secs, (long)((secs - floor(secs)) * 1e9)};
  while (nanosleep(&left, &left) < 0 && errno == EINTR) {
  }
  return fsV_none();
}

/* ---- functools ------------------------------------------------------------------- */

/* partial(func, *args, **keywords): calling it calls func with args, then
 * the call's positionals; keywords, the call's replacing those of a name. */
typedef struct partial { fs_value *func, *args, *keywords; } partial;

static void partial_free(void *p) {
  partial *f = p;
  fsV_release(f->func);
  fsV_release(f->args);
  fsV_release(f->keywords);
  free(f);
}

static fs_value *partial_call(fsE_ctx *E, fs_value *self, const fsV_args *a) {
  const partial *f = self->u.obj.data;
  size_t np = f->args->u.seq.n + a->npos, nk = f->keywords->u.dict.n + a->nkw;
  fs_value **pos = malloc((np + 1) * sizeof *pos), **kw = malloc((nk + 1) * sizeof *kw);
  const char **names = malloc((nk + 1) * sizeof *names);
  if (!pos || !kw || !names) {
    free(pos), free(kw), free(names);
    return fsV_seterr("out of memory"), NULL;
  }
  for (size_t i = 0; i < f->args->u.seq.n; i++) pos[i] = f->args->u.seq.items[i];
  for (size_t i = 0; i < a->npos; i++) pos[f->args->u.seq.n + i] = a->pos[i];
  size_t k = 0;
  for (size_t i = 0; i < f->keywords->u.dict.n; i++) {
    const char *name = f->keywords->u.dict.keys[i]->u.str.s;
    bool given = false;
    for (size_t j = 0; j < a->nkw && !given; j++) given = strcmp(a->kwnames[j], name) == 0;
    if (given) continue;
    names[k] = name;
    kw[k++] = f->keywords->u.dict.vals[i];
  }
  for (size_t j = 0; j < a->nkw; j++) names[k] = a->kwnames[j], kw[k++] = a->kw[j];
  fsV_args call = {.pos = pos, .npos = np, .kwnames = names, .kw = kw, .nkw = k, .loc = a->loc};
  fs_value *r = fsE_call(E, f->func, &call);
  free(pos), free(kw), free(names);
  return r;
}

static char *partial_repr(fs_value *v) {
  const partial *f = v->u.obj.data;
  char *fn = fsV_repr(f->func);
  fsV_buf b = {0};
  fsV_buf_printf(&b, "functools.partial(%s", fn ? fn : "...");
  free(fn);
  for (size_t i = 0; i < f->args->u.seq.n; i++) {
    char *r = fsV_repr(f->args->u.seq.items[i]);
    fsV_buf_printf(&b, ", %s", r ? r : "...");
    free(r);
  }
  for (size_t i = 0; i < f->keywords->u.dict.n; i++) {
    char *r = fsV_repr(f->keywords->u.dict.vals[i]);
    fsV_buf_printf(&b, ", %s=%s", f->keywords->u.dict.keys[i]->u.str.s, r ? r : "...");
    free(r);
  }
  fsV_buf_printf(&b, ")");
  return fsV_buf_take(&b);
}

static const fsV_class partial_class = {
  .name = "functools.partial", .call = partial_call, .repr = partial_repr, .free = partial_free,
};

NATIVE(functools_partial) {
  (void)E, (void)self, (void)a;
  if (s[0]->type != FSV_OBJ || !s[0]->u.obj.cls->call)
    return fsV_seterr("the first argument must be callable"), NULL;
  partial *f = malloc(sizeof *f);
  if (!f) return fsV_seterr("out of memory"), NULL;
  *f = (partial){fsV_retain(s[0]), fsV_retain(s[1]), fsV_retain(s[2])};
  return fsV_obj(&partial_class, f);
}

static const fsE_reg math_funcs[] = {
  {"math", math_module}, {"time", time_module}, {"functools", functools_module},
  {"functools.partial", functools_partial},
  {"math.cos", math_cos}, {"math.sin", math_sin}, {"math.tan", math_tan}, {"math.exp", math_exp},
  {"math.log", math_log}, {"math.log2", math_log2}, {"math.sqrt", math_sqrt}, {"math.pow", math_pow},
  {"math.ceil", math_ceil}, {"math.floor", math_floor}, {"math.isfinite", math_isfinite},
  {"math.isinf", math_isinf}, {"math.isnan", math_isnan},
  {"math.pi", math_pi}, {"math.e", math_e}, {"math.tau", math_tau}, {"math.inf", math_inf}, {"math.nan", math_nan},
  {"time.time", time_time}, {"time.perf_counter", time_perf_counter}, {"time.monotonic", time_monotonic},
  {"time.sleep", time_sleep},
  {NULL, NULL},
};
const fsE_lib fsE_lib_math = {"math", math_funcs};
