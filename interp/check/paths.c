/* paths.c -- the checker's machinery for asking fabric.c's rules: a call's
 * arguments by parameter name, fabric.h states built from abstract objects,
 * and the enumeration of per-path combinations (a value that differs between
 * the branches of an `if` is tried each way, up to 64 combinations; a rule
 * fires when it holds on some path, and the diagnostic names the branch). */
#include "check_int.h"

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
size_t fsC_varargs(const cargs *a, const cv **out, const fs_node **nodes, size_t max) {
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

/* ---- paths: trying each combination of per-path values ------------------- */

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

const cv *fsC_alt(paths *e, const cv *v) {
  while (v && v->k == CV_PHI) v = &((const cv *)v->p)[choose(e, v->p, (int)v->n, v->id)];
  return v;
}

static void note_paths(C *c, fs_diag *g, const paths *e) {
  for (int i = 0; i < e->np; i++)
    if (e->p[i].run == e->run && e->p[i].why) fsC_note_why(c, g, e->p[i].why);
}

/* ---- fabric.h states from objects --------------------------------------- */

cobj *fsC_model_obj(C *c, const cv *v, uint32_t *raw) {
  if (!v || v->k != CV_OBJ || c->objs[v->id].kind != OB_MODEL) return NULL;
  cobj *o = &c->objs[v->id];
  *raw = o->wrapped ? o->inner : v->id;
  return o;
}

/* 0 when v is not known to be anything (the check is skipped). */
int fsC_model_state(C *c, paths *e, const cv *v, fsF_model *m) {
  v = fsC_alt(e, v);
  memset(m, 0, sizeof *m);
  uint32_t raw;
  cobj *o = fsC_model_obj(c, v, &raw);
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

int fsC_optim_state(C *c, paths *e, const cv *v, fsF_optim *o) {
  v = fsC_alt(e, v);
  memset(o, 0, sizeof *o);
  if (!v || v->k != CV_OBJ || c->objs[v->id].kind != OB_OPTIM) return 0;
  const cobj *x = &c->objs[v->id];
  o->wrapped = x->wrapped;
  o->meta_params = bit(e, &x->pmeta);
  o->fsdp_flat = x->fsdp_flat;
  o->xla_sharded = x->xla_sharded;
  o->handles_unscaling = (x->wrapped ? &c->objs[x->inner] : x)->fused;
  return 1;
}

int fsC_fabric_state(C *c, paths *e, uint32_t id, fsF_fabric *f) {
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
fs_diag *fsC_report_issues(C *c, const fsF_issues *iss, fs_loc loc, int warnings) {
  fs_diag *g = NULL;
  for (size_t i = 0; i < iss->n; i++) {
    const fsF_issue *s = &iss->items[i];
    if (s->severity != FS_SEV_ERROR && !warnings) continue;
    fs_diag *x = fsC_report_issue(c, s, loc);
    if (s->severity == FS_SEV_ERROR) g = x;
  }
  return g;
}

fs_diag *fsC_report_issue(C *c, const fsF_issue *s, fs_loc loc) {
  if (s->arg && c->issue_call) loc = fsSig_arg_loc(c->issue_call->sig, c->issue_call->call, s->arg, s->arg_index);
  fs_diag *x = fsC_report(c, s->severity, s->rule, loc, "%s", s->message);
  if (x && s->help) fsD_help(x, "%s", s->help);
  return x;
}

/* The whole lines of s (with its comment), from line start to past the newline. */
fs_loc fsC_lines_of(C *c, fs_loc s) {
  uint32_t line, col;
  fsA_source_position(c->src, s.start, &line, &col);
  uint32_t start = c->src->line_starts[line - 1];
  uint32_t end = s.end;
  while (end < c->src->len && c->src->text[end] != '\n') end++;
  if (end < c->src->len) end++;
  return (fs_loc){start, end};
}

/* `fabric = Fabric(...)`: the statement that named a fabric, or NULL. */
const fs_node *fsC_fabric_stmt(C *c, uint32_t fid) {
  const fs_node *s = fsC_o(c, fid)->stmt;
  return s && s->kind == FS_N_ASSIGN && s->kids[0]->kind == FS_N_NAME && s->kids[1]->kind == FS_N_CALL ? s : NULL;
}

/* R16's fix: `fabric.launch()` right after the Fabric is created (once per
 * fabric, and not where launch() needs a function: R17). */
static void fix_launch(C *c, fs_diag *g, uint32_t fid) {
  const fsF_config *cfg = fsC_cfg(c, fid);
  const fs_node *s = fsC_fabric_stmt(c, fid);
  if (!cfg || cfg->launch_needs_fn || !s || !fsC_first(c, "fix-launch", s->loc)) return;
  fs_loc l = fsC_lines_of(c, s->loc);
  const char *indent = fsC_text(c, (fs_loc){l.start, s->loc.start});
  int nl = l.end == c->src->len && (l.end == 0 || c->src->text[l.end - 1] != '\n');
  size_t n = strlen(indent) + strlen(s->kids[0]->str) + 16;
  char *text = fsC_alloc(c, n);
  snprintf(text, n, "%s%s%s.launch()\n", nl ? "\n" : "", indent, s->kids[0]->str);
  fsD_edit(g, (fs_loc){l.end, l.end}, text);
}

/* Tries the combinations; returns the error's diagnostic (NULL if none or
 * already reported), with *e left on the failing path. */
fs_diag *fsC_validate(C *c, uint32_t fid, fs_loc loc, fsC_rule_fn f, const void *ud, paths *e) {
  fsF_issues iss;
  fsF_issues_init(&iss);
  memset(e, 0, sizeof *e);
  fs_diag *g = NULL;
  for (int run = 0; run < 64; run++) {
    fsF_issues_clear(&iss);
    int rc = f(c, e, ud, &iss);
    if (rc < 0) {
      g = fsC_report_issues(c, &iss, loc, run == 0);
      if (g) note_paths(c, g, e);
      break;
    }
    if (run == 0) fsC_report_issues(c, &iss, loc, 1);
    if (!next_path(e)) break;
  }
  fsF_issues_free(&iss);
  if (g && !strcmp(g->rule, "R16")) fix_launch(c, g, fid);
  return g;
}
