/* api_fabric.c -- what Fabric(...), the strategy classes and the Fabric
 * methods do to the abstract state.  Every rule is asked of fabric.c with
 * states built from the objects (paths.c); where a value differs per path,
 * each combination is tried and the diagnostic notes which branch leads
 * there.  Fix-its for the setup order (R36) and launch (R16) are made here. */
#include "check_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* fsF_value of a statically known argument; 0 if not known. */
static int fvalue(C *c, const cv *v, fsF_value *out) {
  memset(out, 0, sizeof *out);
  if (!v) { out->kind = FSF_UNSET; return 1; }
  if (v->k == CV_OBJ && fsC_o(c, v->id)->kind == OB_STRATEGY) {
    out->kind = FSF_STRATEGY;
    out->strategy = *fsC_o(c, v->id)->strat;
    return 1;
  }
  if (fsC_unsized(v)) return 0; /* its items are not known */
  if (v->k == CV_SEQ) {
    int64_t *ints = fsC_alloc(c, (v->n + 1) * sizeof *ints);
    const cv *items = v->p;
    fsV_buf b = {0};
    fsV_buf_puts(&b, v->sub ? "(" : "[");
    const char *tname = NULL;
    for (uint32_t i = 0; i < v->n; i++) {
      const fs_value *x = fsC_cval(&items[i]);
      if (!x) { free(b.s); return 0; }
      if (x->type == FSV_INT) ints[i] = x->u.i;
      else if (!tname) tname = fsV_type_name(x);
      if (i) fsV_buf_puts(&b, ", ");
      fsV_buf_repr(&b, x);
    }
    fsV_buf_puts(&b, v->sub && v->n == 1 ? ",)" : v->sub ? ")" : "]");
    char *r = fsV_buf_take(&b);
    out->tuple = v->sub;
    if (!tname) { free(r); out->kind = FSF_INTLIST; out->ints = ints; out->nints = v->n; return 1; }
    out->kind = FSF_LIST;
    out->tname = tname;
    if (r) out->s = strcpy(fsC_alloc(c, strlen(r) + 1), r);
    free(r);
    return 1;
  }
  const fs_value *x = fsC_cval(v);
  if (!x) return 0;
  switch (x->type) {
  case FSV_NONE: out->kind = FSF_NONE; return 1;
  case FSV_BOOL: out->kind = FSF_BOOL; out->i = x->u.b; return 1;
  case FSV_INT: out->kind = FSF_INT; out->i = x->u.i; return 1;
  case FSV_FLOAT: out->kind = FSF_FLOAT; out->f = x->u.f; return 1;
  case FSV_STR: out->kind = FSF_STR; out->s = x->u.str.s; return 1;
  default: {
    char *r = fsV_repr(x);
    out->kind = FSF_OTHER;
    out->tname = fsV_type_name(x);
    out->s = r ? strcpy(fsC_alloc(c, strlen(r) + 1), r) : "<object>";
    free(r);
    return 1;
  }
  }
}

/* The argument a refusal of Fabric(...) is about: the caret goes there (the
 * call when the value came from a default or the command line). */
static const char *refused_param(const char *rule) {
  static const struct { const char *rule, *param; } at[] = {
    {"R1", "strategy"}, {"R2", "accelerator"}, {"R3", "precision"}, {"R4", "num_nodes"},
    {"R5", "devices"}, {"R6", "accelerator"}, {"R7", "accelerator"}, {"R8", "devices"},
    {"R9", "devices"}, {"R10", "strategy"}, {"R11", "precision"}, {"R12", "precision"},
    {"R13", "strategy"}, {"R15", "strategy"}, {"R21", "strategy"}, {"W7", "strategy"},
    {"W8", "precision"}, {"W9", "precision"}, {"env", "precision"}, {"R70", "precision"},
    {"R71", "strategy"}, {"R72", "plugins"}, {"R73", "accelerator"}, {"R74", "strategy"},
    {"R101", "strategy"}, /* strategies/ */
  };
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
    if (!strcmp(at[i].rule, rule)) return at[i].param;
  return NULL;
}

/* Reports Fabric(...)'s refusals at their arguments; a misspelt strategy,
 * accelerator or precision name gets "did you mean" and the literal's fix. */
static void report_fabric_issues(C *c, const cargs *a, const fsF_issues *iss) {
  for (size_t i = 0; i < iss->n; i++) {
    const fsF_issue *s = &iss->items[i];
    const char *param = refused_param(s->rule);
    const fs_node *node = NULL;
    if (param) fsC_arg(a, param, &node);
    fs_diag *g = fsC_report_issue(c, s, node ? node->loc : a->call->loc);
    int misspelt = !strcmp(s->rule, "R1") || !strcmp(s->rule, "R2") || !strcmp(s->rule, "R3");
    const char *near = g && misspelt && node && node->kind == FS_N_STR ? fsF_suggest_name(param, node->str) : NULL;
    if (!near) continue;
    fsD_help(g, "did you mean `%s=\"%s\"`?", param, near);
    char *lit = fsA_xrealloc(NULL, strlen(near) + 3);
    sprintf(lit, "\"%s\"", near);
    fsD_edit(g, node->loc, lit);
    free(lit);
  }
}

/* raisesA: the plugin Fabric's connector looks at first (fsF_args.plugin);
 * FSF_UNSET where there is none or it is not known (no rule fires). */
static void first_plugin(C *c, const cv *v, fsF_value *out) {
  memset(out, 0, sizeof *out);
  if (!v || fsC_is_none(v) || fsC_unsized(v)) return;
  if (v->k == CV_SEQ) {
    if (v->n && !fvalue(c, &((const cv *)v->p)[0], out)) out->kind = FSF_UNSET;
    return;
  }
  const fs_value *x = fsC_cval(v);
  if (x && x->type == FSV_STR) { /* a str is iterable: its first character */
    size_t n = 0;
    if (x->u.str.s[0]) n = 1;
    while (n && ((unsigned char)x->u.str.s[n] & 0xC0) == 0x80) n++;
    if (!n) return;
    char *ch = fsC_alloc(c, n + 1);
    memcpy(ch, x->u.str.s, n);
    ch[n] = 0;
    *out = (fsF_value){.kind = FSF_STR, .s = ch};
    return;
  }
  if (v->k == CV_DICT || (x && x->type != FSV_NONE && x->type != FSV_BOOL && x->type != FSV_INT &&
                          x->type != FSV_FLOAT)) return; /* iterables whose order is not modelled */
  if (!fvalue(c, v, out)) out->kind = FSF_UNSET;
}

cv fsC_new_fabric(C *c, const cargs *a) {
  static const char *const names[] = {"accelerator", "strategy", "devices", "num_nodes", "precision"};
  fsF_args fa;
  fsF_value *slots[] = {&fa.accelerator, &fa.strategy, &fa.devices, &fa.num_nodes, &fa.precision};
  uint32_t id = fsC_new_obj(c, OB_FABRIC, a->call->loc);
  const cv *sv = fsC_arg(a, "strategy", NULL);
  if (sv && fsC_is(sv, OB_STRATEGY, c)) {
    fsC_o(c, id)->parallelize_fn = fsC_o(c, sv->id)->parallelize_fn;
    fsC_o(c, id)->wrap_classes = fsC_o(c, sv->id)->wrap_classes;
    fsC_o(c, id)->link = sv->id + 1;
  }
  const fs_node *cbn = NULL;
  const cv *cbv = fsC_arg(a, "callbacks", &cbn);
  if (cbv && ((cbv->k == CV_SEQ && !cbv->sub && cbn->kind == FS_N_LIST) || fsC_is(cbv, OB_INSTANCE, c)))
    fsC_o(c, id)->callbacks = *cbv; /* a list of the script's would stay the script's to change */
  for (int i = 0; i < 5; i++)
    if (!fvalue(c, fsC_arg(a, names[i], NULL), slots[i])) return fsC_obj(id); /* not known: no rules */
  first_plugin(c, fsC_arg(a, "plugins", NULL), &fa.plugin);
  fsC_plugins_args(c, a, &fa);
  if (c->ncfgs == c->capcfgs) {
    c->capcfgs = c->capcfgs ? 2 * c->capcfgs : 4;
    c->cfgs = fsA_xrealloc(c->cfgs, c->capcfgs * sizeof *c->cfgs);
  }
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsF_machine m = c->o->machine;
  char *declared = NULL;
  if (c->o->preflight && fsF_declared_machine(&fa, &c->o->overrides, &c->o->machine, &m, &declared) &&
      fsC_first(c, "preflight", (fs_loc){0, 0}))
    fsC_report(c, FS_SEV_NOTE, "preflight", a->call->loc, "%s", declared ? declared : "out of memory");
  free(declared);
  int rc = fsF_resolve(&fa, &c->o->overrides, &m, &c->cfgs[c->ncfgs], &iss);
  report_fabric_issues(c, a, &iss);
  fsF_issues_free(&iss);
  if (rc == 0) {
    cobj *o = fsC_o(c, id);
    fsC_plugins_config(c, a, &c->cfgs[c->ncfgs]);
    o->cfg = (int32_t)c->ncfgs++;
    o->launched = (mbit){c->cfgs[o->cfg].under_cli ? MB_T : MB_F, 0};
    if (!c->python && c->o->will_run) { /* a .fab will run: what this runtime cannot run of it */
      fsF_issues_init(&iss);
      const fsF_config *cfg = &c->cfgs[o->cfg];
      if (fsF_check_runnable(cfg, &iss) < 0) {
        /* the caret on the strategy (or accelerator) that asks for it; a
         * precision is resolved from several arguments (16-mixed on cpu is
         * bf16-mixed): the call */
        const fs_node *node = NULL;
        if (cfg->precision == FSF_P32 && !fsC_arg(a, "strategy", &node)) fsC_arg(a, "accelerator", &node);
        fsC_report_issue(c, fsF_error(&iss), node ? node->loc : a->call->loc);
      } else {
        fsC_plugins_run(c, a);
      }
      fsF_issues_free(&iss);
    }
  }
  return fsC_obj(id);
}

/* raisesA: the strategy's `accelerator=` (a **kwargs entry) as
 * fsF_strategy_obj.accelerator encodes it.  Fabric asks whether it is truthy;
 * a value not known counts as not given (no rule fires). */
static int strategy_accelerator(const cargs *a) {
  static const char *const names[] = {"cpu", "cuda", "mps", "tpu", "gpu"};
  for (size_t i = 0; i < a->nkw; i++) {
    if (strcmp(a->kw[i], "accelerator")) continue;
    const cv *v = &a->kwv[i];
    const fs_value *x = fsC_cval(v);
    if (!x) return v->k == CV_OBJ ? FSF_STRATEGY_ACCEL_OTHER : 0;
    if (!fsV_truthy(x)) return 0;
    for (int j = 0; x->type == FSV_STR && j < 5; j++)
      if (!strcmp(x->u.str.s, names[j])) return j + 1;
    return FSF_STRATEGY_ACCEL_OTHER;
  }
  return 0;
}

/* ---- strategies/: the constructors' own checks (R90-R109, W20-W24) ---- */

/* A keyword argument collected by **kwargs (FSDPStrategy(process_group=...)). */
static const cv *kwarg_named(const cargs *a, const char *name) {
  for (size_t j = 0; j < a->nkw; j++)
    if (!strcmp(a->kw[j], name)) return &a->kwv[j];
  return NULL;
}

/* raisesD: the strategy's own `precision=`, `checkpoint_io=` and
 * `cluster_environment=` (R81, R85, R86: given and not None; a value
 * not known counts as not given) and its parallel_devices' first device
 * (R82, R83: torch.device objects of a known type, else no rule). */
static void strategy_plugins_devices(C *c, const cargs *a, fsF_strategy_obj *s) {
  const cv *p = kwarg_named(a, "precision");
  const fs_value *x = p ? fsC_cval(p) : NULL;
  s->precision = p && (p->k == CV_OBJ ? fsC_is(p, OB_PLUGIN, c) : x && fsV_truthy(x));
  const char *const given[2] = {"checkpoint_io", "cluster_environment"};
  int *flag[2] = {&s->checkpoint_io, &s->cluster_environment};
  for (int i = 0; i < 2; i++) {
    const cv *g = kwarg_named(a, given[i]);
    const fs_value *gx = g ? fsC_cval(g) : NULL;
    *flag[i] = g && (g->k == CV_OBJ ? fsC_is(g, OB_PLUGIN, c) : gx && fsV_truthy(gx));
  }
  const cv *d = kwarg_named(a, "parallel_devices");
  if (!d || d->k != CV_SEQ || fsC_unsized(d) || !d->n) return;
  const cv *first = &((const cv *)d->p)[0];
  if (fsC_is(first, OB_CTX, c) && fsC_o(c, first->id)->ctx == CTX_DEVICE)
    s->parallel_devices = (fsF_pdev)fsC_o(c, first->id)->effect;
}

/* str() of a script class, `<class '__main__.Block'>`; NULL for any other
 * value (torch's classes print their module path, which the check does not
 * model: W20 is then not reported). */
static const char *class_str(C *c, const cv *v) {
  if (!v || v->k != CV_CLASS || v->sub != CLS_PY) return NULL;
  const char *name = ((const pyclass *)v->p)->name;
  size_t n = strlen(name) + 20;
  char *t = fsC_alloc(c, n);
  snprintf(t, n, "<class '__main__.%s'>", name);
  return t;
}

/* str(activation_checkpointing) and str(set(classes)) for W20: a class or a
 * list of them; a set prints its classes in the list's order (Python's
 * order of classes in a set is by address). */
static void checkpointing_strs(C *c, const cv *v, const char **str, const char **set) {
  const cv *items = v;
  uint32_t n = 1;
  int list = v->k == CV_SEQ && !v->sub && !fsC_unsized(v);
  if (list) { items = v->p; n = v->n; }
  else if (v->k != CV_CLASS) return;
  fsV_buf b = {0}, t = {0};
  fsV_buf_puts(&b, list ? "[" : "");
  fsV_buf_puts(&t, n ? "{" : "set()");
  for (uint32_t i = 0; i < n; i++) {
    const char *k = class_str(c, &items[i]);
    if (!k) { free(b.s); free(t.s); return; }
    /* a class listed twice is one element of the set */
    int dup = 0;
    for (uint32_t j = 0; j < i; j++) dup |= items[j].p == items[i].p;
    fsV_buf_printf(&b, "%s%s", i ? ", " : "", k);
    if (!dup) fsV_buf_printf(&t, "%s%s", i ? ", " : "", k);
  }
  fsV_buf_puts(&b, list ? "]" : "");
  fsV_buf_puts(&t, n ? "}" : "");
  char *bs = fsV_buf_take(&b), *ts = fsV_buf_take(&t);
  if (bs && ts) {
    *str = strcpy(fsC_alloc(c, strlen(bs) + 1), bs);
    *set = strcpy(fsC_alloc(c, strlen(ts) + 1), ts);
  }
  free(bs);
  free(ts);
}

/* FSDPStrategy(...): R91, W20, R92, R93 at the call; an unknown
 * state_dict_type is kept for R90 at save. An argument whose value is not
 * known counts as given (None is the only value that is not). */
static void fsdp_ctor(C *c, const cargs *a, fsF_strategy_obj *s) {
  const fs_value *x = fsC_cval(fsC_arg(a, "state_dict_type", NULL));
  if (x && x->type == FSV_STR && strcmp(x->u.str.s, "full") && strcmp(x->u.str.s, "sharded"))
    s->state_dict_unknown = x->u.str.s; /* a constant: lives as long as the check */
  fsF_issues iss;
  fsF_issues_init(&iss);
  /* raisesD: the precision setter runs first (R84): a plugin object other
   * than FSDPPrecision, or a known value that is not None */
  const cv *pv = kwarg_named(a, "precision");
  char *found = NULL;
  if (pv && fsC_is(pv, OB_PLUGIN, c)) {
    if (fsC_o(c, pv->id)->plugin != FSF_PL_FSDP) found = fsF_plugin_str((fsF_plugin)fsC_o(c, pv->id)->plugin);
  } else if (pv && fsC_cval(pv) && !fsC_is_none(pv)) {
    found = fsV_tostr(fsC_cval(pv));
  }
  if (found) {
    fsF_issues pi;
    fsF_issues_init(&pi);
    fsF_check_fsdp_precision(found, &pi);
    fsC_report_issues(c, &pi, a->call->loc, 1);
    fsF_issues_free(&pi);
    free(found);
    return;
  }
  fsF_fsdp_ctor f = {0};
  const cv *ac = kwarg_named(a, "activation_checkpointing");
  f.activation_checkpointing = ac && !fsC_is_none(ac);
  if (f.activation_checkpointing) checkpointing_strs(c, ac, &f.ac_str, &f.ac_set_str);
  f.activation_checkpointing_policy = !fsC_is_none(fsC_arg(a, "activation_checkpointing_policy", NULL));
  f.auto_wrap_policy = !fsC_is_none(fsC_arg(a, "auto_wrap_policy", NULL));
  f.process_group = !fsC_is_none(kwarg_named(a, "process_group"));
  f.device_mesh = !fsC_is_none(kwarg_named(a, "device_mesh"));
  x = fsC_cval(fsC_arg(a, "sharding_strategy", NULL));
  f.sharding_strategy = x && x->type == FSV_STR ? x->u.str.s : NULL;
  fsF_check_fsdp_ctor(&f, &iss);
  fsC_report_issues(c, &iss, a->call->loc, 1);
  fsF_issues_free(&iss);
}

/* DeepSpeedStrategy(config="path"): the file is read on the machine the
 * script runs on, when the strategy is created, after the check that
 * DeepSpeed is installed (R13, reported at Fabric(...)); `check` looks for
 * it only under --here, where that machine is this one. */
static void deepspeed_ctor(C *c, const cargs *a) {
  const fs_node *node = NULL;
  const fs_value *x = fsC_cval(fsC_arg(a, "config", &node));
  if (!c->o->files_here || !c->o->machine.deepspeed || !x || x->type != FSV_STR) return;
  struct stat st;
  fsF_issues iss;
  fsF_issues_init(&iss);
  if (fsF_check_deepspeed_config(x->u.str.s, stat(x->u.str.s, &st) == 0 && S_ISREG(st.st_mode), &iss) < 0)
    fsC_report_issue(c, fsF_error(&iss), node ? node->loc : a->call->loc);
  fsF_issues_free(&iss);
}

/* FSDPStrategy(auto_wrap_policy=...)'s classes when it is a set literal
 * (Fabric makes it a ModuleWrapPolicy) or ModuleWrapPolicy(<set literal>):
 * a CV_SEQ of classes for W21; CV_UNDEF for anything else (a callable
 * policy, which fsdp.py does not judge, or a value not followed). */
static cv wrap_classes(C *c, const cargs *a) {
  const fs_node *n = NULL;
  fsC_arg(a, "auto_wrap_policy", &n);
  if (n && n->kind == FS_N_CALL && n->nkids == 2 && n->kids[1]->kind == FS_N_SET &&
      (n->kids[0]->kind == FS_N_NAME || n->kids[0]->kind == FS_N_ATTR) && !strcmp(n->kids[0]->str, "ModuleWrapPolicy"))
    n = n->kids[1];
  if (!n || n->kind != FS_N_SET) return (cv){.k = CV_UNDEF};
  cv *items = fsC_alloc(c, (n->nkids + 1) * sizeof *items);
  for (uint32_t i = 0; i < n->nkids; i++)
    if ((items[i] = fsC_eval(c, n->kids[i])).k != CV_CLASS) return (cv){.k = CV_UNDEF};
  return (cv){.k = CV_SEQ, .n = n->nkids, .p = items};
}

cv fsC_new_strategy(C *c, const cargs *a) {
  uint32_t id = fsC_new_obj(c, OB_STRATEGY, a->call->loc);
  fsF_strategy_obj *s = fsC_alloc(c, sizeof *s);
  fsC_o(c, id)->strat = s;
  *s = (fsF_strategy_obj){.use_orig_params = -1, .state_dict_full = -1, .cpu_offload = -1,
                          .auto_wrap_policy = -1, .stage = -1, .save_distributed = -1};
  const char *n = a->sig->name;
  s->cls = !strcmp(n, "FSDPStrategy") ? FSF_FSDP : !strcmp(n, "DDPStrategy") ? FSF_DDP
         : !strcmp(n, "DeepSpeedStrategy") ? FSF_DEEPSPEED : FSF_MP;
  const fs_value *x;
  if ((x = fsC_cval(fsC_arg(a, "use_orig_params", NULL)))) s->use_orig_params = fsV_truthy(x);
  if ((x = fsC_cval(fsC_arg(a, "state_dict_type", NULL))) && x->type == FSV_STR)
    s->state_dict_full = !strcmp(x->u.str.s, "full");
  const cv *v;
  if ((v = fsC_arg(a, "cpu_offload", NULL))) s->cpu_offload = fsC_cval(v) ? fsV_truthy(fsC_cval(v)) : 1;
  if ((v = fsC_arg(a, "auto_wrap_policy", NULL))) s->auto_wrap_policy = !fsC_is_none(v);
  if ((x = fsC_cval(fsC_arg(a, "stage", NULL))) && x->type == FSV_INT) s->stage = (int)x->u.i;
  if ((x = fsC_cval(fsC_arg(a, "start_method", NULL))) && x->type == FSV_STR)
    s->start_method = !strcmp(x->u.str.s, "popen") ? FSF_START_POPEN
                    : !strcmp(x->u.str.s, "fork") ? FSF_START_FORK : FSF_START_SPAWN;
  if ((x = fsC_cval(fsC_arg(a, "save_distributed_checkpoint", NULL)))) s->save_distributed = fsV_truthy(x);
  s->accelerator = strategy_accelerator(a);
  strategy_plugins_devices(c, a, s);
  if (s->cls == FSF_FSDP) fsdp_ctor(c, a, s);
  if (s->cls == FSF_FSDP) fsC_o(c, id)->wrap_classes = wrap_classes(c, a);
  if (s->cls == FSF_DEEPSPEED) deepspeed_ctor(c, a);
  if (s->cls == FSF_MP) {
    const cv *fn = fsC_arg(a, "parallelize_fn", NULL);
    if (fn && fn->k == CV_FUNC) fsC_o(c, id)->parallelize_fn = fn->p;
    /* the mesh sizes when they are ints: "auto" (or unknown) leaves them to Fabric */
    const fs_value *dp = fsC_cval(fsC_arg(a, "data_parallel_size", NULL));
    const fs_value *tp = fsC_cval(fsC_arg(a, "tensor_parallel_size", NULL));
    if ((s->dp_given = dp && dp->type == FSV_INT)) s->dp_size = (int)dp->u.i;
    if ((s->tp_given = tp && tp->type == FSV_INT)) s->tp_size = (int)tp->u.i;
  }
  return fsC_obj(id);
}


/* ---- Fabric methods ----------------------------------------------------- */

#define MAXARGS 16

/* fabric.to_device(model) and setup: the models v may be, moved to the
 * fabric's device (W4's placement); unknown for an accelerator other than
 * cpu and cuda, or a fabric not resolved. stay: setup's move_to_device is
 * certainly False, so only a model that may be on the meta device is placed
 * (materialized there), as a run does. */
static void move_models(C *c, uint32_t fid, const cv *v, int materialize, int stay) {
  const fsF_config *cfg = fsC_cfg(c, fid);
  uint32_t raws[MAXALT];
  size_t nr = v ? fsC_raw_models(c, v, raws, MAXALT) : 0;
  fsF_pdev where = !cfg ? FSF_PD_OTHER : cfg->accel == FSF_CUDA ? FSF_PD_CUDA : cfg->accel == FSF_CPU ? FSF_PD_CPU : FSF_PD_OTHER;
  for (size_t i = 0; i < nr; i++)
    if (!stay || (fsC_o(c, raws[i])->meta.m & MB_T)) fsC_place(c, raws[i], where, materialize);
}

typedef struct setup_ud {
  uint32_t fabric;
  int kind;                 /* 0 setup, 1 setup_module, 2 setup_optimizers, 3 setup_dataloaders */
  const cv *model;
  const cv *opts[MAXARGS]; size_t nopts;
  const cv *uds;            /* setup_dataloaders: use_distributed_sampler, NULL when not given */
  int move;                 /* setup, setup_module: move_to_device is certainly true (W4) */
  int stay;                 /* setup, setup_module: move_to_device is certainly false */
} setup_ud;

/* v is one of several things (a phi) and this path takes a set-up object
 * that stands for several (cobj.many): what `models[i]` reads after
 * `models[i] = fabric.setup(models[i])` in an earlier iteration, the list's
 * elements joined. Which element it is, is not known, so neither is whether
 * it was set up already: the path says nothing (no R22/R23 guessed). A value
 * that is that object alone (`w = fabric.setup(m); fabric.setup(w)`) is
 * certainly set up and still checked. */
static int unknown_element(C *c, paths *e, const cv *v) {
  if (!v || v->k != CV_PHI) return 0;
  const cv *x = fsC_alt(e, v);
  return x->k == CV_OBJ && c->objs[x->id].wrapped && c->objs[x->id].many;
}

static int v_setup(C *c, paths *e, const void *p, fsF_issues *iss) {
  const setup_ud *u = p;
  fsF_fabric f;
  if (!fsC_fabric_state(c, e, u->fabric, &f)) return 1;
  if (u->kind <= 1 && unknown_element(c, e, u->model)) return 1;
  for (size_t i = 0; u->kind != 1 && i < u->nopts; i++)
    if (unknown_element(c, e, u->opts[i])) return 1;
  fsF_model m;
  fsF_optim os[MAXARGS];
  const fsF_optim *op[MAXARGS];
  if (u->kind <= 1 && !fsC_model_state(c, e, u->model, &m)) return 1;
  uint32_t raw;
  if (u->kind <= 1 && u->move && fsC_model_obj(c, fsC_alt(e, u->model), &raw) && !m.wrapped)
    fsC_devices_apart(c, raw, &m);
  if (u->kind == 3) {
    fsF_loader ls[MAXARGS];
    const fsF_loader *lp[MAXARGS];
    for (size_t i = 0; i < u->nopts; i++) {
      const cv *v = fsC_alt(e, u->opts[i]);
      if (v->k == CV_UNKNOWN || v->k == CV_UNDEF) return 1;
      ls[i] = (fsF_loader){0};
      if (fsC_is(v, OB_LOADER, c)) {
        ls[i].is_dataloader = 1;
        ls[i].wrapped = fsC_o(c, v->id)->wrapped;
        ls[i].foreign_batch_sampler = fsC_o(c, v->id)->effect;
      }
      lp[i] = &ls[i];
    }
    int rc = fsF_check_setup_dataloaders(&f, lp, u->nopts, iss);
    const cv *uds = u->uds; /* use_distributed_sampler: a value not known checks nothing */
    const fs_value *x = uds ? fsC_cval(uds) : NULL;
    for (size_t i = 0; rc == 0 && (!uds || (x && fsV_truthy(x))) && i < u->nopts; i++)
      rc = fsF_check_distributed_sampler(&f, lp[i], iss);
    return rc;
  }
  for (size_t i = 0; i < u->nopts; i++) {
    if (!fsC_optim_state(c, e, u->opts[i], &os[i])) {
      const fs_value *x = fsC_cval(fsC_alt(e, u->opts[i])); /* a constant is no optimizer (R76) */
      if (!x) return 1;
      os[i].foreign = fsV_type_name(x);
    }
    op[i] = &os[i];
  }
  if (u->kind == 0) return fsF_check_setup(&f, &m, op, u->nopts, iss);
  if (u->kind == 1) return fsF_check_setup_module(&f, &m, iss);
  return fsF_check_setup_optimizers(&f, op, u->nopts, iss);
}

/* The name a set-up result is assigned to: `model, optimizer = fabric.setup(...)`. */
static const char *target_name(C *c, const fs_node *call, size_t i) {
  const fs_node *s = c->stmt;
  if (!s || s->kind != FS_N_ASSIGN || s->kids[1] != call) return NULL;
  const fs_node *t = s->kids[0];
  if (t->kind == FS_N_NAME) return i == 0 ? t->str : NULL;
  if ((t->kind == FS_N_TUPLE || t->kind == FS_N_LIST) && i < t->nkids && t->kids[i]->kind == FS_N_NAME)
    return t->kids[i]->str;
  return NULL;
}

/* Where the first optimizer over meta parameters came from. */
static void meta_notes(C *c, fs_diag *g, paths *e, const setup_ud *u, const fs_node *const *onodes,
                       const char *model_text) {
  for (size_t i = 0; i < u->nopts; i++) {
    const cv *v = fsC_alt(e, u->opts[i]);
    if (!fsC_is(v, OB_OPTIM, c)) continue;
    const cobj *o = fsC_o(c, v->id);
    if (o->wrapped) o = fsC_o(c, o->inner);
    if (!(o->pmeta.m & MB_T)) continue;
    fsD_note(g, c->src, o->loc, "`%s` was created over `%s` while they were on the meta device",
             fsC_text(c, onodes[i]->loc), fsC_text(c, o->why_loc));
    const cobj *m = fsC_o(c, o->model);
    if (m->why_kind == WHY_DEVICE)
      fsD_note(g, c->src, m->why_loc, "parameters are on the meta device because `%s` was created under `%s`",
               model_text, fsC_text(c, m->why_loc));
    else if (m->why_kind == WHY_INIT) {
      const fsF_config *cfg = fsC_cfg(c, m->fabric);
      fsD_note(g, c->src, m->why_loc,
               "parameters are on the meta device because `%s` was created under `%s` with strategy \"%s\"",
               model_text, fsC_text(c, m->why_loc), cfg ? cfg->strategy_name : "?");
    }
    return;
  }
}

static int ident_char(char ch) {
  return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* R36's mechanical fix: `opt = Adam(model.parameters())` ... `model, opt =
 * fabric.setup(model, opt)` becomes setup_module, the creation, setup_optimizers. */
static void fix_r36(C *c, fs_diag *g, const fs_node *call, const cv *optv, const fs_node *mnode,
                    const fs_node *onode, const char *mt, const char *ot) {
  const fs_node *s = c->stmt;
  if (!mt || !ot || !s || s->kind != FS_N_ASSIGN || s->kids[1] != call || !fsC_is(optv, OB_OPTIM, c))
    return;
  const cobj *o = fsC_o(c, optv->id);
  const fs_node *cs = o->stmt;
  if (o->wrapped || !cs || cs->kind != FS_N_ASSIGN || cs->kids[1]->loc.start != o->loc.start ||
      cs->loc.end > s->loc.start || onode->kind != FS_N_NAME || mnode->kind != FS_N_NAME)
    return;
  fs_loc cl = fsC_lines_of(c, cs->loc), sl = fsC_lines_of(c, s->loc);
  if (cl.end > sl.start || cs->loc.start - cl.start != s->loc.start - sl.start) return;
  /* nothing in between may use the optimizer */
  const char *t = c->src->text;
  size_t on = strlen(onode->str);
  for (uint32_t i = cl.end; i + on <= sl.start; i++)
    if (!memcmp(t + i, onode->str, on) && (i == 0 || !ident_char(t[i - 1])) && !ident_char(t[i + on]))
      return;
  const char *indent = fsC_text(c, (fs_loc){sl.start, s->loc.start});
  uint32_t cend = cl.end;
  if (cend > cs->loc.start && t[cend - 1] == '\n') cend--;
  const char *creation = fsC_text(c, (fs_loc){cs->loc.start, cend});
  const char *fab = fsC_text(c, call->kids[0]->kids[0]->loc);
  size_t n = strlen(mt) * 2 + strlen(ot) * 2 + strlen(fab) * 2 + strlen(indent) * 2 +
             strlen(creation) + strlen(mnode->str) + strlen(onode->str) + 80;
  char *text = fsC_alloc(c, n);
  snprintf(text, n, "%s = %s.setup_module(%s)\n%s%s\n%s%s = %s.setup_optimizers(%s)", mt, fab,
           mnode->str, indent, creation, indent, ot, fab, onode->str);
  fsD_edit(g, cl, "");
  fsD_edit(g, s->loc, text);
}

static cv wrap(C *c, uint32_t id, uint32_t fabric, fs_loc loc) {
  const cobj *x = fsC_o(c, id);
  uint32_t w = fsC_new_obj(c, (obk)x->kind, loc);
  cobj tmp = *fsC_o(c, id);
  cobj *o = fsC_o(c, w);
  *o = tmp;
  o->loc = loc;
  o->stmt = c->stmt;
  o->inner = tmp.wrapped ? tmp.inner : id;
  o->wrapped = 1;
  o->fabric = fabric;
  return fsC_obj(w);
}

/* ModelParallelStrategy's setup_module calls parallelize_fn(model,
 * device_mesh) and refuses what is not a module (R102): a value whose type
 * is certainly another (None when the def forgot `return model`). */
static void parallelize(C *c, const cargs *a, uint32_t fid, const cv *model) {
  const fs_node *def = fsC_o(c, fid)->parallelize_fn;
  if (!def) return;
  cv args[2] = {*model, fsC_unknown()};
  cv r = fsC_call_def(c, def, a->call, args, 2, NULL, NULL, 0);
  if (r.k != CV_CONST && r.k != CV_SEQ && r.k != CV_DICT && r.k != CV_TENSOR) return;
  const char *t = fsC_type_name(c, &r);
  if (!t) return;
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsF_check_parallelized(t, &iss);
  fsC_report_issue(c, fsF_error(&iss), a->call->loc);
  fsF_issues_free(&iss);
}

/* ---- the strategy attributes Fabric refuses (R107, R108) ------------------ */

cv fsC_fabric_strategy(C *c, uint32_t fabric) {
  const fsF_config *cfg = fsC_cfg(c, fabric);
  uint32_t given = fsC_o(c, fabric)->link;
  if (given) return fsC_obj(given - 1); /* Fabric(strategy=obj): that object */
  if (!cfg) return fsC_unknown();
  uint32_t id = fsC_new_obj(c, OB_STRATEGY, fsC_o(c, fabric)->loc);
  fsF_strategy_obj *s = fsC_alloc(c, sizeof *s);
  *s = (fsF_strategy_obj){.cls = cfg->cls, .use_orig_params = -1, .state_dict_full = -1, .cpu_offload = -1,
                          .auto_wrap_policy = -1, .stage = -1, .save_distributed = -1};
  cobj *o = fsC_o(c, id);
  o->strat = s;
  o->link = fabric + 1;
  return fsC_obj(id);
}

/* Whether the fabric a strategy object belongs to was launched: 1 surely,
 * 0 surely not (or no fabric took it), -1 not known (a fabric that took
 * it is launched on some path, or two fabrics took it). */
static int strategy_launched(C *c, uint32_t strategy) {
  const cobj *s = fsC_o(c, strategy);
  int launched = 0, fabrics = 0;
  for (uint32_t i = 0; i < c->nobjs; i++) {
    const cobj *f = &c->objs[i];
    if (f->kind != OB_FABRIC || !(s->link == i + 1 || f->link == strategy + 1)) continue;
    launched = f->launched.m == MB_T ? 1 : f->launched.m == MB_F ? 0 : -1;
    fabrics++;
  }
  return fabrics > 1 ? -1 : launched;
}

void fsC_strategy_attr(C *c, uint32_t strategy, const fs_node *n) {
  fsF_cls cls = fsC_o(c, strategy)->strat->cls;
  fsF_issues iss;
  fsF_issues_init(&iss);
  int rc = 0;
  if (!strcmp(n->str, "checkpoint_io")) rc = fsF_check_checkpoint_io(cls, &iss);
  else if (!strcmp(n->str, "device_mesh")) rc = fsF_check_device_mesh(cls, strategy_launched(c, strategy), &iss);
  const fsF_issue *e = rc < 0 ? fsF_error(&iss) : NULL;
  /* a .py script's CheckpointIO is Fabric's (only this runtime lacks one) */
  if (e && (strcmp(e->rule, "unsupported") || (!c->python && c->o->will_run))) fsC_report_issue(c, e, n->name_loc);
  fsF_issues_free(&iss);
}

void fsC_strategy_set_attr(C *c, uint32_t strategy, const fs_node *t, const cv *v) {
  const fs_value *x = fsC_cval(v);
  char *str = x ? fsV_tostr(x) : NULL; /* str() of a constant; another value's is not known */
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsF_check_set_strategy_attr(fsC_o(c, strategy)->strat->cls, t->str, fsC_is_none(v), str, &iss);
  free(str);
  const fsF_issue *e = fsF_error(&iss);
  /* in a .py script only Fabric's own refusal: the other assignments are Python's to make */
  if (e && (strcmp(e->rule, "unsupported") || (!c->python && c->o->will_run))) fsC_report_issue(c, e, t->name_loc);
  fsF_issues_free(&iss);
}

/* ---- W21: parameters tied across FSDP units --------------------------------- */

/* What __init__ bodies show of a model's tree: its modules in
 * named_modules() order (preorder, each once) and the ties
 * `self.X.weight = self.Y.weight` between parameter paths. */
#define UNIT_MODS 64
#define UNIT_TIES 16
typedef struct unit_mod { const char *path; uint32_t id; int wrapped; } unit_mod;
typedef struct unit_walk {
  C *c;
  const cv *classes;
  unit_mod mod[UNIT_MODS];
  size_t nmod;
  struct { const char *target, *source; } tie[UNIT_TIES];
  size_t ntie;
} unit_walk;

/* isinstance(module, classes): a script class or one of its bases, or a layer class by name. */
static int pycls_is(const pyclass *k, const pyclass *want, int depth) {
  if (k == want) return 1;
  for (uint8_t i = 0; k && depth < 8 && i < k->nbases; i++)
    if (pycls_is(k->bases[i], want, depth + 1)) return 1;
  return 0;
}

static int policy_wraps(const unit_walk *w, const cobj *o) {
  for (uint32_t i = 0; i < w->classes->n; i++) {
    const cv *k = &((const cv *)w->classes->p)[i];
    if (k->sub == CLS_PY ? o->pycls && pycls_is(o->pycls, k->p, 0)
                         : k->sub == CLS_SIG && !o->pycls && o->cls && !strcmp(o->cls, ((const fsSig *)k->p)->name))
      return 1;
  }
  return 0;
}

/* prefix + the attribute chain below `self` (self.a.b -> "a.b"), or NULL
 * when n is not such a chain. */
static const char *self_chain(C *c, const fs_node *n, const char *self, const char *prefix) {
  const fs_node *parts[16];
  int k = 0;
  while (n->kind == FS_N_ATTR && k < 16) { parts[k++] = n; n = n->kids[0]; }
  if (!k || n->kind != FS_N_NAME || strcmp(n->str, self)) return NULL;
  fsV_buf b = {0};
  fsV_buf_puts(&b, prefix);
  while (k--) fsV_buf_printf(&b, "%s%s", b.n ? "." : "", parts[k]->str);
  char *t = fsV_buf_take(&b);
  const char *r = t ? strcpy(fsC_alloc(c, strlen(t) + 1), t) : NULL;
  free(t);
  return r;
}

/* The straight-line `self.NAME = ...` statements of m's __init__, in order:
 * a child module is listed and walked where it is first assigned; an
 * assignment of one attribute chain to another is a tie. */
static void unit_children(unit_walk *w, const cv *m, const char *path, int depth) {
  C *c = w->c;
  const fs_node *init = fsC_init_of(fsC_o(c, m->id)->pycls);
  const fs_node *params = init ? fsC_kid(init, 0) : NULL;
  if (!params || !params->nkids || depth > 6) return;
  const char *self = params->kids[0]->str;
  const fs_node *body = fsC_kid(init, 1);
  for (uint32_t i = 0; body && i < body->nkids; i++) {
    const fs_node *s = body->kids[i];
    if (s->kind != FS_N_ASSIGN || s->nkids != 2) continue;
    const char *target = self_chain(c, s->kids[0], self, path), *source = self_chain(c, s->kids[1], self, path);
    if (!target) continue;
    cv v = s->kids[0]->kids[0]->kind == FS_N_NAME ? fsC_attr(c, m, s->kids[0]->str) : fsC_unknown();
    if (v.k == CV_OBJ && fsC_o(c, v.id)->kind == OB_MODEL) {
      size_t j = 0;
      while (j < w->nmod && w->mod[j].id != v.id) j++;
      if (j < w->nmod || w->nmod == UNIT_MODS) continue; /* named_modules lists a module once */
      w->mod[w->nmod++] = (unit_mod){target, v.id, policy_wraps(w, fsC_o(c, v.id))};
      unit_children(w, &v, target, depth + 1);
    } else if (source && strchr(source + strlen(path) + !!*path, '.') && w->ntie < UNIT_TIES) { /* self.a.b: a parameter */
      w->tie[w->ntie].target = target;
      w->tie[w->ntie++].source = source;
    }
  }
}

/* The module a parameter path belongs to (its path minus the last name):
 * its index in w->mod, or -1 when the walk did not see it. */
static int owner_of(const unit_walk *w, const char *param) {
  const char *dot = strrchr(param, '.');
  size_t len = dot ? (size_t)(dot - param) : 0;
  for (size_t j = 0; j < w->nmod; j++)
    if (strlen(w->mod[j].path) == len && !strncmp(w->mod[j].path, param, len)) return (int)j;
  return -1;
}

/* The nearest wrapped module at or above module j (the root excluded): its path, or "". */
static const char *unit_of(const unit_walk *w, int j) {
  const char *best = "";
  size_t best_len = 0;
  for (size_t k = 1; k < w->nmod; k++) {
    size_t len = strlen(w->mod[k].path);
    const char *p = w->mod[j].path;
    if (w->mod[k].wrapped && len >= best_len && !strncmp(w->mod[k].path, p, len) && (p[len] == 0 || p[len] == '.')) {
      best = w->mod[k].path;
      best_len = len;
    }
  }
  return best;
}

void fsC_fsdp_shared_params(C *c, uint32_t fabric, const fs_node *call, const cv *model) {
  const fsF_config *cfg = fsC_cfg(c, fabric);
  const cobj *f = fsC_o(c, fabric);
  if (!cfg || cfg->cls != FSF_FSDP || f->wrap_classes.k != CV_SEQ || !model || model->k != CV_OBJ) return;
  const cobj *o = fsC_o(c, model->id);
  if (o->kind != OB_MODEL || o->wrapped || !o->pycls) return;
  unit_walk *w = fsC_alloc(c, sizeof *w);
  *w = (unit_walk){.c = c, .classes = &f->wrap_classes};
  w->mod[w->nmod++] = (unit_mod){"", model->id, 0};
  unit_children(w, model, "", 0);
  if (!w->ntie) return;
  /* each path with its identity (the path it was tied to, followed back) */
  const char *tied[2 * UNIT_TIES];
  int ident[2 * UNIT_TIES], owner[2 * UNIT_TIES];
  size_t np = 0;
  for (size_t t = 0; t < w->ntie; t++) {
    size_t is = 0, it = 0;
    while (is < np && strcmp(tied[is], w->tie[t].source)) is++;
    if (is == np) { tied[np] = w->tie[t].source; ident[np] = (int)np; np++; }
    while (it < np && strcmp(tied[it], w->tie[t].target)) it++;
    if (it == np) tied[np++] = w->tie[t].target;
    ident[it] = ident[is];
  }
  /* the sites in named_modules() order; a group with a module the walk did not see is not judged */
  fsF_param_site sites[2 * UNIT_TIES];
  size_t ns = 0;
  for (size_t i = 0; i < np; i++) owner[i] = owner_of(w, tied[i]);
  for (size_t i = 0; i < np; i++) {
    int known = 1;
    for (size_t k = 0; k < np; k++) known &= ident[k] != ident[i] || owner[k] >= 0;
    if (!known) continue;
    sites[ns++] = (fsF_param_site){&ident[ident[i]], tied[i], unit_of(w, owner[i])};
  }
  /* stable insertion by owner position */
  for (size_t i = 1; i < ns; i++)
    for (size_t j = i; j > 0 && owner_of(w, sites[j - 1].path) > owner_of(w, sites[j].path); j--) {
      fsF_param_site t = sites[j];
      sites[j] = sites[j - 1];
      sites[j - 1] = t;
    }
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsF_warn_shared_params(sites, ns, &iss);
  fsC_report_issues(c, &iss, call->loc, 1);
  fsF_issues_free(&iss);
}

/* setup(model) of a raw model set up before: Fabric wraps it again (its
 * _validate_setup refuses only a _FabricModule), but a run sets a model up
 * in place, so the raw model and the set-up one are one value there and the
 * run would refuse it with R22. In a .fab that will run: rule `unsupported`
 * (a .py is checked as Fabric runs it: no error). */
static fs_diag *raw_again(C *c, const cargs *a, const cv *model, const fs_node *mnode) {
  size_t k = model->k == CV_PHI ? model->n : 1;
  const cv *items = model->k == CV_PHI ? model->p : model;
  for (size_t i = 0; i < k; i++) {
    const cv *v = &items[i];
    if (v->k != CV_OBJ || fsC_o(c, v->id)->kind != OB_MODEL || fsC_o(c, v->id)->wrapped ||
        !fsC_o(c, v->id)->first_setup.end || fsC_o(c, v->id)->many)
      continue;
    fs_diag *g = fsC_report(c, FS_SEV_ERROR, "unsupported", mnode ? mnode->loc : a->call->loc,
                            "setting up the raw model again is not supported at run time yet");
    if (!g) return NULL;
    fsD_note(g, c->src, fsC_o(c, v->id)->first_setup, "it was set up here");
    fsD_help(g, "Fabric would wrap the same module a second time; a run sets a model up in place, so use "
                "the model the first setup returned, or check the script as a .py file, which is "
                "checked and not run");
    return g;
  }
  return NULL;
}

static cv api_setup(C *c, const cargs *a, uint32_t fid, int kind) {
  setup_ud u = {.fabric = fid, .kind = kind};
  const fs_node *mnode = NULL, *onodes[MAXARGS];
  if (kind <= 1) u.model = fsC_arg(a, "module", &mnode);
  if (kind != 1) u.nopts = fsC_varargs(a, u.opts, onodes, MAXARGS);
  if (kind == 3) u.uds = fsC_arg(a, "use_distributed_sampler", NULL);
  if (kind <= 1) {
    const cv *mv = fsC_arg(a, "move_to_device", NULL);
    const fs_value *x = mv ? fsC_cval(mv) : NULL;
    u.move = !mv || (x && x->type == FSV_BOOL && x->u.b);
    u.stay = x && x->type == FSV_BOOL && !x->u.b;
  }
  paths e;
  c->issue_call = a;
  fs_diag *g = fsC_validate(c, fid, a->call->loc, v_setup, &u, &e);
  c->issue_call = NULL;
  if (!g && kind <= 1) fsC_te_layers(c, fid, u.model);
  if (!g && kind <= 1) fsC_fsdp_shared_params(c, fid, a->call, u.model);
  if (g) {
    const char *rule = g->rule;
    if (!strcmp(rule, "R36") || !strcmp(rule, "R37")) {
      const char *mt = target_name(c, a->call, 0), *ot = target_name(c, a->call, 1);
      const char *mtext = mnode ? fsC_text(c, mnode->loc) : "model";
      meta_notes(c, g, &e, &u, onodes, mtext);
      if (!strcmp(rule, "R36") && u.nopts == 1) {
        const cv *ov = fsC_alt(&e, u.opts[0]);
        const char *creation = fsC_is(ov, OB_OPTIM, c) ? fsC_text(c, fsC_o(c, ov->id)->loc) : "...";
        const char *fab = fsC_text(c, a->call->kids[0]->kids[0]->loc);
        /* An optimizer created outside the def this setup is in was created
         * over the caller's names: its text is no code here, so say it in words. */
        const fs_node *def = c->nframes ? c->frames[c->nframes - 1]->fn : NULL;
        fs_loc made = fsC_is(ov, OB_OPTIM, c) ? fsC_o(c, ov->id)->loc : (fs_loc){0, 0};
        if (def && fsC_is(ov, OB_OPTIM, c) && (made.start < def->loc.start || made.end > def->loc.end)) {
          uint32_t line, col;
          fsA_source_position(c->src, made.start, &line, &col);
          fsD_help(g, "set up the model first, then create the optimizer from the set-up model's parameters:\n"
                      "    %s = %s.setup_module(%s)\n"
                      "and create the optimizer (today `%s`, line %u, outside `%s`) after it, over `%s.parameters()`,\n"
                      "then set it up with `%s.setup_optimizers(...)`",
                   mt ? mt : mtext, fab, mtext, creation, line, def->str, mt ? mt : mtext, fab);
        } else {
          fsD_help(g, "set up the model first, then create the optimizer:\n    %s = %s.setup_module(%s)\n    %s = %s.setup_optimizers(%s)",
                   mt ? mt : mtext, fab, mtext, ot ? ot : fsC_text(c, onodes[0]->loc), fab, creation);
        }
        fix_r36(c, g, a->call, ov, mnode, onodes[0], mt, ot);
      }
    } else if (!strcmp(rule, "R22") || !strcmp(rule, "R24") || !strcmp(rule, "R23") ||
               !strcmp(rule, "R27") || !strcmp(rule, "R29")) {
      const cv *v = !strcmp(rule, "R22") || !strcmp(rule, "R24") ? fsC_alt(&e, u.model) : NULL;
      for (size_t i = 0; !v && i < u.nopts; i++) {
        const cv *x = fsC_alt(&e, u.opts[i]);
        if (x->k == CV_OBJ && fsC_o(c, x->id)->wrapped) v = x;
      }
      if (v && v->k == CV_OBJ) fsD_note(g, c->src, fsC_o(c, v->id)->loc, "it was set up here");
    } else if (!strcmp(rule, "R33") || !strcmp(rule, "R35")) {
      for (size_t i = 0; i < u.nopts; i++) {
        const cv *x = fsC_alt(&e, u.opts[i]);
        if (fsC_is(x, OB_OPTIM, c)) { fsD_note(g, c->src, fsC_o(c, x->id)->loc, "the optimizer was created here"); break; }
      }
    }
  }
  if (!g && kind <= 1 && u.model && !c->python) g = raw_again(c, a, u.model, mnode);
  const fsF_config *cfg = fsC_cfg(c, fid);
  if (!g && kind <= 1 && u.model && cfg && cfg->cls == FSF_MP) parallelize(c, a, fid, u.model);
  /* the state after the call, whatever was reported */
  cv res[MAXARGS + 1];
  size_t nres = 0;
  if (kind <= 1 && u.model) {
    uint32_t raws[MAXALT];
    size_t nr = fsC_raw_models(c, u.model, raws, MAXALT);
    cv w = fsC_unknown();
    for (size_t i = 0; i < nr; i++) {
      cobj *r = fsC_ow(c, raws[i]);
      fsF_model fm = {.class_name = r->cls, .is_module = 1, .meta = r->meta.m == MB_T};
      int root = 0;
      if (cfg) {
        fsF_fabric f;
        fsF_fabric_init(&f, cfg);
        fsF_setup_done(&f, &fm);
        if (!fm.meta) r->meta = (mbit){MB_F, 0};
        root = fm.fsdp_root;
      }
      if (!r->first_setup.end) r->first_setup = a->call->loc;
      if (i == 0) {
        w = wrap(c, raws[0], fid, a->call->loc);
        fsC_o(c, w.id)->fsdp_root = (uint8_t)root;
      }
    }
    /* materialized (FSDP: sharded, on its device whatever move_to_device says) */
    if (!g) move_models(c, fid, u.model, 1, u.stay && !(cfg && cfg->cls == FSF_FSDP));
    cobj *fo = fsC_ow(c, fid);
    fo->setups_lo++;
    fo->setups_hi++;
    res[nres++] = w;
  }
  for (size_t i = 0; i < u.nopts; i++) {
    const cv *x = u.opts[i]->k == CV_PHI ? &((const cv *)u.opts[i]->p)[0] : u.opts[i];
    obk want = kind == 3 ? OB_LOADER : OB_OPTIM;
    res[nres++] = fsC_is(x, want, c) ? wrap(c, x->id, fid, a->call->loc) : fsC_unknown();
    if (want == OB_OPTIM && res[nres - 1].k == CV_OBJ && cfg && u.model) {
      /* the optimizer now steps the set-up model's parameters */
      cobj *o = fsC_o(c, res[nres - 1].id);
      o->fsdp_flat = cfg->cls == FSF_FSDP;
    }
  }
  if (nres == 1) return res[0];
  if (nres == 0) return fsC_unknown();
  cv *items = fsC_alloc(c, nres * sizeof *items);
  memcpy(items, res, nres * sizeof *items);
  return (cv){.k = CV_SEQ, .sub = 1, .n = (uint32_t)nres, .p = items};
}

typedef struct call_ud {
  uint32_t fabric;
  const char *method;
  const cargs *a;
} call_ud;

static int v_simple(C *c, paths *e, const void *p, fsF_issues *iss) {
  const call_ud *u = p;
  const cargs *a = u->a;
  fsF_fabric f;
  if (!fsC_fabric_state(c, e, u->fabric, &f)) return 1;
  const char *m = u->method;
  if (!strcmp(m, "all_reduce")) { /* R100, R110 */
    const cv *v = fsC_arg(a, "reduce_op", NULL);
    const fs_value *op = fsC_cval(v);
    return fsF_check_all_reduce(&f, !v ? "mean" : op && op->type == FSV_STR ? op->u.str.s : NULL, iss);
  }
  if (!strcmp(m, "barrier") || !strcmp(m, "broadcast") || !strcmp(m, "all_gather"))
    return fsF_check_collective(&f, iss);
  if (!strcmp(m, "device") || !strcmp(m, "to_device")) return fsF_check_device(&f, iss);
  if (!strcmp(m, "sharded_model")) return fsF_check_sharded_model(&f, iss); /* raisesD: W6 */
  if (!strcmp(m, "seed_everything")) { /* raisesA */
    const fs_value *x = fsC_cval(fsC_arg(a, "seed", NULL));
    return x && (x->type == FSV_INT || x->type == FSV_BOOL) ? fsF_check_seed(x->type == FSV_INT ? x->u.i : x->u.b, iss) : 0;
  }
  if (!strcmp(m, "init_module")) {
    const cv *v = fsC_arg(a, "empty_init", NULL);
    const fs_value *x = fsC_cval(v);
    int ei = !x || x->type == FSV_NONE ? -1 : x->type == FSV_BOOL && !x->u.b ? 0 : fsV_truthy(x) ? 1 : -1;
    return fsF_check_init_module(&f, ei, iss);
  }
  if (!strcmp(m, "backward")) {
    const cv *mv = fsC_arg(a, "model", NULL);
    fsF_model st;
    if (fsC_is_none(mv)) return fsF_check_backward(&f, NULL, iss);
    if (!fsC_model_state(c, e, mv, &st)) return 1;
    return fsF_check_backward(&f, &st, iss);
  }
  if (!strcmp(m, "clip_gradients")) {
    fsF_model st;
    if (!fsC_model_state(c, e, fsC_arg(a, "module", NULL), &st)) return 1;
    if (fsF_check_clip_gradients(&f, &st, !fsC_is_none(fsC_arg(a, "clip_val", NULL)),
                                 !fsC_is_none(fsC_arg(a, "max_norm", NULL)), iss))
      return -1;
    fsF_optim opt;
    return fsC_optim_state(c, e, fsC_arg(a, "optimizer", NULL), &opt) ? fsF_check_clip_unscaling(&f, &opt, iss) : 0;
  }
  if (!strcmp(m, "no_backward_sync")) {
    fsF_model st;
    if (!fsC_model_state(c, e, fsC_arg(a, "module", NULL), &st)) return 1;
    return fsF_check_no_backward_sync(&f, &st, iss);
  }
  if (!strcmp(m, "load_raw")) {
    const cv *o = fsC_alt(e, fsC_arg(a, "obj", NULL));
    return fsF_check_load_raw(&f, o && fsC_is(o, OB_OPTIM, c), iss);
  }
  int saving = !strcmp(m, "save");
  if (saving || !strcmp(m, "load")) {
    const cv *sv = fsC_alt(e, fsC_arg(a, "state", NULL));
    fsF_entry ents[MAXARGS];
    fsF_model ms[MAXARGS];
    fsF_optim os[MAXARGS];
    size_t n = 0;
    int none = fsC_is_none(sv);
    if (!none && fsC_unsized(sv)) {
      /* its keys are not known (model.state_dict()): only a state whose
       * values are all tensors or plain values is known to hold no model */
      const cv *kv = sv->p;
      for (uint32_t i = 0; i < sv->n; i++)
        if (kv[sv->n + i].k != CV_TENSOR && !fsC_cval(&kv[sv->n + i])) return 1;
      if (!saving || !fsC_is_none(fsC_arg(a, "filter", NULL))) return 1; /* load: not empty, its repr unknown */
      return fsF_check_save(&f, ents, 0, NULL, iss);
    }
    if (!none) {
      if (sv->k != CV_DICT || sv->n > MAXARGS) return 1;
      const cv *kv = sv->p;
      for (uint32_t i = 0; i < sv->n; i++) {
        const fs_value *k = fsC_cval(&kv[i]);
        if (!k || k->type != FSV_STR) return 1;
        ents[n] = (fsF_entry){k->u.str.s, FSF_S_OTHER, NULL, NULL};
        const cv *val = fsC_alt(e, &kv[sv->n + i]);
        if (val->k == CV_UNKNOWN) return 1;
        if (fsC_is(val, OB_MODEL, c) && fsC_model_state(c, e, val, &ms[n])) {
          ents[n].kind = FSF_S_MODEL;
          ents[n].model = &ms[n];
          /* a .py parallelize_fn may call torch's fully_shard/parallelize_module, which
           * the check does not model: a set-up model counts as distributed there (R96) */
          ms[n].dtensor_params = c->python && ms[n].wrapped;
        } else if (fsC_optim_state(c, e, val, &os[n])) {
          ents[n].kind = FSF_S_OPTIM;
          ents[n].optim = &os[n];
        }
        n++;
      }
    }
    if (!saving) return fsF_check_load(&f, ents, n, none, iss);
    const cv *fv = fsC_arg(a, "filter", NULL);
    fsF_filter flt = {.kind = FSF_UNSET};
    const char *keys[MAXARGS], *vreprs[MAXARGS];
    int callable[MAXARGS];
    if (!fsC_is_none(fv)) {
      fv = fsC_alt(e, fv);
      if (fv->k == CV_DICT && fv->n <= MAXARGS) {
        const cv *kv = fv->p;
        for (uint32_t i = 0; i < fv->n; i++) {
          const fs_value *k = fsC_cval(&kv[i]);
          if (!k || k->type != FSV_STR) return 1;
          keys[i] = k->u.str.s;
          const cv *val = &kv[fv->n + i];
          callable[i] = !fsC_cval(val) && val->k != CV_SEQ && val->k != CV_DICT;
          char *r = fsC_cval(val) ? fsV_repr(fsC_cval(val)) : NULL;
          vreprs[i] = r ? strcpy(fsC_alloc(c, strlen(r) + 1), r) : "...";
          free(r);
        }
        flt = (fsF_filter){FSF_LIST, NULL, keys, callable, vreprs, fv->n};
      } else if (fsC_cval(fv)) {
        char *r = fsV_repr(fsC_cval(fv));
        flt.kind = FSF_OTHER;
        flt.repr = r ? strcpy(fsC_alloc(c, strlen(r) + 1), r) : "...";
        free(r);
      } else if (fv->k == CV_SEQ) {
        flt.kind = FSF_OTHER;
        flt.repr = fsC_text(c, a->call->loc);
      } else return 1;
    }
    if (fsF_check_save(&f, ents, n, &flt, iss)) return -1;
    const fs_value *path = fsC_cval(fsC_arg(a, "path", NULL));
    return fsF_xla_fsdp_save_full(&f, path && path->type == FSV_STR ? path->u.str.s : NULL, iss);
  }
  return 0;
}

static cv api_launch(C *c, const cargs *a, uint32_t fid) {
  const fs_node *fnode = NULL;
  const cv *fn = fsC_arg(a, "function", &fnode);
  fsF_fn kind = FSF_FN_NONE;
  const char *str_of = NULL, *name = NULL;
  int nparams = 1;
  if (fn) {
    if (fn->k == CV_FUNC) {
      const fs_node *def = fn->p;
      kind = FSF_FN_CALLABLE;
      name = def->str;
      nparams = (int)def->kids[0]->nkids;
    } else if (fn->k == CV_CLASS) {
      kind = FSF_FN_CALLABLE;
      name = "callable";
    } else if (fsC_cval(fn) || fn->k == CV_SEQ || fn->k == CV_DICT) {
      kind = FSF_FN_NOT_CALLABLE;
      char *s = fsC_cval(fn) ? fsV_tostr(fsC_cval(fn)) : NULL;
      str_of = s ? strcpy(fsC_alloc(c, strlen(s) + 1), s) : fsC_text(c, fnode->loc);
      free(s);
    } else {
      kind = FSF_FN_CALLABLE; /* not known: assume a function */
      name = "function";
    }
  }
  const fsF_config *cfg = fsC_cfg(c, fid);
  if (cfg) {
    fsF_fabric f;
    fsF_fabric_init(&f, cfg);
    fsF_issues iss;
    fsF_issues_init(&iss);
    if (fsF_check_launch(&f, kind, str_of, name, nparams, &iss) == 0)
      fsF_check_spawn_guard(cfg, c->main_guarded > 0, &iss); /* strategies/: R103 */
    c->issue_call = a;
    fsC_report_issues(c, &iss, a->call->loc, 1);
    c->issue_call = NULL;
    fsF_issues_free(&iss);
  }
  fsC_ow(c, fid)->launched = (mbit){MB_T, 0};
  if (kind == FSF_FN_CALLABLE && fn->k == CV_FUNC && nparams > 0) {
    cv args[MAXARGS];
    const fs_node *nodes[MAXARGS];
    const cv *extra[MAXARGS];
    size_t ne = fsC_varargs(a, extra, nodes, MAXARGS - 1);
    args[0] = fsC_obj(fid);
    for (size_t i = 0; i < ne; i++) args[1 + i] = *extra[i];
    const char *kw[MAXARGS]; /* launch's **kwargs go to the function */
    cv kwv[MAXARGS];
    size_t nk = 0;
    for (size_t i = 0; i < a->nkw && nk < MAXARGS; i++)
      if (a->sig->params[a->kw_slot[i]].flags & FSSIG_VARKW) kw[nk] = a->kw[i], kwv[nk++] = a->kwv[i];
    return fsC_call_def(c, fn->p, a->call, args, 1 + ne, kw, kwv, nk);
  }
  return fsC_unknown();
}

/* raisesA: one model object (not a join over paths) and a constant argument;
 * anything else checks nothing.  A method counts when the script's class (or
 * a base) defines it or Module has it. */
int fsC_mark_forward_method(C *c, const cargs *a, const cv *recv, cv *out) {
  *out = fsC_const(c, fsV_none());
  const fs_value *x = fsC_cval(fsC_arg(a, "method", NULL));
  if (!x || recv->k != CV_OBJ || fsC_o(c, recv->id)->kind != OB_MODEL) return 1;
  const cobj *o = fsC_o(c, recv->id), *raw = o->wrapped ? fsC_o(c, o->inner) : o;
  fsF_model m = {.class_name = raw->cls ? raw->cls : "Module", .is_module = 1, .wrapped = o->wrapped};
  const char *name = x->type == FSV_STR ? x->u.str.s : "";
  int has_method = 0;
  if (x->type == FSV_STR) {
    const fsSig *sig = fsSig_member("Module", name);
    has_method = (raw->pycls && fsC_py_method(raw->pycls, name)) || (sig && sig->kind == FSSIG_METHOD);
  }
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsF_check_mark_forward_method(&m, x->type == FSV_STR ? FSF_STR : FSF_OTHER, name, fsV_type_name(x),
                                has_method, &iss);
  fsC_report_issues(c, &iss, a->call->loc, 1);
  fsF_issues_free(&iss);
  return 1;
}

/* ---- R50: a method of a set-up model that calls a module of it --------- */

/* Whether expression n certainly calls `self(...)` or `self.X(...)` with X
 * a module of the model (raw): not inside a lambda, a comprehension, a
 * conditional expression or the right side of and/or. */
static int calls_module(C *c, const fs_node *n, const char *self, const cv *raw) {
  if (!n || n->kind == FS_N_LAMBDA || n->kind == FS_N_COMP || n->kind == FS_N_COND) return 0;
  if (n->kind == FS_N_BINARY && (n->op == FS_OP_AND || n->op == FS_OP_OR)) return calls_module(c, n->kids[0], self, raw);
  if (n->kind == FS_N_CALL && n->kids[0]) {
    const fs_node *f = n->kids[0];
    if (f->kind == FS_N_NAME && !strcmp(f->str, self)) return 1;
    if (f->kind == FS_N_ATTR && f->kids[0]->kind == FS_N_NAME && !strcmp(f->kids[0]->str, self)) {
      cv v = fsC_attr(c, raw, f->str);
      if (v.k == CV_OBJ && fsC_o(c, v.id)->kind == OB_MODEL) return 1;
    }
  }
  for (uint32_t i = 0; i < n->nkids; i++)
    if (calls_module(c, n->kids[i], self, raw)) return 1;
  return 0;
}

/* Whether the script marks method `name` (or one not written as a string)
 * with mark_forward_method anywhere: then it may be a forward method. */
static int maybe_marked(const fs_node *n, const char *name) {
  if (!n) return 0;
  if (n->kind == FS_N_CALL && n->kids[0] && n->kids[0]->kind == FS_N_ATTR &&
      !strcmp(n->kids[0]->str, "mark_forward_method")) {
    const fs_node *a = n->nkids > 1 ? n->kids[1] : NULL;
    if (a && a->kind == FS_N_KWARG) a = a->kids[0];
    if (!a || a->kind != FS_N_STR || !strcmp(a->str, name)) return 1;
  }
  for (uint32_t i = 0; i < n->nkids; i++)
    if (maybe_marked(n->kids[i], name)) return 1;
  return 0;
}

void fsC_outside_call(C *c, const fs_node *call, const cv *recv, const char *name, const fs_node *def) {
  if (recv->k != CV_OBJ) return;
  const cobj *w = fsC_o(c, recv->id);
  const fsF_config *cfg = w->kind == OB_MODEL && w->wrapped ? fsC_cfg(c, w->fabric) : NULL;
  const fs_node *ps = def->kids[0], *body = def->kids[1];
  if (!cfg || !ps->nkids || !w->pycls) return;
  const char *self = ps->kids[0]->str;
  cv raw = fsC_obj(w->inner);
  int called = 0;
  /* the body's straight-line statements, up to the first return */
  for (uint32_t i = 0; !called && i < body->nkids; i++) {
    const fs_node *st = body->kids[i];
    if (st->kind == FS_N_EXPR || st->kind == FS_N_RETURN) called = calls_module(c, fsC_kid(st, 0), self, &raw);
    else if (st->kind == FS_N_ASSIGN || st->kind == FS_N_AUGASSIGN) called = calls_module(c, st->kids[1], self, &raw);
    else if (st->kind != FS_N_PASS) break; /* a branch, a loop: what follows may not run */
    if (st->kind == FS_N_RETURN) break;
  }
  if (!called || maybe_marked(c->root, name)) return; /* the scan last: it reads the whole script */
  fsF_fabric f;
  fsF_fabric_init(&f, cfg);
  fsF_issues iss;
  fsF_issues_init(&iss);
  if (fsF_check_outside_call(&f, w->pycls->name, name, &iss) < 0) fsC_report_issue(c, fsF_error(&iss), call->loc);
  fsF_issues_free(&iss);
}

/* ---- fabric.call: a callback attribute known not to be callable ------- */

/* Whether n is a literal Python can never call (None is no attribute to
 * getattr(..., None), so Fabric skips it without a word). */
static int uncallable_literal(const fs_node *n) {
  if (n->kind == FS_N_UNARY) n = n->kids[0];
  switch (n->kind) {
  case FS_N_INT: case FS_N_FLOAT: case FS_N_STR: case FS_N_FSTR: case FS_N_TRUE: case FS_N_FALSE:
  case FS_N_LIST: case FS_N_TUPLE: case FS_N_DICT: case FS_N_SET: case FS_N_BYTES: case FS_N_BIGINT:
  case FS_N_IMAG: return 1;
  default: return 0;
  }
}

/* A target's stores into an attribute `name`, counted into *stores. */
static void attr_target(const fs_node *t, const char *name, int *stores) {
  if (!t) return;
  if (t->kind == FS_N_ATTR && !strcmp(t->str, name)) ++*stores;
  if (t->kind == FS_N_TUPLE || t->kind == FS_N_LIST || t->kind == FS_N_STARRED)
    for (uint32_t i = 0; i < t->nkids; i++) attr_target(t->kids[i], name, stores);
}

/* Stores into an attribute `name` anywhere under n (assignment, augmented
 * and annotated assignment, for/with/comprehension targets, del), counted
 * into *stores; *opaque set where code can change attributes without
 * naming them (setattr, delattr, vars, __dict__, __setattr__). */
static void attr_stores(const fs_node *n, const char *name, int *stores, int *opaque) {
  if (!n) return;
  switch (n->kind) {
  case FS_N_ASSIGN:
    for (uint32_t i = 0; i < n->nkids; i++)
      if (i != 1) attr_target(n->kids[i], name, stores);
    break;
  case FS_N_AUGASSIGN: case FS_N_ANNASSIGN: case FS_N_FOR: case FS_N_COMPFOR:
    attr_target(n->kids[0], name, stores);
    break;
  case FS_N_WITH: attr_target(fsC_kid(n, 1), name, stores); break;
  case FS_N_DEL:
    for (uint32_t i = 0; i < n->nkids; i++) attr_target(n->kids[i], name, stores);
    break;
  case FS_N_NAME:
    *opaque |= !strcmp(n->str, "setattr") || !strcmp(n->str, "delattr") || !strcmp(n->str, "vars");
    break;
  case FS_N_ATTR: *opaque |= !strcmp(n->str, "__dict__") || !strcmp(n->str, "__setattr__"); break;
  default: break;
  }
  for (uint32_t i = 0; i < n->nkids; i++) attr_stores(n->kids[i], name, stores, opaque);
}

/* The literal a callback instance of class k holds as attribute `name`, or
 * NULL where that is not certain: k has no bases, decorators or attribute
 * hooks and no method of that name; its __init__ sets `self.name = LITERAL`
 * in its straight-line body, or its body says `name = LITERAL`; and nothing
 * else in the script stores into an attribute of that name. */
static const fs_node *uncallable_attr(C *c, const pyclass *k, const char *name) {
  const fs_node *cls = k->node, *bases = cls ? fsC_kid(cls, 0) : NULL;
  if (!cls || (bases && bases->nkids > 1) || fsC_kid(cls, 2) || fsC_py_method(k, name) ||
      fsC_py_method(k, "__getattribute__") || fsC_py_method(k, "__getattr__"))
    return NULL;
  const fs_node *found = NULL, *body = cls->kids[1], *init = fsC_init_of(k);
  int class_stores = 0;
  for (uint32_t i = 0; i < body->nkids; i++) {
    const fs_node *st = body->kids[i];
    if ((st->kind == FS_N_ASSIGN || st->kind == FS_N_ANNASSIGN) && st->kids[0]->kind == FS_N_NAME &&
        !strcmp(st->kids[0]->str, name)) {
      class_stores++;
      const fs_node *v = st->kind == FS_N_ASSIGN ? st->kids[1] : fsC_kid(st, 2);
      found = st->kind == FS_N_ASSIGN && st->nkids == 2 && v && uncallable_literal(v) ? v : NULL;
    }
  }
  if (class_stores > 1) found = NULL;
  int stores = 0, opaque = 0;
  attr_stores(c->root, name, &stores, &opaque);
  if (opaque || stores > 1) return NULL;
  const fs_node *params = init ? init->kids[0] : NULL, *ib = init ? init->kids[1] : NULL;
  const char *self = params && params->nkids ? params->kids[0]->str : NULL;
  for (uint32_t i = 0; stores && self && i < ib->nkids; i++) {
    const fs_node *st = ib->kids[i];
    if (st->kind == FS_N_RETURN) break;
    if (st->kind == FS_N_ASSIGN && st->nkids == 2 && st->kids[0]->kind == FS_N_ATTR &&
        !strcmp(st->kids[0]->str, name) && st->kids[0]->kids[0]->kind == FS_N_NAME &&
        !strcmp(st->kids[0]->kids[0]->str, self))
      return uncallable_literal(st->kids[1]) ? st->kids[1] : NULL;
  }
  return stores ? NULL : found; /* the one store is elsewhere: not known */
}

/* fabric.call(hook): Fabric's warning for each callback whose attribute of
 * that name is there but not callable (fabric.py:1068). */
static void callback_hooks(C *c, const cargs *a, uint32_t fid) {
  const fs_value *h = fsC_cval(fsC_arg(a, "hook_name", NULL));
  const cv *cbs = &fsC_o(c, fid)->callbacks;
  if (!h || h->type != FSV_STR || cbs->k == CV_UNDEF) return;
  size_t n = cbs->k == CV_SEQ ? cbs->n : 1;
  const cv *items = cbs->k == CV_SEQ ? cbs->p : cbs;
  for (size_t i = 0; i < n; i++) {
    if (!fsC_is(&items[i], OB_INSTANCE, c)) continue;
    const pyclass *k = fsC_o(c, items[i].id)->pycls;
    if (!k || !uncallable_attr(c, k, h->u.str.s)) continue;
    /* one warning per callback at the call, as Fabric warns for each */
    char key[160];
    snprintf(key, sizeof key, "callback %zu", i);
    if (fsC_first(c, key, a->call->loc))
      fsD_add(c->d, FS_SEV_WARNING, "callback", c->src, a->call->loc,
              "Skipping the callback `%s.%s` because it is not callable.", k->name, h->u.str.s);
  }
}

void fsC_fabric_device(C *c, uint32_t fid, fs_loc loc) {
  call_ud u = {fid, "device", NULL};
  paths e;
  fsC_validate(c, fid, loc, v_simple, &u, &e);
}

int fsC_fabric_method(C *c, const cargs *a, uint32_t fid, const char *m, cv *out) {
  if (!strcmp(m, "setup")) { *out = api_setup(c, a, fid, 0); return 1; }
  if (!strcmp(m, "setup_module")) { *out = api_setup(c, a, fid, 1); return 1; }
  if (!strcmp(m, "setup_optimizers")) { *out = api_setup(c, a, fid, 2); return 1; }
  if (!strcmp(m, "setup_dataloaders")) { *out = api_setup(c, a, fid, 3); return 1; }
  if (!strcmp(m, "launch")) { *out = api_launch(c, a, fid); return 1; }
  if (!strcmp(m, "call")) callback_hooks(c, a, fid);
  if (!strcmp(m, "to_device")) move_models(c, fid, fsC_arg(a, "obj", NULL), 0, 0);
  call_ud u = {fid, m, a};
  paths e;
  c->issue_call = a;
  fs_diag *g = fsC_validate(c, fid, a->call->loc, v_simple, &u, &e);
  c->issue_call = NULL;
  if (g && (!strcmp(g->rule, "R41") || !strcmp(g->rule, "R47") || !strcmp(g->rule, "R48"))) {
    const cv *mv = fsC_alt(&e, fsC_arg(a, !strcmp(g->rule, "R41") ? "model" : "module", NULL));
    if (mv && mv->k == CV_OBJ)
      fsD_note(g, c->src, fsC_o(c, mv->id)->loc, "this is the model as created, not the one `fabric.setup` returned");
  }
  if (!strcmp(m, "init_module")) {
    const fsF_config *cfg = fsC_cfg(c, fid);
    const fs_value *x = fsC_cval(fsC_arg(a, "empty_init", NULL));
    int ei = !x || x->type == FSV_NONE ? -1 : x->type == FSV_BOOL && !x->u.b ? 0 : fsV_truthy(x) ? 1 : -1;
    *out = fsC_new_ctx(c, CTX_INIT, cfg ? fsF_init_module_effect(cfg, ei) : FSF_INIT_NORMAL, fid, a->call->loc);
    return 1;
  }
  if (!strcmp(m, "no_backward_sync") || !strcmp(m, "sharded_model")) {
    *out = fsC_new_ctx(c, CTX_OTHER, 0, fid, a->call->loc);
    return 1;
  }
  if (!strcmp(m, "load") || !strcmp(m, "load_raw")) {
    /* what a checkpoint restores is initialized */
    const cv *sv = fsC_arg(a, !strcmp(m, "load") ? "state" : "obj", NULL);
    if (sv && sv->k == CV_DICT) {
      for (uint32_t i = 0; i < sv->n; i++) {
        uint32_t raws[MAXALT];
        size_t nr = fsC_raw_models(c, &((const cv *)sv->p)[sv->n + i], raws, MAXALT);
        for (size_t k = 0; k < nr; k++) fsC_ow(c, raws[k])->empty = (mbit){MB_F, 0};
      }
    } else if (sv) {
      uint32_t raws[MAXALT];
      size_t nr = fsC_raw_models(c, sv, raws, MAXALT);
      for (size_t k = 0; k < nr; k++) fsC_ow(c, raws[k])->empty = (mbit){MB_F, 0};
    }
    *out = fsC_unknown();
    return 1;
  }
  return 0;
}
