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
  return t->dtype == FS_I64 ? fsV_int((int64_t)d) : fsV_float(d);
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

static fs_value *tensor_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b) {
  fs_tensor *ta = fsE_as_tensor(a), *tb = fsE_as_tensor(b);
  bool first = ta == NULL; /* the scalar comes first */
  fs_tensor *t = ta ? ta : tb;
  const fs_value *other = ta ? b : a;
  static const fsG_cmp cmps[] = {FSG_EQ, FSG_NE, FSG_LT, FSG_LE, FSG_GT, FSG_GE};
  static const fsB_binop ar[] = {FSB_ADD, FSB_SUB, FSB_MUL, FSB_DIV};
  if (!t || (!fsE_as_tensor(other) && !fsV_is_number(other))) return NULL;
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

/* t[i] (select on the tape), t[None] (a new leading dim), t[idx] with an
 * int64 tensor idx (index_select along dim 0).  Slices and tuples of
 * indices need the Python-syntax parser (docs/tensors.md). */
static fs_value *tensor_index(fsE_ctx *E, fs_value *v, fs_value *key) {
  fs_tensor *t = v->u.obj.data, *k = fsE_as_tensor(key);
  if (!t->data) {
    fsV_seterr("a tensor on the meta device has no values");
    return NULL;
  }
  if (key->type == FSV_NONE) {
    int64_t shape[FS_MAX_RANK];
    if (t->rank >= FS_MAX_RANK) return fsE_err_own(NULL);
    shape[0] = 1;
    memcpy(shape + 1, t->shape, (size_t)t->rank * sizeof *shape);
    return fsE_tensor_value(fsG_reshape(t, t->rank + 1, shape));
  }
  if (k) {
    if (k->dtype != FS_I64) {
      fsV_seterr("tensors used as indices must be long, int, byte or bool tensors");
      return NULL;
    }
    int64_t flat = k->numel, shape[FS_MAX_RANK];
    if (t->rank == 0 || k->rank + t->rank - 1 > FS_MAX_RANK) {
      fsV_seterr(t->rank == 0 ? "invalid index of a 0-dim tensor" : "too many dimensions");
      return NULL;
    }
    fs_tensor *fk = fsT_view(k, 1, &flat), *r = fk ? fsG_index_select(t, 0, fk) : NULL;
    memcpy(shape, k->shape, (size_t)k->rank * sizeof *shape); /* the index's shape, then t's rest */
    memcpy(shape + k->rank, t->shape + 1, (size_t)(t->rank - 1) * sizeof *shape);
    fs_tensor *out = r ? fsG_reshape(r, k->rank + t->rank - 1, shape) : NULL;
    fsT_release(fk);
    fsT_release(r);
    return fsE_tensor_value(out);
  }
  if (key->type != FSV_INT && key->type != FSV_BOOL) {
    fsV_seterr("tensor indices must be integers, not %s", fsV_type_name(key));
    return NULL;
  }
  if (t->rank == 0) {
    fsV_seterr("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
    return NULL;
  }
  return fsE_tensor_value(fsG_select(t, 0, fsE_ival(key)));
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

NATIVE(tensor_tolist) {
  fs_tensor *t = TENSOR(self);
  if (t->rank == 0) return fsE_item_value(t);
  if (t->rank != 1 || !t->data) {
    fsV_seterr("tolist() of a tensor of rank > 1 is not supported");
    return NULL;
  }
  fs_tensor *h = fsT_to_device(t, FS_DEV_CPU);
  fs_value *r = h ? fsV_list((size_t)t->numel) : fsE_rt_fail();
  for (int64_t i = 0; r && i < t->numel; i++) {
    double d = fsT_get(h, i);
    fs_value *x = t->dtype == FS_I64 ? fsV_int((int64_t)d) : fsV_float(d);
    if (!x) {
      fsV_release(r);
      r = NULL;
    } else fsV_list_append(r, x);
  }
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
  .binop = tensor_binop, .unop = tensor_unop, .index = tensor_index, .len = tensor_len, .repr = tensor_repr,
  .free = tensor_free,
};

fs_tensor *fsE_need_tensor(const fs_value *v, const char *fn, const char *arg) {
  fs_tensor *t = fsE_as_tensor(v);
  if (!t) fsV_seterr("%s(): argument '%s' must be a Tensor, not %s", fn, arg, fsV_type_name(v));
  return t;
}

static const fsE_reg tensor_funcs[] = {
  {"Tensor.item", tensor_item}, {"Tensor.argmax", tensor_argmax}, {"Tensor.sum", tensor_sum},
  {"Tensor.mean", tensor_mean}, {"Tensor.float", tensor_float}, {"Tensor.backward", tensor_backward},
  {"Tensor.size", tensor_size}, {"Tensor.numel", tensor_numel}, {"Tensor.detach", tensor_detach},
  {"Tensor.tolist", tensor_tolist},
  {"Tensor.shape", tensor_shape}, {"Tensor.device", tensor_device}, {"Tensor.requires_grad", tensor_requires_grad}, {"Tensor.grad", tensor_grad},
  {NULL, NULL},
};
const fsE_lib fsE_lib_tensor = {"tensor", tensor_funcs};
