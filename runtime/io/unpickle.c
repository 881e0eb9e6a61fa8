/* unpickle.c -- the restricted unpickler of torch.save's pickle.
 *
 * It mirrors torch 1.13's _weights_only_unpickler.py opcode by opcode (plus
 * BINFLOAT, which torch 2.0 added and every optimizer state needs) and
 * recognises exactly its allowed globals; what it cannot turn into a value
 * of pickle.h (sparse tensors, dtypes, tensor classes) is an error naming
 * it, as is any other global or opcode. Every count and offset is checked
 * against the bytes left, so hostile input costs at most a few values per
 * input byte.  The values and the pickler: pickle.c. */
#define _POSIX_C_SOURCE 200809L
#include "io_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataio.h"

/* ------------------------------------------------------------ unpickling */

/* torch 1.13's _get_allowed_globals(), every row; the first rows are the
 * ones that become values here. */
enum { G_ORDERED_DICT, G_PARAMETER, G_SIZE, G_REBUILD_V2, G_REBUILD, G_REBUILD_PARAMETER };
static const char *const allowed_globals[] = {
  [G_ORDERED_DICT] = "collections.OrderedDict", [G_PARAMETER] = "torch.nn.parameter.Parameter",
  [G_SIZE] = "torch.Size", [G_REBUILD_V2] = "torch._utils._rebuild_tensor_v2",
  [G_REBUILD] = "torch._utils._rebuild_tensor", [G_REBUILD_PARAMETER] = "torch._utils._rebuild_parameter",
  "torch._utils._rebuild_sparse_tensor", "torch._utils._rebuild_meta_tensor_no_storage",
  "torch._utils._rebuild_sparse_csr_tensor", "torch.serialization._get_layout", "torch.Tensor",
  "torch.storage.TypedStorage", "torch.storage.UntypedStorage",
  "torch.complex32", "torch.complex64", "torch.complex128", "torch.float16", "torch.float32",
  "torch.float64", "torch.int8", "torch.int16", "torch.int32", "torch.int64",
  "torch.BFloat16Storage", "torch.BoolStorage", "torch.ByteStorage", "torch.CharStorage",
  "torch.ComplexDoubleStorage", "torch.ComplexFloatStorage", "torch.DoubleStorage", "torch.FloatStorage",
  "torch.HalfStorage", "torch.IntStorage", "torch.LongStorage", "torch.QInt32Storage", "torch.QInt8Storage",
  "torch.QUInt2x4Storage", "torch.QUInt4x2Storage", "torch.QUInt8Storage", "torch.ShortStorage",
  "torch.cuda.BFloat16Storage", "torch.cuda.BoolStorage", "torch.cuda.ByteStorage", "torch.cuda.CharStorage",
  "torch.cuda.ComplexDoubleStorage", "torch.cuda.ComplexFloatStorage", "torch.cuda.DoubleStorage",
  "torch.cuda.FloatStorage", "torch.cuda.HalfStorage", "torch.cuda.IntStorage", "torch.cuda.LongStorage",
  "torch.cuda.ShortStorage",
  "torch.BFloat16Tensor", "torch.BoolTensor", "torch.ByteTensor", "torch.CharTensor", "torch.DoubleTensor",
  "torch.FloatTensor", "torch.HalfTensor", "torch.IntTensor", "torch.LongTensor", "torch.ShortTensor",
  "torch.cuda.BFloat16Tensor", "torch.cuda.BoolTensor", "torch.cuda.ByteTensor", "torch.cuda.CharTensor",
  "torch.cuda.DoubleTensor", "torch.cuda.FloatTensor", "torch.cuda.HalfTensor", "torch.cuda.IntTensor",
  "torch.cuda.LongTensor", "torch.cuda.ShortTensor",
  "torch.sparse.BFloat16Tensor", "torch.sparse.ByteTensor", "torch.sparse.CharTensor",
  "torch.sparse.DoubleTensor", "torch.sparse.FloatTensor", "torch.sparse.HalfTensor", "torch.sparse.IntTensor",
  "torch.sparse.LongTensor", "torch.sparse.ShortTensor",
  "torch.cuda.sparse.BFloat16Tensor", "torch.cuda.sparse.ByteTensor", "torch.cuda.sparse.CharTensor",
  "torch.cuda.sparse.DoubleTensor", "torch.cuda.sparse.FloatTensor", "torch.cuda.sparse.HalfTensor",
  "torch.cuda.sparse.IntTensor", "torch.cuda.sparse.LongTensor", "torch.cuda.sparse.ShortTensor",
};
#define N_ALLOWED (sizeof allowed_globals / sizeof allowed_globals[0])

/* torch's storage classes: the runtime's dtypes, and the others by name. */
static const struct { const char *cls, *dtype; int runtime; } storage_types[] = {
  {"Float", "float32", FS_F32}, {"BFloat16", "bfloat16", FS_BF16}, {"Long", "int64", FS_I64},
  {"Double", "float64", FS_F64}, {"Half", "float16", FS_F16}, {"Int", "int32", -1}, {"Short", "int16", -1},
  {"Char", "int8", -1}, {"Byte", "uint8", -1}, {"Bool", "bool", FS_BOOL}, {"ComplexDouble", "complex128", -1},
  {"ComplexFloat", "complex64", -1}, {"QInt32", "qint32", -1}, {"QInt8", "qint8", -1},
  {"QUInt8", "quint8", -1}, {"QUInt4x2", "quint4x2", -1}, {"QUInt2x4", "quint2x4", -1},
};

/* The storage_types row of global g, or -1 when it is no Storage class. */
static int storage_row(size_t g) {
  const char *name = allowed_globals[g];
  if (strncmp(name, "torch.", 6) != 0) return -1;
  name += 6;
  if (strncmp(name, "cuda.", 5) == 0) name += 5;
  size_t len = strlen(name);
  if (len <= 7 || strcmp(name + len - 7, "Storage") != 0) return -1;
  for (size_t i = 0; i < sizeof storage_types / sizeof storage_types[0]; i++)
    if (strlen(storage_types[i].cls) == len - 7 && strncmp(name, storage_types[i].cls, len - 7) == 0) return (int)i;
  return -1;
}

/* Every pickle opcode's name, for errors about the ones refused. */
static const char *op_name(int op) {
  static const struct { uint8_t op; const char *name; } ops[] = {
    {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'F', "FLOAT"},
    {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"}, {'M', "BININT2"}, {'N', "NONE"},
    {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"}, {'S', "STRING"}, {'T', "BINSTRING"},
    {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"}, {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"},
    {'c', "GLOBAL"}, {'d', "DICT"}, {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"},
    {'i', "INST"}, {'j', "LONG_BINGET"}, {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"},
    {'q', "BINPUT"}, {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"}, {')', "EMPTY_TUPLE"},
    {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"},
    {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"}, {'B', "BINBYTES"},
    {'C', "SHORT_BINBYTES"}, {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (ops[i].op == op) return ops[i].name;
  return "unknown";
}

typedef struct unpickler {
  fsQ_doc *d;
  const uint8_t *p;
  size_t len, pos, at; /* at: the opcode being run */
  fsQ_value **stack; size_t n, cap;
  size_t *marks; size_t nmarks, capmarks;
  fsQ_value **memo; size_t nmemo;
  char *err;
} unpickler;

static int fail(unpickler *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(unpickler *u, const char *fmt, ...) {
  if (u->err) return -1;
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  u->err = fsIO_errf("data.pkl: %s at byte %zu", what, u->at);
  return -1;
}

static int oom(unpickler *u) { return fail(u, "out of memory"); }

static const uint8_t *take(unpickler *u, size_t n) {
  if (n > u->len - u->pos) {
    fail(u, "the pickle ends inside %s", op_name(u->p[u->at]));
    return NULL;
  }
  const uint8_t *q = u->p + u->pos;
  u->pos += n;
  return q;
}

static uint64_t le(const uint8_t *q, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | q[i];
  return v;
}

static int push(unpickler *u, fsQ_value *v) {
  if (!v || fsQ_room((void **)&u->stack, u->n, &u->cap, sizeof *u->stack) < 0) return oom(u);
  u->stack[u->n++] = v;
  return 0;
}

/* The value k from the top (0: the top), within the current mark. */
static fsQ_value *peek(unpickler *u, size_t k) {
  size_t floor = u->nmarks ? u->marks[u->nmarks - 1] : 0;
  if (u->n - floor <= k) {
    fail(u, "%s needs %zu value%s on the stack", op_name(u->p[u->at]), k + 1, k ? "s" : "");
    return NULL;
  }
  return u->stack[u->n - 1 - k];
}

static fsQ_value *pop(unpickler *u) {
  fsQ_value *v = peek(u, 0);
  if (v) u->n--;
  return v;
}

/* The values since the last MARK (*n of them at *items), mark removed. */
static int pop_mark(unpickler *u, fsQ_value ***items, size_t *n) {
  if (!u->nmarks) return fail(u, "%s without a MARK", op_name(u->p[u->at]));
  size_t m = u->marks[--u->nmarks];
  *items = u->stack ? u->stack + m : NULL; /* no value pushed yet: an empty run */
  *n = u->n - m;
  u->n = m;
  return 0;
}

static const char *global_name(const fsQ_value *v) { return allowed_globals[v->u.i]; }

/* What a value is, in an error: its type, or the global's name. */
static const char *what_is(const fsQ_value *v) {
  return v->kind == FSQ__GLOBAL ? global_name(v) : v->kind == FSQ_DICT && v->ordered ? "OrderedDict"
                                                                                   : fsQ_kind_name(v->kind);
}

static int op_global(unpickler *u) {
  const uint8_t *line[2];
  size_t n[2];
  for (int i = 0; i < 2; i++) {
    line[i] = u->p + u->pos;
    const uint8_t *nl = memchr(line[i], '\n', u->len - u->pos);
    if (!nl) return fail(u, "the pickle ends inside GLOBAL");
    n[i] = (size_t)(nl - line[i]);
    u->pos += n[i] + 1;
  }
  for (size_t g = 0; g < N_ALLOWED; g++) {
    const char *a = allowed_globals[g];
    if (strlen(a) == n[0] + 1 + n[1] && memcmp(a, line[0], n[0]) == 0 && a[n[0]] == '.' &&
        memcmp(a + n[0] + 1, line[1], n[1]) == 0) {
      fsQ_value *v = fsQ_value_new(u->d, FSQ__GLOBAL);
      if (v) v->u.i = (int64_t)g;
      return push(u, v);
    }
  }
  char shown[160];
  snprintf(shown, sizeof shown, "%.*s.%.*s", (int)(n[0] > 70 ? 70 : n[0]), (const char *)line[0],
           (int)(n[1] > 70 ? 70 : n[1]), (const char *)line[1]);
  for (char *c = shown; *c; c++)
    if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
  return fail(u, "unsupported global %s (only what torch.load(weights_only=True) accepts is loaded)", shown);
}

/* A non-negative int (an offset, a dimension, a count). */
static int want_count(unpickler *u, const fsQ_value *v, const char *what, int64_t *out) {
  if ((v->kind != FSQ_INT && v->kind != FSQ_BOOL) || (v->kind == FSQ_INT && v->u.i < 0))
    return fail(u, "%s must be a non-negative int, not %s", what, v->kind == FSQ_INT ? "a negative int" : what_is(v));
  *out = v->kind == FSQ_BOOL ? v->u.b : v->u.i;
  return 0;
}

/* persistent_load(('storage', torch.<T>Storage, key, location, numel)) */
static int op_binpersid(unpickler *u) {
  fsQ_value *pid = pop(u);
  if (!pid) return -1;
  if (pid->kind != FSQ_TUPLE || pid->u.seq.n != 5)
    return fail(u, "a persistent id must be ('storage', type, key, location, numel), not a %s", what_is(pid));
  fsQ_value **f = pid->u.seq.v;
  if (f[0]->kind != FSQ_STR || strcmp(f[0]->u.str.s, "storage") != 0)
    return fail(u, "only persistent_load of storage is allowed");
  int row = f[1]->kind == FSQ__GLOBAL ? storage_row((size_t)f[1]->u.i) : -1;
  if (row < 0) return fail(u, "a storage's type must be a torch Storage class, not %s", what_is(f[1]));
  if (storage_types[row].runtime < 0)
    return fail(u, "a tensor of dtype %s (%s): the runtime has float32, float64, bfloat16, float16 and int64", storage_types[row].dtype,
                global_name(f[1]));
  int64_t numel;
  if (f[2]->kind != FSQ_STR) return fail(u, "a storage's key must be a str, not %s", what_is(f[2]));
  if (f[3]->kind != FSQ_STR) return fail(u, "a storage's location must be a str, not %s", what_is(f[3]));
  if (want_count(u, f[4], "a storage's size", &numel) < 0) return -1;
  fs_dtype dt = (fs_dtype)storage_types[row].runtime;
  if ((uint64_t)numel > UINT64_MAX / 8 / fsT_dtype_size(dt)) return fail(u, "storage '%s' is too large", f[2]->u.str.s);
  fsQ_doc *d = u->d;
  size_t s = 0;
  while (s < d->nstorages && strcmp(d->storages[s].key, f[2]->u.str.s) != 0) s++;
  if (s < d->nstorages && (d->storages[s].dtype != dt || d->storages[s].numel != (uint64_t)numel))
    return fail(u, "storage '%s' is declared twice with different types or sizes", f[2]->u.str.s);
  if (s == d->nstorages) {
    fsQ_storage *st = realloc(d->storages, (s + 1) * sizeof *st);
    if (!st) return oom(u);
    d->storages = st;
    if (!(st[s].key = strdup(f[2]->u.str.s))) return oom(u);
    st[s].dtype = dt;
    st[s].numel = (uint64_t)numel;
    d->nstorages++;
  }
  fsQ_value *v = fsQ_value_new(d, FSQ__STORAGE);
  if (v) v->u.i = (int64_t)s;
  return push(u, v);
}

/* A tuple of dims (torch.Size makes one); *ndim of them into out. */
static int want_dims(unpickler *u, const fsQ_value *v, const char *what, int64_t *out, int *ndim) {
  if (v->kind != FSQ_TUPLE) return fail(u, "a tensor's %s must be a tuple, not %s", what, what_is(v));
  if (v->u.seq.n > FS_MAX_RANK)
    return fail(u, "a tensor has %zu dimensions; the runtime allows at most %d", v->u.seq.n, FS_MAX_RANK);
  *ndim = (int)v->u.seq.n;
  char label[40];
  snprintf(label, sizeof label, "a tensor's %s", what);
  for (int k = 0; k < *ndim; k++)
    if (want_count(u, v->u.seq.v[k], label, &out[k]) < 0) return -1;
  return 0;
}

/* _rebuild_tensor(_v2)(storage, storage_offset, size, stride, ...) */
static fsQ_value *rebuild_tensor(unpickler *u, fsQ_value *const *a, size_t n, bool v2) {
  if (v2 ? n != 6 && n != 7 : n != 4) {
    fail(u, "torch._utils._rebuild_tensor%s takes %s arguments, not %zu", v2 ? "_v2" : "", v2 ? "6 or 7" : "4", n);
    return NULL;
  }
  if (a[0]->kind != FSQ__STORAGE) {
    fail(u, "a tensor's storage must be a persistent storage, not %s", what_is(a[0]));
    return NULL;
  }
  const fsQ_storage *st = &u->d->storages[a[0]->u.i];
  fsQ_value *v = fsQ_value_new(u->d, FSQ_TENSOR);
  if (!v) {
    oom(u);
    return NULL;
  }
  fsQ_tensor *t = &v->u.t;
  int nstride = 0;
  if (want_count(u, a[1], "a tensor's storage offset", &t->offset) < 0 ||
      want_dims(u, a[2], "size", t->shape, &t->ndim) < 0 || want_dims(u, a[3], "stride", t->stride, &nstride) < 0)
    return NULL;
  if (nstride != t->ndim) {
    fail(u, "a tensor has %d sizes but %d strides", t->ndim, nstride);
    return NULL;
  }
  if (v2 && (a[4]->kind != FSQ_BOOL || a[5]->kind != FSQ_DICT || (n == 7 && a[6]->kind != FSQ_NONE && a[6]->kind != FSQ_DICT))) {
    fail(u, "torch._utils._rebuild_tensor_v2's requires_grad, backward_hooks or metadata has the wrong type");
    return NULL;
  }
  t->dtype = st->dtype;
  t->storage = (size_t)a[0]->u.i;
  t->loaded = true;
  /* numel, and the last element it reaches: both must fit the storage */
  uint64_t numel = 1, last = (uint64_t)t->offset;
  for (int k = 0; k < t->ndim; k++) {
    if (t->shape[k] && numel > UINT64_MAX / (uint64_t)t->shape[k]) numel = UINT64_MAX;
    else numel *= (uint64_t)t->shape[k];
  }
  for (int k = 0; numel && k < t->ndim; k++) {
    uint64_t reach = (uint64_t)(t->shape[k] - 1), s = (uint64_t)t->stride[k];
    if (s && reach > (UINT64_MAX - last) / s) last = UINT64_MAX;
    else last += reach * s;
  }
  if (numel && (numel > st->numel || last >= st->numel)) {
    fail(u, "a tensor of %d dimensions reaches past the end of storage '%s' (%llu elements)", t->ndim, st->key,
         (unsigned long long)st->numel);
    return NULL;
  }
  t->numel = numel;
  return v;
}

/* REDUCE / NEWOBJ: func(*args) for the globals that make values. */
static int call(unpickler *u, fsQ_value *func, fsQ_value *args, bool newobj) {
  if (func->kind != FSQ__GLOBAL) return fail(u, "%s of a %s: only allowed globals can be called", op_name(u->p[u->at]), what_is(func));
  if (args->kind != FSQ_TUPLE) return fail(u, "%s's arguments must be a tuple, not %s", op_name(u->p[u->at]), what_is(args));
  fsQ_value *const *a = args->u.seq.v;
  size_t n = args->u.seq.n;
  int64_t g = func->u.i;
  fsQ_value *r = NULL;
  if (newobj && g != G_PARAMETER) return fail(u, "trying to instantiate unsupported class %s", global_name(func));
  if (g == G_ORDERED_DICT) {
    if (n) return fail(u, "collections.OrderedDict with arguments is not supported (torch.save passes none)");
    r = fsQ_ordered_dict(u->d);
  } else if (g == G_SIZE) {
    if (n != 1 || a[0]->kind != FSQ_TUPLE) return fail(u, "torch.Size takes one tuple");
    for (size_t i = 0; i < a[0]->u.seq.n; i++)
      if (a[0]->u.seq.v[i]->kind != FSQ_INT) return fail(u, "torch.Size takes ints, not %s", what_is(a[0]->u.seq.v[i]));
    r = a[0]; /* a torch.Size is a tuple */
  } else if (g == G_REBUILD_V2 || g == G_REBUILD) {
    if (!(r = rebuild_tensor(u, a, n, g == G_REBUILD_V2))) return -1;
  } else if (g == G_REBUILD_PARAMETER || g == G_PARAMETER) { /* (data, requires_grad[, hooks]) */
    if (n < 1 || n > 3 || a[0]->kind != FSQ_TENSOR)
      return fail(u, "%s takes a tensor and requires_grad", global_name(func));
    r = a[0];
  } else {
    return fail(u, "%s is not supported (the runtime has dense tensors, containers and numbers only)", global_name(func));
  }
  return push(u, r);
}

static int op_build(unpickler *u) {
  fsQ_value *state = pop(u), *inst = state ? peek(u, 0) : NULL;
  if (!inst) return -1;
  if (inst->kind == FSQ_DICT && inst->ordered) {
    /* OrderedDict.__dict__.update(state): the attributes (a state dict's
     * _metadata) are dropped; the items are the value */
    if (state->kind != FSQ_DICT) return fail(u, "BUILD of an OrderedDict needs a dict state, not %s", what_is(state));
    return 0;
  }
  if (inst->kind == FSQ_TENSOR) return fail(u, "BUILD of a tensor (legacy set_ or a Parameter's state) is not supported");
  return fail(u, "can only build Tensor, parameter or dict objects, but got %s", what_is(inst));
}

static int op_get(unpickler *u, uint64_t i) {
  if (i >= u->nmemo || !u->memo[i]) return fail(u, "memo key %llu is not defined", (unsigned long long)i);
  return push(u, u->memo[i]);
}

static int op_put(unpickler *u, uint64_t i) {
  fsQ_value *v = peek(u, 0);
  if (!v) return -1;
  /* Python's pickler numbers the memo from 0, so a key cannot exceed the
   * number of opcodes; a bigger one is hostile (it would size the memo) */
  if (i >= u->len) return fail(u, "memo key %llu is larger than the pickle", (unsigned long long)i);
  if (i >= u->nmemo) {
    size_t want = u->nmemo ? u->nmemo : 64;
    while (want <= i) want *= 2;
    fsQ_value **m = realloc(u->memo, want * sizeof *m);
    if (!m) return oom(u);
    memset(m + u->nmemo, 0, (want - u->nmemo) * sizeof *m);
    u->memo = m;
    u->nmemo = want;
  }
  u->memo[i] = v;
  return 0;
}

static int op_str(unpickler *u, size_t n, bool surrogatepass) {
  const uint8_t *s = take(u, n);
  if (!s) return -1;
  if (!fsQ_utf8_ok(s, n, surrogatepass)) return fail(u, "a string is not valid UTF-8");
  return push(u, fsQ_str_new(u->d, s, n));
}

static int op_long1(unpickler *u) {
  const uint8_t *q = take(u, 1), *b = q ? take(u, q[0]) : NULL;
  if (!b) return -1;
  size_t n = q[0];
  int64_t v = 0;
  if (n) {
    uint8_t sign = b[n - 1] & 0x80 ? 0xFF : 0;
    for (size_t i = 8; i < n; i++)
      if (b[i] != sign) return fail(u, "an int does not fit in 64 bits");
    if (n > 8 && (b[7] & 0x80) != (sign & 0x80)) return fail(u, "an int does not fit in 64 bits");
    uint64_t x = le(b, n < 8 ? (int)n : 8);
    if (n < 8 && sign) x |= ~(uint64_t)0 << (8 * n);
    memcpy(&v, &x, sizeof v);
  }
  return push(u, fsQ_int(u->d, v));
}

static int op_setitems(unpickler *u, fsQ_value *const *items, size_t n) {
  fsQ_value *dict = peek(u, 0);
  if (!dict) return -1;
  if (dict->kind != FSQ_DICT) return fail(u, "%s on a %s: only dicts take items here", op_name(u->p[u->at]), what_is(dict));
  if (n % 2) return fail(u, "SETITEMS with an odd number of values");
  for (size_t i = 0; i < n; i += 2)
    if (fsQ_set(dict, items[i], items[i + 1]) < 0) return oom(u);
  return 0;
}

static int op_appends(unpickler *u, fsQ_value *const *items, size_t n) {
  fsQ_value *list = peek(u, 0);
  if (!list) return -1;
  if (list->kind != FSQ_LIST) return fail(u, "can only append to lists, but got %s", what_is(list));
  for (size_t i = 0; i < n; i++)
    if (fsQ_push(list, items[i]) < 0) return oom(u);
  return 0;
}

static int op_tuple(unpickler *u, fsQ_value *const *items, size_t n) {
  fsQ_value *t = fsQ_value_new(u->d, FSQ_TUPLE);
  for (size_t i = 0; t && i < n; i++)
    if (fsQ_push(t, items[i]) < 0) t = NULL;
  return push(u, t);
}

/* Runs one opcode; 1 at STOP. */
static int step(unpickler *u) {
  u->at = u->pos;
  if (u->pos == u->len) return fail(u, "the pickle ends without STOP");
  const uint8_t *q = take(u, 1);
  fsQ_value **items, *a, *b;
  size_t n;
  switch (q[0]) {
  case OP_PROTO: return take(u, 1) ? 0 : -1;
  case OP_STOP: return (u->d->root = pop(u)) ? 1 : -1;
  case OP_MARK:
    if (fsQ_room((void **)&u->marks, u->nmarks, &u->capmarks, sizeof *u->marks) < 0) return oom(u);
    u->marks[u->nmarks++] = u->n;
    return 0;
  case OP_NONE: return push(u, fsQ_none(u->d));
  case OP_NEWTRUE: return push(u, fsQ_bool(u->d, true));
  case OP_NEWFALSE: return push(u, fsQ_bool(u->d, false));
  case OP_EMPTY_TUPLE: return push(u, fsQ_value_new(u->d, FSQ_TUPLE));
  case OP_EMPTY_LIST: return push(u, fsQ_value_new(u->d, FSQ_LIST));
  case OP_EMPTY_DICT: return push(u, fsQ_value_new(u->d, FSQ_DICT));
  case OP_EMPTY_SET: return push(u, fsQ_value_new(u->d, FSQ_SET));
  case OP_BININT: return (q = take(u, 4)) ? push(u, fsQ_int(u->d, (int32_t)(uint32_t)le(q, 4))) : -1;
  case OP_BININT1: return (q = take(u, 1)) ? push(u, fsQ_int(u->d, q[0])) : -1;
  case OP_BININT2: return (q = take(u, 2)) ? push(u, fsQ_int(u->d, (int64_t)le(q, 2))) : -1;
  case OP_LONG1: return op_long1(u);
  case OP_BINFLOAT: {
    if (!(q = take(u, 8))) return -1;
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++) bits = bits << 8 | q[i];
    double f;
    memcpy(&f, &bits, sizeof f);
    return push(u, fsQ_float(u->d, f));
  }
  case OP_BINUNICODE: return (q = take(u, 4)) ? op_str(u, (size_t)le(q, 4), true) : -1;
  case OP_SHORT_BINSTRING: return (q = take(u, 1)) ? op_str(u, q[0], false) : -1;
  case OP_GLOBAL: return op_global(u);
  case OP_BINPERSID: return op_binpersid(u);
  case OP_REDUCE:
  case OP_NEWOBJ:
    if (!(b = pop(u)) || !(a = pop(u))) return -1;
    return call(u, a, b, q[0] == OP_NEWOBJ);
  case OP_BUILD: return op_build(u);
  case OP_APPEND: return (b = pop(u)) ? op_appends(u, &b, 1) : -1;
  case OP_APPENDS: return pop_mark(u, &items, &n) < 0 ? -1 : op_appends(u, items, n);
  case OP_SETITEM: {
    if (!(b = pop(u)) || !(a = pop(u))) return -1;
    fsQ_value *kv[2] = {a, b};
    return op_setitems(u, kv, 2);
  }
  case OP_SETITEMS: return pop_mark(u, &items, &n) < 0 ? -1 : op_setitems(u, items, n);
  case OP_TUPLE: return pop_mark(u, &items, &n) < 0 ? -1 : op_tuple(u, items, n);
  case OP_TUPLE1:
  case OP_TUPLE2:
  case OP_TUPLE3:
    n = (size_t)(q[0] - OP_TUPLE1 + 1);
    if (!peek(u, n - 1)) return -1;
    u->n -= n;
    return op_tuple(u, u->stack + u->n, n);
  case OP_BINGET: return (q = take(u, 1)) ? op_get(u, q[0]) : -1;
  case OP_LONG_BINGET: return (q = take(u, 4)) ? op_get(u, le(q, 4)) : -1;
  case OP_BINPUT: return (q = take(u, 1)) ? op_put(u, q[0]) : -1;
  case OP_LONG_BINPUT: return (q = take(u, 4)) ? op_put(u, le(q, 4)) : -1;
  }
  return fail(u, "unsupported opcode %s (0x%02x)", op_name(q[0]), q[0]);
}

/* ----------------------------------------------- the loaded tree's checks */

static int kind_rank(const fsQ_value *v) {
  return v->kind == FSQ_NONE ? 0 : v->kind == FSQ_STR ? 2 : v->kind == FSQ_TUPLE ? 3 : 1;
}

/* Python's equality of hashable keys as a total order (numbers by value,
 * NaN after every number, True == 1). */
static int key_cmp(const fsQ_value *a, const fsQ_value *b) {
  int ra = kind_rank(a), rb = kind_rank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  if (ra == 0) return 0;
  if (ra == 2) {
    size_t n = a->u.str.len < b->u.str.len ? a->u.str.len : b->u.str.len;
    int c = memcmp(a->u.str.s, b->u.str.s, n);
    return c ? c : (a->u.str.len > b->u.str.len) - (a->u.str.len < b->u.str.len);
  }
  if (ra == 3) {
    for (size_t i = 0; i < a->u.seq.n && i < b->u.seq.n; i++) {
      int c = key_cmp(a->u.seq.v[i], b->u.seq.v[i]);
      if (c) return c;
    }
    return (a->u.seq.n > b->u.seq.n) - (a->u.seq.n < b->u.seq.n);
  }
  if (a->kind != FSQ_FLOAT && b->kind != FSQ_FLOAT) {
    int64_t x = a->kind == FSQ_BOOL ? a->u.b : a->u.i, y = b->kind == FSQ_BOOL ? b->u.b : b->u.i;
    return (x > y) - (x < y);
  }
  double x = a->kind == FSQ_FLOAT ? a->u.f : a->kind == FSQ_BOOL ? a->u.b : (double)a->u.i;
  double y = b->kind == FSQ_FLOAT ? b->u.f : b->kind == FSQ_BOOL ? b->u.b : (double)b->u.i;
  if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
  return (x > y) - (x < y);
}

typedef struct keyed { const fsQ_value *k; size_t i; } keyed;

static int by_key(const void *p, const void *q) {
  const keyed *a = p, *b = q;
  int c = key_cmp(a->k, b->k);
  return c ? c : (a->i > b->i) - (a->i < b->i);
}

static bool hashable(const fsQ_value *v) {
  if (v->kind == FSQ_TUPLE) {
    for (size_t i = 0; i < v->u.seq.n; i++)
      if (!hashable(v->u.seq.v[i])) return false;
    return true;
  }
  return v->kind <= FSQ_STR;
}

/* Python's dict: a repeated key keeps its first place and its last value. */
static int dedupe(unpickler *u, fsQ_value *d) {
  size_t n = d->u.dict.n;
  for (size_t i = 0; i < n; i++)
    if (!hashable(d->u.dict.k[i]))
      return fail(u, "a dict key must be a str, a number, None or a tuple of them, not %s", what_is(d->u.dict.k[i]));
  if (n < 2) return 0;
  keyed *ks = malloc(n * sizeof *ks);
  bool *drop = calloc(n, sizeof *drop);
  if (!ks || !drop) {
    free(ks);
    free(drop);
    return oom(u);
  }
  for (size_t i = 0; i < n; i++) ks[i] = (keyed){d->u.dict.k[i], i};
  qsort(ks, n, sizeof *ks, by_key);
  for (size_t r = 0; r < n;) {
    size_t e = r + 1;
    while (e < n && key_cmp(ks[r].k, ks[e].k) == 0) drop[ks[e++].i] = true;
    d->u.dict.v[ks[r].i] = d->u.dict.v[ks[e - 1].i];
    r = e;
  }
  size_t w = 0;
  for (size_t i = 0; i < n; i++)
    if (!drop[i]) {
      d->u.dict.k[w] = d->u.dict.k[i];
      d->u.dict.v[w++] = d->u.dict.v[i];
    }
  d->u.dict.n = w;
  free(ks);
  free(drop);
  return 0;
}

enum { UNSEEN, ON_PATH, DONE };

static int finish(unpickler *u, fsQ_value *v, int depth) {
  if (v->visit == DONE) return 0;
  if (v->visit == ON_PATH) return fail(u, "the value contains itself");
  if (depth > FSQ_MAX_DEPTH) return fail(u, "the value is nested deeper than %d", FSQ_MAX_DEPTH);
  if (v->kind == FSQ__GLOBAL) return fail(u, "%s as a value is not supported", global_name(v));
  if (v->kind == FSQ__STORAGE) return fail(u, "a storage outside a tensor is not supported");
  v->visit = ON_PATH;
  if (v->kind == FSQ_TUPLE || v->kind == FSQ_LIST || v->kind == FSQ_SET)
    for (size_t i = 0; i < v->u.seq.n; i++)
      if (finish(u, v->u.seq.v[i], depth + 1) < 0) return -1;
  if (v->kind == FSQ_DICT) {
    for (size_t i = 0; i < v->u.dict.n; i++)
      if (finish(u, v->u.dict.k[i], depth + 1) < 0 || finish(u, v->u.dict.v[i], depth + 1) < 0) return -1;
    if (dedupe(u, v) < 0) return -1;
  }
  v->visit = DONE;
  return 0;
}

int fsQ_load(const uint8_t *p, size_t len, fsQ_doc **out, char **err) {
  unpickler u = {.d = fsQ_new(), .p = p, .len = len};
  int rc = u.d ? 0 : -1;
  if (!u.d) u.err = fsIO_errf("data.pkl: out of memory");
  while (rc == 0) rc = step(&u);
  if (rc == 1) rc = finish(&u, u.d->root, 0);
  free(u.stack);
  free(u.marks);
  free(u.memo);
  if (rc < 0) {
    fsQ_free(u.d);
    if (err) *err = u.err;
    else free(u.err);
    return -1;
  }
  *out = u.d;
  return 0;
}
