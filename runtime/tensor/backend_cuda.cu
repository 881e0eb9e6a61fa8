/* backend_cuda.cu -- the cuda function table: pooled device buffers, grid-
 * stride kernels, cuBLAS GEMM (dlopen'ed), the counter-based rng on device.
 * Layer kernels are in nn_cuda.cu. */
#include "cuda_common.cuh"

#include <cublas_v2.h> /* types only: the library is dlopen'ed */
#include <cuda_fp16.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
extern "C" {
#include "blas.h"
#include "rng_mix.h"
}

int fscu_check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 0;
  cudaGetLastError(); /* reported here, so not again by the next call */
  fsT_seterr("CUDA error in %s: %s", what, cudaGetErrorString(e));
  return -1;
}

/* Device memory comes from the device's default stream-ordered pool, which
 * keeps freed blocks for reuse (as torch's caching allocator does): cudaFree
 * waits for the whole device, and a training step frees and reallocates the
 * same sizes every step.  Devices (or drivers) without pools get cudaMalloc. */
#define FSCU_MAX_DEVICES 64
static signed char pool_state[FSCU_MAX_DEVICES]; /* 0 unknown, 1 pool, -1 none */

static bool use_pool(void) {
  int dev = 0, supported = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= FSCU_MAX_DEVICES) return false;
  if (!pool_state[dev]) {
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    bool ok = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev) == cudaSuccess &&
              supported && cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess &&
              cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess;
    cudaGetLastError(); /* a refused attribute is an answer, not an error */
    pool_state[dev] = ok ? 1 : -1;
  }
  return pool_state[dev] > 0;
}

void *fscu_scratch(size_t nbytes, const char *what) {
  void *p = NULL;
  if (!nbytes) nbytes = 1;
  bool pool = use_pool();
  cudaError_t e = pool ? cudaMallocAsync(&p, nbytes, 0) : cudaMalloc(&p, nbytes);
  if (pool && e == cudaErrorNotSupported) { /* a driver that lists pools but refuses them */
    cudaGetLastError();
    int dev = 0;
    cudaGetDevice(&dev);
    pool_state[dev] = -1; /* cudaFree takes pool memory too */
    e = cudaMalloc(&p, nbytes);
  }
  return fscu_check(e, what) ? NULL : p;
}

void fscu_scratch_free(void *p) {
  if (use_pool()) cudaFreeAsync(p, 0);
  else cudaFree(p);
}

/* --- devices ------------------------------------------------------------ */

extern "C" int fsCU_device_count(char *err, size_t n) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) return count;
  cudaGetLastError(); /* the failure is ours to report, not pending */
  const char *why = e == cudaSuccess ? "the driver lists no devices" : cudaGetErrorString(e);
  if (err && n) {
    if (e == cudaSuccess || e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
      snprintf(err, n, "no CUDA device: %s -- use accelerator=\"cpu\" or run on a machine "
               "with an NVIDIA GPU and driver", why);
    else
      snprintf(err, n, "CUDA is not usable: %s (error %d) -- use accelerator=\"cpu\"", why, (int)e);
  }
  return 0;
}

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probe_count;
static char probe_error[256];

static void probe(void) { probe_count = fsCU_device_count(probe_error, sizeof probe_error); }

extern "C" const fsB_backend *fsCU_backend(void) {
  pthread_once(&probe_once, probe);
  if (probe_count > 0) return &fsB_cuda;
  fsT_seterr("%s", probe_error);
  return NULL;
}

extern "C" int fsCU_upload(void *dst, const void *src, size_t nbytes) {
  return fscu_check(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice), "upload");
}

extern "C" int fsCU_download(void *dst, const void *src, size_t nbytes) {
  return fscu_check(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost), "download");
}

extern "C" int fsCU_select_device(int index) {
  return fscu_check(cudaSetDevice(index), "cudaSetDevice");
}

extern "C" int fsCU_sync(void) {
  return fscu_check(cudaDeviceSynchronize(), "a queued kernel");
}

/* --- cuBLAS, loaded on the first GEMM ------------------------------------ */

#define FSCU_STR2(x) #x
#define FSCU_STR(x) FSCU_STR2(x)

typedef cublasStatus_t (*create_fn)(cublasHandle_t *);
/* cuBLAS's GEMM entry points over T: S for float, D for double */
template <class T>
using gemm_fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const T *,
                                   const T *, int, const T *, int, const T *, T *, int);
template <class T>
using gemm_batched_fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                           const T *, const T *, int, long long, const T *, int, long long,
                                           const T *, T *, int, long long, int);
typedef const char *(*status_fn)(cublasStatus_t);
/* cublasGemmEx / cublasGemmStridedBatchedEx: bfloat16 or float16 operands,
 * float32 C and accumulation (autocast's matrix products) */
typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                     const void *, const void *, cudaDataType, int, const void *, cudaDataType, int,
                                     const void *, void *, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
typedef cublasStatus_t (*gemm_ex_batched_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                             const void *, const void *, cudaDataType, int, long long, const void *,
                                             cudaDataType, int, long long, const void *, void *, cudaDataType, int,
                                             long long, int, cublasComputeType_t, cublasGemmAlgo_t);

static struct {
  cublasHandle_t handle; /* one per process, on the device current at first use */
  gemm_fn<float> sgemm;  /* NULL until loaded, and when loading failed */
  gemm_batched_fn<float> sgemm_batched;
  gemm_fn<double> dgemm; /* float64 (64-true) */
  gemm_batched_fn<double> dgemm_batched;
  gemm_ex_fn gemm_ex;
  gemm_ex_batched_fn gemm_ex_batched;
  status_fn status;
  char error[256];
} blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_load(void) {
  const char *soname = "libcublas.so." FSCU_STR(CUBLAS_VER_MAJOR);
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(blas.error, sizeof blas.error, "cannot load cuBLAS (%s): %s", soname, dlerror());
    return;
  }
  create_fn create = (create_fn)dlsym(h, "cublasCreate_v2");
  blas.sgemm = (gemm_fn<float>)dlsym(h, "cublasSgemm_v2");
  blas.sgemm_batched = (gemm_batched_fn<float>)dlsym(h, "cublasSgemmStridedBatched");
  blas.dgemm = (gemm_fn<double>)dlsym(h, "cublasDgemm_v2");
  blas.dgemm_batched = (gemm_batched_fn<double>)dlsym(h, "cublasDgemmStridedBatched");
  blas.gemm_ex = (gemm_ex_fn)dlsym(h, "cublasGemmEx");
  blas.gemm_ex_batched = (gemm_ex_batched_fn)dlsym(h, "cublasGemmStridedBatchedEx");
  blas.status = (status_fn)dlsym(h, "cublasGetStatusString");
  if (!create || !blas.sgemm || !blas.sgemm_batched || !blas.dgemm || !blas.dgemm_batched || !blas.gemm_ex ||
      !blas.gemm_ex_batched || !blas.status) {
    snprintf(blas.error, sizeof blas.error, "%s lacks the cuBLAS v2 GEMM entry points", soname);
    blas.sgemm = NULL;
    return;
  }
  cublasStatus_t st = create(&blas.handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    snprintf(blas.error, sizeof blas.error, "cublasCreate failed: %s", blas.status(st));
    blas.sgemm = NULL;
  }
}

/* cuBLAS's entry points of an element type: S for float, D for double */
static cublasStatus_t gemm_one(cublasOperation_t oa, cublasOperation_t ob, int m, int n, int k, const float *alpha,
                               const float *A, int lda, const float *B, int ldb, const float *beta, float *C,
                               int ldc) {
  return blas.sgemm(blas.handle, oa, ob, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
static cublasStatus_t gemm_one(cublasOperation_t oa, cublasOperation_t ob, int m, int n, int k, const double *alpha,
                               const double *A, int lda, const double *B, int ldb, const double *beta, double *C,
                               int ldc) {
  return blas.dgemm(blas.handle, oa, ob, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
static cublasStatus_t gemm_batch(cublasOperation_t oa, cublasOperation_t ob, int m, int n, int k, const float *alpha,
                                 const float *A, int lda, long long sA, const float *B, int ldb, long long sB,
                                 const float *beta, float *C, int ldc, long long sC, int batch) {
  return blas.sgemm_batched(blas.handle, oa, ob, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
}
static cublasStatus_t gemm_batch(cublasOperation_t oa, cublasOperation_t ob, int m, int n, int k,
                                 const double *alpha, const double *A, int lda, long long sA, const double *B,
                                 int ldb, long long sB, const double *beta, double *C, int ldc, long long sC,
                                 int batch) {
  return blas.dgemm_batched(blas.handle, oa, ob, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
}

static int cuda_convert(fs_dtype to, void *dst, fs_dtype from, const void *src, size_t n);

/* A float operand of a product in a low type (fsB_gemm_operands: autocast
 * leaves the operands to the GEMM, which rounds them to nearest even as the
 * cpu's fsB_gemm_low does) as a copy of that type of the span a strided
 * batch reads; NULL + fsT_error when out of memory. */
static uint16_t *low_copy(fs_dtype dt, const float *X, bool trans, int64_t rows, int64_t cols, int64_t ld,
                          int64_t stride, int64_t batch) {
  int64_t r = trans ? cols : rows, c = trans ? rows : cols;
  size_t n = (size_t)((batch - 1) * stride + (r - 1) * ld + c);
  uint16_t *b = (uint16_t *)fscu_scratch(n * sizeof *b, "low-precision operand");
  if (b && cuda_convert(dt, b, FS_F32, X, n) < 0) {
    fscu_scratch_free(b);
    return NULL;
  }
  return b;
}

/* cublasGemmEx's bfloat16 or float16 inputs -> float32 C, float32
 * accumulation (CUBLAS_COMPUTE_32F): the tensor cores' path for autocast's
 * products, as torch's CUDA autocast takes it.  Arguments as gemm_t's,
 * already swapped to column-major. */
static cublasStatus_t gemm_low(cudaDataType in, cublasOperation_t oa, cublasOperation_t ob, int m, int n, int k,
                               const float *alpha, const uint16_t *A, int lda, long long sA, const uint16_t *B,
                               int ldb, long long sB, const float *beta, float *C, int ldc, long long sC, int batch) {
  return batch == 1 ? blas.gemm_ex(blas.handle, oa, ob, m, n, k, alpha, A, in, lda, B, in, ldb, beta, C, CUDA_R_32F,
                                   ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
                    : blas.gemm_ex_batched(blas.handle, oa, ob, m, n, k, alpha, A, in, lda, sA, B, in, ldb, sB, beta,
                                           C, CUDA_R_32F, ldc, sC, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
static cublasStatus_t gemm_low(cudaDataType, cublasOperation_t, cublasOperation_t, int, int, int, const double *,
                               const uint16_t *, int, long long, const uint16_t *, int, long long, const double *,
                               double *, int, long long, int) {
  return CUBLAS_STATUS_NOT_SUPPORTED; /* float64 products are never autocast */
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the
 * operands and the dimensions M and N.  One text for float and double. */
template <class T>
static int gemm_t(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, int64_t sA,
                  const T *B, int64_t ldb, int64_t sB, T beta, T *C, int64_t ldc, int64_t sC, int64_t batch) {
  pthread_once(&blas_once, blas_load);
  if (!blas.sgemm) { /* loaded with dgemm, or neither */
    fsT_seterr("%s", blas.error);
    return -1;
  }
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX ||
      ldc > INT32_MAX || batch > INT32_MAX) {
    fsT_seterr("matrix too large for 32-bit cuBLAS (%lldx%lldx%lld)", (long long)M,
               (long long)N, (long long)K);
    return -1;
  }
  if (M == 0 || N == 0 || batch == 0) return 0;
  /* cuBLAS wants every leading dimension >= 1, even of an empty operand */
  int la = lda > 0 ? (int)lda : 1, lb = ldb > 0 ? (int)ldb : 1;
  cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t st;
  fs_dtype low = sizeof(T) == 4 ? fsB_gemm_operands() : FS_F32;
  if (low != FS_F32 && K > 0) {
    uint16_t *a16 = low_copy(low, (const float *)A, ta, M, K, lda, sA, batch);
    uint16_t *b16 = a16 ? low_copy(low, (const float *)B, tb, K, N, ldb, sB, batch) : NULL;
    if (!b16) {
      fscu_scratch_free(a16);
      return -1;
    }
    st = gemm_low(low == FS_BF16 ? CUDA_R_16BF : CUDA_R_16F, opb, opa, (int)N, (int)M, (int)K, &alpha, b16, lb, sB,
                  a16, la, sA, &beta, C, (int)ldc, sC, (int)batch);
    fscu_scratch_free(a16); /* stream-ordered: freed after the product has read it */
    fscu_scratch_free(b16);
  } else
    st = batch == 1
          ? gemm_one(opb, opa, (int)N, (int)M, (int)K, &alpha, B, lb, A, la, &beta, C, (int)ldc)
          : gemm_batch(opb, opa, (int)N, (int)M, (int)K, &alpha, B, lb, sB, A, la, sA, &beta, C, (int)ldc, sC,
                       (int)batch);
  if (st != CUBLAS_STATUS_SUCCESS) {
    fsT_seterr("cuBLAS %s (%lldx%lldx%lld) failed: %s",
               sizeof(T) == 8 ? "dgemm" : low == FS_BF16 ? "GemmEx (bfloat16)" : low == FS_F16 ? "GemmEx (float16)" : "sgemm",
               (long long)M, (long long)N, (long long)K, blas.status(st));
    return -1;
  }
  return fscu_pending("gemm");
}

int fscu_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, int64_t sA, const float *B, int64_t ldb, int64_t sB,
              float beta, float *C, int64_t ldc, int64_t sC, int64_t batch) {
  return gemm_t(ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
}

int fscu_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
              const double *A, int64_t lda, int64_t sA, const double *B, int64_t ldb, int64_t sB,
              double beta, double *C, int64_t ldc, int64_t sC, int64_t batch) {
  return gemm_t(ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
}

static int cuda_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                     float *C, int64_t ldc) {
  return fscu_gemm(ta, tb, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

/* --- memory --------------------------------------------------------------- */

static void *cuda_alloc(size_t nbytes) { return fscu_scratch(nbytes, "device allocation"); }
static void cuda_free(void *p, size_t nbytes) { fscu_scratch_free(p); }
static void cuda_zero(void *p, size_t nbytes) { cudaMemset(p, 0, nbytes); }
static void cuda_copy(void *dst, const void *src, size_t nbytes) {
  cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToDevice);
}

/* --- fills ---------------------------------------------------------------- */

__global__ void fill_k(float *dst, size_t n, float v) {
  FSCU_FOR(i, n) dst[i] = v;
}

static void cuda_fill(float *dst, size_t n, float v) {
  if (n) fill_k<<<fscu_blocks(n), FSCU_THREADS>>>(dst, n, v);
}

/* dst[i] = element offset + i of the stream, as fsR_uniform_key (bitwise).
 * The counter key + (offset + i + 1) gamma advances by stride * gamma per
 * grid-stride step (mod 2^64, as fsR_bits computes it): one 64-bit multiply
 * per element fewer, and the fill is bound by integer throughput. */
__global__ void uniform_k(float *dst, size_t n, uint64_t key, size_t offset, float lo, float span) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
  uint64_t z = key + (offset + i + 1) * FSR_GAMMA, dz = stride * FSR_GAMMA;
  for (; i < n; i += stride, z += dz) dst[i] = fsR_affine(lo, span, fsR_bits_u01(fsR_mix(z)));
}

static void cuda_fill_uniform(float *dst, size_t n, uint64_t key, size_t offset, float lo, float hi) {
  if (n) uniform_k<<<fscu_blocks(n), FSCU_THREADS>>>(dst, n, key, offset, lo, hi - lo);
}

/* One thread per Box-Muller pair j covering [offset, offset + n); a pair may
 * straddle either end of the slice.  log, sin and cos run in double and round
 * to float: nearer glibc's logf/sinf/cosf (under 1 ulp) than CUDA's float
 * versions (up to 2 ulp), so values agree with the cpu's within 2 ulp. */
__global__ void normal_k(float *dst, size_t n, uint64_t key, size_t offset, float mean, float std) {
  size_t j0 = offset / 2, pairs = (offset + n - 1) / 2 - j0 + 1;
  FSCU_FOR(p, pairs) {
    uint64_t j = j0 + p;
    float u1, a;
    fsR_pair_inputs(key, j, &u1, &a);
    float r = sqrtf(__fmul_rn(-2.0f, (float)log((double)u1)));
    double s, c;
    sincos((double)a, &s, &c);
    size_t i0 = 2 * j - offset; /* wraps for the pair before offset: tested by < n */
    if (2 * j >= offset) dst[i0] = fsR_affine(mean, std, __fmul_rn(r, (float)c));
    if (i0 + 1 < n) dst[i0 + 1] = fsR_affine(mean, std, __fmul_rn(r, (float)s));
  }
}

static void cuda_fill_normal(float *dst, size_t n, uint64_t key, size_t offset, float mean, float std) {
  if (n) normal_k<<<fscu_blocks(n / 2 + 1), FSCU_THREADS>>>(dst, n, key, offset, mean, std);
}

/* --- elementwise ---------------------------------------------------------- */

__global__ void binary_k(fsB_binop op, size_t n, const float *a, size_t sa, const float *b,
                         size_t sb, float *out) {
  FSCU_FOR(i, n) {
    float x = a[i * sa], y = b[i * sb];
    out[i] = op == FSB_ADD ? x + y : op == FSB_SUB ? x - y : op == FSB_MUL ? x * y : x / y;
  }
}

static void cuda_binary(fsB_binop op, size_t n, const float *a, size_t sa, const float *b,
                        size_t sb, float *out) {
  if (n) binary_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, n, a, sa, b, sb, out);
}

/* --- optimizers (the cpu's update rules and float rounding of scalars) ---- */

/* Each kernel is the cpu one (backend_cpu.c) with the same fused
 * multiply-adds, so torch's rounding is kept up to the GPU's sqrt and
 * division (test_cuda.c compares at a stated tolerance). */
__global__ void sgd_k(size_t n, float *p, const float *g, float *buf, bool first, bool momentum,
                      bool wd, float flr, float fmom, float fdamp, float fwd, bool nesterov,
                      bool maximize) {
  FSCU_FOR(i, n) {
    float d = maximize ? -g[i] : g[i];
    if (wd) d = fmaf(fwd, p[i], d);
    if (momentum) {
      buf[i] = first ? d : fmaf(fdamp, d, __fmul_rn(buf[i], fmom));
      d = nesterov ? fmaf(fmom, buf[i], d) : buf[i];
    }
    p[i] = fmaf(flr, d, p[i]);
  }
}

static void cuda_sgd_update(size_t n, float *p, const float *g, float *buf, bool first, double lr,
                            double momentum, double dampening, double wd, bool nesterov,
                            bool maximize) {
  if (n)
    sgd_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, p, g, buf, first, momentum != 0, wd != 0,
                                            (float)-lr, (float)momentum, (float)(1 - dampening),
                                            (float)wd, nesterov, maximize);
}

__global__ void adam_k(size_t n, float *p, const float *g, float *m, float *v, float *vmax,
                       bool decoupled, bool wd, bool maximize, float neg_step, float bc2_sqrt,
                       float eps, float decay, float fwd, float b1, float b2, float c1, float c2) {
  FSCU_FOR(i, n) {
    float pi = p[i], gi = maximize ? -g[i] : g[i];
    if (decoupled) pi = __fmul_rn(pi, decay);
    else if (wd) gi = fmaf(fwd, pi, gi);
    m[i] = fmaf(c1, gi, __fmul_rn(m[i], b1));
    v[i] = fmaf(__fmul_rn(c2, gi), gi, __fmul_rn(v[i], b2));
    float vi = v[i];
    if (vmax) {
      vi = vmax[i] >= vi || isnan(vmax[i]) ? vmax[i] : vi;
      vmax[i] = vi;
    }
    p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(neg_step, m[i]), __fadd_rn(__fdiv_rn(sqrtf(vi), bc2_sqrt), eps)));
  }
}

static void cuda_adam_update(size_t n, float *p, const float *g, float *m, float *v, float *vmax,
                             double lr, double beta1, double beta2, double eps, double wd,
                             bool decoupled, bool maximize, int64_t step) {
  double bc1 = 1 - pow(beta1, (double)step), bc2 = 1 - pow(beta2, (double)step);
  if (n)
    adam_k<<<fscu_blocks(n), FSCU_THREADS>>>(
        n, p, g, m, v, vmax, decoupled, wd != 0, maximize, (float)-(lr / bc1), (float)sqrt(bc2),
        (float)eps, (float)(1 - lr * wd), (float)wd, (float)beta1, (float)beta2,
        (float)(1 - beta1), (float)(1 - beta2));
}

__global__ void rmsprop_k(size_t n, float *p, const float *g, float *sq, float *ga, float *buf,
                          bool wd, bool maximize, float flr, float fa, float c, float eps, float fwd,
                          float fmom) {
  FSCU_FOR(i, n) {
    float gi = maximize ? -g[i] : g[i];
    if (wd) gi = fmaf(fwd, p[i], gi);
    sq[i] = fmaf(__fmul_rn(c, gi), gi, __fmul_rn(sq[i], fa));
    float avg;
    if (ga) {
      ga[i] = fmaf(c, gi, __fmul_rn(ga[i], fa));
      avg = sqrtf(fmaf(-ga[i], ga[i], sq[i]));
    } else {
      avg = sqrtf(sq[i]);
    }
    avg = __fadd_rn(avg, eps);
    if (buf) {
      buf[i] = __fadd_rn(__fmul_rn(buf[i], fmom), __fdiv_rn(gi, avg));
      p[i] = fmaf(flr, buf[i], p[i]);
    } else {
      p[i] = __fadd_rn(p[i], __fdiv_rn(__fmul_rn(flr, gi), avg));
    }
  }
}

static void cuda_rmsprop_update(size_t n, float *p, const float *g, float *sq, float *ga, float *buf,
                                double lr, double alpha, double eps, double wd, double momentum,
                                bool maximize) {
  if (n)
    rmsprop_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, p, g, sq, ga, buf, wd != 0, maximize, (float)-lr,
                                                (float)alpha, (float)(1 - alpha), (float)eps,
                                                (float)wd, (float)momentum);
}

__global__ void adagrad_k(size_t n, float *p, const float *g, float *sum, bool wd, bool maximize,
                          float fclr, float eps, float fwd) {
  FSCU_FOR(i, n) {
    float gi = maximize ? -g[i] : g[i];
    if (wd) gi = fmaf(fwd, p[i], gi);
    sum[i] = fmaf(gi, gi, sum[i]);
    p[i] = __fadd_rn(p[i], __fdiv_rn(__fmul_rn(fclr, gi), __fadd_rn(sqrtf(sum[i]), eps)));
  }
}

static void cuda_adagrad_update(size_t n, float *p, const float *g, float *sum, double clr, double eps,
                                double wd, bool maximize) {
  if (n)
    adagrad_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, p, g, sum, wd != 0, maximize, (float)-clr,
                                                (float)eps, (float)wd);
}

__global__ void adadelta_k(size_t n, float *p, const float *g, float *sq, float *acc, bool wd, bool maximize,
                           float flr, float rho, float c, float eps, float fwd) {
  FSCU_FOR(i, n) {
    float gi = maximize ? -g[i] : g[i];
    if (wd) gi = fmaf(fwd, p[i], gi);
    sq[i] = fmaf(__fmul_rn(c, gi), gi, __fmul_rn(sq[i], rho));
    float std = sqrtf(__fadd_rn(sq[i], eps));
    float delta = __fmul_rn(__fdiv_rn(sqrtf(__fadd_rn(acc[i], eps)), std), gi);
    acc[i] = fmaf(__fmul_rn(c, delta), delta, __fmul_rn(acc[i], rho));
    p[i] = fmaf(flr, delta, p[i]);
  }
}

static void cuda_adadelta_update(size_t n, float *p, const float *g, float *sq, float *acc, double lr,
                                 double rho, double eps, double wd, bool maximize) {
  if (n)
    adadelta_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, p, g, sq, acc, wd != 0, maximize, (float)-lr, (float)rho,
                                                 (float)(1 - rho), (float)eps, (float)wd);
}

/* --- bfloat16 (tensor.h's conversions themselves) -------------------------- */

__global__ void to_bf16_k(uint16_t *dst, const float *src, size_t n) {
  FSCU_FOR(i, n) dst[i] = fsT_f32_to_bf16(src[i]);
}

__global__ void from_bf16_k(float *dst, const uint16_t *src, size_t n) {
  FSCU_FOR(i, n) dst[i] = fsT_bf16_to_f32(src[i]);
}

extern "C" int fsCU_f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
  if (n) to_bf16_k<<<fscu_blocks(n), FSCU_THREADS>>>(dst, src, n);
  return fscu_pending("f32_to_bf16");
}

/* --- conversions between the float types (fsB_backend.convert) ----------- */

/* fsT_convert's rounding: through float to the 16-bit types (round to
 * nearest even, as the cpu's), float64 to float32 correctly rounded */
__device__ static double load_float(fs_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case FS_F32: return ((const float *)p)[i];
  case FS_F64: return ((const double *)p)[i];
  case FS_BF16: return fsT_bf16_to_f32(((const uint16_t *)p)[i]);
  default: return __half2float(__ushort_as_half(((const uint16_t *)p)[i]));
  }
}

__global__ void convert_k(fs_dtype to, void *dst, fs_dtype from, const void *src, size_t n) {
  FSCU_FOR(i, n) {
    double v = load_float(from, src, i);
    switch (to) {
    case FS_F32: ((float *)dst)[i] = (float)v; break;
    case FS_F64: ((double *)dst)[i] = v; break;
    case FS_BF16: ((uint16_t *)dst)[i] = fsT_f32_to_bf16((float)v); break;
    default: ((uint16_t *)dst)[i] = __half_as_ushort(__float2half_rn((float)v)); break;
    }
  }
}

static bool float_type(fs_dtype dt) { return dt == FS_F32 || dt == FS_F64 || dt == FS_BF16 || dt == FS_F16; }

static int cuda_convert(fs_dtype to, void *dst, fs_dtype from, const void *src, size_t n) {
  if (!float_type(to) || !float_type(from)) return -1;
  if (n) convert_k<<<fscu_blocks(n), FSCU_THREADS>>>(to, dst, from, src, n);
  return fscu_pending("convert");
}

extern "C" int fsCU_bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
  if (n) from_bf16_k<<<fscu_blocks(n), FSCU_THREADS>>>(dst, src, n);
  return fscu_pending("bf16_to_f32");
}

extern "C" const fsB_backend fsB_cuda = {
  "cuda",
  cuda_alloc, cuda_free, cuda_zero, cuda_copy,
  fsCU_upload, fsCU_download, fsCU_sync,
  cuda_fill, cuda_fill_uniform, cuda_fill_normal,
  cuda_gemm, cuda_binary, fscu_axpy<float>, fscu_scale<float>, /* cuda_common.cuh's level-1 loops */
  fscu_clamp<float>, fscu_sum<float>, fscu_sumsq<float>, fscu_absmax<float>,
  cuda_sgd_update, cuda_adam_update, cuda_rmsprop_update, cuda_adagrad_update, cuda_adadelta_update,
  &fsN_cuda,
  /* .ops = */ &fsU_cuda, /* partial (ops_cuda.cu): the other ops stage through host memory */
  /* .f64 = */ &fsB_f64_cuda, /* 64-true (f64_cuda.cu) */
  cuda_convert,
  /* .low = */ &fsB_low_cuda, /* bfloat16/float16 arithmetic and activations (low_cuda.cu) */
};
