/* lib_torch.c -- the torch-like tensor API (issue 14): dtype constants,
 * creation functions, shape ops, elementwise math, reductions over a dim,
 * matmul, as builtins named as torch's and "Tensor.<name>" methods.
 * Every op goes through runtime/tensor/autograd.h (ops_grad.c), so it is
 * differentiable, device-checked and worded as torch.  Rows: the sig
 * table's "issue 14" block; docs/tensors.md lists what exists. */
#include <math.h>
#include <string.h>

#include "autograd.h"
#include "eval_int.h"
#include "rng.h"

#define TENSOR(self) ((fs_tensor *)(self)->u.obj.data)

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
 * them to float32 and int64), or the strings "float32"/"torch.float32" */
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
    if (strcmp(fn, "<class 'float'>") == 0 || strstr(fn, " float>")) name = "float32";
    else if (strcmp(fn, "<class 'int'>") == 0 || strstr(fn, " int>") || strstr(fn, " bool>")) name = "int64";
  }
  if (name && strncmp(name, "torch.", 6) == 0) name += 6;
  static const char *const names[] = {"float32", "bfloat16", "int64"};
  for (int i = 0; name && i < 3; i++)
    if (strcmp(name, names[i]) == 0 || (i == 0 && strcmp(name, "float") == 0) ||
        (i == 2 && strcmp(name, "long") == 0)) {
      *dt = (fs_dtype)i;
      return 0;
    }
  fsV_seterr("dtype must be torch.dtype, not %s", fsV_type_name(v));
  return -1;
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
static int dims_of(const fs_value *args, int64_t *dims, int *rank, const char *fn) {
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
    if (t->dtype != FS_F32 && t->dtype != FS_BF16) {
      fsT_release(t);
      fsV_seterr("Only Tensors of floating point and complex dtype can require gradients");
      return NULL;
    }
    t->requires_grad = true;
  }
  return fsE_tensor_value(t);
}

/* A cpu tensor of dt filled with v. */
static fs_tensor *filled(fs_dtype dt, int rank, const int64_t *dims, double v) {
  fs_tensor *t = fsT_new(dt, FS_DEV_CPU, rank, dims);
  for (int64_t i = 0; t && i < t->numel; i++) {
    if (dt == FS_I64) fsT_i64(t)[i] = (int64_t)v;
    else if (dt == FS_F32) fsT_f32(t)[i] = (float)v;
    else ((uint16_t *)t->data)[i] = fsT_f32_to_bf16((float)v);
  }
  return t;
}

/* ---- creation ---- */

/* zeros/ones/empty(*size, dtype=None, device=None, requires_grad=False) */
static fs_value *constant(fsE_ctx *E, fs_value **s, double v, const char *fn) {
  int64_t dims[FS_MAX_RANK];
  int rank;
  fs_dtype dt = FS_F32;
  fs_device dev;
  if (dims_of(s[0], dims, &rank, fn) < 0 || (s[1]->type != FSV_NONE && dtype_of(s[1], &dt) < 0) ||
      device_of(E, s[2], &dev) < 0)
    return NULL;
  return created(filled(dt, rank, dims, v), dev, s[3]);
}

NATIVE(b_zeros) { return constant(E, s, 0, "zeros"); }
NATIVE(b_ones) { return constant(E, s, 1, "ones"); }
NATIVE(b_empty) { return constant(E, s, 0, "empty"); } /* zeroed: deterministic */

NATIVE(b_full) {
  int64_t dims[FS_MAX_RANK];
  int rank;
  fs_device dev;
  fs_dtype dt = s[1]->type == FSV_FLOAT ? FS_F32 : FS_I64; /* torch infers from fill_value */
  fs_value *tu = fsV_tuple(1);
  if (!tu) return NULL;
  fsV_seq_set(tu, 0, fsV_retain(s[0]));
  int rc = dims_of(tu, dims, &rank, "full");
  fsV_release(tu);
  if (rc < 0 || (s[2]->type != FSV_NONE && dtype_of(s[2], &dt) < 0) || device_of(E, s[3], &dev) < 0) return NULL;
  if (!fsV_is_number(s[1])) {
    fsV_seterr("full(): argument 'fill_value' must be Number, not %s", fsV_type_name(s[1]));
    return NULL;
  }
  return created(filled(dt, rank, dims, fsV_to_double(s[1])), dev, s[4]);
}

/* tensor(data, dtype=None, device=None, requires_grad=False): nested lists
 * of numbers; the dtype is int64 when every element is an int/bool */
static int scan(const fs_value *v, int depth, int64_t *dims, int *rank, bool *floating) {
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
      if (scan(v->u.seq.items[i], depth + 1, dims, rank, floating) < 0) return -1;
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
  return 0;
}

static void fill_from(const fs_value *v, fs_tensor *t, int64_t *at) {
  if (v->type == FSV_LIST || v->type == FSV_TUPLE) {
    for (size_t i = 0; i < v->u.seq.n; i++) fill_from(v->u.seq.items[i], t, at);
    return;
  }
  double d = fsV_to_double(v);
  if (t->dtype == FS_I64) fsT_i64(t)[*at] = (int64_t)d;
  else if (t->dtype == FS_F32) fsT_f32(t)[*at] = (float)d;
  else ((uint16_t *)t->data)[*at] = fsT_f32_to_bf16((float)d);
  (*at)++;
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
  bool floating = false;
  if (scan(s[0], 0, dims, &rank, &floating) < 0) return NULL;
  fs_dtype dt = floating ? FS_F32 : FS_I64;
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
  fs_dtype dt = floating ? FS_F32 : FS_I64;
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
    double v = start + (double)i * step;
    if (dt == FS_I64) fsT_i64(t)[i] = (int64_t)v;
    else if (dt == FS_F32) fsT_f32(t)[i] = (float)v;
    else ((uint16_t *)t->data)[i] = fsT_f32_to_bf16((float)v);
  }
  return created(t, dev, s[5]);
}

/* linspace(start, end, steps, dtype=None, device=None, requires_grad=False) */
NATIVE(b_linspace) {
  double a_ = fsV_to_double(s[0]), b = fsV_to_double(s[1]);
  int64_t n = fsE_ival(s[2]);
  fs_dtype dt = FS_F32;
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
  fs_dtype dt = FS_F32;
  fs_device dev;
  if ((s[2]->type != FSV_NONE && dtype_of(s[2], &dt) < 0) || device_of(E, s[3], &dev) < 0) return NULL;
  if (dims[0] < 0 || dims[1] < 0) {
    fsV_seterr("n must be greater or equal to 0, got %lld", (long long)(dims[0] < 0 ? dims[0] : dims[1]));
    return NULL;
  }
  fs_tensor *t = filled(dt, 2, dims, 0);
  fs_tensor *one = filled(dt, 0, NULL, 1);
  for (int64_t i = 0; t && one && i < dims[0] && i < dims[1]; i++)
    memcpy((char *)t->data + (size_t)(i * dims[1] + i) * fsT_dtype_size(dt), one->data, fsT_dtype_size(dt));
  fsT_release(one);
  return created(t, dev, s[4]);
}

/* rand/randn/randint: the runtime's counter-based stream (rng.h) keyed by
 * fabric.seed_everything's seed, element offsets advancing per draw; the
 * values cannot match torch's Philox/MT stream, only its distributions */
static uint64_t draw(fsE_ctx *E, int64_t n) {
  if (E->drawn_seed != E->seed) {
    E->drawn_seed = E->seed;
    E->drawn = 0;
  }
  uint64_t at = E->drawn;
  E->drawn += (uint64_t)n;
  return at;
}

static fs_value *random_fill(fsE_ctx *E, int rank, const int64_t *dims, fs_value *dtype_v, fs_value *dev_v,
                             fs_value *rg, bool normal) {
  fs_dtype dt = FS_F32;
  fs_device dev;
  if ((dtype_v->type != FSV_NONE && dtype_of(dtype_v, &dt) < 0) || device_of(E, dev_v, &dev) < 0) return NULL;
  if (dt == FS_I64) {
    fsV_seterr("\"%s\" not implemented for 'Long'", normal ? "normal_kernel_cpu" : "check_uniform_bounds");
    return NULL;
  }
  fs_tensor *t = fsT_new(FS_F32, FS_DEV_CPU, rank, dims);
  if (t) {
    uint64_t key = fsR_key(E->seed, "torch.rand"), at = draw(E, t->numel);
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
  if (dims_of(s[0], dims, &rank, fn) < 0) return NULL;
  return random_fill(E, rank, dims, s[1], s[2], s[3], normal);
}

NATIVE(b_rand) { return random_sized(E, s, false, "rand"); }
NATIVE(b_randn) { return random_sized(E, s, true, "randn"); }

/* randint(low=0, high, size, dtype=int64, device=None): randint(high, size) too */
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
  if (dims_of(sizev, dims, &rank, "randint") < 0 || (s[3]->type != FSV_NONE && dtype_of(s[3], &dt) < 0) ||
      device_of(E, s[4], &dev) < 0)
    return NULL;
  if (hi <= lo) {
    fsV_seterr("random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld", (long long)lo, (long long)hi);
    return NULL;
  }
  fs_tensor *t = fsT_new(FS_I64, FS_DEV_CPU, rank, dims);
  if (t) {
    uint64_t key = fsR_key(E->seed, "torch.randint"), at = draw(E, t->numel);
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
  return created(filled(dt, x->rank, x->shape, what), dev, s[3]);
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
  return created(filled(dt, x->rank, x->shape, fsV_to_double(s[1])), dev, s[4]);
}

/* ---- shape ops ---- */

static int dim_arg(const fs_value *v, int *d) {
  if (v->type != FSV_INT && v->type != FSV_BOOL) {
    fsV_seterr("argument 'dim' must be int, not %s", fsV_type_name(v));
    return -1;
  }
  *d = (int)fsE_ival(v);
  return 0;
}

/* view/reshape: one -1 is inferred, as torch */
static fs_value *reshape_to(fs_tensor *x, const fs_value *args, const char *fn) {
  int64_t dims[FS_MAX_RANK], known = 1;
  int rank, infer = -1;
  if (dims_of(args, dims, &rank, fn) < 0) return NULL;
  for (int i = 0; i < rank; i++) {
    if (dims[i] == -1) {
      if (infer >= 0) {
        fsV_seterr("only one dimension can be inferred");
        return NULL;
      }
      infer = i;
    } else if (dims[i] < 0) {
      fsV_seterr("invalid shape dimension %lld", (long long)dims[i]);
      return NULL;
    } else known *= dims[i];
  }
  if (infer >= 0) {
    if (known == 0 || x->numel % known) {
      char a[96], b[96];
      fsV_seterr("shape '%s' is invalid for input of size %lld", fsT_dims_str(rank, dims, a, sizeof a),
                 (long long)x->numel);
      (void)b;
      return NULL;
    }
    dims[infer] = x->numel / known;
  }
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  if (n != x->numel) {
    char a[96];
    fsV_seterr("shape '%s' is invalid for input of size %lld", fsT_dims_str(rank, dims, a, sizeof a), (long long)x->numel);
    return NULL;
  }
  return fsE_tensor_value(fsG_reshape(x, rank, dims));
}

NATIVE(t_view) { return reshape_to(TENSOR(self), s[0], "view"); }
NATIVE(t_reshape) { return reshape_to(TENSOR(self), s[0], "reshape"); }
NATIVE(t_contiguous) { return fsV_retain(self); } /* every tensor is contiguous */

NATIVE(t_permute) {
  int64_t dims[FS_MAX_RANK];
  int rank, perm[FS_MAX_RANK];
  fs_tensor *x = TENSOR(self);
  if (dims_of(s[0], dims, &rank, "permute") < 0) return NULL;
  if (rank != x->rank) {
    fsV_seterr("permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = %d is not equal to len(dims) = %d",
               x->rank, rank);
    return NULL;
  }
  for (int i = 0; i < rank; i++) perm[i] = (int)dims[i];
  return fsE_tensor_value(fsG_permute(x, perm));
}

NATIVE(t_transpose) {
  int a_, b;
  if (dim_arg(s[0], &a_) < 0 || dim_arg(s[1], &b) < 0) return NULL;
  return fsE_tensor_value(fsG_transpose(TENSOR(self), a_, b));
}

NATIVE(t_T) {
  fs_tensor *x = TENSOR(self);
  int perm[FS_MAX_RANK];
  for (int i = 0; i < x->rank; i++) perm[i] = x->rank - 1 - i;
  return fsE_tensor_value(fsG_permute(x, perm));
}

NATIVE(t_mT) {
  fs_tensor *x = TENSOR(self);
  if (x->rank < 2) {
    fsV_seterr("tensor.mT is only supported on matrices or batches of matrices. Got %d-D tensor.", x->rank);
    return NULL;
  }
  return fsE_tensor_value(fsG_transpose(x, -2, -1));
}

NATIVE(t_unsqueeze) {
  fs_tensor *x = TENSOR(self);
  int d;
  if (dim_arg(s[0], &d) < 0) return NULL;
  int r = x->rank + 1;
  if (d < -r || d >= r) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, d);
    return NULL;
  }
  if (d < 0) d += r;
  int64_t dims[FS_MAX_RANK + 1];
  for (int i = 0, k = 0; i < r; i++) dims[i] = i == d ? 1 : x->shape[k++];
  return fsE_tensor_value(fsG_reshape(x, r, dims));
}

NATIVE(t_squeeze) {
  fs_tensor *x = TENSOR(self);
  int64_t dims[FS_MAX_RANK];
  int r = 0, d = -1;
  if (s[0]->type != FSV_NONE) {
    if (dim_arg(s[0], &d) < 0) return NULL;
    int rr = x->rank ? x->rank : 1;
    if (d < -rr || d >= rr) {
      fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -rr, rr - 1, d);
      return NULL;
    }
    if (d < 0) d += rr;
  }
  for (int i = 0; i < x->rank; i++)
    if (!(x->shape[i] == 1 && (d < 0 || d == i))) dims[r++] = x->shape[i];
  return fsE_tensor_value(fsG_reshape(x, r, dims));
}

NATIVE(t_flatten) {
  fs_tensor *x = TENSOR(self);
  int a_ = (int)fsE_ival(s[0]), b = (int)fsE_ival(s[1]), r = x->rank ? x->rank : 1;
  if (a_ < -r || a_ >= r || b < -r || b >= r) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1,
               a_ < -r || a_ >= r ? a_ : b);
    return NULL;
  }
  if (a_ < 0) a_ += r;
  if (b < 0) b += r;
  if (a_ > b) {
    fsV_seterr("flatten() has invalid args: start_dim cannot come after end_dim");
    return NULL;
  }
  if (x->rank == 0) {
    int64_t one = 1;
    return fsE_tensor_value(fsG_reshape(x, 1, &one));
  }
  int64_t dims[FS_MAX_RANK];
  int k = 0;
  for (int i = 0; i < x->rank; i++) {
    if (i <= a_ || i > b) dims[k++] = x->shape[i];
    else dims[k - 1] *= x->shape[i];
  }
  return fsE_tensor_value(fsG_reshape(x, k, dims));
}

NATIVE(t_expand) {
  int64_t dims[FS_MAX_RANK];
  int rank;
  if (dims_of(s[0], dims, &rank, "expand") < 0) return NULL;
  return fsE_tensor_value(fsG_expand(TENSOR(self), rank, dims));
}

/* repeat(*sizes): x viewed as [1, a, 1, b], expanded to [r0, a, r1, b], folded */
NATIVE(t_repeat) {
  fs_tensor *x = TENSOR(self);
  int64_t reps[FS_MAX_RANK];
  int rank;
  if (dims_of(s[0], reps, &rank, "repeat") < 0) return NULL;
  if (rank < x->rank) {
    fsV_seterr("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
    return NULL;
  }
  if (2 * rank > FS_MAX_RANK) {
    fsV_seterr("repeat(): at most %d dimensions are supported", FS_MAX_RANK / 2);
    return NULL;
  }
  int64_t inner[FS_MAX_RANK], big[FS_MAX_RANK], out[FS_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    int k = i - (rank - x->rank);
    int64_t have = k >= 0 ? x->shape[k] : 1;
    inner[2 * i] = 1, inner[2 * i + 1] = have;
    big[2 * i] = reps[i], big[2 * i + 1] = have;
    out[i] = reps[i] * have;
  }
  fs_tensor *v = fsG_reshape(x, 2 * rank, inner), *e = v ? fsG_expand(v, 2 * rank, big) : NULL;
  fs_tensor *r = e ? fsG_reshape(e, rank, out) : NULL;
  fsT_release(v);
  fsT_release(e);
  return fsE_tensor_value(r);
}

/* tensors of a list/tuple value (borrowed) */
static int tensor_list(const fs_value *v, fs_tensor **ts, int max, const char *fn) {
  if (v->type != FSV_LIST && v->type != FSV_TUPLE) {
    fsV_seterr("%s(): argument 'tensors' must be tuple of Tensors, not %s", fn, fsV_type_name(v));
    return -1;
  }
  if ((int)v->u.seq.n > max) {
    fsV_seterr("%s(): at most %d tensors are supported", fn, max);
    return -1;
  }
  for (size_t i = 0; i < v->u.seq.n; i++)
    if (!(ts[i] = fsE_as_tensor(v->u.seq.items[i]))) {
      fsV_seterr("expected Tensor as element %zu in argument 0, but got %s", i, fsV_type_name(v->u.seq.items[i]));
      return -1;
    }
  return (int)v->u.seq.n;
}

#define MAX_CAT 1024

NATIVE(b_cat) {
  fs_tensor *ts[MAX_CAT];
  int d, n = tensor_list(s[0], ts, MAX_CAT, "cat");
  if (n < 0 || dim_arg(s[1], &d) < 0) return NULL;
  return fsE_tensor_value(fsG_cat(ts, n, d));
}

NATIVE(b_stack) {
  fs_tensor *ts[MAX_CAT], *us[MAX_CAT];
  int d, n = tensor_list(s[0], ts, MAX_CAT, "stack");
  if (n < 0 || dim_arg(s[1], &d) < 0) return NULL;
  if (n == 0) {
    fsV_seterr("stack expects a non-empty TensorList");
    return NULL;
  }
  int r = ts[0]->rank + 1;
  if (d < -r || d >= r) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, d);
    return NULL;
  }
  if (d < 0) d += r;
  for (int i = 0; i < n; i++)
    if (!fsT_same_shape(ts[i], ts[0])) {
      char a_[96], b[96];
      fsV_seterr("stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry %d",
                 fsT_shape_str(ts[0], a_, sizeof a_), fsT_shape_str(ts[i], b, sizeof b), i);
      return NULL;
    }
  int64_t dims[FS_MAX_RANK + 1];
  for (int i = 0, k = 0; i < r; i++) dims[i] = i == d ? 1 : ts[0]->shape[k++];
  int made = 0;
  fs_tensor *out = NULL;
  for (; made < n; made++)
    if (!(us[made] = fsG_reshape(ts[made], r, dims))) break;
  if (made == n) out = fsG_cat(us, n, d);
  for (int i = 0; i < made; i++) fsT_release(us[i]);
  return fsE_tensor_value(out);
}

/* split(split_size_or_sections, dim=0) and chunk(chunks, dim=0): tuples of slices */
static fs_value *pieces(fs_tensor *x, const int64_t *len, int n, int d) {
  fs_value *tu = fsV_tuple((size_t)n);
  int64_t at = 0;
  for (int i = 0; tu && i < n; i++) {
    fs_value *v = fsE_tensor_value(fsG_slice(x, d, at, at + len[i], 1));
    if (!v) {
      tu->u.seq.n = (size_t)i;
      fsV_release(tu);
      return NULL;
    }
    fsV_seq_set(tu, (size_t)i, v);
    at += len[i];
  }
  return tu;
}

#define MAX_PIECES 4096

NATIVE(t_split) {
  fs_tensor *x = TENSOR(self);
  int d;
  if (dim_arg(s[1], &d) < 0) return NULL;
  int r = x->rank ? x->rank : 1;
  if (d < -r || d >= r || x->rank == 0) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, d);
    return NULL;
  }
  if (d < 0) d += r;
  int64_t L = x->shape[d], len[MAX_PIECES];
  int n = 0;
  if (s[0]->type == FSV_LIST || s[0]->type == FSV_TUPLE) {
    int64_t total = 0;
    for (size_t i = 0; i < s[0]->u.seq.n && i < MAX_PIECES; i++) total += len[n++] = fsE_ival(s[0]->u.seq.items[i]);
    if (total != L) {
      fsV_seterr("split_with_sizes expects split_sizes to sum exactly to %lld (input tensor's size at dimension %d), but got split_sizes=%s",
                 (long long)L, d, "[...]");
      return NULL;
    }
  } else {
    int64_t k = fsE_ival(s[0]);
    if (k <= 0 && L > 0) {
      fsV_seterr("split_size can only be 0 if dimension size is 0, but got dimension size of %lld", (long long)L);
      return NULL;
    }
    for (int64_t at = 0; at < L && n < MAX_PIECES; at += k) len[n++] = at + k <= L ? k : L - at;
  }
  return pieces(x, len, n, d);
}

NATIVE(t_chunk) {
  fs_tensor *x = TENSOR(self);
  int64_t chunks = fsE_ival(s[0]);
  int d;
  if (dim_arg(s[1], &d) < 0) return NULL;
  if (chunks <= 0) {
    fsV_seterr("chunk expects `chunks` to be greater than 0, got: %lld", (long long)chunks);
    return NULL;
  }
  int r = x->rank ? x->rank : 1;
  if (d < -r || d >= r || x->rank == 0) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, d);
    return NULL;
  }
  if (d < 0) d += r;
  int64_t L = x->shape[d], k = (L + chunks - 1) / chunks, len[MAX_PIECES];
  int n = 0;
  for (int64_t at = 0; at < L && n < MAX_PIECES; at += k) len[n++] = at + k <= L ? k : L - at;
  return pieces(x, len, n, d);
}

/* ---- elementwise ---- */

static fs_value *unary(fs_value *x, fsO_unary op, double p0, double p1, const char *fn) {
  fs_tensor *t = fsE_need_tensor(x, fn, "input");
  return t ? fsE_tensor_value(fsG_unary(op, t, p0, p1)) : NULL;
}

/* A method and a function of one tensor: self is the tensor, or slot 0 is */
#define UNARY(name, op)                                                            \
  NATIVE(t_##name) { return unary(self ? self : s[0], op, 0, 0, #name); }
UNARY(exp, FSO_EXP)
UNARY(log, FSO_LOG)
UNARY(sqrt, FSO_SQRT)
UNARY(rsqrt, FSO_RSQRT)
UNARY(abs, FSO_ABS)
UNARY(sin, FSO_SIN)
UNARY(cos, FSO_COS)
UNARY(tanh, FSO_TANH)
UNARY(sigmoid, FSO_SIGMOID)
UNARY(relu, FSO_RELU)

/* other: a tensor or a number, as a tensor on x's device (new reference) */
static fs_tensor *operand(const fs_value *v, const fs_tensor *x, const char *fn) {
  fs_tensor *t = fsE_as_tensor(v);
  if (t) return fsT_retain(t);
  if (!fsV_is_number(v)) {
    fsV_seterr("%s(): argument 'other' must be Tensor or Number, not %s", fn, fsV_type_name(v));
    return NULL;
  }
  fs_tensor *c = filled(v->type == FSV_FLOAT ? FS_F32 : FS_I64, 0, NULL, fsV_to_double(v));
  fs_tensor *d = c ? fsT_to_device(c, x->device) : NULL;
  fsT_release(c);
  return d;
}

NATIVE(t_pow) {
  fs_tensor *x = fsE_need_tensor(self ? self : s[0], "pow", "input");
  fs_value *e = self ? s[0] : s[1];
  if (!x) return NULL;
  if (fsV_is_number(e)) return fsE_tensor_value(fsG_unary(FSO_POW, x, fsV_to_double(e), 0));
  fs_tensor *y = operand(e, x, "pow");
  fs_value *r = y ? fsE_tensor_value(fsG_binary_op(FSO_POWT, x, y)) : NULL;
  fsT_release(y);
  return r;
}

static fs_value *binary_fn(fs_value *a, fs_value *b, fsO_binary op, const char *fn) {
  fs_tensor *x = fsE_need_tensor(a, fn, "input"), *y = x ? fsE_need_tensor(b, fn, "other") : NULL;
  return y ? fsE_tensor_value(fsG_binary_op(op, x, y)) : NULL;
}

NATIVE(t_maximum) { return self ? binary_fn(self, s[0], FSO_MAXIMUM, "maximum") : binary_fn(s[0], s[1], FSO_MAXIMUM, "maximum"); }
NATIVE(t_minimum) { return self ? binary_fn(self, s[0], FSO_MINIMUM, "minimum") : binary_fn(s[0], s[1], FSO_MINIMUM, "minimum"); }

NATIVE(t_clamp) {
  fs_tensor *x = fsE_need_tensor(self ? self : s[0], "clamp", "input");
  fs_value **b = self ? s : s + 1;
  if (!x) return NULL;
  if (b[0]->type == FSV_NONE && b[1]->type == FSV_NONE) {
    fsV_seterr("torch.clamp: At least one of 'min' or 'max' must not be None");
    return NULL;
  }
  double lo = b[0]->type == FSV_NONE ? NAN : fsV_to_double(b[0]), hi = b[1]->type == FSV_NONE ? NAN : fsV_to_double(b[1]);
  return fsE_tensor_value(fsG_unary(FSO_CLAMP, x, lo, hi));
}

NATIVE(b_where) {
  fs_tensor *c = fsE_need_tensor(s[0], "where", "condition");
  if (!c) return NULL;
  fs_tensor *a_ = operand(s[1], c, "where"), *b = a_ ? operand(s[2], c, "where") : NULL;
  fs_value *r = b ? fsE_tensor_value(fsG_where(c, a_, b)) : NULL;
  fsT_release(a_);
  fsT_release(b);
  return r;
}

NATIVE(t_masked_fill) {
  fs_tensor *x = TENSOR(self), *m = fsE_need_tensor(s[0], "masked_fill", "mask");
  if (!m) return NULL;
  if (!fsV_is_number(s[1]) && !fsE_as_tensor(s[1])) {
    fsV_seterr("masked_fill() received an invalid combination of arguments - got (Tensor, %s)", fsV_type_name(s[1]));
    return NULL;
  }
  fs_tensor *v = operand(s[1], x, "masked_fill");
  fs_tensor *out = v ? fsG_where(m, v, x) : NULL;
  fsT_release(v);
  if (out && x->dtype == FS_I64) { /* an integer tensor stays integral */
    fs_tensor *i = fsT_to_dtype(out, FS_I64);
    fsT_release(out);
    out = i;
  }
  return fsE_tensor_value(out);
}

/* tril/triu(diagonal=0): x * mask over the last two dims */
static fs_value *triangle(fs_value *self, fs_value *diag, bool lower) {
  fs_tensor *x = TENSOR(self);
  if (x->rank < 2) {
    fsV_seterr("%s: input tensor must have at least 2 dimensions", lower ? "tril" : "triu");
    return NULL;
  }
  int64_t k = fsE_ival(diag), R = x->shape[x->rank - 2], C = x->shape[x->rank - 1], dims[2] = {R, C};
  fs_tensor *m = fsT_new(FS_I64, FS_DEV_CPU, 2, dims);
  for (int64_t i = 0; m && i < R; i++)
    for (int64_t j = 0; j < C; j++) fsT_i64(m)[i * C + j] = lower ? j - i <= k : j - i >= k;
  fs_tensor *dm = m ? fsT_to_device(m, x->device) : NULL, *zero = filled(x->dtype, 0, NULL, 0);
  fs_tensor *dz = zero ? fsT_to_device(zero, x->device) : NULL;
  fs_tensor *out = dm && dz ? fsG_where(dm, x, dz) : NULL;
  fsT_release(m);
  fsT_release(dm);
  fsT_release(zero);
  fsT_release(dz);
  if (out && x->dtype == FS_I64) {
    fs_tensor *i = fsT_to_dtype(out, FS_I64);
    fsT_release(out);
    out = i;
  }
  return fsE_tensor_value(out);
}

NATIVE(t_tril) { return triangle(self, s[0], true); }
NATIVE(t_triu) { return triangle(self, s[0], false); }

/* ---- reductions ---- */

static fs_value *pair_value(fs_tensor *a, fs_tensor *b) {
  if (!a || !b) {
    fsT_release(a);
    fsT_release(b);
    return fsE_rt_fail();
  }
  return fsV_pair(fsE_tensor_value(a), fsE_tensor_value(b));
}

/* max/min(): the total; max/min(dim, keepdim=False): (values, indices);
 * max/min(other): maximum/minimum */
static fs_value *extreme(fs_value *self, fs_value **s, bool want_max) {
  fs_tensor *x = TENSOR(self);
  if (fsE_as_tensor(s[0])) return binary_fn(self, s[0], want_max ? FSO_MAXIMUM : FSO_MINIMUM, want_max ? "max" : "min");
  if (s[0]->type == FSV_NONE) {
    if (x->numel == 0) {
      fsV_seterr("%s(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
                 want_max ? "max" : "min");
      return NULL;
    }
    int64_t flat = x->numel;
    fs_tensor *f = fsG_reshape(x, 1, &flat);
    fs_tensor *r = f ? fsG_extreme(want_max, f, 0, false, NULL) : NULL;
    fsT_release(f);
    return fsE_tensor_value(r);
  }
  int d;
  if (dim_arg(s[0], &d) < 0) return NULL;
  fs_tensor *idx;
  fs_tensor *v = fsG_extreme(want_max, x, d, fsV_truthy(s[1]), &idx);
  return pair_value(v, idx);
}

NATIVE(t_max) { return extreme(self, s, true); }
NATIVE(t_min) { return extreme(self, s, false); }

NATIVE(t_argmin) {
  fs_tensor *x = TENSOR(self), *idx = NULL, *v;
  if (s[0]->type == FSV_NONE) {
    int64_t flat = x->numel;
    fs_tensor *f = fsG_reshape(x, 1, &flat);
    v = f ? fsG_extreme(false, f, 0, false, &idx) : NULL;
    fsT_release(f);
  } else v = fsG_extreme(false, x, (int)fsE_ival(s[0]), fsV_truthy(s[1]), &idx);
  fsT_release(v);
  return fsE_tensor_value(idx);
}

/* over dim, or over everything (a flat view) when dim is None */
static fs_tensor *over(fs_tensor *x, const fs_value *dim, bool keepdim, int *d, fs_tensor **flat) {
  *flat = NULL;
  if (dim->type != FSV_NONE) {
    *d = (int)fsE_ival(dim);
    return x;
  }
  int64_t n = x->numel;
  *d = 0;
  (void)keepdim;
  return *flat = fsG_reshape(x, 1, &n);
}

/* var/std(dim=None, unbiased=True, keepdim=False): sum((x - mean)^2) / (N - 1) */
static fs_tensor *variance(fs_tensor *x, const fs_value *dim, bool unbiased, bool keepdim) {
  int d;
  fs_tensor *flat, *src = over(x, dim, keepdim, &d, &flat);
  if (!src) return NULL;
  fs_tensor *m = fsG_sum_dim(src, d, true, true), *c = m ? fsG_binary(FSB_SUB, src, m) : NULL;
  fs_tensor *sq = c ? fsG_binary(FSB_MUL, c, c) : NULL;
  fs_tensor *sum = sq ? fsG_sum_dim(sq, d, keepdim && dim->type != FSV_NONE, false) : NULL;
  int dd = d < 0 ? d + src->rank : d;
  int64_t n = src->rank ? src->shape[dd] : 1;
  fs_tensor *v = sum ? fsG_binary_scalar(FSB_DIV, sum, (double)(n - (unbiased ? 1 : 0)), false, false) : NULL;
  fsT_release(flat);
  fsT_release(m);
  fsT_release(c);
  fsT_release(sq);
  fsT_release(sum);
  return v;
}

NATIVE(t_var) { return fsE_tensor_value(variance(TENSOR(self), s[0], fsV_truthy(s[1]), fsV_truthy(s[2]))); }

NATIVE(t_std) {
  fs_tensor *v = variance(TENSOR(self), s[0], fsV_truthy(s[1]), fsV_truthy(s[2]));
  fs_tensor *r = v ? fsG_unary(FSO_SQRT, v, 0, 0) : NULL;
  fsT_release(v);
  return fsE_tensor_value(r);
}

/* norm(p=2, dim=None, keepdim=False): (sum |x|^p)^(1/p) */
NATIVE(t_norm) {
  fs_tensor *x = TENSOR(self);
  double p = fsV_to_double(s[0]);
  int d;
  fs_tensor *flat, *src = over(x, s[1], false, &d, &flat);
  if (!src) return fsE_rt_fail();
  fs_tensor *a_ = fsG_unary(FSO_ABS, src, 0, 0), *ap = a_ ? fsG_unary(FSO_POW, a_, p, 0) : NULL;
  fs_tensor *sum = ap ? fsG_sum_dim(ap, d, fsV_truthy(s[2]) && s[1]->type != FSV_NONE, false) : NULL;
  fs_tensor *r = sum ? fsG_unary(FSO_POW, sum, 1.0 / p, 0) : NULL;
  fsT_release(flat);
  fsT_release(a_);
  fsT_release(ap);
  fsT_release(sum);
  return fsE_tensor_value(r);
}

NATIVE(t_logsumexp) {
  int d;
  if (dim_arg(s[0], &d) < 0) return NULL;
  return fsE_tensor_value(fsG_logsumexp(TENSOR(self), d, fsV_truthy(s[1])));
}

NATIVE(t_cumsum) {
  int d;
  if (dim_arg(s[0], &d) < 0) return NULL;
  return fsE_tensor_value(fsG_cumsum(TENSOR(self), d));
}

static fs_value *softmax_of(fs_value *x, fs_value *dim, bool log, const char *fn) {
  fs_tensor *t = fsE_need_tensor(x, fn, "input");
  int d;
  if (!t || dim_arg(dim, &d) < 0) return NULL;
  return fsE_tensor_value(fsG_softmax(t, d, log));
}

NATIVE(t_softmax) { return softmax_of(self ? self : s[0], self ? s[0] : s[1], false, "softmax"); }
NATIVE(t_log_softmax) { return softmax_of(self ? self : s[0], self ? s[0] : s[1], true, "log_softmax"); }

/* ---- matmul ---- */

NATIVE(t_matmul) { 
  fs_value *a_ = self ? self : s[0], *b = self ? s[0] : s[1];
  fs_tensor *x = fsE_need_tensor(a_, "matmul", "input"), *y = x ? fsE_need_tensor(b, "matmul", "other") : NULL;
  return y ? fsE_tensor_value(fsG_matmul(x, y)) : NULL;
}

NATIVE(t_bmm) {
  fs_value *a_ = self ? self : s[0], *b = self ? s[0] : s[1];
  fs_tensor *x = fsE_need_tensor(a_, "bmm", "input"), *y = x ? fsE_need_tensor(b, "bmm", "mat2") : NULL;
  return y ? fsE_tensor_value(fsG_bmm(x, y)) : NULL;
}

/* ---- conversions, grads, misc ---- */

NATIVE(t_long) { return fsE_tensor_value(fsT_to_dtype(TENSOR(self), FS_I64)); }

NATIVE(t_to) { /* to(dtype) / to(device) / to(device, dtype) */
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
  fs_tensor *c = fsT_to_dtype(x, dt), *d = c ? fsT_to_device(c, dev) : NULL;
  fsT_release(c);
  return fsE_tensor_value(d);
}

NATIVE(t_cpu) { return fsE_tensor_value(fsT_to_device(TENSOR(self), FS_DEV_CPU)); }
NATIVE(t_cuda) { return fsE_tensor_value(fsT_to_device(TENSOR(self), FS_DEV_CUDA)); }

NATIVE(t_clone) { /* on the tape: the gradient passes through */
  fs_tensor *x = TENSOR(self);
  if (!x->requires_grad) return fsE_tensor_value(fsT_copy(x));
  fs_tensor *one = fsT_scalar(1.0f), *d = one ? fsT_to_device(one, x->device) : NULL;
  fs_tensor *r = d ? fsG_binary(FSB_MUL, x, d) : NULL;
  fsT_release(one);
  fsT_release(d);
  return fsE_tensor_value(r);
}

NATIVE(t_requires_grad_) {
  fs_tensor *x = TENSOR(self);
  bool want = fsV_truthy(s[0]);
  if (want && x->dtype != FS_F32) {
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
  {"float32", c_float32}, {"bfloat16", c_bfloat16}, {"int64", c_int64}, {"long", c_int64},
  {"tensor", b_tensor}, {"zeros", b_zeros}, {"ones", b_ones}, {"empty", b_empty}, {"full", b_full},
  {"arange", b_arange}, {"linspace", b_linspace}, {"eye", b_eye},
  {"rand", b_rand}, {"randn", b_randn}, {"randint", b_randint},
  {"zeros_like", b_zeros_like}, {"ones_like", b_ones_like}, {"empty_like", b_empty_like},
  {"full_like", b_full_like}, {"rand_like", b_rand_like}, {"randn_like", b_randn_like},
  {"cat", b_cat}, {"stack", b_stack}, {"where", b_where},
  {"exp", t_exp}, {"log", t_log}, {"sqrt", t_sqrt}, {"tanh", t_tanh}, {"sigmoid", t_sigmoid},
  {"maximum", t_maximum}, {"minimum", t_minimum}, {"clamp", t_clamp},
  {"softmax", t_softmax}, {"log_softmax", t_log_softmax}, {"matmul", t_matmul}, {"bmm", t_bmm},
  {"Tensor.view", t_view}, {"Tensor.reshape", t_reshape}, {"Tensor.contiguous", t_contiguous},
  {"Tensor.permute", t_permute}, {"Tensor.transpose", t_transpose}, {"Tensor.T", t_T}, {"Tensor.mT", t_mT},
  {"Tensor.unsqueeze", t_unsqueeze}, {"Tensor.squeeze", t_squeeze}, {"Tensor.flatten", t_flatten},
  {"Tensor.expand", t_expand}, {"Tensor.repeat", t_repeat}, {"Tensor.split", t_split}, {"Tensor.chunk", t_chunk},
  {"Tensor.exp", t_exp}, {"Tensor.log", t_log}, {"Tensor.sqrt", t_sqrt}, {"Tensor.rsqrt", t_rsqrt},
  {"Tensor.abs", t_abs}, {"Tensor.sin", t_sin}, {"Tensor.cos", t_cos}, {"Tensor.tanh", t_tanh},
  {"Tensor.sigmoid", t_sigmoid}, {"Tensor.relu", t_relu}, {"Tensor.pow", t_pow}, {"Tensor.clamp", t_clamp},
  {"Tensor.maximum", t_maximum}, {"Tensor.minimum", t_minimum}, {"Tensor.masked_fill", t_masked_fill},
  {"Tensor.tril", t_tril}, {"Tensor.triu", t_triu},
  {"Tensor.max", t_max}, {"Tensor.min", t_min}, {"Tensor.argmin", t_argmin}, {"Tensor.var", t_var},
  {"Tensor.std", t_std}, {"Tensor.norm", t_norm}, {"Tensor.logsumexp", t_logsumexp}, {"Tensor.cumsum", t_cumsum},
  {"Tensor.softmax", t_softmax}, {"Tensor.log_softmax", t_log_softmax},
  {"Tensor.matmul", t_matmul}, {"Tensor.bmm", t_bmm},
  {"Tensor.long", t_long}, {"Tensor.int", t_long}, {"Tensor.to", t_to}, {"Tensor.cpu", t_cpu},
  {"Tensor.cuda", t_cuda}, {"Tensor.clone", t_clone}, {"Tensor.requires_grad_", t_requires_grad_},
  {"Tensor.dim", t_dim}, {"Tensor.ndim", t_dim}, {"Tensor.dtype", tensor_dtype_attr},
  {NULL, NULL},
};
const fsE_lib fsE_lib_torch = {"torch", torch_funcs};
