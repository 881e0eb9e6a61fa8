/* precision.c -- low-precision floats (bfloat16, float16) on the tape:
 * the differentiable cast, torch's autocast state and the widening that
 * every op's entry point applies (fsG_low_begin / fsG_low_end).
 *
 * Invariant: a low-precision tensor is computed on either through a float32
 * copy made by a cast node, or by an elementwise op that widens it block by
 * block itself (autograd_int.h's FSG_LOW_BLOCK path: arithmetic, where,
 * unary functions, the bfloat16 activations, dropout, sums, max/min,
 * logsumexp, cumsum, softmax, the losses, cat, embeddings, LayerNorm,
 * RMSNorm, GroupNorm and BatchNorm (low_norm.c)); an op whose float inputs are
 * all low rounds its float32 result back to that type.  So each op rounds
 * once, at its output, as torch's CPU kernels for these types do (they
 * compute in float internally), and every gradient that reaches a low
 * tensor is added to its float32 gradient buffer rounded, and the sum
 * rounded (fsG_low_grad_add: a cast node's backward, or the direct ops'):
 * gradients are held in float32 buffers holding the values torch's
 * bfloat16 gradients hold.  Inside such an op every matrix product takes
 * its operands at the op's type's precision (blas.h's
 * fsB_set_gemm_operands; intermediates such as attention's probabilities
 * too, as torch's matmul and SDPA in that type), which is what lets it run
 * on bfloat16 dot products, and on CUDA on GemmEx with 16-bit inputs.  The ops' other half: autograd.h documents which ops autocast
 * runs in the low type (FSG_AC_LOW) and which in float32 (FSG_AC_F32). */
#include "autograd.h"
#include "autograd_int.h"
#include "blas.h"
#include "vmath.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local fs_dtype autocast_dtype = FS_F32;

fs_dtype fsG_set_autocast(fs_dtype dt) {
  fs_dtype old = autocast_dtype;
  autocast_dtype = dt;
  return old;
}

fs_dtype fsG_autocast(void) { return autocast_dtype; }

/* Rounds the float32 values of t (any device) to dt's precision. */
static int round_tensor(fs_tensor *t, fs_dtype dt) {
  if (!fsT_is_low(dt)) return 0;
  if (t->device == FS_DEV_CPU) {
    fsT_round_array(dt, fsT_f32(t), (size_t)t->numel);
    return 0;
  }
  /* on the device: through a tensor of the low type and back */
  const fsB_backend *be = fsB_of(t);
  fs_tensor *low = fsT_new(dt, t->device, t->rank, t->shape);
  int rc = low ? be->convert(dt, low->data, FS_F32, t->data, (size_t)t->numel) : -1;
  if (rc == 0) rc = be->convert(FS_F32, t->data, dt, low->data, (size_t)t->numel);
  fsT_release(low);
  return rc;
}

int fsG_round_grad(fs_tensor *t) {
  return t->grad && t->grad->dtype == FS_F32 && fsT_is_low(t->dtype) ? round_tensor(t->grad, t->dtype) : 0;
}

/* ---- gradients of low-precision leaves ---- */

static _Thread_local struct { fs_tensor **v; size_t n, cap; } leaves;

int fsG_note_low_leaf(fs_tensor *t) {
  for (size_t i = 0; i < leaves.n; i++)
    if (leaves.v[i] == t) return 0;
  if (leaves.n == leaves.cap) {
    size_t cap = leaves.cap ? 2 * leaves.cap : 64;
    fs_tensor **v = realloc(leaves.v, cap * sizeof *v);
    if (!v) {
      fsT_seterr("out of memory");
      return -1;
    }
    leaves.v = v;
    leaves.cap = cap;
  }
  leaves.v[leaves.n++] = fsT_retain(t);
  return 0;
}

int fsG_store_low_grads(void) {
  int rc = 0;
  for (size_t i = 0; i < leaves.n; i++) {
    fs_tensor *t = leaves.v[i];
    if (rc == 0 && t->grad && fsT_set_dtype(t->grad, t->dtype) < 0) rc = -1;
    fsT_release(t);
  }
  free(leaves.v);
  leaves.v = NULL;
  leaves.n = leaves.cap = 0;
  return rc;
}

/* ---- cast: x.to(dtype) ---- */

/* dx += g, g and the sum rounded to x's type when x is low: the
 * accumulation torch does in x's own dtype (fsG_low_grad_add). */
static int cast_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  if (x->dtype == FS_F64 || out->dtype == FS_F64) return fsG_add_grad_f64(x, out->grad);
  float *dx;
  bool fresh;
  if (fsT_is_low(x->dtype) && x->device == FS_DEV_CPU) {
    if (fsG_low_grad_buf(x, &dx, &fresh)) return -1;
    if (dx) fsG_low_grad_add(x->dtype, dx, fsT_f32(out->grad), (size_t)x->numel, 1.0f, fresh);
    return 0;
  }
  if (fsG_grad_buf(x, &dx)) return -1;
  if (!dx) return 0;
  fs_tensor *g = fsT_is_low(x->dtype) ? fsT_copy(out->grad) : fsT_retain(out->grad);
  int rc = g && round_tensor(g, x->dtype) == 0 ? 0 : -1;
  if (rc == 0) fsB_of(x)->axpy((size_t)x->numel, 1.0f, fsT_f32(g), dx);
  fsT_release(g);
  return rc < 0 ? rc : fsG_round_grad(x);
}

fs_tensor *fsG_cast(fs_tensor *x, fs_dtype dt) {
  if (x->dtype == dt) return fsT_retain(x);
  if (!fsG_check_inputs("to", 1, &x)) return NULL;
  fs_tensor *out = fsT_to_dtype(x, dt);
  if (!out || !fsT_is_floating(dt) || !fsT_is_floating(x->dtype)) return out;
  return fsG_record(out, cast_bw, 1, &x, NULL, NULL, 0, 0);
}

/* ---- round: a float32 tensor through a low type and back, in one op ---- */

/* The gradient of the low intermediate is rounded before it reaches x. */
static int round_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx;
  if (fsG_grad_buf(x, &dx)) return -1;
  if (!dx) return 0;
  fs_tensor *g = fsT_copy(out->grad);
  if (!g || round_tensor(g, (fs_dtype)n->k) < 0) {
    fsT_release(g);
    return -1;
  }
  fsB_of(x)->axpy((size_t)x->numel, 1.0f, fsT_f32(g), dx);
  fsT_release(g);
  return 0;
}

/* x (float32) as x.to(dt).float() would give it.  With gemm_only (the
 * operand of a matrix product inside an op computing in dt, which rounds
 * its operands itself) the values are not rounded here: the result is a view
 * of x, and only its gradient is rounded, saving a copy per weight and
 * activation per product. */
static fs_tensor *round_through(fs_tensor *x, fs_dtype dt, bool gemm_only) {
  fs_tensor *out = gemm_only ? fsT_view(x, x->rank, x->shape) : fsT_copy(x);
  if (!out || (!gemm_only && round_tensor(out, dt) < 0)) {
    fsT_release(out);
    return NULL;
  }
  return fsG_record(out, round_bw, 1, &x, NULL, NULL, 0, dt);
}

/* ---- widening at an op's entry point ---- */

/* a Python scalar is a 0-dim float32 here */
fs_dtype fsG_promoted(int n, fs_tensor *const *ins) {
  fs_dtype dims = FS_I64, scalars = FS_I64;
  for (int i = 0; i < n; i++) {
    if (!ins[i] || !fsT_is_float(ins[i]->dtype)) continue;
    fs_dtype *d = ins[i]->rank ? &dims : &scalars;
    *d = *d == FS_I64 || *d == ins[i]->dtype ? ins[i]->dtype : FS_F32;
  }
  return dims != FS_I64 ? dims : scalars;
}

bool fsG_low_begin_in(const char *op, fsG_low *L, fsG_ac policy, int n, fs_tensor *const *ins) {
  *L = (fsG_low){.out = FS_F32, .autocast = autocast_dtype, .gemm = fsB_gemm_operands()};
  if (fsG_any_f64(n, ins)) { /* every op dispatches float64 before this (f64.c): one that did not is refused */
    fsT_seterr("%s: this op has no float64 path in this runtime (float64 runs linear, matmul, activations, "
               "elementwise arithmetic and functions, where/masked_fill, sum/mean and max/min (also over a dim), "
               "topk, softmax, logsumexp, cumsum, dropout, the losses, views, slices, indexing, cat, casts, "
               "embeddings, layer_norm, attention, convolutions, pooling, batch/group/RMS norm and multinomial; "
               "convert with .float() first)",
               strncmp(op, "fsG_", 4) ? op : op + 4);
    L->failed = true;
    return true;
  }
  bool any_low = false;
  for (int i = 0; i < n; i++) any_low |= ins[i] && fsT_is_low(ins[i]->dtype);
  fs_dtype ac = autocast_dtype;
  bool lower = policy == FSG_AC_LOW && ac != FS_F32;
  if (!lower && !any_low) return false;
  /* compute dtype: autocast's type, float32, or the promoted type */
  fs_dtype to = lower ? ac : policy == FSG_AC_F32 && ac != FS_F32 ? FS_F32 : fsG_promoted(n, ins);
  autocast_dtype = FS_F32; /* the op inside runs as it is (torch excludes autocast there) */
  for (int i = 0; i < n && i < 4; i++) {
    fs_tensor *x = ins[i];
    if (!x || !fsT_is_float(x->dtype)) {
      L->w[i] = fsT_retain(x);
      continue;
    }
    fs_tensor *wide = fsG_cast(x, FS_F32);
    /* float32 (or the other low type) into `to`; a 0-dim float32 is a
     * Python scalar, which torch's low-precision kernels take in float */
    if (wide && fsT_is_low(to) && x->dtype != to && (lower || x->rank)) {
      /* autocast's matrix-product ops use their inputs of rank >= 2 in
       * GEMMs only (linear, matmul, bmm, conv, attention), which round
       * them; biases are added outside them and are rounded */
      fs_tensor *r = round_through(wide, to, lower && x->rank >= 2);
      fsT_release(wide);
      wide = r;
    }
    if (!(L->w[i] = wide)) L->failed = true;
  }
  L->out = to;
  fsB_set_gemm_operands(fsT_is_low(to) ? to : FS_F32);
  return true;
}

fs_tensor *fsG_low_end(fsG_low *L, fs_tensor *out) {
  autocast_dtype = L->autocast;
  fsB_set_gemm_operands(L->gemm);
  for (int i = 0; i < 4; i++) fsT_release(L->w[i]);
  if (!out || out->dtype != FS_F32 || L->out == FS_F32) return out;
  fs_tensor *low = fsG_cast(out, L->out);
  fsT_release(out);
  return low;
}

/* ---- ops that load and store low-precision floats themselves ---- */

const float *fsG_low_block(const fs_tensor *x, size_t at, size_t m, bool whole, float *buf) {
  if (!whole) at = 0, m = 1;
  if (x->dtype == FS_F32) return fsT_f32(x) + at;
  fsT_convert(FS_F32, buf, x->dtype, (const uint16_t *)x->data + at, m);
  return buf;
}

float *fsG_low_out(fs_tensor *t, size_t at, float *buf) { return t->dtype == FS_F32 ? fsT_f32(t) + at : buf; }

void fsG_low_store(fs_tensor *t, size_t at, size_t m, const float *v) {
  if (t->dtype != FS_F32) fsT_convert(t->dtype, (uint16_t *)t->data + at, FS_F32, v, m);
}

int fsG_low_grad_buf(fs_tensor *t, float **g, bool *fresh) {
  *fresh = false;
  if (!t->requires_grad || t->grad) return fsG_grad_buf(t, g);
  fs_tensor *d = fsT_new(FS_F32, t->device, t->rank, t->shape);
  if (!d || (!t->node && fsG_note_low_leaf(t) < 0)) {
    fsT_release(d);
    return -1;
  }
  t->grad = d;
  *g = fsT_f32(d);
  *fresh = true;
  return 0;
}

/* + 0.0f: the sum with the zeroed buffer the gradient would otherwise be
 * (a -0 contribution gives +0).  Inlined once per type, so each loop rounds
 * without a branch and vectorizes. */
FS_VECTOR_TARGET
static inline __attribute__((always_inline)) void low_grad_add(fs_dtype dt, float *dx, const float *c, size_t n,
                                                               float alpha, bool fresh) {
  if (fresh) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = fsT_round_to(dt, alpha * c[i]) + 0.0f;
  } else {
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = fsT_round_to(dt, dx[i] + fsT_round_to(dt, alpha * c[i]));
  }
}

FS_VECTOR_TARGET
void fsG_low_grad_add(fs_dtype dt, float *dx, const float *c, size_t n, float alpha, bool fresh) {
  if (dt == FS_BF16)
    low_grad_add(FS_BF16, dx, c, n, alpha, fresh);
  else if (dt == FS_F16)
    low_grad_add(FS_F16, dx, c, n, alpha, fresh);
  else
    low_grad_add(FS_F32, dx, c, n, alpha, fresh);
}
