/* blas.h -- OpenBLAS, loaded on first use.
 *
 * libopenblas.so.0 is dlopen'ed the first time a GEMM runs, so commands that
 * never compute (`check`) never pay its ~4.5 ms load.  OpenBLAS reads
 * OPENBLAS_NUM_THREADS itself when it loads. */
#ifndef FS_BLAS_H
#define FS_BLAS_H

#include <stdbool.h>
#include <stdint.h>

/* Row-major sgemm; -1 + fsT_error when OpenBLAS cannot be loaded. */
int fsB_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb,
              float beta, float *C, int64_t ldc);
/* Whether OpenBLAS has been loaded by this process (tests, diagnostics). */
bool fsB_blas_loaded(void);

#endif
