/* low_elem.h -- one element of the low-precision elementwise kernels
 * (backend.h's fsB_low_kernels), one text for cuda's (low_cuda.cu) and
 * emulated cuda's (backend_emu.c), so --emulate-cuda runs the device's
 * arithmetic on the host.
 *
 * Each float operation is one FSL_ADD/FSL_SUB/FSL_MUL/FSL_DIV: __fadd_rn
 * and friends in device code (no contraction into an fma), plain C on the
 * host (C11 does not contract without -ffp-contract=fast), so both round
 * alike: the cpu direct path's float32 op on widened values, rounded once
 * to nearest even (tensor.h's bitwise conversions). */
#ifndef FS_LOW_ELEM_H
#define FS_LOW_ELEM_H

#include "backend.h"

#ifdef __CUDA_ARCH__
#define FSL_ADD(x, y) __fadd_rn(x, y)
#define FSL_SUB(x, y) __fsub_rn(x, y)
#define FSL_MUL(x, y) __fmul_rn(x, y)
#define FSL_DIV(x, y) __fdiv_rn(x, y)
#else
#define FSL_ADD(x, y) ((x) + (y))
#define FSL_SUB(x, y) ((x) - (y))
#define FSL_MUL(x, y) ((x) * (y))
#define FSL_DIV(x, y) ((x) / (y))
#endif

/* element i of p (type dt: FS_F32, FS_BF16 or FS_F16) widened to float32 */
static inline FS_HOSTDEV float fsL_widen(fs_dtype dt, const void *p, size_t i) {
  if (dt == FS_F32) return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  return dt == FS_BF16 ? fsT_bf16_to_f32(h) : fsT_f16_to_f32(h);
}

/* v rounded into element i of p (type dt) */
static inline FS_HOSTDEV void fsL_store(fs_dtype dt, void *p, size_t i, float v) {
  if (dt == FS_F32) ((float *)p)[i] = v;
  else ((uint16_t *)p)[i] = dt == FS_BF16 ? fsT_f32_to_bf16(v) : fsT_f32_to_f16(v);
}

/* v rounded to dt's precision, as float32 (fsT_round_to) */
static inline FS_HOSTDEV float fsL_round(fs_dtype dt, float v) {
  if (dt == FS_F32) return v;
  return dt == FS_BF16 ? fsT_bf16_to_f32(fsT_f32_to_bf16(v)) : fsT_f16_to_f32(fsT_f32_to_f16(v));
}

/* contribution c into gradient d[i] of type dt (backend.h's rule) */
static inline FS_HOSTDEV void fsL_grad_add(fs_dtype dt, float *d, size_t i, float c, bool fresh) {
  if (dt == FS_F32) d[i] = fresh ? c : FSL_ADD(d[i], c);
  else d[i] = fsL_round(dt, FSL_ADD(fresh ? 0.0f : d[i], fsL_round(dt, c)));
}

/* x op y */
static inline FS_HOSTDEV float fsL_binary(fsB_binop op, float x, float y) {
  switch (op) {
  case FSB_ADD: return FSL_ADD(x, y);
  case FSB_SUB: return FSL_SUB(x, y);
  case FSB_MUL: return FSL_MUL(x, y);
  default: return FSL_DIV(x, y);
  }
}

/* side's contribution from g at element i as autograd.c's binary_low_part
 * computes it (g, -g, g * other, g / b, -((g / b) (a / b))); reads only
 * the sides it needs */
static inline FS_HOSTDEV float fsL_binary_grad(fsB_binop op, int side, float g, fs_dtype ta, const void *a,
                                               size_t sa, fs_dtype tb, const void *b, size_t sb, size_t i) {
  if (op == FSB_ADD || op == FSB_SUB) return op == FSB_SUB && side ? -g : g;
  if (op == FSB_MUL) return FSL_MUL(g, side ? fsL_widen(ta, a, i * sa) : fsL_widen(tb, b, i * sb));
  float y = fsL_widen(tb, b, i * sb), c = FSL_DIV(g, y);
  return side ? -FSL_MUL(c, FSL_DIV(fsL_widen(ta, a, i * sa), y)) : c;
}

/* act of element i of x (type dt, low): ReLU computed (x > 0 ? x : +0
 * keeps x's bits), the others looked up in fsN_act_low_table's out */
static inline FS_HOSTDEV uint16_t fsL_act(bool relu, fs_dtype dt, const uint16_t *x, size_t i,
                                          const uint16_t *out) {
  return relu ? (fsL_widen(dt, x, i) > 0 ? x[i] : 0) : out[x[i]];
}

/* x[i]'s gradient contribution as the cpu kernel adds it to a zeroed
 * float32 buffer: 0 + (x > 0 ? dout : 0) for ReLU (dout itself: 0 * inf
 * would be NaN), 0 + dout * slope for the others */
static inline FS_HOSTDEV float fsL_act_grad(bool relu, fs_dtype dt, const uint16_t *x, size_t i, float dout,
                                            const float *slope) {
  return FSL_ADD(0.0f, relu ? (fsL_widen(dt, x, i) > 0 ? dout : 0.0f) : FSL_MUL(dout, slope[x[i]]));
}

#endif
