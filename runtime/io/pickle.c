/* pickle.c -- torch.save's pickle: the value tree (pickle.h) and the
 * protocol-2 pickler.  The restricted unpickler is unpickle.c; the zip
 * container, zipstore.c. */
#define _POSIX_C_SOURCE 200809L
#include "io_int.h"

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
int fsQ_room(void **v, size_t n, size_t *cap, size_t elem) {
  if (n < *cap) return 0;
  size_t want = *cap ? 2 * *cap : 8;
  void *w = realloc(*v, want * elem);
  if (!w) return -1;
  *v = w;
  *cap = want;
  return 0;
}

fsQ_value *fsQ_value_new(fsQ_doc *d, fsQ_kind kind) {
  fsQ_value *v = calloc(1, sizeof *v);
  if (!v || fsQ_room((void **)&d->all, d->nall, &d->capall, sizeof *d->all) < 0) {
    free(v);
    return NULL;
  }
  v->kind = kind;
  return d->all[d->nall++] = v;
}

fsQ_value *fsQ_none(fsQ_doc *d) { return fsQ_value_new(d, FSQ_NONE); }

fsQ_value *fsQ_bool(fsQ_doc *d, bool b) {
  fsQ_value *v = fsQ_value_new(d, FSQ_BOOL);
  if (v) v->u.b = b;
  return v;
}

fsQ_value *fsQ_int(fsQ_doc *d, int64_t i) {
  fsQ_value *v = fsQ_value_new(d, FSQ_INT);
  if (v) v->u.i = i;
  return v;
}

fsQ_value *fsQ_float(fsQ_doc *d, double f) {
  fsQ_value *v = fsQ_value_new(d, FSQ_FLOAT);
  if (v) v->u.f = f;
  return v;
}

fsQ_value *fsQ_str_new(fsQ_doc *d, const void *s, size_t len) {
  char *c = malloc(len + 1);
  fsQ_value *v = c ? fsQ_value_new(d, FSQ_STR) : NULL;
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

fsQ_value *fsQ_str(fsQ_doc *d, const char *s) { return fsQ_str_new(d, s, strlen(s)); }

fsQ_value *fsQ_container(fsQ_doc *d, fsQ_kind kind) { return fsQ_value_new(d, kind); }

fsQ_value *fsQ_ordered_dict(fsQ_doc *d) {
  fsQ_value *v = fsQ_value_new(d, FSQ_DICT);
  if (v) v->ordered = true;
  return v;
}

fsQ_value *fsQ_tensor_new(fsQ_doc *d, fs_dtype dt, int ndim, const int64_t *shape, const void *data) {
  if (ndim < 0 || ndim > FS_MAX_RANK) return NULL;
  uint64_t numel;
  if (fsIO_numel(ndim, shape, fsT_dtype_size(dt), &numel) != 0) return NULL;
  fsQ_value *v = fsQ_value_new(d, FSQ_TENSOR);
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
  if (fsQ_room((void **)&seq->u.seq.v, seq->u.seq.n, &seq->u.seq.cap, sizeof *seq->u.seq.v) < 0) return -1;
  seq->u.seq.v[seq->u.seq.n++] = item;
  return 0;
}

int fsQ_set(fsQ_value *dict, fsQ_value *key, fsQ_value *val) {
  size_t cap = dict->u.dict.cap;
  if (fsQ_room((void **)&dict->u.dict.k, dict->u.dict.n, &cap, sizeof *dict->u.dict.k) < 0) return -1;
  cap = dict->u.dict.cap;
  if (fsQ_room((void **)&dict->u.dict.v, dict->u.dict.n, &cap, sizeof *dict->u.dict.v) < 0) return -1;
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
bool fsQ_utf8_ok(const uint8_t *s, size_t n, bool surrogatepass) {
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

/* Python's pickler batches APPENDS and SETITEMS by this many. */
#define BATCH 1000

static void put_op(fsT_buf *b, int op) {
  uint8_t c = (uint8_t)op;
  fsT_buf_put(b, &c, 1);
}

static void put_int(fsT_buf *b, int64_t v) {
  if (v >= 0 && v <= 0xFF) {
    put_op(b, OP_BININT1);
    fsIO_put_le(b, (uint64_t)v, 1);
  } else if (v >= 0 && v <= 0xFFFF) {
    put_op(b, OP_BININT2);
    fsIO_put_le(b, (uint64_t)v, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    put_op(b, OP_BININT);
    fsIO_put_le(b, (uint64_t)v, 4);
  } else { /* two's complement, as few bytes as keep the sign (Python's encode_long) */
    int n = 8;
    while (n > 1 && ((v >> (8 * (n - 1) - 1)) == 0 || (v >> (8 * (n - 1) - 1)) == -1)) n--;
    put_op(b, OP_LONG1);
    fsIO_put_le(b, (uint64_t)n, 1);
    fsIO_put_le(b, (uint64_t)v, n);
  }
}

static void put_str(fsT_buf *b, const char *s, size_t len) {
  put_op(b, OP_BINUNICODE);
  fsIO_put_le(b, len, 4);
  fsT_buf_put(b, s, len);
}

static void put_global(fsT_buf *b, const char *module_nl_name) {
  put_op(b, OP_GLOBAL);
  fsT_buf_put(b, module_nl_name, strlen(module_nl_name));
}

typedef struct dumper {
  fsT_buf b;
  const fsQ_value **tensors;
  size_t nt, capt;
  char *err;
} dumper;

static void put_tensor(dumper *w, const fsQ_value *v) {
  static const char *const storage_type[] = {[FS_F32] = "torch\nFloatStorage\n",
                                             [FS_BF16] = "torch\nBFloat16Storage\n",
                                             [FS_F16] = "torch\nHalfStorage\n",
                                             [FS_I64] = "torch\nLongStorage\n",
                                             [FS_BOOL] = "torch\nBoolStorage\n",
                                             [FS_F64] = "torch\nDoubleStorage\n"};
  const fsQ_tensor *t = &v->u.t;
  size_t key = 0;
  while (key < w->nt && w->tensors[key] != v) key++; /* one storage per distinct tensor */
  if (key == w->nt) {
    if (fsQ_room((void **)&w->tensors, w->nt, &w->capt, sizeof *w->tensors) < 0) {
      w->b.oom = true;
      return;
    }
    w->tensors[w->nt++] = v;
  }
  char keytext[24];
  snprintf(keytext, sizeof keytext, "%zu", key);
  fsT_buf *b = &w->b;
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
  fsT_buf *b = &w->b;
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
    for (int i = 7; i >= 0; i--) fsIO_put_le(b, bits >> (8 * i), 1); /* big-endian */
    return 0;
  }
  case FSQ_STR:
    if (!fsQ_utf8_ok((const uint8_t *)v->u.str.s, v->u.str.len, false)) {
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
  fsIO_put_le(&w.b, 2, 1);
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
