/* lib_data.c -- data sets and DataLoader values over runtime/io/: the
 * runtime's data sets (files and generated), torch.utils.data's
 * TensorDataset, Subset and ConcatDataset, a script class with __len__ and
 * __getitem__ as a data set, default_collate, and the DataLoader with its
 * torch options, worker threads and DistributedSampler semantics once
 * Fabric sets it up. The file readers' builtins (NumPy, tokens, CSV,
 * ImageFolder and its transforms) are lib_files.c's.
 *
 * Two ways to a batch. A runtime data set (or Subsets of one) with the
 * default collate is stacked by runtime/io/loader.c, on worker threads when
 * num_workers > 0. Anything else is fetched item by item here, on the
 * interpreter's thread, and collated by default_collate or the script's
 * collate_fn. Both draw the same order from the same fsDL_loader, so the
 * batches do not depend on the way or on num_workers. The samplers and the
 * Generator are lib_sampler.c's. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "autograd.h"
#include "backend.h"
#include "dataio.h"
#include "eval_int.h"
#include "rng.h"

/* ---- the runtime's data sets ----------------------------------------------------------- */

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

/* A data set index: an int in [-n, n) -> [0, n). */
static int item_index(const fs_value *key, int64_t n, int64_t *out) {
  if (key->type != FSV_INT) {
    fsV_seterr("dataset indices must be integers, not %s", fsV_type_name(key));
    return -1;
  }
  int64_t i = key->u.i < 0 ? key->u.i + n : key->u.i;
  if (i < 0 || i >= n) {
    fsV_seterr("dataset index %lld out of range for a data set of %lld items", (long long)key->u.i,
               (long long)n);
    return -1;
  }
  *out = i;
  return 0;
}

static fs_value *dataset_index(fsE_ctx *E, fs_value *v, fs_value *key) {
  fsS_dataset *ds = &((dsv *)v->u.obj.data)->ds;
  int64_t i;
  if (item_index(key, (int64_t)ds->len, &i) < 0) return NULL;
  size_t y_at = (ds->x.bytes + 7) & ~(size_t)7; /* the label's int64s aligned (x may be 3 floats) */
  void *x = malloc(y_at + ds->y.bytes);
  char *err = NULL;
  if (!x) return fsE_err_own(NULL);
  if (fsS_get(ds, (size_t)i, fsR_bits(E->seed, (uint64_t)i), x, (char *)x + y_at, &err) != 0) {
    free(x);
    return fsE_err_own(err);
  }
  fs_tensor *tx = layout_tensor(&ds->x, -1, x), *ty = tx ? layout_tensor(&ds->y, -1, (char *)x + y_at) : NULL;
  free(x);
  if (!ty) {
    fsT_release(tx);
    return fsE_rt_fail();
  }
  return fsV_pair(fsE_tensor_value(tx), fsE_tensor_value(ty));
}

static const fsV_class dataset_class = {
  .name = "Dataset", .index = dataset_index, .len = dataset_len, .free = dsv_free,
};

/* rc and err of the constructor call (err read only after rc is known) */
static fs_value *dataset_value(dsv *d, int rc, char **err) {
  if (rc < 0) {
    free(d);
    return fsE_err_own(*err);
  }
  return fsV_obj(&dataset_class, d);
}

#define NEW_DS(d) dsv *d = calloc(1, sizeof *d); if (!d) { fsV_seterr("out of memory"); return NULL; } char *err = NULL

fs_value *fsE_dataset_made(fsS_dataset *ds, int rc, char *err) {
  if (rc < 0) return fsE_err_own(err);
  dsv *d = calloc(1, sizeof *d);
  if (!d) {
    fsS_free(ds);
    return fsE_err_own(NULL);
  }
  d->ds = *ds;
  return fsV_obj(&dataset_class, d);
}

fsS_dataset *fsE_dataset_of(const fs_value *v) {
  dsv *d = fsV_objdata(v, &dataset_class);
  return d ? &d->ds : NULL;
}

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
  int rc = fsS_text(&d->ds, s[0]->u.str.s, fsE_ival(s[1]), &err);
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
  int rc = fsS_random(&d->ds, fsE_ival(s[0]), nd, shape, fsE_ival(s[2]), (uint64_t)fsE_ival(s[3]), &err);
  return dataset_value(d, rc, &err);
}

/* ---- any data set: len() and items --------------------------------------------------- */

/* len(ds): a script class's __len__, else the value's own. */
static int64_t ds_len(fsE_ctx *E, fs_value *ds) {
  fs_value *m = NULL;
  int k = fsE_instance_getattr(E, ds, "__len__", &m);
  if (k < 0) return -1;
  if (k == 0) {
    if (ds->type == FSV_OBJ && !ds->u.obj.cls->len && !ds->u.obj.cls->index) {
      fsV_seterr("a data set needs __len__ and __getitem__; %s has no __len__", fsV_type_name(ds));
      return -1;
    }
    return fsV_len(E, ds);
  }
  fs_value *r = fsE_call(E, m, &(fsV_args){0});
  fsV_release(m);
  if (!r) return -1;
  int64_t n = r->type == FSV_INT ? r->u.i : -1;
  if (n < 0) fsV_seterr("__len__() should return an int >= 0, not %s", fsV_type_name(r));
  fsV_release(r);
  return n;
}

/* ds[i]: a script class's __getitem__, else the value's own indexing. */
static fs_value *ds_item(fsE_ctx *E, fs_value *ds, int64_t i) {
  fs_value *m = NULL, *key = fsV_int(i);
  int k = key ? fsE_instance_getattr(E, ds, "__getitem__", &m) : -1;
  fs_value *r = NULL;
  if (k > 0) r = fsE_call(E, m, &(fsV_args){.pos = &key, .npos = 1});
  else if (k == 0) r = fsV_index(E, ds, key);
  fsV_release(m);
  fsV_release(key);
  return r;
}

/* ---- TensorDataset, Subset, ConcatDataset ------------------------------------------------ */

typedef enum wrap_kind { W_TENSORS, W_SUBSET, W_CONCAT } wrap_kind;

typedef struct wrapv {
  wrap_kind kind;
  fs_value *parts;   /* tuple of tensors, the data set, or list of data sets (held) */
  fs_value *indices; /* Subset: list of ints (held) */
  int64_t *cum;      /* ConcatDataset: cumulative sizes */
  int64_t len;
} wrapv;

static void wrapv_free(void *p) {
  wrapv *w = p;
  fsV_release(w->parts);
  fsV_release(w->indices);
  free(w->cum);
  free(w);
}

static int64_t wrap_len(fsE_ctx *E, fs_value *v) { return ((wrapv *)v->u.obj.data)->len; }

static fs_value *wrap_index(fsE_ctx *E, fs_value *v, fs_value *key) {
  wrapv *w = v->u.obj.data;
  int64_t i;
  if (w->kind == W_CONCAT && key->type == FSV_INT && key->u.i < -w->len) {
    fsV_seterr("absolute value of index should not exceed dataset length");
    return NULL;
  }
  if (item_index(key, w->len, &i) < 0) return NULL;
  switch (w->kind) {
  case W_TENSORS: {
    size_t n = w->parts->u.seq.n;
    fs_value *t = fsV_tuple(n), *k = fsV_int(i);
    for (size_t j = 0; t && k && j < n; j++) {
      fs_value *x = fsV_index(E, w->parts->u.seq.items[j], k);
      if (!x) {
        fsV_release(t);
        t = NULL;
        break;
      }
      fsV_seq_set(t, j, x);
    }
    fsV_release(k);
    return t;
  }
  case W_SUBSET: return ds_item(E, w->parts, w->indices->u.seq.items[i]->u.i);
  case W_CONCAT: {
    size_t d = 0; /* bisect_right(cumulative_sizes, i) */
    while (w->cum[d] <= i) d++;
    return ds_item(E, w->parts->u.seq.items[d], d ? i - w->cum[d - 1] : i);
  }
  }
  return NULL;
}

#define WRAP_CLASS(n) {.name = n, .index = wrap_index, .len = wrap_len, .free = wrapv_free}
static const fsV_class wrap_classes[] = {WRAP_CLASS("TensorDataset"), WRAP_CLASS("Subset"), WRAP_CLASS("ConcatDataset")};

static wrapv *wrap_of(const fs_value *v, wrap_kind k) { return fsV_objdata(v, &wrap_classes[k]); }

static fs_value *wrap_new(wrap_kind kind, fs_value *parts, fs_value *indices, int64_t len, int64_t *cum) {
  wrapv *w = calloc(1, sizeof *w);
  if (!w) {
    free(cum);
    return fsE_err_own(NULL);
  }
  *w = (wrapv){kind, fsV_retain(parts), indices ? fsV_retain(indices) : NULL, cum, len};
  return fsV_obj(&wrap_classes[kind], w);
}

/* slots: *tensors */
NATIVE(d_tensor_dataset) {
  fs_value *ts = s[0];
  int64_t n = 0;
  for (size_t j = 0; j < ts->u.seq.n; j++) {
    fs_tensor *t = fsE_need_tensor(ts->u.seq.items[j], "TensorDataset", "tensors");
    if (!t) return NULL;
    if (t->rank == 0) {
      fsV_seterr("TensorDataset(): tensor %zu is a scalar (0-d); items are taken along dimension 0", j);
      return NULL;
    }
    if (j && t->shape[0] != n) {
      fsV_seterr("Size mismatch between tensors");
      return NULL;
    }
    n = t->shape[0];
  }
  return wrap_new(W_TENSORS, ts, NULL, n, NULL);
}

fs_value *fsE_subset(fsE_ctx *E, fs_value *dataset, fs_value *indices) {
  int64_t n = ds_len(E, dataset);
  if (n < 0) return NULL;
  if (indices->type != FSV_LIST && indices->type != FSV_TUPLE) {
    fsV_seterr("Subset(): indices must be a list of integers, not %s", fsV_type_name(indices));
    return NULL;
  }
  fs_value *list = fsV_list(indices->u.seq.n);
  for (size_t k = 0; list && k < indices->u.seq.n; k++) {
    fs_value *x = indices->u.seq.items[k];
    int64_t i;
    if (item_index(x, n, &i) < 0 || fsV_list_append(list, fsV_int(i)) < 0) {
      fsV_release(list);
      return NULL;
    }
  }
  if (!list) return fsE_err_own(NULL);
  fs_value *v = wrap_new(W_SUBSET, dataset, list, (int64_t)list->u.seq.n, NULL);
  fsV_release(list);
  return v;
}

NATIVE(d_subset) { return fsE_subset(E, s[0], s[1]); }

NATIVE(d_concat) {
  fs_value *ds = s[0];
  if (ds->type != FSV_LIST && ds->type != FSV_TUPLE) {
    fsV_seterr("ConcatDataset(): datasets must be a list of data sets, not %s", fsV_type_name(ds));
    return NULL;
  }
  if (ds->u.seq.n == 0) {
    fsV_seterr("datasets should not be an empty iterable");
    return NULL;
  }
  int64_t *cum = malloc(ds->u.seq.n * sizeof *cum), total = 0;
  if (!cum) return fsE_err_own(NULL);
  for (size_t k = 0; k < ds->u.seq.n; k++) {
    int64_t n = ds_len(E, ds->u.seq.items[k]);
    if (n < 0) {
      free(cum);
      return NULL;
    }
    cum[k] = total += n;
  }
  fs_value *list = fsV_list(ds->u.seq.n);
  for (size_t k = 0; list && k < ds->u.seq.n; k++)
    if (fsV_list_append(list, fsV_retain(ds->u.seq.items[k])) < 0) list = NULL;
  if (!list) {
    free(cum);
    return fsE_err_own(NULL);
  }
  fs_value *v = wrap_new(W_CONCAT, list, NULL, total, cum);
  fsV_release(list);
  return v;
}

NATIVE(d_tensors) { return fsV_retain(wrap_of(self, W_TENSORS)->parts); }
NATIVE(d_subset_dataset) { return fsV_retain(wrap_of(self, W_SUBSET)->parts); }
NATIVE(d_subset_indices) { return fsV_retain(wrap_of(self, W_SUBSET)->indices); }
NATIVE(d_concat_datasets) { return fsV_retain(wrap_of(self, W_CONCAT)->parts); }
NATIVE(d_concat_sizes) {
  wrapv *w = wrap_of(self, W_CONCAT);
  fs_value *l = fsV_list(w->parts->u.seq.n);
  for (size_t k = 0; l && k < w->parts->u.seq.n; k++)
    if (fsV_list_append(l, fsV_int(w->cum[k])) < 0) l = NULL;
  return l ? l : fsE_err_own(NULL);
}

/* The runtime data set under ds and Subsets of it: its dsv and, through the
 * Subsets, ds's index -> its index (*map NULL: the identity). NULL: none. */
static dsv *native_of(fs_value *ds, size_t **map, size_t *n, int *oom) {
  dsv *d = fsV_objdata(ds, &dataset_class);
  *map = NULL;
  *n = 0;
  if (d) return d;
  wrapv *w = wrap_of(ds, W_SUBSET);
  if (!w || !(d = native_of(w->parts, map, n, oom))) return NULL;
  size_t m = w->indices->u.seq.n, *out = malloc((m ? m : 1) * sizeof *out);
  if (!out) {
    free(*map);
    *oom = 1;
    return NULL;
  }
  for (size_t k = 0; k < m; k++) {
    size_t i = (size_t)w->indices->u.seq.items[k]->u.i;
    out[k] = *map ? (*map)[i] : i;
  }
  free(*map);
  *map = out;
  *n = m;
  return d;
}

/* ---- default_collate ----------------------------------------------------------------------- */

static fs_value *collate(fsE_ctx *E, fs_value **items, size_t n, int depth);

/* torch.stack of the items' tensors on the first one's device. */
static fs_value *stack(fs_value **items, size_t n) {
  fs_tensor *t0 = TENSOR(items[0]);
  for (size_t k = 1; k < n; k++) {
    fs_tensor *t = fsE_as_tensor(items[k]);
    char a[96], b[96];
    if (!t) {
      fsV_seterr("default_collate: item %zu is %s where item 0 is a Tensor", k, fsV_type_name(items[k]));
      return NULL;
    }
    if (!fsT_same_shape(t, t0)) {
      fsV_seterr("stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry %zu",
                 fsT_shape_str(t0, a, sizeof a), fsT_shape_str(t, b, sizeof b), k);
      return NULL;
    }
    if (t->dtype != t0->dtype) {
      fsV_seterr("default_collate: item %zu is %s where item 0 is %s", k, fsT_dtype_name(t->dtype),
                 fsT_dtype_name(t0->dtype));
      return NULL;
    }
  }
  int64_t shape[FS_MAX_RANK];
  if (t0->rank + 1 > FS_MAX_RANK) {
    fsV_seterr("default_collate: items of %d dimensions cannot be stacked (at most %d)", t0->rank, FS_MAX_RANK - 1);
    return NULL;
  }
  shape[0] = (int64_t)n;
  memcpy(shape + 1, t0->shape, sizeof(int64_t) * (size_t)t0->rank);
  fs_tensor *out = fsT_new(t0->dtype, t0->device, t0->rank + 1, shape);
  size_t bytes = fsT_nbytes(t0);
  for (size_t k = 0; out && k < n; k++) {
    fs_tensor *t = TENSOR(items[k]);
    if (fsB_transfer(out->device, (char *)out->data + k * bytes, t->device, t->data, bytes) < 0) {
      fsT_release(out);
      out = NULL;
    }
  }
  return fsE_tensor_value(out);
}

/* ints -> int64, floats -> float32 (the runtime has no float64), bools -> int64 */
static fs_value *numbers(fs_value **items, size_t n) {
  bool fl = items[0]->type == FSV_FLOAT;
  fs_tensor *t = fsT_new(fl ? FS_F32 : FS_I64, FS_DEV_CPU, 1, (int64_t[]){(int64_t)n});
  if (!t) return fsE_rt_fail();
  for (size_t k = 0; k < n; k++) {
    fs_value *x = items[k];
    if (!fsV_is_number(x) || (fl != (x->type == FSV_FLOAT))) {
      fsT_release(t);
      fsV_seterr("default_collate: item %zu is %s where item 0 is %s", k, fsV_type_name(x), fsV_type_name(items[0]));
      return NULL;
    }
    if (fl) ((float *)t->data)[k] = (float)x->u.f;
    else ((int64_t *)t->data)[k] = fsE_ival(x);
  }
  return fsE_tensor_value(t);
}

/* Position j (or key) of every item, collated. */
static fs_value *column(fsE_ctx *E, fs_value **items, size_t n, size_t j, const fs_value *key, int depth) {
  fs_value **col = malloc(n * sizeof *col);
  if (!col) return fsE_err_own(NULL);
  for (size_t k = 0; k < n; k++) {
    col[k] = key ? fsV_dict_get(items[k], key) : items[k]->u.seq.items[j];
    if (!col[k]) {
      char *r = fsV_repr(key);
      fsV_seterr("default_collate: item %zu has no key %s", k, r ? r : "?");
      free(r);
      free(col);
      return NULL;
    }
  }
  fs_value *r = collate(E, col, n, depth + 1);
  free(col);
  return r;
}

static fs_value *collate(fsE_ctx *E, fs_value **items, size_t n, int depth) {
  fs_value *e = items[0];
  if (depth > 32) {
    fsV_seterr("default_collate: items nested more than 32 deep");
    return NULL;
  }
  if (fsE_as_tensor(e)) return stack(items, n);
  switch (e->type) {
  case FSV_INT: case FSV_BOOL: case FSV_FLOAT: return numbers(items, n);
  case FSV_STR: {
    fs_value *l = fsV_list(n);
    for (size_t k = 0; l && k < n; k++)
      if (fsV_list_append(l, fsV_retain(items[k])) < 0) l = NULL;
    return l ? l : fsE_err_own(NULL);
  }
  case FSV_DICT: {
    fs_value *d = fsV_dict();
    for (size_t j = 0; d && j < e->u.dict.n; j++) {
      for (size_t k = 1; k < n; k++)
        if (items[k]->type != FSV_DICT) {
          fsV_seterr("default_collate: item %zu is %s where item 0 is a dict", k, fsV_type_name(items[k]));
          fsV_release(d);
          return NULL;
        }
      fs_value *c = column(E, items, n, 0, e->u.dict.keys[j], depth);
      if (!c || fsV_dict_set(d, e->u.dict.keys[j], c) < 0) {
        fsV_release(d);
        return NULL;
      }
    }
    return d ? d : fsE_err_own(NULL);
  }
  case FSV_LIST: case FSV_TUPLE: { /* torch: a list of the collated positions */
    for (size_t k = 1; k < n; k++)
      if ((items[k]->type != FSV_LIST && items[k]->type != FSV_TUPLE) || items[k]->u.seq.n != e->u.seq.n) {
        fsV_seterr("each element in list of batch should be of equal size");
        return NULL;
      }
    fs_value *l = fsV_list(e->u.seq.n);
    for (size_t j = 0; l && j < e->u.seq.n; j++) {
      fs_value *c = column(E, items, n, j, NULL, depth);
      if (!c || fsV_list_append(l, c) < 0) {
        fsV_release(l);
        return NULL;
      }
    }
    return l ? l : fsE_err_own(NULL);
  }
  default:
    fsV_seterr("default_collate: batch must contain tensors, numbers, dicts or lists; found %s",
               fsV_type_name(e));
    return NULL;
  }
}

/* ---- DataLoader -------------------------------------------------------------------------- */

static const fsV_class loader_iter_class;

static void loaderv_free(void *p) {
  loaderv *lv = p;
  fsPG_free(lv->pg);
  fsDL_free(&lv->L);
  fsV_release(lv->dataset);
  fsV_release(lv->sampler);
  fsV_release(lv->batch_sampler);
  fsV_release(lv->collate_fn);
  fsV_release(lv->generator);
  free(lv->map);
  free(lv);
}

/* slots of the DataLoader row (torch 1.13's order) */
enum { A_DATASET, A_BATCH_SIZE, A_SHUFFLE, A_SAMPLER, A_BATCH_SAMPLER, A_WORKERS, A_COLLATE,
       A_PIN, A_DROP_LAST, A_TIMEOUT, A_INIT_FN, A_MP_CONTEXT, A_GENERATOR, A_PREFETCH,
       A_PERSISTENT, A_PIN_DEVICE };

/* torch's argument checks, in torch's order, with its words. */
static int loader_args(fs_value **s) {
  int64_t workers = s[A_WORKERS]->u.i;
  bool has_sampler = s[A_SAMPLER]->type != FSV_NONE, shuffle = fsV_truthy(s[A_SHUFFLE]);
  const char *msg = NULL;
  if (workers < 0)
    msg = "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.";
  else if ((s[A_TIMEOUT]->type == FSV_FLOAT ? s[A_TIMEOUT]->u.f : (double)fsE_ival(s[A_TIMEOUT])) < 0)
    msg = "timeout option should be non-negative";
  else if (workers == 0 && s[A_PREFETCH]->type == FSV_INT && s[A_PREFETCH]->u.i != 2)
    msg = "prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 to enable multiprocessing.";
  else if (s[A_PREFETCH]->type == FSV_INT && s[A_PREFETCH]->u.i <= 0)
    msg = "AssertionError: prefetch_factor must be positive";
  else if (fsV_truthy(s[A_PERSISTENT]) && workers == 0)
    msg = "persistent_workers option needs num_workers > 0";
  else if (has_sampler && shuffle)
    msg = "sampler option is mutually exclusive with shuffle";
  else if (s[A_BATCH_SAMPLER]->type != FSV_NONE &&
           (s[A_BATCH_SIZE]->type != FSV_INT || s[A_BATCH_SIZE]->u.i != 1 || shuffle || has_sampler ||
            fsV_truthy(s[A_DROP_LAST])))
    msg = "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last";
  else if (s[A_BATCH_SIZE]->type == FSV_NONE && fsV_truthy(s[A_DROP_LAST]))
    msg = "batch_size=None option disables auto-batching and is mutually exclusive with drop_last";
  else if (s[A_BATCH_SIZE]->type == FSV_INT && s[A_BATCH_SIZE]->u.i <= 0 && s[A_BATCH_SAMPLER]->type == FSV_NONE) {
    fsV_seterr("batch_size should be a positive integer value, but got batch_size=%lld", (long long)s[A_BATCH_SIZE]->u.i);
    return -1;
  } else if (s[A_MP_CONTEXT]->type != FSV_NONE && workers == 0) {
    fsV_seterr("multiprocessing_context can only be used with multi-process loading (num_workers > 0), "
               "but got num_workers=0");
    return -1;
  } else if (s[A_INIT_FN]->type != FSV_NONE)
    msg = "DataLoader: worker_init_fn is not supported: the workers are threads of this process, "
          "whose random state needs no per-worker seeding";
  else if (s[A_GENERATOR]->type != FSV_NONE && !fsV_objdata(s[A_GENERATOR], &fsE_generator_class)) {
    fsV_seterr("DataLoader(): generator must be a torch.Generator, not %s", fsV_type_name(s[A_GENERATOR]));
    return -1;
  }
  if (msg) fsV_seterr("%s", msg);
  return msg ? -1 : 0;
}

/* raisesA: a batch sampler Fabric cannot put a distributed sampler into
 * (R77, fsF_loader.foreign_batch_sampler): not a BatchSampler, and without
 * the `batch_size` and `drop_last` that would let Fabric build a new one. */
static bool has_attr(fsE_ctx *E, fs_value *v, const char *name) {
  fs_value *out = NULL;
  int r = fsE_instance_getattr(E, v, name, &out);
  if (r == 1) fsV_release(out);
  return r == 1;
}

static bool foreign_batch_sampler(fsE_ctx *E, fs_value *v) {
  fs_value *inner;
  int64_t bs;
  bool drop;
  if (fsE_batch_sampler_parts(v, &inner, &bs, &drop)) return false;
  return !(has_attr(E, v, "batch_size") && has_attr(E, v, "drop_last"));
}

NATIVE(d_loader) {
  if (loader_args(s) < 0) return NULL;
  fs_value *ds = s[A_DATASET];
  int64_t n = ds_len(E, ds);
  if (n < 0) return NULL;
  loaderv *lv = calloc(1, sizeof *lv);
  char *err = NULL;
  if (!lv) return fsE_err_own(NULL);
  lv->auto_batch = s[A_BATCH_SIZE]->type == FSV_INT || s[A_BATCH_SAMPLER]->type != FSV_NONE;
  int64_t bs = s[A_BATCH_SIZE]->type == FSV_INT ? s[A_BATCH_SIZE]->u.i : 1;
  bool shuffle = fsV_truthy(s[A_SHUFFLE]), drop = fsV_truthy(s[A_DROP_LAST]);
  int oom = 0;
  dsv *d = s[A_COLLATE]->type == FSV_NONE && lv->auto_batch ? native_of(ds, &lv->map, &lv->nmap, &oom) : NULL;
  int rc = oom ? fsIO_fail(&err, "DataLoader: out of memory")
         : d ? fsDL_init(&lv->L, &d->ds, bs, shuffle, drop, E->seed, &err)
             : fsDL_init_order(&lv->L, (size_t)n, bs, shuffle, drop, E->seed, &err);
  lv->native = d != NULL;
  if (rc == 0 && lv->map) /* a Subset's items in place of the data set's */
    rc = fsDL_set_samples(&lv->L, lv->map, lv->nmap, NULL, 0, &err);
  lv->num_workers = (int)s[A_WORKERS]->u.i;
  lv->prefetch = s[A_PREFETCH]->type == FSV_INT ? (int)s[A_PREFETCH]->u.i : 2;
  if (rc == 0 && d) rc = fsDL_workers(&lv->L, lv->num_workers, lv->prefetch, &err);
  if (rc < 0) {
    fsDL_free(&lv->L);
    free(lv->map);
    free(lv);
    return fsE_err_own(err);
  }
  lv->dataset = fsV_retain(ds);
#define HOLD(slot) (s[slot]->type == FSV_NONE ? NULL : fsV_retain(s[slot]))
  lv->sampler = HOLD(A_SAMPLER);
  lv->batch_sampler = HOLD(A_BATCH_SAMPLER);
  lv->collate_fn = HOLD(A_COLLATE);
  lv->generator = HOLD(A_GENERATOR);
#undef HOLD
  lv->batch_size = lv->auto_batch && s[A_BATCH_SAMPLER]->type == FSV_NONE ? bs : -1;
  if (lv->generator) lv->L.gen = &((genv *)lv->generator->u.obj.data)->mt;
  lv->st.is_dataloader = 1;
  lv->st.foreign_batch_sampler = lv->batch_sampler && foreign_batch_sampler(E, lv->batch_sampler);
  lv->dev = FS_DEV_CPU;
  return fsV_obj(&fsE_loader_class, lv);
}

/* len(loader): batches of the sampler's pass (this rank's part once distributed). */
static int64_t loader_len(fsE_ctx *E, fs_value *v) {
  loaderv *lv = v->u.obj.data;
  if (lv->batch_sampler) return fsV_len(E, lv->batch_sampler);
  if (!lv->sampler) return (int64_t)(lv->auto_batch ? fsDL_len(&lv->L) : lv->L.num_samples);
  int64_t m = fsV_len(E, lv->sampler), w = lv->L.world;
  if (m < 0) return -1;
  int64_t num = lv->L.dist_drop_last ? m / w : (m + w - 1) / w, b = (int64_t)lv->L.batch_size;
  return !lv->auto_batch ? num : lv->L.drop_last ? num / b : (num + b - 1) / b;
}

/* A sampler's pass as data set indices: through the Subsets' map for the runtime's stacking. */
static void map_through(const loaderv *lv, size_t *a, size_t m) {
  for (size_t k = 0; lv->map && k < m; k++) a[k] = lv->map[a[k]];
}

/* The epoch's sample list from the script's sampler or batch sampler. */
static int pass_samples(fsE_ctx *E, loaderv *lv) {
  size_t *a = NULL, m = 0, *ends = NULL, nb = 0;
  size_t n = lv->map ? lv->nmap : (size_t)ds_len(E, lv->dataset);
  char *err = NULL;
  int rc = lv->batch_sampler ? fsE_batch_list(E, lv->batch_sampler, n, &a, &m, &ends, &nb)
                             : fsE_sampler_list(E, lv->sampler, n, &a, &m);
  if (rc == 0) {
    map_through(lv, a, m);
    if (fsDL_set_samples(&lv->L, a, m, lv->batch_sampler ? ends : NULL, nb, &err) < 0) {
      fsE_err_own(err);
      rc = -1;
    }
  }
  free(a);
  free(ends);
  return rc;
}

/* Fabric's rebuild of a batch sampler that is not torch's but has
 * batch_size and drop_last (others are R77, refused before):
 * `type(bs)(DistributedSampler(dataset, num_replicas, rank, shuffle=False,
 * seed), batch_size=bs.batch_size, drop_last=bs.drop_last)`
 * (utilities/data.py:205; the loader's sampler is a SequentialSampler, so
 * no shuffling). The new batch sampler draws this rank's share itself. 0,
 * -2 when the call failed with "__init__() got multiple values" (Fabric's
 * own TypeError, R77's text: the caller reports it), else -1 + fsV_error
 * (re-raised as it is, as Fabric does). */
static int rebuild_batch_sampler(fsE_ctx *E, loaderv *lv, int rank, int world, uint64_t seed) {
  fs_value *cls = fsE_getattr(E, lv->batch_sampler, "__class__");
  fs_value *ds_cls = cls ? fsE_builtin(E, "DistributedSampler") : NULL;
  fs_value *kw[4] = {fsV_int(world), fsV_int(rank), fsV_bool(false), fsV_int((int64_t)seed)};
  static const char *const ds_names[] = {"num_replicas", "rank", "shuffle", "seed"};
  fs_value *sampler = NULL, *rebuilt = NULL, *pos[1] = {NULL}, *bkw[2] = {NULL, NULL};
  if (ds_cls && kw[0] && kw[1] && kw[2] && kw[3])
    sampler = fsE_call(E, ds_cls, &(fsV_args){&lv->dataset, 1, ds_names, kw, 4, {0, 0}});
  if (sampler && (bkw[0] = fsE_getattr(E, lv->batch_sampler, "batch_size")) &&
      (bkw[1] = fsE_getattr(E, lv->batch_sampler, "drop_last"))) {
    static const char *const names[] = {"batch_size", "drop_last"};
    pos[0] = sampler;
    rebuilt = fsE_call(E, cls, &(fsV_args){pos, 1, names, bkw, 2, {0, 0}});
  }
  int rc = 0;
  if (!rebuilt) { /* re.match(r".*__init__\(\) (got multiple values)|...", str(ex)) */
    const char *msg = fsV_error(), *at = strstr(msg, "__init__() got multiple values");
    rc = at && !memchr(msg, '\n', (size_t)(at - msg)) ? -2 : -1;
  } else {
    fsV_release(lv->batch_sampler);
    lv->batch_sampler = rebuilt;
  }
  fsV_release(cls);
  fsV_release(ds_cls);
  for (int i = 0; i < 4; i++) fsV_release(kw[i]);
  fsV_release(sampler);
  fsV_release(bkw[0]);
  fsV_release(bkw[1]);
  return rc;
}

int fsE_loader_distribute(fsE_ctx *E, loaderv *lv, int rank, int world, uint64_t seed) {
  char *err = NULL;
  if (lv->batch_sampler) {
    fs_value *inner;
    int64_t bs;
    bool drop;
    if (!fsE_batch_sampler_parts(lv->batch_sampler, &inner, &bs, &drop))
      return rebuild_batch_sampler(E, lv, rank, world, seed);
    fsV_release(lv->sampler);
    lv->sampler = fsV_retain(inner);
    fsV_release(lv->batch_sampler);
    lv->batch_sampler = NULL;
    lv->batch_size = bs;
    if (fsDL_rebatch(&lv->L, bs, drop, &err) < 0) {
      fsE_err_own(err);
      return -1;
    }
  }
  /* Fabric: DistributedSampler(dataset, shuffle=isinstance(sampler, RandomSampler)) in place of
   * a RandomSampler or SequentialSampler, else DistributedSamplerWrapper(sampler, shuffle=False) */
  bool shuffle = lv->sampler ? fsE_is_sampler(lv->sampler, 1) : lv->L.shuffle;
  if (lv->sampler && (fsE_is_sampler(lv->sampler, 0) || fsE_is_sampler(lv->sampler, 1))) {
    fsV_release(lv->sampler);
    lv->sampler = NULL;
    if (fsDL_set_samples(&lv->L, lv->map, lv->nmap, NULL, 0, &err) < 0) {
      fsE_err_own(err);
      return -1;
    }
  }
  if (fsDL_distribute(&lv->L, rank, world, shuffle, seed, false, &err) < 0) {
    fsE_err_own(err);
    return -1;
  }
  return 0;
}

/* One pass at a time: the iterator holds the loader, whose batch buffers it fills. */

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
  if ((lv->sampler || lv->batch_sampler) && pass_samples(E, lv) < 0) return NULL;
  int64_t len = lv->auto_batch ? (int64_t)fsDL_len(&lv->L) : (int64_t)lv->L.num_samples;
  bool empty = len == 0; /* zero batches: zero steps, no progress lines */
  if (!empty && !lv->pg && !E->progress && E->opt->progress && fsE_current_rank(E) == 0) {
    int tty = isatty(fileno(E->opt->progress));
    if ((lv->pg = fsPG_new(E->opt->progress, tty, len, 0)))
      fsPG_set_interval(lv->pg, E->opt->progress_interval);
  }
  if (!empty && lv->pg && !E->progress) {
    /* the enclosing range loop's round as the epoch; a pass under no_grad validates */
    fsPG_set_pass(lv->pg, E->loop_rounds > 0 ? (int)E->loop_round + 1 : 0, (int)E->loop_rounds,
                  !fsG_grad_enabled());
    fsPG_epoch_begin(lv->pg);
    E->progress = lv->pg;
    lv->active = &E->progress;
    lv->done = 0;
    E->last_loss = NAN; /* a pass without backward shows no loss */
  }
  return fsV_obj(&loader_iter_class, fsV_retain(v));
}

/* The runtime's batch as [x, y] on the loader's device. */
static fs_value *native_batch(loaderv *lv) {
  fsDL_batch *bx = &lv->L.x, *by = &lv->L.y;
  fs_tensor *x = fsT_new(bx->dtype, lv->dev, bx->ndim, bx->shape);
  fs_tensor *y = x ? fsT_new(by->dtype, lv->dev, by->ndim, by->shape) : NULL;
  if (!y || fsB_transfer(lv->dev, x->data, FS_DEV_CPU, bx->data, fsT_nbytes(x)) < 0 ||
      fsB_transfer(lv->dev, y->data, FS_DEV_CPU, by->data, fsT_nbytes(y)) < 0) {
    fsT_release(x);
    fsT_release(y);
    return fsE_rt_fail();
  }
  fs_value *l = fsV_list(2), *vx = fsE_tensor_value(x), *vy = fsE_tensor_value(y);
  if (!l || !vx || !vy) {
    fsV_release(l);
    fsV_release(vx);
    fsV_release(vy);
    return fsE_err_own(NULL);
  }
  fsV_list_append(l, vx);
  fsV_list_append(l, vy);
  return l;
}

/* The items of positions [first, first + count), collated. */
static fs_value *fetched_batch(fsE_ctx *E, loaderv *lv, size_t first, size_t count) {
  fs_value **items = calloc(count ? count : 1, sizeof *items), *r = NULL;
  size_t got = 0;
  if (!items) return fsE_err_own(NULL);
  for (; got < count; got++)
    if (!(items[got] = ds_item(E, lv->dataset, (int64_t)fsDL_index(&lv->L, first + got)))) break;
  if (got == count) {
    if (!lv->auto_batch) r = fsV_retain(items[0]);
    else if (lv->collate_fn) {
      fs_value *l = fsV_list(count);
      for (size_t k = 0; l && k < count; k++)
        if (fsV_list_append(l, fsV_retain(items[k])) < 0) l = NULL;
      r = l ? fsE_call(E, lv->collate_fn, &(fsV_args){.pos = &l, .npos = 1}) : fsE_err_own(NULL);
      fsV_release(l);
    } else
      r = count ? collate(E, items, count, 0) : fsV_list(0);
  }
  for (size_t k = 0; k < got; k++) fsV_release(items[k]);
  free(items);
  if (r && lv->dev != FS_DEV_CPU) {
    fs_value *m = fsE_to_device(r, lv->dev);
    fsV_release(r);
    r = m;
  }
  return r;
}

static int loader_next(fsE_ctx *E, fs_value *it, fs_value **out) {
  loaderv *lv = ((fs_value *)it->u.obj.data)->u.obj.data;
  if (lv->active && lv->done > 0) fsPG_step(lv->pg, lv->done, E->last_loss);
  if (lv->active) E->last_loss = NAN; /* counted once: a step without backward adds none */
  lv->done++;
  char *err = NULL;
  size_t first, count;
  int rc;
  if (lv->native) {
    rc = fsDL_next(&lv->L, &err);
    if (rc > 0 && !(*out = native_batch(lv))) rc = -1;
    if (rc < 0 && err) fsE_err_own(err);
  } else if (!lv->auto_batch) {
    rc = lv->L.pos < lv->L.num_samples;
    if (rc && !(*out = fetched_batch(E, lv, lv->L.pos++, 1))) rc = -1;
  } else {
    rc = fsDL_next_range(&lv->L, &first, &count);
    if (rc && !(*out = fetched_batch(E, lv, first, count))) rc = -1;
  }
  if (rc == 0) progress_end(lv);
  return rc;
}

static void loader_iter_free(void *p) {
  progress_end(((fs_value *)p)->u.obj.data);
  fsV_release(p);
}

const fsV_class fsE_loader_class = {
  .name = "DataLoader", .iter = loader_iter, .len = loader_len, .free = loaderv_free,
};
static const fsV_class loader_iter_class = {
  .name = "DataLoader_iterator", .next = loader_next, .free = loader_iter_free,
};

#define LV(self) ((loaderv *)(self)->u.obj.data)
NATIVE(dl_dataset) { return fsV_retain(LV(self)->dataset); }
NATIVE(dl_batch_size) { return LV(self)->batch_size < 0 ? fsV_none() : fsV_int(LV(self)->batch_size); }
NATIVE(dl_drop_last) { return fsV_bool(LV(self)->L.drop_last); }
NATIVE(dl_num_workers) { return fsV_int(LV(self)->num_workers); }
NATIVE(dl_batch_sampler) { return LV(self)->batch_sampler ? fsV_retain(LV(self)->batch_sampler) : fsV_none(); }
NATIVE(dl_generator) { return LV(self)->generator ? fsV_retain(LV(self)->generator) : fsV_none(); }

/* raisesD: lightning's suggested_max_num_workers(local_world_size): R89
 * below 1, else max(1, cpus // local_world_size - 1), the CPUs being this
 * machine's online ones (Python counts its affinity mask) */
NATIVE(d_max_num_workers) {
  (void)self;
  fsF_issues iss;
  fsF_issues_init(&iss);
  if (fsE_fabric_issues(E, a, &iss, fsF_check_max_num_workers(s[0]->u.i, &iss)) < 0) return NULL;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t n = (cpus < 1 ? 1 : cpus) / s[0]->u.i - 1;
  return fsV_int(n < 1 ? 1 : n);
}

static const fsE_reg data_funcs[] = {
  {"suggested_max_num_workers", d_max_num_workers},
  {"FashionMNIST", d_fashion}, {"MNIST", d_mnist}, {"TextDataset", d_text},
  {"RandomDataset", d_random}, {"DataLoader", d_loader},
  {"TensorDataset", d_tensor_dataset}, {"Subset", d_subset}, {"ConcatDataset", d_concat},
  {"TensorDataset.tensors", d_tensors}, {"Subset.dataset", d_subset_dataset},
  {"Subset.indices", d_subset_indices}, {"ConcatDataset.datasets", d_concat_datasets},
  {"ConcatDataset.cumulative_sizes", d_concat_sizes},
  {"DataLoader.dataset", dl_dataset}, {"DataLoader.batch_size", dl_batch_size},
  {"DataLoader.drop_last", dl_drop_last}, {"DataLoader.num_workers", dl_num_workers},
  {"DataLoader.batch_sampler", dl_batch_sampler}, {"DataLoader.generator", dl_generator},
  {NULL, NULL},
};
const fsE_lib fsE_lib_data = {"data", data_funcs};
