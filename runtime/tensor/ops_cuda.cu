/* ops_cuda.cu -- cuda's part of the tensor API's kernel table (ops.h): the
 * indexing kernels (take, its scatter-add backward, put) and topk.
 *
 * fsU_cuda is a PARTIAL table (ops.h's `partial`): the entry points that
 * name these slots (index.c) run them on device pointers; every other op of
 * ops.h stages through host memory.  The results equal the cpu's (ops.c),
 * with one difference torch's CUDA kernels share: put with repeated offsets
 * writes one of the values, not necessarily the last.  Grid-stride loops as
 * backend_cuda.cu; errors surface at the next checked call (fsCU_sync). */
#include "cuda_common.cuh"
extern "C" {
#include "ops.h"
}

__global__ void take_k(int64_t n, const int64_t *off, size_t es, const unsigned char *x, unsigned char *y) {
  FSCU_FOR(i, (size_t)n)
    for (size_t b = 0; b < es; b++) y[i * es + b] = x[(size_t)off[i] * es + b];
}

static void cuda_take(int64_t n, const int64_t *off, size_t es, const void *x, void *y) {
  if (n > 0)
    take_k<<<fscu_blocks((size_t)n), FSCU_THREADS>>>(n, off, es, (const unsigned char *)x, (unsigned char *)y);
}

/* repeated offsets sum: atomics (the order of additions varies); float, and
 * double for 64-true (fscu_take_backward_f64, f64_cuda.cu's table) */
template <class T> __global__ void take_backward_k(int64_t n, const int64_t *off, T *dx, const T *dy) {
  FSCU_FOR(i, (size_t)n) atomicAdd(&dx[off[i]], dy[i]);
}

static void cuda_take_backward(int64_t n, const int64_t *off, float *dx, const float *dy) {
  if (n > 0) take_backward_k<<<fscu_blocks((size_t)n), FSCU_THREADS>>>(n, off, dx, dy);
}

void fscu_take_backward_f64(int64_t n, const int64_t *off, double *dx, const double *dy) {
  if (n > 0) take_backward_k<<<fscu_blocks((size_t)n), FSCU_THREADS>>>(n, off, dx, dy);
}

__global__ void put_k(int64_t n, const int64_t *off, size_t es, const unsigned char *v, unsigned char *x) {
  FSCU_FOR(i, (size_t)n)
    for (size_t b = 0; b < es; b++) x[(size_t)off[i] * es + b] = v[i * es + b];
}

static void cuda_put(int64_t n, const int64_t *off, size_t es, const void *v, void *x) {
  if (n > 0) put_k<<<fscu_blocks((size_t)n), FSCU_THREADS>>>(n, off, es, (const unsigned char *)v, (unsigned char *)x);
}

/* a ranks before b: NaN above everything (below, for the smallest), then
 * the value, then the lower index, as ops.c's comparators */
template <class T> __device__ static bool ranks_before(bool largest, T av, int64_t ai, T bv, int64_t bi) {
  bool na = isnan(av), nb = isnan(bv);
  if (na != nb) return largest ? na : nb;
  if (!na && av != bv) return largest ? av > bv : av < bv;
  return ai < bi;
}

/* one thread per (o, i) row: the K first in rank order by repeated
 * selection of the best element ranking after the previous pick (no scratch) */
template <class T>
__global__ void topk_k(bool largest, int64_t O, int64_t L, int64_t I, int64_t K, const T *x, T *y, int64_t *idx) {
  FSCU_FOR(r, (size_t)(O * I)) {
    int64_t o = (int64_t)r / I, i = (int64_t)r % I, pi = -1;
    T pv = 0;
    for (int64_t k = 0; k < K; k++) {
      int64_t bi = -1;
      T bv = 0;
      for (int64_t l = 0; l < L; l++) {
        T v = x[(o * L + l) * I + i];
        if (pi >= 0 && !ranks_before(largest, pv, pi, v, l)) continue;
        if (bi < 0 || ranks_before(largest, v, l, bv, bi)) bv = v, bi = l;
      }
      y[(o * K + k) * I + i] = bv;
      idx[(o * K + k) * I + i] = bi;
      pv = bv, pi = bi;
    }
  }
}

/* float, and double for 64-true (fscu_topk_forward_f64, f64_cuda.cu's table) */
template <class T>
static int topk_forward(bool largest, int64_t O, int64_t L, int64_t I, int64_t K, const T *x, T *y, int64_t *idx) {
  if (O * I > 0 && K > 0) topk_k<<<fscu_blocks((size_t)(O * I)), FSCU_THREADS>>>(largest, O, L, I, K, x, y, idx);
  return 0;
}

/* the K indices of a row are distinct: no two threads add to one element */
template <class T>
__global__ void topk_backward_k(int64_t O, int64_t L, int64_t I, int64_t K, T *dx, const T *dy, const int64_t *idx) {
  FSCU_FOR(j, (size_t)(O * K * I)) {
    int64_t o = (int64_t)j / (K * I), i = (int64_t)j % I;
    dx[(o * L + idx[j]) * I + i] += dy[j];
  }
}

template <class T>
static void topk_backward(int64_t O, int64_t L, int64_t I, int64_t K, T *dx, const T *dy, const int64_t *idx) {
  if (O * K * I > 0) topk_backward_k<<<fscu_blocks((size_t)(O * K * I)), FSCU_THREADS>>>(O, L, I, K, dx, dy, idx);
}

int fscu_topk_forward_f64(bool largest, int64_t O, int64_t L, int64_t I, int64_t K, const double *x, double *y,
                          int64_t *idx) {
  return topk_forward(largest, O, L, I, K, x, y, idx);
}

void fscu_topk_backward_f64(int64_t O, int64_t L, int64_t I, int64_t K, double *dx, const double *dy,
                            const int64_t *idx) {
  topk_backward(O, L, I, K, dx, dy, idx);
}

/* nvcc's C++17 has no designated initializers: the slots are named here */
static fsU_kernels make_ops(void) {
  fsU_kernels k = {};
  k.take = cuda_take;
  k.take_backward = cuda_take_backward;
  k.put = cuda_put;
  k.topk_forward = topk_forward<float>;
  k.topk_backward = topk_backward<float>;
  k.partial = true;
  return k;
}

extern "C" const fsU_kernels fsU_cuda = make_ops();
