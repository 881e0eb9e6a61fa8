/* shape.c -- model declarations: every layer names a layer class with
 * a valid call, and the feature size flows from layer to layer (Linear(784,
 * 256) followed by Linear(128, 10) is an error at the second). Sizes are
 * computed from the layer arguments with the declaration's parameters bound;
 * -1 is "not known" (an input of unknown shape, a Flatten) and checks nothing.
 *
 * Python's models get the same rule where their sizes are known: each layer
 * object made by a call (`nn.Linear(784, 128)`) records its input and output
 * sizes (c->feats, by object id), `nn.Sequential(...)` follows them from layer
 * to layer, and a class's `forward` is followed through the layers its
 * `__init__` assigned to self (`x = self.fc1(x)` ... `return self.fc2(x)`).
 * Invariant: only sizes computed from known values are compared, so a size
 * from an unknown argument, an unmodelled layer or any statement the walk
 * does not follow is -1 and never an error. */
#include "check_int.h"

#include <string.h>

typedef struct prev { fs_loc loc; int64_t d; } prev;

/* A layer's output size when it is its input's (ReLU, LayerNorm(n)). */
enum { FEAT_SAME = -2 };

/* The argument given for parameter pname of a layer's row, by keyword or by
 * position, or NULL. A Python call's further keywords (device=, dtype=) are
 * not looked at: the row's leading parameters are torch's. */
static const cv *layer_arg(const fsSig *sig, const char *pname, const cv *pos, size_t npos,
                           const char *const *kw, const cv *kwv, size_t nkw) {
  for (size_t j = 0; j < nkw; j++) if (!strcmp(kw[j], pname)) return &kwv[j];
  for (size_t i = 0; i < npos && i < sig->nparams; i++) if (!strcmp(sig->params[i].name, pname)) return &pos[i];
  return NULL;
}

static int64_t int_of(const cv *v) {
  const fs_value *x = v && v->k == CV_CONST ? v->p : NULL;
  return x && x->type == FSV_INT && x->u.i >= 0 ? x->u.i : -1;
}

static void mismatch(C *c, fs_loc at, const char *what, int64_t want, const prev *p) {
  fs_diag *g = fsC_report(c, FS_SEV_ERROR, "shape", at,
                          "`%s` expects %lld input features, but the layer before it gives %lld",
                          what, (long long)want, (long long)p->d);
  if (g) fsD_note(g, c->src, p->loc, "`%s` gives %lld features", fsC_text(c, p->loc), (long long)p->d);
}

static int64_t body_dim(C *c, const fs_node *body, int64_t d, prev *p);
static int keeps_features(const char *n);

/* The sizes a layer of row sig takes and gives with these arguments: *in -1
 * when any, *out FEAT_SAME when its input's, -1 when not known. */
/* Which of layer_io's rules a row follows: found by its name once per row
 * and check (fsC_row), not by a strcmp chain at each of a script's layers. */
enum { LAYER_LINEAR = 1, LAYER_EMBEDDING, LAYER_DIM, LAYER_NORM, LAYER_KEEPS, LAYER_OTHER };

static uint8_t layer_rule(C *c, const fsSig *sig) {
  struct fsC_row *known = fsC_row(c, sig);
  if (known && known->layer) return known->layer;
  const char *n = sig->name;
  uint8_t rule = !strcmp(n, "Linear") ? LAYER_LINEAR : !strcmp(n, "Embedding") ? LAYER_EMBEDDING
               : !strcmp(n, "PositionalEmbedding") || !strcmp(n, "CausalSelfAttention") ? LAYER_DIM
               : !strcmp(n, "LayerNorm") ? LAYER_NORM : keeps_features(n) ? LAYER_KEEPS : LAYER_OTHER;
  if (known) known->layer = rule;
  return rule;
}

static void layer_io(C *c, const fsSig *sig, const cv *pos, size_t npos, const char *const *kw, const cv *kwv,
                     size_t nkw, int64_t *in, int64_t *out) {
#define ARG(name) int_of(layer_arg(sig, name, pos, npos, kw, kwv, nkw))
  *in = -1;
  *out = FEAT_SAME;
  switch (layer_rule(c, sig)) {
  case LAYER_LINEAR: *in = ARG("in_features"); *out = ARG("out_features"); break;
  case LAYER_EMBEDDING: *out = ARG("embedding_dim"); break;
  case LAYER_DIM: *in = *out = ARG("dim"); break;
  case LAYER_NORM: *in = *out = ARG("normalized_shape"); break;
  case LAYER_KEEPS: break;
  default: *out = -1; break;
  }
#undef ARG
}

/* The layers whose output has the input's feature size (the last dimension
 * for the Linear chains this file follows); any other layer this file has no
 * rule for makes the size unknown, so a new layer can never cause an error. */
static int keeps_features(const char *n) {
  static const char *const names[] = {"ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "Dropout", "LeakyReLU",
                                      "Softmax", "Mish", "BatchNorm1d", "BatchNorm2d", "GroupNorm", "RMSNorm"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(n, names[i])) return 1;
  return 0;
}

/* One layer call: checks it and returns the feature size after it. */
static int64_t layer_dim(C *c, const fs_node *call, int64_t d, prev *p) {
  if (call->kind != FS_N_CALL || call->kids[0]->kind != FS_N_NAME) {
    fsC_report(c, FS_SEV_ERROR, "layer", call->loc, "a model body holds layer calls such as `Linear(8, 8)`");
    return -1;
  }
  cv cls = fsC_eval(c, call->kids[0]);
  size_t npos = 0, nkw = 0;
  for (uint32_t i = 1; i < call->nkids; i++) if (call->kids[i]->kind == FS_N_KWARG) nkw++; else npos++;
  fsC_argbuf buf;
  fsC_argbuf_init(c, &buf, npos, nkw);
  cv *pos = buf.pos, *kwv = buf.kwv;
  const char **kw = buf.kw;
  for (uint32_t i = 1, a = 0, k = 0; i < call->nkids; i++) {
    const fs_node *x = call->kids[i];
    if (x->kind == FS_N_KWARG) { kw[k] = x->str; kwv[k++] = fsC_eval(c, x->kids[0]); }
    else pos[a++] = fsC_eval(c, x);
  }
  if (cls.k == CV_CLASS && cls.sub == CLS_MODEL) {
    const fs_node *decl = cls.p;
    frame f;
    if (fsC_enter(c, &f, decl, call, pos, npos, kw, kwv, nkw)) return -1;
    d = body_dim(c, decl->kids[1], d, p);
    fsC_leave(c, &f);
    return d;
  }
  /* a script's Module class or a torch module the checker does not model is
   * a layer whose sizes are not followed */
  if (cls.k == CV_CLASS && (cls.sub == CLS_NS || (cls.sub == CLS_PY && ((const pyclass *)cls.p)->module)))
    return -1;
  if (cls.k != CV_CLASS || cls.sub != CLS_SIG || ((const fsSig *)cls.p)->kind != FSSIG_LAYER) {
    if (cls.k != CV_UNKNOWN)
      fsC_report(c, FS_SEV_ERROR, "layer", call->kids[0]->loc, "`%s` is not a layer", call->kids[0]->str);
    return -1;
  }
  const fsSig *sig = cls.p;
  int *ps = buf.ps, *ks = buf.ks;
  if (sig->params && fsC_bind(c, sig, call, ps, ks)) return -1;
  if (!sig->params && (npos || nkw)) {
    fsC_report(c, FS_SEV_ERROR, "call", call->loc, "%s() takes no arguments (%zu given)", sig->name, npos + nkw);
    return -1;
  }
  const char *n = sig->name;
  int64_t in, out;
  layer_io(c, sig, pos, npos, kw, kwv, nkw, &in, &out);
  if (out == FEAT_SAME) out = d;
  if (!strcmp(n, "CausalSelfAttention")) {
    int64_t heads = int_of(layer_arg(sig, "heads", pos, npos, kw, kwv, nkw));
    if (in > 0 && heads > 0 && in % heads)
      fsC_report(c, FS_SEV_ERROR, "shape", call->loc,
                 "`CausalSelfAttention`: dim %lld is not divisible by heads %lld",
                 (long long)in, (long long)heads);
  }
  if (in >= 0 && d >= 0 && in != d) mismatch(c, call->loc, n, in, p);
  if (out != d || in >= 0) { p->loc = call->loc; p->d = out; }
  return out;
}

static int64_t body_dim(C *c, const fs_node *body, int64_t d, prev *p) {
  /* a body that defines `forward` runs it instead of its layers in
   * sequence: its layers are checked one by one, not chained */
  bool own_forward = fsA_block_def(body, "forward") != NULL;
  for (uint32_t i = 0; body && i < body->nkids; i++) {
    const fs_node *s = body->kids[i];
    if (own_forward) d = -1;
    switch (s->kind) {
    case FS_N_DEF:
      if (strcmp(s->str, "forward"))
        fsC_report(c, FS_SEV_ERROR, "layer", s->loc, "a model body may define `forward` only");
      break;
    case FS_N_EXPR: d = layer_dim(c, s->kids[0], d, p); break;
    case FS_N_ASSIGN:
      if (s->kids[0]->kind != FS_N_NAME) {
        fsC_report(c, FS_SEV_ERROR, "layer", s->kids[0]->loc, "a layer is named by a plain name: `fc1 = Linear(8, 8)`");
        break;
      }
      d = layer_dim(c, s->kids[1], d, p);
      break;
    case FS_N_REPEAT: {
      cv n = fsC_eval(c, s->kids[0]);
      const fs_value *x = n.k == CV_CONST ? n.p : NULL;
      int64_t d1 = body_dim(c, s->kids[1], d, p);
      if (x && x->type == FSV_INT && x->u.i >= 2 && d1 != d) d1 = body_dim(c, s->kids[1], d1, p);
      d = d1;
      break;
    }
    case FS_N_RESIDUAL: {
      prev q = *p;
      int64_t d1 = body_dim(c, s->kids[0], d, &q);
      if (d >= 0 && d1 >= 0 && d1 != d)
        fsC_report(c, FS_SEV_ERROR, "shape", s->loc,
                   "the residual body turns %lld features into %lld, but `x + body(x)` needs the same size",
                   (long long)d, (long long)d1);
      break;
    }
    case FS_N_PASS: break;
    default:
      fsC_report(c, FS_SEV_ERROR, "layer", s->loc, "only layers, `repeat`, `residual` and `def forward` can appear in a model body");
      break;
    }
  }
  return d;
}

void fsC_shape_model(C *c, const fs_node *decl, const fs_node *call, const cv *pos, size_t npos,
                     const char *const *kw, const cv *kwv, size_t nkw) {
  frame f;
  if (fsC_enter(c, &f, decl, call, pos, npos, kw, kwv, nkw)) return;
  prev p = {decl->name_loc, -1};
  body_dim(c, decl->kids[1], -1, &p);
  fsC_leave(c, &f);
}

void fsC_declare_model(C *c, const fs_node *decl) {
  fsC_shape_model(c, decl, NULL, NULL, 0, NULL, NULL, 0);
}

/* ---- Python's layer objects, nn.Sequential and class forwards ------------ */

/* The sizes recorded for object id: in -1, out -1 when none were. */
static const fsC_feat *feat_of(C *c, uint32_t id) {
  static const fsC_feat none = {-1, -1, {0, 0}};
  return id < c->capfeats && c->feats[id].loc.end ? &c->feats[id] : &none;
}

static void set_feat(C *c, uint32_t id, int64_t in, int64_t out, fs_loc loc) {
  if (in < 0 && out == -1) return;
  if (id >= c->capfeats) {
    size_t cap = c->capfeats ? c->capfeats : 64;
    while (cap <= id) cap *= 2;
    c->feats = fsA_xrealloc(c->feats, cap * sizeof *c->feats);
    memset(c->feats + c->capfeats, 0, (cap - c->capfeats) * sizeof *c->feats);
    c->capfeats = cap;
  }
  c->feats[id] = (fsC_feat){in, out, loc};
}

/* The model object a value is when it is one (not a phi of several). */
static int model_id(C *c, const cv *v, uint32_t *id) {
  if (v->k != CV_OBJ || fsC_o(c, v->id)->kind != OB_MODEL) return 0;
  *id = v->id;
  return 1;
}

cv fsC_new_layer(C *c, const fsSig *sig, const fs_node *call, const cv *pos, size_t npos,
                 const char *const *kw, const cv *kwv, size_t nkw) {
  cv m = fsC_new_model(c, sig->name, call->loc);
  int64_t in, out;
  layer_io(c, sig, pos, npos, kw, kwv, nkw, &in, &out);
  set_feat(c, m.id, in, out, call->loc);
  return m;
}

/* One layer applied to an input of size p->d (-1: not known; INPUT: the
 * enclosing Sequential's own input): reports a mismatch at `at`, returns the
 * size after it and leaves in p where it came from. *first gets the size the
 * input must have when the layer is the first to say. */
enum { INPUT = -3 };
static void apply_layer(C *c, uint32_t id, fs_loc at, prev *p, int64_t *first) {
  const fsC_feat *f = feat_of(c, id);
  if (f->in >= 0 && p->d >= 0 && f->in != p->d) mismatch(c, at, fsC_o(c, id)->cls, f->in, p);
  if (f->in >= 0 && p->d == INPUT && first) *first = f->in;
  if (f->out == FEAT_SAME) return;
  p->d = f->out;
  p->loc = at;
}

void fsC_sequential(C *c, uint32_t id, const fs_node *call, const cv *pos, size_t npos) {
  prev p = {call->loc, INPUT};
  int64_t in = -1;
  for (size_t i = 0; i < npos; i++) {
    uint32_t layer;
    if (!model_id(c, &pos[i], &layer)) { p.d = -1; continue; }
    apply_layer(c, layer, call->kids[1 + i]->loc, &p, &in);
  }
  /* its output: a size, its input's (only same-size layers), or not known */
  set_feat(c, id, in, p.d == INPUT ? FEAT_SAME : p.d, call->loc);
}

/* forward's walk: the sizes of its local names so far */
enum { FWD_VARS = 16 };
typedef struct fwd {
  C *c;
  cv self;
  const char *self_name;
  struct { const char *name; prev p; } var[FWD_VARS];
  size_t nvar;
  int64_t in;            /* the size forward's input must have, -1 when no layer says */
} fwd;

static prev *fwd_var(fwd *w, const char *name, int create) {
  for (size_t i = 0; i < w->nvar; i++) if (!strcmp(w->var[i].name, name)) return &w->var[i].p;
  if (!create || w->nvar == FWD_VARS) return NULL;
  w->var[w->nvar].name = name;
  return &w->var[w->nvar++].p;
}

/* The size of e's value (-1: not known), following `self.layer(x)` calls;
 * the expressions inside e are followed too, for their own mismatches. */
static prev fwd_expr(fwd *w, const fs_node *e) {
  prev none = {{0, 0}, -1};
  if (!e) return none;
  switch (e->kind) {
  case FS_N_NAME: {
    prev *v = fwd_var(w, e->str, 0);
    return v ? *v : none;
  }
  case FS_N_CALL: {
    const fs_node *f = e->kids[0];
    int one_arg = e->nkids == 2 && e->kids[1]->kind != FS_N_KWARG && e->kids[1]->kind != FS_N_STARRED &&
                  e->kids[1]->kind != FS_N_COMP;
    uint32_t layer;
    if (one_arg && f->kind == FS_N_ATTR && f->kids[0]->kind == FS_N_NAME && !strcmp(f->kids[0]->str, w->self_name)) {
      cv v = fsC_attr(w->c, &w->self, f->str);
      if (model_id(w->c, &v, &layer)) {
        prev p = fwd_expr(w, e->kids[1]);
        apply_layer(w->c, layer, e->loc, &p, &w->in);
        return p;
      }
    }
    break;
  }
  case FS_N_LAMBDA: case FS_N_COMP: return none; /* names of their own */
  default: break;
  }
  for (uint32_t i = 0; i < e->nkids; i++) fwd_expr(w, e->kids[i]);
  return none;
}

void fsC_forward_shapes(C *c, const cv *self, const fs_node *forward) {
  const fs_node *params = forward->kids[0];
  if (!params->nkids || !fsA_def_plain(forward)) return;
  fwd w = {.c = c, .self = *self, .self_name = params->kids[0]->str, .in = -1};
  if (params->nkids > 1) *fwd_var(&w, params->kids[1]->str, 1) = (prev){params->kids[1]->loc, INPUT};
  const fs_node *body = forward->kids[1];
  /* straight-line statements only: a branch or loop could assign either way */
  for (uint32_t i = 0; body && i < body->nkids; i++) {
    const fs_node *s = body->kids[i];
    if (s->kind == FS_N_EXPR) { fwd_expr(&w, s->kids[0]); continue; }
    if (s->kind == FS_N_RETURN) { /* the model's own sizes, as a layer of another */
      prev p = fwd_expr(&w, fsC_kid(s, 0));
      uint32_t id;
      if (model_id(c, self, &id)) set_feat(c, id, w.in, p.d == INPUT ? FEAT_SAME : p.d, forward->name_loc);
      return;
    }
    if (s->kind != FS_N_ASSIGN && s->kind != FS_N_AUGASSIGN && s->kind != FS_N_PASS) return;
    if (s->kind == FS_N_PASS) continue;
    prev p = fwd_expr(&w, s->kids[1]);
    for (uint32_t t = 0; t < s->nkids; t++) {
      if (t == 1) continue;
      const fs_node *target = s->kids[t];
      if (target->kind != FS_N_NAME) return; /* `a, b = ...`, `self.h = ...`: not followed further */
      prev *v = fwd_var(&w, target->str, 1);
      if (!v) return;
      *v = s->kind == FS_N_ASSIGN ? p : (prev){{0, 0}, -1};
    }
  }
}
