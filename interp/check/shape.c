/* shape.c -- model declarations: every layer names a layer class with
 * a valid call, and the feature size flows from layer to layer (Linear(784,
 * 256) followed by Linear(128, 10) is an error at the second). Sizes are
 * computed from the layer arguments with the declaration's parameters bound;
 * -1 is "not known" (an input of unknown shape, a Flatten) and checks nothing. */
#include "check_int.h"

#include <string.h>

typedef struct prev { fs_loc loc; int64_t d; } prev;

static int64_t int_arg(const cargs *a, const char *name) {
  const cv *v = fsC_arg(a, name, NULL);
  const fs_value *x = v && v->k == CV_CONST ? v->p : NULL;
  return x && x->type == FSV_INT ? x->u.i : -1;
}

static void mismatch(C *c, const fs_node *call, const char *what, int64_t want, const prev *p) {
  fs_diag *g = fsC_report(c, FS_SEV_ERROR, "shape", call->loc,
                          "`%s` expects %lld input features, but the layer before it gives %lld",
                          what, (long long)want, (long long)p->d);
  if (g) fsD_note(g, c->src, p->loc, "`%s` gives %lld features", fsC_text(c, p->loc), (long long)p->d);
}

static int64_t body_dim(C *c, const fs_node *body, int64_t d, prev *p);

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
  cargs a = {call, sig, pos, npos, kw, kwv, nkw, ps, ks};
  const char *n = sig->name;
  int64_t in = -1, out = d;
  if (!strcmp(n, "Linear")) { in = int_arg(&a, "in_features"); out = int_arg(&a, "out_features"); }
  else if (!strcmp(n, "Embedding")) out = int_arg(&a, "embedding_dim");
  else if (!strcmp(n, "PositionalEmbedding")) in = out = int_arg(&a, "dim");
  else if (!strcmp(n, "LayerNorm")) in = out = int_arg(&a, "normalized_shape");
  else if (!strcmp(n, "CausalSelfAttention")) {
    in = out = int_arg(&a, "dim");
    int64_t heads = int_arg(&a, "heads");
    if (in > 0 && heads > 0 && in % heads)
      fsC_report(c, FS_SEV_ERROR, "shape", call->loc,
                 "`CausalSelfAttention`: dim %lld is not divisible by heads %lld",
                 (long long)in, (long long)heads);
  } else if (!keeps_features(n)) {
    out = -1;
  }
  if (in >= 0 && d >= 0 && in != d) mismatch(c, call, n, in, p);
  if (out != d || in >= 0) { p->loc = call->loc; p->d = out; }
  return out;
}

static int64_t body_dim(C *c, const fs_node *body, int64_t d, prev *p) {
  for (uint32_t i = 0; body && i < body->nkids; i++) {
    const fs_node *s = body->kids[i];
    switch (s->kind) {
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
      fsC_report(c, FS_SEV_ERROR, "layer", s->loc, "only layers, `repeat` and `residual` can appear in a model body");
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
