/* lib_torch.c -- the torch-like tensor API's values and creation: dtype
 * constants (float32, bfloat16, int64 = long, printed torch.float32),
 * tensor/zeros/ones/full/empty/arange/linspace/eye/rand/randn/randint and
 * their *_like forms, and conversions (to, long, cpu, cuda, clone,
 * requires_grad_).  Shape ops are lib_shape.c's, arithmetic lib_arith.c's;
 * all go through runtime/tensor/autograd.h.  Rows: the sig table's tensor
 * API block; docs/tensors.md lists what exists. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "eval_int.h"
#include "rng.h"

/* ---- dtype values: float32, bfloat16, int64 (= long), printed torch.float32 ---- */

static char *dtype_repr(fs_value *v) {
  fs_dtype dt = (fs_dtype)(intptr_t)v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "torch.%s", fsT_dtype_name(dt));
  return fsV_buf_take(&b);
}

static fs_value *dtype_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b);
static const fsV_class dtype_class = {.name = "dtype", .repr = dtype_repr, .binop = dtype_binop};

static fs_value *dtype_value(fs_dtype dt) { return fsV_obj(&dtype_class, (void *)(intptr_t)dt); }

/* the dtype a value names: a dtype value, Python's float/int (torch maps
 * them to float64 and int64), or the strings "float32"/"torch.float32" */
static int dtype_of(const fs_value *v, fs_dtype *dt) {
  if (v->type == FSV_OBJ && v->u.obj.cls == &dtype_class) {
    *dt = (fs_dtype)(intptr_t)v->u.obj.data;
    return 0;
  }
  const char *name = v->type == FSV_STR ? v->u.str.s : NULL;
  char fn[64];
  if (!name && v->type == FSV_OBJ) { /* a builtin function value: its repr names it */
    char *r = v->u.obj.cls->repr ? v->u.obj.cls->repr((fs_value *)v) : NULL;
    snprintf(fn, sizeof fn, "%s", r ? r : "");
    free(r);
    if (strcmp(fn, "<class 'float'>") == 0 || strstr(fn, " float>")) name = "float64";
    else if (strcmp(fn, "<class 'int'>") == 0 || strstr(fn, " int>")) name = "int64";
    else if (strcmp(fn, "<class 'bool'>") == 0 || strstr(fn, " bool>")) name = "bool";
  }
  if (name && strncmp(name, "torch.", 6) == 0) name += 6;
  static const char *const names[] = {"float32", "bfloat16", "int64", "bool"};
  for (int i = 0; name && i < 4; i++)
    if (strcmp(name, names[i]) == 0 || (i == 0 && strcmp(name, "float") == 0) ||
        (i == 2 && strcmp(name, "long") == 0)) {
      *dt = (fs_dtype)i;
      return 0;
    }
  if (name && (strcmp(name, "float16") == 0 || strcmp(name, "half") == 0)) {
    *dt = FS_F16;
    return 0;
  }
  if (name && (strcmp(name, "float64") == 0 || strcmp(name, "double") == 0)) {
    *dt = FS_F64;
    return 0;
  }
  fsV_seterr("dtype must be torch.dtype, not %s", fsV_type_name(v));
  return -1;
}

bool fsE_is_dtype(const fs_value *v, fs_dtype *dt) {
  if (v->type != FSV_OBJ || v->u.obj.cls != &dtype_class) return false;
  *dt = (fs_dtype)(intptr_t)v->u.obj.data;
  return true;
}

static fs_value *dtype_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b) {
  (void)E;
  fs_dtype x, y;
  if ((op != FS_OP_EQ && op != FS_OP_NE) || dtype_of(a, &x) < 0 || dtype_of(b, &y) < 0) {
    fsV_clearerr();
    return op == FS_OP_EQ ? fsV_bool(false) : op == FS_OP_NE ? fsV_bool(true) : NULL;
  }
  return fsV_bool((x == y) == (op == FS_OP_EQ));
}

NATIVE(c_float32) { return dtype_value(FS_F32); }
NATIVE(c_bfloat16) { return dtype_value(FS_BF16); }
NATIVE(c_float16) { return dtype_value(FS_F16); }
NATIVE(c_float64) { return dtype_value(FS_F64); }
NATIVE(c_int64) { return dtype_value(FS_I64); }

NATIVE(tensor_dtype_attr) { return dtype_value(TENSOR(self)->dtype); }

/* ---- argument helpers ---- */

/* device= : None (the current default), "cpu", "cuda", "cuda:0", device(...) */
static int device_of(fsE_ctx *E, const fs_value *v, fs_device *dev) {
  if (v->type == FSV_NONE) {
    *dev = E->device == FS_DEV_META ? FS_DEV_META : E->device;
    return 0;
  }
  ctxv *c = fsV_objdata(v, &fsE_ctx_class);
  if (c && c->kind == 0) {
    *dev = c->dev;
    return 0;
  }
  if (v->type == FSV_STR)
    for (int d = 0; d < FS_DEV__COUNT; d++) {
      size_t l = strlen(fsT_device_name((fs_device)d));
      if (strncmp(v->u.str.s, fsT_device_name((fs_device)d), l) == 0 &&
          (v->u.str.s[l] == 0 || v->u.str.s[l] == ':')) {
        *dev = (fs_device)d;
        return 0;
      }
    }
  fsV_seterr("Expected one of cpu, cuda, meta device type at start of device string: %s",
             v->type == FSV_STR ? v->u.str.s : fsV_type_name(v));
  return -1;
}

/* A size given as *args: (2, 3), ((2, 3),) or ([2, 3],) -> dims; -1 on a bad one. */
int fsE_dims_of(const fs_value *args, int64_t *dims, int *rank, const char *fn) {
  const fs_value *seq = args;
  if (args->u.seq.n == 1 && (args->u.seq.items[0]->type == FSV_TUPLE || args->u.seq.items[0]->type == FSV_LIST))
    seq = args->u.seq.items[0];
  if (seq->u.seq.n > FS_MAX_RANK) {
    fsV_seterr("%s(): at most %d dimensions are supported", fn, FS_MAX_RANK);
    return -1;
  }
  for (size_t i = 0; i < seq->u.seq.n; i++) {
    const fs_value *d = seq->u.seq.items[i];
    if (d->type != FSV_INT && d->type != FSV_BOOL) {
      fsV_seterr("%s(): argument 'size' must be tuple of ints, but found element of type %s at pos %zu",
                 fn, fsV_type_name(d), i);
      return -1;
    }
    dims[i] = fsE_ival(d);
  }
  *rank = (int)seq->u.seq.n;
  return 0;
}

/* Finishes a created tensor: requires_grad, then the device (made on the cpu). */
static fs_value *created(fs_tensor *t, fs_device dev, const fs_value *requires_grad) {
  if (!t) return fsE_rt_fail();
  if (dev != FS_DEV_CPU) {
    fs_tensor *d = dev == FS_DEV_META ? fsT_new(t->dtype, FS_DEV_META, t->rank, t->shape) : fsT_to_device(t, dev);
    fsT_release(t);
    if (!(t = d)) return fsE_rt_fail();
  }
  if (requires_grad && fsV_truthy(requires_grad)) {
    if (t->dtype == FS_I64 || t->dtype == FS_BOOL) {
      fsT_release(t);
      fsV_seterr("Only Tensors of floating point and complex dtype can require gradients");
      return NULL;
    }
    t->requires_grad = true;
  }
  return fsE_tensor_value(t);
}

/* Element i of a cpu tensor := v, in its dtype. */
static void put_elem(fs_tensor *t, int64_t i, double v) {
  switch (t->dtype) {
  case FS_I64: fsT_i64(t)[i] = (int64_t)v; break;
  case FS_F32: fsT_f32(t)[i] = (float)v; break;
  case FS_BF16: ((uint16_t *)t->data)[i] = fsT_f32_to_bf16((float)v); break;
  case FS_BOOL: fsT_bool(t)[i] = v != 0; break;
  case FS_F16: ((uint16_t *)t->data)[i] = fsT_f32_to_f16((float)v); break;
  case FS_F64: fsT_f64(t)[i] = v; break;
  }
}

/* A cpu tensor of dt filled with v. */
fs_tensor *fsE_filled(fs_dtype dt, int rank, const int64_t *dims, double v) {
  fs_tensor *t = fsT_new(dt, FS_DEV_CPU, rank, dims);
  for (int64_t i = 0; t && i < t->numel; i++) put_elem(t, i, v);
  return t;
}

/* ---- creation ---- */

/* zeros/ones/empty(*size, dtype=None, device=None, requires_grad=False) */
static fs_value *constant(fsE_ctx *E, fs_value **s, double v, const char *fn) {
  int64_t dims[FS_MAX_RANK];
  int rank;
  fs_dtype dt = E->default_float; /* torch's default dtype */
  fs_device dev;
  if (fsE_dims_of(s[0], dims, &rank, fn) < 0 || (s[1]->type != FSV_NONE && dtype_of(s[1], &dt) < 0) ||
      device_of(E, s[2], &dev) < 0)
    return NULL;
  return created(fsE_filled(dt, rank, dims, v), dev, s[3]);
}

NATIVE(b_zeros) { return constant(E, s, 0, "zeros"); }
NATIVE(b_ones) { return constant(E, s, 1, "ones"); }
NATIVE(b_empty) { return constant(E, s, 0, "empty"); } /* zeroed: deterministic */

NATIVE(b_full) {
  int64_t dims[FS_MAX_RANK];
  int rank;
  fs_device dev;
  fs_dtype dt = s[1]->type == FSV_FLOAT ? E->default_float : FS_I64; /* torch infers from fill_value */
  fs_value *tu = fsV_tuple(1);
  if (!tu) return NULL;
  fsV_seq_set(tu, 0, fsV_retain(s[0]));
  int rc = fsE_dims_of(tu, dims, &rank, "full");
  fsV_release(tu);
  if (rc < 0 || (s[2]->type != FSV_NONE && dtype_of(s[2], &dt) < 0) || device_of(E, s[3], &dev) < 0) return NULL;
  if (!fsV_is_number(s[1])) {
    fsV_seterr("full(): argument 'fill_value' must be Number, not %s", fsV_type_name(s[1]));
    return NULL;
  }
  return created(fsE_filled(dt, rank, dims, fsV_to_double(s[1])), dev, s[4]);
}

/* tensor(data, dtype=None, device=None, requires_grad=False): nested lists
 * of numbers; the dtype is int64 when every element is an int/bool */
static int scan(const fs_value *v, int depth, int64_t *dims, int *rank, bool *floating, bool *all_bool) {
  if (v->type == FSV_LIST || v->type == FSV_TUPLE) {
    if (depth >= FS_MAX_RANK) {
      fsV_seterr("tensor(): too many dimensions");
      return -1;
    }
    if (depth == *rank) {
      dims[depth] = (int64_t)v->u.seq.n;
      (*rank)++;
    } else if (depth > *rank || dims[depth] != (int64_t)v->u.seq.n) {
      fsV_seterr("expected sequence of length %lld at dim %d (got %zu)", (long long)dims[depth], depth, v->u.seq.n);
      return -1;
    }
    for (size_t i = 0; i < v->u.seq.n; i++)
      if (scan(v->u.seq.items[i], depth + 1, dims, rank, floating, all_bool) < 0) return -1;
    return 0;
  }
  if (!fsV_is_number(v)) {
    fsV_seterr("Could not infer dtype of %s", fsV_type_name(v));
    return -1;
  }
  if (depth != *rank) {
    fsV_seterr("expected sequence of length %lld at dim %d (got number)", (long long)dims[depth], depth);
    return -1;
  }
  if (v->type == FSV_FLOAT) *floating = true;
  if (v->type != FSV_BOOL) *all_bool = false;
  return 0;
}

static void fill_from(const fs_value *v, fs_tensor *t, int64_t *at) {
  if (v->type == FSV_LIST || v->type == FSV_TUPLE) {
    for (size_t i = 0; i < v->u.seq.n; i++) fill_from(v->u.seq.items[i], t, at);
    return;
  }
  put_elem(t, (*at)++, v->type == FSV_INT ? (double)v->u.i : fsV_to_double(v));
}

NATIVE(b_tensor) {
  fs_device dev;
  if (device_of(E, s[2], &dev) < 0) return NULL;
  fs_tensor *src = fsE_as_tensor(s[0]);
  if (src) { /* torch copies (and warns); the copy is a new leaf */
    fs_dtype dt = src->dtype;
    if (s[1]->type != FSV_NONE && dtype_of(s[1], &dt) < 0) return NULL;
    fs_tensor *c = fsT_to_dtype(src, dt), *h = c ? fsT_to_device(c, FS_DEV_CPU) : NULL;
    fs_tensor *cp = h ? fsT_copy(h) : NULL;
    fsT_release(c);
    fsT_release(h);
    return created(cp, dev, s[3]);
  }
  int64_t dims[FS_MAX_RANK];
  int rank = 0;
  bool floating = false, all_bool = true;
  if (scan(s[0], 0, dims, &rank, &floating, &all_bool) < 0) return NULL;
  fs_dtype dt = floating ? E->default_float : all_bool ? FS_BOOL : FS_I64; /* torch.tensor([True]) is bool */
  if (s[1]->type != FSV_NONE && dtype_of(s[1], &dt) < 0) return NULL;
  fs_tensor *t = fsT_new(dt, FS_DEV_CPU, rank, dims);
  int64_t at = 0;
  if (t) fill_from(s[0], t, &at);
  return created(t, dev, s[3]);
}

/* arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False) */
NATIVE(b_arange) {
  double start = fsV_to_double(s[0]), end = s[1]->type == FSV_NONE ? start : fsV_to_double(s[1]);
  double step = fsV_to_double(s[2]);
  if (s[1]->type == FSV_NONE) start = 0;
  bool floating = s[0]->type == FSV_FLOAT || s[1]->type == FSV_FLOAT || s[2]->type == FSV_FLOAT;
  fs_dtype dt = floating ? E->default_float : FS_I64;
  fs_device dev;
  if ((s[3]->type != FSV_NONE && dtype_of(s[3], &dt) < 0) || device_of(E, s[4], &dev) < 0) return NULL;
  if (step == 0) {
    fsV_seterr("step must be nonzero");
    return NULL;
  }
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    fsV_seterr("upper bound and larger bound inconsistent with step sign");
    return NULL;
  }
  int64_t n = (int64_t)ceil((end - start) / step);
  fs_tensor *t = fsT_new(dt, FS_DEV_CPU, 1, &n);
  for (int64_t i = 0; t && i < n; i++) {
    put_elem(t, i, start + (double)i * step);
  }
  return created(t, dev, s[5]);
}

/* linspace(start, end, steps, dtype=None, device=None, requires_grad=False) */
NATIVE(b_linspace) {
  double a_ = fsV_to_double(s[0]), b = fsV_to_double(s[1]);
  int64_t n = fsE_ival(s[2]);
  fs_dtype dt = E->default_float; /* torch's default dtype */
  fs_device dev;
  if ((s[3]->type != FSV_NONE && dtype_of(s[3], &dt) < 0) || device_of(E, s[4], &dev) < 0) return NULL;
  if (n < 0) {
    fsV_seterr("number of steps must be non-negative");
    return NULL;
  }
  fs_tensor *t = fsT_new(FS_F32, FS_DEV_CPU, 1, &n);
  double stepv = n > 1 ? (b - a_) / (double)(n - 1) : 0;
  /* torch fills the first half from start and the second from end */
  for (int64_t i = 0; t && i < n; i++)
    fsT_f32(t)[i] = (float)(i < n / 2 ? a_ + stepv * (double)i : b - stepv * (double)(n - 1 - i));
  fs_tensor *c = t && dt != FS_F32 ? fsT_to_dtype(t, dt) : fsT_retain(t);
  fsT_release(t);
  return created(c, dev, s[5]);
}

/* eye(n, m=None, dtype=None, device=None, requires_grad=False) */
NATIVE(b_eye) {
  int64_t dims[2] = {fsE_ival(s[0]), s[1]->type == FSV_NONE ? fsE_ival(s[0]) : fsE_ival(s[1])};
  fs_dtype dt = E->default_float; /* torch's default dtype */
  fs_device dev;
  if ((s[2]->type != FSV_NONE && dtype_of(s[2], &dt) < 0) || device_of(E, s[3], &dev) < 0) return NULL;
  if (dims[0] < 0 || dims[1] < 0) {
    fsV_seterr("n must be greater or equal to 0, got %lld", (long long)(dims[0] < 0 ? dims[0] : dims[1]));
    return NULL;
  }
  fs_tensor *t = fsE_filled(dt, 2, dims, 0);
  fs_tensor *one = fsE_filled(dt, 0, NULL, 1);
  for (int64_t i = 0; t && one && i < dims[0] && i < dims[1]; i++)
    memcpy((char *)t->data + (size_t)(i * dims[1] + i) * fsT_dtype_size(dt), one->data, fsT_dtype_size(dt));
  fsT_release(one);
  return created(t, dev, s[4]);
}

/* rand/randn/randint: the runtime's counter-based stream (rng.h) keyed by
 * fabric.seed_everything's seed, element offsets advancing per draw; the
 * values cannot match torch's Philox/MT stream, only its distributions */
uint64_t fsE_draw(fsE_ctx *E, int64_t n) {
  uint64_t at = E->drawn;
  E->drawn += (uint64_t)n;
  return at;
}

static fs_value *random_fill(fsE_ctx *E, int rank, const int64_t *dims, fs_value *dtype_v, fs_value *dev_v,
                             fs_value *rg, bool normal) {
  fs_dtype dt = E->default_float; /* torch's default dtype */
  fs_device dev;
  if ((dtype_v->type != FSV_NONE && dtype_of(dtype_v, &dt) < 0) || device_of(E, dev_v, &dev) < 0) return NULL;
  if (dt == FS_I64) {
    fsV_seterr("\"%s\" not implemented for 'Long'", normal ? "normal_kernel_cpu" : "check_uniform_bounds");
    return NULL;
  }
  fs_tensor *t = fsT_new(FS_F32, FS_DEV_CPU, rank, dims);
  if (t) {
    uint64_t key = fsR_key(E->seed, "torch.rand"), at = fsE_draw(E, t->numel);
    if (normal) fsR_normal_key(fsT_f32(t), (size_t)t->numel, key, (size_t)at, 0, 1);
    else fsR_uniform_key(fsT_f32(t), (size_t)t->numel, key, (size_t)at, 0, 1);
  }
  fs_tensor *c = t && dt != FS_F32 ? fsT_to_dtype(t, dt) : fsT_retain(t);
  fsT_release(t);
  return created(c, dev, rg);
}

static fs_value *random_sized(fsE_ctx *E, fs_value **s, bool normal, const char *fn) {
  int64_t dims[FS_MAX_RANK];
  int rank;
  if (fsE_dims_of(s[0], dims, &rank, fn) < 0) return NULL;
  return random_fill(E, rank, dims, s[1], s[2], s[3], normal);
}

NATIVE(b_rand) { return random_sized(E, s, false, "rand"); }
NATIVE(b_randn) { return random_sized(E, s, true, "randn"); }

/* randint(low=0, high, size, dtype=int64, device=None, generator=None):
 * randint(high, size) too; with a torch.Generator the draws are torch's
 * (its mt19937, one random() or random64() per element, as torch's CPU
 * random_from_to), so nanoGPT's get_batch picks torch's windows */
NATIVE(b_randint) {
  const fs_value *lowv = s[0], *highv = s[1], *sizev = s[2];
  if (sizev->type == FSV_NONE) { /* randint(high, size) */
    sizev = highv;
    highv = lowv;
    lowv = NULL;
  }
  if (sizev->type != FSV_TUPLE && sizev->type != FSV_LIST) {
    fsV_seterr("randint(): argument 'size' must be tuple of ints, not %s", fsV_type_name(sizev));
    return NULL;
  }
  int64_t dims[FS_MAX_RANK], lo = lowv ? fsE_ival(lowv) : 0, hi = fsE_ival(highv);
  int rank;
  fs_dtype dt = FS_I64;
  fs_device dev;
  if (fsE_dims_of(sizev, dims, &rank, "randint") < 0 || (s[3]->type != FSV_NONE && dtype_of(s[3], &dt) < 0) ||
      device_of(E, s[4], &dev) < 0)
    return NULL;
  genv *gen = s[5]->type == FSV_NONE ? NULL : fsV_objdata(s[5], &fsE_generator_class);
  if (s[5]->type != FSV_NONE && !gen) {
    fsV_seterr("randint(): argument 'generator' must be torch.Generator, not %s", fsV_type_name(s[5]));
    return NULL;
  }
  if (hi <= lo) {
    fsV_seterr("random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld", (long long)lo, (long long)hi);
    return NULL;
  }
  fs_tensor *t = fsT_new(FS_I64, FS_DEV_CPU, rank, dims);
  size_t *drawn = t && gen ? malloc((size_t)t->numel * sizeof *drawn + 1) : NULL;
  if (t && gen && !drawn) {
    fsT_release(t);
    fsV_seterr("out of memory");
    return NULL;
  }
  if (drawn) {
    fsDL_randint(&gen->mt, (uint64_t)(hi - lo), (size_t)t->numel, drawn);
    for (int64_t i = 0; i < t->numel; i++) fsT_i64(t)[i] = lo + (int64_t)drawn[i];
    free(drawn);
  } else if (t) {
    uint64_t key = fsR_key(E->seed, "torch.randint"), at = fsE_draw(E, t->numel);
    for (int64_t i = 0; i < t->numel; i++) /* 64 random bits, reduced (bias < 2^-40 for small ranges) */
      fsT_i64(t)[i] = lo + (int64_t)(fsR_bits(key, at + (uint64_t)i) % (uint64_t)(hi - lo));
  }
  fs_tensor *c = t && dt != FS_I64 ? fsT_to_dtype(t, dt) : fsT_retain(t);
  fsT_release(t);
  return created(c, dev, NULL);
}

/* *_like(input, dtype=None, device=None, requires_grad=False) */
static fs_value *like(fsE_ctx *E, fs_value **s, int what, const char *fn) {
  fs_tensor *x = fsE_need_tensor(s[0], fn, "input");
  if (!x) return NULL;
  fs_dtype dt = x->dtype;
  fs_device dev = x->device;
  if ((s[1]->type != FSV_NONE && dtype_of(s[1], &dt) < 0) || (s[2]->type != FSV_NONE && device_of(E, s[2], &dev) < 0))
    return NULL;
  if (what >= 2) {
    fs_value *dtv = s[1]->type == FSV_NONE ? dtype_value(dt) : fsV_retain(s[1]);
    fs_value *r = dtv ? random_fill(E, x->rank, x->shape, dtv, s[2]->type == FSV_NONE ? s[2] : s[2], s[3], what == 3) : NULL;
    fsV_release(dtv);
    if (r && dev != FS_DEV_CPU && s[2]->type == FSV_NONE) { /* follow input's device */
      fs_tensor *moved = fsT_to_device(TENSOR(r), dev);
      fsV_release(r);
      return fsE_tensor_value(moved);
    }
    return r;
  }
  return created(fsE_filled(dt, x->rank, x->shape, what), dev, s[3]);
}

NATIVE(b_zeros_like) { return like(E, s, 0, "zeros_like"); }
NATIVE(b_ones_like) { return like(E, s, 1, "ones_like"); }
NATIVE(b_empty_like) { return like(E, s, 0, "empty_like"); }
NATIVE(b_rand_like) { return like(E, s, 2, "rand_like"); }
NATIVE(b_randn_like) { return like(E, s, 3, "randn_like"); }

NATIVE(b_full_like) {
  fs_tensor *x = fsE_need_tensor(s[0], "full_like", "input");
  if (!x) return NULL;
  fs_dtype dt = x->dtype;
  fs_device dev = x->device;
  if ((s[2]->type != FSV_NONE && dtype_of(s[2], &dt) < 0) || (s[3]->type != FSV_NONE && device_of(E, s[3], &dev) < 0))
    return NULL;
  return created(fsE_filled(dt, x->rank, x->shape, fsV_to_double(s[1])), dev, s[4]);
}

/* ---- conversions, grads, misc ---- */

NATIVE(t_long) { return fsE_tensor_value(fsT_to_dtype(TENSOR(self), FS_I64)); }

static fs_value *clone_of(fs_tensor *x);

/* to(dtype) / to(device) / to(device, dtype); copy=True always gives a new
 * tensor (on the tape, as clone); non_blocking and memory_format change no
 * values (tensors here are contiguous) */
NATIVE(t_to) {
  fs_tensor *x = TENSOR(self);
  fs_dtype dt = x->dtype;
  fs_device dev = x->device;
  for (int i = 0; i < 2; i++) {
    if (s[i]->type == FSV_NONE) continue;
    fs_dtype t;
    if (dtype_of(s[i], &t) == 0) dt = t;
    else if (device_of(E, s[i], &dev) < 0) {
      fsV_seterr("to() received an invalid combination of arguments - got (%s)", fsV_type_name(s[i]));
      return NULL;
    }
  }
  fs_tensor *c = fsG_cast(x, dt), *d = c ? fsT_to_device(c, dev) : NULL; /* on the tape */
  fsT_release(c);
  if (d == x && fsV_truthy(s[3])) {
    fsT_release(d);
    return clone_of(x);
  }
  return fsE_tensor_value(d);
}

NATIVE(t_cpu) { return fsE_tensor_value(fsT_to_device(TENSOR(self), FS_DEV_CPU)); }
NATIVE(t_cuda) { return fsE_tensor_value(fsT_to_device(TENSOR(self), FS_DEV_CUDA)); }

static fs_value *clone_of(fs_tensor *x) { /* on the tape: the gradient passes through */
  if (!x->requires_grad) return fsE_tensor_value(fsT_copy(x));
  fs_tensor *one = fsT_scalar(1.0f), *d = one ? fsT_to_device(one, x->device) : NULL;
  fs_tensor *r = d ? fsG_binary(FSB_MUL, x, d) : NULL;
  fsT_release(one);
  fsT_release(d);
  return fsE_tensor_value(r);
}
NATIVE(t_clone) { return (void)E, (void)s, (void)a, clone_of(TENSOR(self)); }

NATIVE(t_requires_grad_) {
  fs_tensor *x = TENSOR(self);
  bool want = fsV_truthy(s[0]);
  if (want && !fsT_is_floating(x->dtype)) {
    fsV_seterr("only Tensors of floating point dtype can require gradients");
    return NULL;
  }
  if (!want && x->node) {
    fsV_seterr("you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    return NULL;
  }
  x->requires_grad = want;
  return fsV_retain(self);
}

NATIVE(t_dim) { return fsV_int(TENSOR(self)->rank); }

static const fsE_reg torch_funcs[] = {
  {"float32", c_float32}, {"bfloat16", c_bfloat16}, {"float16", c_float16}, {"half", c_float16}, {"float64", c_float64}, {"double", c_float64}, {"int64", c_int64}, {"long", c_int64},
  {"tensor", b_tensor}, {"zeros", b_zeros}, {"ones", b_ones}, {"empty", b_empty}, {"full", b_full},
  {"arange", b_arange}, {"linspace", b_linspace}, {"eye", b_eye}, {"rand", b_rand}, {"randn", b_randn},
  {"randint", b_randint}, {"zeros_like", b_zeros_like}, {"ones_like", b_ones_like},
  {"empty_like", b_empty_like}, {"full_like", b_full_like}, {"rand_like", b_rand_like},
  {"randn_like", b_randn_like}, {"Tensor.long", t_long}, {"Tensor.int", t_long}, {"Tensor.to", t_to},
  {"Tensor.cpu", t_cpu}, {"Tensor.cuda", t_cuda}, {"Tensor.clone", t_clone},
  {"Tensor.requires_grad_", t_requires_grad_}, {"Tensor.dim", t_dim}, {"Tensor.ndim", t_dim},
  {"Tensor.dtype", tensor_dtype_attr},
  {NULL, NULL},
};
const fsE_lib fsE_lib_torch = {"torch", torch_funcs};
