/* ops.h -- the torch-like API's kernels: elementwise, broadcasting,
 * reduction-over-a-dim and strided-copy ops, as forward/backward pairs on
 * contiguous arrays (nn.h's conventions: backward ACCUMULATES (+=), a NULL
 * gradient means "not needed", shapes in the comments).
 *
 * Letters: N elements; for an op over one dim d of a tensor, x is seen as
 * [O, L, I] with O the product of the dims before d, L = shape[d], I the
 * product of the dims after it.  Broadcasting ops iterate the output's index
 * space with each input's element strides (0 on a broadcast dim), fsU_bcast.
 *
 * The complete implementation is the cpu one (fsU_cpu); cuda (fsU_cuda in
 * backend_cuda.cu) and emulated cuda (backend_emu.c) have partial tables
 * (take, take_backward, put, topk).  An op whose slot a backend lacks has its
 * tensors staged through host memory by its entry point (ops_grad.c,
 * index.c), so no device ever calls a NULL slot.  Their other half:
 * ops_grad.c (autograd entry points), autograd.h (the conventions). */
#ifndef FS_OPS_H
#define FS_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "tensor.h"

/* Elementwise ops of one tensor; p0/p1 are POW's exponent and CLAMP's
 * bounds (NaN bound = none), LEAKY_RELU's negative slope (p0). */
typedef enum fsU_unary {
  FSU_EXP, FSU_LOG, FSU_SQRT, FSU_RSQRT, FSU_ABS, FSU_SIN, FSU_COS, FSU_TANH,
  FSU_SIGMOID, FSU_POW, FSU_CLAMP, FSU_RELU,
  FSU_LEAKY_RELU, FSU_MISH /* x > 0 ? x : slope x;  x tanh(softplus(x)) */
} fsU_unary;

/* Broadcast elementwise ops of two tensors (torch.add ... torch.minimum). */
typedef enum fsU_binary {
  FSU_ADD, FSU_SUB, FSU_MUL, FSU_DIV, FSU_POWT, FSU_MAXIMUM, FSU_MINIMUM
} fsU_binary;

/* Output shape and the element strides of up to three inputs in its index
 * space (0 on a broadcast dim). */
typedef struct fsU_bcast {
  int rank;
  int64_t shape[FS_MAX_RANK];
  int64_t st[3][FS_MAX_RANK];
  int64_t numel;
} fsU_bcast;

/* A strided window of a contiguous buffer: element idx (rank dims) is at
 * off + sum idx[d] * st[d].  view/permute/transpose/expand/slice/select are
 * all such windows; the ops copy them out. */
typedef struct fsU_window {
  int rank;
  int64_t shape[FS_MAX_RANK];
  int64_t st[FS_MAX_RANK];
  int64_t off;
} fsU_window;

typedef struct fsU_kernels {
  /* y[N] = f(x[N]);  dx[N] += dy[N] * f'(x, y) */
  void (*unary_forward)(fsU_unary op, size_t n, const float *x, float *y, double p0, double p1);
  void (*unary_backward)(fsU_unary op, size_t n, float *dx, const float *dy, const float *x,
                         const float *y, double p0, double p1);
  /* out[bc] = a[bc.st[0]] op b[bc.st[1]];  da, db += d out / d a, b (summed over broadcast dims) */
  void (*binary_forward)(fsU_binary op, const fsU_bcast *bc, const float *a, const float *b, float *out);
  void (*binary_backward)(fsU_binary op, const fsU_bcast *bc, float *da, float *db, const float *dout,
                          const float *a, const float *b, const float *out);
  /* out[bc] = cond[bc.st[0]] ? a[bc.st[1]] : b[bc.st[2]] (cond int64);
   * da, db += dout where cond holds / does not */
  void (*where_forward)(const fsU_bcast *bc, const int64_t *cond, const float *a, const float *b, float *out);
  void (*where_backward)(const fsU_bcast *bc, const int64_t *cond, float *da, float *db, const float *dout);
  /* y[window shape] (contiguous) = x[w] for elements of esize bytes;
   * dx[w] += dy (f32), so a broadcast (stride 0) dim sums */
  void (*gather)(const fsU_window *w, size_t esize, const void *x, void *y);
  void (*gather_backward)(const fsU_window *w, float *dx, const float *dy);
  /* y[w] = x[window shape] (contiguous): cat writes each piece into its slot */
  void (*scatter)(const fsU_window *w, size_t esize, const void *x, void *y);
  /* y[O,I] = sum_l x[O,L,I];  dx[O,L,I] += dy[O,I] */
  void (*sum_dim_forward)(int64_t O, int64_t L, int64_t I, const float *x, float *y);
  void (*sum_dim_backward)(int64_t O, int64_t L, int64_t I, float *dx, const float *dy);
  /* y[O,I], idx[O,I] = max (want_max) or min over L, first index on ties,
   * NaN propagating as torch;  dx[O, idx, I] += dy[O,I] */
  void (*extreme_forward)(bool want_max, int64_t O, int64_t L, int64_t I, const float *x, float *y,
                          int64_t *idx);
  void (*extreme_backward)(int64_t O, int64_t L, int64_t I, float *dx, const float *dy,
                           const int64_t *idx);
  /* y[O,L,I] = softmax (log_softmax when log) of x over L;
   * dx += y (dy - sum_l dy y)  /  dy - exp(y) sum_l dy */
  void (*softmax_forward)(bool log, int64_t O, int64_t L, int64_t I, const float *x, float *y);
  void (*softmax_backward)(bool log, int64_t O, int64_t L, int64_t I, float *dx, const float *dy,
                           const float *y);
  /* y[O,I] = log sum_l exp x[O,L,I];  dx += dy exp(x - y) */
  void (*logsumexp_forward)(int64_t O, int64_t L, int64_t I, const float *x, float *y);
  void (*logsumexp_backward)(int64_t O, int64_t L, int64_t I, float *dx, const float *dy,
                             const float *x, const float *y);
  /* y[O,L,I] = sum_{j<=l} x[O,j,I];  dx[O,l,I] += sum_{j>=l} dy[O,j,I] */
  void (*cumsum_forward)(int64_t O, int64_t L, int64_t I, const float *x, float *y);
  void (*cumsum_backward)(int64_t O, int64_t L, int64_t I, float *dx, const float *dy);
  /* y[O,K,I] = x[O, idx[k], I] for K indices in [0, L) (esize-byte elements);
   * dx[O, idx[k], I] += dy[O,k,I] */
  void (*index_select)(int64_t O, int64_t L, int64_t I, const int64_t *idx, int64_t K, size_t esize,
                       const void *x, void *y);
  void (*index_select_backward)(int64_t O, int64_t L, int64_t I, const int64_t *idx, int64_t K,
                                float *dx, const float *dy);
  /* indexing by element offsets (index.c computes them): y[N] = x[off[N]]
   * (esize-byte elements);  dx[off[i]] += dy[i] (a scatter-add: repeated
   * offsets sum);  put: x[off[i]] = v[i] in order (the last write wins) */
  void (*take)(int64_t n, const int64_t *off, size_t esize, const void *x, void *y);
  void (*take_backward)(int64_t n, const int64_t *off, float *dx, const float *dy);
  void (*put)(int64_t n, const int64_t *off, size_t esize, const void *v, void *x);
  /* y[O,K,I], idx[O,K,I] = the K largest (smallest) of x[O,L,I] over L,
   * in order (NaN counts as the largest, ties keep the lower index first);
   * dx[O, idx[o,k,i], I] += dy[O,K,I];  forward: -1 when out of memory */
  int (*topk_forward)(bool largest, int64_t O, int64_t L, int64_t I, int64_t K, const float *x, float *y,
                       int64_t *idx);
  void (*topk_backward)(int64_t O, int64_t L, int64_t I, int64_t K, float *dx, const float *dy,
                        const int64_t *idx);
  /* a table with only some slots (cuda's and emulated cuda's: the indexing
   * and topk kernels); ops whose entry point does not name its slot
   * (fsG_stage_begin_slot) stage through the host on it */
  bool partial;
} fsU_kernels;

extern const fsU_kernels fsU_cpu;

/* The broadcast of shapes a and b (torch's rules: align right, 1 stretches);
 * -1 + torch's message "The size of tensor a (3) must match ...". */
int fsU_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out);
/* Strides of a contiguous tensor of shape (rank dims) seen in an out shape of
 * rank `orank` it broadcasts to: 0 on stretched and missing dims. */
void fsU_bcast_strides(int rank, const int64_t *shape, int orank, const int64_t *oshape, int64_t *st);
/* Contiguous row-major strides of shape. */
void fsU_contig_strides(int rank, const int64_t *shape, int64_t *st);

#endif
