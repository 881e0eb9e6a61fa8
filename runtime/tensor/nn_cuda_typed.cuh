/* nn_cuda_typed.cuh -- cuda's layer kernels over an element type T (nn.h has
 * the shapes and conventions), dropout among them: GEMMs through cuBLAS (fscu_gemm's float and
 * double overloads), one warp per row for row-wise ops (layernorm, softmax,
 * cross entropy), column sums without atomics so gradients are
 * deterministic (except embedding backward, which scatters with atomics).
 *
 * Invariant: one text for float and double, as nn_typed.h is on the cpu;
 * constants are written as T(literal), which for float gives the float
 * literal's value, and math calls take C++'s overloads (sqrt(float) is
 * sqrtf), so the float instantiation is the float kernels' code.  nn_cuda.cu
 * instantiates T = float (fsN_cuda), f64_cuda.cu T = double (64-true's
 * table, f64_kernels.h).  Included once per translation unit, after
 * cuda_common.cuh. */
#ifndef FS_NN_CUDA_TYPED_CUH
#define FS_NN_CUDA_TYPED_CUH

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

template <class T> __device__ T warp_max(T v) {
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Column sums dst[c] += sum_r load(r, c) without atomics, so gradients are
 * deterministic: blocks of 32 columns x 8 row lanes, grid row y summing rows
 * [y per, (y + 1) per) into part[y, c]; then one thread per column adds the
 * partials in order. */
template <class T, class Load>
__global__ void colsum_part_k(T *part, size_t rows, size_t cols, size_t per, Load load) {
  __shared__ T lanes[WARPS][32];
  size_t c = (size_t)blockIdx.x * 32 + threadIdx.x, r1 = ((size_t)blockIdx.y + 1) * per;
  T s = 0;
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

template <class T> __global__ void colsum_finish_k(T *dst, const T *part, size_t ny, size_t cols) {
  FSCU_FOR(c, cols) {
    T s = 0;
    for (size_t y = 0; y < ny; y++) s += part[y * cols + c];
    dst[c] += s;
  }
}

template <class T, class Load>
static int colsum(T *dst, size_t rows, size_t cols, Load load, const char *what) {
  size_t per = rows > 65535 * 128 ? (rows + 65534) / 65535 : 128, ny = (rows + per - 1) / per;
  if (!cols || !rows) return 0;
  T *part = (T *)fscu_scratch(ny * cols * sizeof(T), what);
  if (!part) return -1;
  colsum_part_k<<<dim3((unsigned)((cols + 31) / 32), (unsigned)ny), dim3(32, WARPS)>>>(part, rows, cols,
                                                                                       per, load);
  colsum_finish_k<<<fscu_blocks(cols), FSCU_THREADS>>>(dst, part, ny, cols);
  fscu_scratch_free(part);
  return 0;
}

template <class T> struct load_rows { /* x[rows, cols] */
  const T *x;
  size_t cols;
  __device__ T operator()(size_t r, size_t c) const { return x[r * cols + c]; }
};

/* --- linear --------------------------------------------------------------- */

template <class T> __global__ void bias_rows_k(T *out, const T *b, size_t N, size_t OC) {
  FSCU_FOR(i, N * OC) out[i] = b[i % OC];
}

// out[N,OC] = inp[N,C] @ W[OC,C]^T + b[OC]
template <class T>
static int linear_forward(T *out, const T *inp, const T *W, const T *b, int64_t N, int64_t C, int64_t OC) {
  if (b && N && OC)
    bias_rows_k<<<fscu_blocks((size_t)(N * OC)), FSCU_THREADS>>>(out, b, (size_t)N, (size_t)OC);
  return fscu_gemm(false, true, N, OC, C, T(1), inp, C, 0, W, C, 0, b ? T(1) : T(0), out, OC, 0, 1);
}

// dinp[N,C] += dout[N,OC] @ W;  dW[OC,C] += dout^T @ inp;  db[OC] += sum_n dout
template <class T>
static int linear_backward(T *dinp, T *dW, T *db, const T *dout, const T *inp, const T *W, int64_t N, int64_t C,
                           int64_t OC) {
  if (dinp && fscu_gemm(false, false, N, C, OC, T(1), dout, OC, 0, W, C, 0, T(1), dinp, C, 0, 1))
    return -1;
  if (dW && fscu_gemm(true, false, OC, C, N, T(1), dout, OC, 0, inp, C, 0, T(1), dW, C, 0, 1))
    return -1;
  if (db && colsum(db, (size_t)N, (size_t)OC, load_rows<T>{dout, (size_t)OC}, "linear_backward"))
    return -1;
  return fscu_pending("linear_backward");
}

/* --- embeddings ----------------------------------------------------------- */

// out[N,D] = W[idx[n], :]
template <class T> __global__ void embedding_fwd_k(T *out, const int64_t *idx, const T *W, size_t N, size_t D) {
  FSCU_FOR(i, N * D) out[i] = W[idx[i / D] * D + i % D];
}

template <class T> static void embedding_forward(T *out, const int64_t *idx, const T *W, int64_t N, int64_t D) {
  if (N && D)
    embedding_fwd_k<<<fscu_blocks((size_t)(N * D)), FSCU_THREADS>>>(out, idx, W, (size_t)N, (size_t)D);
}

// dW[idx[n], :] += dout[n, :]   (repeated indices: atomics, order not fixed)
template <class T> __global__ void embedding_bwd_k(T *dW, const T *dout, const int64_t *idx, size_t N, size_t D) {
  FSCU_FOR(i, N * D) atomicAdd(&dW[idx[i / D] * D + i % D], dout[i]);
}

template <class T> static void embedding_backward(T *dW, const T *dout, const int64_t *idx, int64_t N, int64_t D) {
  if (N && D)
    embedding_bwd_k<<<fscu_blocks((size_t)(N * D)), FSCU_THREADS>>>(dW, dout, idx, (size_t)N, (size_t)D);
}

// out[B,T,D] = inp[B,T,D] + W[t,D]
template <class T> __global__ void posemb_fwd_k(T *out, const T *inp, const T *W, size_t n, size_t TD) {
  FSCU_FOR(i, n) out[i] = inp[i] + W[i % TD];
}

template <class T>
static void posemb_forward(T *out, const T *inp, const T *W, int64_t B, int64_t Tn, int64_t D) {
  size_t n = (size_t)(B * Tn * D);
  if (n) posemb_fwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(out, inp, W, n, (size_t)(Tn * D));
}

template <class T> __global__ void add_k(T *y, const T *x, size_t n) {
  FSCU_FOR(i, n) y[i] += x[i];
}

// dinp += dout;  dW[t] += sum_b dout[b,t]
template <class T> static void posemb_backward(T *dinp, T *dW, const T *dout, int64_t B, int64_t Tn, int64_t D) {
  size_t n = (size_t)(B * Tn * D);
  if (dinp && n) add_k<<<fscu_blocks(n), FSCU_THREADS>>>(dinp, dout, n);
  if (dW) colsum(dW, (size_t)B, (size_t)(Tn * D), load_rows<T>{dout, (size_t)(Tn * D)}, "posemb_backward");
}

/* --- layernorm ------------------------------------------------------------ */

// out[N,C] = (inp - mean) * rstd * w + b; mean[N], rstd[N]; biased variance
template <class T>
__global__ void layernorm_fwd_k(T *out, T *mean, T *rstd, const T *inp, const T *w, const T *b, size_t N, size_t C,
                                T eps) {
  FOR_WARP_ROWS(n, N) {
    const T *x = inp + n * C;
    T m = 0, v = 0;
    for (size_t c = LANE; c < C; c += 32) m += x[c];
    m = warp_sum(m) / (T)C;
    for (size_t c = LANE; c < C; c += 32) v += (x[c] - m) * (x[c] - m);
    T s = T(1) / sqrt(warp_sum(v) / (T)C + eps);
    for (size_t c = LANE; c < C; c += 32) out[n * C + c] = (x[c] - m) * s * w[c] + b[c];
    if (LANE == 0) {
      mean[n] = m;
      rstd[n] = s;
    }
  }
}

template <class T>
static void layernorm_forward(T *out, T *mean, T *rstd, const T *inp, const T *w, const T *b, int64_t N, int64_t C,
                              T eps) {
  if (N)
    layernorm_fwd_k<<<warp_blocks((size_t)N), FSCU_THREADS>>>(out, mean, rstd, inp, w, b,
                                                              (size_t)N, (size_t)C, eps);
}

// dinp[n,c] += (w dy - mean(w dy) - norm mean(w dy norm)) rstd, one warp per row
template <class T>
__global__ void layernorm_bwd_k(T *dinp, const T *dout, const T *inp, const T *w, const T *mean, const T *rstd,
                                size_t N, size_t C) {
  FOR_WARP_ROWS(n, N) {
    const T *x = inp + n * C, *dy = dout + n * C;
    T m = mean[n], s = rstd[n], dm = 0, dnm = 0;
    for (size_t c = LANE; c < C; c += 32) {
      T dnorm = w[c] * dy[c];
      dm += dnorm;
      dnm += dnorm * (x[c] - m) * s;
    }
    dm = warp_sum(dm) / (T)C;
    dnm = warp_sum(dnm) / (T)C;
    for (size_t c = LANE; c < C; c += 32)
      dinp[n * C + c] += (w[c] * dy[c] - dm - (x[c] - m) * s * dnm) * s;
  }
}

template <class T> struct load_norm_dy { /* norm[n, c] dy[n, c], for dw */
  const T *dout, *inp, *mean, *rstd;
  size_t C;
  __device__ T operator()(size_t n, size_t c) const {
    return (inp[n * C + c] - mean[n]) * rstd[n] * dout[n * C + c];
  }
};

template <class T>
static void layernorm_backward(T *dinp, T *dw, T *db, const T *dout, const T *inp, const T *w, const T *mean,
                               const T *rstd, int64_t N, int64_t C) {
  if (!N || !C) return;
  if (dinp)
    layernorm_bwd_k<<<warp_blocks((size_t)N), FSCU_THREADS>>>(dinp, dout, inp, w, mean, rstd,
                                                              (size_t)N, (size_t)C);
  // dw[c] += sum_n norm[n,c] dy[n,c];  db[c] += sum_n dy[n,c]
  if (dw)
    colsum(dw, (size_t)N, (size_t)C, load_norm_dy<T>{dout, inp, mean, rstd, (size_t)C}, "layernorm_backward");
  if (db) colsum(db, (size_t)N, (size_t)C, load_rows<T>{dout, (size_t)C}, "layernorm_backward");
}

/* --- activations (the cpu's formulas; erf GELU exact, not the tanh form) -- */

#define SQRT_2_OVER_PI T(0.7978845608028654)
#define INV_SQRT_2 T(0.7071067811865476)
#define INV_SQRT_2PI T(0.3989422804014327)

template <class T> __global__ void act_fwd_k(fsN_act act, T *out, const T *inp, size_t n) {
  FSCU_FOR(i, n) {
    T x = inp[i], y;
    switch (act) {
    case FSN_RELU: y = x > 0 ? x : 0; break;
    case FSN_GELU: y = T(0.5) * x * (T(1) + erf(x * INV_SQRT_2)); break;
    case FSN_GELU_TANH: y = T(0.5) * x * (T(1) + tanh(SQRT_2_OVER_PI * (x + T(0.044715) * x * x * x))); break;
    case FSN_TANH: y = tanh(x); break;
    case FSN_SIGMOID: y = T(1) / (T(1) + exp(-x)); break;
    default: y = x / (T(1) + exp(-x)); break; /* FSN_SILU */
    }
    out[i] = y;
  }
}

template <class T> static void act_forward(fsN_act act, T *out, const T *inp, size_t n) {
  if (n) act_fwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(act, out, inp, n);
}

template <class T>
__global__ void act_bwd_k(fsN_act act, T *dinp, const T *dout, const T *inp, const T *out, size_t n) {
  FSCU_FOR(i, n) {
    T x = inp[i], d;
    switch (act) {
    case FSN_RELU: d = x > 0 ? T(1) : T(0); break;
    case FSN_GELU: d = T(0.5) * (T(1) + erf(x * INV_SQRT_2)) + x * INV_SQRT_2PI * exp(T(-0.5) * x * x); break;
    case FSN_GELU_TANH: {
      T t = tanh(SQRT_2_OVER_PI * (x + T(0.044715) * x * x * x));
      T du = SQRT_2_OVER_PI * (T(1) + T(3) * T(0.044715) * x * x);
      d = T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
      break;
    }
    case FSN_TANH: d = T(1) - out[i] * out[i]; break;
    case FSN_SIGMOID: d = out[i] * (T(1) - out[i]); break;
    default: { /* FSN_SILU */
      T s = T(1) / (T(1) + exp(-x));
      d = s * (T(1) + x * (T(1) - s));
      break;
    }
    }
    /* relu passes dout itself (0 * inf would be nan), as the cpu */
    dinp[i] += act == FSN_RELU ? (x > 0 ? dout[i] : T(0)) : dout[i] * d;
  }
}

template <class T> static void act_backward(fsN_act act, T *dinp, const T *dout, const T *inp, const T *out, size_t n) {
  if (n) act_bwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(act, dinp, dout, inp, out, n);
}

#undef SQRT_2_OVER_PI
#undef INV_SQRT_2
#undef INV_SQRT_2PI

/* --- causal self-attention ------------------------------------------------
 * Every product is one GEMM per head (b, h) over a [B, NH] grid of matrices:
 * head h of q, k, v is the [T, hs] block at column h*hs of inp[b] (leading
 * dim 3C), of att the [T, T] block (b, h).  heads_gemm batches the longer
 * side of the grid (the matrices are evenly spaced along it) and loops over
 * the shorter, so a step makes min(B, NH) cuBLAS calls per product. */

template <class T> struct grid_mat { /* matrix (b, h) at p + b * sb + h * sh, leading dim ld */
  const T *p;
  int64_t ld, sb, sh;
};

template <class T>
static int heads_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, grid_mat<T> A, grid_mat<T> Bm,
                      T beta, T *C, int64_t ldc, int64_t cb, int64_t ch, int64_t nb, int64_t nh) {
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
template <class T> __global__ void softmax_causal_k(T *att, size_t rows, size_t Tn) {
  FOR_WARP_ROWS(r, rows) {
    T *a = att + r * Tn;
    size_t t = r % Tn;
    T mx = -INFINITY, sum = 0;
    for (size_t j = LANE; j <= t; j += 32) mx = fmax(mx, a[j]);
    mx = warp_max(mx);
    for (size_t j = LANE; j <= t; j += 32) {
      a[j] = exp(a[j] - mx);
      sum += a[j];
    }
    sum = warp_sum(sum);
    for (size_t j = LANE; j < Tn; j += 32) a[j] = j <= t ? a[j] / sum : T(0);
  }
}

// out[B,T,C] = softmax(q k^T / sqrt(hs)) v per head; att[B,NH,T,T] saved
template <class T>
static int attention_forward(T *out, T *att, const T *inp, int64_t B, int64_t Tn, int64_t C, int64_t NH) {
  int64_t hs = C / NH, C3 = 3 * C, TT = Tn * Tn;
  if (!B || !Tn || !C) return 0;
  grid_mat<T> q = {inp, C3, Tn * C3, hs}, k = {inp + C, C3, Tn * C3, hs}, v = {inp + 2 * C, C3, Tn * C3, hs};
  grid_mat<T> P = {att, Tn, NH * TT, TT};
  if (heads_gemm(false, true, Tn, Tn, hs, T(1) / sqrt((T)hs), q, k, T(0), att, Tn, NH * TT, TT, B, NH))
    return -1;
  size_t rows = (size_t)(B * NH * Tn);
  softmax_causal_k<<<warp_blocks(rows), FSCU_THREADS>>>(att, rows, (size_t)Tn);
  if (heads_gemm(false, false, Tn, hs, Tn, T(1), P, v, T(0), out, C, Tn * C, hs, B, NH)) return -1;
  return fscu_pending("attention_forward");
}

// d[r, t2] <- att (d - sum_t2 att d) * scale: softmax and the q.k scaling backward
template <class T> __global__ void softmax_causal_bwd_k(T *d, const T *att, size_t rows, size_t Tn, T scale) {
  FOR_WARP_ROWS(r, rows) {
    const T *a = att + r * Tn;
    T *dr = d + r * Tn;
    size_t t = r % Tn;
    T dot = 0;
    for (size_t j = LANE; j <= t; j += 32) dot += a[j] * dr[j];
    dot = warp_sum(dot);
    for (size_t j = LANE; j < Tn; j += 32) dr[j] = j <= t ? a[j] * (dr[j] - dot) * scale : T(0);
  }
}

// dinp[B,T,3C] += d(q, k, v) given dout[B,T,C]; scratch dS[B,NH,T,T]
template <class T>
static int attention_backward(T *dinp, const T *dout, const T *inp, const T *att, int64_t B, int64_t Tn, int64_t C,
                              int64_t NH) {
  int64_t hs = C / NH, C3 = 3 * C, TT = Tn * Tn;
  if (!B || !Tn || !C) return 0;
  size_t rows = (size_t)(B * NH * Tn);
  T *dS = (T *)fscu_scratch(rows * (size_t)Tn * sizeof(T), "attention_backward");
  if (!dS) return -1;
  grid_mat<T> q = {inp, C3, Tn * C3, hs}, k = {inp + C, C3, Tn * C3, hs}, v = {inp + 2 * C, C3, Tn * C3, hs};
  grid_mat<T> P = {att, Tn, NH * TT, TT}, dP = {dS, Tn, NH * TT, TT}, dy = {dout, C, Tn * C, hs};
  // dv += P^T dout;  dP = dout v^T;  dS = softmax'(dP) scale;  dq += dS k;  dk += dS^T q
  int rc = heads_gemm(true, false, Tn, hs, Tn, T(1), P, dy, T(1), dinp + 2 * C, C3, Tn * C3, hs, B, NH) ||
           heads_gemm(false, true, Tn, Tn, hs, T(1), dy, v, T(0), dS, Tn, NH * TT, TT, B, NH);
  if (!rc) {
    softmax_causal_bwd_k<<<warp_blocks(rows), FSCU_THREADS>>>(dS, att, rows, (size_t)Tn, T(1) / sqrt((T)hs));
    rc = heads_gemm(false, false, Tn, hs, Tn, T(1), dP, k, T(1), dinp, C3, Tn * C3, hs, B, NH) ||
         heads_gemm(true, false, Tn, hs, Tn, T(1), dP, q, T(1), dinp + C, C3, Tn * C3, hs, B, NH);
  }
  fscu_scratch_free(dS);
  return rc ? -1 : fscu_pending("attention_backward");
}

/* --- cross entropy (double where the cpu uses double) --------------------- */

// logsumexp of row x[C], max-shifted, summed in double; all lanes get it
template <class T> __device__ double row_lse(const T *x, size_t C) {
  T mx = -INFINITY;
  for (size_t c = LANE; c < C; c += 32) mx = fmax(mx, x[c]);
  mx = warp_max(mx);
  double s = 0;
  for (size_t c = LANE; c < C; c += 32) s += exp((double)x[c] - mx);
  return mx + log(warp_sum(s));
}

template <class T>
__global__ void ce_rows_k(double *loss, const T *logits, const int64_t *targets, size_t N, size_t C) {
  FOR_WARP_ROWS(n, N) {
    double lse = row_lse(logits + n * C, C);
    if (LANE == 0) loss[n] = lse - logits[n * C + targets[n]];
  }
}

// mean_n [logsumexp(logits[n,:]) - logits[n, targets[n]]]
template <class T> static double cross_entropy_forward(const T *logits, const int64_t *targets, int64_t N, int64_t C) {
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
template <class T>
__global__ void ce_bwd_k(T *dlogits, const T *logits, const int64_t *targets, size_t N, size_t C, T scale) {
  FOR_WARP_ROWS(n, N) {
    const T *x = logits + n * C;
    T *dx = dlogits + n * C;
    double lse = row_lse(x, C);
    for (size_t c = LANE; c < C; c += 32) dx[c] += scale * (T)exp((double)x[c] - lse);
    __syncwarp();
    if (LANE == 0) dx[targets[n]] -= scale;
  }
}

template <class T>
static void cross_entropy_backward(T *dlogits, const T *logits, const int64_t *targets, int64_t N, int64_t C,
                                   T dloss) {
  if (N)
    ce_bwd_k<<<warp_blocks((size_t)N), FSCU_THREADS>>>(dlogits, logits, targets, (size_t)N,
                                                       (size_t)C, dloss / (T)N);
}

/* --- dropout: the cpu's mask, bit for bit (u(key, i) >= p) --------------- */

/* a product rounded on its own (no FMA: the cpu rounds it before the sum) */
static __device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
static __device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <class T>
__global__ void dropout_k(T *out, const T *inp, size_t n, T p, T s, uint64_t key, bool accumulate) {
  FSCU_FOR(i, n) {
    bool keep = fsR_u01(key, i) >= p;
    if (accumulate) {
      if (keep) out[i] += mul_rn(inp[i], s);
    } else {
      out[i] = keep ? inp[i] * s : T(0);
    }
  }
}

/* p == 1 drops everything (torch returns zeros, not nan) */
template <class T> static T dropout_scale(T p) { return p < T(1) ? T(1) / (T(1) - p) : T(0); }

template <class T> static void dropout_forward(T *out, const T *inp, size_t n, T p, uint64_t key) {
  if (n) dropout_k<<<fscu_blocks(n), FSCU_THREADS>>>(out, inp, n, p, dropout_scale(p), key, false);
}

template <class T> static void dropout_backward(T *dinp, const T *dout, size_t n, T p, uint64_t key) {
  if (n) dropout_k<<<fscu_blocks(n), FSCU_THREADS>>>(dinp, dout, n, p, dropout_scale(p), key, true);
}

#endif
