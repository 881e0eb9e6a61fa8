/* lib_index.c -- subscripts of Tensor values: x[...] reads, x[...] = v
 * writes, `x op= v` in place, and the selecting builtins topk, multinomial
 * and Tensor.bool.
 *
 * A subscript's items (ints, slice and Ellipsis values, None, tensors and
 * lists of ints or bools) become runtime/tensor/index.c's fsG_subscript items;
 * torch's semantics and messages are there.  In-place writes follow
 * autograd.h's rule: in place when autograd does not record them, else
 * out of place with the new tensor bound to the written name (a leaf that
 * requires grad is torch's error).  Rows: the sig table's "topk",
 * "multinomial", "Tensor.topk", "Tensor.multinomial", "Tensor.bool"; the
 * Tensor class (lib_tensor.c) points its index/setitem/ibinop here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "eval_int.h"
#include "rng.h"

/* ---- slice and Ellipsis values ---- */

typedef struct slicev { fs_value *b[3]; } slicev; /* start, stop, step (held; None when absent) */

static void slice_free(void *p) {
  slicev *sl = p;
  for (int i = 0; i < 3; i++) fsV_release(sl->b[i]);
  free(sl);
}

static char *slice_repr(fs_value *v) {
  slicev *sl = v->u.obj.data;
  char *r[3] = {fsV_repr(sl->b[0]), fsV_repr(sl->b[1]), fsV_repr(sl->b[2])};
  fsV_buf b = {0};
  if (r[0] && r[1] && r[2]) fsV_buf_printf(&b, "slice(%s, %s, %s)", r[0], r[1], r[2]);
  for (int i = 0; i < 3; i++) free(r[i]);
  return fsV_buf_take(&b);
}

static const fsV_class slice_class = {.name = "slice", .repr = slice_repr, .free = slice_free};

static char *ellipsis_repr(fs_value *v) {
  (void)v;
  fsV_buf b = {0};
  fsV_buf_puts(&b, "Ellipsis");
  return fsV_buf_take(&b);
}

static const fsV_class ellipsis_class = {.name = "ellipsis", .repr = ellipsis_repr};

fs_value *fsE_ellipsis_value(void) { return fsV_obj(&ellipsis_class, NULL); }

fs_value *fsE_slice_value(fsE_ctx *E, const fs_node *n) {
  slicev *sl = calloc(1, sizeof *sl);
  if (!sl) return fsE_error(E, n->loc, "out of memory");
  for (int i = 0; i < 3; i++) {
    const fs_node *k = i < (int)n->nkids ? n->kids[i] : NULL;
    if (!(sl->b[i] = k ? fsE_eval(E, k) : fsV_none())) {
      slice_free(sl);
      return NULL;
    }
  }
  fs_value *v = fsV_obj(&slice_class, sl);
  return v ? v : fsE_error(E, n->loc, "out of memory");
}

/* ---- subscripts as fsG_subscript items ---- */

typedef struct items {
  fsG_subscript ix[FS_MAX_RANK * 2 + 2];
  fs_tensor *own[FS_MAX_RANK * 2 + 2]; /* tensors made from lists */
  int n;
} items;

static void items_free(items *it) {
  for (int i = 0; i < it->n; i++) fsT_release(it->own[i]);
}

/* A list of ints (or of bools: a mask), nested as torch.tensor takes it. */
static int list_dims(const fs_value *v, int depth, int64_t *dims, int *rank, int *kind) {
  if (v->type == FSV_LIST || v->type == FSV_TUPLE) {
    if (depth >= FS_MAX_RANK) return -1;
    if (depth == *rank) dims[(*rank)++] = (int64_t)v->u.seq.n;
    else if (depth > *rank || dims[depth] != (int64_t)v->u.seq.n) return -1;
    for (size_t i = 0; i < v->u.seq.n; i++)
      if (list_dims(v->u.seq.items[i], depth + 1, dims, rank, kind) < 0) return -1;
    return 0;
  }
  if (depth != *rank || (v->type != FSV_INT && v->type != FSV_BOOL)) return -1;
  int k = v->type == FSV_BOOL ? 1 : 2; /* all bools: a mask; any int: positions */
  *kind = *kind == 0 ? k : *kind == k ? k : 2;
  return 0;
}

static void list_fill(const fs_value *v, fs_tensor *t, int64_t *at) {
  if (v->type == FSV_LIST || v->type == FSV_TUPLE) {
    for (size_t i = 0; i < v->u.seq.n; i++) list_fill(v->u.seq.items[i], t, at);
    return;
  }
  if (t->dtype == FS_BOOL) fsT_bool(t)[(*at)++] = v->u.b;
  else fsT_i64(t)[(*at)++] = fsE_ival(v);
}

static fs_tensor *list_tensor(const fs_value *v) {
  int64_t dims[FS_MAX_RANK];
  int rank = 0, kind = 0;
  if (list_dims(v, 0, dims, &rank, &kind) < 0) {
    fsV_seterr("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices (got list)");
    return NULL;
  }
  fs_tensor *t = fsT_new(kind == 1 ? FS_BOOL : FS_I64, FS_DEV_CPU, rank, dims);
  int64_t at = 0;
  if (t) list_fill(v, t, &at);
  else fsE_rt_fail();
  return t;
}

static int slice_bound(const fs_value *v, bool *has, int64_t *out) {
  *has = v->type != FSV_NONE;
  if (!*has) return 0;
  if (v->type != FSV_INT && v->type != FSV_BOOL) {
    fsV_seterr("slice indices must be integers or None or have an __index__ method");
    return -1;
  }
  *out = fsE_ival(v);
  return 0;
}

static int add_item(items *it, const fs_value *k, fs_device dev) {
  if (it->n >= (int)(sizeof it->ix / sizeof it->ix[0])) {
    fsV_seterr("too many indices");
    return -1;
  }
  fsG_subscript *x = &it->ix[it->n];
  memset(x, 0, sizeof *x);
  it->own[it->n] = NULL;
  fs_tensor *t = fsE_as_tensor(k);
  slicev *sl = fsV_objdata(k, &slice_class);
  if (k->type == FSV_INT) {
    x->kind = FSG_IX_INT;
    x->i = k->u.i;
  } else if (k->type == FSV_NONE) {
    x->kind = FSG_IX_NONE;
  } else if (k->type == FSV_OBJ && k->u.obj.cls == &ellipsis_class) {
    x->kind = FSG_IX_ELLIPSIS;
  } else if (sl) {
    bool has_step;
    x->kind = FSG_IX_SLICE;
    x->step = 1;
    if (slice_bound(sl->b[0], &x->has_start, &x->start) < 0 || slice_bound(sl->b[1], &x->has_stop, &x->stop) < 0 ||
        slice_bound(sl->b[2], &has_step, &x->step) < 0)
      return -1;
    if (!has_step) x->step = 1;
  } else if (t) {
    x->kind = FSG_IX_TENSOR;
    x->t = t;
  } else if (k->type == FSV_LIST || k->type == FSV_TUPLE) {
    fs_tensor *l = list_tensor(k), *d = l ? fsT_to_device(l, dev) : NULL;
    fsT_release(l);
    if (!d) return -1;
    x->kind = FSG_IX_TENSOR;
    x->t = it->own[it->n] = d;
  } else {
    fsV_seterr("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices (got %s)",
               fsV_type_name(k));
    return -1;
  }
  it->n++;
  return 0;
}

/* key: one item, or a tuple of them (x[1, :, None]) */
static int items_of(items *it, const fs_value *key, fs_device dev) {
  it->n = 0;
  if (key->type != FSV_TUPLE) return add_item(it, key, dev);
  for (size_t i = 0; i < key->u.seq.n; i++)
    if (add_item(it, key->u.seq.items[i], dev) < 0) {
      items_free(it);
      return -1;
    }
  return 0;
}

fs_value *fsE_tensor_getitem(fsE_ctx *E, fs_value *v, fs_value *key) {
  (void)E;
  fs_tensor *t = TENSOR(v);
  if (!t->data) {
    fsV_seterr("a tensor on the meta device has no values");
    return NULL;
  }
  items it;
  if (items_of(&it, key, t->device) < 0) return NULL;
  fs_value *r = fsE_tensor_value(fsG_index(t, it.ix, it.n));
  items_free(&it);
  return r;
}

/* A number or a tensor as a tensor on x's device (new reference). */
static fs_tensor *value_tensor(const fs_value *v, const fs_tensor *x) {
  fs_tensor *t = fsE_as_tensor(v);
  if (t) return fsT_to_device(t, x->device);
  if (!fsV_is_number(v)) {
    fsV_seterr("can't assign a %s to a torch.%sTensor", fsV_type_name(v),
               x->dtype == FS_I64 ? "Long" : x->dtype == FS_BOOL ? "Bool" : x->dtype == FS_BF16 ? "BFloat16" : "Float");
    return NULL;
  }
  fs_dtype dt = v->type == FSV_FLOAT ? FS_F32 : v->type == FSV_BOOL ? FS_BOOL : FS_I64;
  fs_tensor *c = fsE_filled(dt, 0, NULL, 0), *d = NULL;
  if (c && dt == FS_BOOL) fsT_bool(c)[0] = v->u.b;
  else if (c && dt == FS_I64) fsT_i64(c)[0] = v->u.i;
  else if (c) fsT_f32(c)[0] = (float)v->u.f;
  d = c ? fsT_to_device(c, x->device) : NULL;
  fsT_release(c);
  if (!d) fsE_rt_fail();
  return d;
}

fs_value *fsE_tensor_setitem(fsE_ctx *E, fs_value *self, fs_value *key, fs_value *v) {
  (void)E;
  fs_tensor *x = TENSOR(self);
  if (!x->data) {
    fsV_seterr("a tensor on the meta device has no values");
    return NULL;
  }
  items it;
  fs_tensor *val = value_tensor(v, x);
  if (!val || items_of(&it, key, x->device) < 0) {
    fsT_release(val);
    return NULL;
  }
  fs_tensor *r = fsG_index_put(x, it.ix, it.n, val);
  items_free(&it);
  fsT_release(val);
  if (!r) return fsE_rt_fail();
  if (r == x) { /* written in place */
    fsT_release(r);
    return fsV_retain(self);
  }
  return fsE_tensor_value(r);
}

/* `x op= v`: x op v computed as usual, then copied into x's storage unless
 * autograd records the op (then the new tensor is bound instead) */
fs_value *fsE_tensor_ibinop(fsE_ctx *E, fs_op op, fs_value *self, fs_value *b) {
  fs_tensor *x = TENSOR(self);
  if (op == FS_OP_MATMUL) return NULL; /* torch 1.13 rebinds `a @= b` as a = a @ b */
  fs_value *r = fsV_binop(E, op, self, b);
  fs_tensor *rt = r ? fsE_as_tensor(r) : NULL;
  if (!rt) return r;
  bool records = fsG_grad_enabled() && (x->requires_grad || rt->requires_grad);
  if (records) { /* a leaf (or a view of one) is torch's error; otherwise rebind */
    if (fsG_inplace_check(x, false) == 0) return r;
    fsV_release(r);
    return fsE_rt_fail();
  }
  int rc = fsG_assign(x, rt);
  fsV_release(r);
  return rc < 0 ? fsE_rt_fail() : fsV_retain(self);
}

/* x.fill_(value): x[...] = value (a number or a 0-dim tensor), so the
 * in-place check and the dtype rule are the assignment's; returns x.  Where
 * autograd records the write, the assignment makes a new tensor for the
 * name instead, which a method cannot rebind: refused. */
NATIVE(t_fill_) {
  fs_value *all = fsE_ellipsis_value(), *r = all ? fsE_tensor_setitem(E, self, all, s[0]) : NULL;
  fsV_release(all);
  if (!r) return NULL;
  bool in_place = TENSOR(r) == TENSOR(self);
  fsV_release(r);
  if (!in_place) {
    fsV_seterr("fill_() of a tensor whose history autograd records is not supported at run time yet");
    return NULL;
  }
  return fsV_retain(self);
}

/* ---- topk, multinomial, bool ---- */

/* topk(input, k, dim=-1, largest=True, sorted=True) -> (values, indices);
 * the order is always sorted (torch leaves it unspecified when not) */
static fs_value *topk(fs_tensor *x, fs_value **s) {
  fs_tensor *idx = NULL, *v = fsG_topk(x, fsE_ival(s[0]), (int)fsE_ival(s[1]), fsV_truthy(s[2]), &idx);
  if (!v) return fsE_rt_fail();
  fs_value *tu = fsV_tuple(2), *a = fsE_tensor_value(v), *b = a ? fsE_tensor_value(idx) : (fsT_release(idx), NULL);
  if (!tu || !a || !b) {
    fsV_release(tu);
    fsV_release(a);
    fsV_release(b);
    return NULL;
  }
  fsV_seq_set(tu, 0, a);
  fsV_seq_set(tu, 1, b);
  return tu;
}

NATIVE(t_topk) {
  if (self) return topk(TENSOR(self), s);
  fs_tensor *x = fsE_need_tensor(s[0], "topk", "input");
  return x ? topk(x, s + 1) : NULL;
}

/* multinomial(input, num_samples, replacement=False): uniforms from the
 * script's counter-based stream (not torch's generator) */
NATIVE(t_multinomial) {
  fs_tensor *p = self ? TENSOR(self) : fsE_need_tensor(s[0], "multinomial", "input");
  fs_value **o = self ? s : s + 1;
  if (!p) return NULL;
  int64_t n = fsE_ival(o[0]), rows = p->rank == 2 ? p->shape[0] : 1;
  uint64_t key = fsR_key(E->seed, "torch.multinomial"), at = fsE_draw(E, n > 0 ? rows * n : 0);
  return fsE_tensor_value(fsG_multinomial(p, n, fsV_truthy(o[1]), key, at));
}

NATIVE(t_bool) { return fsE_tensor_value(fsT_to_dtype(TENSOR(self), FS_BOOL)); }

static const fsE_reg index_funcs[] = {
  {"topk", t_topk}, {"Tensor.topk", t_topk}, {"multinomial", t_multinomial},
  {"Tensor.multinomial", t_multinomial}, {"Tensor.bool", t_bool}, {"Tensor.fill_", t_fill_},
  {NULL, NULL},
};
const fsE_lib fsE_lib_index = {"index", index_funcs};
