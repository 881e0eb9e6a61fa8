/* lib_tensor.c -- Tensor values over runtime/tensor/autograd.h: torch's
 * methods, operators, indexing and attributes, and the losses.
 * Messages are torch's words.  Rows: the sig table's "Tensor." entries;
 * what the checker assumes of them: check/api_core.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "tensor_str.h"
#include "eval_int.h"

/* ---- tensors ---------------------------------------------------------------- */


fs_value *fsE_tensor_value(fs_tensor *t) { /* takes t */
  if (!t) return fsE_rt_fail();
  return fsV_obj(&fsE_tensor_class, t);
}

static void tensor_free(void *p) { fsT_release(p); }

fs_tensor *fsE_as_tensor(const fs_value *v) { return fsV_objdata(v, &fsE_tensor_class); }

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

fs_value *fsE_item_value(const fs_tensor *t) {
  double d;
  if (fsG_item(t, &d) < 0) return fsE_rt_fail();
  return t->dtype == FS_BOOL ? fsV_bool(d != 0) : t->dtype == FS_I64 ? fsV_int((int64_t)d) : fsV_float(d);
}

/* torch's repr (tensor_str.c) of a host copy; device='cuda:N' as torch */
static char *tensor_repr(fs_value *v) {
  fs_tensor *t = v->u.obj.data, *h = t->data ? fsT_to_device(t, FS_DEV_CPU) : fsT_retain(t);
  if (!h) return NULL;
  char dev[24]; /* a repr has no evaluator: the launcher's LOCAL_RANK is the GPU */
  const char *lr = getenv("LOCAL_RANK");
  snprintf(dev, sizeof dev, "cuda:%d", lr ? atoi(lr) : 0);
  char *r = fsT_str(h, t->device == FS_DEV_CUDA ? dev : t->device == FS_DEV_META ? "meta" : NULL,
                    t->requires_grad && !t->node ? "requires_grad=True" : NULL);
  fsT_release(h);
  return r;
}

/* a & b, a | b, a ^ b of bool or int64 tensors (bool with bool stays bool),
 * as torch's bitwise ops; a number operand is an int or a bool */
static fs_value *bitwise(fs_op op, fs_tensor *ta, fs_tensor *tb, fs_tensor *t, const fs_value *other) {
  fs_tensor *o = fsE_as_tensor(other);
  bool num_ok = !o && (other->type == FSV_INT || other->type == FSV_BOOL);
  const char *name = op == FS_OP_BITAND ? "bitwise_and" : op == FS_OP_BITOR ? "bitwise_or" : "bitwise_xor";
  if ((t->dtype != FS_BOOL && t->dtype != FS_I64) || (o && o->dtype != FS_BOOL && o->dtype != FS_I64) ||
      (!o && !num_ok)) {
    fsV_seterr("\"%s_cpu\" not implemented for 'Float'", name);
    return NULL;
  }
  fs_tensor *x = ta ? ta : tb, *y = ta && tb ? tb : NULL, *yv = NULL;
  if (!y) { /* the number as a 0-d tensor of its kind */
    yv = fsE_filled(other->type == FSV_BOOL ? FS_BOOL : FS_I64, 0, NULL, 0);
    if (yv && other->type == FSV_BOOL) fsT_bool(yv)[0] = other->u.b;
    else if (yv) fsT_i64(yv)[0] = other->u.i;
    fs_tensor *d = yv ? fsT_to_device(yv, x->device) : NULL;
    fsT_release(yv);
    if (!(y = yv = d)) return fsE_rt_fail();
  }
  fs_dtype dt = x->dtype == FS_BOOL && y->dtype == FS_BOOL ? FS_BOOL : FS_I64;
  fs_tensor *ex = NULL, *ey = NULL, *out = NULL;
  int rank;
  int64_t shape[FS_MAX_RANK];
  if (fsU_broadcast_shape(x->rank, x->shape, y->rank, y->shape, &rank, shape) == 0) { /* torch's message */
    ex = fsG_expand(x, rank, shape);
    ey = ex ? fsG_expand(y, rank, shape) : NULL;
  }
  fs_tensor *hx = ey ? fsT_to_device(ex, FS_DEV_CPU) : NULL, *hy = hx ? fsT_to_device(ey, FS_DEV_CPU) : NULL;
  if (hy && (out = fsT_new(dt, FS_DEV_CPU, rank, shape)))
    for (int64_t i = 0; i < out->numel; i++) {
      int64_t p = (int64_t)fsT_get(hx, i), q = (int64_t)fsT_get(hy, i);
      int64_t r = op == FS_OP_BITAND ? p & q : op == FS_OP_BITOR ? p | q : p ^ q;
      if (dt == FS_BOOL) fsT_bool(out)[i] = r != 0;
      else fsT_i64(out)[i] = r;
    }
  fs_tensor *d = out ? fsT_to_device(out, x->device) : NULL;
  fsT_release(out);
  fsT_release(ex);
  fsT_release(ey);
  fsT_release(hx);
  fsT_release(hy);
  fsT_release(yv);
  return fsE_tensor_value(d);
}

static fs_value *tensor_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b) {
  fs_tensor *ta = fsE_as_tensor(a), *tb = fsE_as_tensor(b);
  bool first = ta == NULL; /* the scalar comes first */
  fs_tensor *t = ta ? ta : tb;
  const fs_value *other = ta ? b : a;
  static const fsG_cmp cmps[] = {FSG_EQ, FSG_NE, FSG_LT, FSG_LE, FSG_GT, FSG_GE};
  static const fsB_binop ar[] = {FSB_ADD, FSB_SUB, FSB_MUL, FSB_DIV};
  if (!t || (!fsE_as_tensor(other) && !fsV_is_number(other))) return NULL;
  if (op == FS_OP_MATMUL) {
    if (!ta || !tb) {
      fsV_seterr("unsupported operand type(s) for @: '%s' and '%s'", fsV_type_name(a), fsV_type_name(b));
      return NULL;
    }
    return fsE_tensor_value(fsG_matmul(ta, tb));
  }
  if (op == FS_OP_BITAND || op == FS_OP_BITOR || op == FS_OP_BITXOR) return bitwise(op, ta, tb, t, other);
  if (op >= FS_OP_EQ && op <= FS_OP_GE) {
    fsG_cmp c = cmps[op - FS_OP_EQ];
    if (first) c = c == FSG_LT ? FSG_GT : c == FSG_GT ? FSG_LT : c == FSG_LE ? FSG_GE : c == FSG_GE ? FSG_LE : c;
    return fsE_tensor_value(ta && tb ? fsG_compare(c, ta, tb) : fsG_compare_scalar(c, t, fsV_to_double(other), false));
  }
  if (op == FS_OP_POW && ta && !tb) return fsE_tensor_value(fsG_unary(FSU_POW, ta, fsV_to_double(other), 0));
  if (op == FS_OP_POW) return fsE_tensor_value(ta && tb ? fsG_binary_op(FSU_POWT, ta, tb) : NULL);
  if (op < FS_OP_ADD || op > FS_OP_DIV) return NULL;
  if (ta && tb) return fsE_tensor_value(fsG_binary(ar[op - FS_OP_ADD], ta, tb));
  return fsE_tensor_value(fsG_binary_scalar(ar[op - FS_OP_ADD], t, fsV_to_double(other),
                                        other->type != FSV_FLOAT, first));
}

static fs_value *tensor_unop(fsE_ctx *E, fs_op op, fs_value *v) {
  if (op == FS_OP_POS) return fsV_retain(v);
  if (op == FS_OP_INVERT) { /* logical not of a bool tensor, bitwise not of an int64 one */
    fs_tensor *t = v->u.obj.data, *h = fsT_to_device(t, FS_DEV_CPU), *o = NULL;
    if (h && t->dtype != FS_BOOL && t->dtype != FS_I64) {
      fsV_seterr("~ (operator.invert) is only implemented on integer and Boolean-type tensors");
      fsT_release(h);
      return NULL;
    }
    if (h && (o = fsT_copy(h))) {
      for (int64_t i = 0; i < o->numel; i++) {
        if (t->dtype == FS_BOOL) fsT_bool(o)[i] = !fsT_bool(h)[i];
        else fsT_i64(o)[i] = ~fsT_i64(h)[i];
      }
    }
    fsT_release(h);
    fs_tensor *d = o ? fsT_to_device(o, t->device) : NULL;
    fsT_release(o);
    return fsE_tensor_value(d);
  }
  return fsE_tensor_value(fsG_neg(v->u.obj.data));
}


static int64_t tensor_len(fsE_ctx *E, fs_value *v) {
  fs_tensor *t = v->u.obj.data;
  if (t->rank == 0) {
    fsV_seterr("len() of a 0-d tensor");
    return -1;
  }
  return t->shape[0];
}

/* ---- methods and attributes (rows of the sig table's "Tensor." entries) ---- */


NATIVE(tensor_item) { return fsE_item_value(TENSOR(self)); }

NATIVE(tensor_argmax) {
  fs_tensor *t = TENSOR(self);
  if (s[0]->type != FSV_NONE && fsV_truthy(s[1])) { /* keepdim: the reduced dim stays as 1 */
    fs_tensor *idx = NULL, *v = fsG_extreme(true, t, (int)fsE_ival(s[0]), true, &idx);
    fsT_release(v);
    return fsE_tensor_value(idx);
  }
  if (s[0]->type != FSV_NONE) return fsE_tensor_value(fsG_argmax(t, (int)fsE_ival(s[0])));
  int64_t flat[1] = {t->numel};
  fs_tensor *f = fsT_view(t, 1, flat);
  fs_value *r = f ? fsE_tensor_value(fsG_argmax(f, 0)) : fsE_rt_fail();
  fsT_release(f);
  return r;
}

/* sum/mean(): the total; sum/mean(dim, keepdim=False): over one dim */
static fs_value *total(fs_value *self, fs_value *dim, fs_value *keepdim, bool mean) {
  if (dim->type != FSV_NONE)
    return fsE_tensor_value(fsG_sum_dim(TENSOR(self), (int)fsE_ival(dim), fsV_truthy(keepdim), mean));
  return fsE_tensor_value(mean ? fsG_mean(TENSOR(self)) : fsG_sum(TENSOR(self)));
}

NATIVE(tensor_sum) { return total(self, s[0], s[1], false); }
NATIVE(tensor_mean) { return total(self, s[0], s[1], true); }
NATIVE(tensor_float) { return fsE_tensor_value(fsG_cast(TENSOR(self), FS_F32)); }
NATIVE(tensor_double) { return fsE_tensor_value(fsG_cast(TENSOR(self), FS_F64)); }
NATIVE(tensor_bfloat16) { return fsE_tensor_value(fsG_cast(TENSOR(self), FS_BF16)); }
NATIVE(tensor_half) { return fsE_tensor_value(fsG_cast(TENSOR(self), FS_F16)); }

NATIVE(tensor_backward) {
  fsF_fabric *f = fsE_current_fabric(E);
  fsF_issues iss;
  fsF_issues_init(&iss);
  fs_value *r = NULL;
  if (f && fsF_check_tensor_backward(f, &iss) < 0) fsV_seterr("%s", fsF_error(&iss)->message);
  else r = fsG_backward(TENSOR(self)) < 0 ? fsE_rt_fail() : fsV_none();
  fsF_issues_free(&iss);
  return r;
}

NATIVE(tensor_size) {
  fs_tensor *t = TENSOR(self);
  if (s[0]->type == FSV_NONE) return shape_tuple(t);
  int64_t d = fsE_ival(s[0]);
  if (d < 0) d += t->rank;
  if (d < 0 || d >= t->rank) {
    fsV_seterr("Dimension out of range (got %lld)", (long long)fsE_ival(s[0]));
    return NULL;
  }
  return fsV_int(t->shape[d]);
}

NATIVE(tensor_numel) { return fsV_int(TENSOR(self)->numel); }
NATIVE(tensor_detach) { return fsE_tensor_value(fsT_copy(TENSOR(self))); }

/* x.data: x's storage without its autograd history, so an in-place write
 * through it (nn.init.normal_(m.weight.data, ...)) changes x, as torch's */
NATIVE(tensor_data) {
  fs_tensor *t = TENSOR(self);
  return fsE_tensor_value(fsT_view(t, t->rank, t->shape));
}

/* the elements [at, at + numel of dims d..) of h as nested lists */
static fs_value *nested_list(const fs_tensor *h, int d, int64_t *at) {
  if (d == h->rank) {
    double v = fsT_get(h, (*at)++);
    return h->dtype == FS_BOOL ? fsV_bool(v != 0) : h->dtype == FS_I64 ? fsV_int((int64_t)v) : fsV_float(v);
  }
  fs_value *r = fsV_list((size_t)h->shape[d]);
  for (int64_t i = 0; r && i < h->shape[d]; i++) {
    fs_value *x = nested_list(h, d + 1, at);
    if (!x || fsV_list_append(r, x) < 0) {
      fsV_release(r);
      r = NULL;
    }
  }
  return r;
}

NATIVE(tensor_tolist) {
  fs_tensor *t = TENSOR(self);
  if (t->rank == 0) return fsE_item_value(t);
  if (!t->data) {
    fsV_seterr("a tensor on the meta device has no values");
    return NULL;
  }
  fs_tensor *h = fsT_to_device(t, FS_DEV_CPU);
  int64_t at = 0;
  fs_value *r = h ? nested_list(h, 0, &at) : fsE_rt_fail();
  fsT_release(h);
  return r;
}

NATIVE(tensor_shape) { return shape_tuple(TENSOR(self)); }
NATIVE(tensor_requires_grad) { return fsV_bool(TENSOR(self)->requires_grad); }

NATIVE(tensor_device) {
  fs_tensor *t = TENSOR(self);
  if (t->device != FS_DEV_CUDA) return fsV_cstr(fsT_device_name(t->device));
  char d[24];
  snprintf(d, sizeof d, "cuda:%d", fsE_cuda_index(E)); /* as torch prints it */
  return fsV_cstr(d);
}

NATIVE(tensor_grad) {
  fs_tensor *t = TENSOR(self);
  return t->grad ? fsE_tensor_value(fsT_retain(t->grad)) : fsV_none();
}

const fsV_class fsE_tensor_class = {
  .name = "Tensor",
  .binop = tensor_binop, .unop = tensor_unop, .index = fsE_tensor_getitem, .len = tensor_len, .repr = tensor_repr,
  .free = tensor_free, .setitem = fsE_tensor_setitem, .ibinop = fsE_tensor_ibinop,
};

fs_tensor *fsE_need_tensor(const fs_value *v, const char *fn, const char *arg) {
  fs_tensor *t = fsE_as_tensor(v);
  if (!t) fsV_seterr("%s(): argument '%s' must be a Tensor, not %s", fn, arg, fsV_type_name(v));
  return t;
}

static const fsE_reg tensor_funcs[] = {
  {"Tensor.item", tensor_item}, {"Tensor.argmax", tensor_argmax}, {"Tensor.sum", tensor_sum},
  {"Tensor.mean", tensor_mean}, {"Tensor.float", tensor_float}, {"Tensor.double", tensor_double},
  {"Tensor.bfloat16", tensor_bfloat16}, {"Tensor.half", tensor_half}, {"Tensor.backward", tensor_backward},
  {"Tensor.size", tensor_size}, {"Tensor.numel", tensor_numel}, {"Tensor.detach", tensor_detach}, {"Tensor.data", tensor_data},
  {"Tensor.tolist", tensor_tolist},
  {"Tensor.shape", tensor_shape}, {"Tensor.device", tensor_device}, {"Tensor.requires_grad", tensor_requires_grad}, {"Tensor.grad", tensor_grad},
  {NULL, NULL},
};
const fsE_lib fsE_lib_tensor = {"tensor", tensor_funcs};
