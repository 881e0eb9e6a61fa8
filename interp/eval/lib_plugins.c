/* lib_plugins.c -- the precision plugin classes (MixedPrecision, ...,
 * TransformerEnginePrecision) and XLAFSDPStrategy at run time: each
 * constructor makes Fabric's checks (interp/fabric/plugins.c) and raises
 * their text; the object it makes records only which plugin it is.
 * Invariant: the runtime computes with a precision named by
 * Fabric(precision=...), so Fabric(plugins=<a precision plugin>) is refused
 * as `unsupported` (fsE_check_plugins), after Fabric's own checks, as the
 * checker does (interp/check/api_plugins.c). */
#include <string.h>

#include "eval_int.h"

static void plugin_free(void *p) { free(p); }

static char *plugin_repr(fs_value *v) {
  const fsF_plugin *k = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<%s>", fsF_plugin_name(*k));
  return fsV_buf_take(&b);
}

static const fsV_class plugin_class = {.name = "Precision", .repr = plugin_repr, .free = plugin_free};

static fsF_machine machine_of(fsE_ctx *E) {
  fsF_machine m;
  if (E->opt->machine) m = *E->opt->machine;
  else fsF_machine_detect(&m);
  return m;
}

/* str()/repr() of v kept in *owned (freed by the caller). */
static const char *text_of(const fs_value *v, int repr, char **owned) {
  *owned = repr ? fsV_repr(v) : fsV_tostr(v);
  return *owned ? *owned : "?";
}

/* slots: the plugin's parameters in signatures.c order */
static fs_value *make_plugin(fsE_ctx *E, const fsV_args *a, fsF_plugin kind, fs_value *precision,
                             fs_value *scaler, fs_value *mode, fs_value *dtype) {
  char *o[3] = {0};
  fsF_plugin_args p = {.kind = kind};
  if (precision) {
    p.precision = text_of(precision, 1, &o[0]);
    p.precision_str = precision->type == FSV_STR ? precision->u.str.s : NULL;
  }
  if (scaler && scaler->type != FSV_NONE) p.scaler = text_of(scaler, 0, &o[1]);
  if (mode) p.mode = mode->u.str.s;
  if (dtype && dtype->type != FSV_NONE) p.dtype = text_of(dtype, 0, &o[2]);
  fsF_machine m = machine_of(E);
  fsF_issues iss;
  fsF_issues_init(&iss);
  int rc = fsE_fabric_issues(E, a, &iss, fsF_check_plugin_new(&p, &m, &iss));
  for (int i = 0; i < 3; i++) free(o[i]);
  if (rc < 0) return NULL;
  fsF_plugin *k = malloc(sizeof *k);
  if (!k) {
    fsV_seterr("out of memory");
    return NULL;
  }
  *k = kind;
  return fsV_obj(&plugin_class, k);
}

NATIVE(pl_mixed) { (void)self; return make_plugin(E, a, FSF_PL_MIXED, s[0], s[2], NULL, NULL); }
NATIVE(pl_half) { (void)self; (void)s; return make_plugin(E, a, FSF_PL_HALF, NULL, NULL, NULL, NULL); }
NATIVE(pl_double) { (void)self; (void)s; return make_plugin(E, a, FSF_PL_DOUBLE, NULL, NULL, NULL, NULL); }
NATIVE(pl_fsdp) { (void)self; return make_plugin(E, a, FSF_PL_FSDP, s[0], s[1], NULL, NULL); }
NATIVE(pl_deepspeed) { (void)self; return make_plugin(E, a, FSF_PL_DEEPSPEED, s[0], NULL, NULL, NULL); }
NATIVE(pl_xla) { (void)self; return make_plugin(E, a, FSF_PL_XLA, s[0], NULL, NULL, NULL); }
NATIVE(pl_bnb) { (void)self; return make_plugin(E, a, FSF_PL_BNB, NULL, NULL, s[0], s[1]); }
NATIVE(pl_te) { (void)self; (void)s; return make_plugin(E, a, FSF_PL_TE, NULL, NULL, NULL, NULL); }

/* slots: XLAFSDPStrategy's parameters in signatures.c order (precision: 3) */
NATIVE(xla_fsdp_strategy) {
  (void)self;
  fsF_machine m = machine_of(E);
  const fsF_plugin *k = fsV_objdata(s[3], &plugin_class);
  char *prec = k ? (*k == FSF_PL_XLA ? NULL : fsF_plugin_str(*k)) : s[3]->type == FSV_NONE ? NULL : fsV_tostr(s[3]);
  if (!prec && ((k && *k != FSF_PL_XLA) || (!k && s[3]->type != FSV_NONE))) {
    fsV_seterr("out of memory");
    return NULL;
  }
  fsF_issues iss;
  fsF_issues_init(&iss);
  int rc = fsE_fabric_issues(E, a, &iss, fsF_check_xla_fsdp_new(&m, prec, &iss));
  free(prec);
  return rc < 0 ? NULL : fsE_strategy_value(FSF_XLA_FSDP);
}

int fsE_plugin_kind(const fs_value *plugins) {
  int seq = plugins->type == FSV_LIST || plugins->type == FSV_TUPLE;
  size_t n = seq ? plugins->u.seq.n : 1;
  for (size_t i = 0; i < n; i++) {
    const fsF_plugin *k = fsV_objdata(seq ? plugins->u.seq.items[i] : plugins, &plugin_class);
    if (k) return *k;
  }
  return FSF_PL_NONE;
}

int fsE_check_plugins(fsE_ctx *E, const fsV_args *a, const fs_value *plugins) {
  int k = fsE_plugin_kind(plugins);
  if (k == FSF_PL_NONE) return 0;
  fsF_issues iss;
  fsF_issues_init(&iss);
  return fsE_fabric_issues(E, a, &iss, fsF_check_plugin_runs((fsF_plugin)k, &iss));
}

static const fsE_reg plugin_funcs[] = {
  {"MixedPrecision", pl_mixed}, {"HalfPrecision", pl_half}, {"DoublePrecision", pl_double},
  {"FSDPPrecision", pl_fsdp}, {"DeepSpeedPrecision", pl_deepspeed}, {"XLAPrecision", pl_xla},
  {"BitsandbytesPrecision", pl_bnb}, {"TransformerEnginePrecision", pl_te},
  {"XLAFSDPStrategy", xla_fsdp_strategy},
  {NULL, NULL},
};
const fsE_lib fsE_lib_plugins = {"plugins", plugin_funcs};
