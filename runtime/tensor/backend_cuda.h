/* backend_cuda.h -- the CUDA backend (compiled only when FS_HAVE_CUDA).
 *
 * fsB_cuda is the fsB_backend table on device memory (one cudaMalloc per
 * flat buffer) and fsN_cuda its layer kernels: every caller of the cpu table
 * runs unchanged on cuda.  Work goes to the legacy default stream, so calls
 * are ordered with each other and with cudaMemcpy; functions returning a
 * value (sum, losses) wait for it.  cuBLAS is dlopen'ed on the first GEMM
 * (linking it costs every process start about a second).
 *
 * Errors: functions returning int give -1 and leave "CUDA error in <what>:
 * <cudaGetErrorString>" in fsT_error(), including an error left pending by an
 * earlier void call; fsCU_sync reports any pending error at a step boundary.
 * Initialize CUDA only in the process that uses it: a child forked after the
 * parent touched CUDA cannot use the device. */
#ifndef FS_BACKEND_CUDA_H
#define FS_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include "backend.h"
#include "nn.h"
#include "ops.h"

extern const fsB_backend fsB_cuda;
extern const fsN_kernels fsN_cuda;
extern const fsU_kernels fsU_cuda; /* ops_cuda.cu: a partial table (ops.h) */
extern const fsB_f64_kernels fsB_f64_cuda; /* f64_cuda.cu: float64's (f64_kernels.h) */
extern const fsB_low_kernels fsB_low_cuda; /* low_cuda.cu: bfloat16/float16 elementwise (backend.h) */

/* Number of visible CUDA devices; 0 with "no CUDA device: <reason> -- use
 * accelerator="cpu" ..." in err (n bytes) when there is none or no driver. */
int fsCU_device_count(char *err, size_t n);
/* &fsB_cuda when a device is present (checked once per process), else NULL
 * + fsT_error with fsCU_device_count's message.  fsB_get(FS_DEV_CUDA) calls it. */
const fsB_backend *fsCU_backend(void);

/* Host <-> device copies (blocking); -1 + fsT_error on failure. */
int fsCU_upload(void *dst_dev, const void *src_host, size_t nbytes);
int fsCU_download(void *dst_host, const void *src_dev, size_t nbytes);
/* Device float32 <-> bfloat16, rounding exactly as fsT_f32_to_bf16. */
int fsCU_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
int fsCU_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
/* This thread's device from now on (a rank's: its local rank), before it
 * allocates anything; -1 + fsT_error if there is no such device. */
int fsCU_select_device(int index);
/* Waits for the device; -1 + fsT_error if any queued work failed. */
int fsCU_sync(void);

#endif
