/* api_plugins.c -- what the precision plugin classes (MixedPrecision,
 * HalfPrecision, ..., BitsandbytesPrecision, TransformerEnginePrecision)
 * and XLAFSDPStrategy do to the abstract state: their constructors'
 * checks, asked of interp/fabric/plugins.c with the arguments the script
 * makes known (an argument not known: no report). The runtime's half is
 * interp/eval/lib_plugins.c. */
#include "check_int.h"

#include <stdlib.h>
#include <string.h>

/* The machine a constructor checks against: with the pre-flight (a check
 * for the machine the script declares), naming XLA's, bitsandbytes' or
 * Transformer Engine's classes declares them, as a strategy name does. */
static fsF_machine declared(C *c) {
  fsF_machine m = c->o->machine;
  if (c->o->preflight) m.xla = m.bitsandbytes = m.transformer_engine = 1;
  return m;
}

/* str() of a known argument (arena), NULL when not known. */
static const char *str_of(C *c, const cv *v) {
  const fs_value *x = fsC_cval(v);
  if (!x) return NULL;
  char *s = fsV_tostr(x);
  const char *r = s ? strcpy(fsC_alloc(c, strlen(s) + 1), s) : NULL;
  free(s);
  return r;
}

static const char *repr_of(C *c, const cv *v) {
  const fs_value *x = fsC_cval(v);
  if (!x) return NULL;
  char *s = fsV_repr(x);
  const char *r = s ? strcpy(fsC_alloc(c, strlen(s) + 1), s) : NULL;
  free(s);
  return r;
}

/* torch's name of a dtype argument written as torch.X or X: "torch.float16". */
static const char *dtype_name(C *c, const fs_node *n) {
  static const struct { const char *name, *canon; } dt[] = {
    {"float16", "torch.float16"}, {"half", "torch.float16"}, {"bfloat16", "torch.bfloat16"},
    {"float32", "torch.float32"}, {"float", "torch.float32"}, {"float64", "torch.float64"},
    {"double", "torch.float64"},
  };
  if (!n || (n->kind != FS_N_ATTR && n->kind != FS_N_NAME)) return NULL;
  const char *t = fsC_text(c, n->loc);
  const char *last = strrchr(t, '.');
  last = last ? last + 1 : t;
  for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++)
    if (!strcmp(last, dt[i].name)) return dt[i].canon;
  return NULL;
}

/* repr() of BitsandbytesPrecision(ignore_modules=...) when it is a known,
 * non-empty set of one name or list of names (a larger set prints in
 * Python's hash order, which varies per process); NULL otherwise. */
static const char *ignore_modules_repr(C *c, const cargs *a) {
  const fs_node *n = NULL;
  const cv *v = fsC_arg(a, "ignore_modules", &n);
  if (!v || !n) return NULL;
  int set = n->kind == FS_N_SET;
  if (!(set && n->nkids == 1) && n->kind != FS_N_LIST) return NULL;
  fsV_buf b = {0};
  fsV_buf_puts(&b, set ? "{" : "[");
  for (uint32_t i = 0; i < n->nkids; i++) {
    if (n->kids[i]->kind != FS_N_STR) {
      free(b.s);
      return NULL;
    }
    char *r = fsF_repr_str(n->kids[i]->str);
    fsV_buf_printf(&b, "%s%s", i ? ", " : "", r ? r : "");
    free(r);
  }
  fsV_buf_puts(&b, set ? "}" : "]");
  char *s = fsV_buf_take(&b);
  const char *r = s && n->nkids ? strcpy(fsC_alloc(c, strlen(s) + 1), s) : NULL;
  free(s);
  return r;
}

int fsC_api_plugin(C *c, const cargs *a, cv *out) {
  fsF_plugin_args p = {.kind = fsF_plugin_of(a->sig->name)};
  const cv *v;
  int known = 1;
  if (p.kind == FSF_PL_MIXED || p.kind == FSF_PL_FSDP || p.kind == FSF_PL_DEEPSPEED || p.kind == FSF_PL_XLA) {
    v = fsC_arg(a, "precision", NULL);
    p.precision = repr_of(c, v);
    const fs_value *x = fsC_cval(v);
    if (x && x->type == FSV_STR) p.precision_str = x->u.str.s;
    known &= p.precision != NULL;
  }
  if ((v = fsC_arg(a, "scaler", NULL)) && !fsC_is_none(v)) known &= (p.scaler = str_of(c, v)) != NULL;
  if (p.kind == FSF_PL_BNB) {
    const fs_value *x = fsC_cval(fsC_arg(a, "mode", NULL));
    p.mode = x && x->type == FSV_STR ? x->u.str.s : NULL;
    const fs_node *dn = NULL;
    if ((v = fsC_arg(a, "dtype", &dn)) && !fsC_is_none(v)) known &= (p.dtype = dtype_name(c, dn)) != NULL;
    known &= p.mode != NULL;
  }
  fsF_machine m = declared(c);
  fsF_issues iss;
  fsF_issues_init(&iss);
  /* an argument not known: only what does not depend on it (the package) */
  fsF_plugin_args bare = {.kind = p.kind, .precision_str = "32-true", .precision = "'32-true'", .mode = "nf4"};
  if (p.kind == FSF_PL_MIXED) bare.precision_str = "16-mixed";
  if (fsF_check_plugin_new(known ? &p : &bare, &m, &iss) < 0) fsC_report_issue(c, fsF_error(&iss), a->call->loc);
  fsF_issues_free(&iss);
  const char *ignore = p.kind == FSF_PL_BNB ? ignore_modules_repr(c, a) : NULL;
  uint32_t id = fsC_new_obj(c, OB_PLUGIN, a->call->loc);
  fsC_o(c, id)->plugin = (uint8_t)p.kind;
  fsC_o(c, id)->plugin_text = ignore;
  *out = fsC_obj(id);
  return 1;
}

int fsC_api_xla_fsdp(C *c, const cargs *a, cv *out) {
  fsF_machine m = declared(c);
  fsF_issues iss;
  fsF_issues_init(&iss);
  const cv *precv = fsC_arg(a, "precision", NULL);
  const char *prec = NULL; /* str() of a precision that is not an XLAPrecision; NULL: fine or not known */
  if (precv && fsC_is(precv, OB_PLUGIN, c) && fsC_o(c, precv->id)->plugin != FSF_PL_XLA) {
    char *s = fsF_plugin_str((fsF_plugin)fsC_o(c, precv->id)->plugin);
    prec = s ? strcpy(fsC_alloc(c, strlen(s) + 1), s) : NULL;
    free(s);
  } else if (!fsC_is_none(precv)) {
    prec = str_of(c, precv);
  }
  if (fsF_check_xla_fsdp_new(&m, prec, &iss) < 0) fsC_report_issue(c, fsF_error(&iss), a->call->loc);
  fsF_issues_free(&iss);
  uint32_t id = fsC_new_obj(c, OB_STRATEGY, a->call->loc);
  fsF_strategy_obj *s = fsC_alloc(c, sizeof *s);
  *s = (fsF_strategy_obj){.cls = FSF_XLA_FSDP, .use_orig_params = -1, .state_dict_full = -1,
                          .cpu_offload = -1, .auto_wrap_policy = -1, .stage = -1, .save_distributed = -1};
  fsC_o(c, id)->strat = s;
  fsF_xla_fsdp_opts *x = &s->xla_fsdp;
  const fs_value *sd = fsC_cval(fsC_arg(a, "state_dict_type", NULL));
  if (sd && sd->type == FSV_STR) {
    x->state_dict = fsF_xla_state_dict(sd->u.str.s);
    x->state_dict_text = str_of(c, fsC_arg(a, "state_dict_type", NULL));
  }
  for (size_t j = 0; j < a->nkw; j++) /* one of its **kwargs */
    if (!strcmp(a->kw[j], "auto_wrapper_callable") && !fsC_is_none(&a->kwv[j])) x->wrapper_callable = 1;
  const fs_node *pn = NULL;
  const cv *pv = fsC_arg(a, "activation_checkpointing_policy", &pn);
  if (!fsC_is_none(pv) && pn) {
    /* Fabric's `if not policy`: None and the empty set (and any other
     * empty or false value) are no policy */
    const fs_value *pc = fsC_cval(pv);
    if (pn->kind == FS_N_SET) x->policy = 1;
    else if (pc) {
      x->policy = fsV_truthy(pc) ? 2 : 0;
      x->policy_str = str_of(c, pv);
    }
    else x->policy = (pn->kind == FS_N_LIST || pn->kind == FS_N_DICT) && pn->nkids ? 2 : 0;
  }
  *out = fsC_obj(id);
  return 1;
}

/* The first precision plugin object among Fabric(plugins=...)'s (runs 0),
 * or the first one a run does not honour (runs 1); NULL when none. */
static const cobj *plugin_arg(C *c, const cargs *a, const fs_node **node, int runs) {
  const cv *v = fsC_arg(a, "plugins", node);
  if (!v) return NULL;
  const cv *items = v->k == CV_SEQ && !fsC_unsized(v) ? v->p : v;
  uint32_t n = v->k == CV_SEQ && !fsC_unsized(v) ? v->n : 1;
  for (uint32_t i = 0; i < n; i++)
    if (fsC_is(&items[i], OB_PLUGIN, c) && (runs ? !fsF_plugin_honoured(fsC_o(c, items[i].id)->plugin)
                                              : fsF_plugin_type(fsC_o(c, items[i].id)->plugin) == FSF_PT_PRECISION))
      return fsC_o(c, items[i].id);
  return NULL;
}

void fsC_plugins_args(C *c, const cargs *a, fsF_args *fa) {
  memset(fa->plugin_count, 0, sizeof fa->plugin_count);
  memset(fa->plugin_first, 0, sizeof fa->plugin_first);
  fa->precision_plugin = fa->checkpoint_io = 0;
  const cv *v = fsC_arg(a, "plugins", NULL);
  if (!v) return;
  const cv *items = v->k == CV_SEQ && !fsC_unsized(v) ? v->p : v;
  uint32_t n = v->k == CV_SEQ && !fsC_unsized(v) ? v->n : 1;
  int seen = 0;
  for (uint32_t i = 0; i < n; i++)
    if (fsC_is(&items[i], OB_PLUGIN, c)) {
      fsF_plugin k = (fsF_plugin)fsC_o(c, items[i].id)->plugin;
      fsF_ptype t = fsF_plugin_type(k);
      if (!fa->plugin_count[t]++) fa->plugin_first[t] = ++seen;
      if (t == FSF_PT_PRECISION) fa->precision_plugin = k;
      if (t == FSF_PT_CHECKPOINT_IO) fa->checkpoint_io = k;
    }
}

void fsC_plugins_config(C *c, const cargs *a, fsF_config *cfg) {
  const cobj *p = plugin_arg(c, a, NULL, 0);
  if (!p) return;
  cfg->plugin = p->plugin;
  cfg->bnb_ignore_modules = p->plugin_text;
}

void fsC_plugins_run(C *c, const cargs *a) {
  const fs_node *node = NULL;
  const cobj *p = plugin_arg(c, a, &node, 1);
  if (!p || c->python || !c->o->will_run) return;
  fsF_issues iss;
  fsF_issues_init(&iss);
  if (fsF_check_plugin_runs((fsF_plugin)p->plugin, &iss) < 0)
    fsC_report_issue(c, fsF_error(&iss), node ? node->loc : a->call->loc);
  fsF_issues_free(&iss);
}

/* ---- Transformer Engine's layer replacement (W26) ------------------------ */

const fs_node *fsC_init_of(const pyclass *k) {
  const fs_node *body = k && k->node ? fsC_kid(k->node, 1) : NULL;
  for (uint32_t i = 0; body && i < body->nkids; i++)
    if (body->kids[i]->kind == FS_N_DEF && !strcmp(body->kids[i]->str, "__init__")) return body->kids[i];
  return NULL;
}

/* _convert_layers(module): its children in registration order (the
 * `self.NAME = ...` statements of __init__'s straight-line body), each
 * Linear checked, each other module of a script's class walked in turn. */
static void te_children(C *c, const cv *m, int depth) {
  const cobj *o = fsC_o(c, m->id);
  const fs_node *init = fsC_init_of(o->pycls);
  const fs_node *params = init ? fsC_kid(init, 0) : NULL;
  if (!params || !params->nkids || depth > 4) return;
  const char *self = params->kids[0]->str;
  const fs_node *body = fsC_kid(init, 1);
  const char *seen[32];
  size_t nseen = 0;
  for (uint32_t i = 0; body && i < body->nkids && nseen < 32; i++) {
    const fs_node *s = body->kids[i];
    if (s->kind != FS_N_ASSIGN || s->nkids != 2) continue;
    const fs_node *t = s->kids[0];
    if (t->kind != FS_N_ATTR || t->kids[0]->kind != FS_N_NAME || strcmp(t->kids[0]->str, self)) continue;
    size_t j = 0;
    while (j < nseen && strcmp(seen[j], t->str)) j++;
    if (j < nseen) continue; /* a child keeps its first place */
    seen[nseen++] = t->str;
    cv v = fsC_attr(c, m, t->str);
    if (v.k != CV_OBJ || fsC_o(c, v.id)->kind != OB_MODEL) continue;
    const cobj *child = fsC_o(c, v.id);
    if (child->cls && !strcmp(child->cls, "Linear") && !child->pycls) {
      const fsC_feat *f = v.id < c->capfeats && c->feats[v.id].loc.end ? &c->feats[v.id] : NULL;
      if (!f || f->in < 0 || f->out < 0) continue;
      fsF_issues iss;
      fsF_issues_init(&iss);
      fsF_te_layer(t->str, f->in, f->out, &iss);
      fsC_report_issues(c, &iss, s->loc, 1); /* at the layer: one per child, each named */
      fsF_issues_free(&iss);
    } else if (child->pycls) {
      te_children(c, &v, depth + 1);
    }
  }
}

void fsC_te_layers(C *c, uint32_t fabric, const cv *model) {
  const fsF_config *cfg = fsC_cfg(c, fabric);
  if (!cfg || !fsF_te_converts(cfg) || !model || model->k != CV_OBJ) return;
  const cobj *o = fsC_o(c, model->id);
  if (o->kind != OB_MODEL || o->wrapped || !o->pycls) return;
  te_children(c, model, 0);
}
