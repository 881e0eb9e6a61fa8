/* blas.h -- OpenBLAS, loaded on first use.
 *
 * libopenblas.so.0 is dlopen'ed the first time a GEMM runs, so commands that
 * never compute (`check`) never pay its ~4.5 ms load.  OpenBLAS reads
 * OPENBLAS_NUM_THREADS itself when it loads. */
#ifndef FS_BLAS_H
#define FS_BLAS_H

#include <stdbool.h>
#include <stdint.h>

/* Row-major sgemm; -1 + fsT_error when OpenBLAS cannot be loaded.  While
 * bf16 operands are on (below) it is fsB_gemm_bf16. */
int fsB_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb,
              float beta, float *C, int64_t ldc);
/* OpenBLAS's sgemm whatever the mode. */
int fsB_sgemm_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb,
                  float beta, float *C, int64_t ldc);

/* ---- bfloat16 matrix products (gemm_bf16.c) ----
 * An op computing in bfloat16 turns bf16 operands on (per thread) for its
 * forward and its backward (precision.c): every GEMM it makes then takes A
 * and B rounded to bfloat16, with float32 accumulation, as torch's bf16
 * matmul.  Returns the previous setting. */
bool fsB_set_bf16_operands(bool on);
bool fsB_bf16_operands(void);
int fsB_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb,
                  float beta, float *C, int64_t ldc);
/* OpenBLAS's dgemm (float64 ops, f64.c), row-major as fsB_sgemm. */
int fsB_dgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
              const double *A, int64_t lda, const double *B, int64_t ldb,
              double beta, double *C, int64_t ldc);
/* The same with operands that may be bfloat16 storage (a bfloat16 tensor
 * used as it is, without a float32 copy): p points at float32 values, or
 * at bfloat16 ones when bf16; ld is the leading dimension in elements. */
typedef struct fsB_mat {
  const void *p;
  bool bf16;
  int64_t ld;
} fsB_mat;
int fsB_gemm_bf16x(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, fsB_mat A, fsB_mat B,
                   float beta, float *C, int64_t ldc);
/* Whether OpenBLAS has been loaded by this process (tests, diagnostics). */
bool fsB_blas_loaded(void);

#endif
