/* blas.c -- lazy OpenBLAS (see blas.h). */
#include "blas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <pthread.h>
#include "tensor.h"

/* cblas_sgemm's ABI with cblas.h's enum values (RowMajor 101, NoTrans 111,
 * Trans 112), so the header and the library are not needed at link time. */
typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K,
                         float alpha, const float *A, int lda, const float *B,
                         int ldb, float beta, float *C, int ldc);

/* cblas_dgemm's, the same with doubles (float64 ops, f64.c) */
typedef void (*dgemm_fn)(int order, int ta, int tb, int M, int N, int K,
                         double alpha, const double *A, int lda, const double *B,
                         int ldb, double beta, double *C, int ldc);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static sgemm_fn sgemm;
static dgemm_fn dgemm;
/* OpenBLAS's own (not in cblas.h); NULL in another BLAS */
static void (*set_num_threads)(int);
static int (*get_num_threads)(void);
static char load_error[256];

static void load(void) {
  void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(load_error, sizeof load_error, "cannot load OpenBLAS (libopenblas.so.0): %s", dlerror());
    return;
  }
  sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
  dgemm = (dgemm_fn)dlsym(h, "cblas_dgemm");
  set_num_threads = (void (*)(int))dlsym(h, "openblas_set_num_threads");
  get_num_threads = (int (*)(void))dlsym(h, "openblas_get_num_threads");
  if (!sgemm || !dgemm)
    snprintf(load_error, sizeof load_error, "OpenBLAS has no cblas_sgemm or cblas_dgemm: %s", dlerror());
}

bool fsB_blas_loaded(void) { return sgemm != NULL; }

int fsB_set_blas_threads(int n) {
  pthread_once(&once, load);
  if (!sgemm || !set_num_threads || !get_num_threads) return 0;
  int old = get_num_threads();
  if (old != n) set_num_threads(n);
  return old;
}

static _Thread_local fs_dtype gemm_operands = FS_F32;

fs_dtype fsB_set_gemm_operands(fs_dtype dt) {
  fs_dtype old = gemm_operands;
  gemm_operands = dt;
  return old;
}

fs_dtype fsB_gemm_operands(void) { return gemm_operands; }

int fsB_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb,
              float beta, float *C, int64_t ldc) {
  if (gemm_operands != FS_F32)
    return fsB_gemm_low(gemm_operands, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  return fsB_sgemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* OpenBLAS loaded and the sizes in its 32-bit range: 0, else -1 + fsT_error. */
static int blas_ready(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  pthread_once(&once, load);
  if (!sgemm) {
    fsT_seterr("%s", load_error);
    return -1;
  }
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || lda > INT32_MAX ||
      ldb > INT32_MAX || ldc > INT32_MAX) {
    fsT_seterr("matrix too large for 32-bit BLAS (%lldx%lldx%lld)",
               (long long)M, (long long)N, (long long)K);
    return -1;
  }
  return 0;
}

int fsB_dgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
              const double *A, int64_t lda, const double *B, int64_t ldb,
              double beta, double *C, int64_t ldc) {
  if (blas_ready(M, N, K, lda, ldb, ldc) < 0) return -1;
  if (M == 0 || N == 0) return 0;
  fsB_blas_starts();
  dgemm(101, ta ? 112 : 111, tb ? 112 : 111, (int)M, (int)N, (int)K, alpha,
        A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
  return 0;
}

int fsB_sgemm_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb,
                  float beta, float *C, int64_t ldc) {
  if (blas_ready(M, N, K, lda, ldb, ldc) < 0) return -1;
  if (M == 0 || N == 0) return 0;
  fsB_blas_starts();
  sgemm(101, ta ? 112 : 111, tb ? 112 : 111, (int)M, (int)N, (int)K, alpha,
        A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
  return 0;
}
