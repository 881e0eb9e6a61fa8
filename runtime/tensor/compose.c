/* compose.c -- layers composed of the tape's own ops, so each op's backward
 * makes the composition differentiable and no device needs a kernel:
 *   - scaled dot-product attention (torch 2.x's F.scaled_dot_product_attention,
 *     its math path): matmul, scale, an additive mask, softmax, dropout,
 *     matmul; the fused causal kernel of CausalSelfAttention (nn.c) stays the
 *     model blocks' fast path;
 *   - nearest interpolation: one index_select per spatial dim, with torch's
 *     source indices. */
#include <math.h>
#include <string.h>

#include "autograd.h"

/* The additive mask [L, S] on dev: 0 where query i may attend to key j, -inf
 * elsewhere: causal (j <= i) and/or where an integer (boolean) mask is 0. */
static fs_tensor *additive_mask(int64_t L, int64_t S, bool causal, const fs_tensor *bool_mask, fs_device dev) {
  int64_t shape[2] = {L, S};
  fs_tensor *m = fsT_new(FS_F32, FS_DEV_CPU, 2, shape);
  if (!m) return NULL;
  for (int64_t i = 0; i < L; i++)
    for (int64_t j = 0; j < S; j++) fsT_f32(m)[i * S + j] = causal && j > i ? -INFINITY : 0.0f;
  if (bool_mask) { /* broadcast to [..., L, S]: a mask of its own shape, host-side */
    fs_tensor *hb = fsT_to_device((fs_tensor *)bool_mask, FS_DEV_CPU), *full = NULL;
    int rank = bool_mask->rank > 2 ? bool_mask->rank : 2;
    int64_t fs[FS_MAX_RANK];
    if (hb && fsU_broadcast_shape(hb->rank, hb->shape, 2, shape, &rank, fs) == 0 &&
        (full = fsT_new(FS_F32, FS_DEV_CPU, rank, fs))) {
      int64_t st[FS_MAX_RANK], idx[FS_MAX_RANK] = {0};
      fsU_bcast_strides(hb->rank, hb->shape, rank, fs, st);
      for (int64_t e = 0; e < full->numel; e++) {
        int64_t off = 0;
        for (int d = 0; d < rank; d++) off += idx[d] * st[d];
        fsT_f32(full)[e] = fsT_i64(hb)[off] ? fsT_f32(m)[e % (L * S)] : -INFINITY;
        for (int d = rank - 1; d >= 0 && ++idx[d] == fs[d]; d--) idx[d] = 0;
      }
    }
    fsT_release(hb);
    fsT_release(m);
    m = full;
    if (!m) return NULL;
  }
  fs_tensor *d = fsT_to_device(m, dev);
  fsT_release(m);
  return d;
}

fs_tensor *fsG_scaled_dot_product_attention(fs_tensor *q, fs_tensor *k, fs_tensor *v, fs_tensor *mask,
                                            double dropout_p, bool is_causal, uint64_t key) {
  char a[96], b[96];
  if (q->rank < 2 || k->rank < 2 || v->rank < 2 || q->shape[q->rank - 1] != k->shape[k->rank - 1] ||
      k->shape[k->rank - 2] != v->shape[v->rank - 2]) {
    fsT_seterr("scaled_dot_product_attention: expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got %s, %s and %s",
               fsT_shape_str(q, a, sizeof a), fsT_shape_str(k, b, sizeof b), fsT_shape_str(v, b + 48, 48));
    return NULL;
  }
  if (is_causal && mask) {
    fsT_seterr("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True");
    return NULL;
  }
  if (!(dropout_p >= 0 && dropout_p <= 1)) {
    fsT_seterr("dropout probability has to be between 0 and 1, but got %g", dropout_p);
    return NULL;
  }
  int64_t L = q->shape[q->rank - 2], S = k->shape[k->rank - 2], E = q->shape[q->rank - 1];
  fs_tensor *kt = fsG_transpose(k, -2, -1), *s = kt ? fsG_matmul(q, kt) : NULL;
  fs_tensor *scaled = s ? fsG_binary_scalar(FSB_MUL, s, 1.0 / sqrt((double)E), false, false) : NULL;
  fsT_release(kt);
  fsT_release(s);
  fs_tensor *add = NULL;
  if (scaled && (is_causal || (mask && mask->dtype == FS_I64)))
    add = additive_mask(L, S, is_causal, mask, q->device);
  else if (scaled && mask)
    add = fsT_retain(mask); /* a float mask is added as it is (and differentiated) */
  fs_tensor *masked = scaled;
  if (scaled && add) {
    masked = fsG_binary_op(FSU_ADD, scaled, add);
    fsT_release(scaled);
  } else if (scaled && (is_causal || mask)) { /* the mask could not be made */
    fsT_release(scaled);
    masked = NULL;
  }
  fsT_release(add);
  fs_tensor *p = masked ? fsG_softmax(masked, -1, false) : NULL;
  fsT_release(masked);
  if (p && dropout_p > 0) {
    fs_tensor *d = fsG_dropout(p, dropout_p, key);
    fsT_release(p);
    p = d;
  }
  fs_tensor *out = p ? fsG_matmul(p, v) : NULL;
  fsT_release(p);
  return out;
}

/* torch's nearest_idx (UpSample.h): the source index of output index o */
static int64_t nearest_idx(int64_t o, int64_t in, int64_t out, double scale_factor) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  float scale = !isnan(scale_factor) && scale_factor > 0 ? (float)(1.0 / scale_factor) : (float)in / (float)out;
  int64_t i = (int64_t)floorf((float)o * scale);
  return i < in - 1 ? i : in - 1;
}

fs_tensor *fsG_interpolate_nearest(fs_tensor *x, int nd, const int64_t *size, const double *scale_factor) {
  char a[96];
  if (nd < 1 || nd > 2 || x->rank != nd + 2) {
    fsT_seterr("interpolate: expected a %dD input (%d spatial dims with batch and channel), got %s", nd + 2, nd,
               fsT_shape_str(x, a, sizeof a));
    return NULL;
  }
  fs_tensor *cur = fsT_retain(x);
  for (int i = 0; cur && i < nd; i++) {
    int dim = x->rank - nd + i;
    int64_t in = x->shape[dim], out = size[i];
    if (out <= 0) {
      fsT_seterr("Input and output sizes should be greater than 0, but got input (%lld) and output (%lld)",
                 (long long)in, (long long)out);
      fsT_release(cur);
      return NULL;
    }
    fs_tensor *idx = fsT_new(FS_I64, FS_DEV_CPU, 1, &out), *di = NULL;
    for (int64_t o = 0; idx && o < out; o++) fsT_i64(idx)[o] = nearest_idx(o, in, out, scale_factor[i]);
    if (idx) di = fsT_to_device(idx, x->device);
    fs_tensor *next = di ? fsG_index_select(cur, dim, di) : NULL;
    fsT_release(idx);
    fsT_release(di);
    fsT_release(cur);
    cur = next;
  }
  return cur;
}
