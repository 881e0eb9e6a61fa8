/* model_int.h -- what module.c shares with layers.c (one module tree split
 * by concern: the tree, its names, init and dispatch in module.c; the builders,
 * shapes and forwards of issue 14's layers in layers.c).  Only runtime/model/
 * includes it. */
#ifndef FS_MODEL_INT_H
#define FS_MODEL_INT_H

#include "module.h"

/* A module of kind with no parameters, in training mode (NULL + fsT_error on OOM). */
fs_module *fsM_new_module(fsM_kind kind);
/* A meta f32 parameter of shape (rank dims, or [d0] / [d0, d1]); -1 on OOM */
int fsM_add_param_shape(fs_module *m, int rank, const int64_t *shape);
int fsM_add_param(fs_module *m, int rank, int64_t d0, int64_t d1);
/* A meta buffer (no grad): rank 1 of n elements, or rank 0 */
int fsM_add_buffer(fs_module *m, fs_dtype dt, int rank, int64_t n);
/* v > 0, else false + "layer: what must be positive, got v" */
bool fsM_positive(const char *layer, int64_t v, const char *what);
/* fsM_out_shape's failure: err gets the message, *bad = m; returns -1 */
__attribute__((format(printf, 5, 6)))
int fsM_shape_err(const fs_module *m, const fs_module **bad, char *err, size_t errlen, const char *fmt, ...);

/* layers.c: Conv, BatchNorm, pooling and Upsample shapes (rank and dims updated in place) */
int fsM_spatial_shape(const fs_module *m, int *rank, int64_t *cur, const fs_module **bad, char *err,
                      size_t errlen);
fs_tensor *fsM_batchnorm_forward(fs_module *m, fs_tensor *x);
fs_tensor *fsM_upsample_forward(const fs_module *m, fs_tensor *x);

#endif
