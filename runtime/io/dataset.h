/* dataset.h -- map-style data sets: a length and item i as (x, y).
 *
 *   MNIST / FashionMNIST  x float32 [1, rows, cols] = byte / 255, y int64 []
 *   TextDataset           x int64 [context] = bytes[i, i+context),
 *                         y int64 [context] = bytes[i+1, i+1+context)
 *   RandomDataset         x float32 shape ~ N(0, 1), y int64 [] in [0, classes)
 *
 * Items are computed on demand into caller buffers (the loader's batch), so
 * an image set keeps only its decompressed bytes. */
#ifndef FS_DATASET_H
#define FS_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "idx.h"
#include "tensor.h"

/* Where Debian's dataset-fashion-mnist package puts the four files. */
#define FSS_FASHION_MNIST_ROOT "/usr/share/datasets/fashion-mnist"

typedef enum fsS_kind { FSS_IDX, FSS_TEXT, FSS_RANDOM, FSS_IMAGES, FSS_NUMPY, FSS_TOKENS, FSS_CSV } fsS_kind;

/* NumPy's element types this reader takes (dataset_file.c). */
typedef enum fsS_elem { FSS_E_NONE, FSS_E_F16, FSS_E_F32, FSS_E_F64, FSS_E_I8, FSS_E_U8, FSS_E_I16, FSS_E_U16,
                        FSS_E_I32, FSS_E_U32, FSS_E_I64, FSS_E_U64, FSS_E_BOOL } fsS_elem;

/* An array in a file: a read-only mapping (or an owned buffer) and where
 * its C-ordered data lies in it. */
typedef struct fsS_array {
  void *map;              /* mmap of the whole file, or NULL */
  size_t maplen;
  uint8_t *own;           /* an .npz member's bytes, or NULL */
  const uint8_t *data;
  fsS_elem code;
  size_t esize;
  int ndim;
  int64_t shape[FS_MAX_RANK - 1];
  uint64_t numel;
} fsS_array;

/* An .npz archive: its arrays under np.load's keys (".npy" dropped). */
typedef struct fsS_npz { char **names; fsS_array *arrays; size_t n; } fsS_npz;

/* torchvision's transforms, applied in order to a decoded RGB image
 * (dataset_image.c). Sizes are (h, w); Resize with w < 0 scales the shorter
 * side to h. Random ones draw from the item's key. */
typedef enum fsS_tkind { FSS_TF_RESIZE, FSS_TF_CENTER_CROP, FSS_TF_RANDOM_CROP, FSS_TF_HFLIP,
                         FSS_TF_TO_TENSOR, FSS_TF_NORMALIZE } fsS_tkind;
typedef struct fsS_transform {
  fsS_tkind kind;
  int64_t h, w;
  int64_t padding; /* RandomCrop: zeros on every side */
  double p;        /* RandomHorizontalFlip */
  float mean[3], std[3];
} fsS_transform;

/* dtype and shape of one item's x or y (a batch prepends the batch size). */
typedef struct fsS_layout {
  fs_dtype dtype;
  int ndim;
  int64_t shape[FS_MAX_RANK - 1];
  size_t bytes; /* of one item */
} fsS_layout;

typedef struct fsS_dataset {
  fsS_kind kind;
  size_t len;
  fsS_layout x, y;
  fsI_array images, labels; /* FSS_IDX */
  uint8_t *text;            /* FSS_TEXT: the file, context = x.shape[0] */
  uint64_t seed;            /* FSS_RANDOM */
  int64_t classes;
  char **paths;             /* FSS_IMAGES: the files, sorted as torchvision sorts them */
  int64_t *targets;         /* their classes */
  char **classes_names;     /* the class folders' names, sorted */
  size_t nclasses;
  fsS_transform *tf;        /* the transforms */
  size_t ntf;
  fsS_array ax, ay;         /* FSS_NUMPY: x and y; FSS_TOKENS: the tokens in ax */
  uint64_t samples;         /* FSS_TOKENS: random windows per epoch, 0: every window in order */
  void *table, *column;     /* FSS_CSV: x rows (float32), y (int64 or float32) */
} fsS_dataset;

/* MNIST-format set in directory root: {train,t10k}-{images-idx3,labels-idx1}-ubyte,
 * plain if that file exists, else with .gz appended. */
int fsS_mnist(fsS_dataset *ds, const char *root, bool train, char **err);
/* len = file size - context; a file of at most context bytes is an error. */
int fsS_text(fsS_dataset *ds, const char *path, int64_t context, char **err);
/* n items of x shape[0..ndim) (ndim < FS_MAX_RANK), classes >= 1. */
int fsS_random(fsS_dataset *ds, int64_t n, int ndim, const int64_t *shape, int64_t classes,
               uint64_t seed, char **err);
/* ImageFolder(root, transform): root/CLASS/.../NAME.png, .jpg or .jpeg; the
 * transforms must include ToTensor (Normalize after it). Items are float32
 * [3, h, w] of the transformed size (the first image's when no transform
 * fixes it; another size is an error naming the file), y int64 [] = class. */
int fsS_imagefolder(fsS_dataset *ds, const char *root, const fsS_transform *tf, size_t ntf, char **err);
/* A PNG or JPEG file's bytes -> RGB bytes (*rgb malloc'd, h*w*3); -1 + *why. */
int fsS_image_decode(const uint8_t *data, size_t n, uint8_t **rgb, int64_t *h, int64_t *w, char **why);
int fsS_image_item(const fsS_dataset *ds, size_t i, uint64_t key, float *x, int64_t *y, char **err);
/* NumpyDataset(x, y): two .npy files, memory-mapped, item i = (x[i], y[i])
 * (floats as float32, integers and bools as int64). */
int fsS_numpy(fsS_dataset *ds, const char *xpath, const char *ypath, char **err);
/* TokenDataset: a token file (raw uint16/uint32 as nanoGPT writes it,
 * token_bytes 2 or 4; or llm.c's .bin with its 256-int header, which says
 * the width), memory-mapped. Item = (tokens[o, o+block), tokens[o+1, o+1+block))
 * as int64: o = i, or with samples > 0 (len = samples) a random offset drawn
 * from the item's key. */
int fsS_tokens(fsS_dataset *ds, const char *path, int64_t block, int token_bytes, int64_t samples,
               uint64_t seed, char **err);
/* CSVDataset: rows of numbers (a non-numeric first line is a header); x =
 * float32 of every column but `target` (negative counts from the end), y =
 * the target, int64 when every value is integral, else float32. */
int fsS_csv(fsS_dataset *ds, const char *path, int64_t target, char **err);
/* One .npy file mapped; an .npz file's arrays read. -1 + *err naming the file. */
int fsS_npy_open(fsS_array *a, const char *path, char **err);
int fsS_npz_open(const char *path, fsS_npz *z, char **err);
void fsS_array_free(fsS_array *a);
void fsS_npz_free(fsS_npz *z);
/* The runtime dtype an element type converts to, and the conversion. */
fs_dtype fsS_elem_dtype(fsS_elem e);
void fsS_convert(fsS_elem e, const void *src, size_t n, void *dst);
void fsS_file_item(const fsS_dataset *ds, size_t i, uint64_t key, void *x, void *y);
void fsS_free(fsS_dataset *ds);

/* Item i < ds->len: x->bytes into x, y->bytes into y. key seeds the item's
 * random transforms (the same key gives the same item). Safe to call from
 * several threads at once. -1 + *err when the item's file cannot be read. */
int fsS_get(const fsS_dataset *ds, size_t i, uint64_t key, void *x, void *y, char **err);

#endif
