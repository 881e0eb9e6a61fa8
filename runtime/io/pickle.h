/* pickle.h -- the values of a PyTorch checkpoint, and the pickle (protocol 2)
 * that torch.save writes them in: a pickler, and an unpickler restricted to
 * what torch.load(weights_only=True) accepts.
 *
 * A document (fsQ_doc) owns every value made in it; fsQ_free releases them
 * all at once, so values may be shared (the pickle memo does that) and a
 * caller never frees a single value. What fsQ_load returns is acyclic,
 * nested at most FSQ_MAX_DEPTH deep, holds only the kinds below, has no
 * duplicate dict keys (a later SETITEM replaced the value, as in Python) and
 * every tensor lies inside its storage. The unpickler never calls anything:
 * a global is a name it recognises or an error naming it.
 *
 * The zip container the pickle travels in: zipstore.h; the two together as a
 * checkpoint file: torchckpt.h. */
#ifndef FS_PICKLE_H
#define FS_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tensor.h"

#define FSQ_MAX_DEPTH 1024 /* above the interpreter's 1000 levels, with room for the state dict around them */

typedef enum fsQ_kind {
  FSQ_NONE, FSQ_BOOL, FSQ_INT, FSQ_FLOAT, FSQ_STR,
  FSQ_TUPLE, FSQ_LIST, FSQ_SET, /* u.seq; a set is always empty (no opcode adds to one) */
  FSQ_DICT,                     /* u.dict, insertion order; ordered: an OrderedDict */
  FSQ_TENSOR,
  FSQ__GLOBAL, FSQ__STORAGE     /* unpickler-internal; never in a loaded tree */
} fsQ_kind;

typedef struct fsQ_value fsQ_value;

/* A tensor: shape and dtype, and where its elements are. Made by
 * fsQ_tensor_new: data holds numel contiguous elements (or NULL: written
 * later, see torchckpt.h), offset 0, contiguous strides. Made by fsQ_load:
 * element i (row-major) is element offset + sum(index_d * stride[d]) of
 * storage `storage` (an index into fsQ_doc.storages); views of one storage
 * share it. */
typedef struct fsQ_tensor {
  fs_dtype dtype;
  int ndim;
  int64_t shape[FS_MAX_RANK];
  int64_t stride[FS_MAX_RANK];
  int64_t offset;
  size_t storage;
  uint64_t numel;
  const void *data;
  bool loaded; /* made by fsQ_load */
} fsQ_tensor;

struct fsQ_value {
  fsQ_kind kind;
  bool ordered;
  union {
    bool b;
    int64_t i;   /* also: FSQ__GLOBAL's table row, FSQ__STORAGE's index */
    double f;
    struct { char *s; size_t len; } str;  /* UTF-8, NUL-terminated (may hold NULs) */
    struct { fsQ_value **v; size_t n, cap; } seq;
    struct { fsQ_value **k, **v; size_t n, cap; } dict;
    fsQ_tensor t;
  } u;
  int visit; /* fsQ_load's final walk */
};

/* A storage a loaded pickle refers to: torch's persistent id
 * ('storage', torch.<Type>Storage, key, location, numel). */
typedef struct fsQ_storage {
  char *key;
  fs_dtype dtype;
  uint64_t numel;
} fsQ_storage;

typedef struct fsQ_doc {
  fsQ_value **all; size_t nall, capall;  /* every value made, for fsQ_free */
  fsQ_storage *storages; size_t nstorages;
  fsQ_value *root;                       /* fsQ_load's result */
} fsQ_doc;

fsQ_doc *fsQ_new(void);
void fsQ_free(fsQ_doc *d);

/* --- building (NULL / -1 only when out of memory) --- */
fsQ_value *fsQ_none(fsQ_doc *d);
fsQ_value *fsQ_bool(fsQ_doc *d, bool b);
fsQ_value *fsQ_int(fsQ_doc *d, int64_t i);
fsQ_value *fsQ_float(fsQ_doc *d, double f);
fsQ_value *fsQ_str(fsQ_doc *d, const char *s);
fsQ_value *fsQ_container(fsQ_doc *d, fsQ_kind kind); /* FSQ_TUPLE, FSQ_LIST or FSQ_DICT */
fsQ_value *fsQ_ordered_dict(fsQ_doc *d);
/* ndim <= FS_MAX_RANK, no negative dimension. */
fsQ_value *fsQ_tensor_new(fsQ_doc *d, fs_dtype dt, int ndim, const int64_t *shape, const void *data);
int fsQ_push(fsQ_value *seq, fsQ_value *item);
/* Appends the pair; a caller that builds a tree gives each key once. */
int fsQ_set(fsQ_value *dict, fsQ_value *key, fsQ_value *val);

/* --- reading --- */
const fsQ_value *fsQ_get(const fsQ_value *dict, const char *key);     /* a str key; NULL if none */
const fsQ_value *fsQ_get_int(const fsQ_value *dict, int64_t key);     /* an int key */
const char *fsQ_kind_name(fsQ_kind k); /* Python's: "int", "dict", "Tensor", ... */

/* --- pickling --- */
/* torch.save's pickle of root: protocol 2, dicts as dict or OrderedDict,
 * tensors through torch._utils._rebuild_tensor_v2 with a persistent id per
 * distinct tensor value, keyed "0", "1", ... in the order met. *out
 * (malloc'd, *len bytes) and *tensors (malloc'd, *ntensors, in key order).
 * -1 + *err (malloc'd) for a string that is not UTF-8, a tensor not made by
 * fsQ_tensor_new, a tree deeper than FSQ_MAX_DEPTH or out of memory. */
int fsQ_dump(const fsQ_value *root, uint8_t **out, size_t *len, const fsQ_value ***tensors,
             size_t *ntensors, char **err);

/* --- unpickling --- */
/* The restricted unpickler over p[0..len): a new document whose root is the
 * value, or -1 + *err ("data.pkl: <what> at byte <n>"; the caller adds the
 * file name) with nothing allocated. */
int fsQ_load(const uint8_t *p, size_t len, fsQ_doc **out, char **err);

#endif
