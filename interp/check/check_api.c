/* check_api.c -- what the builtin classes and the Fabric, module, optimizer
 * and tensor methods do to the abstract state. Every Fabric rule is asked of
 * fabric.c with states built from the objects; where a value differs per
 * path, each combination of paths is tried (a rule fires when it holds on
 * some path) and the diagnostic notes which branch leads there. */
#include "check_int.h"
#include "sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arguments ---------------------------------------------------------- */

const cv *fsC_arg(const cargs *a, const char *pname, const fs_node **node) {
  int p = a->sig->params ? fsSig_param_index(a->sig, pname) : -1;
  if (p < 0) return NULL;
  for (size_t i = 0, k = 0; i < a->npos; i++) {
    while (a->call->kids[1 + i + k]->kind == FS_N_KWARG) k++;
    if (a->pos_slot[i] == p) {
      if (node) *node = a->call->kids[1 + i + k];
      return &a->pos[i];
    }
  }
  for (size_t j = 0; j < a->nkw; j++)
    if (a->kw_slot[j] == p) {
      if (node) {
        for (uint32_t i = 1, k = 0; i < a->call->nkids; i++)
          if (a->call->kids[i]->kind == FS_N_KWARG && k++ == j) *node = a->call->kids[i]->kids[0];
      }
      return &a->kwv[j];
    }
  return NULL;
}

/* The positional arguments collected by *args (after the named ones). */
static size_t varargs(const cargs *a, const cv **out, const fs_node **nodes, size_t max) {
  size_t n = 0;
  for (size_t i = 0, k = 0; i < a->npos; i++) {
    while (a->call->kids[1 + i + k]->kind == FS_N_KWARG) k++;
    const fsSig_param *p = &a->sig->params[a->pos_slot[i]];
    if ((p->flags & FSSIG_VARARGS) && n < max) {
      out[n] = &a->pos[i];
      nodes[n++] = a->call->kids[1 + i + k];
    }
  }
  return n;
}

static const fs_value *cval(const cv *v) { return v && v->k == CV_CONST ? v->p : NULL; }

static int is_none(const cv *v) { const fs_value *x = cval(v); return !v || (x && x->type == FSV_NONE); }

/* ---- paths: trying each combination of per-path values ------------------- */

typedef struct pick { const void *key; uint8_t val, n; uint32_t why; int run; } pick;
typedef struct paths { pick p[16]; int np, run; } paths;

static int choose(paths *e, const void *key, int n, uint32_t why) {
  for (int i = 0; i < e->np; i++)
    if (e->p[i].key == key) { e->p[i].run = e->run; return e->p[i].val; }
  if (e->np == 16) return 0;
  e->p[e->np++] = (pick){key, 0, (uint8_t)n, why, e->run};
  return 0;
}

static int next_path(paths *e) {
  e->run++;
  while (e->np) {
    pick *p = &e->p[e->np - 1];
    if (++p->val < p->n) return 1;
    e->np--;
  }
  return 0;
}

/* A definite or per-path fact; the true side is tried first. */
static int bit(paths *e, const mbit *b) {
  if (b->m != (MB_F | MB_T)) return b->m == MB_T;
  return !choose(e, b, 2, b->why);
}

static const cv *alt(paths *e, const cv *v) {
  while (v && v->k == CV_PHI) v = &((const cv *)v->p)[choose(e, v->p, (int)v->n, v->id)];
  return v;
}

static void note_paths(C *c, fs_diag *g, const paths *e) {
  for (int i = 0; i < e->np; i++)
    if (e->p[i].run == e->run && e->p[i].why) fsC_note_why(c, g, e->p[i].why);
}

/* ---- fabric.h states from objects --------------------------------------- */

static cobj *model_obj(C *c, const cv *v, uint32_t *raw) {
  if (!v || v->k != CV_OBJ || c->objs[v->id].kind != OB_MODEL) return NULL;
  cobj *o = &c->objs[v->id];
  *raw = o->wrapped ? o->inner : v->id;
  return o;
}

/* 0 when v is not known to be anything (the check is skipped). */
static int model_state(C *c, paths *e, const cv *v, fsF_model *m) {
  v = alt(e, v);
  memset(m, 0, sizeof *m);
  uint32_t raw;
  cobj *o = model_obj(c, v, &raw);
  if (!o) {
    const char *t = v ? fsC_type_name(c, v) : NULL;
    if (!t || !strcmp(t, "Module")) return 0;
    m->class_name = t;
    return 1;
  }
  const cobj *r = &c->objs[raw];
  m->class_name = r->cls;
  m->is_module = 1;
  m->wrapped = o->wrapped;
  m->fsdp_root = o->fsdp_root;
  m->meta = bit(e, &r->meta);
  return 1;
}

static int optim_state(C *c, paths *e, const cv *v, fsF_optim *o) {
  v = alt(e, v);
  memset(o, 0, sizeof *o);
  if (!v || v->k != CV_OBJ || c->objs[v->id].kind != OB_OPTIM) return 0;
  const cobj *x = &c->objs[v->id];
  o->wrapped = x->wrapped;
  o->meta_params = bit(e, &x->pmeta);
  o->fsdp_flat = x->fsdp_flat;
  o->xla_sharded = x->xla_sharded;
  return 1;
}

static int fabric_state(C *c, paths *e, uint32_t id, fsF_fabric *f) {
  const fsF_config *cfg = fsC_cfg(c, id);
  if (!cfg) return 0;
  const cobj *o = &c->objs[id];
  fsF_fabric_init(f, cfg);
  f->launched = bit(e, &o->launched);
  f->models_setup = o->setups_lo == o->setups_hi ? o->setups_lo
                  : choose(e, &o->setups_lo, 2, 0) ? o->setups_hi : o->setups_lo;
  return 1;
}

/* Reports what fabric.c said: the first path's warnings, the first error. */
static fs_diag *report_issues(C *c, const fsF_issues *iss, fs_loc loc, int warnings) {
  fs_diag *g = NULL;
  for (size_t i = 0; i < iss->n; i++) {
    const fsF_issue *s = &iss->items[i];
    if (s->severity != FS_SEV_ERROR && !warnings) continue;
    fs_diag *x = fsC_report(c, s->severity, s->rule, loc, "%s", s->message);
    if (x && s->help) fsD_help(x, "%s", s->help);
    if (s->severity == FS_SEV_ERROR) g = x;
  }
  return g;
}

/* The whole lines of s (with its comment), from line start to past the newline. */
static fs_loc lines_of(C *c, fs_loc s) {
  uint32_t line, col;
  fsA_source_position(c->src, s.start, &line, &col);
  uint32_t start = c->src->line_starts[line - 1];
  uint32_t end = s.end;
  while (end < c->src->len && c->src->text[end] != '\n') end++;
  if (end < c->src->len) end++;
  return (fs_loc){start, end};
}

/* `fabric = Fabric(...)`: the statement that named a fabric, or NULL. */
static const fs_node *fabric_stmt(C *c, uint32_t fid) {
  const fs_node *s = fsC_o(c, fid)->stmt;
  return s && s->kind == FS_N_ASSIGN && s->kids[0]->kind == FS_N_NAME && s->kids[1]->kind == FS_N_CALL ? s : NULL;
}

/* R16's fix: `fabric.launch()` right after the Fabric is created (once per
 * fabric, and not where launch() needs a function: R17). */
static void fix_launch(C *c, fs_diag *g, uint32_t fid) {
  const fsF_config *cfg = fsC_cfg(c, fid);
  const fs_node *s = fabric_stmt(c, fid);
  if (!cfg || cfg->launch_needs_fn || !s || !fsC_first(c, "fix-launch", s->loc)) return;
  fs_loc l = lines_of(c, s->loc);
  const char *indent = fsC_text(c, (fs_loc){l.start, s->loc.start});
  int nl = l.end == c->src->len && (l.end == 0 || c->src->text[l.end - 1] != '\n');
  size_t n = strlen(indent) + strlen(s->kids[0]->str) + 16;
  char *text = fsC_alloc(c, n);
  snprintf(text, n, "%s%s%s.launch()\n", nl ? "\n" : "", indent, s->kids[0]->str);
  fsD_edit(g, (fs_loc){l.end, l.end}, text);
}

/* A validation over one combination of paths: <0 error, 0 fine, >0 unknown. */
typedef int (*vfn)(C *c, paths *e, const void *ud, fsF_issues *iss);

/* Tries the combinations; returns the error's diagnostic (NULL if none or
 * already reported), with *e left on the failing path. */
static fs_diag *validate(C *c, uint32_t fid, fs_loc loc, vfn f, const void *ud, paths *e) {
  fsF_issues iss;
  fsF_issues_init(&iss);
  memset(e, 0, sizeof *e);
  fs_diag *g = NULL;
  for (int run = 0; run < 64; run++) {
    fsF_issues_clear(&iss);
    int rc = f(c, e, ud, &iss);
    if (rc < 0) {
      g = report_issues(c, &iss, loc, run == 0);
      if (g) note_paths(c, g, e);
      break;
    }
    if (run == 0) report_issues(c, &iss, loc, 1);
    if (!next_path(e)) break;
  }
  fsF_issues_free(&iss);
  if (g && !strcmp(g->rule, "R16")) fix_launch(c, g, fid);
  return g;
}

/* ---- objects ------------------------------------------------------------ */

cv fsC_new_model(C *c, const char *cls, fs_loc loc) {
  uint32_t id = fsC_new_obj(c, OB_MODEL, loc);
  cobj *m = fsC_o(c, id);
  m->cls = cls;
  for (int i = c->nctx; i-- > 0;) {
    const cobj *x = fsC_o(c, c->ctxs[i]);
    if (x->ctx == CTX_OTHER) continue;
    if (x->ctx == CTX_META || (x->ctx == CTX_INIT && x->effect == FSF_INIT_META)) {
      m->meta = (mbit){MB_T, 0};
      m->why_kind = x->ctx == CTX_META ? WHY_DEVICE : WHY_INIT;
      m->why_loc = x->loc;
      m->fabric = x->fabric;
    } else if (x->ctx == CTX_INIT && x->effect == FSF_INIT_EMPTY) {
      m->empty = (mbit){MB_T, 0};
      m->why_kind = WHY_INIT;
      m->why_loc = x->loc;
      m->fabric = x->fabric;
    }
    break;
  }
  return fsC_obj(id);
}

/* Each model a value may be on some path (raw objects). */
static size_t raw_models(C *c, const cv *v, uint32_t *out, size_t max) {
  size_t n = 0;
  size_t k = v->k == CV_PHI ? v->n : 1;
  const cv *items = v->k == CV_PHI ? v->p : v;
  for (size_t i = 0; i < k && n < max; i++) {
    uint32_t raw;
    if (model_obj(c, &items[i], &raw)) out[n++] = raw;
  }
  return n;
}

cv fsC_forward(C *c, const cv *model, fs_loc loc) {
  uint32_t raws[MAXALT];
  size_t n = raw_models(c, model, raws, MAXALT);
  const cv *x = model->k == CV_PHI ? &((const cv *)model->p)[0] : model;
  int wrapped = x->k == CV_OBJ && fsC_o(c, x->id)->wrapped;
  for (size_t i = 0; i < n; i++) {
    const cobj *r = fsC_o(c, raws[i]);
    if (r->meta.m == MB_T && !wrapped) { /* a set-up one already had its setup error */
      fs_diag *g = fsC_report(c, FS_SEV_ERROR, "meta-forward", loc,
                              "the model's parameters are on the meta device: they hold no data to compute with");
      if (g) {
        fsD_note(g, c->src, r->why_loc, "they were put on the meta device here");
        fsD_help(g, "set the model up first (`model = fabric.setup_module(model)`), which materializes them");
      }
    } else if (r->empty.m & MB_T) {
      fs_diag *g = fsC_report(c, FS_SEV_WARNING, "uninit", loc,
                              "the model runs on uninitialized parameters: nothing initialized them after `%s`",
                              fsC_text(c, r->why_loc));
      if (g) {
        fsD_note(g, c->src, r->why_loc, "from here on its parameters hold uninitialized memory");
        fsC_note_why(c, g, r->empty.why);
        fsD_help(g, "call `model.reset_parameters()` or load a checkpoint (`fabric.load(path, {\"model\": model})`) before training");
      }
    }
  }
  cv t = {.k = CV_TENSOR};
  if (wrapped) t.id = fsC_o(c, x->id)->fabric + 1;
  return t;
}

/* Collects the parameter references in an optimizer's `params` argument. */
static void collect_params(C *c, const cv *v, cobj *opt, int *found, int depth) {
  if (depth > 8) return;
  if (v->k == CV_SEQ || v->k == CV_PHI || v->k == CV_DICT) {
    size_t n = v->k == CV_DICT ? 2 * v->n : v->n;
    for (size_t i = 0; i < n; i++) collect_params(c, &((const cv *)v->p)[i], opt, found, depth + 1);
    return;
  }
  if (!fsC_is(v, OB_PARAMS, c)) return;
  const cobj *p = fsC_o(c, v->id);
  if (!*found) {
    opt->model = p->model;
    opt->fsdp_flat = p->fsdp_flat;
    opt->xla_sharded = p->xla_sharded;
    opt->pmeta = p->pmeta;
  } else {
    opt->fsdp_flat &= p->fsdp_flat;
    opt->xla_sharded &= p->xla_sharded;
    opt->pmeta.m |= p->pmeta.m;
    if (!opt->pmeta.why) opt->pmeta.why = p->pmeta.why;
  }
  *found = 1;
}

/* fsF_value of a statically known argument; 0 if not known. */
static int fvalue(C *c, const cv *v, fsF_value *out) {
  memset(out, 0, sizeof *out);
  if (!v) { out->kind = FSF_UNSET; return 1; }
  if (v->k == CV_OBJ && fsC_o(c, v->id)->kind == OB_STRATEGY) {
    out->kind = FSF_STRATEGY;
    out->strategy = fsC_o(c, v->id)->strat;
    return 1;
  }
  if (v->k == CV_SEQ) {
    int64_t *ints = fsC_alloc(c, (v->n + 1) * sizeof *ints);
    const cv *items = v->p;
    fsV_buf b = {0};
    fsV_buf_puts(&b, v->sub ? "(" : "[");
    const char *tname = NULL;
    for (uint32_t i = 0; i < v->n; i++) {
      const fs_value *x = cval(&items[i]);
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
  const fs_value *x = cval(v);
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

static cv new_fabric(C *c, const cargs *a) {
  static const char *const names[] = {"accelerator", "strategy", "devices", "num_nodes", "precision"};
  fsF_args fa;
  fsF_value *slots[] = {&fa.accelerator, &fa.strategy, &fa.devices, &fa.num_nodes, &fa.precision};
  uint32_t id = fsC_new_obj(c, OB_FABRIC, a->call->loc);
  for (int i = 0; i < 5; i++)
    if (!fvalue(c, fsC_arg(a, names[i], NULL), slots[i])) return fsC_obj(id); /* not known: no rules */
  if (c->ncfgs == c->capcfgs) {
    c->capcfgs = c->capcfgs ? 2 * c->capcfgs : 4;
    c->cfgs = fsA_xrealloc(c->cfgs, c->capcfgs * sizeof *c->cfgs);
  }
  fsF_issues iss;
  fsF_issues_init(&iss);
  int rc = fsF_resolve(&fa, &c->o->overrides, &c->o->machine, &c->cfgs[c->ncfgs], &iss);
  report_issues(c, &iss, a->call->loc, 1);
  fsF_issues_free(&iss);
  if (rc == 0) {
    cobj *o = fsC_o(c, id);
    o->cfg = (int32_t)c->ncfgs++;
    o->launched = (mbit){c->cfgs[o->cfg].under_cli ? MB_T : MB_F, 0};
  }
  return fsC_obj(id);
}

static cv new_strategy(C *c, const cargs *a) {
  uint32_t id = fsC_new_obj(c, OB_STRATEGY, a->call->loc);
  cobj *o = fsC_o(c, id);
  fsF_strategy_obj *s = &o->strat;
  *s = (fsF_strategy_obj){.use_orig_params = -1, .state_dict_full = -1, .cpu_offload = -1,
                          .auto_wrap_policy = -1, .stage = -1, .save_distributed = -1};
  const char *n = a->sig->name;
  s->cls = !strcmp(n, "FSDPStrategy") ? FSF_FSDP : !strcmp(n, "DDPStrategy") ? FSF_DDP
         : !strcmp(n, "DeepSpeedStrategy") ? FSF_DEEPSPEED : FSF_MP;
  const fs_value *x;
  if ((x = cval(fsC_arg(a, "use_orig_params", NULL)))) s->use_orig_params = fsV_truthy(x);
  if ((x = cval(fsC_arg(a, "state_dict_type", NULL))) && x->type == FSV_STR)
    s->state_dict_full = !strcmp(x->u.str.s, "full");
  const cv *v;
  if ((v = fsC_arg(a, "cpu_offload", NULL))) s->cpu_offload = cval(v) ? fsV_truthy(cval(v)) : 1;
  if ((v = fsC_arg(a, "auto_wrap_policy", NULL))) s->auto_wrap_policy = !is_none(v);
  if ((x = cval(fsC_arg(a, "stage", NULL))) && x->type == FSV_INT) s->stage = (int)x->u.i;
  if ((x = cval(fsC_arg(a, "start_method", NULL))) && x->type == FSV_STR)
    s->start_method = !strcmp(x->u.str.s, "popen") ? FSF_START_POPEN
                    : !strcmp(x->u.str.s, "fork") ? FSF_START_FORK : FSF_START_SPAWN;
  if ((x = cval(fsC_arg(a, "save_distributed_checkpoint", NULL)))) s->save_distributed = fsV_truthy(x);
  return fsC_obj(id);
}

static cv new_ctx(C *c, int kind, int effect, uint32_t fabric, fs_loc loc) {
  uint32_t id = fsC_new_obj(c, OB_CTX, loc);
  cobj *o = fsC_o(c, id);
  o->ctx = (uint8_t)kind;
  o->effect = (uint8_t)effect;
  o->fabric = fabric;
  return fsC_obj(id);
}

static cv param_value(C *c, const cargs *a) {
  const fs_value *name = cval(fsC_arg(a, "name", NULL));
  const cv *def = fsC_arg(a, "default", NULL);
  if (!name || name->type != FSV_STR || !def) return def ? *def : fsC_unknown();
  size_t len = name->u.str.len;
  for (size_t i = 0; i < c->o->ndefines; i++) {
    const char *d = c->o->defines[i];
    if (strncmp(d, name->u.str.s, len) || d[len] != '=') continue;
    c->define_used[i] = 1;
    const fs_value *dv = cval(def);
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

int fsC_api_builtin(C *c, const cargs *a, cv *out) {
  const char *n = a->sig->name;
  const fs_node *node = NULL;
  if (!strcmp(n, "Fabric")) { *out = new_fabric(c, a); return 1; }
  if (strstr(n, "Strategy") && a->sig->kind == FSSIG_CLASS) { *out = new_strategy(c, a); return 1; }
  if (!strcmp(n, "SGD") || !strcmp(n, "Adam") || !strcmp(n, "AdamW")) {
    uint32_t id = fsC_new_obj(c, OB_OPTIM, a->call->loc);
    const cv *p = fsC_arg(a, "params", &node);
    int found = 0;
    cobj tmp = *fsC_o(c, id);
    if (p) collect_params(c, p, &tmp, &found, 0);
    if (node) tmp.why_loc = node->loc;
    *fsC_o(c, id) = tmp;
    *out = fsC_obj(id);
    return 1;
  }
  if (!strcmp(n, "DataLoader")) { *out = fsC_obj(fsC_new_obj(c, OB_LOADER, a->call->loc)); return 1; }
  if (!strcmp(a->sig->returns, "Dataset")) { *out = fsC_obj(fsC_new_obj(c, OB_DATASET, a->call->loc)); return 1; }
  if (!strcmp(n, "param")) { *out = param_value(c, a); return 1; }
  if (!strcmp(n, "device")) {
    const fs_value *t = cval(fsC_arg(a, "type", NULL));
    int meta = t && t->type == FSV_STR && !strcmp(t->u.str.s, "meta");
    *out = new_ctx(c, meta ? CTX_META : CTX_DEVICE, 0, 0, a->call->loc);
    return 1;
  }
  if (!strcmp(n, "no_grad")) { *out = new_ctx(c, CTX_OTHER, 0, 0, a->call->loc); return 1; }
  if (!strcmp(n, "range")) {
    int64_t v[3];
    size_t k = 0;
    for (size_t i = 0; i < a->npos && i < 3; i++) {
      const fs_value *x = cval(&a->pos[i]);
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
  if (!strcmp(n, "len") && a->npos == 1) {
    const cv *x = &a->pos[0];
    if (x->k == CV_SEQ || x->k == CV_DICT) *out = fsC_int(c, x->n);
    else if (cval(x)) {
      fsV_clearerr();
      int64_t l = fsV_len(NULL, (fs_value *)cval(x));
      if (l < 0) fsC_report(c, FS_SEV_ERROR, "type", a->call->loc, "%s", fsV_error());
      *out = l < 0 ? fsC_unknown() : fsC_int(c, l);
    } else *out = fsC_unknown();
    return 1;
  }
  if ((!strcmp(n, "list") || !strcmp(n, "tuple")) && a->npos == 1 &&
      (fsC_is(&a->pos[0], OB_PARAMS, c) || a->pos[0].k == CV_SEQ)) {
    *out = a->pos[0];
    return 1;
  }
  if (!strcmp(n, "cross_entropy") || !strcmp(n, "mse_loss")) {
    cv t = {.k = CV_TENSOR};
    for (size_t i = 0; i < a->npos; i++) if (a->pos[i].k == CV_TENSOR && a->pos[i].id) t.id = a->pos[i].id;
    for (size_t i = 0; i < a->nkw; i++) if (a->kwv[i].k == CV_TENSOR && a->kwv[i].id) t.id = a->kwv[i].id;
    *out = t;
    return 1;
  }
  return 0;
}

/* ---- Fabric methods ----------------------------------------------------- */

#define MAXARGS 16

typedef struct setup_ud {
  uint32_t fabric;
  int kind;                 /* 0 setup, 1 setup_module, 2 setup_optimizers, 3 setup_dataloaders */
  const cv *model;
  const cv *opts[MAXARGS]; size_t nopts;
} setup_ud;

static int v_setup(C *c, paths *e, const void *p, fsF_issues *iss) {
  const setup_ud *u = p;
  fsF_fabric f;
  if (!fabric_state(c, e, u->fabric, &f)) return 1;
  fsF_model m;
  fsF_optim os[MAXARGS];
  const fsF_optim *op[MAXARGS];
  if (u->kind <= 1 && !model_state(c, e, u->model, &m)) return 1;
  if (u->kind == 3) {
    fsF_loader ls[MAXARGS];
    const fsF_loader *lp[MAXARGS];
    for (size_t i = 0; i < u->nopts; i++) {
      const cv *v = alt(e, u->opts[i]);
      if (v->k == CV_UNKNOWN || v->k == CV_UNDEF) return 1;
      ls[i] = (fsF_loader){0};
      if (fsC_is(v, OB_LOADER, c)) {
        ls[i].is_dataloader = 1;
        ls[i].wrapped = fsC_o(c, v->id)->wrapped;
      }
      lp[i] = &ls[i];
    }
    return fsF_check_setup_dataloaders(&f, lp, u->nopts, iss);
  }
  for (size_t i = 0; i < u->nopts; i++) {
    if (!optim_state(c, e, u->opts[i], &os[i])) return 1;
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
    const cv *v = alt(e, u->opts[i]);
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
  fs_loc cl = lines_of(c, cs->loc), sl = lines_of(c, s->loc);
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

static cv api_setup(C *c, const cargs *a, uint32_t fid, int kind) {
  setup_ud u = {.fabric = fid, .kind = kind};
  const fs_node *mnode = NULL, *onodes[MAXARGS];
  if (kind <= 1) u.model = fsC_arg(a, "module", &mnode);
  if (kind != 1) u.nopts = varargs(a, u.opts, onodes, MAXARGS);
  paths e;
  fs_diag *g = validate(c, fid, a->call->loc, v_setup, &u, &e);
  if (g) {
    const char *rule = g->rule;
    if (!strcmp(rule, "R36") || !strcmp(rule, "R37")) {
      const char *mt = target_name(c, a->call, 0), *ot = target_name(c, a->call, 1);
      const char *mtext = mnode ? fsC_text(c, mnode->loc) : "model";
      meta_notes(c, g, &e, &u, onodes, mtext);
      if (!strcmp(rule, "R36") && u.nopts == 1) {
        const cv *ov = alt(&e, u.opts[0]);
        const char *creation = fsC_is(ov, OB_OPTIM, c) ? fsC_text(c, fsC_o(c, ov->id)->loc) : "...";
        fsD_help(g, "set up the model first, then create the optimizer:\n    %s = %s.setup_module(%s)\n    %s = %s.setup_optimizers(%s)",
                 mt ? mt : mtext, fsC_text(c, a->call->kids[0]->kids[0]->loc), mtext,
                 ot ? ot : fsC_text(c, onodes[0]->loc), fsC_text(c, a->call->kids[0]->kids[0]->loc), creation);
        fix_r36(c, g, a->call, ov, mnode, onodes[0], mt, ot);
      }
    } else if (!strcmp(rule, "R22") || !strcmp(rule, "R24") || !strcmp(rule, "R23") ||
               !strcmp(rule, "R27") || !strcmp(rule, "R29")) {
      const cv *v = !strcmp(rule, "R22") || !strcmp(rule, "R24") ? alt(&e, u.model) : NULL;
      for (size_t i = 0; !v && i < u.nopts; i++) {
        const cv *x = alt(&e, u.opts[i]);
        if (x->k == CV_OBJ && fsC_o(c, x->id)->wrapped) v = x;
      }
      if (v && v->k == CV_OBJ) fsD_note(g, c->src, fsC_o(c, v->id)->loc, "it was set up here");
    } else if (!strcmp(rule, "R33") || !strcmp(rule, "R35")) {
      for (size_t i = 0; i < u.nopts; i++) {
        const cv *x = alt(&e, u.opts[i]);
        if (fsC_is(x, OB_OPTIM, c)) { fsD_note(g, c->src, fsC_o(c, x->id)->loc, "the optimizer was created here"); break; }
      }
    }
  }
  /* the state after the call, whatever was reported */
  const fsF_config *cfg = fsC_cfg(c, fid);
  cv res[MAXARGS + 1];
  size_t nres = 0;
  if (kind <= 1 && u.model) {
    uint32_t raws[MAXALT];
    size_t nr = raw_models(c, u.model, raws, MAXALT);
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
      if (i == 0) {
        w = wrap(c, raws[0], fid, a->call->loc);
        fsC_o(c, w.id)->fsdp_root = (uint8_t)root;
      }
    }
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
  if (!fabric_state(c, e, u->fabric, &f)) return 1;
  const char *m = u->method;
  if (!strcmp(m, "barrier") || !strcmp(m, "broadcast") || !strcmp(m, "all_gather") ||
      !strcmp(m, "all_reduce"))
    return fsF_check_collective(&f, iss);
  if (!strcmp(m, "device") || !strcmp(m, "to_device")) return fsF_check_device(&f, iss);
  if (!strcmp(m, "init_module")) {
    const cv *v = fsC_arg(a, "empty_init", NULL);
    const fs_value *x = cval(v);
    int ei = !x || x->type == FSV_NONE ? -1 : x->type == FSV_BOOL && !x->u.b ? 0 : fsV_truthy(x) ? 1 : -1;
    return fsF_check_init_module(&f, ei, iss);
  }
  if (!strcmp(m, "backward")) {
    const cv *mv = fsC_arg(a, "model", NULL);
    fsF_model st;
    if (is_none(mv)) return fsF_check_backward(&f, NULL, iss);
    if (!model_state(c, e, mv, &st)) return 1;
    return fsF_check_backward(&f, &st, iss);
  }
  if (!strcmp(m, "clip_gradients")) {
    fsF_model st;
    if (!model_state(c, e, fsC_arg(a, "module", NULL), &st)) return 1;
    return fsF_check_clip_gradients(&f, &st, !is_none(fsC_arg(a, "clip_val", NULL)),
                                    !is_none(fsC_arg(a, "max_norm", NULL)), iss);
  }
  if (!strcmp(m, "no_backward_sync")) {
    fsF_model st;
    if (!model_state(c, e, fsC_arg(a, "module", NULL), &st)) return 1;
    return fsF_check_no_backward_sync(&f, &st, iss);
  }
  if (!strcmp(m, "load_raw")) {
    const cv *o = alt(e, fsC_arg(a, "obj", NULL));
    return fsF_check_load_raw(&f, o && fsC_is(o, OB_OPTIM, c), iss);
  }
  int saving = !strcmp(m, "save");
  if (saving || !strcmp(m, "load")) {
    const cv *sv = alt(e, fsC_arg(a, "state", NULL));
    fsF_entry ents[MAXARGS];
    fsF_model ms[MAXARGS];
    fsF_optim os[MAXARGS];
    size_t n = 0;
    int none = is_none(sv);
    if (!none) {
      if (sv->k != CV_DICT || sv->n > MAXARGS) return 1;
      const cv *kv = sv->p;
      for (uint32_t i = 0; i < sv->n; i++) {
        const fs_value *k = cval(&kv[i]);
        if (!k || k->type != FSV_STR) return 1;
        ents[n] = (fsF_entry){k->u.str.s, FSF_S_OTHER, NULL, NULL};
        const cv *val = alt(e, &kv[sv->n + i]);
        if (val->k == CV_UNKNOWN) return 1;
        if (fsC_is(val, OB_MODEL, c) && model_state(c, e, val, &ms[n])) {
          ents[n].kind = FSF_S_MODEL;
          ents[n].model = &ms[n];
        } else if (optim_state(c, e, val, &os[n])) {
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
    if (!is_none(fv)) {
      fv = alt(e, fv);
      if (fv->k == CV_DICT && fv->n <= MAXARGS) {
        const cv *kv = fv->p;
        for (uint32_t i = 0; i < fv->n; i++) {
          const fs_value *k = cval(&kv[i]);
          if (!k || k->type != FSV_STR) return 1;
          keys[i] = k->u.str.s;
          const cv *val = &kv[fv->n + i];
          callable[i] = !cval(val) && val->k != CV_SEQ && val->k != CV_DICT;
          char *r = cval(val) ? fsV_repr(cval(val)) : NULL;
          vreprs[i] = r ? strcpy(fsC_alloc(c, strlen(r) + 1), r) : "...";
          free(r);
        }
        flt = (fsF_filter){FSF_LIST, NULL, keys, callable, vreprs, fv->n};
      } else if (cval(fv)) {
        char *r = fsV_repr(cval(fv));
        flt.kind = FSF_OTHER;
        flt.repr = r ? strcpy(fsC_alloc(c, strlen(r) + 1), r) : "...";
        free(r);
      } else if (fv->k == CV_SEQ) {
        flt.kind = FSF_OTHER;
        flt.repr = fsC_text(c, a->call->loc);
      } else return 1;
    }
    return fsF_check_save(&f, ents, n, &flt, iss);
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
    } else if (cval(fn) || fn->k == CV_SEQ || fn->k == CV_DICT) {
      kind = FSF_FN_NOT_CALLABLE;
      char *s = cval(fn) ? fsV_tostr(cval(fn)) : NULL;
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
    fsF_check_launch(&f, kind, str_of, name, nparams, &iss);
    report_issues(c, &iss, a->call->loc, 1);
    fsF_issues_free(&iss);
  }
  fsC_ow(c, fid)->launched = (mbit){MB_T, 0};
  if (kind == FSF_FN_CALLABLE && fn->k == CV_FUNC && nparams > 0) {
    cv args[MAXARGS];
    const fs_node *nodes[MAXARGS];
    const cv *extra[MAXARGS];
    size_t ne = varargs(a, extra, nodes, MAXARGS - 1);
    args[0] = fsC_obj(fid);
    for (size_t i = 0; i < ne; i++) args[1 + i] = *extra[i];
    return fsC_call_def(c, fn->p, a->call, args, 1 + ne, NULL, NULL, 0);
  }
  return fsC_unknown();
}

void fsC_fabric_device(C *c, uint32_t fid, fs_loc loc) {
  call_ud u = {fid, "device", NULL};
  paths e;
  validate(c, fid, loc, v_simple, &u, &e);
}

static int fabric_method(C *c, const cargs *a, uint32_t fid, const char *m, cv *out) {
  if (!strcmp(m, "setup")) { *out = api_setup(c, a, fid, 0); return 1; }
  if (!strcmp(m, "setup_module")) { *out = api_setup(c, a, fid, 1); return 1; }
  if (!strcmp(m, "setup_optimizers")) { *out = api_setup(c, a, fid, 2); return 1; }
  if (!strcmp(m, "setup_dataloaders")) { *out = api_setup(c, a, fid, 3); return 1; }
  if (!strcmp(m, "launch")) { *out = api_launch(c, a, fid); return 1; }
  call_ud u = {fid, m, a};
  paths e;
  fs_diag *g = validate(c, fid, a->call->loc, v_simple, &u, &e);
  if (g && (!strcmp(g->rule, "R41") || !strcmp(g->rule, "R47") || !strcmp(g->rule, "R48"))) {
    const cv *mv = alt(&e, fsC_arg(a, !strcmp(g->rule, "R41") ? "model" : "module", NULL));
    if (mv && mv->k == CV_OBJ)
      fsD_note(g, c->src, fsC_o(c, mv->id)->loc, "this is the model as created, not the one `fabric.setup` returned");
  }
  if (!strcmp(m, "init_module")) {
    const fsF_config *cfg = fsC_cfg(c, fid);
    const fs_value *x = cval(fsC_arg(a, "empty_init", NULL));
    int ei = !x || x->type == FSV_NONE ? -1 : x->type == FSV_BOOL && !x->u.b ? 0 : fsV_truthy(x) ? 1 : -1;
    *out = new_ctx(c, CTX_INIT, cfg ? fsF_init_module_effect(cfg, ei) : FSF_INIT_NORMAL, fid, a->call->loc);
    return 1;
  }
  if (!strcmp(m, "no_backward_sync")) { *out = new_ctx(c, CTX_OTHER, 0, fid, a->call->loc); return 1; }
  if (!strcmp(m, "load") || !strcmp(m, "load_raw")) {
    /* what a checkpoint restores is initialized */
    const cv *sv = fsC_arg(a, !strcmp(m, "load") ? "state" : "obj", NULL);
    if (sv && sv->k == CV_DICT) {
      for (uint32_t i = 0; i < sv->n; i++) {
        uint32_t raws[MAXALT];
        size_t nr = raw_models(c, &((const cv *)sv->p)[sv->n + i], raws, MAXALT);
        for (size_t k = 0; k < nr; k++) fsC_ow(c, raws[k])->empty = (mbit){MB_F, 0};
      }
    } else if (sv) {
      uint32_t raws[MAXALT];
      size_t nr = raw_models(c, sv, raws, MAXALT);
      for (size_t k = 0; k < nr; k++) fsC_ow(c, raws[k])->empty = (mbit){MB_F, 0};
    }
    *out = fsC_unknown();
    return 1;
  }
  return 0;
}

/* ---- module, optimizer, tensor and list methods ------------------------- */

/* model.generate's literal arguments against the rule the run applies
 * (sample.h), each reported at its argument. */
static void generate_literals(C *c, const cargs *a) {
  static const char *const names[] = {"prompt", "max_new_tokens", "temperature", "top_k"};
  for (int i = 0; i < 4; i++) {
    const fs_node *node = NULL;
    const fs_value *x = cval(fsC_arg(a, names[i], &node));
    fsSM_opts o = {(const unsigned char *)"x", 1, 0, 1.0, FSSM_ALL};
    if (!x) continue;
    if (i == 0 && x->type == FSV_STR) o.n = x->u.str.len;
    else if (i == 1 && x->type == FSV_INT) o.max_new = x->u.i;
    else if (i == 2 && (x->type == FSV_INT || x->type == FSV_FLOAT)) o.temperature = fsV_to_double(x);
    else if (i == 3 && x->type == FSV_INT) o.top_k = x->u.i;
    char err[160];
    if (fsSM_check_opts(&o, err, sizeof err) < 0)
      fsC_report(c, FS_SEV_ERROR, "value", node ? node->loc : a->call->loc, "%s", err);
  }
}

static int module_method(C *c, const cargs *a, const cv *recv, const char *m, cv *out) {
  uint32_t raws[MAXALT];
  size_t nr = raw_models(c, recv, raws, MAXALT);
  if (!nr) return 0;
  if (!strcmp(m, "parameters") || !strcmp(m, "named_parameters")) {
    uint32_t id = fsC_new_obj(c, OB_PARAMS, a->call->loc);
    cobj p = *fsC_o(c, id);
    p.model = raws[0];
    p.pmeta = fsC_o(c, raws[0])->meta;
    for (size_t i = 1; i < nr; i++) {
      p.pmeta.m |= fsC_o(c, raws[i])->meta.m;
      if (!p.pmeta.why) p.pmeta.why = recv->id;
    }
    if (recv->k == CV_PHI && p.pmeta.m == (MB_F | MB_T) && !p.pmeta.why) p.pmeta.why = recv->id;
    /* the first path's model decides how the parameters are sharded */
    const cv *x = recv;
    uint32_t raw;
    for (uint32_t i = 0; recv->k == CV_PHI && i < recv->n; i++)
      if (model_obj(c, &((const cv *)recv->p)[i], &raw)) { x = &((const cv *)recv->p)[i]; break; }
    const cobj *w = fsC_o(c, x->id);
    const fsF_config *cfg = w->wrapped ? fsC_cfg(c, w->fabric) : NULL;
    p.fsdp_flat = w->wrapped && w->fsdp_root;
    p.xla_sharded = cfg && cfg->cls == FSF_XLA_FSDP;
    *fsC_o(c, id) = p;
    *out = fsC_obj(id);
    return 1;
  }
  if (!strcmp(m, "to_empty")) {
    for (size_t i = 0; i < nr; i++) {
      cobj *r = fsC_ow(c, raws[i]);
      r->meta = (mbit){MB_F, 0};
      r->empty = (mbit){MB_T, 0};
      r->why_kind = WHY_TO_EMPTY;
      r->why_loc = a->call->loc;
    }
    *out = *recv;
    return 1;
  }
  if (!strcmp(m, "reset_parameters") || !strcmp(m, "load_state_dict")) {
    for (size_t i = 0; i < nr; i++) fsC_ow(c, raws[i])->empty = (mbit){MB_F, 0};
    *out = fsC_const(c, fsV_none());
    return 1;
  }
  if (!strcmp(m, "forward")) { *out = fsC_forward(c, recv, a->call->loc); return 1; }
  if (!strcmp(m, "generate")) { /* its forwards need data as model(x)'s do */
    fsC_forward(c, recv, a->call->loc);
    generate_literals(c, a);
    *out = fsC_unknown();
    return 1;
  }
  return 0;
}

int fsC_api_method(C *c, const cargs *a, const cv *recv, cv *out) {
  const char *m = a->call->kids[0]->str;
  const char *t = fsC_type_name(c, recv);
  if (!t) return 0;
  if (!strcmp(t, "Fabric") && recv->k == CV_OBJ) return fabric_method(c, a, recv->id, m, out);
  if (!strcmp(t, "Module")) return module_method(c, a, recv, m, out);
  if (!strcmp(t, "Tensor")) {
    if (!strcmp(m, "backward")) {
      const cv *x = recv->k == CV_PHI ? &((const cv *)recv->p)[0] : recv;
      const fsF_config *cfg = x->k == CV_TENSOR && x->id ? fsC_cfg(c, x->id - 1) : NULL;
      if (cfg) {
        fsF_fabric f;
        fsF_fabric_init(&f, cfg);
        fsF_issues iss;
        fsF_issues_init(&iss);
        fsF_check_tensor_backward(&f, &iss);
        fs_diag *g = report_issues(c, &iss, a->call->loc, 1);
        fsF_issues_free(&iss);
        const fs_node *fs = fabric_stmt(c, x->id - 1);
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
    if (!strcmp(m, "detach")) { *out = (cv){.k = CV_TENSOR}; return 1; }
    return 0;
  }
  if (!strcmp(t, "list") && !strcmp(m, "append") && recv->k == CV_SEQ && a->npos == 1 &&
      a->call->kids[0]->kids[0]->kind == FS_N_NAME) {
    cv *items = fsC_alloc(c, (recv->n + 1) * sizeof *items);
    memcpy(items, recv->p, recv->n * sizeof *items);
    items[recv->n] = a->pos[0];
    fsC_setvar(c, a->call->kids[0]->kids[0]->str, (cv){.k = CV_SEQ, .n = recv->n + 1, .p = items});
    *out = fsC_const(c, fsV_none());
    return 1;
  }
  return 0;
}
