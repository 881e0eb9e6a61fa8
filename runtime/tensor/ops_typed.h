/* ops_typed.h -- ops.c's elementwise and one-dim kernels over FS_REAL
 * (typed.h): unary functions and their gradients, broadcast binary ops
 * (with the odometer and row merging they walk with), where, sum,
 * max/min, softmax / log_softmax, logsumexp and cumsum over a dim, topk,
 * indexing's scatter-add backward (and their table entries,
 * FS_OPS_TYPED_ENTRIES); the per-element formulas they loop over are
 * ops_scalar.h's (f64_cuda.cu's too).  ops.c instantiates them for float
 * (the cpu kernels of ops.h, under their names), f64_kernels.c for double
 * (NAME_f64).
 *
 * Invariant: one text serves both types, so a formula fixed here is fixed
 * for float32 and float64 alike; sums over a row accumulate in double
 * whatever the element type (cumsum's running sums excepted: torch's are
 * in the element type).  Included once per translation unit, after ops.h. */
#include <stdlib.h>
#include "typed.h"
#include "ops_scalar.h" /* the per-element formulas, shared with cuda */

/* The odometer: idx advances in row-major order over shape, and off[j]
 * follows input j's strides; returns false after the last element. */
static inline bool step(int rank, const int64_t *shape, int64_t *idx, int n,
                        const int64_t (*st)[FS_MAX_RANK], int64_t *off) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++idx[d] < shape[d]) {
      for (int j = 0; j < n; j++) off[j] += st[j][d];
      return true;
    }
    for (int j = 0; j < n; j++) off[j] -= st[j][d] * (shape[d] - 1);
    idx[d] = 0;
  }
  return false;
}

/* ---- unary ---- */

static void FS_RK(cpu_unary_forward)(fsU_unary op, size_t n, const FS_REAL *x, FS_REAL *y, double p0, double p1) {
  for (size_t i = 0; i < n; i++) y[i] = FS_RK(unary1)(op, x[i], p0, p1);
}

static void FS_RK(cpu_unary_backward)(fsU_unary op, size_t n, FS_REAL *dx, const FS_REAL *dy, const FS_REAL *x,
                                      const FS_REAL *y, double p0, double p1) {
  for (size_t i = 0; i < n; i++) dx[i] += FS_RK(unary_grad)(op, dy[i], x[i], y[i], p0, p1);
}

/* ---- binary, broadcasting ---- */

/* The broadcast's innermost dims as rows: adjacent dims that every input
 * (and the contiguous output) walks one after the other merge, so the row
 * loops below run over the longest stretch the strides allow. */
static fsU_bcast bcast_rows(const fsU_bcast *bc, int n) {
  fsU_bcast r = {.rank = 0, .numel = bc->numel};
  for (int d = 0; d < bc->rank; d++) {
    if (bc->shape[d] == 1) continue;
    bool merge = r.rank > 0;
    for (int j = 0; j < n && merge; j++) merge = r.st[j][r.rank - 1] == bc->st[j][d] * bc->shape[d];
    if (merge) {
      r.shape[r.rank - 1] *= bc->shape[d];
      for (int j = 0; j < n; j++) r.st[j][r.rank - 1] = bc->st[j][d];
    } else {
      r.shape[r.rank] = bc->shape[d];
      for (int j = 0; j < n; j++) r.st[j][r.rank] = bc->st[j][d];
      r.rank++;
    }
  }
  if (r.rank == 0) { /* a single element */
    r.shape[0] = 1;
    for (int j = 0; j < n; j++) r.st[j][0] = 0;
    r.rank = 1;
  }
  return r;
}

/* One row of n elements at input strides sa, sb.  The callers pass the
 * common strides (1 and 0) and ops as constants, so each inlined copy is a
 * straight loop the compiler vectorizes; the per-element formulas and the
 * accumulation order are the odometer's, so results do not change. */
static inline __attribute__((always_inline)) void FS_RK(binary_row)(fsU_binary op, int64_t n, const FS_REAL *a,
                                                                    int64_t sa, const FS_REAL *b, int64_t sb,
                                                                    FS_REAL *out) {
#pragma omp simd
  for (int64_t j = 0; j < n; j++) out[j] = FS_RK(binary1)(op, a[j * sa], b[j * sb]);
}

static inline __attribute__((always_inline)) void FS_RK(binary_grad_row)(fsU_binary op, int64_t n, FS_REAL *da,
                                                                         FS_REAL *db, const FS_REAL *dout,
                                                                         const FS_REAL *a, int64_t sa, const FS_REAL *b,
                                                                         int64_t sb, const FS_REAL *out) {
  /* One pass per gradient: a side of stride 1 is a straight loop the
   * compiler vectorizes (one loop writing both sides did not vectorize); a
   * side of stride 0 sums into its one element in order, as before. */
  FS_REAL ga, gb;
  if (da && sa == 1) {
#pragma omp simd private(ga, gb)
    for (int64_t j = 0; j < n; j++) {
      FS_RK(binary_grad1)(op, dout[j], a[j], b[j * sb], out[j], &ga, &gb);
      da[j] += ga;
    }
  } else if (da)
    for (int64_t j = 0; j < n; j++) {
      FS_RK(binary_grad1)(op, dout[j], a[j * sa], b[j * sb], out[j], &ga, &gb);
      da[j * sa] += ga;
    }
  if (db && sb == 1) {
#pragma omp simd private(ga, gb)
    for (int64_t j = 0; j < n; j++) {
      FS_RK(binary_grad1)(op, dout[j], a[j * sa], b[j], out[j], &ga, &gb);
      db[j] += gb;
    }
  } else if (db)
    for (int64_t j = 0; j < n; j++) {
      FS_RK(binary_grad1)(op, dout[j], a[j * sa], b[j * sb], out[j], &ga, &gb);
      db[j * sb] += gb;
    }
}

/* forward (da == NULL && db == NULL && out written) or backward over every row */
static inline __attribute__((always_inline)) void FS_RK(binary_rows)(bool backward, fsU_binary op, const fsU_bcast *bc,
                                                                     FS_REAL *da, FS_REAL *db, const FS_REAL *dout,
                                                                     const FS_REAL *a, const FS_REAL *b, FS_REAL *out) {
  fsU_bcast r = bcast_rows(bc, 2);
  int outer = r.rank - 1;
  int64_t n = r.shape[outer], sa = r.st[0][outer], sb = r.st[1][outer];
  int64_t idx[FS_MAX_RANK] = {0}, off[2] = {0, 0}, i = 0;
  do {
    const FS_REAL *ra = a + off[0], *rb = b + off[1];
    FS_REAL *rda = da ? da + off[0] : NULL, *rdb = db ? db + off[1] : NULL;
    if (!backward) {
      if (sa == 1 && sb == 1) FS_RK(binary_row)(op, n, ra, 1, rb, 1, out + i);
      else if (sa == 1 && sb == 0) FS_RK(binary_row)(op, n, ra, 1, rb, 0, out + i);
      else if (sa == 0 && sb == 1) FS_RK(binary_row)(op, n, ra, 0, rb, 1, out + i);
      else FS_RK(binary_row)(op, n, ra, sa, rb, sb, out + i);
    } else if (sa == 1 && sb == 1) FS_RK(binary_grad_row)(op, n, rda, rdb, dout + i, ra, 1, rb, 1, out + i);
    else if (sa == 1 && sb == 0) FS_RK(binary_grad_row)(op, n, rda, rdb, dout + i, ra, 1, rb, 0, out + i);
    else if (sa == 0 && sb == 1) FS_RK(binary_grad_row)(op, n, rda, rdb, dout + i, ra, 0, rb, 1, out + i);
    else FS_RK(binary_grad_row)(op, n, rda, rdb, dout + i, ra, sa, rb, sb, out + i);
    i += n;
  } while (step(outer, r.shape, idx, 2, (const int64_t(*)[FS_MAX_RANK])r.st, off));
}

FS_VECTOR_TARGET
static void FS_RK(cpu_binary_forward)(fsU_binary op, const fsU_bcast *bc, const FS_REAL *a, const FS_REAL *b,
                                      FS_REAL *out) {
  if (bc->numel == 0) return;
  switch (op) { /* constant ops for the inlined rows */
  case FSU_ADD: FS_RK(binary_rows)(false, FSU_ADD, bc, NULL, NULL, NULL, a, b, out); break;
  case FSU_SUB: FS_RK(binary_rows)(false, FSU_SUB, bc, NULL, NULL, NULL, a, b, out); break;
  case FSU_MUL: FS_RK(binary_rows)(false, FSU_MUL, bc, NULL, NULL, NULL, a, b, out); break;
  case FSU_DIV: FS_RK(binary_rows)(false, FSU_DIV, bc, NULL, NULL, NULL, a, b, out); break;
  default: FS_RK(binary_rows)(false, op, bc, NULL, NULL, NULL, a, b, out); break;
  }
}

FS_VECTOR_TARGET
static void FS_RK(cpu_binary_backward)(fsU_binary op, const fsU_bcast *bc, FS_REAL *da, FS_REAL *db,
                                       const FS_REAL *dout, const FS_REAL *a, const FS_REAL *b, const FS_REAL *out) {
  if (bc->numel == 0) return;
  FS_REAL *o = (FS_REAL *)out; /* binary_rows writes out only going forward */
  switch (op) {
  case FSU_ADD: FS_RK(binary_rows)(true, FSU_ADD, bc, da, db, dout, a, b, o); break;
  case FSU_SUB: FS_RK(binary_rows)(true, FSU_SUB, bc, da, db, dout, a, b, o); break;
  case FSU_MUL: FS_RK(binary_rows)(true, FSU_MUL, bc, da, db, dout, a, b, o); break;
  case FSU_DIV: FS_RK(binary_rows)(true, FSU_DIV, bc, da, db, dout, a, b, o); break;
  default: FS_RK(binary_rows)(true, op, bc, da, db, dout, a, b, o); break;
  }
}

/* ---- where ---- */

/* One row of n elements at strides sc, sa, sb, forward (out) or backward
 * (da, db).  The callers pass the common strides as constants, so those
 * copies are straight loops; elements in the odometer's order, so a
 * broadcast side's gradient sums in that order. */
static inline __attribute__((always_inline)) void FS_RK(where_row)(int64_t n, const int64_t *c, int64_t sc,
                                                                   const FS_REAL *a, int64_t sa, const FS_REAL *b,
                                                                   int64_t sb, FS_REAL *out, FS_REAL *da, FS_REAL *db,
                                                                   const FS_REAL *dout) {
  if (out) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) { /* both sides loaded: a select, no branch */
      FS_REAL x = a[j * sa], y = b[j * sb];
      out[j] = c[j * sc] ? x : y;
    }
    return;
  }
  if (da && da == db) { /* where(c, x, x): one buffer takes every element in order */
    for (int64_t j = 0; j < n; j++) da[j * sa] += dout[j];
    return;
  }
  /* the side not taken keeps its bits (no + 0); a side of stride 1 is a
   * straight loop, one of stride 0 sums into its element in order */
  if (da && sa == 1) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) da[j] = c[j * sc] ? da[j] + dout[j] : da[j];
  } else if (da)
    for (int64_t j = 0; j < n; j++) da[j * sa] = c[j * sc] ? da[j * sa] + dout[j] : da[j * sa];
  if (db && sb == 1) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) db[j] = c[j * sc] ? db[j] : db[j] + dout[j];
  } else if (db)
    for (int64_t j = 0; j < n; j++) db[j * sb] = c[j * sc] ? db[j * sb] : db[j * sb] + dout[j];
}

/* forward (out) or backward (da, db from dout) over the rows binary_rows
 * walks (bcast_rows over the three inputs) */
FS_VECTOR_TARGET
static void FS_RK(where_rows)(const fsU_bcast *bc, const int64_t *cond, const FS_REAL *a, const FS_REAL *b,
                              FS_REAL *out, FS_REAL *da, FS_REAL *db, const FS_REAL *dout) {
  if (bc->numel == 0) return;
  fsU_bcast r = bcast_rows(bc, 3);
  int outer = r.rank - 1;
  int64_t n = r.shape[outer], sc = r.st[0][outer], sa = r.st[1][outer], sb = r.st[2][outer];
  int64_t idx[FS_MAX_RANK] = {0}, off[3] = {0, 0, 0}, i = 0;
  do {
    const int64_t *c = cond + off[0];
    const FS_REAL *ra = a ? a + off[1] : NULL, *rb = b ? b + off[2] : NULL;
    FS_REAL *o = out ? out + i : NULL, *rda = da ? da + off[1] : NULL, *rdb = db ? db + off[2] : NULL;
    const FS_REAL *g = dout ? dout + i : NULL;
    if (sc == 1 && sa == 1 && sb == 1) FS_RK(where_row)(n, c, 1, ra, 1, rb, 1, o, rda, rdb, g);
    else if (sc == 1 && sa == 1 && sb == 0) FS_RK(where_row)(n, c, 1, ra, 1, rb, 0, o, rda, rdb, g);
    else if (sc == 1 && sa == 0 && sb == 1) FS_RK(where_row)(n, c, 1, ra, 0, rb, 1, o, rda, rdb, g);
    else FS_RK(where_row)(n, c, sc, ra, sa, rb, sb, o, rda, rdb, g);
    i += n;
  } while (step(outer, r.shape, idx, 3, (const int64_t(*)[FS_MAX_RANK])r.st, off));
}

static void FS_RK(cpu_where_forward)(const fsU_bcast *bc, const int64_t *cond, const FS_REAL *a, const FS_REAL *b,
                                     FS_REAL *out) {
  FS_RK(where_rows)(bc, cond, a, b, out, NULL, NULL, NULL);
}

static void FS_RK(cpu_where_backward)(const fsU_bcast *bc, const int64_t *cond, FS_REAL *da, FS_REAL *db,
                                      const FS_REAL *dout) {
  FS_RK(where_rows)(bc, cond, NULL, NULL, NULL, da, db, dout);
}

/* ---- reductions over one dim: x[O,L,I] ---- */

#define AT(o, l, i) (((o) * L + (l)) * I + (i))

static void FS_RK(cpu_sum_dim_forward)(int64_t O, int64_t L, int64_t I, const FS_REAL *x, FS_REAL *y) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      double s = 0;
      for (int64_t l = 0; l < L; l++) s += x[AT(o, l, i)];
      y[o * I + i] = (FS_REAL)s;
    }
}

static void FS_RK(cpu_sum_dim_backward)(int64_t O, int64_t L, int64_t I, FS_REAL *dx, const FS_REAL *dy) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t l = 0; l < L; l++)
      for (int64_t i = 0; i < I; i++) dx[AT(o, l, i)] += dy[o * I + i];
}

/* max / min over L with its first index, NaN propagating (torch's) */
static void FS_RK(cpu_extreme_forward)(bool want_max, int64_t O, int64_t L, int64_t I, const FS_REAL *x,
                                       FS_REAL *y, int64_t *idx) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      int64_t best = 0;
      FS_REAL bv = x[AT(o, 0, i)];
      for (int64_t l = 1; l < L && !isnan(bv); l++) {
        FS_REAL v = x[AT(o, l, i)];
        if (isnan(v) || (want_max ? v > bv : v < bv)) {
          bv = v;
          best = l;
        }
      }
      y[o * I + i] = bv;
      if (idx) idx[o * I + i] = best;
    }
}

static void FS_RK(cpu_extreme_backward)(int64_t O, int64_t L, int64_t I, FS_REAL *dx, const FS_REAL *dy,
                                        const int64_t *idx) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) dx[AT(o, idx[o * I + i], i)] += dy[o * I + i];
}

/* the largest of L values at stride I, NaNs skipped as fmaxf skips them
 * (-inf when all are NaN); the comparison keeps libm's call out of the loop */
static inline FS_REAL FS_RK(row_max)(int64_t L, int64_t I, const FS_REAL *x) {
  FS_REAL m = -INFINITY;
  for (int64_t l = 0; l < L; l++)
    if (x[l * I] > m) m = x[l * I];
  return m;
}

static void FS_RK(cpu_softmax_forward)(bool as_log, int64_t O, int64_t L, int64_t I, const FS_REAL *x, FS_REAL *y) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      FS_REAL m = FS_RK(row_max)(L, I, x + AT(o, 0, i));
      double s = 0;
      if (as_log) {
        for (int64_t l = 0; l < L; l++) s += FS_RM(exp)(x[AT(o, l, i)] - m);
        FS_REAL ls = (FS_REAL)log(s);
        for (int64_t l = 0; l < L; l++) y[AT(o, l, i)] = x[AT(o, l, i)] - m - ls;
      } else { /* each exp once: kept in y, then divided by the sum */
        for (int64_t l = 0; l < L; l++) {
          FS_REAL e = FS_RM(exp)(x[AT(o, l, i)] - m);
          y[AT(o, l, i)] = e;
          s += e;
        }
        for (int64_t l = 0; l < L; l++) y[AT(o, l, i)] /= (FS_REAL)s;
      }
    }
}

static void FS_RK(cpu_softmax_backward)(bool log, int64_t O, int64_t L, int64_t I, FS_REAL *dx, const FS_REAL *dy,
                                        const FS_REAL *y) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      double s = 0;
      for (int64_t l = 0; l < L; l++) s += log ? dy[AT(o, l, i)] : dy[AT(o, l, i)] * y[AT(o, l, i)];
      for (int64_t l = 0; l < L; l++) {
        int64_t k = AT(o, l, i);
        dx[k] += log ? dy[k] - FS_RM(exp)(y[k]) * (FS_REAL)s : y[k] * (dy[k] - (FS_REAL)s);
      }
    }
}

/* log-sum-exp over L: the exponentials of x - max summed in double (float
 * too), the log added to the max */
static void FS_RK(cpu_logsumexp_forward)(int64_t O, int64_t L, int64_t I, const FS_REAL *x, FS_REAL *y) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      FS_REAL m = FS_RK(row_max)(L, I, x + AT(o, 0, i));
      if (isinf(m)) m = 0; /* all -inf: log 0 = -inf, not NaN (torch) */
      double s = 0;
      for (int64_t l = 0; l < L; l++) s += FS_RM(exp)(x[AT(o, l, i)] - m);
      y[o * I + i] = m + (FS_REAL)log(s);
    }
}

static void FS_RK(cpu_logsumexp_backward)(int64_t O, int64_t L, int64_t I, FS_REAL *dx, const FS_REAL *dy,
                                          const FS_REAL *x, const FS_REAL *y) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t l = 0; l < L; l++)
      for (int64_t i = 0; i < I; i++) dx[AT(o, l, i)] += dy[o * I + i] * FS_RM(exp)(x[AT(o, l, i)] - y[o * I + i]);
}

/* running sums along L in the element type, as torch's cpu cumsum
 * accumulates (float in float, double in double); the backward is the
 * running sum from the end */
static void FS_RK(cpu_cumsum_forward)(int64_t O, int64_t L, int64_t I, const FS_REAL *x, FS_REAL *y) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      FS_REAL s = 0;
      for (int64_t l = 0; l < L; l++) y[AT(o, l, i)] = s += x[AT(o, l, i)];
    }
}

static void FS_RK(cpu_cumsum_backward)(int64_t O, int64_t L, int64_t I, FS_REAL *dx, const FS_REAL *dy) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      FS_REAL s = 0;
      for (int64_t l = L; l-- > 0;) dx[AT(o, l, i)] += s += dy[AT(o, l, i)];
    }
}

/* ---- topk over one dim: x[O,L,I] -> [O,K,I] ---- */

typedef struct FS_RK(ranked) { FS_REAL v; int64_t i; } FS_RK(ranked);

/* NaN above everything; equal values keep the lower index first */
static int FS_RK(rank_desc)(const void *pa, const void *pb) {
  const FS_RK(ranked) *a = pa, *b = pb;
  bool na = isnan(a->v), nb = isnan(b->v);
  if (na != nb) return na ? -1 : 1;
  if (!na && a->v != b->v) return a->v > b->v ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

static int FS_RK(rank_asc)(const void *pa, const void *pb) {
  const FS_RK(ranked) *a = pa, *b = pb;
  bool na = isnan(a->v), nb = isnan(b->v);
  if (na != nb) return na ? 1 : -1;
  if (!na && a->v != b->v) return a->v < b->v ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

static int FS_RK(cpu_topk_forward)(bool largest, int64_t O, int64_t L, int64_t I, int64_t K, const FS_REAL *x,
                                   FS_REAL *y, int64_t *idx) {
  FS_RK(ranked) *row = malloc((size_t)(L ? L : 1) * sizeof *row);
  if (!row) return -1;
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) {
      for (int64_t l = 0; l < L; l++) row[l] = (FS_RK(ranked)){x[AT(o, l, i)], l};
      qsort(row, (size_t)L, sizeof *row, largest ? FS_RK(rank_desc) : FS_RK(rank_asc));
      for (int64_t k = 0; k < K; k++) {
        y[(o * K + k) * I + i] = row[k].v;
        idx[(o * K + k) * I + i] = row[k].i;
      }
    }
  free(row);
  return 0;
}

static void FS_RK(cpu_topk_backward)(int64_t O, int64_t L, int64_t I, int64_t K, FS_REAL *dx, const FS_REAL *dy,
                                     const int64_t *idx) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t i = 0; i < I; i++) dx[AT(o, idx[(o * K + k) * I + i], i)] += dy[(o * K + k) * I + i];
}

/* ---- indexing's backward: dx[off[i]] += dy[i] in i's order ---- */

static void FS_RK(cpu_take_backward)(int64_t n, const int64_t *off, FS_REAL *dx, const FS_REAL *dy) {
  for (int64_t i = 0; i < n; i++) dx[off[i]] += dy[i];
}

/* the table entries of the kernels above (fsU_kernels' and fsB_f64_kernels'
 * fields of the same names) */
#define FS_OPS_TYPED_ENTRIES                                                                                 \
  .unary_forward = FS_RK(cpu_unary_forward), .unary_backward = FS_RK(cpu_unary_backward),                   \
  .binary_forward = FS_RK(cpu_binary_forward), .binary_backward = FS_RK(cpu_binary_backward),               \
  .sum_dim_forward = FS_RK(cpu_sum_dim_forward), .sum_dim_backward = FS_RK(cpu_sum_dim_backward),           \
  .softmax_forward = FS_RK(cpu_softmax_forward), .softmax_backward = FS_RK(cpu_softmax_backward),           \
  .logsumexp_forward = FS_RK(cpu_logsumexp_forward), .logsumexp_backward = FS_RK(cpu_logsumexp_backward),   \
  .cumsum_forward = FS_RK(cpu_cumsum_forward), .cumsum_backward = FS_RK(cpu_cumsum_backward),               \
  .where_forward = FS_RK(cpu_where_forward), .where_backward = FS_RK(cpu_where_backward),                   \
  .extreme_forward = FS_RK(cpu_extreme_forward), .extreme_backward = FS_RK(cpu_extreme_backward),           \
  .topk_forward = FS_RK(cpu_topk_forward), .topk_backward = FS_RK(cpu_topk_backward),                       \
  .take_backward = FS_RK(cpu_take_backward)
