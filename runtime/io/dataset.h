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

typedef enum fsS_kind { FSS_IDX, FSS_TEXT, FSS_RANDOM } fsS_kind;

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
} fsS_dataset;

/* MNIST-format set in directory root: {train,t10k}-{images-idx3,labels-idx1}-ubyte,
 * plain if that file exists, else with .gz appended. */
int fsS_mnist(fsS_dataset *ds, const char *root, bool train, char **err);
/* len = file size - context; a file of at most context bytes is an error. */
int fsS_text(fsS_dataset *ds, const char *path, int64_t context, char **err);
/* n items of x shape[0..ndim) (ndim < FS_MAX_RANK), classes >= 1. */
int fsS_random(fsS_dataset *ds, int64_t n, int ndim, const int64_t *shape, int64_t classes,
               uint64_t seed, char **err);
void fsS_free(fsS_dataset *ds);

/* Item i < ds->len: x->bytes into x, y->bytes into y. */
void fsS_get(const fsS_dataset *ds, size_t i, void *x, void *y);

#endif
