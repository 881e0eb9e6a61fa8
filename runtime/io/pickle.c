/* pickle.c -- torch.save's pickle: values, the protocol-2 pickler, and the
 * restricted unpickler.
 *
 * The unpickler mirrors torch 1.13's _weights_only_unpickler.py opcode by
 * opcode (plus BINFLOAT, which torch 2.0 added and every optimizer state
 * needs) and recognises exactly its allowed globals; what it cannot turn
 * into a value of pickle.h (sparse tensors, dtypes, tensor classes) is an
 * error naming it, as is any other global or opcode. Every count and offset
 * is checked against the bytes left, so hostile input costs at most a few
 * values per input byte. Other half: the zip container, zipstore.c. */
#define _POSIX_C_SOURCE 200809L
#include "pickle.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataio.h"

/* --------------------------------------------------------------- values */

fsQ_doc *fsQ_new(void) { return calloc(1, sizeof(fsQ_doc)); }

void fsQ_free(fsQ_doc *d) {
  if (!d) return;
  for (size_t i = 0; i < d->nall; i++) {
    fsQ_value *v = d->all[i];
    if (v->kind == FSQ_STR) free(v->u.str.s);
    else if (v->kind == FSQ_TUPLE || v->kind == FSQ_LIST || v->kind == FSQ_SET) free(v->u.seq.v);
    else if (v->kind == FSQ_DICT) {
      free(v->u.dict.k);
      free(v->u.dict.v);
    }
    free(v);
  }
  for (size_t i = 0; i < d->nstorages; i++) free(d->storages[i].key);
  free(d->storages);
  free(d->all);
  free(d);
}

/* Grows *v (n used of *cap elements of size elem) to hold one more. */
static int room(void **v, size_t n, size_t *cap, size_t elem) {
  if (n < *cap) return 0;
  size_t want = *cap ? 2 * *cap : 8;
  void *w = realloc(*v, want * elem);
  if (!w) return -1;
  *v = w;
  *cap = want;
  return 0;
}

static fsQ_value *value_new(fsQ_doc *d, fsQ_kind kind) {
  fsQ_value *v = calloc(1, sizeof *v);
  if (!v || room((void **)&d->all, d->nall, &d->capall, sizeof *d->all) < 0) {
    free(v);
    return NULL;
  }
  v->kind = kind;
  return d->all[d->nall++] = v;
}

fsQ_value *fsQ_none(fsQ_doc *d) { return value_new(d, FSQ_NONE); }

fsQ_value *fsQ_bool(fsQ_doc *d, bool b) {
  fsQ_value *v = value_new(d, FSQ_BOOL);
  if (v) v->u.b = b;
  return v;
}

fsQ_value *fsQ_int(fsQ_doc *d, int64_t i) {
  fsQ_value *v = value_new(d, FSQ_INT);
  if (v) v->u.i = i;
  return v;
}

fsQ_value *fsQ_float(fsQ_doc *d, double f) {
  fsQ_value *v = value_new(d, FSQ_FLOAT);
  if (v) v->u.f = f;
  return v;
}

static fsQ_value *str_new(fsQ_doc *d, const void *s, size_t len) {
  char *c = malloc(len + 1);
  fsQ_value *v = c ? value_new(d, FSQ_STR) : NULL;
  if (!v) {
    free(c);
    return NULL;
  }
  memcpy(c, s, len);
  c[len] = '\0';
  v->u.str.s = c;
  v->u.str.len = len;
  return v;
}

fsQ_value *fsQ_str(fsQ_doc *d, const char *s) { return str_new(d, s, strlen(s)); }

fsQ_value *fsQ_container(fsQ_doc *d, fsQ_kind kind) { return value_new(d, kind); }

fsQ_value *fsQ_ordered_dict(fsQ_doc *d) {
  fsQ_value *v = value_new(d, FSQ_DICT);
  if (v) v->ordered = true;
  return v;
}

fsQ_value *fsQ_tensor_new(fsQ_doc *d, fs_dtype dt, int ndim, const int64_t *shape, const void *data) {
  if (ndim < 0 || ndim > FS_MAX_RANK) return NULL;
  uint64_t numel;
  if (fsIO_numel(ndim, shape, fsT_dtype_size(dt), &numel) != 0) return NULL;
  fsQ_value *v = value_new(d, FSQ_TENSOR);
  if (!v) return NULL;
  fsQ_tensor *t = &v->u.t;
  t->dtype = dt;
  t->ndim = ndim;
  t->numel = numel;
  t->data = data;
  int64_t stride = 1; /* torch's contiguous strides: an empty dimension counts as 1 */
  for (int k = ndim - 1; k >= 0; k--) {
    t->shape[k] = shape[k];
    t->stride[k] = stride;
    stride *= shape[k] > 1 ? shape[k] : 1;
  }
  return v;
}

int fsQ_push(fsQ_value *seq, fsQ_value *item) {
  if (room((void **)&seq->u.seq.v, seq->u.seq.n, &seq->u.seq.cap, sizeof *seq->u.seq.v) < 0) return -1;
  seq->u.seq.v[seq->u.seq.n++] = item;
  return 0;
}

int fsQ_set(fsQ_value *dict, fsQ_value *key, fsQ_value *val) {
  size_t cap = dict->u.dict.cap;
  if (room((void **)&dict->u.dict.k, dict->u.dict.n, &cap, sizeof *dict->u.dict.k) < 0) return -1;
  cap = dict->u.dict.cap;
  if (room((void **)&dict->u.dict.v, dict->u.dict.n, &cap, sizeof *dict->u.dict.v) < 0) return -1;
  dict->u.dict.cap = cap;
  dict->u.dict.k[dict->u.dict.n] = key;
  dict->u.dict.v[dict->u.dict.n++] = val;
  return 0;
}

const fsQ_value *fsQ_get(const fsQ_value *dict, const char *key) {
  size_t len = strlen(key);
  for (size_t i = 0; dict && dict->kind == FSQ_DICT && i < dict->u.dict.n; i++) {
    const fsQ_value *k = dict->u.dict.k[i];
    if (k->kind == FSQ_STR && k->u.str.len == len && memcmp(k->u.str.s, key, len) == 0) return dict->u.dict.v[i];
  }
  return NULL;
}

const fsQ_value *fsQ_get_int(const fsQ_value *dict, int64_t key) {
  for (size_t i = 0; dict && dict->kind == FSQ_DICT && i < dict->u.dict.n; i++) {
    const fsQ_value *k = dict->u.dict.k[i];
    if (k->kind == FSQ_INT && k->u.i == key) return dict->u.dict.v[i];
  }
  return NULL;
}

const char *fsQ_kind_name(fsQ_kind k) {
  static const char *const names[] = {
    [FSQ_NONE] = "NoneType", [FSQ_BOOL] = "bool", [FSQ_INT] = "int", [FSQ_FLOAT] = "float",
    [FSQ_STR] = "str", [FSQ_TUPLE] = "tuple", [FSQ_LIST] = "list", [FSQ_SET] = "set",
    [FSQ_DICT] = "dict", [FSQ_TENSOR] = "Tensor", [FSQ__GLOBAL] = "global", [FSQ__STORAGE] = "storage"};
  return names[k];
}

/* UTF-8 as Python decodes it; surrogates (ED A0..BF xx) pass when
 * surrogatepass, as BINUNICODE's "surrogatepass" lets them. */
static bool utf8_ok(const uint8_t *s, size_t n, bool surrogatepass) {
  for (size_t i = 0; i < n;) {
    uint8_t c = s[i];
    size_t k = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 9;
    if (k == 9 || k > n - i - 1) return false;
    uint32_t cp = k == 0 ? c : k == 1 ? c & 0x1Fu : k == 2 ? c & 0x0Fu : c & 0x07u;
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (s[i + j] & 0x3Fu);
    }
    static const uint32_t least[] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[k] || cp > 0x10FFFF || (!surrogatepass && cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += k + 1;
  }
  return true;
}

/* -------------------------------------------------------------- pickling */

enum {
  OP_MARK = '(', OP_STOP = '.', OP_BINFLOAT = 'G', OP_BININT = 'J', OP_BININT1 = 'K', OP_BININT2 = 'M',
  OP_NONE = 'N', OP_BINPERSID = 'Q', OP_REDUCE = 'R', OP_SHORT_BINSTRING = 'U', OP_BINUNICODE = 'X',
  OP_APPEND = 'a', OP_BUILD = 'b', OP_GLOBAL = 'c', OP_APPENDS = 'e', OP_BINGET = 'h', OP_LONG_BINGET = 'j',
  OP_BINPUT = 'q', OP_LONG_BINPUT = 'r', OP_SETITEM = 's', OP_TUPLE = 't', OP_SETITEMS = 'u',
  OP_EMPTY_DICT = '}', OP_EMPTY_LIST = ']', OP_EMPTY_TUPLE = ')', OP_PROTO = 0x80, OP_NEWOBJ = 0x81,
  OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89,
  OP_LONG1 = 0x8a, OP_EMPTY_SET = 0x8f,
};

/* Python's pickler batches APPENDS and SETITEMS by this many. */
#define BATCH 1000

typedef struct outbuf {
  uint8_t *p;
  size_t n, cap;
  bool oom;
} outbuf;

static void put(outbuf *b, const void *s, size_t n) {
  if (b->oom) return;
  if (b->n + n > b->cap) {
    size_t want = b->cap ? b->cap : 256;
    while (want < b->n + n) want *= 2;
    uint8_t *q = realloc(b->p, want);
    if (!q) {
      b->oom = true;
      return;
    }
    b->p = q;
    b->cap = want;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

static void put_op(outbuf *b, int op) {
  uint8_t c = (uint8_t)op;
  put(b, &c, 1);
}

static void put_le(outbuf *b, uint64_t v, int bytes) {
  uint8_t q[8];
  for (int i = 0; i < bytes; i++) q[i] = (uint8_t)(v >> (8 * i));
  put(b, q, (size_t)bytes);
}

static void put_int(outbuf *b, int64_t v) {
  if (v >= 0 && v <= 0xFF) {
    put_op(b, OP_BININT1);
    put_le(b, (uint64_t)v, 1);
  } else if (v >= 0 && v <= 0xFFFF) {
    put_op(b, OP_BININT2);
    put_le(b, (uint64_t)v, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    put_op(b, OP_BININT);
    put_le(b, (uint64_t)v, 4);
  } else { /* two's complement, as few bytes as keep the sign (Python's encode_long) */
    int n = 8;
    while (n > 1 && ((v >> (8 * (n - 1) - 1)) == 0 || (v >> (8 * (n - 1) - 1)) == -1)) n--;
    put_op(b, OP_LONG1);
    put_le(b, (uint64_t)n, 1);
    put_le(b, (uint64_t)v, n);
  }
}

static void put_str(outbuf *b, const char *s, size_t len) {
  put_op(b, OP_BINUNICODE);
  put_le(b, len, 4);
  put(b, s, len);
}

static void put_global(outbuf *b, const char *module_nl_name) {
  put_op(b, OP_GLOBAL);
  put(b, module_nl_name, strlen(module_nl_name));
}

typedef struct dumper {
  outbuf b;
  const fsQ_value **tensors;
  size_t nt, capt;
  char *err;
} dumper;

static void put_tensor(dumper *w, const fsQ_value *v) {
  static const char *const storage_type[] = {[FS_F32] = "torch\nFloatStorage\n",
                                             [FS_BF16] = "torch\nBFloat16Storage\n",
                                             [FS_I64] = "torch\nLongStorage\n"};
  const fsQ_tensor *t = &v->u.t;
  size_t key = 0;
  while (key < w->nt && w->tensors[key] != v) key++; /* one storage per distinct tensor */
  if (key == w->nt) {
    if (room((void **)&w->tensors, w->nt, &w->capt, sizeof *w->tensors) < 0) {
      w->b.oom = true;
      return;
    }
    w->tensors[w->nt++] = v;
  }
  char keytext[24];
  snprintf(keytext, sizeof keytext, "%zu", key);
  outbuf *b = &w->b;
  put_global(b, "torch._utils\n_rebuild_tensor_v2\n");
  put_op(b, OP_MARK);
  put_op(b, OP_MARK);
  put_str(b, "storage", 7);
  put_global(b, storage_type[t->dtype]);
  put_str(b, keytext, strlen(keytext));
  put_str(b, "cpu", 3);
  put_int(b, (int64_t)t->numel);
  put_op(b, OP_TUPLE);
  put_op(b, OP_BINPERSID);
  put_int(b, 0);
  for (int which = 0; which < 2; which++) {
    const int64_t *dims = which ? t->stride : t->shape;
    if (t->ndim > 3) put_op(b, OP_MARK);
    for (int k = 0; k < t->ndim; k++) put_int(b, dims[k]);
    static const uint8_t tuple_op[] = {OP_EMPTY_TUPLE, OP_TUPLE1, OP_TUPLE2, OP_TUPLE3};
    put_op(b, t->ndim > 3 ? OP_TUPLE : tuple_op[t->ndim]);
  }
  put_op(b, OP_NEWFALSE); /* requires_grad: a state dict holds detached tensors */
  put_global(b, "collections\nOrderedDict\n");
  put_op(b, OP_EMPTY_TUPLE);
  put_op(b, OP_REDUCE);
  put_op(b, OP_TUPLE);
  put_op(b, OP_REDUCE);
}

static int dump_value(dumper *w, const fsQ_value *v, int depth) {
  outbuf *b = &w->b;
  if (depth > FSQ_MAX_DEPTH) {
    w->err = fsIO_errf("the value is nested deeper than %d", FSQ_MAX_DEPTH);
    return -1;
  }
  switch (v->kind) {
  case FSQ_NONE: put_op(b, OP_NONE); return 0;
  case FSQ_BOOL: put_op(b, v->u.b ? OP_NEWTRUE : OP_NEWFALSE); return 0;
  case FSQ_INT: put_int(b, v->u.i); return 0;
  case FSQ_FLOAT: {
    uint64_t bits;
    memcpy(&bits, &v->u.f, sizeof bits);
    put_op(b, OP_BINFLOAT);
    for (int i = 7; i >= 0; i--) put_le(b, bits >> (8 * i), 1); /* big-endian */
    return 0;
  }
  case FSQ_STR:
    if (!utf8_ok((const uint8_t *)v->u.str.s, v->u.str.len, false)) {
      w->err = fsIO_errf("a string is not valid UTF-8");
      return -1;
    }
    put_str(b, v->u.str.s, v->u.str.len);
    return 0;
  case FSQ_TUPLE:
    if (v->u.seq.n == 0 || v->u.seq.n > 3) put_op(b, v->u.seq.n ? OP_MARK : OP_EMPTY_TUPLE);
    for (size_t i = 0; i < v->u.seq.n; i++)
      if (dump_value(w, v->u.seq.v[i], depth + 1) < 0) return -1;
    if (v->u.seq.n) put_op(b, v->u.seq.n == 1 ? OP_TUPLE1 : v->u.seq.n == 2 ? OP_TUPLE2 : v->u.seq.n == 3 ? OP_TUPLE3 : OP_TUPLE);
    return 0;
  case FSQ_LIST:
  case FSQ_SET:
    if (v->kind == FSQ_SET && v->u.seq.n) {
      w->err = fsIO_errf("a set with items cannot be saved");
      return -1;
    }
    put_op(b, v->kind == FSQ_SET ? OP_EMPTY_SET : OP_EMPTY_LIST);
    for (size_t i = 0; i < v->u.seq.n; i++) {
      if (i % BATCH == 0) put_op(b, OP_MARK);
      if (dump_value(w, v->u.seq.v[i], depth + 1) < 0) return -1;
      if (i % BATCH == BATCH - 1 || i + 1 == v->u.seq.n) put_op(b, OP_APPENDS);
    }
    return 0;
  case FSQ_DICT:
    if (v->ordered) {
      put_global(b, "collections\nOrderedDict\n");
      put_op(b, OP_EMPTY_TUPLE);
      put_op(b, OP_REDUCE);
    } else {
      put_op(b, OP_EMPTY_DICT);
    }
    for (size_t i = 0; i < v->u.dict.n; i++) {
      if (i % BATCH == 0) put_op(b, OP_MARK);
      if (dump_value(w, v->u.dict.k[i], depth + 1) < 0 || dump_value(w, v->u.dict.v[i], depth + 1) < 0) return -1;
      if (i % BATCH == BATCH - 1 || i + 1 == v->u.dict.n) put_op(b, OP_SETITEMS);
    }
    return 0;
  case FSQ_TENSOR:
    if (v->u.t.loaded) {
      w->err = fsIO_errf("a tensor read from a checkpoint cannot be saved again as is (make a new one)");
      return -1;
    }
    put_tensor(w, v);
    return 0;
  case FSQ__GLOBAL:
  case FSQ__STORAGE: break;
  }
  w->err = fsIO_errf("a %s cannot be saved", fsQ_kind_name(v->kind));
  return -1;
}

int fsQ_dump(const fsQ_value *root, uint8_t **out, size_t *len, const fsQ_value ***tensors,
             size_t *ntensors, char **err) {
  dumper w = {0};
  put_op(&w.b, OP_PROTO);
  put_le(&w.b, 2, 1);
  int rc = dump_value(&w, root, 0);
  put_op(&w.b, OP_STOP);
  if (rc == 0 && w.b.oom) w.err = fsIO_errf("out of memory");
  if (rc < 0 || w.b.oom) {
    if (err) *err = w.err;
    else free(w.err);
    free(w.b.p);
    free(w.tensors);
    return -1;
  }
  *out = w.b.p;
  *len = w.b.n;
  *tensors = w.tensors;
  *ntensors = w.nt;
  return 0;
}

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
  {"Double", "float64", -1}, {"Half", "float16", -1}, {"Int", "int32", -1}, {"Short", "int16", -1},
  {"Char", "int8", -1}, {"Byte", "uint8", -1}, {"Bool", "bool", -1}, {"ComplexDouble", "complex128", -1},
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
  if (!v || room((void **)&u->stack, u->n, &u->cap, sizeof *u->stack) < 0) return oom(u);
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
      fsQ_value *v = value_new(u->d, FSQ__GLOBAL);
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
    return fail(u, "a tensor of dtype %s (%s): the runtime has float32, bfloat16 and int64", storage_types[row].dtype,
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
  fsQ_value *v = value_new(d, FSQ__STORAGE);
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
  fsQ_value *v = value_new(u->d, FSQ_TENSOR);
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
  if (!utf8_ok(s, n, surrogatepass)) return fail(u, "a string is not valid UTF-8");
  return push(u, str_new(u->d, s, n));
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
  fsQ_value *t = value_new(u->d, FSQ_TUPLE);
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
    if (room((void **)&u->marks, u->nmarks, &u->capmarks, sizeof *u->marks) < 0) return oom(u);
    u->marks[u->nmarks++] = u->n;
    return 0;
  case OP_NONE: return push(u, fsQ_none(u->d));
  case OP_NEWTRUE: return push(u, fsQ_bool(u->d, true));
  case OP_NEWFALSE: return push(u, fsQ_bool(u->d, false));
  case OP_EMPTY_TUPLE: return push(u, value_new(u->d, FSQ_TUPLE));
  case OP_EMPTY_LIST: return push(u, value_new(u->d, FSQ_LIST));
  case OP_EMPTY_DICT: return push(u, value_new(u->d, FSQ_DICT));
  case OP_EMPTY_SET: return push(u, value_new(u->d, FSQ_SET));
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
