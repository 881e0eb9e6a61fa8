/* query.c -- what the checker knows of one expression, in words, for an
 * editor's hover and completion (fsC_query in check.h; the language server,
 * interp/cli/lsp.c, asks). Invariant: it only reads the abstract state the
 * check built anyway; nothing here decides a rule, so hover cannot disagree
 * with a diagnostic. check.c calls fsC_query_seen where an expression is
 * evaluated and where a name is assigned. */
#include "check_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

typedef struct text { char *s; size_t n, cap; } text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  if (t->n + 1 >= t->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  if (k > 0) t->n = t->n + (size_t)k < t->cap ? t->n + (size_t)k : t->cap - 1;
}

/* "strategy fsdp" of the fabric that made or set up an object. */
static void strategy_of(C *c, text *t, uint32_t fabric) {
  const fsF_config *cfg = fsC_cfg(c, fabric);
  if (cfg) put(t, " with strategy %s", cfg->strategy_name);
}

static void describe_model(C *c, text *t, const cobj *o) {
  const cobj *raw = o->wrapped ? fsC_o(c, o->inner) : o;
  put(t, "%s", raw->cls ? raw->cls : "Module");
  const char *sep = " \xe2\x80\x94 "; /* an em dash */
  if (o->wrapped) {
    put(t, "%sset up with Fabric", sep);
    strategy_of(c, t, o->fabric);
    sep = "; ";
  }
  if (raw->meta.m & MB_T) {
    put(t, "%sparameters on the meta device%s", sep, raw->meta.m & MB_F ? " on some paths" : "");
    if (raw->why_kind == WHY_INIT || raw->why_kind == WHY_DEVICE) {
      put(t, " (built under `%s`", fsC_text(c, raw->why_loc));
      if (raw->why_kind == WHY_INIT) strategy_of(c, t, raw->fabric);
      put(t, ")");
    }
  } else if (raw->empty.m & MB_T) {
    put(t, "%sparameters in uninitialized memory (built under `%s`)", sep, fsC_text(c, raw->why_loc));
  } else if (!o->wrapped) {
    put(t, "%snot set up with Fabric yet", sep);
  }
}

static void describe(C *c, text *t, const cv *v, int depth) {
  switch (v->k) {
  case CV_CONST: {
    char *r = fsV_repr(v->p);
    put(t, "%s = %s", fsV_type_name(v->p), r ? r : "?");
    free(r);
    return;
  }
  case CV_SEQ: put(t, "%s of %u item%s", v->sub ? "tuple" : "list", v->n, v->n == 1 ? "" : "s"); return;
  case CV_DICT: put(t, "dict of %u key%s", v->n, v->n == 1 ? "" : "s"); return;
  case CV_TENSOR: put(t, "Tensor%s", v->id ? " computed by a model set up with Fabric" : ""); return;
  case CV_FUNC: put(t, "function %s", ((const fs_node *)v->p)->str); return;
  case CV_CLASS:
    switch (v->sub) {
    case CLS_SIG: put(t, "builtin %s", ((const fsSig *)v->p)->name); return;
    case CLS_MODEL: put(t, "model block %s", ((const fs_node *)v->p)->str); return;
    case CLS_PY: put(t, "class %s%s", ((const pyclass *)v->p)->name,
                     ((const pyclass *)v->p)->module ? " (an nn.Module)" : ""); return;
    default: put(t, "%s (not modelled by the checker)", (const char *)v->p); return;
    }
  case CV_PHI: {
    const cv *alts = v->p;
    put(t, "one of, by path: ");
    for (uint32_t i = 0; i < v->n && depth < 2; i++) {
      if (i) put(t, " | ");
      describe(c, t, &alts[i], depth + 1);
    }
    return;
  }
  case CV_OBJ: break;
  default: return;
  }
  const cobj *o = fsC_o(c, v->id);
  switch (o->kind) {
  case OB_MODEL: describe_model(c, t, o); return;
  case OB_FABRIC: {
    const fsF_config *cfg = fsC_cfg(c, v->id);
    put(t, "Fabric");
    if (cfg)
      put(t, " \xe2\x80\x94 strategy %s, accelerator %s, %d device%s, precision %s", cfg->strategy_name,
          fsF_accel_name(cfg->accel), cfg->devices, cfg->devices == 1 ? "" : "s", fsF_prec_name(cfg->precision));
    put(t, "; %s", o->launched.m == MB_T ? "launched" : o->launched.m & MB_T ? "launched on some paths"
                                                                             : "not launched");
    return;
  }
  case OB_OPTIM: {
    const cobj *raw = o->wrapped ? fsC_o(c, o->inner) : o;
    put(t, "Optimizer");
    if (raw->why_loc.end > raw->why_loc.start) put(t, " over `%s`", fsC_text(c, raw->why_loc));
    put(t, " \xe2\x80\x94 %s", o->wrapped ? "set up with Fabric" : "not set up with Fabric yet");
    if (raw->pmeta.m & MB_T) put(t, "; references parameters on the meta device");
    return;
  }
  case OB_LOADER:
    put(t, "DataLoader \xe2\x80\x94 %s", o->wrapped ? "set up with Fabric" : "not set up with Fabric yet");
    return;
  case OB_DATASET: put(t, "Dataset"); return;
  case OB_PARAMS: put(t, "the parameters of a model"); return;
  case OB_STRATEGY: put(t, "%s", fsF_cls_name(o->strat->cls)); return;
  case OB_CTX: put(t, "context manager"); return;
  case OB_INSTANCE: put(t, "instance of %s", o->pycls ? o->pycls->name : "a class"); return;
  default: return;
  }
}

void fsC_query_seen(C *c, fs_loc loc, const cv *v) {
  fsC_query *q = c->o->query;
  if (loc.start != q->span.start || loc.end != q->span.end) return;
  /* a def analysed once per call and once uncalled: the first known value wins */
  if (q->found && (v->k == CV_UNKNOWN || v->k == CV_UNDEF)) return;
  if (q->found && q->about[0]) return;
  q->found = 1;
  const char *type = fsC_type_name(c, v);
  snprintf(q->type, sizeof q->type, "%s", type ? type : "");
  snprintf(q->builtin, sizeof q->builtin, "%s",
           v->k == CV_CLASS && v->sub == CLS_SIG ? ((const fsSig *)v->p)->name : "");
  snprintf(q->ns, sizeof q->ns, "%s", v->k == CV_CLASS && v->sub == CLS_NS ? (const char *)v->p : "");
  text t = {q->about, 0, sizeof q->about};
  q->about[0] = '\0';
  describe(c, &t, v, 0);
  if (t.n + 1 >= t.cap) { /* cut at the buffer's end: not inside a UTF-8 sequence (source text is in it) */
    size_t lead = t.n;
    while (lead > 0 && ((unsigned char)q->about[lead - 1] & 0xC0) == 0x80) lead--;
    if (lead > 0) {
      unsigned char b = (unsigned char)q->about[lead - 1];
      size_t want = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
      if (t.n - (lead - 1) < want) q->about[lead - 1] = '\0';
    }
  }
}
