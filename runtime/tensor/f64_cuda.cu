/* f64_cuda.cu -- cuda's float64 kernels (fsB_f64_cuda, f64_kernels.h):
 * 64-true on a GPU.  The layer kernels are nn_cuda_typed.cuh's instantiated
 * over double (the float32 ones' text), the products cublasDgemm
 * (fscu_gemm's double overload), the optimizer rules f64_rules.h's (the
 * cpu's text, one thread per element), the level-1 loops cuda_common.cuh's
 * (float32's text); the tensor API's elementwise functions, broadcast
 * arithmetic, where, sums, max/min, logsumexp and cumsum over a dim,
 * softmax and the elementwise losses are here, their per-element formulas
 * ops_scalar.h's and loss_scalar.h's (the cpu's text, compiled for the
 * device).
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
#include "f64_kernels.h" /* loss.h too */
#include "f64_rules.h"
}
#define FS_REAL_DOUBLE 1 /* ops_scalar.h's and loss_scalar.h's formulas over double, as f64_kernels.c's */
#include "ops_scalar.h"
#include "loss_scalar.h"

/* --- the small loops float32 has no use for (axpy, scale, clamp and the
 * reductions are cuda_common.cuh's, over double) ------------------------- */

__global__ void shift64_k(size_t n, double v, double *y) {
  FSCU_FOR(i, n) y[i] += v;
}
static void shift64(size_t n, double v, double *y) {
  if (n) shift64_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, v, y);
}

__global__ void divide64_k(size_t n, double d, double *x) {
  FSCU_FOR(i, n) x[i] /= d;
}
static void divide64(size_t n, double d, double *x) {
  if (n) divide64_k<<<fscu_blocks(n), FSCU_THREADS>>>(n, d, x);
}

/* --- the tensor API's elementwise functions (ops_scalar.h's formulas) ------ */

__global__ void unary_fwd_k(fsU_unary op, size_t n, const double *x, double *y, double p0, double p1) {
  FSCU_FOR(i, n) y[i] = unary1_f64(op, x[i], p0, p1);
}
static void unary_forward64(fsU_unary op, size_t n, const double *x, double *y, double p0, double p1) {
  if (n) unary_fwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, n, x, y, p0, p1);
}

__global__ void unary_bwd_k(fsU_unary op, size_t n, double *dx, const double *dy, const double *x, const double *y,
                            double p0, double p1) {
  FSCU_FOR(i, n) dx[i] += unary_grad_f64(op, dy[i], x[i], y[i], p0, p1);
}
static void unary_backward64(fsU_unary op, size_t n, double *dx, const double *dy, const double *x, const double *y,
                             double p0, double p1) {
  if (n) unary_bwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, n, dx, dy, x, y, p0, p1);
}

/* --- broadcast arithmetic -------------------------------------------------- */

/* d out / d a (side 0) or d b (side 1) of one element: ops_scalar.h's pair,
 * of which the compiler keeps the side asked for */
__device__ double binary_grad_side(fsU_binary op, int side, double g, double x, double y, double o) {
  double ga, gb;
  binary_grad1_f64(op, g, x, y, o, &ga, &gb);
  return side ? gb : ga;
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
  FSCU_FOR(i, (size_t)bc.numel) out[i] = binary1_f64(op, a[bcast_off(bc, 0, i)], b[bcast_off(bc, 1, i)]);
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

/* The gather of one side's gradient: add(o, acc) adds output position o's
 * contribution to acc (the element's gradient so far). */
template <class Add>
__global__ void bcast_gather_k(int side, fsU_bcast bc, bcast_split sp, double *dx, Add add) {
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
      add(o, acc);
    }
    dx[xoff] = acc;
  }
}

template <class Add> static void bcast_gather(int side, const fsU_bcast *bc, double *dx, Add add) {
  bcast_split sp = split_of(bc, side);
  if (sp.nkept > 0) bcast_gather_k<<<fscu_blocks((size_t)sp.nkept), FSCU_THREADS>>>(side, *bc, sp, dx, add);
}

struct binary_add {
  fsU_binary op;
  int side;
  fsU_bcast bc;
  const double *dout, *a, *b, *out;
  __device__ void operator()(int64_t o, double &acc) const {
    acc += binary_grad_side(op, side, dout[o], a[bcast_off(bc, 0, o)], b[bcast_off(bc, 1, o)], out[o]);
  }
};

static void binary_backward64(fsU_binary op, const fsU_bcast *bc, double *da, double *db, const double *dout,
                              const double *a, const double *b, const double *out) {
  if (bc->numel <= 0) return;
  double *d[2] = {da, db};
  for (int side = 0; side < 2; side++)
    if (d[side]) bcast_gather(side, bc, d[side], binary_add{op, side, *bc, dout, a, b, out});
}

/* --- where: out = cond ? a : b (inputs 0, 1, 2 of bc) ------------------------ */

__global__ void where_fwd_k(fsU_bcast bc, const int64_t *cond, const double *a, const double *b, double *out) {
  FSCU_FOR(i, (size_t)bc.numel) out[i] = cond[bcast_off(bc, 0, i)] ? a[bcast_off(bc, 1, i)] : b[bcast_off(bc, 2, i)];
}
static void where_forward64(const fsU_bcast *bc, const int64_t *cond, const double *a, const double *b, double *out) {
  if (bc->numel > 0) where_fwd_k<<<fscu_blocks((size_t)bc->numel), FSCU_THREADS>>>(*bc, cond, a, b, out);
}

/* the side not taken keeps its bits (nothing added), as the cpu's */
struct where_add {
  bool taken_if;
  fsU_bcast bc;
  const int64_t *cond;
  const double *dout;
  __device__ void operator()(int64_t o, double &acc) const {
    if ((cond[bcast_off(bc, 0, o)] != 0) == taken_if) acc += dout[o];
  }
};

static void where_backward64(const fsU_bcast *bc, const int64_t *cond, double *da, double *db, const double *dout) {
  if (bc->numel <= 0) return;
  if (da) bcast_gather(1, bc, da, where_add{true, *bc, cond, dout});
  if (db) bcast_gather(2, bc, db, where_add{false, *bc, cond, dout});
}

/* --- reductions and scans over one dim: x[O, L, I], one thread per (o, i) -- */

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

/* log-sum-exp over L: the cpu's loop (max with NaNs skipped, 0 for an
 * infinite max, the exponentials of x - max summed in order) */
__global__ void logsumexp_fwd_k(int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  FSCU_FOR(k, (size_t)(O * I)) {
    int64_t o = (int64_t)k / I, i = (int64_t)k % I;
    double m = -INFINITY, s = 0;
    for (int64_t l = 0; l < L; l++)
      if (x[AT(o, l, i)] > m) m = x[AT(o, l, i)];
    if (isinf(m)) m = 0; /* all -inf: log 0 = -inf, not NaN (torch) */
    for (int64_t l = 0; l < L; l++) s += exp(x[AT(o, l, i)] - m);
    y[k] = m + log(s);
  }
}
static void logsumexp_forward64(int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  if (O * I > 0) logsumexp_fwd_k<<<fscu_blocks((size_t)(O * I)), FSCU_THREADS>>>(O, L, I, x, y);
}

/* one thread per element of x; the product rounded before the sum, as the cpu's */
__global__ void logsumexp_bwd_k(int64_t O, int64_t L, int64_t I, double *dx, const double *dy, const double *x,
                                const double *y) {
  FSCU_FOR(k, (size_t)(O * L * I)) {
    int64_t i = (int64_t)k % I, o = (int64_t)k / (L * I);
    dx[k] += mul_rn(dy[o * I + i], exp(x[k] - y[o * I + i]));
  }
}
static void logsumexp_backward64(int64_t O, int64_t L, int64_t I, double *dx, const double *dy, const double *x,
                                 const double *y) {
  if (O * L * I > 0) logsumexp_bwd_k<<<fscu_blocks((size_t)(O * L * I)), FSCU_THREADS>>>(O, L, I, dx, dy, x, y);
}

/* running sums along L, one thread per (o, i) row in the cpu's order: the cpu's bits */
__global__ void cumsum_fwd_k(int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  FSCU_FOR(k, (size_t)(O * I)) {
    int64_t o = (int64_t)k / I, i = (int64_t)k % I;
    double s = 0;
    for (int64_t l = 0; l < L; l++) y[AT(o, l, i)] = s += x[AT(o, l, i)];
  }
}
static void cumsum_forward64(int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  if (O * I > 0) cumsum_fwd_k<<<fscu_blocks((size_t)(O * I)), FSCU_THREADS>>>(O, L, I, x, y);
}

__global__ void cumsum_bwd_k(int64_t O, int64_t L, int64_t I, double *dx, const double *dy) {
  FSCU_FOR(k, (size_t)(O * I)) {
    int64_t o = (int64_t)k / I, i = (int64_t)k % I;
    double s = 0;
    for (int64_t l = L; l-- > 0;) dx[AT(o, l, i)] += s += dy[AT(o, l, i)];
  }
}
static void cumsum_backward64(int64_t O, int64_t L, int64_t I, double *dx, const double *dy) {
  if (O * I > 0) cumsum_bwd_k<<<fscu_blocks((size_t)(O * I)), FSCU_THREADS>>>(O, L, I, dx, dy);
}

/* max / min over L with its first index, NaN propagating: the cpu's loop */
__global__ void extreme_fwd_k(bool want_max, int64_t O, int64_t L, int64_t I, const double *x, double *y,
                              int64_t *idx) {
  FSCU_FOR(k, (size_t)(O * I)) {
    int64_t o = (int64_t)k / I, i = (int64_t)k % I, best = 0;
    double bv = x[AT(o, 0, i)];
    for (int64_t l = 1; l < L && !isnan(bv); l++) {
      double v = x[AT(o, l, i)];
      if (isnan(v) || (want_max ? v > bv : v < bv)) {
        bv = v;
        best = l;
      }
    }
    y[k] = bv;
    if (idx) idx[k] = best;
  }
}
static void extreme_forward64(bool want_max, int64_t O, int64_t L, int64_t I, const double *x, double *y,
                              int64_t *idx) {
  if (O * I > 0) extreme_fwd_k<<<fscu_blocks((size_t)(O * I)), FSCU_THREADS>>>(want_max, O, L, I, x, y, idx);
}

/* each (o, i) adds to its own element: no two threads meet */
__global__ void extreme_bwd_k(int64_t O, int64_t L, int64_t I, double *dx, const double *dy, const int64_t *idx) {
  FSCU_FOR(k, (size_t)(O * I)) {
    int64_t o = (int64_t)k / I, i = (int64_t)k % I;
    dx[AT(o, idx[k], i)] += dy[k];
  }
}
static void extreme_backward64(int64_t O, int64_t L, int64_t I, double *dx, const double *dy, const int64_t *idx) {
  if (O * I > 0) extreme_bwd_k<<<fscu_blocks((size_t)(O * I)), FSCU_THREADS>>>(O, L, I, dx, dy, idx);
}

#undef AT

/* --- elementwise losses (loss_scalar.h's formulas) -------------------------- */

__device__ double pw_at(const double *pw, int64_t n_pw, size_t i) { return pw ? pw[(int64_t)i % n_pw] : 1.0; }

__global__ void ploss_fwd_k(fsN_ploss op, double p, const double *pw, int64_t n_pw, double *out, const double *x,
                            const double *y, size_t n) {
  FSCU_FOR(i, n) out[i] = ploss1_f64(op, p, x[i], y[i], pw_at(pw, n_pw, i));
}
static void ploss_forward64(fsN_ploss op, double param, const double *pw, int64_t n_pw, double *out, const double *x,
                            const double *y, size_t n) {
  if (n) ploss_fwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, param, pw, n_pw, out, x, y, n);
}

__global__ void ploss_bwd_k(fsN_ploss op, double p, const double *pw, int64_t n_pw, double *dx, double *dy,
                            const double *g, const double *x, const double *y, size_t n) {
  FSCU_FOR(i, n) {
    double gx, gy;
    ploss_grad1_f64(op, p, x[i], y[i], pw_at(pw, n_pw, i), &gx, &gy);
    if (dx) dx[i] += mul_rn(g[i], gx); /* the cpu rounds the product before the sum */
    if (dy) dy[i] += mul_rn(g[i], gy);
  }
}
static void ploss_backward64(fsN_ploss op, double param, const double *pw, int64_t n_pw, double *dx, double *dy,
                             const double *g, const double *x, const double *y, size_t n) {
  if (n) ploss_bwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(op, param, pw, n_pw, dx, dy, g, x, y, n);
}

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

__global__ void rmsprop64_k(fsB_update u, double *p, const double *g, double *sq, double *ga, double *buf) {
  FSCU_FOR(i, u.n) fsB_rmsprop64(&u, i, p, g, sq, ga, buf);
}
static void rmsprop_update64(const fsB_update *u, double *p, const double *g, double *sq, double *ga, double *buf) {
  if (u->n) rmsprop64_k<<<fscu_blocks(u->n), FSCU_THREADS>>>(*u, p, g, sq, ga, buf);
}

__global__ void adagrad64_k(fsB_update u, double *p, const double *g, double *sum) {
  FSCU_FOR(i, u.n) fsB_adagrad64(&u, i, p, g, sum);
}
static void adagrad_update64(const fsB_update *u, double *p, const double *g, double *sum) {
  if (u->n) adagrad64_k<<<fscu_blocks(u->n), FSCU_THREADS>>>(*u, p, g, sum);
}

__global__ void adadelta64_k(fsB_update u, double *p, const double *g, double *sq, double *acc) {
  FSCU_FOR(i, u.n) fsB_adadelta64(&u, i, p, g, sq, acc);
}
static void adadelta_update64(const fsB_update *u, double *p, const double *g, double *sq, double *acc) {
  if (u->n) adadelta64_k<<<fscu_blocks(u->n), FSCU_THREADS>>>(*u, p, g, sq, acc);
}

extern "C" const fsB_f64_kernels fsB_f64_cuda = {
  gemm64, fscu_axpy<double>, shift64, fscu_scale<double>, divide64, fscu_clamp<double>, fscu_sum<double>,
  fscu_sumsq<double>, fscu_absmax<double>, fscu_take_backward_f64,
  unary_forward64, unary_backward64, binary_forward64, binary_backward64,
  sum_dim_forward64, sum_dim_backward64, softmax_forward64, softmax_backward64,
  logsumexp_forward64, logsumexp_backward64, cumsum_forward64, cumsum_backward64,
  linear_forward<double>, linear_backward<double>, act_forward<double>, act_backward<double>,
  embedding_forward<double>, embedding_backward<double>, posemb_forward<double>, posemb_backward<double>,
  layernorm_forward<double>, layernorm_backward<double>, attention_forward<double>, attention_backward<double>,
  cross_entropy_forward<double>, cross_entropy_backward<double>,
  sgd_update64, adam_update64,
  where_forward64, where_backward64, extreme_forward64, extreme_backward64,
  fscu_topk_forward_f64, fscu_topk_backward_f64,
  dropout_forward<double>, dropout_backward<double>, ploss_forward64, ploss_backward64,
  rmsprop_update64, adagrad_update64, adadelta_update64,
  nullptr, /* cnn: float32's convolutions and norms have no cuda kernels (staged through the host), so float64's
            * have none to share; f64_cnn.c refuses float64 for them on cuda */
};
