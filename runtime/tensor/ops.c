/* ops.c -- the cpu kernels of ops.h: plain loops over contiguous arrays;
 * broadcast and strided ops walk the output's index space with an odometer.
 * Formulas are torch 1.13's (tools/autograd/derivatives.yaml). */
#include "ops.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


void fsU_contig_strides(int rank, const int64_t *shape, int64_t *st) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) {
    st[d] = s;
    s *= shape[d];
  }
}

int fsU_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out) {
  int r = ra > rb ? ra : rb;
  for (int i = 0; i < r; i++) { /* i counts from the right */
    int64_t x = i < ra ? a[ra - 1 - i] : 1, y = i < rb ? b[rb - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) {
      fsT_seterr("The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton dimension %d",
                 (long long)x, (long long)y, r - 1 - i);
      return -1;
    }
    out[r - 1 - i] = x == 1 ? y : x;
  }
  *rank = r;
  return 0;
}

void fsU_bcast_strides(int rank, const int64_t *shape, int orank, const int64_t *oshape, int64_t *st) {
  int64_t own[FS_MAX_RANK];
  fsU_contig_strides(rank, shape, own);
  for (int d = 0; d < orank; d++) {
    int k = d - (orank - rank);
    st[d] = k < 0 || (shape[k] == 1 && oshape[d] != 1) ? 0 : own[k];
  }
}

/* ---- the odometer, unary, broadcast binary, where, sums over a dim,
 * max/min over a dim, softmax, logsumexp, cumsum, topk, take's backward:
 * one text with f64.c's (ops_typed.h) ---- */

#include "ops_typed.h"

/* ---- strided windows ---- */

static int64_t window_numel(const fsU_window *w) {
  int64_t n = 1;
  for (int d = 0; d < w->rank; d++) n *= w->shape[d];
  return n;
}

/* The window's innermost dim as rows: adjacent dims that are laid out one
 * after the other (st[d] == st[d+1] * shape[d+1]) merge into one, so a
 * chunk or a transpose of [B,T,H,D] to [B,H,T,D] copies rows of D (or more)
 * elements instead of one element per step.  w is left untouched. */
static fsU_window window_rows(const fsU_window *w) {
  fsU_window r = {.rank = 0, .off = w->off};
  for (int d = 0; d < w->rank; d++) {
    if (w->shape[d] == 1) continue; /* a size-1 dim moves nothing */
    if (r.rank > 0 && r.st[r.rank - 1] == w->st[d] * w->shape[d]) {
      r.shape[r.rank - 1] *= w->shape[d];
      r.st[r.rank - 1] = w->st[d];
    } else {
      r.shape[r.rank] = w->shape[d];
      r.st[r.rank++] = w->st[d];
    }
  }
  if (r.rank == 0) { /* a single element */
    r.shape[0] = 1;
    r.st[0] = 1;
    r.rank = 1;
  }
  return r;
}

/* Copies row by row: to_window false gathers (y contiguous), true scatters.
 * A row of stride 1 is one memcpy; otherwise the element size picks a typed
 * loop (a memcpy call per element was most of the copy's time). */
static void window_copy(const fsU_window *w, size_t esize, const void *x, void *y, bool to_window) {
  if (window_numel(w) == 0) return;
  fsU_window r = window_rows(w);
  int outer = r.rank - 1;
  int64_t len = r.shape[outer], rs = r.st[outer], idx[FS_MAX_RANK] = {0}, off[1] = {r.off}, i = 0;
  const int64_t(*st)[FS_MAX_RANK] = (const int64_t(*)[FS_MAX_RANK])r.st;
  const char *src = x;
  char *dst = y;
  do {
    char *to = to_window ? dst + (size_t)off[0] * esize : dst + (size_t)i * esize;
    const char *from = to_window ? src + (size_t)i * esize : src + (size_t)off[0] * esize;
    int64_t to_st = to_window ? rs : 1, from_st = to_window ? 1 : rs;
    if (rs == 1) memcpy(to, from, (size_t)len * esize);
    else if (esize == 4) {
      uint32_t *t = (uint32_t *)to;
      const uint32_t *f = (const uint32_t *)from;
      for (int64_t j = 0; j < len; j++) t[j * to_st] = f[j * from_st];
    } else if (esize == 8) {
      uint64_t *t = (uint64_t *)to;
      const uint64_t *f = (const uint64_t *)from;
      for (int64_t j = 0; j < len; j++) t[j * to_st] = f[j * from_st];
    } else
      for (int64_t j = 0; j < len; j++)
        memcpy(to + (size_t)(j * to_st) * esize, from + (size_t)(j * from_st) * esize, esize);
    i += len;
  } while (step(outer, r.shape, idx, 1, st, off));
}

static void cpu_gather(const fsU_window *w, size_t esize, const void *x, void *y) {
  window_copy(w, esize, x, y, false);
}

static void cpu_scatter(const fsU_window *w, size_t esize, const void *x, void *y) {
  window_copy(w, esize, x, y, true);
}

/* row by row as window_copy; a stride-0 (broadcast) row sums into one element */
static void cpu_gather_backward(const fsU_window *w, float *dx, const float *dy) {
  if (window_numel(w) == 0) return;
  fsU_window r = window_rows(w);
  int outer = r.rank - 1;
  int64_t len = r.shape[outer], rs = r.st[outer], idx[FS_MAX_RANK] = {0}, off[1] = {r.off}, i = 0;
  const int64_t(*st)[FS_MAX_RANK] = (const int64_t(*)[FS_MAX_RANK])r.st;
  do {
    float *d = dx + off[0];
    const float *g = dy + i;
    if (rs == 1)
      for (int64_t j = 0; j < len; j++) d[j] += g[j];
    else
      for (int64_t j = 0; j < len; j++) d[j * rs] += g[j];
    i += len;
  } while (step(outer, r.shape, idx, 1, st, off));
}

/* ---- index_select over one dim: x[O,L,I] (AT: ops_typed.h) ---- */

static void cpu_index_select(int64_t O, int64_t L, int64_t I, const int64_t *idx, int64_t K,
                             size_t esize, const void *x, void *y) {
  const char *src = x;
  char *dst = y;
  size_t row = (size_t)I * esize;
  for (int64_t o = 0; o < O; o++)
    for (int64_t k = 0; k < K; k++)
      memcpy(dst + (size_t)(o * K + k) * row, src + (size_t)(o * L + idx[k]) * row, row);
}

static void cpu_index_select_backward(int64_t O, int64_t L, int64_t I, const int64_t *idx, int64_t K,
                                      float *dx, const float *dy) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t i = 0; i < I; i++) dx[AT(o, idx[k], i)] += dy[(o * K + k) * I + i];
}

/* ---- indexing by offsets ---- */

static void cpu_take(int64_t n, const int64_t *off, size_t esize, const void *x, void *y) {
  const char *src = x;
  char *dst = y;
  if (esize == sizeof(float))
    for (int64_t i = 0; i < n; i++) ((float *)y)[i] = ((const float *)x)[off[i]];
  else
    for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * esize, src + (size_t)off[i] * esize, esize);
}

static void cpu_put(int64_t n, const int64_t *off, size_t esize, const void *v, void *x) {
  const char *src = v;
  char *dst = x;
  for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)off[i] * esize, src + (size_t)i * esize, esize);
}

const fsU_kernels fsU_cpu = {
  FS_OPS_TYPED_ENTRIES, /* ops_typed.h's: unary, binary, where, sum_dim, max/min, softmax, logsumexp, cumsum,
                         * topk, take_backward */
  .gather = cpu_gather, .gather_backward = cpu_gather_backward, .scatter = cpu_scatter,
  .index_select = cpu_index_select, .index_select_backward = cpu_index_select_backward,
  .take = cpu_take, .put = cpu_put,
};
