/* compose.c -- layers composed of the tape's own ops, so each op's backward
 * makes the composition differentiable and no device needs a kernel:
 *   - scaled dot-product attention (torch 2.x's F.scaled_dot_product_attention,
 *     its math path): matmul, scale, an additive mask, softmax, dropout,
 *     matmul.  Float32 without a mask or dropout (the causal flag or
 *     nothing) is one node instead, nn.c's per-head kernel (the one
 *     CausalSelfAttention runs): the composition's scale, mask and softmax
 *     passes and their backwards are one pass each way;
 *   - nearest interpolation: one index_select per spatial dim, with torch's
 *     source indices. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_int.h"
#include "nn.h"

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
        fsT_f32(full)[e] = fsT_get(hb, off) != 0 ? fsT_f32(m)[e % (L * S)] : -INFINITY;
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

/* q[..., L, E], k[..., S, E], v[..., S, Ev] with the same leading dims,
 * float32 tensors with data on one device, no mask, no dropout, no
 * autocast.  A device without the cpu's kernels (cuda) runs the node on
 * host copies, as ops_grad.c's ops do, so emulated cuda computes what the
 * cpu does. */
static bool sdpa_fused(fs_tensor *const qkv[3], const fs_tensor *mask, double dropout_p) {
  if (mask || dropout_p != 0 || fsG_autocast() != FS_F32) return false;
  for (int i = 0; i < 3; i++) {
    const fs_tensor *t = qkv[i];
    if (t->dtype != FS_F32 || t->device != qkv[0]->device || !t->data || t->rank != qkv[0]->rank ||
        t->numel == 0 || memcmp(t->shape, qkv[0]->shape, (size_t)(t->rank - 2) * sizeof *t->shape))
      return false;
  }
  return true;
}

/* head n of the batch (q, k, v contiguous host tensors [N, L|S, E|Ev]) */
static fsN_head sdpa_head(fs_tensor *const qkv[3], int64_t n, float scale, bool causal) {
  const fs_tensor *q = qkv[0], *k = qkv[1], *v = qkv[2];
  int64_t L = q->shape[q->rank - 2], S = k->shape[k->rank - 2], E = q->shape[q->rank - 1];
  int64_t Ev = v->shape[v->rank - 1];
  return (fsN_head){fsT_f32(q) + n * L * E, fsT_f32(k) + n * S * E, fsT_f32(v) + n * S * Ev,
                    E, E, Ev, L, S, E, Ev, scale, causal};
}

/* saved[0]: the probabilities [N, L, S] (host); s: the scale; k: causal */
static int sdpa_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  const fs_tensor *P = c.saved[0];
  int64_t N = P->shape[0], L = P->shape[1], S = P->shape[2], Ev = out->shape[out->rank - 1];
  float *dS = malloc((size_t)(L * S) * sizeof *dS), **d = c.d;
  int rc = dS ? 0 : -1;
  if (!dS) fsT_seterr("out of memory");
  for (int64_t b = 0; !rc && b < N; b++) {
    fsN_head h = sdpa_head(c.in, b, (float)n->s, n->k);
    rc = fsN_sdpa_head_backward(&h, fsT_f32(P) + b * L * S, fsT_f32(c.gout) + b * L * Ev, Ev, dS,
                                d[0] ? d[0] + b * L * h.E : NULL, d[1] ? d[1] + b * S * h.E : NULL,
                                d[2] ? d[2] + b * S * Ev : NULL);
  }
  free(dS);
  int end = fsG_bw_end(&c, n);
  return rc ? rc : end;
}

static fs_tensor *sdpa_node(fs_tensor *const qkv[3], bool is_causal) {
  fsG_stage st;
  if (fsG_stage_begin(&st, "scaled_dot_product_attention", 3, qkv) < 0) return NULL;
  const fs_tensor *q = qkv[0];
  int64_t L = q->shape[q->rank - 2], S = qkv[1]->shape[q->rank - 2], E = q->shape[q->rank - 1];
  int64_t N = q->numel / (L * E), oshape[FS_MAX_RANK], pshape[3] = {N, L, S};
  memcpy(oshape, q->shape, sizeof oshape);
  oshape[q->rank - 1] = qkv[2]->shape[q->rank - 1];
  fs_tensor *out = fsG_host_new(FS_F32, q->rank, oshape), *P = out ? fsG_host_new(FS_F32, 3, pshape) : NULL;
  float scale = (float)(1.0 / sqrt((double)E));
  for (int64_t b = 0; P && b < N; b++) {
    fsN_head h = sdpa_head(st.h, b, scale, is_causal);
    if (fsN_sdpa_head_forward(&h, fsT_f32(P) + b * L * S, fsT_f32(out) + b * L * h.Ev, h.Ev) < 0) {
      fsT_release(P);
      P = NULL;
    }
  }
  fsG_stage_end(&st);
  if (!P) {
    fsT_release(out);
    return NULL;
  }
  out = fsG_to_dev(out, st.dev);
  if (!out) {
    fsT_release(P);
    return NULL;
  }
  return fsG_record(out, sdpa_bw, 3, qkv, P, NULL, scale, is_causal);
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
  fs_tensor *const qkv[3] = {q, k, v};
  if (sdpa_fused(qkv, mask, dropout_p)) return sdpa_node(qkv, is_causal);
  int64_t L = q->shape[q->rank - 2], S = k->shape[k->rank - 2], E = q->shape[q->rank - 1];
  fs_tensor *kt = fsG_transpose(k, -2, -1), *s = kt ? fsG_matmul(q, kt) : NULL;
  fs_tensor *scaled = s ? fsG_binary_scalar(FSB_MUL, s, 1.0 / sqrt((double)E), false, false) : NULL;
  fsT_release(kt);
  fsT_release(s);
  fs_tensor *add = NULL;
  if (scaled && (is_causal || (mask && (mask->dtype == FS_I64 || mask->dtype == FS_BOOL))))
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

/* ---- multi-head attention (torch's F.multi_head_attention_forward, batch first) ---- */

/* rows [i*E, (i+1)*E) of the packed projection (a copy on the tape) */
static fs_tensor *third(fs_tensor *t, int i, int64_t E) { return t ? fsG_slice(t, 0, i * E, (i + 1) * E, 1) : NULL; }

/* x[B, T, E] -> [B, H, T, E/H] */
static fs_tensor *heads_of(fs_tensor *x, int64_t H) {
  if (!x) return NULL;
  int64_t shape[4] = {x->shape[0], x->shape[1], H, x->shape[2] / H};
  fs_tensor *v = fsG_reshape(x, 4, shape), *t = v ? fsG_transpose(v, 1, 2) : NULL;
  fsT_release(v);
  return t;
}

/* a boolean (int64 0/1, 1 = masked out) or float mask as an additive float
 * one of its own shape (new reference; NULL mask stays NULL) */
static fs_tensor *mha_additive(fs_tensor *mask, bool *failed) {
  if (!mask || (mask->dtype != FS_I64 && mask->dtype != FS_BOOL)) return mask ? fsT_retain(mask) : NULL;
  fs_tensor *h = fsT_to_device(mask, FS_DEV_CPU), *f = h ? fsT_new(FS_F32, FS_DEV_CPU, h->rank, h->shape) : NULL;
  for (int64_t i = 0; f && i < f->numel; i++) fsT_f32(f)[i] = fsT_get(h, i) != 0 ? -INFINITY : 0.0f;
  fsT_release(h);
  fs_tensor *d = f ? fsT_to_device(f, mask->device) : NULL;
  fsT_release(f);
  if (!d) *failed = true;
  return d;
}

fs_tensor *fsG_multihead_attention(fs_tensor *q, fs_tensor *k, fs_tensor *v, fs_tensor *in_w, fs_tensor *in_b,
                                   fs_tensor *out_w, fs_tensor *out_b, int64_t H, fs_tensor *attn_mask,
                                   fs_tensor *key_padding_mask, double dropout_p, uint64_t key,
                                   bool average, fs_tensor **weights) {
  char a[96], b[96];
  int64_t E = in_w->shape[1];
  if (weights) *weights = NULL;
  if (q->rank != 3 || k->rank != 3 || v->rank != 3 || q->shape[2] != E || k->shape[2] != E || v->shape[2] != E ||
      k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] || k->shape[1] != v->shape[1]) {
    fsT_seterr("MultiheadAttention(batch_first=True): expected query [B, L, %lld], key and value [B, S, %lld], got %s, %s and %s",
               (long long)E, (long long)E, fsT_shape_str(q, a, sizeof a), fsT_shape_str(k, b, sizeof b),
               fsT_shape_str(v, b + 48, 48));
    return NULL;
  }
  int64_t B = q->shape[0], L = q->shape[1], S = k->shape[1];
  bool failed = false;
  fs_tensor *w[3], *bias[3], *proj[3], *hd[3];
  fs_tensor *x[3] = {q, k, v};
  for (int i = 0; i < 3; i++) {
    w[i] = third(in_w, i, E);
    bias[i] = third(in_b, i, E);
    proj[i] = w[i] && (!in_b || bias[i]) ? fsG_linear(x[i], w[i], bias[i]) : NULL;
    hd[i] = heads_of(proj[i], H);
    failed |= !hd[i];
  }
  fs_tensor *kt = failed ? NULL : fsG_transpose(hd[1], -2, -1);
  fs_tensor *s = kt ? fsG_matmul(hd[0], kt) : NULL;
  fs_tensor *cur = s ? fsG_binary_scalar(FSB_MUL, s, 1.0 / sqrt((double)(E / H)), false, false) : NULL;
  fsT_release(kt);
  fsT_release(s);
  /* masks: attn_mask [L, S] or [B*H, L, S]; key_padding_mask [B, S] */
  fs_tensor *am = mha_additive(attn_mask, &failed), *kp = mha_additive(key_padding_mask, &failed);
  if (cur && am) {
    fs_tensor *m4 = am;
    if (am->rank == 3) {
      int64_t shape[4] = {B, H, L, S};
      m4 = fsG_reshape(am, 4, shape);
    } else fsT_retain(m4);
    fs_tensor *n = m4 ? fsG_binary_op(FSU_ADD, cur, m4) : NULL;
    fsT_release(m4);
    fsT_release(cur);
    cur = n;
  }
  if (cur && kp) {
    int64_t shape[4] = {B, 1, 1, S};
    fs_tensor *m4 = fsG_reshape(kp, 4, shape), *n = m4 ? fsG_binary_op(FSU_ADD, cur, m4) : NULL;
    fsT_release(m4);
    fsT_release(cur);
    cur = n;
  }
  fsT_release(am);
  fsT_release(kp);
  if (failed) {
    fsT_release(cur);
    cur = NULL;
  }
  fs_tensor *p = cur ? fsG_softmax(cur, -1, false) : NULL;
  fsT_release(cur);
  if (p && dropout_p > 0) {
    fs_tensor *d = fsG_dropout(p, dropout_p, key);
    fsT_release(p);
    p = d;
  }
  fs_tensor *o = p ? fsG_matmul(p, hd[2]) : NULL, *ot = o ? fsG_transpose(o, 1, 2) : NULL; /* [B, L, H, hd] */
  int64_t oshape[3] = {B, L, E};
  fs_tensor *merged = ot ? fsG_reshape(ot, 3, oshape) : NULL;
  fs_tensor *out = merged ? fsG_linear(merged, out_w, out_b) : NULL;
  if (out && weights)
    *weights = average ? fsG_sum_dim(p, 1, false, true) : fsT_retain(p); /* the mean over heads */
  if (out && weights && !*weights) {
    fsT_release(out);
    out = NULL;
  }
  fs_tensor *all[] = {w[0], w[1], w[2], bias[0], bias[1], bias[2], proj[0], proj[1], proj[2],
                      hd[0], hd[1], hd[2], p, o, ot, merged};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fsT_release(all[i]);
  return out;
}
