/* f64_cuda.cu -- cuda's float64 kernels (fsB_f64_cuda, f64_kernels.h):
 * 64-true on a GPU.  The layer kernels are nn_cuda_typed.cuh's instantiated
 * over double (the float32 ones' text), the products cublasDgemm
 * (fscu_gemm's double overload), the optimizer rules f64_rules.h's (the
 * cpu's text, one thread per element); the tensor API's elementwise
 * functions, broadcast arithmetic, sums over a dim and softmax are here,
 * their formulas those of ops_typed.h (the cpu's double kernels).
 *
 * Invariant: every pointer is a device pointer; work goes to the default
 * stream as backend_cuda.cu's, and the functions returning a value wait
 * for it.  Gradients of broadcast operands are gathered (one thread per
 * operand element, over the output positions that read it, in the cpu's
 * order), not scattered with atomics, so they are deterministic; the
 * scatter-adds of indexing and embeddings use atomics, as float32's do.
 * Reductions are fscu_reduce's fixed tree, so a sum is deterministic but
 * not the cpu's left-to-right bits.  The other half: backend_cuda.cu
 * (the table's place in fsB_cuda), f64.c (the callers). */
#include "nn_cuda_typed.cuh"

extern "C" {
#include "f64_kernels.h"
#include "f64_rules.h"
}

/* --- small loops ------------------------------------------------------------ */

__global__ void axpy64_k(size_t n, double alpha, const double *x, double *y) {
  FSCU_FOR(i, n) y[i] += alpha * x[i];
}
static void axpy64(size_t n, double alpha, const double *x, double *y) {
  if (n) axpy64_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, alpha, x, y);
}

__global__ void shift64_k(size_t n, double v, double *y) {
  FSCU_FOR(i, n) y[i] += v;
}
static void shift64(size_t n, double v, double *y) {
  if (n) shift64_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, v, y);
}

__global__ void scale64_k(size_t n, double alpha, double *x) {
  FSCU_FOR(i, n) x[i] *= alpha;
}
static void scale64(size_t n, double alpha, double *x) {
  if (n) scale64_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, alpha, x);
}

__global__ void divide64_k(size_t n, double d, double *x) {
  FSCU_FOR(i, n) x[i] /= d;
}
static void divide64(size_t n, double d, double *x) {
  if (n) divide64_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, d, x);
}

__global__ void clamp64_k(size_t n, double lo, double hi, double *x) {
  FSCU_FOR(i, n) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}
static void clamp64(size_t n, double lo, double hi, double *x) {
  if (n) clamp64_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, lo, hi, x);
}

struct load_sq64 {
  const double *x;
  __device__ double operator()(size_t i) const { return x[i] * x[i]; }
};
struct load_abs64 {
  const double *x;
  __device__ double operator()(size_t i) const { return fabs(x[i]); }
};
/* max that keeps a NaN once seen, as the cpu's absmax */
struct nan_max64 {
  __device__ double operator()(double a, double b) const { return isnan(a) || a >= b ? a : b; }
};

static double sum64(size_t n, const double *x) {
  double r;
  return fscu_reduce(n, fscu_load_array<double>{x}, fscu_add{}, 0.0, &r, "sum") ? NAN : r;
}
static double sumsq64(size_t n, const double *x) {
  double r;
  return fscu_reduce(n, load_sq64{x}, fscu_add{}, 0.0, &r, "sumsq") ? NAN : r;
}
static double absmax64(size_t n, const double *x) {
  double r;
  return fscu_reduce(n, load_abs64{x}, nan_max64{}, 0.0, &r, "absmax") ? NAN : r;
}

/* --- the tensor API's elementwise functions (ops_typed.h's formulas) ------- */

/* log(1 + e^x) without overflow; torch's softplus (threshold 20) */
__device__ double softplus64(double x) { return x > 20 ? x : log1p(exp(x)); }

__device__ double unary1(fsU_unary op, double x, double p0, double p1) {
  switch (op) {
  case FSU_EXP: return exp(x);
  case FSU_LOG: return log(x);
  case FSU_SQRT: return sqrt(x);
  case FSU_RSQRT: return 1 / sqrt(x);
  case FSU_ABS: return fabs(x);
  case FSU_SIN: return sin(x);
  case FSU_COS: return cos(x);
  case FSU_TANH: return tanh(x);
  case FSU_SIGMOID: return 1 / (1 + exp(-x));
  case FSU_POW: return pow(x, p0);
  case FSU_RELU: return x > 0 ? x : 0;
  case FSU_LEAKY_RELU: return x > 0 ? x : x * p0;
  case FSU_MISH: return x * tanh(softplus64(x));
  case FSU_CLAMP: /* torch: min(max(x, lo), hi), NaN x stays NaN */
    if (!isnan(p0) && x < p0) x = p0;
    if (!isnan(p1) && x > p1) x = p1;
    return x;
  }
  return x;
}

/* d f / d x at x (y = f(x)), times g */
__device__ double unary_grad(fsU_unary op, double g, double x, double y, double p0, double p1) {
  switch (op) {
  case FSU_EXP: return g * y;
  case FSU_LOG: return g / x;
  case FSU_SQRT: return g / (2 * y);
  case FSU_RSQRT: return -0.5 * g * y * y * y;
  case FSU_ABS: return g * (double)((x > 0) - (x < 0)); /* sgn: 0 at 0 */
  case FSU_SIN: return g * cos(x);
  case FSU_COS: return -g * sin(x);
  case FSU_TANH: return g * (1 - y * y);
  case FSU_SIGMOID: return g * y * (1 - y);
  case FSU_POW: return p0 == 0 ? 0 : g * p0 * pow(x, p0 - 1);
  case FSU_RELU: return x > 0 ? g : 0;
  case FSU_LEAKY_RELU: return x > 0 ? g : g * p0;
  case FSU_MISH: { /* tanh(sp) + x sech^2(sp) sigmoid(x) */
    double t = tanh(softplus64(x)), s = 1 / (1 + exp(-x));
    return g * (t + x * (1 - t * t) * s);
  }
  case FSU_CLAMP: /* torch: the gradient passes where lo <= x <= hi */
    return (isnan(p0) || x >= p0) && (isnan(p1) || x <= p1) ? g : 0;
  }
  return 0;
}

__global__ void unary_fwd_k(fsU_unary op, size_t n, const double *x, double *y, double p0, double p1) {
  FSCU_FOR(i, n) y[i] = unary1(op, x[i], p0, p1);
}
static void unary_forward64(fsU_unary op, size_t n, const double *x, double *y, double p0, double p1) {
  if (n) unary_fwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, n, x, y, p0, p1);
}

__global__ void unary_bwd_k(fsU_unary op, size_t n, double *dx, const double *dy, const double *x, const double *y,
                            double p0, double p1) {
  FSCU_FOR(i, n) dx[i] += unary_grad(op, dy[i], x[i], y[i], p0, p1);
}
static void unary_backward64(fsU_unary op, size_t n, double *dx, const double *dy, const double *x, const double *y,
                             double p0, double p1) {
  if (n) unary_bwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, n, dx, dy, x, y, p0, p1);
}

/* --- broadcast arithmetic -------------------------------------------------- */

__device__ double binary1(fsU_binary op, double a, double b) {
  switch (op) {
  case FSU_ADD: return a + b;
  case FSU_SUB: return a - b;
  case FSU_MUL: return a * b;
  case FSU_DIV: return a / b;
  case FSU_POWT: return pow(a, b);
  case FSU_MAXIMUM: return isnan(a) || a > b ? a : b; /* NaN propagates */
  case FSU_MINIMUM: return isnan(a) || a < b ? a : b;
  }
  return 0;
}

/* d out / d a (side 0) or d b (side 1) of one element; torch's formulas */
__device__ double binary_grad1(fsU_binary op, int side, double g, double x, double y, double o) {
  switch (op) {
  case FSU_ADD: return g;
  case FSU_SUB: return side ? -g : g;
  case FSU_MUL: return side ? g * x : g * y;
  case FSU_DIV: return side ? -g * x / (y * y) : g / y;
  case FSU_POWT: /* torch masks the 0 * inf cases of b = 0 and a = 0 */
    return side ? (x == 0 && y >= 0 ? 0 : g * o * log(x)) : (y == 0 ? 0 : g * y * pow(x, y - 1));
  case FSU_MAXIMUM:
  case FSU_MINIMUM: { /* ties split the gradient in half */
    bool a_wins = op == FSU_MAXIMUM ? x > y : x < y;
    return x == y ? g / 2 : a_wins != (side == 1) ? g : 0;
  }
  }
  return 0;
}

/* input j's offset of output position i (row-major over bc's shape) */
__device__ int64_t bcast_off(const fsU_bcast &bc, int j, int64_t i) {
  int64_t off = 0;
  for (int d = bc.rank - 1; d >= 0; d--) {
    int64_t s = bc.shape[d];
    off += (i % s) * bc.st[j][d];
    i /= s;
  }
  return off;
}

__global__ void binary_fwd_k(fsU_binary op, fsU_bcast bc, const double *a, const double *b, double *out) {
  FSCU_FOR(i, (size_t)bc.numel) out[i] = binary1(op, a[bcast_off(bc, 0, i)], b[bcast_off(bc, 1, i)]);
}
static void binary_forward64(fsU_binary op, const fsU_bcast *bc, const double *a, const double *b, double *out) {
  if (bc->numel > 0) binary_fwd_k<<<fscu_blocks((size_t)bc->numel), FSCU_THREADS>>>(op, *bc, a, b, out);
}

/* The output positions that read one element of input `side` split into
 * that element's own index (the dims the input walks, kept) and the dims
 * it is broadcast over (reduced).  One thread per element gathers its
 * gradient over the reduced dims in row-major order, the cpu's. */
struct bcast_split {
  int nk, nr;
  int kept[FS_MAX_RANK], red[FS_MAX_RANK];
  int64_t nkept, nred;    /* elements of the input; positions per element */
  int64_t ost[FS_MAX_RANK]; /* the contiguous output's strides */
};

static bcast_split split_of(const fsU_bcast *bc, int side) {
  bcast_split s = {};
  s.nkept = s.nred = 1;
  int64_t o = 1;
  for (int d = bc->rank - 1; d >= 0; d--) {
    s.ost[d] = o;
    o *= bc->shape[d];
  }
  for (int d = 0; d < bc->rank; d++)
    if (bc->st[side][d] == 0 && bc->shape[d] > 1) {
      s.red[s.nr++] = d;
      s.nred *= bc->shape[d];
    } else {
      s.kept[s.nk++] = d;
      s.nkept *= bc->shape[d];
    }
  return s;
}

__global__ void binary_bwd_k(fsU_binary op, int side, fsU_bcast bc, bcast_split sp, double *dx, const double *dout,
                             const double *a, const double *b, const double *out) {
  FSCU_FOR(e, (size_t)sp.nkept) {
    int64_t base = 0, xoff = 0, rest = (int64_t)e;
    for (int k = sp.nk - 1; k >= 0; k--) {
      int d = sp.kept[k];
      int64_t idx = rest % bc.shape[d];
      rest /= bc.shape[d];
      base += idx * sp.ost[d];
      xoff += idx * bc.st[side][d];
    }
    double acc = dx[xoff];
    for (int64_t r = 0; r < sp.nred; r++) {
      int64_t o = base, q = r;
      for (int k = sp.nr - 1; k >= 0; k--) {
        int d = sp.red[k];
        o += (q % bc.shape[d]) * sp.ost[d];
        q /= bc.shape[d];
      }
      acc += binary_grad1(op, side, dout[o], a[bcast_off(bc, 0, o)], b[bcast_off(bc, 1, o)], out[o]);
    }
    dx[xoff] = acc;
  }
}

static void binary_backward64(fsU_binary op, const fsU_bcast *bc, double *da, double *db, const double *dout,
                              const double *a, const double *b, const double *out) {
  if (bc->numel <= 0) return;
  double *d[2] = {da, db};
  for (int side = 0; side < 2; side++)
    if (d[side]) {
      bcast_split sp = split_of(bc, side);
      binary_bwd_k<<<fscu_blocks((size_t)sp.nkept), FSCU_THREADS>>>(op, side, *bc, sp, d[side], dout, a, b, out);
    }
}

/* --- sums over one dim and softmax: x[O, L, I], one thread per (o, i) ----- */

#define AT(o, l, i) (((o) * L + (l)) * I + (i))

__global__ void sum_dim_fwd_k(int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  FSCU_FOR(k, (size_t)(O * I)) {
    int64_t o = (int64_t)k / I, i = (int64_t)k % I;
    double s = 0;
    for (int64_t l = 0; l < L; l++) s += x[AT(o, l, i)];
    y[k] = s;
  }
}
static void sum_dim_forward64(int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  if (O * I > 0) sum_dim_fwd_k<<<fscu_blocks((size_t)(O * I)), FSCU_THREADS>>>(O, L, I, x, y);
}

__global__ void sum_dim_bwd_k(int64_t O, int64_t L, int64_t I, double *dx, const double *dy) {
  FSCU_FOR(k, (size_t)(O * L * I)) {
    int64_t i = (int64_t)k % I, o = (int64_t)k / (L * I);
    dx[k] += dy[o * I + i];
  }
}
static void sum_dim_backward64(int64_t O, int64_t L, int64_t I, double *dx, const double *dy) {
  if (O * L * I > 0) sum_dim_bwd_k<<<fscu_blocks((size_t)(O * L * I)), FSCU_THREADS>>>(O, L, I, dx, dy);
}

__global__ void softmax_fwd_k(bool as_log, int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  FSCU_FOR(k, (size_t)(O * I)) {
    int64_t o = (int64_t)k / I, i = (int64_t)k % I;
    double m = -INFINITY, s = 0;
    for (int64_t l = 0; l < L; l++)
      if (x[AT(o, l, i)] > m) m = x[AT(o, l, i)]; /* NaNs skipped, as the cpu's row_max */
    if (as_log) {
      for (int64_t l = 0; l < L; l++) s += exp(x[AT(o, l, i)] - m);
      double ls = log(s);
      for (int64_t l = 0; l < L; l++) y[AT(o, l, i)] = x[AT(o, l, i)] - m - ls;
    } else {
      for (int64_t l = 0; l < L; l++) s += y[AT(o, l, i)] = exp(x[AT(o, l, i)] - m);
      for (int64_t l = 0; l < L; l++) y[AT(o, l, i)] /= s;
    }
  }
}
static void softmax_forward64(bool as_log, int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  if (O * I > 0) softmax_fwd_k<<<fscu_blocks((size_t)(O * I)), FSCU_THREADS>>>(as_log, O, L, I, x, y);
}

__global__ void softmax_bwd_k(bool as_log, int64_t O, int64_t L, int64_t I, double *dx, const double *dy,
                              const double *y) {
  FSCU_FOR(k, (size_t)(O * I)) {
    int64_t o = (int64_t)k / I, i = (int64_t)k % I;
    double s = 0;
    for (int64_t l = 0; l < L; l++) s += as_log ? dy[AT(o, l, i)] : dy[AT(o, l, i)] * y[AT(o, l, i)];
    for (int64_t l = 0; l < L; l++) {
      int64_t j = AT(o, l, i);
      dx[j] += as_log ? dy[j] - exp(y[j]) * s : y[j] * (dy[j] - s);
    }
  }
}
static void softmax_backward64(bool as_log, int64_t O, int64_t L, int64_t I, double *dx, const double *dy,
                               const double *y) {
  if (O * I > 0) softmax_bwd_k<<<fscu_blocks((size_t)(O * I)), FSCU_THREADS>>>(as_log, O, L, I, dx, dy, y);
}

#undef AT

/* --- products and optimizers ------------------------------------------------ */

static int gemm64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
                  const double *B, int64_t ldb, double beta, double *C, int64_t ldc) {
  return fscu_gemm(ta, tb, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

__global__ void sgd64_k(fsB_update u, double *p, const double *g, double *buf) {
  FSCU_FOR(i, u.n) fsB_sgd64(&u, i, p, g, buf);
}
static void sgd_update64(const fsB_update *u, double *p, const double *g, double *buf) {
  if (u->n) sgd64_k<<<fscu_blocks(u->n), FSCU_THREADS>>>(*u, p, g, buf);
}

__global__ void adam64_k(fsB_update u, fsB_adam64_bias bc, double *p, const double *g, double *m, double *v,
                         double *vmax) {
  FSCU_FOR(i, u.n) fsB_adam64(&u, bc, i, p, g, m, v, vmax);
}
static void adam_update64(const fsB_update *u, double *p, const double *g, double *m, double *v, double *vmax) {
  if (u->n) adam64_k<<<fscu_blocks(u->n), FSCU_THREADS>>>(*u, fsB_adam64_bias_of(u), p, g, m, v, vmax);
}

extern "C" const fsB_f64_kernels fsB_f64_cuda = {
  gemm64, axpy64, shift64, scale64, divide64, clamp64, sum64, sumsq64, absmax64, fscu_take_backward_f64,
  unary_forward64, unary_backward64, binary_forward64, binary_backward64,
  sum_dim_forward64, sum_dim_backward64, softmax_forward64, softmax_backward64,
  linear_forward<double>, linear_backward<double>, act_forward<double>, act_backward<double>,
  embedding_forward<double>, embedding_backward<double>, posemb_forward<double>, posemb_backward<double>,
  layernorm_forward<double>, layernorm_backward<double>, attention_forward<double>, attention_backward<double>,
  cross_entropy_forward<double>, cross_entropy_backward<double>,
  sgd_update64, adam_update64,
};
