/* backend_cpu.c -- the cpu function table: malloc'ed memory, OpenBLAS GEMM,
 * plain loops the compiler vectorizes. */
#define _GNU_SOURCE /* posix_memalign, MADV_HUGEPAGE */
#include "backend.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "blas.h"
#include "f64_kernels.h"
#include "nn.h"
#include "ops.h"
#include "rng.h"
#include "vmath.h"
#include "config.h"
#ifdef FS_HAVE_CUDA
#include "backend_cuda.h"
#endif

/* Large buffers get 2 MiB alignment and transparent huge pages: first-touch
 * page faults dominate materialization otherwise (4 KiB faults ~13 us each). */
#define HUGE_BYTES (4u << 20)

/* Freed blocks of CACHE_MIN bytes and more are kept for reuse by exact size:
 * a training step frees and reallocates the same activation and gradient
 * sizes every step, and memory handed back to the kernel would fault again
 * page by page. */
#define CACHE_MIN (64u << 10)
#define CACHE_SLOTS 512
#define CACHE_MAX_BYTES ((size_t)1 << 30)

static struct { void *p; size_t n; } cache[CACHE_SLOTS];
static size_t ncache, cached_bytes;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void *cache_take(size_t nbytes) {
  void *p = NULL;
  pthread_mutex_lock(&cache_lock);
  for (size_t i = ncache; i-- > 0;)
    if (cache[i].n == nbytes) {
      p = cache[i].p;
      cached_bytes -= nbytes;
      cache[i] = cache[--ncache];
      break;
    }
  pthread_mutex_unlock(&cache_lock);
  return p;
}

static bool cache_put(void *p, size_t nbytes) {
  bool kept = false;
  pthread_mutex_lock(&cache_lock);
  if (ncache < CACHE_SLOTS && cached_bytes + nbytes <= CACHE_MAX_BYTES) {
    cache[ncache].p = p;
    cache[ncache++].n = nbytes;
    cached_bytes += nbytes;
    kept = true;
  }
  pthread_mutex_unlock(&cache_lock);
  return kept;
}

/* At exit, so leak checkers see every block returned. */
__attribute__((destructor)) static void cache_drain(void) {
  for (size_t i = 0; i < ncache; i++) free(cache[i].p);
  ncache = cached_bytes = 0;
}

static void *cpu_alloc(size_t nbytes) {
  void *p = nbytes >= CACHE_MIN ? cache_take(nbytes) : NULL;
  if (p) return p;
  size_t align = nbytes >= HUGE_BYTES ? (2u << 20) : 64;
  if (posix_memalign(&p, align, nbytes)) return NULL;
#ifdef MADV_HUGEPAGE
  if (nbytes >= HUGE_BYTES) madvise(p, nbytes, MADV_HUGEPAGE);
#endif
  return p;
}

static void cpu_free(void *p, size_t nbytes) {
  if (nbytes < CACHE_MIN || !cache_put(p, nbytes)) free(p);
}

static void cpu_zero(void *p, size_t nbytes) { memset(p, 0, nbytes); }
static void cpu_copy(void *dst, const void *src, size_t nbytes) { memmove(dst, src, nbytes); }
static int cpu_host_copy(void *dst, const void *src, size_t nbytes) {
  memmove(dst, src, nbytes);
  return 0;
}
static int cpu_sync(void) { return 0; }

static void cpu_fill(float *dst, size_t n, float v) {
  for (size_t i = 0; i < n; i++) dst[i] = v;
}

static inline __attribute__((always_inline)) float binop1(fsB_binop op, float x, float y) {
  switch (op) {
  case FSB_ADD: return x + y;
  case FSB_SUB: return x - y;
  case FSB_MUL: return x * y;
  case FSB_DIV: return x / y;
  }
  return 0;
}

/* One loop per op and stride pair, both constants once inlined: with a
 * stride only known at run time (a[i * sa]) the loop compiled to gathers. */
static inline __attribute__((always_inline)) void binary_strided(fsB_binop op, size_t n, const float *a,
                                                                size_t sa, const float *b, size_t sb,
                                                                float *out) {
  if (sa == 1 && sb == 1) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = binop1(op, a[i], b[i]);
  } else if (sa == 1) {
    float y = b[0];
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = binop1(op, a[i], y);
  } else if (sb == 1) {
    float x = a[0];
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = binop1(op, x, b[i]);
  } else {
    float v = binop1(op, a[0], b[0]);
    for (size_t i = 0; i < n; i++) out[i] = v;
  }
}

FS_VECTOR_TARGET
static void cpu_binary(fsB_binop op, size_t n, const float *a, size_t sa,
                       const float *b, size_t sb, float *out) {
  switch (op) { /* strides are 0 (a broadcast scalar) or 1 */
  case FSB_ADD: binary_strided(FSB_ADD, n, a, sa, b, sb, out); break;
  case FSB_SUB: binary_strided(FSB_SUB, n, a, sa, b, sb, out); break;
  case FSB_MUL: binary_strided(FSB_MUL, n, a, sa, b, sb, out); break;
  case FSB_DIV: binary_strided(FSB_DIV, n, a, sa, b, sb, out); break;
  }
}

/* axpy, scale, clamp and the reductions: one text with f64_kernels.c's */
#include "blas1_typed.h"

/* The optimizer updates replay torch 1.13's _single_tensor_* tensor ops
 * element by element, with the rounding of its CPU kernels (measured against
 * torch on this machine, tests/parity/optim_parity.py): `a.add_(b, alpha=s)`
 * is one fused multiply-add fmaf(s, b, a); `a.addcmul_(b, c, value=s)` is
 * fmaf(s * b, c, a); `a.addcdiv_(b, c, value=s)` is a + s * b / c; `mul_`
 * and `/ scalar` round once.  Python-float scalars are rounded to float as
 * torch passes them to a float kernel. */

/* Each update is one body for float32 parameters and for bfloat16/float16
 * ones (fsB_update_low): R(x) rounds each tensor op's result to the
 * parameter's type, as torch's ops on low-precision tensors do (they compute
 * in float and store the type), and is the identity for float32, where the
 * float arithmetic rounds at the same places by itself.  torch 1.13 also
 * converts a Python scalar to the tensor's type for mul_, div, add and
 * add_'s alpha (not for addcmul_/addcdiv_'s value): those scalars go
 * through R too (measured against torch, tests/parity). */
#define R(x) (low == FS_F32 ? (x) : fsT_round_to(low, (x)))

/* _single_tensor_sgd: d = g (+ wd p); buf = d on its first step, else
 * momentum buf + (1 - dampening) d; d = nesterov ? d + momentum buf : buf;
 * p -= lr d. */
static inline __attribute__((always_inline)) void
sgd_body(fs_dtype low, size_t n, float *p, const float *g, float *buf, bool first, double lr,
         double momentum, double dampening, double wd, bool nesterov, bool maximize) {
  float flr = R((float)-lr), fmom = R((float)momentum), fdamp = R((float)(1 - dampening)), fwd = R((float)wd);
  for (size_t i = 0; i < n; i++) {
    float d = maximize ? -g[i] : g[i];
    if (wd != 0) d = R(fmaf(fwd, p[i], d));
    if (momentum != 0) {
      buf[i] = first ? d : R(fmaf(fdamp, d, R(buf[i] * fmom)));
      d = nesterov ? R(fmaf(fmom, buf[i], d)) : buf[i];
    }
    p[i] = R(fmaf(flr, d, p[i]));
  }
}

FS_VECTOR_TARGET
static void cpu_sgd_update(size_t n, float *p, const float *g, float *buf, bool first,
                           double lr, double momentum, double dampening, double wd, bool nesterov,
                           bool maximize) {
  sgd_body(FS_F32, n, p, g, buf, first, lr, momentum, dampening, wd, nesterov, maximize);
}

/* _single_tensor_adam / _single_tensor_adamw: AdamW first decays
 * p *= 1 - lr wd, Adam adds wd p to the gradient; then m = b1 m + (1-b1) g,
 * v = b2 v + (1-b2) g^2, vmax = max(vmax, v) with amsgrad, and
 * p -= lr / (1-b1^t) * m / (sqrt(v or vmax) / sqrt(1-b2^t) + eps). */
static inline __attribute__((always_inline)) void
adam_body(fs_dtype low, size_t n, float *p, const float *g, float *m, float *v, float *vmax,
          double lr, double beta1, double beta2, double eps, double wd, bool decoupled,
          bool maximize, int64_t step) {
  double bc1 = 1 - pow(beta1, (double)step), bc2 = 1 - pow(beta2, (double)step);
  float neg_step = (float)-(lr / bc1), bc2_sqrt = R((float)sqrt(bc2)), feps = R((float)eps);
  float decay = R((float)(1 - lr * wd)), fwd = R((float)wd);
  float b1 = R((float)beta1), b2 = R((float)beta2), c1 = R((float)(1 - beta1)), c2 = (float)(1 - beta2);
  /* The flags as floats: GCC 12 finds no vector type for a loop that
   * selects on a bool and leaves it scalar.  g * -1 and p * 1 are exact. */
  float g_sign = maximize ? -1.0f : 1.0f, p_decay = decoupled ? decay : 1.0f;
  float coupled_wd = !decoupled && wd != 0 ? 1.0f : 0.0f;
#pragma omp simd
  for (size_t i = 0; i < n; i++) {
    float pi = R(p[i] * p_decay), gi = g[i] * g_sign;
    gi = coupled_wd != 0 ? R(fmaf(fwd, p[i], gi)) : gi;
    m[i] = R(fmaf(c1, gi, R(m[i] * b1)));
    v[i] = R(fmaf(c2 * gi, gi, R(v[i] * b2)));
    float vi = v[i];
    if (vmax) { /* torch.maximum: a NaN wins */
      vi = vmax[i] >= vi || isnan(vmax[i]) ? vmax[i] : vi;
      vmax[i] = vi;
    }
    p[i] = R(pi + neg_step * m[i] / R(R(R(sqrtf(vi)) / bc2_sqrt) + feps));
  }
}

/* Two calls so that each loop is free of the amsgrad branch (a load from a
 * pointer that may be NULL cannot be if-converted): both then vectorize. */
FS_VECTOR_TARGET
static void cpu_adam_update(size_t n, float *p, const float *g, float *m, float *v, float *vmax,
                            double lr, double beta1, double beta2, double eps, double wd,
                            bool decoupled, bool maximize, int64_t step) {
  if (vmax) adam_body(FS_F32, n, p, g, m, v, vmax, lr, beta1, beta2, eps, wd, decoupled, maximize, step);
  else adam_body(FS_F32, n, p, g, m, v, NULL, lr, beta1, beta2, eps, wd, decoupled, maximize, step);
}

/* _single_tensor_rmsprop: g (+ wd p); sq = alpha sq + (1-alpha) g^2;
 * centered: ga = alpha ga + (1-alpha) g, avg = sqrt(sq - ga^2), else
 * sqrt(sq); avg += eps; with momentum buf = momentum buf + g / avg and
 * p -= lr buf, else p -= lr g / avg. */
static inline __attribute__((always_inline)) void
rmsprop_body(fs_dtype low, size_t n, float *p, const float *g, float *sq, float *ga, float *buf,
             double lr, double alpha, double eps, double wd, double momentum, bool maximize) {
  float fa = R((float)alpha), c = (float)(1 - alpha), feps = R((float)eps), fwd = R((float)wd);
  float fmom = R((float)momentum), flr = (float)-lr;
  for (size_t i = 0; i < n; i++) {
    float gi = maximize ? -g[i] : g[i];
    if (wd != 0) gi = R(fmaf(fwd, p[i], gi));
    sq[i] = R(fmaf(c * gi, gi, R(sq[i] * fa)));
    float avg;
    if (ga) {
      ga[i] = R(fmaf(R(c), gi, R(ga[i] * fa)));
      avg = R(sqrtf(R(fmaf(-1.0f * ga[i], ga[i], sq[i]))));
    } else {
      avg = R(sqrtf(sq[i]));
    }
    avg = R(avg + feps);
    if (buf) {
      buf[i] = R(R(buf[i] * fmom) + 1.0f * gi / avg);
      p[i] = R(fmaf(R(flr), buf[i], p[i]));
    } else {
      p[i] = R(p[i] + flr * gi / avg);
    }
  }
}

FS_VECTOR_TARGET
static void cpu_rmsprop_update(size_t n, float *p, const float *g, float *sq, float *ga, float *buf,
                               double lr, double alpha, double eps, double wd, double momentum,
                               bool maximize) {
  rmsprop_body(FS_F32, n, p, g, sq, ga, buf, lr, alpha, eps, wd, momentum, maximize);
}

/* _single_tensor_adagrad (dense): g (+ wd p); sum += g^2;
 * p -= clr g / (sqrt(sum) + eps). */
static inline __attribute__((always_inline)) void
adagrad_body(fs_dtype low, size_t n, float *p, const float *g, float *sum, double clr, double eps,
             double wd, bool maximize) {
  float fclr = (float)-clr, feps = R((float)eps), fwd = R((float)wd);
#pragma omp simd
  for (size_t i = 0; i < n; i++) {
    float gi = maximize ? -g[i] : g[i];
    gi = wd != 0 ? R(fmaf(fwd, p[i], gi)) : gi;
    sum[i] = R(fmaf(1.0f * gi, gi, sum[i]));
    p[i] = R(p[i] + fclr * gi / R(R(sqrtf(sum[i])) + feps));
  }
}

FS_VECTOR_TARGET
static void cpu_adagrad_update(size_t n, float *p, const float *g, float *sum, double clr, double eps,
                               double wd, bool maximize) {
  adagrad_body(FS_F32, n, p, g, sum, clr, eps, wd, maximize);
}

/* _single_tensor_adadelta: g (+ wd p); sq = rho sq + (1-rho) g^2;
 * delta = sqrt(acc + eps) / sqrt(sq + eps) * g; acc = rho acc + (1-rho) delta^2;
 * p -= lr delta. */
static inline __attribute__((always_inline)) void
adadelta_body(fs_dtype low, size_t n, float *p, const float *g, float *sq, float *acc, double lr, double rho,
              double eps, double wd, bool maximize) {
  float frho = R((float)rho), c = (float)(1 - rho), feps = R((float)eps), fwd = R((float)wd);
  float flr = R((float)-lr);
#pragma omp simd
  for (size_t i = 0; i < n; i++) {
    float gi = maximize ? -g[i] : g[i];
    gi = wd != 0 ? R(fmaf(fwd, p[i], gi)) : gi;
    sq[i] = R(fmaf(c * gi, gi, R(sq[i] * frho)));
    float std = R(sqrtf(R(sq[i] + feps)));
    float delta = R(R(R(sqrtf(R(acc[i] + feps))) / std) * gi);
    acc[i] = R(fmaf(c * delta, delta, R(acc[i] * frho)));
    p[i] = R(fmaf(flr, delta, p[i]));
  }
}

FS_VECTOR_TARGET
static void cpu_adadelta_update(size_t n, float *p, const float *g, float *sq, float *acc, double lr,
                                double rho, double eps, double wd, bool maximize) {
  adadelta_body(FS_F32, n, p, g, sq, acc, lr, rho, eps, wd, maximize);
}

void fsB_update_low(fs_dtype low, const fsB_update *u) {
  switch (u->kind) {
  case FSB_UPD_SGD:
    sgd_body(low, u->n, u->p, u->g, u->s[0], u->first, u->lr, u->momentum, u->dampening, u->wd,
             u->nesterov, u->maximize);
    break;
  case FSB_UPD_ADAM:
    adam_body(low, u->n, u->p, u->g, u->s[0], u->s[1], u->s[2], u->lr, u->beta1, u->beta2, u->eps,
              u->wd, u->decoupled, u->maximize, u->step);
    break;
  case FSB_UPD_RMSPROP:
    rmsprop_body(low, u->n, u->p, u->g, u->s[0], u->s[2], u->s[1], u->lr, u->alpha, u->eps, u->wd,
                 u->momentum, u->maximize);
    break;
  case FSB_UPD_ADAGRAD:
    adagrad_body(low, u->n, u->p, u->g, u->s[0], u->lr, u->eps, u->wd, u->maximize);
    break;
  case FSB_UPD_ADADELTA:
    adadelta_body(low, u->n, u->p, u->g, u->s[0], u->s[1], u->lr, u->rho, u->eps, u->wd, u->maximize);
    break;
  }
}
#undef R

/* adam_split's arguments, handed to its parts */
typedef struct adam_args {
  float *p;
  const float *g;
  float *m, *v, *vmax;
  double lr, beta1, beta2, eps, wd;
  bool decoupled, maximize;
  int64_t step;
} adam_args;

/* ---- elementwise kernels and sums over the worker pool (fsB_parallel) ----
 * In parts of CPU_PART elements, fixed by n alone: the elementwise kernels
 * compute each element as the one-call kernel does, so the split changes
 * no bits; a sum of squares is summed per part (in double) and the parts'
 * sums are added in part order, the same at any thread count.  Below
 * 2 CPU_PART elements a kernel runs here, whole: handing out costs more. */
enum { CPU_PART = 16384 };
typedef struct cpu_split_job {
  size_t n;
  fsB_binop op;
  const float *a, *b;
  size_t sa, sb;
  float *out;
  double *sums;
  const adam_args *adam;
} cpu_split_job;

static size_t cpu_parts(size_t n) { return n < 2 * CPU_PART || n / CPU_PART >= INT32_MAX ? 0 : (n + CPU_PART - 1) / CPU_PART; }

/* elements of the part starting at `at`: CPU_PART, fewer for the last */
static size_t part_len(const cpu_split_job *j, size_t at) { return j->n - at < CPU_PART ? j->n - at : CPU_PART; }

static int binary_part(void *ctx, int part, int worker) {
  (void)worker;
  const cpu_split_job *j = ctx;
  size_t at = (size_t)part * CPU_PART, m = part_len(j, at);
  cpu_binary(j->op, m, j->a + at * j->sa, j->sa, j->b + at * j->sb, j->sb, j->out + at);
  return 0;
}

static void binary_split(fsB_binop op, size_t n, const float *a, size_t sa, const float *b, size_t sb, float *out) {
  size_t parts = cpu_parts(n);
  if (!parts) cpu_binary(op, n, a, sa, b, sb, out);
  else fsB_parallel((int)parts, binary_part, &(cpu_split_job){n, op, a, b, sa, sb, out, NULL, NULL});
}

static int scale_part(void *ctx, int part, int worker) {
  (void)worker;
  const cpu_split_job *j = ctx;
  size_t at = (size_t)part * CPU_PART, m = part_len(j, at);
  cpu_scale(m, j->a[0], j->out + at);
  return 0;
}

static void scale_split(size_t n, float alpha, float *x) {
  size_t parts = cpu_parts(n);
  if (!parts) cpu_scale(n, alpha, x);
  else fsB_parallel((int)parts, scale_part, &(cpu_split_job){n, FSB_MUL, &alpha, NULL, 0, 0, x, NULL, NULL});
}

static int sumsq_part(void *ctx, int part, int worker) {
  (void)worker;
  const cpu_split_job *j = ctx;
  size_t at = (size_t)part * CPU_PART, m = part_len(j, at);
  j->sums[part] = cpu_sumsq(m, j->a + at);
  return 0;
}

static double sumsq_split(size_t n, const float *x) {
  size_t parts = cpu_parts(n);
  double *sums = parts ? malloc(parts * sizeof *sums) : NULL;
  if (!sums) return cpu_sumsq(n, x); /* small, or no memory for the parts' sums: one pass here */
  fsB_parallel((int)parts, sumsq_part, &(cpu_split_job){n, FSB_ADD, x, NULL, 1, 0, NULL, sums, NULL});
  double s = 0;
  for (size_t i = 0; i < parts; i++) s += sums[i];
  free(sums);
  return s;
}

static int adam_part(void *ctx, int part, int worker) {
  (void)worker;
  const cpu_split_job *j = ctx;
  const adam_args *u = j->adam;
  size_t at = (size_t)part * CPU_PART, m = part_len(j, at);
  cpu_adam_update(m, u->p + at, u->g + at, u->m + at, u->v + at, u->vmax ? u->vmax + at : NULL, u->lr, u->beta1,
                  u->beta2, u->eps, u->wd, u->decoupled, u->maximize, u->step);
  return 0;
}

static void adam_split(size_t n, float *p, const float *g, float *m, float *v, float *vmax, double lr, double beta1,
                       double beta2, double eps, double wd, bool decoupled, bool maximize, int64_t step) {
  size_t parts = cpu_parts(n);
  if (!parts) {
    cpu_adam_update(n, p, g, m, v, vmax, lr, beta1, beta2, eps, wd, decoupled, maximize, step);
    return;
  }
  adam_args u = {p, g, m, v, vmax, lr, beta1, beta2, eps, wd, decoupled, maximize, step};
  fsB_parallel((int)parts, adam_part, &(cpu_split_job){n, FSB_ADD, NULL, NULL, 0, 0, NULL, NULL, &u});
}

static int cpu_convert(fs_dtype to, void *dst, fs_dtype from, const void *src, size_t n) {
  fsT_convert(to, dst, from, src, n);
  return 0;
}

const fsB_backend fsB_cpu = {
  .name = "cpu",
  .alloc = cpu_alloc, .free = cpu_free, .zero = cpu_zero, .copy = cpu_copy, .convert = cpu_convert,
  .from_host = cpu_host_copy, .to_host = cpu_host_copy, .sync = cpu_sync,
  .fill = cpu_fill, .fill_uniform = fsR_uniform_key, .fill_normal = fsR_normal_key,
  .gemm = fsB_sgemm, .binary = binary_split, .axpy = cpu_axpy, .scale = scale_split,
  .clamp = cpu_clamp, .sum = cpu_sum, .sumsq = sumsq_split, .absmax = cpu_absmax,
  .sgd_update = cpu_sgd_update, .adam_update = adam_split,
  .rmsprop_update = cpu_rmsprop_update, .adagrad_update = cpu_adagrad_update,
  .adadelta_update = cpu_adadelta_update, .nn = &fsN_cpu, .ops = &fsU_cpu,
  .f64 = &fsB_f64_cpu,
};

static bool emulating; /* fsB_emulate_cuda was called */

void fsB_emulate_cuda(void) { emulating = true; }

const fsB_backend *fsB_get(fs_device dev) {
  switch (dev) {
  case FS_DEV_CPU: return &fsB_cpu;
  case FS_DEV_META: fsT_seterr("tensors on the meta device have no data"); return NULL;
  case FS_DEV_CUDA:
    if (emulating) return &fsB_emu_cuda;
#ifdef FS_HAVE_CUDA
    return fsCU_backend(); /* NULL + why when there is no device */
#endif
    /* fall through */
  default: fsT_seterr("no %s backend in this build", fsT_device_name(dev)); return NULL;
  }
}

int fsB_transfer(fs_device dst_dev, void *dst, fs_device src_dev, const void *src, size_t nbytes) {
  const fsB_backend *d = fsB_get(dst_dev), *s = fsB_get(src_dev);
  if (!d || !s) return -1;
  if (d == s) {
    d->copy(dst, src, nbytes);
    return 0;
  }
  if (s == &fsB_cpu) return d->from_host(dst, src, nbytes);
  if (d == &fsB_cpu) return s->to_host(dst, src, nbytes);
  void *host = malloc(nbytes ? nbytes : 1);
  if (!host) {
    fsT_seterr("out of memory staging %zu bytes", nbytes);
    return -1;
  }
  int rc = s->to_host(host, src, nbytes) < 0 || d->from_host(dst, host, nbytes) < 0 ? -1 : 0;
  free(host);
  return rc;
}
