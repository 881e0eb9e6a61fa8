/* low_cuda.cu -- fsB_low_cuda: elementwise kernels that load and store
 * bfloat16 and float16 on the device (backend.h's fsB_low_kernels), so
 * same-shape and scalar arithmetic and the activations of low tensors make
 * no float32 copies.  Each element is low_elem.h's, the text emulated cuda
 * runs on the host: the cpu direct path's arithmetic (autograd.c), the
 * float32 op on the widened values (IEEE float32 on the device as on the
 * cpu: no --use_fast_math, no contraction), rounded once to nearest even;
 * a gradient added by fsG_low_grad_add's rule.  GELU and tanh look their
 * result and derivative up in fsN_act_low_table's tables, computed on the
 * host by the cpu's own kernels: the device's bits are the cpu's. */
#include "cuda_common.cuh"
#include "low_elem.h"

#include <pthread.h>
#include <stdlib.h>

__global__ void low_binary_k(fsB_binop op, size_t n, fs_dtype ta, const void *a, size_t sa, fs_dtype tb,
                             const void *b, size_t sb, fs_dtype to, void *out) {
  FSCU_FOR(i, n) fsL_store(to, out, i, fsL_binary(op, fsL_widen(ta, a, i * sa), fsL_widen(tb, b, i * sb)));
}

static int low_binary(fsB_binop op, size_t n, fs_dtype ta, const void *a, size_t sa, fs_dtype tb, const void *b,
                      size_t sb, fs_dtype to, void *out) {
  if (n) low_binary_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, n, ta, a, sa, tb, b, sb, to, out);
  return fscu_pending("low-precision arithmetic");
}

__global__ void low_binary_bw_k(fsB_binop op, int side, size_t n, const float *g, fs_dtype ta, const void *a,
                                size_t sa, fs_dtype tb, const void *b, size_t sb, fs_dtype dt, float *d,
                                bool fresh) {
  FSCU_FOR(i, n) fsL_grad_add(dt, d, i, fsL_binary_grad(op, side, g[i], ta, a, sa, tb, b, sb, i), fresh);
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

__global__ void low_act_fwd_k(bool relu, fs_dtype dt, size_t n, const uint16_t *x, uint16_t *y, const uint16_t *out) {
  FSCU_FOR(i, n) y[i] = fsL_act(relu, dt, x, i, out);
}

static int low_act_forward(fsN_act act, fs_dtype dt, size_t n, const void *x, void *y) {
  act_table t = {NULL, NULL};
  if (act != FSN_RELU && table_of(act, dt, &t) < 0) return -1;
  if (n)
    low_act_fwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(act == FSN_RELU, dt, n, (const uint16_t *)x, (uint16_t *)y, t.out);
  return fscu_pending("low-precision activation");
}

__global__ void low_act_bwd_k(bool relu, fs_dtype dt, size_t n, float *dx, bool fresh, const float *dout,
                              const uint16_t *x, const float *slope) {
  FSCU_FOR(i, n) fsL_grad_add(dt, dx, i, fsL_act_grad(relu, dt, x, i, dout[i], slope), fresh);
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
