/* nn_cuda.cu -- cuda layer kernels (nn.h has the shapes and conventions):
 * GEMMs through cuBLAS, one warp per row for row-wise ops (layernorm,
 * softmax, cross entropy), column sums without atomics so gradients are
 * deterministic (except embedding backward, which scatters with atomics). */
#include "cuda_common.cuh"

extern "C" {
#include "rng_mix.h"
}

#define WARPS (FSCU_THREADS / 32)

/* warp-uniform row loop: all 32 lanes of a warp take the same rows */
#define FOR_WARP_ROWS(r, rows)                                                  \
  for (size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < (rows); \
       r += (size_t)gridDim.x * WARPS)
#define LANE (threadIdx.x % 32)

static inline unsigned warp_blocks(size_t rows) { return fscu_blocks(rows * 32); }

template <class T> __device__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Column sums dst[c] += sum_r load(r, c) without atomics, so gradients are
 * deterministic: blocks of 32 columns x 8 row lanes, grid row y summing rows
 * [y per, (y + 1) per) into part[y, c]; then one thread per column adds the
 * partials in order. */
template <class Load>
__global__ void colsum_part_k(float *part, size_t rows, size_t cols, size_t per, Load load) {
  __shared__ float lanes[WARPS][32];
  size_t c = (size_t)blockIdx.x * 32 + threadIdx.x, r1 = ((size_t)blockIdx.y + 1) * per;
  float s = 0;
  if (c < cols)
    for (size_t r = (size_t)blockIdx.y * per + threadIdx.y; r < rows && r < r1; r += WARPS)
      s += load(r, c);
  lanes[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int y = 1; y < WARPS; y++) s += lanes[y][threadIdx.x];
    part[blockIdx.y * cols + c] = s;
  }
}

__global__ void colsum_finish_k(float *dst, const float *part, size_t ny, size_t cols) {
  FSCU_FOR(c, cols) {
    float s = 0;
    for (size_t y = 0; y < ny; y++) s += part[y * cols + c];
    dst[c] += s;
  }
}

template <class Load>
static int colsum(float *dst, size_t rows, size_t cols, Load load, const char *what) {
  size_t per = rows > 65535 * 128 ? (rows + 65534) / 65535 : 128, ny = (rows + per - 1) / per;
  if (!cols || !rows) return 0;
  float *part = (float *)fscu_scratch(ny * cols * sizeof(float), what);
  if (!part) return -1;
  colsum_part_k<<<dim3((unsigned)((cols + 31) / 32), (unsigned)ny), dim3(32, WARPS)>>>(part, rows, cols,
                                                                                       per, load);
  colsum_finish_k<<<fscu_blocks(cols), FSCU_THREADS>>>(dst, part, ny, cols);
  fscu_scratch_free(part);
  return 0;
}

struct load_rows { /* x[rows, cols] */
  const float *x;
  size_t cols;
  __device__ float operator()(size_t r, size_t c) const { return x[r * cols + c]; }
};

/* --- linear --------------------------------------------------------------- */

__global__ void bias_rows_k(float *out, const float *b, size_t N, size_t OC) {
  FSCU_FOR(i, N * OC) out[i] = b[i % OC];
}

// out[N,OC] = inp[N,C] @ W[OC,C]^T + b[OC]
static int linear_forward(float *out, const float *inp, const float *W, const float *b,
                          int64_t N, int64_t C, int64_t OC) {
  if (b && N && OC)
    bias_rows_k<<<fscu_blocks((size_t)(N * OC)), FSCU_THREADS>>>(out, b, (size_t)N, (size_t)OC);
  return fscu_gemm(false, true, N, OC, C, 1.0f, inp, C, 0, W, C, 0, b ? 1.0f : 0.0f, out, OC, 0, 1);
}

// dinp[N,C] += dout[N,OC] @ W;  dW[OC,C] += dout^T @ inp;  db[OC] += sum_n dout
static int linear_backward(float *dinp, float *dW, float *db, const float *dout, const float *inp,
                           const float *W, int64_t N, int64_t C, int64_t OC) {
  if (dinp && fscu_gemm(false, false, N, C, OC, 1.0f, dout, OC, 0, W, C, 0, 1.0f, dinp, C, 0, 1))
    return -1;
  if (dW && fscu_gemm(true, false, OC, C, N, 1.0f, dout, OC, 0, inp, C, 0, 1.0f, dW, C, 0, 1))
    return -1;
  if (db && colsum(db, (size_t)N, (size_t)OC, load_rows{dout, (size_t)OC}, "linear_backward"))
    return -1;
  return fscu_pending("linear_backward");
}

/* --- embeddings ----------------------------------------------------------- */

// out[N,D] = W[idx[n], :]
__global__ void embedding_fwd_k(float *out, const int64_t *idx, const float *W, size_t N, size_t D) {
  FSCU_FOR(i, N * D) out[i] = W[idx[i / D] * D + i % D];
}

static void embedding_forward(float *out, const int64_t *idx, const float *W, int64_t N, int64_t D) {
  if (N && D)
    embedding_fwd_k<<<fscu_blocks((size_t)(N * D)), FSCU_THREADS>>>(out, idx, W, (size_t)N, (size_t)D);
}

// dW[idx[n], :] += dout[n, :]   (repeated indices: atomics, order not fixed)
__global__ void embedding_bwd_k(float *dW, const float *dout, const int64_t *idx, size_t N, size_t D) {
  FSCU_FOR(i, N * D) atomicAdd(&dW[idx[i / D] * D + i % D], dout[i]);
}

static void embedding_backward(float *dW, const float *dout, const int64_t *idx, int64_t N, int64_t D) {
  if (N && D)
    embedding_bwd_k<<<fscu_blocks((size_t)(N * D)), FSCU_THREADS>>>(dW, dout, idx, (size_t)N, (size_t)D);
}

// out[B,T,D] = inp[B,T,D] + W[t,D]
__global__ void posemb_fwd_k(float *out, const float *inp, const float *W, size_t n, size_t TD) {
  FSCU_FOR(i, n) out[i] = inp[i] + W[i % TD];
}

static void posemb_forward(float *out, const float *inp, const float *W, int64_t B, int64_t T, int64_t D) {
  size_t n = (size_t)(B * T * D);
  if (n) posemb_fwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(out, inp, W, n, (size_t)(T * D));
}

__global__ void add_k(float *y, const float *x, size_t n) {
  FSCU_FOR(i, n) y[i] += x[i];
}

// dinp += dout;  dW[t] += sum_b dout[b,t]
static void posemb_backward(float *dinp, float *dW, const float *dout, int64_t B, int64_t T, int64_t D) {
  size_t n = (size_t)(B * T * D);
  if (dinp && n) add_k<<<fscu_blocks(n), FSCU_THREADS>>>(dinp, dout, n);
  if (dW) colsum(dW, (size_t)B, (size_t)(T * D), load_rows{dout, (size_t)(T * D)}, "posemb_backward");
}

/* --- layernorm ------------------------------------------------------------ */

// out[N,C] = (inp - mean) * rstd * w + b; mean[N], rstd[N]; biased variance
__global__ void layernorm_fwd_k(float *out, float *mean, float *rstd, const float *inp,
                                const float *w, const float *b, size_t N, size_t C, float eps) {
  FOR_WARP_ROWS(n, N) {
    const float *x = inp + n * C;
    float m = 0, v = 0;
    for (size_t c = LANE; c < C; c += 32) m += x[c];
    m = warp_sum(m) / (float)C;
    for (size_t c = LANE; c < C; c += 32) v += (x[c] - m) * (x[c] - m);
    float s = 1.0f / sqrtf(warp_sum(v) / (float)C + eps);
    for (size_t c = LANE; c < C; c += 32) out[n * C + c] = (x[c] - m) * s * w[c] + b[c];
    if (LANE == 0) {
      mean[n] = m;
      rstd[n] = s;
    }
  }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int64_t N, int64_t C, float eps) {
  if (N)
    layernorm_fwd_k<<<warp_blocks((size_t)N), FSCU_THREADS>>>(out, mean, rstd, inp, w, b,
                                                              (size_t)N, (size_t)C, eps);
}

// dinp[n,c] += (w dy - mean(w dy) - norm mean(w dy norm)) rstd, one warp per row
__global__ void layernorm_bwd_k(float *dinp, const float *dout, const float *inp, const float *w,
                                const float *mean, const float *rstd, size_t N, size_t C) {
  FOR_WARP_ROWS(n, N) {
    const float *x = inp + n * C, *dy = dout + n * C;
    float m = mean[n], s = rstd[n], dm = 0, dnm = 0;
    for (size_t c = LANE; c < C; c += 32) {
      float dnorm = w[c] * dy[c];
      dm += dnorm;
      dnm += dnorm * (x[c] - m) * s;
    }
    dm = warp_sum(dm) / (float)C;
    dnm = warp_sum(dnm) / (float)C;
    for (size_t c = LANE; c < C; c += 32)
      dinp[n * C + c] += (w[c] * dy[c] - dm - (x[c] - m) * s * dnm) * s;
  }
}

struct load_norm_dy { /* norm[n, c] dy[n, c], for dw */
  const float *dout, *inp, *mean, *rstd;
  size_t C;
  __device__ float operator()(size_t n, size_t c) const {
    return (inp[n * C + c] - mean[n]) * rstd[n] * dout[n * C + c];
  }
};

static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, int64_t N, int64_t C) {
  if (!N || !C) return;
  if (dinp)
    layernorm_bwd_k<<<warp_blocks((size_t)N), FSCU_THREADS>>>(dinp, dout, inp, w, mean, rstd,
                                                              (size_t)N, (size_t)C);
  // dw[c] += sum_n norm[n,c] dy[n,c];  db[c] += sum_n dy[n,c]
  if (dw) colsum(dw, (size_t)N, (size_t)C, load_norm_dy{dout, inp, mean, rstd, (size_t)C}, "layernorm_backward");
  if (db) colsum(db, (size_t)N, (size_t)C, load_rows{dout, (size_t)C}, "layernorm_backward");
}

/* --- activations (the cpu's formulas; erf GELU exact, not the tanh form) -- */

#define SQRT_2_OVER_PI 0.7978845608028654f
#define INV_SQRT_2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f

__global__ void act_fwd_k(fsN_act act, float *out, const float *inp, size_t n) {
  FSCU_FOR(i, n) {
    float x = inp[i], y;
    switch (act) {
    case FSN_RELU: y = x > 0 ? x : 0; break;
    case FSN_GELU: y = 0.5f * x * (1.0f + erff(x * INV_SQRT_2)); break;
    case FSN_GELU_TANH: y = 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * (x + 0.044715f * x * x * x))); break;
    case FSN_TANH: y = tanhf(x); break;
    case FSN_SIGMOID: y = 1.0f / (1.0f + expf(-x)); break;
    default: y = x / (1.0f + expf(-x)); break; /* FSN_SILU */
    }
    out[i] = y;
  }
}

static void act_forward(fsN_act act, float *out, const float *inp, size_t n) {
  if (n) act_fwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(act, out, inp, n);
}

__global__ void act_bwd_k(fsN_act act, float *dinp, const float *dout, const float *inp,
                          const float *out, size_t n) {
  FSCU_FOR(i, n) {
    float x = inp[i], d;
    switch (act) {
    case FSN_RELU: d = x > 0 ? 1.0f : 0.0f; break;
    case FSN_GELU: d = 0.5f * (1.0f + erff(x * INV_SQRT_2)) + x * INV_SQRT_2PI * expf(-0.5f * x * x); break;
    case FSN_GELU_TANH: {
      float t = tanhf(SQRT_2_OVER_PI * (x + 0.044715f * x * x * x));
      float du = SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
      d = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
      break;
    }
    case FSN_TANH: d = 1.0f - out[i] * out[i]; break;
    case FSN_SIGMOID: d = out[i] * (1.0f - out[i]); break;
    default: { /* FSN_SILU */
      float s = 1.0f / (1.0f + expf(-x));
      d = s * (1.0f + x * (1.0f - s));
      break;
    }
    }
    /* relu passes dout itself (0 * inf would be nan), as the cpu */
    dinp[i] += act == FSN_RELU ? (x > 0 ? dout[i] : 0.0f) : dout[i] * d;
  }
}

static void act_backward(fsN_act act, float *dinp, const float *dout, const float *inp,
                         const float *out, size_t n) {
  if (n) act_bwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(act, dinp, dout, inp, out, n);
}

/* --- dropout: the cpu's mask, bit for bit (u(key, i) >= p) --------------- */

__global__ void dropout_k(float *out, const float *inp, size_t n, float p, float s, uint64_t key,
                          bool accumulate) {
  FSCU_FOR(i, n) {
    bool keep = fsR_u01(key, i) >= p;
    if (accumulate) {
      if (keep) out[i] += __fmul_rn(inp[i], s); /* no FMA: the cpu rounds the product */
    } else {
      out[i] = keep ? inp[i] * s : 0.0f;
    }
  }
}

/* p == 1 drops everything (torch returns zeros, not nan) */
static float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

static void dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t key) {
  if (n) dropout_k<<<fscu_blocks(n), FSCU_THREADS>>>(out, inp, n, p, dropout_scale(p), key, false);
}

static void dropout_backward(float *dinp, const float *dout, size_t n, float p, uint64_t key) {
  if (n) dropout_k<<<fscu_blocks(n), FSCU_THREADS>>>(dinp, dout, n, p, dropout_scale(p), key, true);
}

/* --- causal self-attention ------------------------------------------------
 * Every product is one GEMM per head (b, h) over a [B, NH] grid of matrices:
 * head h of q, k, v is the [T, hs] block at column h*hs of inp[b] (leading
 * dim 3C), of att the [T, T] block (b, h).  heads_gemm batches the longer
 * side of the grid (the matrices are evenly spaced along it) and loops over
 * the shorter, so a step makes min(B, NH) cuBLAS calls per product. */

struct grid_mat { /* matrix (b, h) at p + b * sb + h * sh, leading dim ld */
  const float *p;
  int64_t ld, sb, sh;
};

static int heads_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, grid_mat A,
                      grid_mat Bm, float beta, float *C, int64_t ldc, int64_t cb, int64_t ch,
                      int64_t nb, int64_t nh) {
  bool loop_b = nb <= nh;
  for (int64_t o = 0; o < (loop_b ? nb : nh); o++) {
    int64_t oa = o * (loop_b ? A.sb : A.sh), ob = o * (loop_b ? Bm.sb : Bm.sh), oc = o * (loop_b ? cb : ch);
    if (fscu_gemm(ta, tb, M, N, K, alpha, A.p + oa, A.ld, loop_b ? A.sh : A.sb, Bm.p + ob, Bm.ld,
                  loop_b ? Bm.sh : Bm.sb, beta, C + oc, ldc, loop_b ? ch : cb, loop_b ? nh : nb))
      return -1;
  }
  return 0;
}

// att[r, t2] (r = (b, h, t)) holds scaled q.k; softmax over t2 <= t, 0 above
__global__ void softmax_causal_k(float *att, size_t rows, size_t T) {
  FOR_WARP_ROWS(r, rows) {
    float *a = att + r * T;
    size_t t = r % T;
    float mx = -INFINITY, sum = 0;
    for (size_t j = LANE; j <= t; j += 32) mx = fmaxf(mx, a[j]);
    mx = warp_max(mx);
    for (size_t j = LANE; j <= t; j += 32) {
      a[j] = expf(a[j] - mx);
      sum += a[j];
    }
    sum = warp_sum(sum);
    for (size_t j = LANE; j < T; j += 32) a[j] = j <= t ? a[j] / sum : 0.0f;
  }
}

// out[B,T,C] = softmax(q k^T / sqrt(hs)) v per head; att[B,NH,T,T] saved
static int attention_forward(float *out, float *att, const float *inp, int64_t B, int64_t T,
                             int64_t C, int64_t NH) {
  int64_t hs = C / NH, C3 = 3 * C, TT = T * T;
  if (!B || !T || !C) return 0;
  grid_mat q = {inp, C3, T * C3, hs}, k = {inp + C, C3, T * C3, hs}, v = {inp + 2 * C, C3, T * C3, hs};
  grid_mat P = {att, T, NH * TT, TT};
  if (heads_gemm(false, true, T, T, hs, 1.0f / sqrtf((float)hs), q, k, 0.0f, att, T, NH * TT, TT, B, NH))
    return -1;
  size_t rows = (size_t)(B * NH * T);
  softmax_causal_k<<<warp_blocks(rows), FSCU_THREADS>>>(att, rows, (size_t)T);
  if (heads_gemm(false, false, T, hs, T, 1.0f, P, v, 0.0f, out, C, T * C, hs, B, NH)) return -1;
  return fscu_pending("attention_forward");
}

// d[r, t2] <- att (d - sum_t2 att d) * scale: softmax and the q.k scaling backward
__global__ void softmax_causal_bwd_k(float *d, const float *att, size_t rows, size_t T, float scale) {
  FOR_WARP_ROWS(r, rows) {
    const float *a = att + r * T;
    float *dr = d + r * T;
    size_t t = r % T;
    float dot = 0;
    for (size_t j = LANE; j <= t; j += 32) dot += a[j] * dr[j];
    dot = warp_sum(dot);
    for (size_t j = LANE; j < T; j += 32) dr[j] = j <= t ? a[j] * (dr[j] - dot) * scale : 0.0f;
  }
}

// dinp[B,T,3C] += d(q, k, v) given dout[B,T,C]; scratch dS[B,NH,T,T]
static int attention_backward(float *dinp, const float *dout, const float *inp, const float *att,
                              int64_t B, int64_t T, int64_t C, int64_t NH) {
  int64_t hs = C / NH, C3 = 3 * C, TT = T * T;
  if (!B || !T || !C) return 0;
  size_t rows = (size_t)(B * NH * T);
  float *dS = (float *)fscu_scratch(rows * (size_t)T * sizeof(float), "attention_backward");
  if (!dS) return -1;
  grid_mat q = {inp, C3, T * C3, hs}, k = {inp + C, C3, T * C3, hs}, v = {inp + 2 * C, C3, T * C3, hs};
  grid_mat P = {att, T, NH * TT, TT}, dP = {dS, T, NH * TT, TT}, dy = {dout, C, T * C, hs};
  // dv += P^T dout;  dP = dout v^T;  dS = softmax'(dP) scale;  dq += dS k;  dk += dS^T q
  int rc = heads_gemm(true, false, T, hs, T, 1.0f, P, dy, 1.0f, dinp + 2 * C, C3, T * C3, hs, B, NH) ||
           heads_gemm(false, true, T, T, hs, 1.0f, dy, v, 0.0f, dS, T, NH * TT, TT, B, NH);
  if (!rc) {
    softmax_causal_bwd_k<<<warp_blocks(rows), FSCU_THREADS>>>(dS, att, rows, (size_t)T,
                                                              1.0f / sqrtf((float)hs));
    rc = heads_gemm(false, false, T, hs, T, 1.0f, dP, k, 1.0f, dinp, C3, T * C3, hs, B, NH) ||
         heads_gemm(true, false, T, hs, T, 1.0f, dP, q, 1.0f, dinp + C, C3, T * C3, hs, B, NH);
  }
  fscu_scratch_free(dS);
  return rc ? -1 : fscu_pending("attention_backward");
}

/* --- losses (double where the cpu uses double) ---------------------------- */

// logsumexp of row x[C], max-shifted, summed in double; all lanes get it
__device__ double row_lse(const float *x, size_t C) {
  float mx = -INFINITY;
  for (size_t c = LANE; c < C; c += 32) mx = fmaxf(mx, x[c]);
  mx = warp_max(mx);
  double s = 0;
  for (size_t c = LANE; c < C; c += 32) s += exp((double)x[c] - mx);
  return mx + log(warp_sum(s));
}

__global__ void ce_rows_k(double *loss, const float *logits, const int64_t *targets, size_t N, size_t C) {
  FOR_WARP_ROWS(n, N) {
    double lse = row_lse(logits + n * C, C);
    if (LANE == 0) loss[n] = lse - logits[n * C + targets[n]];
  }
}

// mean_n [logsumexp(logits[n,:]) - logits[n, targets[n]]]
static double cross_entropy_forward(const float *logits, const int64_t *targets, int64_t N, int64_t C) {
  if (!N) return NAN; /* torch: mean over no elements */
  double *rows = (double *)fscu_scratch((size_t)N * sizeof(double), "cross_entropy_forward");
  if (!rows) return NAN;
  ce_rows_k<<<warp_blocks((size_t)N), FSCU_THREADS>>>(rows, logits, targets, (size_t)N, (size_t)C);
  double total;
  int rc = fscu_reduce((size_t)N, fscu_load_array<double>{rows}, fscu_add{}, 0.0, &total,
                       "cross_entropy_forward");
  fscu_scratch_free(rows);
  return rc ? NAN : total / (double)N;
}

// dlogits[N,C] += dloss (softmax(logits[n]) - onehot(targets[n])) / N
__global__ void ce_bwd_k(float *dlogits, const float *logits, const int64_t *targets, size_t N,
                         size_t C, float scale) {
  FOR_WARP_ROWS(n, N) {
    const float *x = logits + n * C;
    float *dx = dlogits + n * C;
    double lse = row_lse(x, C);
    for (size_t c = LANE; c < C; c += 32) dx[c] += scale * (float)exp((double)x[c] - lse);
    __syncwarp();
    if (LANE == 0) dx[targets[n]] -= scale;
  }
}

static void cross_entropy_backward(float *dlogits, const float *logits, const int64_t *targets,
                                   int64_t N, int64_t C, float dloss) {
  if (N)
    ce_bwd_k<<<warp_blocks((size_t)N), FSCU_THREADS>>>(dlogits, logits, targets, (size_t)N,
                                                       (size_t)C, dloss / (float)N);
}

struct load_sqdiff {
  const float *p, *t;
  __device__ double operator()(size_t i) const {
    double d = (double)p[i] - t[i];
    return d * d;
  }
};

// mean_i (pred[i] - target[i])^2
static double mse_forward(const float *pred, const float *target, size_t n) {
  double s;
  if (!n) return NAN;
  return fscu_reduce(n, load_sqdiff{pred, target}, fscu_add{}, 0.0, &s, "mse_forward") ? NAN
                                                                                       : s / (double)n;
}

__global__ void mse_bwd_k(float *dpred, float *dtarget, const float *pred, const float *target,
                          size_t n, float scale) {
  FSCU_FOR(i, n) {
    float g = scale * (pred[i] - target[i]);
    if (dpred) dpred[i] += g;
    if (dtarget) dtarget[i] -= g;
  }
}

// dpred += dloss 2 (pred - target) / n;  dtarget -= the same
static void mse_backward(float *dpred, float *dtarget, const float *pred, const float *target,
                         size_t n, float dloss) {
  if (n)
    mse_bwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(dpred, dtarget, pred, target, n,
                                                2.0f * dloss / (float)n);
}

extern "C" const fsN_kernels fsN_cuda = {
  linear_forward, linear_backward,
  embedding_forward, embedding_backward,
  posemb_forward, posemb_backward,
  layernorm_forward, layernorm_backward,
  act_forward, act_backward,
  dropout_forward, dropout_backward,
  attention_forward, attention_backward,
  cross_entropy_forward, cross_entropy_backward,
  mse_forward, mse_backward,
};
