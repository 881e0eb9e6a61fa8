/* lib_data.c -- data sets and DataLoader values over runtime/io/: a data
 * set's items and a loader's batches as tensors, the progress line a loop over
 * a loader draws, and DistributedSampler semantics once Fabric sets it up. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "autograd.h"
#include "eval_int.h"

/* ---- data sets and loaders ------------------------------------------------------------ */

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

static fs_value *pair(fs_tensor *x, fs_tensor *y) {
  fs_value *vx = fsE_tensor_value(x);
  return fsV_pair(vx, fsE_tensor_value(y));
}

static fs_value *dataset_index(fsE_ctx *E, fs_value *v, fs_value *key) {
  fsS_dataset *ds = &((dsv *)v->u.obj.data)->ds;
  if (key->type != FSV_INT) {
    fsV_seterr("dataset indices must be integers, not %s", fsV_type_name(key));
    return NULL;
  }
  int64_t i = key->u.i < 0 ? key->u.i + (int64_t)ds->len : key->u.i;
  if (i < 0 || i >= (int64_t)ds->len) {
    fsV_seterr("dataset index out of range");
    return NULL;
  }
  void *x = malloc(ds->x.bytes + ds->y.bytes);
  if (!x) {
    fsV_seterr("out of memory");
    return NULL;
  }
  fsS_get(ds, (size_t)i, x, (char *)x + ds->x.bytes);
  fs_tensor *tx = layout_tensor(&ds->x, -1, x), *ty = tx ? layout_tensor(&ds->y, -1, (char *)x + ds->x.bytes) : NULL;
  free(x);
  if (!ty) {
    fsT_release(tx);
    return fsE_rt_fail();
  }
  return pair(tx, ty);
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



static const fsV_class loader_iter_class;

static void loaderv_free(void *p) {
  loaderv *lv = p;
  fsPG_free(lv->pg);
  fsDL_free(&lv->L);
  fsV_release(lv->dataset);
  free(lv);
}

NATIVE(d_loader) {
  dsv *d = fsV_objdata(s[0], &dataset_class);
  if (!d) {
    fsV_seterr("DataLoader(): dataset must be a data set, not %s", fsV_type_name(s[0]));
    return NULL;
  }
  loaderv *lv = calloc(1, sizeof *lv);
  char *err = NULL;
  if (!lv) {
    fsV_seterr("out of memory");
    return NULL;
  }
  if (fsDL_init(&lv->L, &d->ds, fsE_ival(s[1]), fsV_truthy(s[2]), fsV_truthy(s[3]), E->seed, &err) < 0) {
    free(lv);
    return fsE_err_own(err);
  }
  lv->dataset = fsV_retain(s[0]);
  lv->st.is_dataloader = 1;
  lv->dev = FS_DEV_CPU;
  return fsV_obj(&fsE_loader_class, lv);
}

static int64_t loader_len(fsE_ctx *E, fs_value *v) { return (int64_t)fsDL_len(&((loaderv *)v->u.obj.data)->L); }

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
  bool empty = fsDL_len(&lv->L) == 0; /* zero batches: zero steps, no progress lines */
  if (!empty && !lv->pg && !E->progress && E->opt->progress && fsE_current_rank(E) == 0) {
    int tty = isatty(fileno(E->opt->progress));
    if ((lv->pg = fsPG_new(E->opt->progress, tty, (int64_t)fsDL_len(&lv->L), 0)))
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

static int loader_next(fsE_ctx *E, fs_value *it, fs_value **out) {
  loaderv *lv = ((fs_value *)it->u.obj.data)->u.obj.data;
  if (lv->active && lv->done > 0) fsPG_step(lv->pg, lv->done, E->last_loss);
  if (lv->active) E->last_loss = NAN; /* counted once: a step without backward adds none */
  lv->done++;
  if (!fsDL_next(&lv->L)) {
    progress_end(lv);
    return 0;
  }
  fsDL_batch *bx = &lv->L.x, *by = &lv->L.y;
  fs_tensor *x = fsT_new(bx->dtype, lv->dev, bx->ndim, bx->shape);
  fs_tensor *y = x ? fsT_new(by->dtype, lv->dev, by->ndim, by->shape) : NULL;
  if (!y || fsB_transfer(lv->dev, x->data, FS_DEV_CPU, bx->data, fsT_nbytes(x)) < 0 ||
      fsB_transfer(lv->dev, y->data, FS_DEV_CPU, by->data, fsT_nbytes(y)) < 0) {
    fsT_release(x);
    fsT_release(y);
    fsE_rt_fail();
    return -1;
  }
  *out = pair(x, y);
  return *out ? 1 : -1;
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

static const fsE_reg data_funcs[] = {
  {"FashionMNIST", d_fashion}, {"MNIST", d_mnist}, {"TextDataset", d_text},
  {"RandomDataset", d_random}, {"DataLoader", d_loader},
  {NULL, NULL},
};
const fsE_lib fsE_lib_data = {"data", data_funcs};
