/* blas.h -- OpenBLAS, loaded on first use.
 *
 * libopenblas.so.0 is dlopen'ed the first time a GEMM runs, so commands that
 * never compute (`check`) never pay its ~4.5 ms load.  OpenBLAS reads
 * OPENBLAS_NUM_THREADS itself when it loads. */
#ifndef FS_BLAS_H
#define FS_BLAS_H

#include <stdbool.h>
#include <stdint.h>
#include "tensor.h"

/* Row-major sgemm; -1 + fsT_error when OpenBLAS cannot be loaded.  While
 * low operands are on (below) it is fsB_gemm_low of their type. */
int fsB_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb,
              float beta, float *C, int64_t ldc);
/* OpenBLAS's sgemm whatever the mode. */
int fsB_sgemm_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb,
                  float beta, float *C, int64_t ldc);

/* ---- matrix products in a low type (gemm_bf16.c) ----
 * An op computing in bfloat16 or float16 sets that type as the GEMM
 * operands' (per thread) for its forward and its backward (precision.c):
 * every GEMM it makes, on any backend, then takes A and B rounded to it
 * (round to nearest even) with float32 accumulation, as torch's bf16 and
 * fp16 matmul (cuBLAS GemmEx with 16-bit inputs, CUBLAS_COMPUTE_32F).
 * FS_F32 turns it off.  Returns the previous setting. */
fs_dtype fsB_set_gemm_operands(fs_dtype dt);
fs_dtype fsB_gemm_operands(void);
/* The product with A and B rounded to dt (FS_BF16: fsB_gemm_bf16x; FS_F16:
 * rounded float32 copies through OpenBLAS's sgemm, exact products of
 * float16 values summed in float32). */
int fsB_gemm_low(fs_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
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
  /* bfloat16 rows two at a time: rows 2i and 2i+1 as the low and high
   * halves of the uint32 ((const uint32_t *)p)[i * ld + c] (the high halves
   * 0 past an odd last row).  Only as a transposed A (A's rows then run
   * along K): the layout the GEMM packs such an A into, so it is read in
   * place. */
  bool pairs;
} fsB_mat;
int fsB_gemm_bf16x(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, fsB_mat A, fsB_mat B,
                   float beta, float *C, int64_t ldc);
/* What becomes of v = alpha op(A) op(B) (float32 sums): FSB_STORE
 * C = v + beta C (float32 C, fsB_gemm_bf16x); FSB_BF16_BIAS C = v + the
 * bias rounded to bfloat16 (bias[column], or none), rounded, stored in a
 * bfloat16 C (a bfloat16 Linear's output); FSB_ADD_ROUNDED C += v rounded
 * to bfloat16 and FSB_ROUNDED_SUM C = (C + v rounded) rounded (float32 C: a
 * gradient reaching a float32 / a bfloat16 tensor through a bfloat16 op;
 * the latter is fsG_low_grad_add's rule, torch's bfloat16 accumulation);
 * for these two, beta 0 takes C as zeros without reading it (a gradient
 * buffer the product creates), beta 1 as it is.
 * Done as each tile of the product is finished, inside the threads that
 * compute it, instead of over a float32 product in scratch memory. */
typedef enum fsB_finish { FSB_STORE, FSB_BF16_BIAS, FSB_ADD_ROUNDED, FSB_ROUNDED_SUM } fsB_finish;
typedef struct fsB_out {
  fsB_finish how;
  void *C;
  int64_t ldc;       /* in elements */
  float beta;        /* FSB_STORE; 0 or 1 for FSB_ADD_ROUNDED, FSB_ROUNDED_SUM */
  const float *bias; /* FSB_BF16_BIAS: float32, N values, or NULL */
} fsB_out;
int fsB_gemm_bf16o(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, fsB_mat A, fsB_mat B,
                   fsB_out out);
/* Whether OpenBLAS has been loaded by this process (tests, diagnostics). */
bool fsB_blas_loaded(void);
/* Sets OpenBLAS's thread count to n (loading it) and returns the count it
 * had; 0 and nothing set when OpenBLAS cannot be loaded or has no such call. */
int fsB_set_blas_threads(int n);

/* ---- the kernels' worker threads (parallel.c) ---- */
#define FSB_MAX_THREADS 64
/* The threads the cpu kernels use: OPENBLAS_NUM_THREADS, else the online
 * CPUs, at most FSB_MAX_THREADS. */
int fsB_threads(void);
/* One part of a kernel: part in [0, nparts), worker in [0, fsB_threads())
 * names the thread running it (scratch memory per worker); no two parts
 * run on one worker at once.  0, or -1 + fsT_error. */
typedef int (*fsB_part_fn)(void *ctx, int part, int worker);
/* Runs fn(ctx, i, worker) for every i in [0, nparts) on up to
 * fsB_threads() threads, this one among them, and returns when all are
 * done: 0, or -1 + the fsT_error of the lowest part that failed.  Parts
 * take the caller's GEMM operand type, and OpenBLAS runs
 * single-threaded inside them while they run in parallel; a call while
 * the workers are taken (from a part, or another thread) runs its parts
 * here, in order. */
int fsB_parallel(int nparts, fsB_part_fn fn, void *ctx);
/* Before an OpenBLAS product (blas.c): on a thread running a part of a
 * call in parallel, holds OpenBLAS to one thread until the call ends (so
 * kernels whose parts never reach OpenBLAS neither load it nor change its
 * thread count); elsewhere, stops the idle workers' spinning, leaving the
 * cores to OpenBLAS's threads. */
void fsB_blas_starts(void);

#endif
