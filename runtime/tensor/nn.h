/* nn.h -- layer kernels: each layer's forward and backward as a pair of plain
 * functions on contiguous float arrays (llm.c style), shapes in the comments.
 * Backward functions ACCUMULATE (+=) into every gradient they are given, as
 * PyTorch's do; a NULL gradient pointer means "not needed".  Functions that
 * can fail (GEMM loading, scratch memory) return 0 or -1 + fsT_error.
 * Backends reach them through fsN_kernels so another device swaps the table. */
#ifndef FS_NN_H
#define FS_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tensor.h"

typedef enum fsN_act { FSN_RELU, FSN_GELU, FSN_GELU_TANH, FSN_TANH, FSN_SIGMOID, FSN_SILU } fsN_act;

/* out[N,OC] = inp[N,C] @ W[OC,C]^T + b[OC]   (b may be NULL) */
int fsN_linear_forward(float *out, const float *inp, const float *W, const float *b,
                       int64_t N, int64_t C, int64_t OC);
/* dinp[N,C] += dout[N,OC] @ W;  dW[OC,C] += dout^T @ inp;  db[OC] += sum_n dout */
int fsN_linear_backward(float *dinp, float *dW, float *db, const float *dout,
                        const float *inp, const float *W, int64_t N, int64_t C, int64_t OC);

/* out[N,D] = W[idx[n], :]   (idx already checked to lie in [0, V)) */
void fsN_embedding_forward(float *out, const int64_t *idx, const float *W, int64_t N, int64_t D);
/* dW[idx[n], :] += dout[n, :] */
void fsN_embedding_backward(float *dW, const float *dout, const int64_t *idx, int64_t N, int64_t D);

/* out[B,T,D] = inp[B,T,D] + W[t,D]  (rows 0..T-1 of the position table) */
void fsN_posemb_forward(float *out, const float *inp, const float *W, int64_t B, int64_t T, int64_t D);
/* dinp += dout;  dW[t] += sum_b dout[b,t] */
void fsN_posemb_backward(float *dinp, float *dW, const float *dout, int64_t B, int64_t T, int64_t D);

/* Over the last dim: out[N,C] = (inp - mean) * rstd * w + b; mean[N], rstd[N] saved */
void fsN_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *w, const float *b, int64_t N, int64_t C, float eps);
void fsN_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, const float *mean,
                            const float *rstd, int64_t N, int64_t C);

/* out[n] = act(inp[n]);  dinp[n] += dout[n] * act'(inp[n]) (out is act(inp)) */
void fsN_act_forward(fsN_act act, float *out, const float *inp, size_t n);
void fsN_act_backward(fsN_act act, float *dinp, const float *dout, const float *inp,
                      const float *out, size_t n);
/* GELU (either form) or tanh of a bfloat16 or float16 x (dt) depends on
 * x's 16 bits u alone: out[u] its result rounded to dt, slope[u] the factor
 * the backward multiplies dout by (0 + dout * slope[u] is the contribution
 * fsN_act_backward adds), both computed by the kernels above, so that a
 * lookup gives their very bits (65536 entries each).  -1 + fsT_error when
 * out of memory. */
int fsN_act_low_table(fsN_act act, fs_dtype dt, uint16_t *out, float *slope);

/* Inverted dropout: element i kept iff u(key, i) >= p, scaled by 1/(1-p);
 * the mask is recomputed from key in backward rather than stored. */
void fsN_dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t key);
void fsN_dropout_backward(float *dinp, const float *dout, size_t n, float p, uint64_t key);

/* Causal self-attention core: inp[B,T,3C] holds q, k, v (head h in columns
 * [h*hs, (h+1)*hs) of each), att[B,NH,T,T] the softmax probabilities (upper
 * triangle 0), out[B,T,C]; scale 1/sqrt(hs), hs = C/NH.  Per (batch, head)
 * the products are strided GEMMs: S = q k^T, out = P v; backward
 * dP = dout v^T, dv += P^T dout, dS = P (dP - rowsum(P dP)) scale,
 * dq += dS k, dk += dS^T q. */
int fsN_attention_forward(float *out, float *att, const float *inp,
                          int64_t B, int64_t T, int64_t C, int64_t NH);
int fsN_attention_backward(float *dinp, const float *dout, const float *inp, const float *att,
                           int64_t B, int64_t T, int64_t C, int64_t NH);
/* The same on bfloat16 inp (a bf16-mixed model block's attention, nn.c),
 * with the float32 kernels' arithmetic under bfloat16 operands: the GEMMs
 * read q, k, v as bfloat16 storage, out[B,T,C] is bfloat16 (the float32
 * result rounded once), att float32.  Backward finishes dinp (float32, the
 * bfloat16 inp's gradient) as a cast node's backward would:
 * dinp = round(dinp + g), or round(g) over an unset dinp (dinp_unset). */
int fsN_attention_bf16_forward(uint16_t *out, float *att, const uint16_t *inp, int64_t B, int64_t T, int64_t C,
                               int64_t NH);
int fsN_attention_bf16_backward(float *dinp, bool dinp_unset, const float *dout, const uint16_t *inp,
                                const float *att, int64_t B, int64_t T, int64_t C, int64_t NH);

/* One head of scaled dot-product attention on row-major matrices with row
 * strides: q[L,E] (ldq), k[S,E] (ldk), v[S,Ev] (ldv).  Forward:
 * P[L,S] = softmax(scale q k^T) row by row (causal: row i over keys
 * j <= i, zeros after, torch's is_causal), out[L,Ev] (ldo) = P v.  Backward,
 * given dout[L,Ev] (lddo) and scratch dS[L,S]: dP = dout v^T,
 * dv += P^T dout, dS = P (dP - rowsum(P dP)) scale, dq += dS k,
 * dk += dS^T q, each gradient with its input's stride (NULL: not needed). */
/* the fields over an element type T: nn_typed.h declares the double twin from this text */
#define FSN_HEAD_FIELDS(T)            \
  const T *q, *k, *v;                 \
  int64_t ldq, ldk, ldv, L, S, E, Ev; \
  T scale;                            \
  bool causal;
typedef struct fsN_head {
  FSN_HEAD_FIELDS(float)
} fsN_head;
int fsN_sdpa_head_forward(const fsN_head *h, float *P, float *out, int64_t ldo);
int fsN_sdpa_head_backward(const fsN_head *h, const float *P, const float *dout, int64_t lddo, float *dS,
                           float *dq, float *dk, float *dv);

typedef struct fsN_kernels {
  int (*linear_forward)(float *, const float *, const float *, const float *, int64_t, int64_t, int64_t);
  int (*linear_backward)(float *, float *, float *, const float *, const float *, const float *,
                         int64_t, int64_t, int64_t);
  void (*embedding_forward)(float *, const int64_t *, const float *, int64_t, int64_t);
  void (*embedding_backward)(float *, const float *, const int64_t *, int64_t, int64_t);
  void (*posemb_forward)(float *, const float *, const float *, int64_t, int64_t, int64_t);
  void (*posemb_backward)(float *, float *, const float *, int64_t, int64_t, int64_t);
  void (*layernorm_forward)(float *, float *, float *, const float *, const float *,
                            const float *, int64_t, int64_t, float);
  void (*layernorm_backward)(float *, float *, float *, const float *, const float *,
                             const float *, const float *, const float *, int64_t, int64_t);
  void (*act_forward)(fsN_act, float *, const float *, size_t);
  void (*act_backward)(fsN_act, float *, const float *, const float *, const float *, size_t);
  void (*dropout_forward)(float *, const float *, size_t, float, uint64_t);
  void (*dropout_backward)(float *, const float *, size_t, float, uint64_t);
  int (*attention_forward)(float *, float *, const float *, int64_t, int64_t, int64_t, int64_t);
  int (*attention_backward)(float *, const float *, const float *, const float *,
                            int64_t, int64_t, int64_t, int64_t);
  double (*cross_entropy_forward)(const float *, const int64_t *, int64_t, int64_t);
  void (*cross_entropy_backward)(float *, const float *, const int64_t *, int64_t, int64_t, float);
  double (*mse_forward)(const float *, const float *, size_t);
  void (*mse_backward)(float *, float *, const float *, const float *, size_t, float);
} fsN_kernels;

extern const fsN_kernels fsN_cpu;

#endif
