/* lib_files.c -- the builtins over runtime/io's file readers: NumPy
 * (load_numpy, NumpyDataset), token files (TokenDataset), CSV (CSVDataset),
 * and ImageFolder with torchvision's transforms. Invariant: a transform value
 * is only a description (fsS_transform rows) that the runtime applies per
 * item, on whatever thread stacks the batch, so nothing here runs during
 * loading. The data set values themselves are lib_data.c's
 * (fsE_dataset_made); the readers are dataset_file.c and dataset_image.c. */
#include <string.h>

#include "eval_int.h"

/* slots: x, y */
NATIVE(d_numpy) {
  fsS_dataset ds;
  char *err = NULL;
  int rc = fsS_numpy(&ds, s[0]->u.str.s, s[1]->u.str.s, &err);
  return fsE_dataset_made(&ds, rc, err);
}

/* slots: path, block_size, dtype, samples */
NATIVE(d_tokens) {
  const char *dt = s[2]->u.str.s;
  int bytes = !strcmp(dt, "uint16") ? 2 : !strcmp(dt, "uint32") ? 4 : 0;
  if (!bytes) {
    fsV_seterr("TokenDataset(): dtype must be 'uint16' or 'uint32', not '%s'", dt);
    return NULL;
  }
  fsS_dataset ds;
  char *err = NULL;
  int rc = fsS_tokens(&ds, s[0]->u.str.s, s[1]->u.i, bytes, s[3]->u.i, E->seed, &err);
  return fsE_dataset_made(&ds, rc, err);
}

/* slots: path, target */
NATIVE(d_csv) {
  fsS_dataset ds;
  char *err = NULL;
  int rc = fsS_csv(&ds, s[0]->u.str.s, s[1]->u.i, &err);
  return fsE_dataset_made(&ds, rc, err);
}

static fs_value *array_tensor(const fsS_array *a) {
  fs_tensor *t = fsT_new(fsS_elem_dtype(a->code), FS_DEV_CPU, a->ndim, a->shape);
  if (!t) return fsE_rt_fail();
  fsS_convert(a->code, a->data, (size_t)a->numel, t->data);
  return fsE_tensor_value(t);
}

/* load_numpy(path): an .npy file's array as a tensor, an .npz file's as a dict */
NATIVE(d_load_numpy) {
  const char *path = s[0]->u.str.s;
  size_t n = strlen(path);
  char *err = NULL;
  if (n > 4 && !strcmp(path + n - 4, ".npz")) {
    fsS_npz z;
    if (fsS_npz_open(path, &z, &err) != 0) return fsE_err_own(err);
    fs_value *d = fsV_dict();
    for (size_t k = 0; d && k < z.n; k++) {
      fs_value *key = fsV_cstr(z.names[k]), *t = key ? array_tensor(&z.arrays[k]) : NULL;
      if (!t || fsV_dict_set(d, key, t) < 0) {
        fsV_release(d);
        d = NULL;
      }
      fsV_release(key);
    }
    fsS_npz_free(&z);
    return d ? d : fsV_error()[0] ? NULL : fsE_err_own(NULL);
  }
  fsS_array arr;
  if (fsS_npy_open(&arr, path, &err) != 0) return fsE_err_own(err);
  fs_value *v = array_tensor(&arr);
  fsS_array_free(&arr);
  return v;
}

/* ---- torchvision.transforms and ImageFolder ---------------------------------------------------- */

typedef struct tfv { fsS_transform *t; size_t n; } tfv;
static void tfv_free(void *p) {
  free(((tfv *)p)->t);
  free(p);
}
static const fsV_class transform_class = {.name = "Transform", .free = tfv_free};

static fs_value *transform_value(const fsS_transform *t, size_t n) {
  tfv *v = calloc(1, sizeof *v);
  if (v && !(v->t = malloc((n + 1) * sizeof *t))) {
    free(v);
    v = NULL;
  }
  if (!v) return fsE_err_own(NULL);
  memcpy(v->t, t, n * sizeof *t);
  v->n = n;
  return fsV_obj(&transform_class, v);
}

/* size: an int (Resize: the shorter side) or (h, w) */
static int size_arg(const fs_value *v, const char *fn, int64_t *h, int64_t *w, bool one_is_square) {
  if (v->type == FSV_INT) {
    *h = v->u.i;
    *w = one_is_square ? v->u.i : -1;
  } else if ((v->type == FSV_LIST || v->type == FSV_TUPLE) && v->u.seq.n == 2 &&
             v->u.seq.items[0]->type == FSV_INT && v->u.seq.items[1]->type == FSV_INT) {
    *h = v->u.seq.items[0]->u.i;
    *w = v->u.seq.items[1]->u.i;
  } else if ((v->type == FSV_LIST || v->type == FSV_TUPLE) && v->u.seq.n == 1 && v->u.seq.items[0]->type == FSV_INT) {
    *h = *w = v->u.seq.items[0]->u.i;
  } else {
    fsV_seterr("%s(): size must be an int or a (h, w) pair of ints, not %s", fn, fsV_type_name(v));
    return -1;
  }
  if (*h < 1 || (*w < 1 && *w != -1)) {
    fsV_seterr("%s(): size must be positive", fn);
    return -1;
  }
  return 0;
}

NATIVE(t_resize) {
  fsS_transform t = {.kind = FSS_TF_RESIZE};
  return size_arg(s[0], "Resize", &t.h, &t.w, false) < 0 ? NULL : transform_value(&t, 1);
}
NATIVE(t_center_crop) {
  fsS_transform t = {.kind = FSS_TF_CENTER_CROP};
  return size_arg(s[0], "CenterCrop", &t.h, &t.w, true) < 0 ? NULL : transform_value(&t, 1);
}
NATIVE(t_random_crop) {
  fsS_transform t = {.kind = FSS_TF_RANDOM_CROP};
  if (size_arg(s[0], "RandomCrop", &t.h, &t.w, true) < 0) return NULL;
  if (s[1]->type != FSV_NONE && (s[1]->type != FSV_INT || s[1]->u.i < 0)) {
    fsV_seterr("RandomCrop(): padding must be an int >= 0 (the same on every side)");
    return NULL;
  }
  t.padding = s[1]->type == FSV_INT ? s[1]->u.i : 0;
  return transform_value(&t, 1);
}
NATIVE(t_hflip) {
  fsS_transform t = {.kind = FSS_TF_HFLIP, .p = s[0]->type == FSV_FLOAT ? s[0]->u.f : (double)fsE_ival(s[0])};
  return transform_value(&t, 1);
}
NATIVE(t_to_tensor) { return transform_value(&(fsS_transform){.kind = FSS_TF_TO_TENSOR}, 1); }

/* three numbers (or one for every channel) */
static int channels(const fs_value *v, const char *what, float *out) {
  size_t n = v->type == FSV_LIST || v->type == FSV_TUPLE ? v->u.seq.n : 0;
  if (n != 1 && n != 3) {
    fsV_seterr("Normalize(): %s must be a sequence of 1 or 3 numbers (one per channel)", what);
    return -1;
  }
  for (size_t c = 0; c < 3; c++) {
    const fs_value *x = v->u.seq.items[n == 1 ? 0 : c];
    if (!fsV_is_number(x)) {
      fsV_seterr("Normalize(): %s must hold numbers, not %s", what, fsV_type_name(x));
      return -1;
    }
    out[c] = (float)(x->type == FSV_FLOAT ? x->u.f : (double)fsE_ival(x));
  }
  return 0;
}

NATIVE(t_normalize) {
  fsS_transform t = {.kind = FSS_TF_NORMALIZE};
  if (channels(s[0], "mean", t.mean) < 0 || channels(s[1], "std", t.std) < 0) return NULL;
  for (int c = 0; c < 3; c++)
    if (t.std[c] == 0) {
      fsV_seterr("std evaluated to zero after conversion to float32, leading to division by zero.");
      return NULL;
    }
  return transform_value(&t, 1);
}

NATIVE(t_compose) {
  fs_value *l = s[0];
  if (l->type != FSV_LIST && l->type != FSV_TUPLE) {
    fsV_seterr("Compose(): transforms must be a list of transforms, not %s", fsV_type_name(l));
    return NULL;
  }
  size_t n = 0;
  for (size_t k = 0; k < l->u.seq.n; k++) {
    tfv *t = fsV_objdata(l->u.seq.items[k], &transform_class);
    if (!t) {
      fsV_seterr("Compose(): transform %zu is %s; only torchvision's transforms (Resize, CenterCrop, "
                 "RandomCrop, RandomHorizontalFlip, ToTensor, Normalize, Compose) run on the decoder's images",
                 k, fsV_type_name(l->u.seq.items[k]));
      return NULL;
    }
    n += t->n;
  }
  fsS_transform *all = malloc((n + 1) * sizeof *all);
  if (!all) return fsE_err_own(NULL);
  n = 0;
  for (size_t k = 0; k < l->u.seq.n; k++) {
    tfv *t = l->u.seq.items[k]->u.obj.data;
    memcpy(all + n, t->t, t->n * sizeof *all);
    n += t->n;
  }
  fs_value *v = transform_value(all, n);
  free(all);
  return v;
}

/* slots: root, transform, target_transform, loader, is_valid_file */
NATIVE(d_imagefolder) {
  tfv *t = s[1]->type == FSV_NONE ? NULL : fsV_objdata(s[1], &transform_class);
  if (s[1]->type != FSV_NONE && !t) {
    fsV_seterr("ImageFolder(): transform must be torchvision transforms (Compose([...]) of Resize, CenterCrop, "
               "RandomCrop, RandomHorizontalFlip, ToTensor, Normalize), not %s", fsV_type_name(s[1]));
    return NULL;
  }
  for (int k = 2; k <= 4; k++)
    if (s[k]->type != FSV_NONE) {
      fsV_seterr("ImageFolder(): %s is not supported (the images are decoded by libpng and libjpeg-turbo)",
                 k == 2 ? "target_transform" : k == 3 ? "loader" : "is_valid_file");
      return NULL;
    }
  fsS_dataset ds;
  char *err = NULL;
  int rc = fsS_imagefolder(&ds, s[0]->u.str.s, t ? t->t : NULL, t ? t->n : 0, &err);
  return fsE_dataset_made(&ds, rc, err);
}

static fsS_dataset *images_of(fs_value *self) {
  fsS_dataset *ds = fsE_dataset_of(self);
  if (!ds || ds->kind != FSS_IMAGES) {
    fsV_seterr("'Dataset' object has no attribute 'classes' (only ImageFolder has)");
    return NULL;
  }
  return ds;
}

NATIVE(d_classes) {
  fsS_dataset *ds = images_of(self);
  fs_value *l = ds ? fsV_list(ds->nclasses) : NULL;
  for (size_t c = 0; l && c < ds->nclasses; c++)
    if (fsV_list_append(l, fsV_cstr(ds->classes_names[c])) < 0) l = NULL;
  return l ? l : ds ? fsE_err_own(NULL) : NULL;
}

NATIVE(d_targets) {
  fsS_dataset *ds = images_of(self);
  fs_value *l = ds ? fsV_list(ds->len) : NULL;
  for (size_t i = 0; l && i < ds->len; i++)
    if (fsV_list_append(l, fsV_int(ds->targets[i])) < 0) l = NULL;
  return l ? l : ds ? fsE_err_own(NULL) : NULL;
}

static const fsE_reg files_funcs[] = {
  {"NumpyDataset", d_numpy}, {"TokenDataset", d_tokens}, {"CSVDataset", d_csv}, {"load_numpy", d_load_numpy},
  {"ImageFolder", d_imagefolder}, {"Dataset.classes", d_classes}, {"Dataset.targets", d_targets},
  {"Resize", t_resize}, {"CenterCrop", t_center_crop}, {"RandomCrop", t_random_crop},
  {"RandomHorizontalFlip", t_hflip}, {"ToTensor", t_to_tensor}, {"Normalize", t_normalize},
  {"Compose", t_compose},
  {NULL, NULL},
};
const fsE_lib fsE_lib_files = {"files", files_funcs};
