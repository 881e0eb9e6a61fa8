/* bench_cuda.c -- the CUDA backend next to what bounds it, as ratios:
 *   materialization: fresh cudaMalloc + fill_uniform vs fresh cudaMalloc +
 *     device-to-device cudaMemcpy of the same size (target >= 0.7x); a
 *     bf16-true model's (a meta Linear materialized and converted to
 *     bfloat16 on the device, as Fabric's setup does) vs the memcpy of its
 *     bfloat16 bytes;
 *   linear layer: fsN_cuda linear forward/backward vs the bare cublasSgemm
 *     calls of the same shapes.
 * Prints a table (GB/s, GFLOP/s, ratio); asserts nothing about time.
 * Usage: bench_cuda [GiB ...]   (default 1 4) */
#define _POSIX_C_SOURCE 200809L
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "backend.h"
#include "blas.h"
#include "backend_cuda.h"
#include "module.h"
#include "nn.h"
#include "rng.h"

#define REPS 3

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int ok(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, "bench_cuda: %s: %s\n", what, cudaGetErrorString(e));
  return 0;
}

/* Best of REPS: fresh allocation, then either fill_uniform (src NULL) or a
 * copy from src; wall time through the final synchronize. */
static double fresh_fill_or_copy(size_t nbytes, const void *src) {
  double best = 1e30;
  for (int r = 0; r < REPS; r++) {
    void *dst = NULL;
    double t0 = now();
    if (!ok(cudaMalloc(&dst, nbytes), "cudaMalloc")) return -1;
    if (src) cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToDevice);
    else fsB_cuda.fill_uniform(dst, nbytes / 4, fsR_key(1, "bench.weight"), 0, -0.02f, 0.02f);
    if (!ok(cudaDeviceSynchronize(), src ? "memcpy" : "fill_uniform")) return -1;
    double t = now() - t0;
    cudaFree(dst);
    best = t < best ? t : best;
  }
  return best;
}

static int bench_materialize(double gib) {
  size_t nbytes = (size_t)(gib * (1u << 30)) & ~(size_t)3;
  void *src = NULL;
  if (!ok(cudaMalloc(&src, nbytes), "cudaMalloc (copy source)")) return -1;
  cudaMemset(src, 0x3c, nbytes);
  double tc = fresh_fill_or_copy(nbytes, src), tf = fresh_fill_or_copy(nbytes, NULL);
  cudaFree(src);
  if (tc < 0 || tf < 0) return -1;
  char name[64];
  snprintf(name, sizeof name, "materialize %.2f GiB (fill_uniform)", gib);
  printf("%-34s %10.1f GB/s    memcpy %7.1f GB/s    ratio %.2fx (target >= 0.7x)\n", name,
         nbytes / tf / 1e9, nbytes / tc / 1e9, tc / tf);
  return 0;
}

/* Best of REPS: a bf16-true model's weight of nbytes materialized on the
 * device as Fabric's setup of a meta model does it (fsM_materialize draws
 * it in float32 with fill_uniform, fsM_to_dtype converts it to bfloat16 on
 * the device, module.c), wall time through the final synchronize. */
static double fresh_bf16_model(size_t nbytes) {
  const int64_t in = 4096, out = (int64_t)(nbytes / 2 / 4096);
  double best = 1e30;
  for (int r = 0; r < REPS; r++) {
    fs_module *m = fsM_linear(in, out, false);
    if (!m) return -1;
    double t0 = now();
    int rc = fsM_materialize(m, FS_DEV_CUDA, 1) || fsM_to_dtype(m, FS_BF16) || fsCU_sync();
    double t = now() - t0;
    fsM_release(m);
    if (rc) {
      fprintf(stderr, "bench_cuda: bf16 materialization: %s\n", fsT_error());
      return -1;
    }
    best = t < best ? t : best;
  }
  return best;
}

static int bench_materialize_bf16(double gib) {
  size_t nbytes = (size_t)(gib * (1u << 30)) / (2 * 4096) * (2 * 4096);
  void *src = NULL;
  if (!ok(cudaMalloc(&src, nbytes), "cudaMalloc (copy source)")) return -1;
  cudaMemset(src, 0x3c, nbytes);
  double tc = fresh_fill_or_copy(nbytes, src), tf = fresh_bf16_model(nbytes);
  cudaFree(src);
  if (tc < 0 || tf < 0) return -1;
  char name[64];
  snprintf(name, sizeof name, "materialize %.2f GiB bf16-true model", gib);
  printf("%-34s %10.1f GB/s    memcpy %7.1f GB/s    ratio %.2fx\n", name, nbytes / tf / 1e9, nbytes / tc / 1e9,
         tc / tf);
  return 0;
}

/* Time of `iters` calls of fn, after one warm-up call. */
typedef int (*step_fn)(void *ctx);
static double timed(step_fn fn, void *ctx, int iters) {
  if (fn(ctx)) return -1;
  cudaDeviceSynchronize();
  double t0 = now();
  for (int i = 0; i < iters; i++)
    if (fn(ctx)) return -1;
  if (!ok(cudaDeviceSynchronize(), "linear")) return -1;
  return (now() - t0) / iters;
}

typedef struct {
  int64_t N, C, OC;
  float *x, *W, *b, *y, *dy, *dx, *dW, *db;
  cublasHandle_t h;
} lin;

static int fwd_nn(void *p) {
  lin *l = p;
  return fsN_cuda.linear_forward(l->y, l->x, l->W, l->b, l->N, l->C, l->OC);
}
static int bwd_nn(void *p) {
  lin *l = p;
  return fsN_cuda.linear_backward(l->dx, l->dW, l->db, l->dy, l->x, l->W, l->N, l->C, l->OC);
}
/* the same products in cuBLAS's column-major terms (y^T = W x^T, ...) */
static int fwd_blas(void *p) {
  lin *l = p;
  const float one = 1;
  return cublasSgemm(l->h, CUBLAS_OP_T, CUBLAS_OP_N, l->OC, l->N, l->C, &one, l->W, l->C, l->x,
                     l->C, &one, l->y, l->OC) != CUBLAS_STATUS_SUCCESS;
}
static int bwd_blas(void *p) {
  lin *l = p;
  const float one = 1;
  return cublasSgemm(l->h, CUBLAS_OP_N, CUBLAS_OP_N, l->C, l->N, l->OC, &one, l->W, l->C, l->dy,
                     l->OC, &one, l->dx, l->C) != CUBLAS_STATUS_SUCCESS ||
         cublasSgemm(l->h, CUBLAS_OP_N, CUBLAS_OP_T, l->C, l->OC, l->N, &one, l->x, l->C, l->dy,
                     l->OC, &one, l->dW, l->C) != CUBLAS_STATUS_SUCCESS;
}

/* bf16-mixed's forward product: this runtime's (bfloat16 operands through
 * fsB_gemm_operands: the float copies converted, then cublasGemmEx) against
 * cublasGemmEx on operands already bfloat16, as torch's autocast holds them */
typedef struct {
  lin *l;
  uint16_t *x16, *W16;
} lin16;

static int fwd_nn_bf16(void *p) {
  lin16 *q = p;
  fs_dtype old = fsB_set_gemm_operands(FS_BF16);
  int rc = fwd_nn(q->l);
  fsB_set_gemm_operands(old);
  return rc;
}
static int fwd_blas_bf16(void *p) {
  lin16 *q = p;
  lin *l = q->l;
  const float one = 1;
  return cublasGemmEx(l->h, CUBLAS_OP_T, CUBLAS_OP_N, l->OC, l->N, l->C, &one, q->W16, CUDA_R_16BF, l->C, q->x16,
                      CUDA_R_16BF, l->C, &one, l->y, CUDA_R_32F, l->OC, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
}

static int bench_linear(int64_t N, int64_t C, int64_t OC) {
  lin l = {.N = N, .C = C, .OC = OC};
  float **bufs[] = {&l.x, &l.W, &l.b, &l.y, &l.dy, &l.dx, &l.dW, &l.db};
  const int64_t sizes[] = {N * C, OC * C, OC, N * OC, N * OC, N * C, OC * C, OC};
  int rc = -1;
  for (int i = 0; i < 8; i++) {
    *bufs[i] = fsB_cuda.alloc((size_t)sizes[i] * 4);
    if (!*bufs[i]) goto out;
    fsB_cuda.fill_uniform(*bufs[i], (size_t)sizes[i], fsR_key(2, "lin"), (size_t)i << 32, -0.1f, 0.1f);
  }
  if (cublasCreate(&l.h) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bench_cuda: cublasCreate failed\n");
    goto out;
  }
  double flop = 2.0 * N * C * OC, tf = timed(fwd_nn, &l, 10), tfb = timed(fwd_blas, &l, 10);
  double tb = timed(bwd_nn, &l, 10), tbb = timed(bwd_blas, &l, 10);
  lin16 q = {.l = &l, .x16 = fsB_cuda.alloc((size_t)N * C * 2), .W16 = fsB_cuda.alloc((size_t)OC * C * 2)};
  double t16 = -1, t16b = -1;
  if (q.x16 && q.W16 && !fsCU_f32_to_bf16(q.x16, l.x, (size_t)(N * C)) &&
      !fsCU_f32_to_bf16(q.W16, l.W, (size_t)(OC * C)))
    t16 = timed(fwd_nn_bf16, &q, 10), t16b = timed(fwd_blas_bf16, &q, 10);
  if (q.x16) fsB_cuda.free(q.x16, (size_t)N * C * 2);
  if (q.W16) fsB_cuda.free(q.W16, (size_t)OC * C * 2);
  cublasDestroy(l.h);
  if (tf < 0 || tfb < 0 || tb < 0 || tbb < 0 || t16 < 0 || t16b < 0) {
    fprintf(stderr, "bench_cuda: linear failed: %s\n", fsT_error());
    goto out;
  }
  char name[64];
  snprintf(name, sizeof name, "linear fwd %lldx%lld->%lld", (long long)N, (long long)C, (long long)OC);
  printf("%-34s %10.0f GFLOP/s cublasSgemm %7.0f GFLOP/s ratio %.2fx\n", name, flop / tf / 1e9,
         flop / tfb / 1e9, tfb / tf);
  snprintf(name, sizeof name, "linear bwd %lldx%lld->%lld", (long long)N, (long long)C, (long long)OC);
  printf("%-34s %10.0f GFLOP/s cublasSgemm %7.0f GFLOP/s ratio %.2fx\n", name, 2 * flop / tb / 1e9,
         2 * flop / tbb / 1e9, tbb / tb);
  snprintf(name, sizeof name, "linear bf16 fwd %lldx%lld->%lld", (long long)N, (long long)C, (long long)OC);
  printf("%-34s %10.0f GFLOP/s GemmEx bf16 %7.0f GFLOP/s ratio %.2fx (float32 path %.2fx)\n", name,
         flop / t16 / 1e9, flop / t16b / 1e9, t16b / t16, tf / t16);
  rc = 0;
out:
  for (int i = 0; i < 8; i++)
    if (*bufs[i]) fsB_cuda.free(*bufs[i], (size_t)sizes[i] * 4);
  return rc;
}

int main(int argc, char **argv) {
  char why[256];
  if (fsCU_device_count(why, sizeof why) == 0) {
    fprintf(stderr, "bench_cuda: %s\n", why);
    return 1;
  }
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("device: %s, %.1f GiB\n", prop.name, prop.totalGlobalMem / 1073741824.0);
  int rc = 0;
  for (int i = 1; i < argc || (argc == 1 && i < 3); i++) {
    double gib = argc > 1 ? atof(argv[i]) : i == 1 ? 1.0 : 4.0;
    rc |= bench_materialize(gib);
    rc |= bench_materialize_bf16(gib);
  }
  rc |= bench_linear(8192, 4096, 4096);
  rc |= bench_linear(2048, 768, 3072); /* a GPT-2 small MLP layer */
  return rc ? 1 : 0;
}
