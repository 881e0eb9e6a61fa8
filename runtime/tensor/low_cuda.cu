/* low_cuda.cu -- fsB_low_cuda: elementwise kernels that load and store
 * bfloat16 and float16 on the device (backend.h's fsB_low_kernels), so
 * same-shape and scalar arithmetic and the activations of low tensors make
 * no float32 copies.  Each is the cpu direct path's arithmetic
 * (autograd.c): the float32 op on the widened values (IEEE float32 on the
 * device as on the cpu: no --use_fast_math, no contraction of these
 * expressions), rounded once to nearest even; a gradient added by
 * fsG_low_grad_add's rule.  GELU and tanh look their result and
 * derivative up in fsN_act_low_table's tables, computed on the host by the
 * cpu's own kernels: the device's bits are the cpu's. */
#include "cuda_common.cuh"

#include <cuda_fp16.h>
#include <pthread.h>
#include <stdlib.h>

/* a float type's element i widened to float32 / v rounded into it */
__device__ static float widen(fs_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case FS_F32: return ((const float *)p)[i];
  case FS_BF16: return fsT_bf16_to_f32(((const uint16_t *)p)[i]);
  default: return __half2float(__ushort_as_half(((const uint16_t *)p)[i]));
  }
}

__device__ static void store(fs_dtype dt, void *p, size_t i, float v) {
  switch (dt) {
  case FS_F32: ((float *)p)[i] = v; break;
  case FS_BF16: ((uint16_t *)p)[i] = fsT_f32_to_bf16(v); break;
  default: ((uint16_t *)p)[i] = __half_as_ushort(__float2half_rn(v)); break;
  }
}

/* v rounded to dt's precision, as float32 (fsT_round_to) */
__device__ static float round_to(fs_dtype dt, float v) {
  switch (dt) {
  case FS_F32: return v;
  case FS_BF16: return fsT_bf16_to_f32(fsT_f32_to_bf16(v));
  default: return __half2float(__float2half_rn(v));
  }
}

/* contribution c into gradient d[i] of type dt (backend.h's rule) */
__device__ static void grad_add(fs_dtype dt, float *d, size_t i, float c, bool fresh) {
  if (dt == FS_F32) d[i] = fresh ? c : __fadd_rn(d[i], c);
  else d[i] = round_to(dt, __fadd_rn(fresh ? 0.0f : d[i], round_to(dt, c)));
}

__global__ void low_binary_k(fsB_binop op, size_t n, fs_dtype ta, const void *a, size_t sa, fs_dtype tb,
                             const void *b, size_t sb, fs_dtype to, void *out) {
  FSCU_FOR(i, n) {
    float x = widen(ta, a, i * sa), y = widen(tb, b, i * sb);
    store(to, out, i, op == FSB_ADD ? x + y : op == FSB_SUB ? x - y : op == FSB_MUL ? x * y : x / y);
  }
}

static int low_binary(fsB_binop op, size_t n, fs_dtype ta, const void *a, size_t sa, fs_dtype tb, const void *b,
                      size_t sb, fs_dtype to, void *out) {
  if (n) low_binary_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, n, ta, a, sa, tb, b, sb, to, out);
  return fscu_pending("low-precision arithmetic");
}

/* side's contribution as autograd.c's binary_low_part computes it */
__global__ void low_binary_bw_k(fsB_binop op, int side, size_t n, const float *g, fs_dtype ta, const void *a,
                                size_t sa, fs_dtype tb, const void *b, size_t sb, fs_dtype dt, float *d,
                                bool fresh) {
  FSCU_FOR(i, n) {
    float c;
    if (op == FSB_ADD || op == FSB_SUB) c = op == FSB_SUB && side ? -g[i] : g[i];
    else if (op == FSB_MUL) c = __fmul_rn(g[i], side ? widen(ta, a, i * sa) : widen(tb, b, i * sb));
    else {
      float y = widen(tb, b, i * sb);
      c = __fdiv_rn(g[i], y);
      if (side) c = -__fmul_rn(c, __fdiv_rn(widen(ta, a, i * sa), y));
    }
    grad_add(dt, d, i, c, fresh);
  }
}

static int low_binary_backward(fsB_binop op, int side, size_t n, const float *dout, fs_dtype ta, const void *a,
                               size_t sa, fs_dtype tb, const void *b, size_t sb, fs_dtype dt, float *d,
                               bool fresh) {
  if (n) low_binary_bw_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, side, n, dout, ta, a, sa, tb, b, sb, dt, d, fresh);
  return fscu_pending("low-precision arithmetic backward");
}

/* --- activations ----------------------------------------------------------- */

/* The device's copy of fsN_act_low_table for (act, type), uploaded on
 * first use and kept for the process (each 384 KB). */
typedef struct act_table {
  uint16_t *out;
  float *slope;
} act_table;

static act_table tables[FSN_TANH + 1][2];
static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;

static int table_of(fsN_act act, fs_dtype dt, act_table *t) {
  enum { U = 65536 };
  pthread_mutex_lock(&tables_lock);
  act_table *d = &tables[act][dt == FS_F16];
  int rc = 0;
  if (!d->out) {
    uint16_t *out = (uint16_t *)malloc(U * sizeof *out);
    float *slope = (float *)malloc(U * sizeof *slope);
    uint16_t *dout = NULL;
    float *dslope = NULL;
    rc = out && slope ? fsN_act_low_table(act, dt, out, slope) : (fsT_seterr("out of memory"), -1);
    if (rc == 0 && (!(dout = (uint16_t *)fscu_scratch(U * sizeof *dout, "activation table")) ||
                    !(dslope = (float *)fscu_scratch(U * sizeof *dslope, "activation table")) ||
                    fsCU_upload(dout, out, U * sizeof *out) || fsCU_upload(dslope, slope, U * sizeof *slope)))
      rc = -1;
    if (rc == 0) *d = (act_table){dout, dslope};
    else {
      if (dout) fscu_scratch_free(dout);
      if (dslope) fscu_scratch_free(dslope);
    }
    free(out);
    free(slope);
  }
  *t = *d;
  pthread_mutex_unlock(&tables_lock);
  return rc;
}

/* ReLU computed (x > 0 ? x : 0 keeps x's bits, else +0), the others looked up */
__global__ void low_act_fwd_k(bool relu, fs_dtype dt, size_t n, const uint16_t *x, uint16_t *y, const uint16_t *out) {
  FSCU_FOR(i, n) y[i] = relu ? (widen(dt, x, i) > 0 ? x[i] : 0) : out[x[i]];
}

static int low_act_forward(fsN_act act, fs_dtype dt, size_t n, const void *x, void *y) {
  act_table t = {NULL, NULL};
  if (act != FSN_RELU && table_of(act, dt, &t) < 0) return -1;
  if (n)
    low_act_fwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(act == FSN_RELU, dt, n, (const uint16_t *)x, (uint16_t *)y, t.out);
  return fscu_pending("low-precision activation");
}

/* the contribution as the cpu kernel adds it to a zeroed float32 buffer:
 * 0 + (x > 0 ? dout : 0) for ReLU (dout itself: 0 * inf would be NaN),
 * 0 + dout * slope for the others */
__global__ void low_act_bwd_k(bool relu, fs_dtype dt, size_t n, float *dx, bool fresh, const float *dout,
                              const uint16_t *x, const float *slope) {
  FSCU_FOR(i, n) {
    float c = relu ? (widen(dt, x, i) > 0 ? dout[i] : 0.0f) : __fmul_rn(dout[i], slope[x[i]]);
    grad_add(dt, dx, i, __fadd_rn(0.0f, c), fresh);
  }
}

static int low_act_backward(fsN_act act, fs_dtype dt, size_t n, float *dx, bool fresh, const float *dout,
                            const void *x) {
  act_table t = {NULL, NULL};
  if (act != FSN_RELU && table_of(act, dt, &t) < 0) return -1;
  if (n)
    low_act_bwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(act == FSN_RELU, dt, n, dx, fresh, dout, (const uint16_t *)x,
                                                    t.slope);
  return fscu_pending("low-precision activation backward");
}

extern "C" const fsB_low_kernels fsB_low_cuda = {
  low_binary, low_binary_backward, low_act_forward, low_act_backward,
};
