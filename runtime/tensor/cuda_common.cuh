/* cuda_common.cuh -- what the CUDA backend's .cu files share: launch
 * sizes, errors into fsT_error, cuBLAS GEMM, a deterministic reduction, and
 * the level-1 loops over an element type (float for fsB_cuda in
 * backend_cuda.cu, double for 64-true's table in f64_cuda.cu).
 * Internal to the CUDA backend; C callers use backend_cuda.h. */
#ifndef FS_CUDA_COMMON_CUH
#define FS_CUDA_COMMON_CUH

#include <cuda_runtime.h>
extern "C" {
#include "backend_cuda.h"
#include "tensor.h"
}

#define FSCU_THREADS 256
/* Grid-stride kernels: enough blocks to fill an H200 many times over, and a
 * grid that stays in range for any n. */
#define FSCU_MAX_BLOCKS 8192u

static inline unsigned fscu_blocks(size_t n) {
  size_t b = (n + FSCU_THREADS - 1) / FSCU_THREADS;
  return b == 0 ? 1u : b > FSCU_MAX_BLOCKS ? FSCU_MAX_BLOCKS : (unsigned)b;
}

#define FSCU_FOR(i, n) \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (size_t)gridDim.x * blockDim.x)

/* 0, or -1 + fsT_error "CUDA error in <what>: <string>". */
int fscu_check(cudaError_t e, const char *what);
/* fscu_check of whatever error is pending (a failed launch, a device fault). */
static inline int fscu_pending(const char *what) { return fscu_check(cudaGetLastError(), what); }

/* Row-major C[M,N] = alpha op(A) op(B) + beta C for `batch` matrices spaced
 * sA, sB, sC elements apart (batch 1 ignores the strides); cuBLAS loaded on
 * first use.  -1 + fsT_error on failure. */
int fscu_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, int64_t sA, const float *B, int64_t ldb, int64_t sB,
              float beta, float *C, int64_t ldc, int64_t sC, int64_t batch);
/* the same over double (cublasDgemm): 64-true's products */
int fscu_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
              const double *A, int64_t lda, int64_t sA, const double *B, int64_t ldb, int64_t sB,
              double beta, double *C, int64_t ldc, int64_t sC, int64_t batch);

/* dx[off[i]] += dy[i] over double (ops_cuda.cu's take backward): 64-true's
 * scatter-add, and ops_cuda.cu's topk over double, for f64_cuda.cu */
void fscu_take_backward_f64(int64_t n, const int64_t *off, double *dx, const double *dy);
int fscu_topk_forward_f64(bool largest, int64_t O, int64_t L, int64_t I, int64_t K, const double *x, double *y,
                          int64_t *idx);
void fscu_topk_backward_f64(int64_t O, int64_t L, int64_t I, int64_t K, double *dx, const double *dy,
                            const int64_t *idx);

/* Device memory, stream-ordered from the device's pool where it has one
 * (freed blocks are reused); NULL + fsT_error on failure. */
void *fscu_scratch(size_t nbytes, const char *what);
void fscu_scratch_free(void *p);

/* Reduction: comb over load(i), i < n, from init.  Fixed grid for a given n,
 * so the result is deterministic. */
template <class T, class Load, class Comb>
__global__ void fscu_reduce_k(size_t n, Load load, Comb comb, T init, T *out) {
  __shared__ T buf[FSCU_THREADS];
  T acc = init;
  FSCU_FOR(i, n) acc = comb(acc, load(i));
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = FSCU_THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = comb(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

template <class T> struct fscu_load_array {
  const T *x;
  __device__ T operator()(size_t i) const { return x[i]; }
};

/* Block partials, then one block over them; the result is copied to *result
 * (which waits for the device).  -1 + fsT_error on failure. */
template <class T, class Load, class Comb>
static int fscu_reduce(size_t n, Load load, Comb comb, T init, T *result, const char *what) {
  unsigned nb = fscu_blocks(n) < 1024 ? fscu_blocks(n) : 1024;
  T *part = (T *)fscu_scratch((nb + 1) * sizeof(T), what);
  if (!part) return -1;
  fscu_reduce_k<<<nb, FSCU_THREADS>>>(n, load, comb, init, part);
  fscu_reduce_k<<<1, FSCU_THREADS>>>((size_t)nb, fscu_load_array<T>{part}, comb, init, part + nb);
  int rc = fscu_check(cudaMemcpy(result, part + nb, sizeof(T), cudaMemcpyDeviceToHost), what);
  fscu_scratch_free(part);
  return rc;
}

struct fscu_add {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};

/* --- level-1 loops over T: one text for float (fsB_cuda) and double
 * (64-true, fsB_f64_cuda) ----------------------------------------------- */

template <class T> __global__ void fscu_axpy_k(size_t n, T alpha, const T *x, T *y) {
  FSCU_FOR(i, n) y[i] += alpha * x[i];
}
template <class T> static void fscu_axpy(size_t n, T alpha, const T *x, T *y) {
  if (n) fscu_axpy_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, alpha, x, y);
}

template <class T> __global__ void fscu_scale_k(size_t n, T alpha, T *x) {
  FSCU_FOR(i, n) x[i] *= alpha;
}
template <class T> static void fscu_scale(size_t n, T alpha, T *x) {
  if (n) fscu_scale_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, alpha, x);
}

template <class T> __global__ void fscu_clamp_k(size_t n, T lo, T hi, T *x) {
  FSCU_FOR(i, n) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}
template <class T> static void fscu_clamp(size_t n, T lo, T hi, T *x) {
  if (n) fscu_clamp_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, lo, hi, x);
}

/* Sums accumulate in double whatever T, as the cpu's; absmax stays in T.
 * (double)x[i] * x[i] is x[i] * x[i] for T = double. */
template <class T> struct fscu_load_wide {
  const T *x;
  __device__ double operator()(size_t i) const { return x[i]; }
};
template <class T> struct fscu_load_sq {
  const T *x;
  __device__ double operator()(size_t i) const { return (double)x[i] * x[i]; }
};
template <class T> struct fscu_load_abs {
  const T *x;
  __device__ T operator()(size_t i) const { return fabs(x[i]); } /* fabs(float) is fabsf */
};
/* max that keeps a NaN once seen, as the cpu's absmax */
template <class T> struct fscu_nan_max {
  __device__ T operator()(T a, T b) const { return isnan(a) || a >= b ? a : b; }
};

template <class T> static double fscu_sum(size_t n, const T *x) {
  double r;
  return fscu_reduce(n, fscu_load_wide<T>{x}, fscu_add{}, 0.0, &r, "sum") ? NAN : r;
}
template <class T> static double fscu_sumsq(size_t n, const T *x) {
  double r;
  return fscu_reduce(n, fscu_load_sq<T>{x}, fscu_add{}, 0.0, &r, "sumsq") ? NAN : r;
}
template <class T> static T fscu_absmax(size_t n, const T *x) {
  T r;
  return fscu_reduce(n, fscu_load_abs<T>{x}, fscu_nan_max<T>{}, T(0), &r, "absmax") ? NAN : r;
}

#endif
