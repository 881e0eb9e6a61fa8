/* api_core.c -- the checker's models of the language's own builtins and of
 * device/no_grad, losses and tensors, and the two tables that route every
 * builtin call and method call to the file that models it (api_fabric.c,
 * api_nn.c).  A builtin without a row has no effect on the abstract state:
 * the caller gives it its sig row's return type. */
#include "check_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cv fsC_new_ctx(C *c, int kind, int effect, uint32_t fabric, fs_loc loc) {
  uint32_t id = fsC_new_obj(c, OB_CTX, loc);
  cobj *o = fsC_o(c, id);
  o->ctx = (uint8_t)kind;
  o->effect = (uint8_t)effect;
  o->fabric = fabric;
  return fsC_obj(id);
}

static cv param_value(C *c, const cargs *a) {
  const fs_value *name = fsC_cval(fsC_arg(a, "name", NULL));
  const cv *def = fsC_arg(a, "default", NULL);
  if (!name || name->type != FSV_STR || !def) return def ? *def : fsC_unknown();
  size_t len = name->u.str.len;
  for (size_t i = 0; i < c->o->ndefines; i++) {
    const char *d = c->o->defines[i];
    if (strncmp(d, name->u.str.s, len) || d[len] != '=') continue;
    c->define_used[i] = 1;
    const fs_value *dv = fsC_cval(def);
    if (!dv) return fsC_unknown();
    fs_value *out = NULL;
    char *err = NULL;
    if (fsV_parse_param(d + len + 1, dv, &out, &err)) {
      fsC_report(c, FS_SEV_ERROR, "param", a->call->loc, "%s", err ? err : "bad -D value");
      free(err);
      return *def;
    }
    return fsC_const(c, out);
  }
  return *def;
}

/* ---- builtins: a row per builtin whose call changes or creates state ---- */

static int api_fabric(C *c, const cargs *a, cv *out) { *out = fsC_new_fabric(c, a); return 1; }
static int api_strategy(C *c, const cargs *a, cv *out) { *out = fsC_new_strategy(c, a); return 1; }
/* Whether Fabric's rebuild of a batch sampler of the script's class k,
 * `k(sampler, batch_size=..., drop_last=...)` (utilities/data.py:205), fails
 * with "__init__() got multiple values", which Fabric turns into its R77
 * text (data.py:220): the first parameter after self takes the sampler
 * positionally and is `batch_size`, or `drop_last` with `batch_size` accepted
 * (Python binds the keywords in order; an unknown `batch_size` would be
 * "unexpected keyword", re-raised as it is). Either way the class needs no
 * batch_size/drop_last attributes: without them Fabric raises the same text
 * (data.py:228). A class with bases or decorators is not judged. */
static int rebuild_clashes(const pyclass *k) {
  const fs_node *cls = k ? k->node : NULL, *bases = cls ? fsC_kid(cls, 0) : NULL;
  const fs_node *init = cls && !(bases && bases->nkids > 1) && !fsC_kid(cls, 2) ? fsC_init_of(k) : NULL;
  const fs_node *ps = init ? init->kids[0] : NULL;
  if (!ps || ps->nkids < 2 || fsC_kid(init, 2)) return 0;
  int takes_batch_size = 0;
  for (uint32_t i = 0; i < ps->nkids; i++) {
    const fs_node *p = ps->kids[i];
    if (p->op == FS_PARAM_POSONLY) return 0;
    takes_batch_size |= p->op == FS_PARAM_VARKW || (p->op != FS_PARAM_VARARGS && !strcmp(p->str, "batch_size"));
  }
  const fs_node *first = ps->kids[1];
  return first->op == FS_PARAM_PLAIN &&
         (!strcmp(first->str, "batch_size") || (!strcmp(first->str, "drop_last") && takes_batch_size));
}

static int api_loader(C *c, const cargs *a, cv *out) {
  uint32_t id = fsC_new_obj(c, OB_LOADER, a->call->loc);
  /* a list, a range or another constant as batch_sampler: no BatchSampler,
   * no batch_size to rebuild one with; or a script's batch sampler whose
   * rebuild clashes (R77; fsF_loader.foreign_batch_sampler) */
  const cv *bs = fsC_arg(a, "batch_sampler", NULL);
  if (bs && !fsC_is_none(bs) &&
      (bs->k == CV_SEQ || fsC_cval(bs) || (fsC_is(bs, OB_INSTANCE, c) && rebuild_clashes(fsC_o(c, bs->id)->pycls))))
    fsC_o(c, id)->effect = 1;
  *out = fsC_obj(id);
  return 1;
}
static int api_param(C *c, const cargs *a, cv *out) { *out = param_value(c, a); return 1; }

/* raisesD: a device's type (fsF_pdev) for a strategy's parallel_devices (R82, R83). */
fsF_pdev fsC_device_type(const fs_value *t) {
  return !t || t->type != FSV_STR ? FSF_PD_NONE
       : !strcmp(t->u.str.s, "cpu") ? FSF_PD_CPU
       : !strcmp(t->u.str.s, "cuda") || !strncmp(t->u.str.s, "cuda:", 5) ? FSF_PD_CUDA : FSF_PD_OTHER;
}

static int api_device(C *c, const cargs *a, cv *out) {
  const fs_value *t = fsC_cval(fsC_arg(a, "type", NULL));
  int meta = t && t->type == FSV_STR && !strcmp(t->u.str.s, "meta");
  /* the device's type as its effect */
  *out = fsC_new_ctx(c, meta ? CTX_META : CTX_DEVICE, meta ? 0 : (int)fsC_device_type(t), 0, a->call->loc);
  return 1;
}

static int api_no_grad(C *c, const cargs *a, cv *out) {
  *out = fsC_new_ctx(c, CTX_OTHER, 0, 0, a->call->loc);
  return 1;
}

static int api_range(C *c, const cargs *a, cv *out) {
  int64_t v[3];
  size_t k = 0;
  for (size_t i = 0; i < a->npos && i < 3; i++) {
    const fs_value *x = fsC_cval(&a->pos[i]);
    if (!x || (x->type != FSV_INT && x->type != FSV_BOOL)) { *out = fsC_unknown(); return 1; }
    v[k++] = x->type == FSV_INT ? x->u.i : x->u.b;
  }
  if (k == 3 && v[2] == 0) {
    fsC_report(c, FS_SEV_ERROR, "value", a->call->loc, "range() arg 3 must not be zero");
    *out = fsC_unknown();
    return 1;
  }
  *out = fsC_const(c, k == 1 ? fsV_range(0, v[0], 1) : fsV_range(v[0], v[1], k == 3 ? v[2] : 1));
  return 1;
}

static int api_len(C *c, const cargs *a, cv *out) {
  if (a->npos != 1) return 0;
  const cv *x = &a->pos[0];
  if (fsC_unsized(x)) *out = fsC_unknown();
  else if (x->k == CV_SEQ || x->k == CV_DICT) *out = fsC_int(c, x->n);
  else if (fsC_cval(x)) {
    fsV_clearerr();
    int64_t l = fsV_len(NULL, (fs_value *)fsC_cval(x));
    if (l < 0) fsC_report(c, FS_SEV_ERROR, "type", a->call->loc, "%s", fsV_error());
    *out = l < 0 ? fsC_unknown() : fsC_int(c, l);
  } else *out = fsC_unknown();
  return 1;
}

/* list(model.parameters()) is the parameters still; list(seq) the sequence */
static int api_sequence(C *c, const cargs *a, cv *out) {
  if (a->npos != 1 || (!fsC_is(&a->pos[0], OB_PARAMS, c) && a->pos[0].k != CV_SEQ)) return 0;
  *out = a->pos[0];
  return 1;
}

/* a loss of a set-up model's output belongs to that model's Fabric */
static int api_loss(C *c, const cargs *a, cv *out) {
  cv t = {.k = CV_TENSOR};
  for (size_t i = 0; i < a->npos; i++) if (a->pos[i].k == CV_TENSOR && a->pos[i].id) t.id = a->pos[i].id;
  for (size_t i = 0; i < a->nkw; i++) if (a->kwv[i].k == CV_TENSOR && a->kwv[i].id) t.id = a->kwv[i].id;
  *out = t;
  return 1;
}

/* raisesD: suggested_max_num_workers(n): R89 for a known n < 1; an int */
static int api_max_workers(C *c, const cargs *a, cv *out) {
  const fs_value *x = fsC_cval(fsC_arg(a, "local_world_size", NULL));
  if (x && x->type == FSV_INT) {
    fsF_issues iss;
    fsF_issues_init(&iss);
    if (fsF_check_max_num_workers(x->u.i, &iss) < 0) fsC_report_issue(c, fsF_error(&iss), a->call->loc);
    fsF_issues_free(&iss);
  }
  *out = fsC_unknown(); /* the machine's CPU count */
  return 1;
}

static const fsC_reg builtin_rows[] = {
  {"Fabric", api_fabric},
  {"FSDPStrategy", api_strategy}, {"DDPStrategy", api_strategy}, {"DeepSpeedStrategy", api_strategy},
  {"ModelParallelStrategy", api_strategy},
  {"SGD", fsC_api_optimizer}, {"Adam", fsC_api_optimizer}, {"AdamW", fsC_api_optimizer},
  {"DataLoader", api_loader}, {"param", api_param}, {"device", api_device}, {"no_grad", api_no_grad},
  {"range", api_range}, {"len", api_len}, {"list", api_sequence}, {"tuple", api_sequence},
  {"cross_entropy", api_loss}, {"mse_loss", api_loss},
  /* issue 13 point 5 (api_plugins.c) */
  {"MixedPrecision", fsC_api_plugin}, {"HalfPrecision", fsC_api_plugin}, {"DoublePrecision", fsC_api_plugin},
  {"FSDPPrecision", fsC_api_plugin}, {"DeepSpeedPrecision", fsC_api_plugin}, {"XLAPrecision", fsC_api_plugin},
  {"BitsandbytesPrecision", fsC_api_plugin}, {"TransformerEnginePrecision", fsC_api_plugin},
  {"TorchCheckpointIO", fsC_api_plugin}, {"XLACheckpointIO", fsC_api_plugin},
  {"LightningEnvironment", fsC_api_plugin}, {"TorchElasticEnvironment", fsC_api_plugin},
  {"XLAFSDPStrategy", fsC_api_xla_fsdp},
  {"suggested_max_num_workers", api_max_workers},
  {NULL, NULL},
};
_Static_assert(sizeof builtin_rows / sizeof *builtin_rows <= 250, "fsC_row.api holds 2 + an index");

/* The builtin_rows index of a call's row, -1 for none: found once per row
 * and check (a scan of the table at each call cost 1.5% of a big check). */
static int builtin_row(C *c, const fsSig *sig) {
  struct fsC_row *known = fsC_row(c, sig);
  if (known && known->api) return known->api - 2;
  int at = 0;
  while (builtin_rows[at].name && strcmp(builtin_rows[at].name, sig->name)) at++;
  at = builtin_rows[at].name ? at : -1;
  if (known) known->api = (uint8_t)(at + 2);
  return at;
}

int fsC_api_builtin(C *c, const cargs *a, cv *out) {
  int row = builtin_row(c, a->sig);
  if (row >= 0) return builtin_rows[row].fn(c, a, out);
  if (a->sig->kind == FSSIG_CLASS && !strcmp(a->sig->returns, "Dataset")) {
    *out = fsC_obj(fsC_new_obj(c, OB_DATASET, a->call->loc));
    return 1;
  }
  return 0;
}

/* ---- methods: one model per receiver type -------------------------------- */

static int tensor_method(C *c, const cargs *a, const cv *recv, const char *m, cv *out) {
  if (!strcmp(m, "detach")) { *out = (cv){.k = CV_TENSOR}; return 1; }
  if (strcmp(m, "backward")) return 0;
  const cv *x = recv->k == CV_PHI ? &((const cv *)recv->p)[0] : recv;
  const fsF_config *cfg = x->k == CV_TENSOR && x->id ? fsC_cfg(c, x->id - 1) : NULL;
  if (cfg) {
    fsF_fabric f;
    fsF_fabric_init(&f, cfg);
    fsF_issues iss;
    fsF_issues_init(&iss);
    fsF_check_tensor_backward(&f, &iss);
    fs_diag *g = fsC_report_issues(c, &iss, a->call->loc, 1);
    fsF_issues_free(&iss);
    const fs_node *fs = fsC_fabric_stmt(c, x->id - 1);
    if (g && fs) { /* R42's fix: `loss.backward()` -> `fabric.backward(loss)` */
      const char *loss = fsC_text(c, a->call->kids[0]->kids[0]->loc);
      size_t n = strlen(loss) + strlen(fs->kids[0]->str) + 16;
      char *text = fsC_alloc(c, n);
      snprintf(text, n, "%s.backward(%s)", fs->kids[0]->str, loss);
      fsD_edit(g, a->call->loc, text);
    }
  }
  *out = fsC_const(c, fsV_none());
  return 1;
}

/* xs.append(v) on a list the checker holds item by item (an unsized one:
 * v is one more thing its elements may be) */
static int list_method(C *c, const cargs *a, const cv *recv, const char *m, cv *out) {
  if (strcmp(m, "append")) return 0;
  if (recv->k != CV_SEQ || a->npos != 1 || a->call->kids[0]->kids[0]->kind != FS_N_NAME) return 0;
  cv *items = fsC_alloc(c, (recv->n + 1) * sizeof *items);
  memcpy(items, recv->p, recv->n * sizeof *items);
  items[recv->n] = a->pos[0];
  cv grown = fsC_unsized(recv) ? fsC_unsized_seq(c, items, recv->n + 1, 0)
                               : (cv){.k = CV_SEQ, .n = recv->n + 1, .p = items};
  fsC_rebind(c, a->call->kids[0]->kids[0]->str, grown);
  *out = fsC_const(c, fsV_none());
  return 1;
}

/* d.values(), d.keys(), d.items() of a dict the checker holds: lists of
 * them (unsized when the dict is), so parameters in a dict reach an optimizer */
static int dict_method(C *c, const cargs *a, const cv *recv, const char *m, cv *out) {
  int values = !strcmp(m, "values"), keys = !strcmp(m, "keys"), items = !strcmp(m, "items");
  if (recv->k != CV_DICT || !(values || keys || items)) return 0;
  const cv *kv = recv->p;
  cv *r = fsC_alloc(c, (recv->n + 1) * sizeof *r);
  for (uint32_t i = 0; i < recv->n; i++) {
    if (!items) { r[i] = kv[values ? recv->n + i : i]; continue; }
    cv *pair = fsC_alloc(c, 2 * sizeof *pair);
    pair[0] = kv[i];
    pair[1] = kv[recv->n + i];
    r[i] = (cv){.k = CV_SEQ, .sub = SEQ_TUPLE, .n = 2, .p = pair};
  }
  *out = fsC_unsized(recv) ? fsC_unsized_seq(c, r, recv->n, 0) : (cv){.k = CV_SEQ, .n = recv->n, .p = r};
  (void)a;
  return 1;
}

static int fabric_method(C *c, const cargs *a, const cv *recv, const char *m, cv *out) {
  return recv->k == CV_OBJ && fsC_fabric_method(c, a, recv->id, m, out);
}

static const struct {
  const char *type;
  int (*fn)(C *c, const cargs *a, const cv *recv, const char *m, cv *out);
} method_rows[] = {
  {"Fabric", fabric_method}, {"Module", fsC_module_method}, {"Tensor", tensor_method}, {"list", list_method},
  {"dict", dict_method},
};

int fsC_api_method(C *c, const cargs *a, const cv *recv, cv *out) {
  const char *t = fsC_type_name(c, recv);
  for (size_t i = 0; t && i < sizeof method_rows / sizeof method_rows[0]; i++)
    if (!strcmp(method_rows[i].type, t)) return method_rows[i].fn(c, a, recv, a->call->kids[0]->str, out);
  return 0;
}
