/* builtins_rt.c -- values over the runtime: modules and model bodies,
 * tensors, losses, optimizers, data sets and loaders, device()/no_grad(),
 * and the Fabric object. Every Fabric method first runs its validation
 * from fabric.h on the objects' states, so check and run share one rule. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "config.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd.h"
#include "backend.h"
#include "dataset.h"
#include "eval_impl.h"
#include "fabric.h"
#include "fsdp.h"
#include "launch.h"
#include "loader.h"
#include "logger.h"
#include "optim.h"
#include "plan.h"
#include "progress.h"
#include "rng.h"
#include "safetensors.h"
#include "sample.h"
#ifdef FS_HAVE_CUDA
#include "backend_cuda.h"
#endif

#define NATIVE(f) static fs_value *f(fsE_ctx *E, fs_value *self, fs_value **s, const fsV_args *a)

static fs_value *rt_fail(void) {
  fsV_seterr("%s", fsT_error()[0] ? fsT_error() : "runtime error");
  return NULL;
}

static int64_t ival(const fs_value *v) { return v->type == FSV_INT ? v->u.i : v->u.b; }

static fs_value *err_own(char *err) {
  fsV_seterr("%s", err ? err : "out of memory");
  free(err);
  return NULL;
}

/* ---- tensors ---------------------------------------------------------------- */

static const fsV_class tensor_class;

static fs_value *tensor_value(fs_tensor *t) { /* takes t */
  if (!t) return rt_fail();
  return fsV_obj(&tensor_class, t);
}

static void tensor_free(void *p) { fsT_release(p); }

static fs_tensor *as_tensor(const fs_value *v) { return fsV_objdata(v, &tensor_class); }

static fs_value *shape_tuple(const fs_tensor *t) {
  fs_value *tu = fsV_tuple((size_t)t->rank);
  for (int i = 0; tu && i < t->rank; i++) {
    fs_value *d = fsV_int(t->shape[i]);
    if (!d) {
      tu->u.seq.n = (size_t)i;
      fsV_release(tu);
      return NULL;
    }
    fsV_seq_set(tu, (size_t)i, d);
  }
  return tu;
}

static fs_value *item_value(const fs_tensor *t) {
  double d;
  if (fsG_item(t, &d) < 0) return rt_fail();
  return t->dtype == FS_I64 ? fsV_int((int64_t)d) : fsV_float(d);
}

static char *tensor_repr(fs_value *v) {
  fs_tensor *t = v->u.obj.data;
  fsV_buf b = {0};
  double d;
  char num[40];
  if (t->numel == 1 && t->data && fsG_item(t, &d) == 0) {
    if (t->dtype == FS_I64) fsV_buf_printf(&b, "tensor(%lld)", (long long)d);
    else fsV_buf_printf(&b, "tensor(%.4f)", d);
  } else {
    fsV_buf_printf(&b, "tensor(shape=%s, dtype=%s, device=%s)",
                   fsT_shape_str(t, num, sizeof num), fsT_dtype_name(t->dtype),
                   fsT_device_name(t->device));
  }
  return fsV_buf_take(&b);
}

static fs_value *tensor_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b) {
  fs_tensor *ta = as_tensor(a), *tb = as_tensor(b);
  bool first = ta == NULL; /* the scalar comes first */
  fs_tensor *t = ta ? ta : tb;
  const fs_value *other = ta ? b : a;
  static const fsG_cmp cmps[] = {FSG_EQ, FSG_NE, FSG_LT, FSG_LE, FSG_GT, FSG_GE};
  static const fsB_binop ar[] = {FSB_ADD, FSB_SUB, FSB_MUL, FSB_DIV};
  if (!t || (!as_tensor(other) && !fsV_is_number(other))) return NULL;
  if (op >= FS_OP_EQ && op <= FS_OP_GE) {
    fsG_cmp c = cmps[op - FS_OP_EQ];
    if (first) c = c == FSG_LT ? FSG_GT : c == FSG_GT ? FSG_LT : c == FSG_LE ? FSG_GE : c == FSG_GE ? FSG_LE : c;
    return tensor_value(ta && tb ? fsG_compare(c, ta, tb) : fsG_compare_scalar(c, t, fsV_to_double(other), false));
  }
  if (op < FS_OP_ADD || op > FS_OP_DIV) return NULL;
  if (ta && tb) return tensor_value(fsG_binary(ar[op - FS_OP_ADD], ta, tb));
  return tensor_value(fsG_binary_scalar(ar[op - FS_OP_ADD], t, fsV_to_double(other),
                                        other->type != FSV_FLOAT, first));
}

static fs_value *tensor_unop(fsE_ctx *E, fs_op op, fs_value *v) {
  if (op == FS_OP_POS) return fsV_retain(v);
  return tensor_value(fsG_neg(v->u.obj.data));
}

static int cuda_index(fsE_ctx *E);

static fs_value *tensor_getattr(fsE_ctx *E, fs_value *v, const char *name) {
  fs_tensor *t = v->u.obj.data;
  if (strcmp(name, "shape") == 0) return shape_tuple(t);
  if (strcmp(name, "dtype") == 0) return fsV_cstr(fsT_dtype_name(t->dtype));
  if (strcmp(name, "device") == 0) {
    if (t->device != FS_DEV_CUDA) return fsV_cstr(fsT_device_name(t->device));
    char d[24];
    snprintf(d, sizeof d, "cuda:%d", cuda_index(E)); /* as torch prints it */
    return fsV_cstr(d);
  }
  if (strcmp(name, "requires_grad") == 0) return fsV_bool(t->requires_grad);
  if (strcmp(name, "grad") == 0) return t->grad ? tensor_value(fsT_retain(t->grad)) : fsV_none();
  return NULL;
}

static int64_t tensor_len(fsE_ctx *E, fs_value *v) {
  fs_tensor *t = v->u.obj.data;
  if (t->rank == 0) {
    fsV_seterr("len() of a 0-d tensor");
    return -1;
  }
  return t->shape[0];
}

static fsF_fabric *current_fabric(fsE_ctx *E);

/* t[i]: row i along the first dimension, as a new tensor (values only, off the tape). */
static fs_value *tensor_index(fsE_ctx *E, fs_value *v, fs_value *key) {
  fs_tensor *t = v->u.obj.data;
  if (key->type != FSV_INT && key->type != FSV_BOOL) {
    fsV_seterr("tensor indices must be integers, not %s", fsV_type_name(key));
    return NULL;
  }
  if (t->rank == 0 || !t->data) {
    fsV_seterr(t->rank == 0 ? "invalid index of a 0-dim tensor" : "a tensor on the meta device has no values");
    return NULL;
  }
  int64_t i = ival(key), n = t->shape[0];
  if (i < 0) i += n;
  if (i < 0 || i >= n) {
    fsV_seterr("index %lld is out of bounds for dimension 0 with size %lld", (long long)ival(key), (long long)n);
    return NULL;
  }
  fs_tensor *r = fsT_new(t->dtype, t->device, t->rank - 1, t->shape + 1);
  size_t row = r ? fsT_nbytes(r) : 0;
  if (!r || fsB_transfer(t->device, r->data, t->device, (const char *)t->data + (size_t)i * row, row) < 0) {
    fsT_release(r);
    return rt_fail();
  }
  return tensor_value(r);
}

static fs_value *tensor_method(fsE_ctx *E, fs_value *v, const char *name, const fsV_args *a) {
  const fsSig *sig = fsSig_member("Tensor", name);
  if (!sig || sig->kind != FSSIG_METHOD) return NULL;
  fs_value *s[4];
  if (fsE_bind(E, sig, a, s) < 0) return NULL;
  fs_tensor *t = v->u.obj.data;
  fs_value *r = NULL;
  if (strcmp(name, "item") == 0) r = item_value(t);
  else if (strcmp(name, "argmax") == 0) {
    if (s[0]->type == FSV_NONE) {
      int64_t flat[1] = {t->numel};
      fs_tensor *f = fsT_view(t, 1, flat);
      r = f ? tensor_value(fsG_argmax(f, 0)) : rt_fail();
      fsT_release(f);
    } else {
      r = tensor_value(fsG_argmax(t, (int)ival(s[0])));
    }
  } else if (strcmp(name, "sum") == 0 || strcmp(name, "mean") == 0) {
    if (s[0]->type != FSV_NONE) fsV_seterr("%s(dim=...) is not supported; only the total", name);
    else r = tensor_value(name[0] == 's' ? fsG_sum(t) : fsG_mean(t));
  } else if (strcmp(name, "float") == 0) r = tensor_value(fsT_to_dtype(t, FS_F32));
  else if (strcmp(name, "backward") == 0) {
    fsF_fabric *f = current_fabric(E);
    fsF_issues iss;
    fsF_issues_init(&iss);
    if (f && fsF_check_tensor_backward(f, &iss) < 0) fsV_seterr("%s", fsF_error(&iss)->message);
    else r = fsG_backward(t) < 0 ? rt_fail() : fsV_none();
    fsF_issues_free(&iss);
  } else if (strcmp(name, "size") == 0) {
    if (s[0]->type == FSV_NONE) r = shape_tuple(t);
    else {
      int64_t d = ival(s[0]);
      if (d < 0) d += t->rank;
      if (d < 0 || d >= t->rank) fsV_seterr("Dimension out of range (got %lld)", (long long)ival(s[0]));
      else r = fsV_int(t->shape[d]);
    }
  } else if (strcmp(name, "numel") == 0) r = fsV_int(t->numel);
  else if (strcmp(name, "detach") == 0) {
    fs_tensor *c = fsT_copy(t);
    r = tensor_value(c);
  } else if (strcmp(name, "tolist") == 0) {
    if (t->rank == 0) r = item_value(t);
    else if (t->rank == 1 && t->data) {
      fs_tensor *h = fsT_to_device(t, FS_DEV_CPU);
      r = h ? fsV_list((size_t)t->numel) : rt_fail();
      for (int64_t i = 0; r && i < t->numel; i++) {
        double d = fsT_get(h, i);
        fs_value *x = t->dtype == FS_I64 ? fsV_int((int64_t)d) : fsV_float(d);
        if (!x) {
          fsV_release(r);
          r = NULL;
        } else fsV_list_append(r, x);
      }
      fsT_release(h);
    } else fsV_seterr("tolist() of a tensor of rank > 1 is not supported");
  }
  fsE_unbind(sig, s);
  return r;
}

static const fsV_class tensor_class = {
  .name = "Tensor", .getattr = tensor_getattr, .call_method = tensor_method,
  .binop = tensor_binop, .unop = tensor_unop, .index = tensor_index, .len = tensor_len, .repr = tensor_repr,
  .free = tensor_free,
};

static fs_tensor *need_tensor(const fs_value *v, const char *fn, const char *arg) {
  fs_tensor *t = as_tensor(v);
  if (!t) fsV_seterr("%s(): argument '%s' must be a Tensor, not %s", fn, arg, fsV_type_name(v));
  return t;
}

NATIVE(b_cross_entropy) {
  fs_tensor *x = need_tensor(s[0], "cross_entropy", "input"), *y = x ? need_tensor(s[1], "cross_entropy", "target") : NULL;
  return y ? tensor_value(fsG_cross_entropy(x, y)) : NULL;
}

NATIVE(b_mse_loss) {
  fs_tensor *x = need_tensor(s[0], "mse_loss", "input"), *y = x ? need_tensor(s[1], "mse_loss", "target") : NULL;
  return y ? tensor_value(fsG_mse_loss(x, y)) : NULL;
}

/* ---- context managers: device(...), no_grad() ----------------------------- */

typedef struct ctxv {
  int kind;          /* 0 device, 1 no_grad, 2 init_module, 3 nothing to do (no_backward_sync on one rank) */
  fs_device dev, saved_dev;
  int index;         /* kind 0 on cuda: the GPU's index, or -1 when none was named */
  bool saved_grad;
  bool *flag;        /* kind 3: set while inside (the Fabric's no_sync), or NULL */
  fs_value *owner;   /* held: the object flag lives in */
} ctxv;

static const fsV_class ctx_class;

static fs_value *ctx_enter(fsE_ctx *E, fs_value *v) {
  ctxv *c = v->u.obj.data;
  if (c->kind == 1) {
    c->saved_grad = fsG_set_grad_enabled(false);
  } else if (c->kind != 3) {
    c->saved_dev = E->device;
    E->device = c->dev;
  } else if (c->flag) {
    *c->flag = true;
  }
  return fsV_retain(v);
}

static int ctx_exit(fsE_ctx *E, fs_value *v) {
  ctxv *c = v->u.obj.data;
  if (c->kind == 1) fsG_set_grad_enabled(c->saved_grad);
  else if (c->kind != 3) E->device = c->saved_dev;
  else if (c->flag) *c->flag = false;
  return 0;
}

static char *ctx_repr(fs_value *v) {
  ctxv *c = v->u.obj.data;
  fsV_buf b = {0};
  if (c->kind == 0 && c->index >= 0) fsV_buf_printf(&b, "device(type='%s', index=%d)", fsT_device_name(c->dev), c->index);
  else if (c->kind == 0) fsV_buf_printf(&b, "device(type='%s')", fsT_device_name(c->dev));
  else fsV_buf_puts(&b, c->kind == 1 ? "<no_grad>" : c->kind == 2 ? "<init_module>" : "<no_backward_sync>");
  return fsV_buf_take(&b);
}

static void ctx_free(void *p) {
  fsV_release(((ctxv *)p)->owner);
  free(p);
}

static const fsV_class ctx_class = {
  .name = "context", .enter = ctx_enter, .exit = ctx_exit, .repr = ctx_repr, .free = ctx_free,
};

static fs_value *make_ctx(int kind, fs_device dev) {
  ctxv *c = calloc(1, sizeof *c);
  if (!c) {
    fsV_seterr("out of memory");
    return NULL;
  }
  c->kind = kind;
  c->dev = dev;
  c->index = -1;
  return fsV_obj(&ctx_class, c);
}

NATIVE(b_device) {
  const char *t = s[0]->u.str.s;
  for (int d = 0; d < FS_DEV__COUNT; d++)
    if (strcmp(t, fsT_device_name((fs_device)d)) == 0 ||
        (d == FS_DEV_CUDA && strncmp(t, "cuda:", 5) == 0))
      return make_ctx(0, (fs_device)d);
  fsV_seterr("Expected one of cpu, cuda, meta device type at start of device string: %s", t);
  return NULL;
}

NATIVE(b_no_grad) { return make_ctx(1, FS_DEV_CPU); }

/* ---- modules -------------------------------------------------------------- */

typedef struct modv {
  fs_module *m;
  char *cls;      /* "Linear", "MLP" */
  fsF_model st;   /* what Fabric's rules see */
  fsSH_model *sh; /* set up under FSDP: the shards, or NULL */
  fs_device dev;  /* where it was built or set up (meta parameters aside) */
} modv;

static const fsV_class module_class;

static void modv_free(void *p) {
  modv *mv = p;
  fsSH_free(mv->sh);
  fsM_release(mv->m);
  free(mv->cls);
  free(mv);
}

static bool has_meta(fs_module *m) {
  fsM_param *ps;
  int64_t n = fsM_parameters(m, &ps);
  bool meta = false;
  for (int64_t i = 0; i < n; i++) meta |= ps[i].t->device == FS_DEV_META;
  if (n >= 0) fsM_params_free(ps, n);
  return meta;
}

/* A Module value for m (taken). Built outside a model body, it is complete:
 * it gets its initial values now unless parameters go to the meta device. */
static fs_value *module_value(fsE_ctx *E, fs_module *m, const char *cls) {
  if (!m) return rt_fail();
  modv *mv = calloc(1, sizeof *mv);
  if (!mv || !(mv->cls = strdup(cls))) {
    free(mv);
    fsM_release(m);
    fsV_seterr("out of memory");
    return NULL;
  }
  mv->m = m;
  mv->dev = E->device == FS_DEV_META ? FS_DEV_CPU : E->device;
  if (!E->building && E->device != FS_DEV_META && !E->opt->plan && fsM_materialize(m, E->device, E->seed) < 0) {
    modv_free(mv);
    return rt_fail();
  }
  /* plan: everything stays on meta; the rules see where it would be */
  bool meta = E->opt->plan ? E->device == FS_DEV_META : has_meta(m);
  mv->st = (fsF_model){.class_name = mv->cls, .is_module = 1, .meta = meta};
  return fsV_obj(&module_class, mv);
}

int fsE_append_layer(fsE_ctx *E, const char *key, fs_value *layer) {
  modv *mv = fsV_objdata(layer, &module_class);
  if (!mv) return 0;
  if (mv->m->refcount > 1) {
    fsV_seterr("this %s is already part of a model; create a new one for each use", mv->cls);
    return -1;
  }
  if (fsM_append(E->building, key, fsM_retain(mv->m)) < 0) {
    rt_fail();
    return -1;
  }
  return 1;
}

static fs_module *build_raw(fsE_ctx *E, const fs_node *body, fsM_kind kind) {
  fs_module *seq = kind == FSM_RESIDUAL ? fsM_residual() : fsM_sequential(), *saved = E->building;
  if (!seq) {
    rt_fail();
    return NULL;
  }
  E->building = seq;
  fsE_flow fl = fsE_exec_block(E, body);
  E->building = saved;
  if (fl == FSE_ERROR || fl == FSE_RETURN) {
    if (fl == FSE_RETURN) {
      fsV_release(E->retval);
      E->retval = NULL;
      fsV_seterr("'return' is not allowed in a model body");
    }
    fsM_release(seq);
    return NULL;
  }
  return seq;
}

fs_value *fsE_build_sequence(fsE_ctx *E, const fs_node *body, fsM_kind kind, const char *cls) {
  fs_module *m = build_raw(E, body, kind);
  return m ? module_value(E, m, cls ? cls : fsM_kind_name(kind)) : NULL;
}

fs_value *fsE_build_repeat(fsE_ctx *E, int64_t n, const fs_node *body) {
  fs_module *b = build_raw(E, body, FSM_SEQUENTIAL);
  return b ? module_value(E, fsM_repeat(n, b), "Repeat") : NULL;
}

NATIVE(l_linear) { return module_value(E, fsM_linear(ival(s[0]), ival(s[1]), fsV_truthy(s[2])), "Linear"); }
NATIVE(l_embedding) { return module_value(E, fsM_embedding(ival(s[0]), ival(s[1])), "Embedding"); }
NATIVE(l_posemb) { return module_value(E, fsM_posemb(ival(s[0]), ival(s[1])), "PositionalEmbedding"); }
NATIVE(l_layernorm) { return module_value(E, fsM_layernorm(ival(s[0]), fsV_to_double(s[1])), "LayerNorm"); }
NATIVE(l_relu) { return module_value(E, fsM_activation(FSM_RELU), "ReLU"); }
NATIVE(l_tanh) { return module_value(E, fsM_activation(FSM_TANH), "Tanh"); }
NATIVE(l_sigmoid) { return module_value(E, fsM_activation(FSM_SIGMOID), "Sigmoid"); }
NATIVE(l_silu) { return module_value(E, fsM_activation(FSM_SILU), "SiLU"); }
NATIVE(l_dropout) { return module_value(E, fsM_dropout(fsV_to_double(s[0])), "Dropout"); }
NATIVE(l_attention) {
  return module_value(E, fsM_attention(ival(s[0]), ival(s[1]), fsV_truthy(s[2])), "CausalSelfAttention");
}

NATIVE(l_gelu) {
  const char *ap = s[0]->u.str.s;
  if (strcmp(ap, "none") && strcmp(ap, "tanh")) {
    fsV_seterr("GELU(): approximate must be 'none' or 'tanh', not '%s'", ap);
    return NULL;
  }
  return module_value(E, fsM_gelu(ap[0] == 't'), "GELU");
}

NATIVE(l_flatten) {
  if (ival(s[0]) != 1 || ival(s[1]) != -1) {
    fsV_seterr("Flatten(): only start_dim=1, end_dim=-1 is supported");
    return NULL;
  }
  return module_value(E, fsM_activation(FSM_FLATTEN), "Flatten");
}

static char *module_repr(fs_value *v) {
  modv *mv = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "%s(%lld parameters%s)", mv->cls, (long long)fsM_num_parameters(mv->m),
                 has_meta(mv->m) && !mv->sh ? ", on meta" : "");
  return fsV_buf_take(&b);
}

typedef struct optv optv;
static fs_value *plan_done(fsE_ctx *E, const optv *ov);

static fs_value *module_call(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  modv *mv = v->u.obj.data;
  if (a->npos != 1 || a->nkw) {
    fsV_seterr("%s.forward() takes exactly one tensor argument", mv->cls);
    return NULL;
  }
  if (E->opt->plan) return plan_done(E, NULL); /* no optimizer was set up before the first step */
  fs_tensor *x = need_tensor(a->pos[0], "forward", "input");
  return x ? tensor_value(mv->sh ? fsSH_forward(mv->sh, x) : fsM_forward(mv->m, x)) : NULL;
}

/* One entry of parameters() (the tensor) or named_parameters() ((name, tensor)). */
static fs_value *param_item(const char *name, fs_tensor *t, bool named) {
  fs_value *tv = tensor_value(fsT_retain(t));
  return tv && named ? fsV_pair(fsV_cstr(name), tv) : tv;
}

/* FSDP's parameters(): the units' flat shards, "<unit>._flat_param" as torch's FlatParameter */
static fs_value *flat_params(fsSH_model *sh, bool named) {
  fs_value *l = fsV_list(0);
  for (int k = 0; l && k < sh->nunits; k++) {
    char name[64];
    snprintf(name, sizeof name, "%d._flat_param", k);
    fs_value *item = param_item(name, sh->units[k].flat, named);
    if (!item || fsV_list_append(l, item) < 0) {
      fsV_release(l);
      l = NULL;
    }
  }
  return l;
}

static fs_value *params_list(modv *mv, bool named) {
  if (mv->sh) return flat_params(mv->sh, named);
  fsM_param *ps;
  int64_t n = fsM_parameters(mv->m, &ps);
  if (n < 0) return rt_fail();
  fs_value *l = fsV_list((size_t)n);
  for (int64_t i = 0; l && i < n; i++) {
    fs_value *item = param_item(ps[i].name, ps[i].t, named);
    if (!item) {
      fsV_release(l);
      l = NULL;
    } else {
      fsV_list_append(l, item);
    }
  }
  fsM_params_free(ps, n);
  return l;
}

/* state_dict(): name -> parameter (the tensors themselves, as torch's are views) */
static fs_value *state_dict(modv *mv) {
  fs_value *l = params_list(mv, true), *d = l ? fsV_dict() : NULL;
  for (size_t i = 0; d && i < l->u.seq.n; i++) {
    fs_value *p = l->u.seq.items[i];
    if (fsV_dict_set(d, p->u.seq.items[0], fsV_retain(p->u.seq.items[1])) < 0) {
      fsV_release(d);
      d = NULL;
    }
  }
  fsV_release(l);
  return d;
}

/* load_state_dict(sd, strict): copies matching tensors into the parameters
 * (giving meta ones storage); strict: torch's missing/unexpected-key error. */
static fs_value *load_state_dict(modv *mv, fs_value *sd, bool strict) {
  fsM_param *ps;
  int64_t n = fsM_parameters(mv->m, &ps);
  if (n < 0) return rt_fail();
  fsV_buf missing = {0}, unexpected = {0};
  fs_value *r = NULL;
  for (int64_t i = 0; i < n; i++) {
    fs_value *v = fsV_dict_getstr(sd, ps[i].name);
    fs_tensor *src = v ? as_tensor(v) : NULL, *dst = ps[i].t;
    if (!src) {
      fsV_buf_printf(&missing, "%s\"%s\"", missing.n ? ", " : "", ps[i].name);
      continue;
    }
    if (!fsT_same_shape(src, dst) || !src->data) {
      char a[64], b[64];
      fsV_seterr("size mismatch for %s: copying a param with shape %s from checkpoint, the shape in "
                 "current model is %s.", ps[i].name, fsT_shape_str(src, a, sizeof a), fsT_shape_str(dst, b, sizeof b));
      goto done;
    }
    fs_tensor *conv = fsT_to_dtype(src, dst->dtype);
    if (!conv || (!dst->data && fsT_alloc_storage(dst, src->device) < 0) ||
        fsB_transfer(dst->device, dst->data, conv->device, conv->data, fsT_nbytes(dst)) < 0) {
      fsT_release(conv);
      rt_fail();
      goto done;
    }
    fsT_release(conv);
  }
  for (size_t k = 0; k < sd->u.dict.n; k++) {
    const fs_value *key = sd->u.dict.keys[k];
    bool known = false;
    for (int64_t i = 0; i < n && !known; i++)
      known = key->type == FSV_STR && strcmp(key->u.str.s, ps[i].name) == 0;
    if (!known) {
      char *t = fsV_tostr(key);
      fsV_buf_printf(&unexpected, "%s\"%s\"", unexpected.n ? ", " : "", t ? t : "?");
      free(t);
    }
  }
  if (strict && (missing.n || unexpected.n))
    fsV_seterr("Error(s) in loading state_dict for %s: %s%s%s%s%s", mv->cls,
               missing.n ? "Missing key(s) in state_dict: " : "", missing.n ? missing.s : "",
               missing.n && unexpected.n ? ". " : "", unexpected.n ? "Unexpected key(s) in state_dict: " : "",
               unexpected.n ? unexpected.s : "");
  else {
    mv->st.meta = has_meta(mv->m);
    r = fsV_none();
  }
done:
  free(missing.s);
  free(unexpected.s);
  fsM_params_free(ps, n);
  return r;
}

/* The model's forward on tokens made on the host, moved to its device. */
static fs_tensor *lm_forward(void *ud, fs_tensor *idx) {
  modv *mv = ud;
  fs_tensor *x = fsT_to_device(idx, mv->dev), *y = NULL;
  if (x) y = mv->sh ? fsSH_forward(mv->sh, x) : fsM_forward(mv->m, x);
  fsT_release(x);
  return y;
}

/* model.generate(prompt, max_new_tokens, temperature, top_k): slots in
 * signatures.c order. Every rank runs it and draws the same bytes. */
static fs_value *generate(fsE_ctx *E, modv *mv, fs_value **s) {
  if (E->opt->plan) return plan_done(E, NULL); /* a forward, as model(x) */
  fsSM_opts o = {(const unsigned char *)s[0]->u.str.s, s[0]->u.str.len, ival(s[1]), fsV_to_double(s[2]),
                 s[3]->type == FSV_NONE ? FSSM_ALL : ival(s[3])};
  char err[160];
  int64_t context;
  unsigned char *text;
  if (fsSM_check_opts(&o, err, sizeof err) < 0) {
    fsV_seterr("%s", err);
    return NULL;
  }
  if (fsSM_byte_lm(mv->m, &context) < 0 ||
      fsSM_generate(lm_forward, mv, context, &o, fsR_key(E->seed, "generate"), &E->samples, &text) < 0)
    return rt_fail();
  fs_value *r = fsV_str_utf8(text, o.n + (size_t)o.max_new);
  free(text);
  return r;
}

static fs_value *module_method(fsE_ctx *E, fs_value *v, const char *name, const fsV_args *a) {
  const fsSig *sig = fsSig_member("Module", name);
  if (!sig || sig->kind != FSSIG_METHOD) return NULL;
  modv *mv = v->u.obj.data;
  if (strcmp(name, "forward") == 0) return module_call(E, v, a);
  fs_value *s[4];
  if (fsE_bind(E, sig, a, s) < 0) return NULL;
  fs_value *r = NULL;
  if (strcmp(name, "parameters") == 0) r = params_list(mv, false);
  else if (strcmp(name, "named_parameters") == 0) r = params_list(mv, true);
  else if (strcmp(name, "num_parameters") == 0) r = fsV_int(fsM_num_parameters(mv->m));
  else if (strcmp(name, "train") == 0 || strcmp(name, "eval") == 0) {
    fsM_train(mv->m, name[0] == 't' && fsV_truthy(s[0]));
    r = fsV_retain(v);
  } else if (strcmp(name, "to_empty") == 0) {
    ctxv *d = fsV_objdata(s[0], &ctx_class);
    if (!d || d->kind != 0) fsV_seterr("to_empty(): device must be a device(...), not %s", fsV_type_name(s[0]));
    else if (fsM_to_empty(mv->m, d->dev) < 0) rt_fail();
    else {
      mv->st.meta = has_meta(mv->m);
      mv->st.generation++;
      r = fsV_retain(v);
    }
  } else if (strcmp(name, "reset_parameters") == 0) {
    int rc = mv->sh ? fsSH_reset_parameters(mv->sh, E->seed) : fsM_reset_parameters(mv->m, E->seed);
    r = rc < 0 ? rt_fail() : fsV_none();
  } else if (strcmp(name, "zero_grad") == 0) {
    fsM_param *ps;
    int64_t n = fsM_parameters(mv->m, &ps);
    for (int64_t i = 0; i < n; i++) {
      fsT_release(ps[i].t->grad);
      ps[i].t->grad = NULL;
    }
    if (n >= 0) fsM_params_free(ps, n);
    r = n < 0 ? rt_fail() : fsV_none();
  } else if (strcmp(name, "generate") == 0) {
    r = generate(E, mv, s);
  } else if (mv->sh) { /* the FSDP wrapper's parameters are flat shards */
    fsV_seterr("%s() of an FSDP-wrapped module is not supported; use fabric.save / fabric.load", name);
  } else if (strcmp(name, "state_dict") == 0) {
    r = state_dict(mv);
  } else {
    r = load_state_dict(mv, s[0], fsV_truthy(s[1]));
  }
  fsE_unbind(sig, s);
  return r;
}

static fs_value *module_getattr(fsE_ctx *E, fs_value *v, const char *name) {
  modv *mv = v->u.obj.data;
  if (strcmp(name, "training") == 0) return fsV_bool(mv->m->training);
  return NULL;
}

static const fsV_class module_class = {
  .name = "Module", .getattr = module_getattr, .call = module_call, .call_method = module_method,
  .repr = module_repr, .free = modv_free,
};

/* ---- optimizers ------------------------------------------------------------------ */

typedef struct optv {
  fs_optim *o;
  const char *cls;
  fsF_optim st;
} optv;

static const fsV_class optim_class;

static void optv_free(void *p) {
  optv *ov = p;
  fsO_release(ov->o);
  free(ov);
}

/* The tensors of a parameters argument (any iterable of tensors). */
static fs_tensor **param_array(fsE_ctx *E, fs_value *params, int64_t *n, bool *meta) {
  fsE_iter it;
  fs_value *l = fsV_list(0), *x;
  int st = l && fsE_iter_begin(E, params, &it) == 0 ? 1 : -1;
  while (st == 1 && (st = fsE_iter_next(E, &it, &x)) == 1) fsV_list_append(l, x);
  fsE_iter_end(&it);
  if (st < 0) {
    fsV_release(l);
    return NULL;
  }
  if (!l) return NULL;
  fs_tensor **ts = malloc((l->u.seq.n + 1) * sizeof *ts);
  *n = 0;
  *meta = false;
  for (size_t i = 0; ts && i < l->u.seq.n; i++) {
    fs_tensor *t = as_tensor(l->u.seq.items[i]);
    if (!t) {
      fsV_seterr("optimizer got a %s where a parameter tensor was expected", fsV_type_name(l->u.seq.items[i]));
      free(ts);
      ts = NULL;
      break;
    }
    *meta |= E->opt->plan ? E->device == FS_DEV_META : t->device == FS_DEV_META;
    ts[(*n)++] = t;
  }
  if (ts && *n == 0) {
    fsV_seterr("optimizer got an empty parameter list");
    free(ts);
    ts = NULL;
  }
  fsV_release(l);
  return ts;
}

static fs_value *optim_value(fs_optim *o, const char *cls, bool meta) {
  if (!o) return rt_fail();
  optv *ov = calloc(1, sizeof *ov);
  if (!ov) {
    fsO_release(o);
    fsV_seterr("out of memory");
    return NULL;
  }
  ov->o = o;
  ov->cls = cls;
  ov->st.meta_params = meta;
  return fsV_obj(&optim_class, ov);
}

static int betas(const fs_value *v, double *b1, double *b2) {
  if (v->u.seq.n != 2 || !fsV_is_number(v->u.seq.items[0]) || !fsV_is_number(v->u.seq.items[1])) {
    fsV_seterr("betas must be a pair of numbers");
    return -1;
  }
  *b1 = fsV_to_double(v->u.seq.items[0]);
  *b2 = fsV_to_double(v->u.seq.items[1]);
  return 0;
}

NATIVE(o_sgd) {
  int64_t n;
  bool meta;
  fs_tensor **ps = param_array(E, s[0], &n, &meta);
  if (!ps) return NULL;
  fs_optim *o = fsO_sgd(ps, n, fsV_to_double(s[1]), fsV_to_double(s[2]), fsV_to_double(s[3]),
                        fsV_to_double(s[4]), fsV_truthy(s[5]));
  free(ps);
  return optim_value(o, "SGD", meta);
}

static fs_value *adam(fsE_ctx *E, fs_value **s, bool decoupled) {
  int64_t n;
  bool meta;
  double b1, b2;
  if (betas(s[2], &b1, &b2) < 0) return NULL;
  fs_tensor **ps = param_array(E, s[0], &n, &meta);
  if (!ps) return NULL;
  fs_optim *o = fsO_adam(ps, n, decoupled, fsV_to_double(s[1]), b1, b2, fsV_to_double(s[3]),
                         fsV_to_double(s[4]));
  free(ps);
  return optim_value(o, decoupled ? "AdamW" : "Adam", meta);
}

NATIVE(o_adam) { return adam(E, s, false); }
NATIVE(o_adamw) { return adam(E, s, true); }

static fs_value *optim_method(fsE_ctx *E, fs_value *v, const char *name, const fsV_args *a) {
  const fsSig *sig = fsSig_member("Optimizer", name);
  if (!sig || sig->kind != FSSIG_METHOD) return NULL;
  optv *ov = v->u.obj.data;
  fs_value *s[2];
  if (fsE_bind(E, sig, a, s) < 0) return NULL;
  fs_value *r = NULL;
  if (strcmp(name, "step") == 0) r = fsO_step(ov->o) < 0 ? rt_fail() : fsV_none();
  else if (strcmp(name, "zero_grad") == 0) {
    fsO_zero_grad(ov->o);
    r = fsV_none();
  } else fsV_seterr("%s.%s() is not available yet in this build", ov->cls, name);
  fsE_unbind(sig, s);
  return r;
}

static fs_value *optim_getattr(fsE_ctx *E, fs_value *v, const char *name) {
  optv *ov = v->u.obj.data;
  return strcmp(name, "lr") == 0 ? fsV_float(ov->o->lr) : NULL;
}

static int optim_setattr(fsE_ctx *E, fs_value *v, const char *name, fs_value *x) {
  optv *ov = v->u.obj.data;
  if (strcmp(name, "lr") != 0) {
    fsV_seterr("'%s' object attribute '%s' cannot be set", ov->cls, name);
    return -1;
  }
  if (!fsV_is_number(x) || fsV_to_double(x) < 0) {
    fsV_seterr("optimizer.lr must be a non-negative number");
    return -1;
  }
  ov->o->lr = fsV_to_double(x);
  return 0;
}

static char *optim_repr(fs_value *v) {
  optv *ov = v->u.obj.data;
  fsV_buf b = {0};
  char lr[40];
  fsV_float_repr(ov->o->lr, lr, sizeof lr);
  fsV_buf_printf(&b, "%s(lr=%s)", ov->cls, lr);
  return fsV_buf_take(&b);
}

static const fsV_class optim_class = {
  .name = "Optimizer", .getattr = optim_getattr, .setattr = optim_setattr,
  .call_method = optim_method, .repr = optim_repr, .free = optv_free,
};

/* ---- data sets and loaders ------------------------------------------------------------ */

typedef struct dsv { fsS_dataset ds; } dsv;
static const fsV_class dataset_class;

static void dsv_free(void *p) {
  fsS_free(&((dsv *)p)->ds);
  free(p);
}

static int64_t dataset_len(fsE_ctx *E, fs_value *v) { return (int64_t)((dsv *)v->u.obj.data)->ds.len; }

static fs_tensor *layout_tensor(const fsS_layout *l, int64_t batch, const void *data) {
  int64_t shape[FS_MAX_RANK];
  int r = 0;
  if (batch >= 0) shape[r++] = batch;
  for (int i = 0; i < l->ndim; i++) shape[r++] = l->shape[i];
  fs_tensor *t = fsT_new(l->dtype, FS_DEV_CPU, r, shape);
  if (t) memcpy(t->data, data, fsT_nbytes(t));
  return t;
}

static fs_value *pair(fs_tensor *x, fs_tensor *y) {
  fs_value *vx = tensor_value(x);
  return fsV_pair(vx, tensor_value(y));
}

static fs_value *dataset_index(fsE_ctx *E, fs_value *v, fs_value *key) {
  fsS_dataset *ds = &((dsv *)v->u.obj.data)->ds;
  if (key->type != FSV_INT) {
    fsV_seterr("dataset indices must be integers, not %s", fsV_type_name(key));
    return NULL;
  }
  int64_t i = key->u.i < 0 ? key->u.i + (int64_t)ds->len : key->u.i;
  if (i < 0 || i >= (int64_t)ds->len) {
    fsV_seterr("dataset index out of range");
    return NULL;
  }
  void *x = malloc(ds->x.bytes + ds->y.bytes);
  if (!x) {
    fsV_seterr("out of memory");
    return NULL;
  }
  fsS_get(ds, (size_t)i, x, (char *)x + ds->x.bytes);
  fs_tensor *tx = layout_tensor(&ds->x, -1, x), *ty = tx ? layout_tensor(&ds->y, -1, (char *)x + ds->x.bytes) : NULL;
  free(x);
  if (!ty) {
    fsT_release(tx);
    return rt_fail();
  }
  return pair(tx, ty);
}

static const fsV_class dataset_class = {
  .name = "Dataset", .index = dataset_index, .len = dataset_len, .free = dsv_free,
};

/* rc and err of the constructor call (err read only after rc is known) */
static fs_value *dataset_value(dsv *d, int rc, char **err) {
  if (rc < 0) {
    free(d);
    return err_own(*err);
  }
  return fsV_obj(&dataset_class, d);
}

#define NEW_DS(d) dsv *d = calloc(1, sizeof *d); if (!d) { fsV_seterr("out of memory"); return NULL; } char *err = NULL

NATIVE(d_fashion) {
  NEW_DS(d);
  const char *root = s[1]->type == FSV_STR ? s[1]->u.str.s : FSS_FASHION_MNIST_ROOT;
  int rc = fsS_mnist(&d->ds, root, fsV_truthy(s[0]), &err);
  return dataset_value(d, rc, &err);
}

NATIVE(d_mnist) {
  NEW_DS(d);
  int rc = fsS_mnist(&d->ds, s[0]->u.str.s, fsV_truthy(s[1]), &err);
  return dataset_value(d, rc, &err);
}

NATIVE(d_text) {
  NEW_DS(d);
  int rc = fsS_text(&d->ds, s[0]->u.str.s, ival(s[1]), &err);
  return dataset_value(d, rc, &err);
}

NATIVE(d_random) {
  int64_t shape[FS_MAX_RANK];
  int nd = 0;
  if (s[1]->type == FSV_INT) shape[nd++] = s[1]->u.i;
  else
    for (size_t i = 0; i < s[1]->u.seq.n; i++) {
      fs_value *x = s[1]->u.seq.items[i];
      if (x->type != FSV_INT || nd >= FS_MAX_RANK - 1) {
        fsV_seterr("RandomDataset(): shape must be an int or a short tuple of ints");
        return NULL;
      }
      shape[nd++] = x->u.i;
    }
  NEW_DS(d);
  int rc = fsS_random(&d->ds, ival(s[0]), nd, shape, ival(s[2]), (uint64_t)ival(s[3]), &err);
  return dataset_value(d, rc, &err);
}

typedef struct loaderv {
  fsDL_loader L;
  fs_value *dataset; /* held: the loader borrows its fsS_dataset */
  uint64_t epoch;
  fsF_loader st;
  fsPG *pg;              /* the progress line (rank 0), made at the first pass */
  fsPG **active;         /* &E->progress while a pass draws, else NULL */
  int64_t done;          /* batches finished in this pass */
  fs_device dev;         /* where its batches go: the Fabric's device once set up */
} loaderv;

static const fsV_class loader_class, loader_iter_class;

static void loaderv_free(void *p) {
  loaderv *lv = p;
  fsPG_free(lv->pg);
  fsDL_free(&lv->L);
  fsV_release(lv->dataset);
  free(lv);
}

NATIVE(d_loader) {
  dsv *d = fsV_objdata(s[0], &dataset_class);
  if (!d) {
    fsV_seterr("DataLoader(): dataset must be a data set, not %s", fsV_type_name(s[0]));
    return NULL;
  }
  loaderv *lv = calloc(1, sizeof *lv);
  char *err = NULL;
  if (!lv) {
    fsV_seterr("out of memory");
    return NULL;
  }
  if (fsDL_init(&lv->L, &d->ds, ival(s[1]), fsV_truthy(s[2]), fsV_truthy(s[3]), E->seed, &err) < 0) {
    free(lv);
    return err_own(err);
  }
  lv->dataset = fsV_retain(s[0]);
  lv->st.is_dataloader = 1;
  lv->dev = FS_DEV_CPU;
  return fsV_obj(&loader_class, lv);
}

static int64_t loader_len(fsE_ctx *E, fs_value *v) { return (int64_t)fsDL_len(&((loaderv *)v->u.obj.data)->L); }

/* One pass at a time: the iterator holds the loader, whose batch buffers it fills. */
static int current_rank(fsE_ctx *E);

/* Ends a pass's progress line (the loop finished, broke or failed). */
static void progress_end(loaderv *lv) {
  if (!lv->active) return;
  fsPG_epoch_end(lv->pg);
  *lv->active = NULL;
  lv->active = NULL;
}

static fs_value *loader_iter(fsE_ctx *E, fs_value *v) {
  loaderv *lv = v->u.obj.data;
  fsDL_start(&lv->L, lv->epoch++);
  if (!lv->pg && !E->progress && E->opt->progress && current_rank(E) == 0) {
    int tty = isatty(fileno(E->opt->progress));
    if ((lv->pg = fsPG_new(E->opt->progress, tty, (int64_t)fsDL_len(&lv->L), 0)))
      fsPG_set_interval(lv->pg, E->opt->progress_interval);
  }
  if (lv->pg && !E->progress) {
    fsPG_epoch_begin(lv->pg);
    E->progress = lv->pg;
    lv->active = &E->progress;
    lv->done = 0;
    E->last_loss = NAN; /* a pass without backward shows no loss */
  }
  return fsV_obj(&loader_iter_class, fsV_retain(v));
}

static int loader_next(fsE_ctx *E, fs_value *it, fs_value **out) {
  loaderv *lv = ((fs_value *)it->u.obj.data)->u.obj.data;
  if (lv->active && lv->done > 0) fsPG_step(lv->pg, lv->done, E->last_loss);
  lv->done++;
  if (!fsDL_next(&lv->L)) {
    progress_end(lv);
    return 0;
  }
  fsDL_batch *bx = &lv->L.x, *by = &lv->L.y;
  fs_tensor *x = fsT_new(bx->dtype, lv->dev, bx->ndim, bx->shape);
  fs_tensor *y = x ? fsT_new(by->dtype, lv->dev, by->ndim, by->shape) : NULL;
  if (!y || fsB_transfer(lv->dev, x->data, FS_DEV_CPU, bx->data, fsT_nbytes(x)) < 0 ||
      fsB_transfer(lv->dev, y->data, FS_DEV_CPU, by->data, fsT_nbytes(y)) < 0) {
    fsT_release(x);
    fsT_release(y);
    rt_fail();
    return -1;
  }
  *out = pair(x, y);
  return *out ? 1 : -1;
}

static void loader_iter_free(void *p) {
  progress_end(((fs_value *)p)->u.obj.data);
  fsV_release(p);
}

static const fsV_class loader_class = {
  .name = "DataLoader", .iter = loader_iter, .len = loader_len, .free = loaderv_free,
};
static const fsV_class loader_iter_class = {
  .name = "DataLoader_iterator", .next = loader_next, .free = loader_iter_free,
};

/* ---- strategy objects: what Fabric(strategy=...) resolves ----------------------- */

static const fsV_class strategy_class;

static void strategy_free(void *p) { free(p); }

static char *strategy_repr(fs_value *v) {
  fsF_strategy_obj *so = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<%s>", fsF_cls_name(so->cls));
  return fsV_buf_take(&b);
}

static const fsV_class strategy_class = {
  .name = "Strategy", .repr = strategy_repr, .free = strategy_free,
};

static fs_value *strategy_value(fsF_strategy_obj so) {
  fsF_strategy_obj *p = malloc(sizeof *p);
  if (!p) {
    fsV_seterr("out of memory");
    return NULL;
  }
  *p = so;
  return fsV_obj(&strategy_class, p);
}

static const fsF_strategy_obj no_kwargs = {.use_orig_params = -1, .state_dict_full = -1, .cpu_offload = -1,
                                           .auto_wrap_policy = -1, .stage = -1, .save_distributed = -1};

/* slots: FSDPStrategy's parameters in signatures.c order */
NATIVE(s_fsdp) {
  fsF_strategy_obj so = no_kwargs;
  so.cls = FSF_FSDP;
  so.auto_wrap_policy = s[0]->type != FSV_NONE;
  so.cpu_offload = fsV_truthy(s[2]);
  so.state_dict_full = strcmp(s[5]->u.str.s, "full") == 0;
  if (!so.state_dict_full && strcmp(s[5]->u.str.s, "sharded") != 0) {
    fsV_seterr("FSDPStrategy(): state_dict_type must be 'full' or 'sharded', not '%s'", s[5]->u.str.s);
    return NULL;
  }
  so.use_orig_params = fsV_truthy(s[6]);
  return strategy_value(so);
}

NATIVE(s_ddp) {
  fsF_strategy_obj so = no_kwargs;
  const char *m = s[3]->u.str.s;
  so.cls = FSF_DDP;
  so.start_method = strcmp(m, "spawn") == 0 ? FSF_START_SPAWN : strcmp(m, "fork") == 0 ? FSF_START_FORK : FSF_START_POPEN;
  if (strcmp(m, "popen") && strcmp(m, "spawn") && strcmp(m, "fork")) {
    fsV_seterr("DDPStrategy(): start_method must be 'popen', 'spawn' or 'fork', not '%s'", m);
    return NULL;
  }
  return strategy_value(so);
}

NATIVE(s_deepspeed) {
  fsF_strategy_obj so = no_kwargs;
  so.cls = FSF_DEEPSPEED;
  so.stage = (int)ival(s[1]);
  so.cpu_offload = fsV_truthy(s[2]) || fsV_truthy(s[3]);
  return strategy_value(so);
}

/* ---- Fabric ---------------------------------------------------------------------------- */

typedef struct fabv {
  fsF_config cfg;
  fsF_fabric f;
  fsLN_env env;      /* rank, world, local rank (0 of 1 on a single device) */
  fsCC_comm *comm;   /* DDP and FSDP after launch(): shm, or NCCL on GPUs */
  fs_device dev;     /* where set-up modules and batches live: cpu or cuda */
  fs_value *synced;  /* list of the modules set up under DDP (gradients all-reduced) */
  bool no_sync;      /* inside no_backward_sync */
  fsLG *lg;          /* fabric.log's CSV logger, made at the first call */
  fs_value *planned; /* plan mode: the module set up last */
  fs_diags *diags;   /* for the logger's warnings (the run outlives the value) */
} fabv;

static const fsV_class fabric_class;

static fsF_fabric *current_fabric(fsE_ctx *E) {
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fabric_class) : NULL;
  return fv ? &fv->f : NULL;
}

static int current_rank(fsE_ctx *E) {
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fabric_class) : NULL;
  return fv ? fv->env.rank : 0;
}

/* The process's GPU: a rank's is its local rank. */
static int cuda_index(fsE_ctx *E) {
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fabric_class) : NULL;
  return fv ? fv->env.local_rank : 0;
}

static void log_warning(fabv *fv, char *err) {
  fsD_add(fv->diags, FS_SEV_WARNING, "log", NULL, (fs_loc){0, 0}, "%s; logging is off",
          err ? err : "out of memory");
  free(err);
}

static void fabv_free(void *p) {
  fabv *fv = p;
  char *err = NULL;
  if (fsLG_close(fv->lg, &err) < 0) log_warning(fv, err);
  fsCC_destroy(fv->comm);
  fsV_release(fv->synced);
  fsV_release(fv->planned);
  free(fv);
}

static fs_value *comm_fail(void) {
  fsV_seterr("%s", fsT_error()[0] ? fsT_error() : "collective failed");
  return NULL;
}

/* launch(): DDP forks the ranks here; this process becomes their supervisor
 * and stops the script with their status, each rank continues it. */
static fs_value *ddp_launch(fsE_ctx *E, fabv *fv) {
  if ((fv->cfg.cls != FSF_DDP && fv->cfg.cls != FSF_FSDP) || fv->comm || E->opt->plan) return fsV_none();
  fflush(E->out); /* buffered output must not be copied into every rank */
  fflush(stdout);
  fflush(stderr);
  int status = 0;
  fsLN_role role = fsLN_launch(fv->cfg.devices, &fv->env, &status);
  if (role == FSLN_ERROR) return comm_fail();
  if (role == FSLN_SUPERVISOR) {
    E->halt = true;
    E->halt_status = status;
    if (status && fsT_error()[0]) fprintf(stderr, "fabricscript: %s\n", fsT_error());
    return NULL;
  }
  bool emulated = fv->dev == FS_DEV_CUDA && E->opt->emulate_cuda;
  fsCC_config cc = {.rank = fv->env.rank, .world = fv->env.world_size, .local_rank = fv->env.local_rank,
                    .emulated_cuda = emulated};
  fsCC_transport transport = FSCC_SHM;
#ifdef FS_HAVE_CUDA
  if (fv->dev == FS_DEV_CUDA && !emulated) { /* this rank's GPU, then NCCL among them */
    if (fsCU_select_device(fv->env.local_rank) < 0) return comm_fail();
    transport = FSCC_NCCL;
  }
#endif
  if (!(fv->comm = fsLN_connect(&fv->env, transport, &cc))) return comm_fail();
  return fsV_none();
}

/* FSDP's joint setup: optimizers over the model's parameters step its flat
 * shards instead (all of them: the shards mix every parameter of a unit). */
static int fsdp_rebind(modv *mv, optv *const *ov, size_t no) {
  fsSH_model *sh = mv->sh;
  for (size_t i = 0; sh && i < no; i++) {
    fs_optim *o = ov[i]->o;
    bool all = o->nparams == sh->nall;
    for (int64_t k = 0; all && k < sh->nall; k++) all = o->params[k] == sh->all[k].t;
    fs_tensor **flats = all ? malloc((size_t)(sh->nunits + 1) * sizeof *flats) : NULL;
    for (int k = 0; flats && k < sh->nunits; k++) flats[k] = sh->units[k].flat;
    int rc = flats ? fsO_replace_params(o, flats, sh->nunits) : -1;
    free(flats);
    if (rc == 0) continue;
    if (all) rt_fail();
    else fsV_seterr("under FSDP an optimizer set up with the model must hold exactly the model's parameters "
                    "(model.parameters())");
    return -1;
  }
  return 0;
}

/* plan mode: prints the plan of the model set up last, with optimizer ov
 * (NULL: none), and stops the run. */
static fs_value *plan_done(fsE_ctx *E, const optv *ov) {
  fabv *fv = E->fabric ? E->fabric->u.obj.data : NULL;
  if (!fv || !fv->planned) {
    fsV_seterr("plan: the script runs a model it has not set up with Fabric (setup or setup_module)");
    return NULL;
  }
  modv *mv = fv->planned->u.obj.data;
  fsF_prec p = fv->cfg.precision;
  fsPL_input in = {
    .strategy = fsF_cls_name(fv->cfg.cls), .accelerator = fsF_accel_name(fv->cfg.accel),
    .precision = fsF_prec_name(p), .world = fv->cfg.world_size, .sharded = fv->cfg.cls == FSF_FSDP,
    .param_bytes = p == FSF_P16_TRUE || p == FSF_PBF16_TRUE ? 2 : p == FSF_P64 ? 8 : 4,
    .model = mv->m, .model_class = mv->cls, .optimizer = ov ? ov->cls : NULL,
    .states = !ov ? 0 : ov->o->kind != FSO_SGD ? 2 : ov->o->momentum != 0,
  };
  if (fsPL_print(E->opt->plan, &in) < 0) return rt_fail();
  E->halt = true;
  E->halt_status = 0;
  return NULL;
}

/* FSDP: the last unit's reduce-scatter after backward (ok: it succeeded;
 * else only release what is gathered and keep the backward's error). */
static int fsdp_backward_done(fabv *fv, bool ok) {
  int rc = ok ? 0 : -1;
  for (size_t i = 0; fv->synced && i < fv->synced->u.seq.n; i++) {
    modv *mv = fv->synced->u.seq.items[i]->u.obj.data;
    if (mv->sh && fsSH_backward_done(mv->sh, ok) < 0) rc = -1;
  }
  return rc;
}

/* DDP's gradient all-reduce (mean) after backward, as its reducer does. */
static int ddp_sync_grads(fabv *fv) {
  if (!fv->comm || fv->no_sync || !fv->synced) return 0;
  for (size_t i = 0; i < fv->synced->u.seq.n; i++) {
    modv *mv = fv->synced->u.seq.items[i]->u.obj.data;
    if (mv->sh) continue; /* FSDP reduce-scatters per unit */
    fsM_param *ps;
    int64_t n = fsM_parameters(mv->m, &ps);
    if (n < 0) return rt_fail(), -1;
    int rc = 0;
    for (int64_t k = 0; rc == 0 && k < n; k++)
      if (ps[k].t->grad && fsCC_all_reduce_tensor(fv->comm, ps[k].t->grad, FSCC_MEAN) < 0) rc = -1;
    fsM_params_free(ps, n);
    if (rc < 0) return comm_fail(), -1;
  }
  return 0;
}

/* A collective's tensor: a copy of x, or a number as a one-element tensor
 * (int64 for an int, float32 for a float). */
/* A copy of x (a tensor, or a number as a 0-d tensor) where the
 * communicator's buffers live. */
static fs_tensor *collective_input(const fs_value *x, fs_device dev) {
  fs_tensor *t = as_tensor(x);
  if (t) return t->device == dev ? fsT_copy(t) : fsT_to_device(t, dev);
  if (!fsV_is_number(x)) {
    fsT_seterr("collectives take a tensor or a number, not %s", fsV_type_name(x));
    return NULL;
  }
  fs_tensor *s = fsT_new(x->type == FSV_FLOAT ? FS_F32 : FS_I64, FS_DEV_CPU, 0, NULL);
  if (!s) return NULL;
  if (x->type == FSV_FLOAT) fsT_f32(s)[0] = (float)x->u.f;
  else fsT_i64(s)[0] = ival(x);
  fs_tensor *d = fsT_to_device(s, dev);
  fsT_release(s);
  return d;
}

static fs_value *collective(fabv *fv, const char *name, fs_value **s) {
  if (strcmp(name, "barrier") == 0) return !fv->comm || fsCC_barrier(fv->comm) == 0 ? fsV_none() : comm_fail();
  if (!fv->comm) return fsV_retain(s[0]); /* one rank: the identity */
  fs_tensor *t = collective_input(s[0], fv->comm->device);
  if (!t) return rt_fail();
  int rc = 0;
  if (strcmp(name, "all_reduce") == 0) {
    int op = fsCC_op_parse(s[2]->u.str.s);
    if (op < 0) {
      fsT_release(t);
      fsV_seterr("Unsupported reduce_op '%s'", s[2]->u.str.s);
      return NULL;
    }
    rc = fsCC_all_reduce_tensor(fv->comm, t, (fsCC_op)op);
  } else if (strcmp(name, "broadcast") == 0) {
    rc = fsCC_broadcast_tensor(fv->comm, t, (int)ival(s[1]));
  } else { /* all_gather: a new leading dimension of world */
    fs_tensor *g = fsCC_all_gather_tensor(fv->comm, t);
    fsT_release(t);
    if (!g) return comm_fail();
    t = g;
  }
  if (rc < 0) {
    fsT_release(t);
    return comm_fail();
  }
  if (t->rank == 0 && !as_tensor(s[0])) { /* a number in, a number out */
    fs_value *r = item_value(t);
    fsT_release(t);
    return r;
  }
  return tensor_value(t);
}

/* fabric.log / log_dict: names[i] = values[i], as Lightning's CSVLogger
 * under logs/ would write them. */
static fs_value *fabric_log(fsE_ctx *E, fabv *fv, fs_value *const *names, fs_value *const *values,
                            size_t n, const fs_value *step) {
  fsLG_metric *m = calloc(n + 1, sizeof *m);
  char **texts = calloc(n + 1, sizeof *texts);
  fs_value *r = NULL;
  size_t k = 0;
  if (!m || !texts) {
    fsV_seterr("out of memory");
    goto done;
  }
  for (; k < n; k++) {
    fs_value *v = values[k];
    fs_tensor *t = as_tensor(v);
    fs_value *item = t ? item_value(t) : fsV_retain(v);
    if (!item) goto done;
    if (names[k]->type != FSV_STR || !fsV_is_number(item)) {
      fsV_seterr("log: %s must be a number or a one-element tensor, not %s",
                 names[k]->type == FSV_STR ? names[k]->u.str.s : "a metric", fsV_type_name(item));
      fsV_release(item);
      goto done;
    }
    texts[k] = fsV_tostr(item);
    m[k] = (fsLG_metric){names[k]->u.str.s, texts[k] ? texts[k] : "", fsV_to_double(item)};
    fsV_release(item);
  }
  if (!fv->lg && !(fv->lg = fsLG_new("logs"))) {
    fsV_seterr("out of memory");
    goto done;
  }
  char *err = NULL;
  if (fsLG_log(fv->lg, m, n, step->type == FSV_NONE ? FSLG_STEP_NONE : ival(step), &err) < 0)
    log_warning(fv, err); /* logging never stops training */
  r = fsV_none();
done:
  for (size_t i = 0; texts && i < k; i++) free(texts[i]);
  free(texts);
  free(m);
  return r;
}

/* Reports the issues of a validation: warnings as diagnostics, the error via fsV_error. */
static int issues(fsE_ctx *E, const fsV_args *a, fsF_issues *iss, int rc) {
  for (size_t i = 0; i < iss->n; i++)
    if (iss->items[i].severity != FS_SEV_ERROR) {
      fs_diag *g = fsD_add(E->diags, iss->items[i].severity, iss->items[i].rule, E->src, a->loc, "%s",
                           iss->items[i].message);
      if (iss->items[i].help) fsD_help(g, "%s", iss->items[i].help);
    }
  if (rc < 0) {
    const fsF_issue *e = fsF_error(iss);
    fsV_seterr("%s", e ? e->message : "Fabric rejected the call");
    fs_diag *g = fsD_add(E->diags, FS_SEV_ERROR, e ? e->rule : "runtime", E->src, a->loc, "%s",
                         e ? e->message : "Fabric rejected the call");
    if (e && e->help) fsD_help(g, "%s", e->help);
    E->reported = true;
    if (!E->status) E->status = 1;
  }
  fsF_issues_free(iss);
  return rc;
}

/* An fs_value as fabric.h sees a Fabric(...) argument. */
static fsF_value fvalue(const fs_value *v, int64_t *ints, size_t cap, char **repr) {
  fsF_value f = {.kind = FSF_OTHER, .tname = fsV_type_name(v)};
  switch (v->type) {
  case FSV_NONE: f.kind = FSF_NONE; break;
  case FSV_BOOL: f.kind = FSF_BOOL; f.i = v->u.b; break;
  case FSV_INT: f.kind = FSF_INT; f.i = v->u.i; break;
  case FSV_FLOAT: f.kind = FSF_FLOAT; f.f = v->u.f; break;
  case FSV_STR: f.kind = FSF_STR; f.s = v->u.str.s; break;
  case FSV_LIST:
  case FSV_TUPLE:
    f.kind = FSF_INTLIST;
    f.tuple = v->type == FSV_TUPLE;
    for (size_t i = 0; i < v->u.seq.n; i++) {
      const fs_value *x = v->u.seq.items[i];
      if (x->type != FSV_INT || i >= cap) {
        f.kind = FSF_LIST;
        f.tname = fsV_type_name(x);
        break;
      }
      ints[i] = x->u.i;
    }
    f.ints = ints;
    f.nints = v->u.seq.n;
    break;
  default:
    if (fsV_objdata(v, &strategy_class)) {
      f.kind = FSF_STRATEGY;
      f.strategy = *(fsF_strategy_obj *)v->u.obj.data;
    }
    break;
  }
  if (f.kind == FSF_LIST || f.kind == FSF_OTHER) f.s = *repr = fsV_repr(v);
  return f;
}

/* Whether this build runs cfg: single-device, DDP and FSDP on one node, on
 * cpu, on the GPUs of a CUDA build, or on cuda emulated by the cpu backend
 * (--emulate-cuda).  Nothing here initializes CUDA: ranks are forked later. */
static int runnable(const fsF_config *cfg, bool emulate_cuda) {
  fsF_machine here;
  fsF_machine_detect(&here);
#ifdef FS_HAVE_CUDA
  bool gpus = here.cuda_gpus > 0;
#else
  bool gpus = false;
#endif
  if (cfg->accel == FSF_CUDA && !emulate_cuda && !gpus) {
    fsV_seterr("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
               "installed a driver from http://www.nvidia.com/Download/index.aspx (to try a cuda script "
               "on this machine, run it with --emulate-cuda: the cpu backend, one process per rank)");
    return -1;
  }
  if (cfg->precision != FSF_P32) { /* not float32 silently in place of what was asked */
    fsV_seterr("this build computes in float32 only (precision=\"32-true\"); the script asks for "
               "precision=\"%s\", which `fabricscript check` checks but this build cannot run",
               fsF_prec_name(cfg->precision));
    return -1;
  }
  bool multi = (cfg->cls == FSF_DDP || cfg->cls == FSF_FSDP) && cfg->launcher == FSF_LAUNCH_POPEN;
  if ((cfg->cls != FSF_SINGLE && !multi) || !(cfg->accel == FSF_CPU || cfg->accel == FSF_CUDA)) {
    fsV_seterr("this build runs the single-device, DDP (popen) and FSDP strategies, on cpu or cuda; "
               "the script resolves to %s on %s (`fabricscript check` checks it)",
               fsF_cls_name(cfg->cls), fsF_accel_name(cfg->accel));
    return -1;
  }
  if (cfg->num_nodes == 1) return 0;
  /* across nodes: NCCL between GPUs, the ranks started on every node by
   * torchrun or srun (shared memory reaches one host only) */
  fsLN_env env;
  int outside = fsLN_detect(&env);
  if (outside < 0) {
    fsV_seterr("%s", fsT_error());
    return -1;
  }
  if (cfg->accel != FSF_CUDA || emulate_cuda || !gpus || !outside) {
    fsV_seterr("num_nodes=%d needs GPUs (NCCL) and the ranks started on every node by torchrun or srun; "
               "one node runs without them", cfg->num_nodes);
    return -1;
  }
  if (env.world_size != cfg->world_size) {
    fsV_seterr("the launcher started %d ranks, but the script asks for %d (num_nodes=%d x devices=%d)",
               env.world_size, cfg->world_size, cfg->num_nodes, cfg->devices);
    return -1;
  }
  return 0;
}

NATIVE(f_fabric) {
  const fsE_options *o = E->opt;
  fsF_overrides ov = {o->accelerator, o->strategy, o->devices, o->num_nodes, o->precision};
  fsF_machine m;
  if (o->machine) m = *o->machine; /* the check's machine: the same resolution */
  else fsF_machine_detect(&m);
  fs_value *const *slot[5] = {&s[0], &s[1], &s[2], &s[3], &s[4]};
  fsF_args fa;
  fsF_value *dst[5] = {&fa.accelerator, &fa.strategy, &fa.devices, &fa.num_nodes, &fa.precision};
  int64_t ints[5][FSF_MAX_GPUS];
  char *reprs[5] = {0};
  for (int i = 0; i < 5; i++) {
    *dst[i] = fvalue(*slot[i], ints[i], FSF_MAX_GPUS, &reprs[i]);
    /* an argument left at its default is "not passed", as the CLI rules need */
    bool given = false;
    for (size_t k = 0; k < a->nkw; k++) given |= fsSig_param_index(fsSig_find("Fabric"), a->kwnames[k]) == i;
    if (!given && (size_t)i >= a->npos) dst[i]->kind = FSF_UNSET;
  }
  fabv *fv = calloc(1, sizeof *fv);
  fsF_issues iss;
  fsF_issues_init(&iss);
  int rc = fv ? fsF_resolve(&fa, &ov, &m, &fv->cfg, &iss) : -1;
  for (int i = 0; i < 5; i++) free(reprs[i]);
  if (!fv) {
    fsF_issues_free(&iss);
    fsV_seterr("out of memory");
    return NULL;
  }
  if (issues(E, a, &iss, rc) < 0) {
    free(fv);
    return NULL;
  }
  if (!o->plan && runnable(&fv->cfg, o->emulate_cuda) < 0) { /* plan allocates nothing: any target */
    free(fv);
    return NULL;
  }
  fsF_fabric_init(&fv->f, &fv->cfg);
  fv->dev = fv->cfg.accel == FSF_CUDA && !o->plan ? FS_DEV_CUDA : FS_DEV_CPU; /* plan: shapes only */
  if (fv->dev == FS_DEV_CUDA && o->emulate_cuda) fsB_emulate_cuda();
#ifdef FS_HAVE_CUDA
  /* one process, one GPU; DDP and FSDP ranks pick theirs after launch() */
  else if (fv->dev == FS_DEV_CUDA && fv->cfg.cls == FSF_SINGLE && fsCU_select_device(0) < 0) {
    free(fv);
    return rt_fail();
  }
#endif
  fv->diags = E->diags;
  fv->env.world_size = fv->env.local_world_size = 1;
  fs_value *r = fsV_obj(&fabric_class, fv);
  if (r) {
    fsV_release(E->fabric);
    E->fabric = fsV_retain(r);
  }
  return r;
}

/* Tuples of the arguments Fabric returns: one value alone, several as a tuple. */
static fs_value *one_or_tuple(fs_value *first, fs_value *rest) {
  size_t n = (first ? 1 : 0) + rest->u.seq.n;
  if (n == 1) return fsV_retain(first ? first : rest->u.seq.items[0]);
  fs_value *t = fsV_tuple(n);
  for (size_t i = 0; t && i < n; i++)
    fsV_seq_set(t, i, fsV_retain(first ? (i ? rest->u.seq.items[i - 1] : first) : rest->u.seq.items[i]));
  return t;
}

static modv *need_module(const fs_value *v, const char *fn) {
  modv *mv = fsV_objdata(v, &module_class);
  if (!mv) fsV_seterr("%s(): expected a module, got %s", fn, fsV_type_name(v));
  return mv;
}

static int gather_optims(const fs_value *opts, const char *fn, const fsF_optim **st, optv **ov) {
  for (size_t i = 0; i < opts->u.seq.n; i++) {
    if (!(ov[i] = fsV_objdata(opts->u.seq.items[i], &optim_class))) {
      fsV_seterr("%s(): expected an optimizer, got %s", fn, fsV_type_name(opts->u.seq.items[i]));
      return -1;
    }
    st[i] = &ov[i]->st;
  }
  return 0;
}

/* What a successful setup of a module does: materialize it, mark it set up. */
static int setup_module_done(fsE_ctx *E, fabv *fv, fs_value *v, modv *mv) {
  mv->dev = fv->dev;
  if (E->opt->plan) { /* nothing to materialize: remember the model */
    fsV_release(fv->planned);
    fv->planned = fsV_retain(v);
    fsF_setup_done(&fv->f, &mv->st);
    mv->st.meta = false;
    return 0;
  }
  if (fv->cfg.cls == FSF_FSDP) { /* each rank materializes only its shards */
    if (!(mv->sh = fsSH_wrap(mv->m, fv->comm, fv->dev, E->seed))) return rt_fail(), -1;
    if (!fv->synced && !(fv->synced = fsV_list(0))) return -1;
    if (fsV_list_append(fv->synced, fsV_retain(v)) < 0) return -1;
    fsF_setup_done(&fv->f, &mv->st);
    mv->st.meta = false;
    return 0;
  }
  if ((mv->st.meta && fsM_materialize(mv->m, fv->dev, E->seed) < 0) || fsM_to_device(mv->m, fv->dev) < 0)
    return rt_fail(), -1;
  if (fv->comm) { /* DDP: every rank starts from rank 0's parameters */
    fsM_param *ps;
    int64_t n = fsM_parameters(mv->m, &ps);
    if (n < 0) return rt_fail(), -1;
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < n; i++) rc = fsCC_broadcast_tensor(fv->comm, ps[i].t, 0);
    fsM_params_free(ps, n);
    if (rc < 0) return comm_fail(), -1;
    if (!fv->synced && !(fv->synced = fsV_list(0))) return -1;
    if (fsV_list_append(fv->synced, fsV_retain(v)) < 0) return -1;
  }
  fsF_setup_done(&fv->f, &mv->st);
  mv->st.meta = has_meta(mv->m);
  return 0;
}

/* ---- checkpoints: fabric.save / fabric.load ----------------------------------------
 * One safetensors file. A module under key K stores each parameter as
 * "K.<state-dict name>"; an optimizer under K stores metadata "K.lr" and
 * "K.state.<i>.step" and its buffers as "K.state.<i>.<torch's name>"
 * (momentum_buffer; exp_avg, exp_avg_sq); any other entry is metadata
 * "K" holding its repr, read back as a Python literal. */

/* An FSDP rank's part of a tensor: elements [first, first + count) from src. */
typedef struct ck_slice { const char *name; uint64_t first, count; const float *src; } ck_slice;

typedef struct ckpt {
  fsK_entry *t; size_t nt, capt;
  ck_slice *sl; size_t ns, caps;  /* sharded tensors (their entries in t have no data) */
  fsK_meta *m; size_t nm, capm;
  char **owned; size_t nowned, capowned; /* names and texts to free */
} ckpt;

/* v (n of *cap elements of size elem used) with room for one more: v itself,
 * or v moved to a doubled block; NULL on OOM (v still valid). */
static void *ck_room(void *v, size_t n, size_t *cap, size_t elem) {
  if (n < *cap) return v;
  size_t want = *cap ? 2 * *cap : 16;
  void *w = realloc(v, want * elem);
  if (w) *cap = want;
  return w;
}

static char *ck_own(ckpt *c, char *s) {
  char **o = s ? ck_room(c->owned, c->nowned, &c->capowned, sizeof *o) : NULL;
  if (!o) {
    free(s);
    return NULL;
  }
  c->owned = o;
  return c->owned[c->nowned++] = s;
}

/* src (nbytes on dev) as host memory the checkpoint can write: src itself on
 * the cpu, else a copy freed with the checkpoint.  NULL + fsV_error on failure. */
static const void *ck_host(ckpt *c, fs_device dev, const void *src, size_t nbytes) {
  if (dev == FS_DEV_CPU) return src;
  char *h = malloc(nbytes ? nbytes : 1);
  if (!h || fsB_transfer(FS_DEV_CPU, h, dev, src, nbytes) < 0) {
    free(h);
    if (h) rt_fail();
    else fsV_seterr("out of memory");
    return NULL;
  }
  return ck_own(c, h);
}

static char *ck_fmt(ckpt *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *ck_fmt(ckpt *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return ck_own(c, strdup(buf));
}

static int ck_tensor(ckpt *c, const char *name, const fs_tensor *t) {
  if (!name) return -1;
  if (!t->data) {
    fsV_seterr("cannot save '%s': the tensor is on the %s device", name, fsT_device_name(t->device));
    return -1;
  }
  const void *data = ck_host(c, t->device, t->data, fsT_nbytes(t));
  fsK_entry *e = data ? ck_room(c->t, c->nt, &c->capt, sizeof *e) : NULL;
  if (!e) return -1;
  c->t = e;
  c->t[c->nt++] = (fsK_entry){name, t->dtype, t->rank, t->shape, data};
  return 0;
}

/* A sharded tensor of shape like's: this rank holds count elements from
 * first, at src on dev. */
static int ck_sliced(ckpt *c, const char *name, const fs_tensor *like, int64_t first, int64_t count,
                     fs_device dev, const float *src) {
  if (!name || (count && !(src = ck_host(c, dev, src, (size_t)count * sizeof *src)))) return -1;
  fsK_entry *e = ck_room(c->t, c->nt, &c->capt, sizeof *e);
  if (!e) return -1;
  c->t = e;
  c->t[c->nt++] = (fsK_entry){name, FS_F32, like->rank, like->shape, NULL};
  if (!count) return 0;
  ck_slice *v = ck_room(c->sl, c->ns, &c->caps, sizeof *v);
  if (!v) return -1;
  c->sl = v;
  c->sl[c->ns++] = (ck_slice){name, (uint64_t)first, (uint64_t)count, src};
  return 0;
}

static int ck_meta(ckpt *c, const char *key, const char *value) {
  fsK_meta *m = key && value ? ck_room(c->m, c->nm, &c->capm, sizeof *m) : NULL;
  if (!m) return -1;
  c->m = m;
  c->m[c->nm++] = (fsK_meta){key, value};
  return 0;
}

static void ck_free(ckpt *c) {
  for (size_t i = 0; i < c->nowned; i++) free(c->owned[i]);
  free(c->owned);
  free(c->sl);
  free(c->t);
  free(c->m);
}

static const char *buf_name(const optv *ov, int which) {
  if (ov->o->kind == FSO_SGD) return which ? NULL : "momentum_buffer";
  return which ? "exp_avg_sq" : "exp_avg";
}

/* filter[key](name, value) decides whether a module parameter is saved */
static int keep(fsE_ctx *E, fs_value *filter, fs_value *key, const char *name, fs_tensor *t, bool *yes) {
  fs_value *fn = filter->type == FSV_DICT ? fsV_dict_get(filter, key) : NULL;
  *yes = true;
  if (!fn) return 0;
  fs_value *args[2] = {fsV_cstr(name), tensor_value(fsT_retain(t))};
  fsV_args fa = {args, 2, NULL, NULL, 0, {0, 0}};
  fs_value *r = args[0] && args[1] ? fsE_call(E, fn, &fa) : NULL;
  fsV_release(args[0]);
  fsV_release(args[1]);
  if (!r) return -1;
  *yes = fsV_truthy(r);
  fsV_release(r);
  return 0;
}

/* The FSDP model whose flat shards o steps, or NULL. */
static fsSH_model *sharded_of(fabv *fv, const fs_optim *o) {
  for (size_t i = 0; fv->synced && i < fv->synced->u.seq.n; i++) {
    fsSH_model *sh = ((modv *)fv->synced->u.seq.items[i]->u.obj.data)->sh;
    bool same = sh && sh->nunits == o->nparams;
    for (int k = 0; same && k < sh->nunits; k++) same = sh->units[k].flat == o->params[k];
    if (same) return sh;
  }
  return NULL;
}

/* clip_gradients under FSDP: the squared norms (or maxima) of all ranks' shards. */
static int shard_norm(void *ud, float *acc, bool inf) {
  return fsCC_all_reduce_host(ud, acc, 1, FS_F32, inf ? FSCC_MAX : FSCC_SUM) == 0 ? 0 : -1;
}

/* FSDP: every parameter under its full name; this rank writes its slice. */
static int ck_sharded_module(fsE_ctx *E, ckpt *c, fs_value *key, fsSH_model *sh, fs_value *filter) {
  for (int64_t i = 0; i < sh->nall; i++) {
    int64_t first, count, at;
    int u = fsSH_param_slice(sh, i, &first, &count, &at);
    bool yes;
    if (keep(E, filter, key, sh->all[i].name, sh->all[i].t, &yes) < 0) return -1;
    if (yes && ck_sliced(c, ck_fmt(c, "%s.%s", key->u.str.s, sh->all[i].name), sh->all[i].t, first, count,
                         sh->units[u].flat->device, fsT_f32(sh->units[u].flat) + at) < 0)
      return -1;
  }
  return 0;
}

static int ck_add(fsE_ctx *E, fabv *fv, ckpt *c, fs_value *key, fs_value *v, fs_value *filter) {
  const char *k = key->u.str.s;
  modv *mv = fsV_objdata(v, &module_class);
  optv *ov = fsV_objdata(v, &optim_class);
  if (mv && mv->sh) return ck_sharded_module(E, c, key, mv->sh, filter);
  if (mv) {
    fsM_param *ps;
    int64_t n = fsM_parameters(mv->m, &ps);
    int rc = n < 0 ? (rt_fail(), -1) : 0;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
      bool yes;
      rc = keep(E, filter, key, ps[i].name, ps[i].t, &yes);
      if (rc == 0 && yes) rc = ck_tensor(c, ck_fmt(c, "%s.%s", k, ps[i].name), ps[i].t);
    }
    if (n >= 0) fsM_params_free(ps, n);
    return rc;
  }
  if (ov) {
    char lr[40];
    fsV_float_repr(ov->o->lr, lr, sizeof lr);
    if (ck_meta(c, ck_fmt(c, "%s.lr", k), ck_own(c, strdup(lr))) < 0) return -1;
    /* under FSDP the states of the one-device layout: one per parameter, sliced */
    fsSH_model *sh = sharded_of(fv, ov->o);
    for (int64_t i = 0; i < (sh ? sh->nall : ov->o->nparams); i++) {
      int64_t first = 0, count = 0, at = 0, j = sh ? fsSH_param_slice(sh, i, &first, &count, &at) : i;
      if (ck_meta(c, ck_fmt(c, "%s.state.%lld.step", k, (long long)i),
                  ck_fmt(c, "%lld", (long long)ov->o->steps[j])) < 0)
        return -1;
      fs_tensor *b[2] = {ov->o->buf0[j], ov->o->buf1[j]};
      for (int w = 0; w < 2; w++) {
        char *name = b[w] ? ck_fmt(c, "%s.state.%lld.%s", k, (long long)i, buf_name(ov, w)) : NULL;
        if (b[w] && (sh ? ck_sliced(c, name, sh->all[i].t, first, count, b[w]->device, fsT_f32(b[w]) + at)
                        : ck_tensor(c, name, b[w])) < 0)
          return -1;
      }
    }
    return 0;
  }
  if (v->type == FSV_OBJ) {
    fsV_seterr("cannot save state entry '%s': a %s is not serializable", k, fsV_type_name(v));
    return -1;
  }
  return ck_meta(c, k, ck_own(c, fsV_repr(v)));
}

/* The fabric.h view of a checkpoint state; *n entries, or NULL + error. */
static fsF_entry *state_entries(const fs_value *state, size_t *n) {
  *n = state->u.dict.n;
  fsF_entry *es = calloc(*n + 1, sizeof *es);
  if (!es) {
    fsV_seterr("out of memory");
    return NULL;
  }
  for (size_t i = 0; i < *n; i++) {
    const fs_value *k = state->u.dict.keys[i], *v = state->u.dict.vals[i];
    if (k->type != FSV_STR) {
      fsV_seterr("state keys must be strings, not %s", fsV_type_name(k));
      free(es);
      return NULL;
    }
    modv *mv = fsV_objdata(v, &module_class);
    optv *ov = fsV_objdata(v, &optim_class);
    es[i] = (fsF_entry){k->u.str.s, mv ? FSF_S_MODEL : ov ? FSF_S_OPTIM : FSF_S_OTHER,
                        mv ? &mv->st : NULL, ov ? &ov->st : NULL};
  }
  return es;
}

static uint64_t entry_numel(const fsK_entry *e) {
  uint64_t n = 1;
  for (int d = 0; d < e->ndim; d++) n *= (uint64_t)e->shape[d];
  return n;
}

/* FSDP: one ordinary file from all ranks (safetensors.h's sliced writer):
 * rank 0 creates it with every entry and writes the replicated ones, each
 * rank writes its slices, rank 0 commits once every rank has. */
static int save_sharded(fabv *fv, const char *path, const ckpt *c) {
  fsCC_comm *cc = fv->comm;
  int rank = cc ? cc->rank : 0;
  fsK_writer w;
  char *err = NULL;
  int64_t msg[1 + 512] = {0}; /* rank 0 created it; the temporary file's name */
  bool open = false;
  int64_t ok = 1;
  if (rank == 0) {
    open = fsK_create(&w, path, c->t, c->nt, c->m, c->nm, &err) == 0;
    if (open && strlen(fsK_tmp_path(&w)) < sizeof msg - sizeof msg[0]) {
      msg[0] = 1;
      strcpy((char *)(msg + 1), fsK_tmp_path(&w));
    }
    for (size_t i = 0; open && ok && i < c->nt; i++)
      if (c->t[i].data && fsK_write(&w, c->t[i].name, 0, entry_numel(&c->t[i]), c->t[i].data, &err) < 0) ok = 0;
  }
  if (cc && fsCC_broadcast_host(cc, msg, sizeof msg / sizeof msg[0], FS_I64, 0) < 0) ok = 0;
  else if (!msg[0]) ok = 0;
  else if (rank != 0) open = fsK_attach(&w, (const char *)(msg + 1), &err) == 0;
  ok &= open;
  for (size_t i = 0; ok && i < c->ns; i++)
    if (fsK_write(&w, c->sl[i].name, c->sl[i].first, c->sl[i].count, c->sl[i].src, &err) < 0) ok = 0;
  if (rank != 0 && open && fsK_commit(&w, ok ? &err : NULL) < 0) ok = 0; /* fsync */
  if (cc && fsCC_all_reduce_host(cc, &ok, 1, FS_I64, FSCC_MIN) < 0) ok = 0;
  if (rank == 0 && open && (ok ? fsK_commit(&w, &err) < 0 : (fsK_abort(&w), 0))) ok = 0;
  if (cc && fsCC_broadcast_host(cc, &ok, 1, FS_I64, 0) < 0) ok = 0; /* the file is in place for every rank */
  if (ok) return 0;
  if (err) err_own(err);
  else fsV_seterr("fabric.save: %s could not be written (%s)", path,
                  cc && fsT_error()[0] ? fsT_error() : "another rank failed");
  return -1;
}

static fs_value *fabric_save(fsE_ctx *E, fabv *fv, fs_value **s, const fsV_args *a) {
  fsF_fabric *f = &fv->f;
  size_t n;
  fsF_entry *es = state_entries(s[1], &n);
  if (!es) return NULL;
  fs_value *filter = s[2];
  fsF_filter fl = {.kind = filter->type == FSV_NONE ? FSF_UNSET : filter->type == FSV_DICT ? FSF_LIST : FSF_OTHER};
  char *frepr = fl.kind == FSF_OTHER ? fsV_repr(filter) : NULL;
  size_t nf = filter->type == FSV_DICT ? filter->u.dict.n : 0;
  const char **keys = calloc(nf + 1, sizeof *keys), **vrepr = calloc(nf + 1, sizeof *vrepr);
  int *callable = calloc(nf + 1, sizeof *callable);
  fs_value *r = NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  if (!keys || !vrepr || !callable) {
    fsV_seterr("out of memory");
    goto done;
  }
  for (size_t i = 0; i < nf; i++) {
    const fs_value *k = filter->u.dict.keys[i], *v = filter->u.dict.vals[i];
    keys[i] = k->type == FSV_STR ? k->u.str.s : "?";
    callable[i] = v->type == FSV_OBJ && v->u.obj.cls->call != NULL;
    if (!callable[i]) vrepr[i] = fsV_repr(v);
  }
  fl.repr = frepr;
  fl.keys = keys;
  fl.callable = callable;
  fl.vrepr = vrepr;
  fl.n = nf;
  if (issues(E, a, &iss, fsF_check_save(f, es, n, &fl, &iss)) < 0) goto done;
  ckpt c = {0};
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = ck_add(E, fv, &c, s[1]->u.dict.keys[i], s[1]->u.dict.vals[i], filter);
    if (rc < 0 && !fsV_error()[0]) fsV_seterr("out of memory");
  }
  char *err = NULL;
  if (rc == 0 && fv->cfg.cls == FSF_FSDP)
    r = save_sharded(fv, s[0]->u.str.s, &c) == 0 ? fsV_none() : NULL;
  else if (rc == 0 && (!fv->comm || fv->comm->rank == 0) && fsK_save(s[0]->u.str.s, c.t, c.nt, c.m, c.nm, &err) < 0)
    err_own(err);
  else if (rc == 0 && fv->comm && fsCC_barrier(fv->comm) < 0) /* the file is complete for every rank */
    comm_fail();
  else if (rc == 0)
    r = fsV_none();
  ck_free(&c);
done:
  for (size_t i = 0; vrepr && i < nf; i++) free((char *)vrepr[i]);
  free(keys);
  free(vrepr);
  free(callable);
  free(frepr);
  free(es);
  return r;
}

/* Reads names[0..n) (with shapes of ts) into ts' storage. strict: the
 * tensors under prefix must be exactly these; else missing ones are skipped. */
static int ck_read(const fsK_file *kf, fs_tensor *const *ts, const char *const *names, size_t n,
                   const char *prefix, bool strict) {
  fsK_entry *want = calloc(n + 1, sizeof *want);
  void **bufs = calloc(n + 1, sizeof *bufs);
  char *err = NULL;
  int rc = -1;
  if (!want || !bufs) fsV_seterr("out of memory");
  else {
    for (size_t i = 0; i < n; i++) want[i] = (fsK_entry){names[i], ts[i]->dtype, ts[i]->rank, ts[i]->shape, NULL};
    if (fsK_load(kf, want, n, prefix, strict, bufs, NULL, &err) < 0) err_own(err);
    else rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
      if (!bufs[i]) {
        continue;
      } else if ((!ts[i]->data && fsT_alloc_storage(ts[i], FS_DEV_CPU) < 0) ||
                 fsB_transfer(ts[i]->device, ts[i]->data, FS_DEV_CPU, bufs[i], fsT_nbytes(ts[i])) < 0) {
        rt_fail();
        rc = -1;
      }
    }
  }
  for (size_t i = 0; bufs && i < n; i++) free(bufs[i]);
  free(bufs);
  free(want);
  return rc;
}

/* count floats of a checkpoint entry from first into dst on dev (through the
 * host when dev is a device); -1 + fsV_error. */
static int ck_read_slice(const fsK_file *kf, const fsK_info *in, int64_t first, int64_t count,
                         fs_device dev, float *dst) {
  float *h = dev == FS_DEV_CPU ? dst : malloc((size_t)count * sizeof *h);
  char *err = NULL;
  int rc = -1;
  if (!h) fsV_seterr("out of memory");
  else if (fsK_read(kf, in, (uint64_t)first, (uint64_t)count, FS_F32, h, &err) < 0) err_own(err);
  else if (h != dst && fsB_transfer(dev, dst, FS_DEV_CPU, h, (size_t)count * sizeof *h) < 0) rt_fail();
  else rc = 0;
  if (h != dst) free(h);
  return rc;
}

/* FSDP: each rank reads only its slices of the one-device layout. */
static int load_sharded(const fsK_file *kf, const char *key, fsSH_model *sh, bool strict) {
  fsK_entry *want = calloc((size_t)sh->nall + 1, sizeof *want);
  char **names = calloc((size_t)sh->nall + 1, sizeof *names);
  const fsK_info **found = calloc((size_t)sh->nall + 1, sizeof *found);
  char prefix[512], *report = NULL;
  snprintf(prefix, sizeof prefix, "%s%s", key, *key ? "." : "");
  int rc = want && names && found ? 0 : -1;
  for (int64_t i = 0; rc == 0 && i < sh->nall; i++) {
    fs_tensor *t = sh->all[i].t;
    size_t len = strlen(prefix) + strlen(sh->all[i].name) + 1;
    if (!(names[i] = malloc(len))) rc = -1;
    else snprintf(names[i], len, "%s%s", prefix, sh->all[i].name);
    want[i] = (fsK_entry){names[i], t->dtype, t->rank, t->shape, NULL};
  }
  if (rc < 0) fsV_seterr("out of memory");
  else if ((report = fsK_match(kf, want, (size_t)sh->nall, prefix, found)) && strict) {
    fsV_seterr("%s", report);
    rc = -1;
  }
  for (int64_t i = 0; rc == 0 && i < sh->nall; i++) {
    int64_t first, count, at;
    int u = fsSH_param_slice(sh, i, &first, &count, &at);
    fs_tensor *flat = sh->units[u].flat;
    if (found[i] && count && ck_read_slice(kf, found[i], first, count, flat->device, fsT_f32(flat) + at) < 0)
      rc = -1;
  }
  for (int64_t i = 0; names && i < sh->nall; i++) free(names[i]);
  free(names);
  free(want);
  free(found);
  free(report);
  return rc;
}

static int load_module(const fsK_file *kf, const char *key, modv *mv, bool strict) {
  if (mv->sh) return load_sharded(kf, key, mv->sh, strict);
  fsM_param *ps;
  int64_t n = fsM_parameters(mv->m, &ps);
  if (n < 0) return rt_fail(), -1;
  fs_tensor **ts = calloc((size_t)n + 1, sizeof *ts);
  char **names = calloc((size_t)n + 1, sizeof *names);
  int rc = ts && names ? 0 : -1;
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    ts[i] = ps[i].t;
    size_t len = strlen(key) + strlen(ps[i].name) + 2;
    if (!(names[i] = malloc(len))) rc = -1;
    else snprintf(names[i], len, "%s%s%s", key, *key ? "." : "", ps[i].name);
  }
  if (rc < 0) fsV_seterr("out of memory");
  else {
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s%s", key, *key ? "." : "");
    rc = ck_read(kf, ts, (const char *const *)names, (size_t)n, prefix, strict);
  }
  if (rc == 0) mv->st.meta = has_meta(mv->m);
  for (int64_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
  free(ts);
  fsM_params_free(ps, n);
  return rc;
}

static int load_optim(const fsK_file *kf, const char *key, fabv *fv, optv *ov) {
  char name[768], pre[256];
  snprintf(pre, sizeof pre, "%s%s", key, *key ? "." : ""); /* load_raw: no key */
  snprintf(name, sizeof name, "%slr", pre);
  const char *lr = fsK_meta_get(kf, name);
  if (lr) ov->o->lr = strtod(lr, NULL);
  fsSH_model *sh = fv ? sharded_of(fv, ov->o) : NULL; /* FSDP: this rank's slices of each state */
  for (int64_t i = 0; i < (sh ? sh->nall : ov->o->nparams); i++) {
    int64_t first = 0, count = 0, at = 0, j = sh ? fsSH_param_slice(sh, i, &first, &count, &at) : i;
    snprintf(name, sizeof name, "%sstate.%lld.step", pre, (long long)i);
    const char *st = fsK_meta_get(kf, name);
    ov->o->steps[j] = st ? strtoll(st, NULL, 10) : 0;
    fs_tensor **slot[2] = {&ov->o->buf0[j], &ov->o->buf1[j]};
    for (int w = 0; w < 2; w++) {
      const char *bn = buf_name(ov, w);
      if (!bn) continue;
      snprintf(name, sizeof name, "%sstate.%lld.%s", pre, (long long)i, bn);
      const fsK_info *in = fsK_find(kf, name);
      if (!in) continue;
      if (!*slot[w] && !(*slot[w] = fsT_zeros_like(ov->o->params[j]))) return rt_fail(), -1;
      if (sh && count && ck_read_slice(kf, in, first, count, (*slot[w])->device, fsT_f32(*slot[w]) + at) < 0)
        return -1;
      const char *nm = name;
      if (!sh && ck_read(kf, slot[w], &nm, 1, NULL, false) < 0) return -1;
    }
  }
  return 0;
}

static fs_value *fabric_load(fsE_ctx *E, fabv *fv, fs_value **s, const fsV_args *a) {
  fsF_fabric *f = &fv->f;
  fs_value *state = s[1];
  size_t n = 0;
  fsF_entry *es = state->type == FSV_DICT ? state_entries(state, &n) : calloc(1, sizeof *es);
  if (!es) return NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsK_file kf;
  char *err = NULL;
  if (issues(E, a, &iss, fsF_check_load(f, es, n, state->type == FSV_NONE, &iss)) < 0) {
    free(es);
    return NULL;
  }
  free(es);
  if (fsK_open(&kf, s[0]->u.str.s, &err) < 0) return err_own(err);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    fs_value *k = state->u.dict.keys[i], *v = state->u.dict.vals[i];
    modv *mv = fsV_objdata(v, &module_class);
    optv *ov = fsV_objdata(v, &optim_class);
    if (mv) rc = load_module(&kf, k->u.str.s, mv, fsV_truthy(s[2]));
    else if (ov) rc = load_optim(&kf, k->u.str.s, fv, ov);
    else if (fsK_meta_get(&kf, k->u.str.s)) {
      fs_value *x = fsV_literal(fsK_meta_get(&kf, k->u.str.s));
      rc = x ? fsV_dict_set(state, k, x) : -1;
    }
  }
  /* what the state did not consume: plain entries of the checkpoint */
  fs_value *rest = rc == 0 ? fsV_dict() : NULL;
  for (size_t i = 0; rest && i < kf.nmeta; i++) {
    const char *key = kf.meta[i].key;
    bool used = false;
    for (size_t j = 0; state->type == FSV_DICT && j < state->u.dict.n && !used; j++) {
      const char *sk = state->u.dict.keys[j]->u.str.s;
      size_t l = strlen(sk);
      used = strncmp(key, sk, l) == 0 && (key[l] == '\0' || key[l] == '.');
    }
    if (used || strchr(key, '.') || strcmp(key, "format") == 0) continue;
    fs_value *x = fsV_literal(kf.meta[i].value);
    if (!x) continue; /* not an entry this module wrote */
    fs_value *kv = fsV_cstr(key);
    bool ok = kv && fsV_dict_set(rest, kv, x) == 0;
    if (!kv) fsV_release(x);
    fsV_release(kv);
    if (!ok) {
      fsV_release(rest);
      rest = NULL;
    }
  }
  fsK_close(&kf);
  if (!rest && !fsV_error()[0]) fsV_seterr("out of memory");
  return rest;
}

/* fabric.to_device(obj): Fabric's apply_to_collection: the tensors of
 * (nested) lists, tuples and dicts move in new containers, a module moves in
 * place (as module.to), anything else is returned as is. */
static fs_value *to_device(fs_value *v, fs_device dev, int depth) {
  fs_tensor *t = as_tensor(v);
  modv *mv = fsV_objdata(v, &module_class);
  if (t) return tensor_value(fsT_to_device(t, dev));
  if (mv && !mv->sh) { /* an FSDP model's shards are placed already */
    if (fsM_to_device(mv->m, dev) < 0) return rt_fail();
    mv->dev = dev;
  }
  if (mv) return fsV_retain(v);
  if (v->type != FSV_LIST && v->type != FSV_TUPLE && v->type != FSV_DICT) return fsV_retain(v);
  if (depth >= FS_MAX_DEPTH) {
    fsV_seterr("to_device(): the collection is nested more than %d deep", FS_MAX_DEPTH);
    return NULL;
  }
  bool dict = v->type == FSV_DICT;
  size_t n = dict ? v->u.dict.n : v->u.seq.n;
  fs_value *r = dict ? fsV_dict() : v->type == FSV_LIST ? fsV_list(n) : fsV_tuple(n);
  for (size_t i = 0; r && i < n; i++) {
    fs_value *x = to_device(dict ? v->u.dict.vals[i] : v->u.seq.items[i], dev, depth + 1);
    int rc = !x ? -1 : dict ? fsV_dict_set(r, v->u.dict.keys[i], x)
                   : v->type == FSV_LIST ? fsV_list_append(r, x) : (fsV_seq_set(r, i, x), 0);
    if (rc < 0) {
      fsV_release(r);
      r = NULL;
    }
  }
  return r;
}

static fs_value *fabric_method(fsE_ctx *E, fs_value *v, const char *name, const fsV_args *a) {
  const fsSig *sig = fsSig_member("Fabric", name);
  if (!sig || sig->kind != FSSIG_METHOD) return NULL;
  fabv *fv = v->u.obj.data;
  fsF_fabric *f = &fv->f;
  fs_value *s[8];
  if (fsE_bind(E, sig, a, s) < 0) return NULL;
  fs_value *r = NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  bool runs = !strcmp(name, "backward") || !strcmp(name, "save") || !strcmp(name, "load") || !strcmp(name, "load_raw");
  if (E->opt->plan && runs) {
    r = plan_done(E, NULL); /* the model is used before an optimizer was set up */
  } else if (strcmp(name, "launch") == 0) {
    if (s[0]->type != FSV_NONE) fsV_seterr("launch(function) is not supported in this build");
    else if (issues(E, a, &iss, fsF_check_launch(f, FSF_FN_NONE, NULL, NULL, 0, &iss)) == 0) r = ddp_launch(E, fv);
  } else if (strcmp(name, "seed_everything") == 0) {
    int64_t seed = s[0]->type == FSV_INT ? s[0]->u.i : 0;
    E->seed = (uint64_t)seed;
    E->samples = 0; /* sampling starts over, as torch's generator does */
    r = fsV_int(seed);
  } else if (strcmp(name, "init_module") == 0) {
    int ei = s[0]->type == FSV_NONE ? -1 : fsV_truthy(s[0]);
    if (issues(E, a, &iss, fsF_check_init_module(f, ei, &iss)) == 0)
      r = make_ctx(2, fsF_init_module_effect(&fv->cfg, ei) == FSF_INIT_META ? FS_DEV_META : fv->dev);
  } else if (strcmp(name, "setup_module") == 0 || strcmp(name, "setup") == 0) {
    bool joint = name[5] == '\0';
    modv *mv = need_module(s[0], joint ? "setup" : "setup_module");
    fs_value *opts = joint ? s[1] : NULL;
    size_t no = opts ? opts->u.seq.n : 0;
    const fsF_optim **st = calloc(no + 1, sizeof *st);
    optv **ov = calloc(no + 1, sizeof *ov);
    if (!st || !ov) fsV_seterr("out of memory");
    else if (mv && gather_optims(opts ? opts : s[1], name, st, ov) == 0 &&
             issues(E, a, &iss, joint ? fsF_check_setup(f, &mv->st, st, no, &iss)
                                      : fsF_check_setup_module(f, &mv->st, &iss)) == 0 &&
             setup_module_done(E, fv, s[0], mv) == 0 && fsdp_rebind(mv, ov, no) == 0) {
      for (size_t i = 0; i < no; i++) fsF_setup_optim_done(&ov[i]->st);
      r = E->opt->plan && no ? plan_done(E, ov[0]) : joint ? one_or_tuple(s[0], opts) : fsV_retain(s[0]);
    }
    free(st);
    free(ov);
  } else if (strcmp(name, "setup_optimizers") == 0) {
    size_t no = s[0]->u.seq.n;
    const fsF_optim **st = calloc(no + 1, sizeof *st);
    optv **ov = calloc(no + 1, sizeof *ov);
    if (!st || !ov) fsV_seterr("out of memory");
    else if (gather_optims(s[0], name, st, ov) == 0 &&
             issues(E, a, &iss, fsF_check_setup_optimizers(f, st, no, &iss)) == 0) {
      for (size_t i = 0; i < no; i++) fsF_setup_optim_done(&ov[i]->st);
      r = E->opt->plan && no ? plan_done(E, ov[0]) : no ? one_or_tuple(NULL, s[0]) : fsV_none();
    }
    free(st);
    free(ov);
  } else if (strcmp(name, "setup_dataloaders") == 0) {
    size_t n = s[0]->u.seq.n;
    fsF_loader *sts = calloc(n + 1, sizeof *sts);
    const fsF_loader **p = calloc(n + 1, sizeof *p);
    if (!sts || !p) fsV_seterr("out of memory");
    else {
      for (size_t i = 0; i < n; i++) {
        loaderv *lv = fsV_objdata(s[0]->u.seq.items[i], &loader_class);
        sts[i] = lv ? lv->st : (fsF_loader){0};
        p[i] = &sts[i];
      }
      if (issues(E, a, &iss, fsF_check_setup_dataloaders(f, p, n, &iss)) == 0) {
        bool ok = true;
        for (size_t i = 0; ok && i < n; i++) {
          loaderv *lv = s[0]->u.seq.items[i]->u.obj.data;
          char *err = NULL;
          lv->st.wrapped = 1;
          lv->dev = fv->dev; /* Fabric's move_to_device */
          /* DistributedSampler(shuffle=the loader's, seed=the global seed), as Fabric injects it */
          if (fv->env.world_size > 1 && fsV_truthy(s[1]) &&
              fsDL_distribute(&lv->L, fv->env.rank, fv->env.world_size, lv->L.shuffle, E->seed, false, &err) < 0)
            ok = err_own(err) != NULL;
        }
        if (ok) r = n ? one_or_tuple(NULL, s[0]) : fsV_none();
      }
    }
    free(sts);
    free(p);
  } else if (strcmp(name, "backward") == 0) {
    fs_tensor *t = need_tensor(s[0], "backward", "tensor");
    modv *mv = s[2]->type == FSV_NONE ? NULL : need_module(s[2], "backward");
    double loss;
    if (t && t->numel == 1 && t->data && fsG_item(t, &loss) == 0) E->last_loss = loss;
    if (t && (mv || s[2]->type == FSV_NONE) &&
        issues(E, a, &iss, fsF_check_backward(f, mv ? &mv->st : NULL, &iss)) == 0)
      r = fsdp_backward_done(fv, fsG_backward(t) == 0) < 0 ? rt_fail() : ddp_sync_grads(fv) < 0 ? NULL : fsV_none();
  } else if (strcmp(name, "clip_gradients") == 0) {
    modv *mv = need_module(s[0], name);
    optv *ov = mv ? fsV_objdata(s[1], &optim_class) : NULL;
    if (mv && !ov) fsV_seterr("clip_gradients(): expected an optimizer, got %s", fsV_type_name(s[1]));
    else if (ov && issues(E, a, &iss, fsF_check_clip_gradients(f, &mv->st, s[2]->type != FSV_NONE,
                                                              s[3]->type != FSV_NONE, &iss)) == 0) {
      if (s[2]->type != FSV_NONE) {
        fsO_clip_grad_value(ov->o->params, ov->o->nparams, fsV_to_double(s[2]));
        r = fsV_none();
      } else {
        double total; /* FSDP: the norm over every rank's shards */
        bool global = fv->comm && sharded_of(fv, ov->o);
        if (fsO_clip_grad_norm_with(ov->o->params, ov->o->nparams, fsV_to_double(s[3]), fsV_to_double(s[4]),
                                    global ? shard_norm : NULL, fv->comm, &total) < 0)
          rt_fail();
        else
          r = tensor_value(fsT_scalar((float)total));
      }
    }
  } else if (strcmp(name, "print") == 0) {
    r = fv->env.local_rank == 0 ? fsE_print(E, s) : fsV_none(); /* local rank 0 of each node */
  } else if (strcmp(name, "save") == 0) {
    r = fabric_save(E, fv, s, a);
  } else if (strcmp(name, "load") == 0) {
    r = fabric_load(E, fv, s, a);
  } else if (strcmp(name, "load_raw") == 0) {
    modv *mv = fsV_objdata(s[1], &module_class);
    optv *ov = fsV_objdata(s[1], &optim_class);
    fsK_file kf;
    char *err = NULL;
    if (!mv && !ov) fsV_seterr("load_raw(): expected a module or an optimizer, got %s", fsV_type_name(s[1]));
    else if (issues(E, a, &iss, fsF_check_load_raw(f, ov != NULL, &iss)) < 0) {
    } else if (fsK_open(&kf, s[0]->u.str.s, &err) < 0) {
      err_own(err);
    } else {
      if ((mv ? load_module(&kf, "", mv, fsV_truthy(s[2])) : load_optim(&kf, "", fv, ov)) == 0) r = fsV_none();
      fsK_close(&kf);
    }
  } else if (strcmp(name, "no_backward_sync") == 0) {
    modv *mv = need_module(s[0], name);
    if (mv && issues(E, a, &iss, fsF_check_no_backward_sync(f, &mv->st, &iss)) == 0 &&
        (r = make_ctx(3, FS_DEV_CPU))) {
      ctxv *c = r->u.obj.data;
      c->flag = &fv->no_sync;
      c->owner = fsV_retain(v);
    }
  } else if (strcmp(name, "to_device") == 0) {
    r = to_device(s[0], fv->dev, 0);
  } else if (fv->env.rank != 0 && (strcmp(name, "log") == 0 || strcmp(name, "log_dict") == 0)) {
    r = fsV_none(); /* loggers run on global rank 0, as Lightning's */
  } else if (strcmp(name, "log") == 0) {
    r = fabric_log(E, fv, &s[0], &s[1], 1, s[2]);
  } else if (strcmp(name, "log_dict") == 0) {
    r = fabric_log(E, fv, s[0]->u.dict.keys, s[0]->u.dict.vals, s[0]->u.dict.n, s[1]);
  } else if (strcmp(name, "barrier") == 0 || strcmp(name, "all_reduce") == 0 ||
             strcmp(name, "all_gather") == 0 || strcmp(name, "broadcast") == 0) {
    if (issues(E, a, &iss, fsF_check_collective(f, &iss)) == 0) r = collective(fv, name, s);
  } else {
    fsV_seterr("Fabric.%s() is not available yet in this build", name);
  }
  fsF_issues_free(&iss);
  fsE_unbind(sig, s);
  return r;
}

static fs_value *fabric_getattr(fsE_ctx *E, fs_value *v, const char *name) {
  fabv *fv = v->u.obj.data;
  if (strcmp(name, "global_rank") == 0) return fsV_int(fv->env.rank);
  if (strcmp(name, "local_rank") == 0) return fsV_int(fv->env.local_rank);
  if (strcmp(name, "node_rank") == 0) return fsV_int(fv->env.node_rank);
  if (strcmp(name, "world_size") == 0) return fsV_int(fv->env.world_size);
  if (strcmp(name, "is_global_zero") == 0) return fsV_bool(fv->env.rank == 0);
  if (strcmp(name, "device") == 0) { /* torch.device("cuda", local_rank), as Fabric's */
    fs_value *d = make_ctx(0, fv->dev);
    if (d && fv->dev == FS_DEV_CUDA) ((ctxv *)d->u.obj.data)->index = fv->env.local_rank;
    return d;
  }
  return NULL;
}

static char *fabric_repr(fs_value *v) {
  fabv *fv = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<Fabric %s on %s, precision %s>", fsF_cls_name(fv->cfg.cls),
                 fsF_accel_name(fv->cfg.accel), fsF_prec_name(fv->cfg.precision));
  return fsV_buf_take(&b);
}

static const fsV_class fabric_class = {
  .name = "Fabric", .getattr = fabric_getattr, .call_method = fabric_method,
  .repr = fabric_repr, .free = fabv_free,
};

const fsE_builtin fsE_rt_builtins[] = {
  {"cross_entropy", b_cross_entropy}, {"mse_loss", b_mse_loss},
  {"device", b_device}, {"no_grad", b_no_grad},
  {"Linear", l_linear}, {"Embedding", l_embedding}, {"PositionalEmbedding", l_posemb},
  {"LayerNorm", l_layernorm}, {"ReLU", l_relu}, {"GELU", l_gelu}, {"Tanh", l_tanh},
  {"Sigmoid", l_sigmoid}, {"SiLU", l_silu}, {"Dropout", l_dropout}, {"Flatten", l_flatten},
  {"CausalSelfAttention", l_attention},
  {"SGD", o_sgd}, {"Adam", o_adam}, {"AdamW", o_adamw},
  {"FashionMNIST", d_fashion}, {"MNIST", d_mnist}, {"TextDataset", d_text},
  {"RandomDataset", d_random}, {"DataLoader", d_loader},
  {"Fabric", f_fabric}, {"FSDPStrategy", s_fsdp}, {"DDPStrategy", s_ddp},
  {"DeepSpeedStrategy", s_deepspeed},
  {NULL, NULL},
};
