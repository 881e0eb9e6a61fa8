/* tensor_str.h -- print(tensor) as torch 1.13 prints it (tensor_str.c). */
#ifndef FS_TENSOR_STR_H
#define FS_TENSOR_STR_H

#include "tensor.h"

/* torch's repr of t, whose values are on the cpu (or t is meta): malloc'd,
 * NULL on OOM.  device: the "device='cuda:0'" suffix's value, or NULL on the
 * cpu; grad_fn: a trailing suffix ("requires_grad=True"), or NULL. */
char *fsT_str(const fs_tensor *t, const char *device, const char *grad_fn);

#endif
