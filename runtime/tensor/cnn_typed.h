/* cnn_typed.h -- cnn.c's kernels over FS_REAL (typed.h): convolution
 * (im2col + the GEMM of blas.h: one window copy, `windows`, serves im2col
 * and its adjoint col2im, so they run at the BLAS's speed), max and average
 * pooling, batch normalization, a channel bias (cnn.h gives the shapes and
 * conventions).  cnn.c instantiates them for float as the fsN_ kernels
 * themselves; f64_cnn_kernels.c for double (static fsN_NAME_f64), 64-true's
 * convolutional layers.
 *
 * Invariant: one text serves both types (the float32 kernels' formulas, loop
 * order, threading and vectorization); only what typed.h maps differs:
 * sgemm or dgemm, sqrtf or sqrt.  Included once per translation unit, after
 * cnn.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "blas.h"
#include "tensor.h"
#include "typed.h"
#include "vmath.h"

#include "tensor.h"
#include "vmath.h"

/* The output columns [*lo, *hi) whose input column ow*s + off lies inside
 * [0, W): the rest of a row reads padding. */
static void valid_cols(int64_t OW, int64_t W, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
  /* ow*s + off >= 0  <=>  ow >= ceil(-off / s);  ow*s + off < W  <=>  ow < ceil((W - off) / s) */
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s, b = W - off <= 0 ? 0 : (W - off + s - 1) / s;
  *lo = a < OW ? a : OW;
  *hi = b < *lo ? *lo : b < OW ? b : OW;
}

/* A stride-1 convolution whose output rows are as wide as its input's
 * ('same' padding): an output plane is the input plane shifted by (kh*dh -
 * ph) rows and `off` columns, so one contiguous copy moves all its valid rows
 * and only the few columns that wrap into the next row are then fixed. */
static bool shifted_planes(const fsN_conv *g) { return g->sh == 1 && g->sw == 1 && g->OW == g->W; }

/* The output rows [*r0, *r1) whose input row oh + dh*kh - ph is inside */
static void valid_rows(const fsN_conv *g, int64_t kh, int64_t *r0, int64_t *r1) {
  int64_t shift = kh * g->dh - g->ph;
  *r0 = shift >= 0 ? 0 : -shift < g->OH ? -shift : g->OH;
  *r1 = g->H - shift < g->OH ? g->H - shift : g->OH;
  if (*r1 < *r0) *r1 = *r0;
}

/* plane[OH, OW] columns outside [lo, hi) := 0 on rows [r0, r1) */
static void zero_edges(FS_REAL *plane, int64_t OW, int64_t r0, int64_t r1, int64_t lo, int64_t hi) {
  for (int64_t oh = r0; oh < r1; oh++) {
    for (int64_t ow = 0; ow < lo; ow++) plane[oh * OW + ow] = (FS_REAL)0;
    for (int64_t ow = hi; ow < OW; ow++) plane[oh * OW + ow] = (FS_REAL)0;
  }
}

/* n entries of a column row c and of an image row: from x (im2col) c[i] =
 * x[i*s], else (col2im) dx[i*s] += c[i].  Rows are short (an image's
 * width): plain loops, no library calls. */
static inline void span_move(FS_REAL *c, const FS_REAL *x, FS_REAL *dx, int64_t n, int64_t s) {
  if (x && s == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) c[i] = x[i];
  } else if (x)
    for (int64_t i = 0; i < n; i++) c[i] = x[i * s];
  else if (s == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) dx[i] += c[i];
  } else
    for (int64_t i = 0; i < n; i++) dx[i * s] += c[i];
}

/* The windows of one image's group of channels [Cg,H,W] against its column
 * matrix col[Cg*KH*KW, ld] (columns [0, OH*OW); ld is the row stride, a
 * chunk's images side by side).  Exactly one of x, dx is given:
 * x: col := the windows of x, padding reads 0 (im2col);
 * dx: dx += the windows of col, its adjoint (col2im); col is scratch there,
 * and its columns that read padding are zeroed. */
FS_VECTOR_TARGET
static void windows(FS_REAL *col, int64_t ld, const FS_REAL *x, FS_REAL *dx, int64_t Cg, const fsN_conv *g) {
  bool shifted = shifted_planes(g);
  int64_t P = g->OH * g->OW;
  for (int64_t c = 0; c < Cg; c++)
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++) {
        FS_REAL *row = col + ((c * g->KH + kh) * g->KW + kw) * ld;
        int64_t off = kw * g->dw - g->pw, lo, hi;
        valid_cols(g->OW, g->W, g->sw, off, &lo, &hi);
        if (shifted) { /* rows r0..r1-1, columns lo..hi-1 and the wrap between them: one span */
          int64_t r0, r1;
          valid_rows(g, kh, &r0, &r1);
          if (x) {
            memset(row, 0, (size_t)(r0 * g->OW) * sizeof *row);
            memset(row + r1 * g->OW, 0, (size_t)(P - r1 * g->OW) * sizeof *row);
          }
          if (r1 <= r0 || hi <= lo) {
            if (x) memset(row + r0 * g->OW, 0, (size_t)((r1 - r0) * g->OW) * sizeof *row);
            continue;
          }
          int64_t first = r0 * g->OW + lo, n = (r1 - r0 - 1) * g->OW + (hi - lo);
          int64_t at = (c * g->H + r0 + kh * g->dh - g->ph) * g->W + lo + off;
          if (!x) zero_edges(row, g->OW, r0, r1, lo, hi); /* the wrapped columns add nothing */
          span_move(row + first, x ? x + at : NULL, x ? NULL : dx + at, n, 1);
          if (x) zero_edges(row, g->OW, r0, r1, lo, hi); /* the wrapped columns read padding */
          continue;
        }
        for (int64_t oh = 0; oh < g->OH; oh++) {
          int64_t h = oh * g->sh - g->ph + kh * g->dh;
          FS_REAL *cr = row + oh * g->OW;
          if (h < 0 || h >= g->H) {
            if (x) memset(cr, 0, (size_t)g->OW * sizeof *cr);
            continue;
          }
          int64_t at = (c * g->H + h) * g->W + lo * g->sw + off; /* the image entry of column lo */
          if (x) {
            memset(cr, 0, (size_t)lo * sizeof *cr);
            memset(cr + hi, 0, (size_t)(g->OW - hi) * sizeof *cr);
          }
          span_move(cr + lo, x ? x + at : NULL, x ? NULL : dx + at, hi - lo, g->sw);
        }
      }
}

/* sum of n elements: vector lanes in the element type, one row at a time (a
 * row is an image plane, so the partial sums stay short) */
FS_VECTOR_TARGET
static FS_REAL row_sum(const FS_REAL *x, int64_t n) {
  FS_REAL s = 0;
#pragma omp simd reduction(+:s)
  for (int64_t i = 0; i < n; i++) s += x[i];
  return s;
}

/* A 1x1 convolution of stride 1 without padding reads each image as its
 * own column matrix: no window copies. */
static bool pointwise(const fsN_conv *g) {
  return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* The forward GEMMs go image by image, straight into the output (NCHW:
 * an image's group of channels is the GEMM's [OCg, OH*OW] result), so the
 * column buffer of one image stays in cache while the GEMM reads it.  The
 * backward's GEMMs take a chunk of `nb` images side by side (the weight
 * gradient's inner dimension is nb*OH*OW): a chunk's column buffer holds at
 * most CHUNK elements (1 MiB of float, about a core's L2), and at least one image.
 *
 * Threads take whole images (fsB_parallel, OpenBLAS single-threaded inside):
 * an image's GEMMs are too small to split well, and a batch has many.  The
 * backward cuts the batch into at most SLICES runs of images (slices), each
 * summing its own weight gradient -- slice 0 into dW, the others into
 * partial sums that are then added to dW in slice order.  The cut depends on
 * the shapes only, never on the thread count, so every thread count and
 * every schedule computes the same bits.  The partial sums take at most
 * PARTIAL_FLOATS elements (fewer slices for a large weight). */
#define CHUNK ((int64_t)1 << 18)
#define SLICES 8
#define PARTIAL_FLOATS ((int64_t)1 << 22)

typedef struct conv_job {
  const fsN_conv *g;
  int64_t Cg, OCg, P, K, nb;
  int parts;             /* forward: runs of images; backward: slices */
  int64_t ncol, ny;      /* a worker's scratch: col [K, nb*P], then y [OCg, nb*P] when nb > 1 */
  FS_REAL *scratch;        /* fsB_threads() workers' */
  FS_REAL *partial;        /* [parts - 1][OC*K]: the weight gradients of slices 1.. */
  size_t scratch_bytes, partial_bytes;
  FS_REAL *out, *dx, *dW;
  const FS_REAL *x, *W, *b, *dout;
} conv_job;

/* The job's sizes: its columns and gathered gradient per worker, and the
 * partial weight gradients of slices 1.. (a backward's, when dW is given). */
static void job_size(conv_job *j, const fsN_conv *g, int parts, bool chunked, bool with_dw) {
  j->g = g;
  j->Cg = g->C / g->G;
  j->OCg = g->OC / g->G;
  j->P = g->OH * g->OW;
  j->K = j->Cg * g->KH * g->KW;
  int64_t per = j->K * j->P > 0 ? j->K * j->P : 1;
  /* pointwise: an image's channels are not side by side with the next image's, so one at a time */
  j->nb = !chunked || pointwise(g) || CHUNK / per < 1 ? 1 : CHUNK / per > g->N ? (g->N > 0 ? g->N : 1) : CHUNK / per;
  j->parts = parts;
  j->ncol = pointwise(g) ? 0 : j->K * j->nb * j->P;
  j->ny = j->nb > 1 ? j->OCg * j->nb * j->P : 0;
  j->scratch_bytes = (size_t)((j->ncol + j->ny) * fsB_threads()) * sizeof(FS_REAL);
  j->partial_bytes = chunked && with_dw && parts > 1 ? (size_t)((parts - 1) * g->OC * j->K) * sizeof(FS_REAL) : 0;
}

/* runs of images of a forward: a few a thread, so a busy core's share moves to the others */
static int forward_parts(const fsN_conv *g) {
  int64_t parts = 4 * (int64_t)fsB_threads();
  return (int)(g->N < parts ? g->N : parts);
}

/* slices of a backward: fixed by the shapes, fewer for a large weight */
static int backward_slices(const fsN_conv *g, bool has_dw) {
  int64_t slices = g->N < SLICES ? g->N : SLICES;
  int64_t wsize = g->OC * (g->C / g->G) * g->KH * g->KW;
  if (has_dw && wsize > 0 && slices > 1 + PARTIAL_FLOATS / wsize) slices = 1 + PARTIAL_FLOATS / wsize;
  return (int)slices;
}

static int job_begin(conv_job *j, const fsN_conv *g, int parts, bool chunked) {
  job_size(j, g, parts, chunked, j->dW != NULL);
  const fsB_backend *cpu = fsB_get(FS_DEV_CPU); /* keeps freed blocks: the same sizes come back every step */
  j->scratch = j->scratch_bytes ? cpu->alloc(j->scratch_bytes) : NULL;
  j->partial = j->partial_bytes ? cpu->alloc(j->partial_bytes) : NULL;
  if ((j->scratch || !j->scratch_bytes) && (j->partial || !j->partial_bytes)) return 0;
  if (j->scratch) cpu->free(j->scratch, j->scratch_bytes);
  if (j->partial) cpu->free(j->partial, j->partial_bytes);
  fsT_seterr("out of memory (conv2d buffers of %zu bytes)", j->scratch_bytes + j->partial_bytes);
  return -1;
}

static void job_end(conv_job *j) {
  const fsB_backend *cpu = fsB_get(FS_DEV_CPU);
  if (j->scratch) cpu->free(j->scratch, j->scratch_bytes);
  if (j->partial) cpu->free(j->partial, j->partial_bytes);
}

/* the images [*lo, *hi) of part p */
static void part_images(const conv_job *j, int p, int64_t *lo, int64_t *hi) {
  *lo = j->g->N * p / j->parts;
  *hi = j->g->N * (p + 1) / j->parts;
}

static int conv_forward_part(void *ctx, int p, int worker) {
  const conv_job *j = ctx;
  const fsN_conv *g = j->g;
  FS_REAL *col = j->ncol ? j->scratch + worker * (j->ncol + j->ny) : NULL;
  int64_t lo, hi;
  part_images(j, p, &lo, &hi);
  int rc = 0;
  for (int64_t n = lo; !rc && n < hi; n++)
    for (int64_t gr = 0; !rc && gr < g->G; gr++) {
      const FS_REAL *xg = j->x + (n * g->C + gr * j->Cg) * g->H * g->W;
      FS_REAL *o = j->out + (n * g->OC + gr * j->OCg) * j->P;
      if (j->b) /* the bias first, and the GEMM adds onto it (beta 1): one pass over the output */
        for (int64_t oc = 0; oc < j->OCg; oc++)
          for (int64_t q = 0; q < j->P; q++) o[oc * j->P + q] = j->b[gr * j->OCg + oc];
      if (col) windows(col, j->P, xg, NULL, j->Cg, g);
      rc = FS_RGEMM(false, false, j->OCg, j->P, j->K, (FS_REAL)1, j->W + gr * j->OCg * j->K, j->K, col ? col : xg,
                     j->P, j->b ? (FS_REAL)1 : (FS_REAL)0, o, j->P);
    }
  return rc;
}

FS_RPUB int FS_RK(fsN_conv2d_forward)(FS_REAL *out, const FS_REAL *x, const FS_REAL *W, const FS_REAL *b, const fsN_conv *g) {
  conv_job j = {.out = out, .x = x, .W = W, .b = b};
  if (job_begin(&j, g, forward_parts(g), false) < 0) return -1;
  int rc = fsB_parallel(j.parts, conv_forward_part, &j);
  job_end(&j);
  return rc;
}

/* Slice s: dx of its images, and their weight gradient into dW (s = 0) or
 * its partial sum (beta 0 on its first chunk). */
static int conv_backward_part(void *ctx, int s, int worker) {
  const conv_job *j = ctx;
  const fsN_conv *g = j->g;
  FS_REAL *col = j->ncol ? j->scratch + worker * (j->ncol + j->ny) : NULL, *y = col ? col + j->ncol : NULL;
  FS_REAL *dW = s == 0 ? j->dW : j->partial ? j->partial + (s - 1) * g->OC * j->K : NULL;
  int64_t lo, hi;
  part_images(j, s, &lo, &hi);
  int rc = 0;
  for (int64_t n0 = lo; !rc && n0 < hi; n0 += j->nb) {
    int64_t nb = hi - n0 < j->nb ? hi - n0 : j->nb, ld = nb * j->P;
    FS_REAL beta = s > 0 && n0 == lo ? (FS_REAL)0 : (FS_REAL)1;
    for (int64_t gr = 0; !rc && gr < g->G; gr++) {
      /* dy[OCg, nb*P]: the chunk's output gradient, gathered by channel unless one image is the chunk */
      const FS_REAL *dy = nb == 1 ? j->dout + (n0 * g->OC + gr * j->OCg) * j->P : y;
      for (int64_t o = 0; nb > 1 && o < j->OCg; o++)
        for (int64_t i = 0; i < nb; i++)
          memcpy(y + o * ld + i * j->P, j->dout + ((n0 + i) * g->OC + gr * j->OCg + o) * j->P,
                 (size_t)j->P * sizeof *y);
      const FS_REAL *xg = j->x ? j->x + (n0 * g->C + gr * j->Cg) * g->H * g->W : NULL;
      if (dW) {
        for (int64_t i = 0; col && i < nb; i++)
          windows(col + i * j->P, ld, xg + i * g->C * g->H * g->W, NULL, j->Cg, g);
        rc = FS_RGEMM(false, true, j->OCg, j->K, ld, (FS_REAL)1, dy, ld, col ? col : xg, ld, beta,
                       dW + gr * j->OCg * j->K, j->K);
      }
      const FS_REAL *Wg = j->W + gr * j->OCg * j->K;
      FS_REAL *dxg = j->dx ? j->dx + (n0 * g->C + gr * j->Cg) * g->H * g->W : NULL;
      if (!rc && dxg && !col) /* pointwise: the column matrix is dx itself */
        rc = FS_RGEMM(true, false, j->K, ld, j->OCg, (FS_REAL)1, Wg, j->K, dy, ld, (FS_REAL)1, dxg, ld);
      else if (!rc && dxg) {
        rc = FS_RGEMM(true, false, j->K, ld, j->OCg, (FS_REAL)1, Wg, j->K, dy, ld, (FS_REAL)0, col, ld);
        for (int64_t i = 0; !rc && i < nb; i++)
          windows(col + i * j->P, ld, NULL, dxg + i * g->C * g->H * g->W, j->Cg, g);
      }
    }
  }
  return rc;
}

FS_RPUB int FS_RK(fsN_conv2d_backward)(FS_REAL *dx, FS_REAL *dW, FS_REAL *db, const FS_REAL *dout, const FS_REAL *x,
                        const FS_REAL *W, const fsN_conv *g) {
  conv_job j = {.dx = dx, .dW = dW, .x = x, .W = W, .dout = dout};
  if (job_begin(&j, g, backward_slices(g, dW != NULL), true) < 0) return -1;
  /* the bias gradient image by image, as the slices would add it in order */
  for (int64_t n = 0; db && n < g->N; n++)
    for (int64_t c = 0; c < g->OC; c++) db[c] += row_sum(dout + (n * g->OC + c) * j.P, j.P);
  int rc = fsB_parallel(j.parts, conv_backward_part, &j);
  for (int s = 1; !rc && j.partial && s < j.parts; s++) {
    const FS_REAL *part = j.partial + (s - 1) * g->OC * j.K;
    for (int64_t i = 0; i < g->OC * j.K; i++) dW[i] += part[i];
  }
  job_end(&j);
  return rc;
}

/* A kernel over rows [0, n) -- planes, channels -- whose rows write
 * disjoint memory: fn(args, lo, hi) on runs of rows for the worker threads
 * (the same bits whichever thread takes a run).  `work`: the elements it
 * touches; below ROWS_MIN a run's hand-over would cost more than it saves,
 * and the rows stay on this thread. */
#define ROWS_MIN ((int64_t)1 << 15)

typedef void (*rows_fn)(const void *args, int64_t lo, int64_t hi);

typedef struct rows_job {
  rows_fn fn;
  const void *args;
  int64_t n;
  int parts;
} rows_job;

static int rows_part(void *ctx, int p, int worker) {
  const rows_job *j = ctx;
  (void)worker;
  j->fn(j->args, j->n * p / j->parts, j->n * (p + 1) / j->parts);
  return 0;
}

static void parallel_rows(int64_t n, int64_t work, rows_fn fn, const void *args) {
  int64_t parts = work < ROWS_MIN ? 1 : 4 * (int64_t)fsB_threads();
  if (parts > n) parts = n;
  if (parts <= 1) {
    if (n > 0) fn(args, 0, n);
    return;
  }
  rows_job j = {fn, args, n, (int)parts};
  fsB_parallel(j.parts, rows_part, &j); /* its parts cannot fail */
}

/* The window of output (oh, ow) of plane xp, scanned tap by tap: *best, *at
 * = the first maximum and its flat h*W+w (a NaN wins and stays, as torch);
 * at = -1 when every tap is padding. */
static void window_max(const FS_REAL *xp, const fsN_conv *g, int64_t oh, int64_t ow, FS_REAL *best, int64_t *at) {
  *best = -INFINITY;
  *at = -1;
  int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
  for (int64_t kh = 0; kh < g->KH; kh++) {
    int64_t h = h0 + kh * g->dh;
    if (h < 0 || h >= g->H) continue;
    for (int64_t kw = 0; kw < g->KW; kw++) {
      int64_t w = w0 + kw * g->dw;
      if (w < 0 || w >= g->W) continue;
      FS_REAL v = xp[h * g->W + w];
      if (*at < 0 || v > *best || (v != v && *best == *best)) {
        *best = v;
        *at = h * g->W + w;
      }
    }
  }
}

/* Output columns whose windows lie wholly inside the input rows take every
 * tap across the row at once, as selects (the comparisons of activations
 * are a coin toss for a branch); the edge columns go through window_max.
 * Both scan the taps in the same order, so they pick the same maximum. */
typedef struct maxpool_args {
  FS_REAL *out;
  int64_t *idx;
  const FS_REAL *x;
  const fsN_conv *g;
  int64_t lo, hi; /* the vector span of output columns */
} maxpool_args;

FS_VECTOR_TARGET
static void maxpool_planes(const void *args, int64_t nc0, int64_t nc1) {
  const maxpool_args *m = args;
  const fsN_conv *g = m->g;
  for (int64_t nc = nc0; nc < nc1; nc++) {
    const FS_REAL *xp = m->x + nc * g->H * g->W;
    for (int64_t oh = 0; oh < g->OH; oh++) {
      FS_REAL *o = m->out + (nc * g->OH + oh) * g->OW;
      int64_t *ix = m->idx + (nc * g->OH + oh) * g->OW;
      int64_t h0 = oh * g->sh - g->ph, first = 0;
      while (first < g->KH && (h0 + first * g->dh < 0 || h0 + first * g->dh >= g->H)) first++;
      int64_t a = first < g->KH ? m->lo : g->OW, b = first < g->KH ? m->hi : g->OW; /* the vector span */
      for (int64_t ow = 0; ow < g->OW; ow++)
        if (ow < a || ow >= b) window_max(xp, g, oh, ow, &o[ow], &ix[ow]);
      if (a >= b) continue;
      int64_t base = (h0 + first * g->dh) * g->W - g->pw;
#pragma omp simd
      for (int64_t ow = a; ow < b; ow++) {
        o[ow] = xp[base + ow * g->sw];
        ix[ow] = base + ow * g->sw;
      }
      for (int64_t kh = first; kh < g->KH; kh++) {
        int64_t h = h0 + kh * g->dh;
        if (h < 0 || h >= g->H) continue;
        for (int64_t kw = kh == first; kw < g->KW; kw++) {
          int64_t at0 = h * g->W + kw * g->dw - g->pw, sw = g->sw;
#pragma omp simd
          for (int64_t ow = a; ow < b; ow++) {
            FS_REAL v = xp[at0 + ow * sw], mx = o[ow];
            bool take = (v > mx) | ((v != v) & (mx == mx)); /* no short circuit: no branch */
            o[ow] = take ? v : mx;
            ix[ow] = take ? at0 + ow * sw : ix[ow];
          }
        }
      }
    }
  }
}

FS_RPUB void FS_RK(fsN_maxpool2d_forward)(FS_REAL *out, int64_t *idx, const FS_REAL *x, const fsN_conv *g) {
  int64_t lo, hi, lo_last, hi_last;
  valid_cols(g->OW, g->W, g->sw, -g->pw, &lo, &hi);
  valid_cols(g->OW, g->W, g->sw, (g->KW - 1) * g->dw - g->pw, &lo_last, &hi_last);
  lo = lo > lo_last ? lo : lo_last;
  hi = hi < hi_last ? hi : hi_last;
  if (hi < lo) hi = lo;
  maxpool_args m = {out, idx, x, g, lo, hi};
  parallel_rows(g->N * g->C, g->N * g->C * g->H * g->W, maxpool_planes, &m);
}

typedef struct maxpool_bw_args {
  FS_REAL *dx;
  const FS_REAL *dout;
  const int64_t *idx;
  const fsN_conv *g;
} maxpool_bw_args;

static void maxpool_bw_planes(const void *args, int64_t nc0, int64_t nc1) {
  const maxpool_bw_args *m = args;
  int64_t P = m->g->OH * m->g->OW, HW = m->g->H * m->g->W;
  for (int64_t nc = nc0; nc < nc1; nc++)
    for (int64_t p = 0; p < P; p++)
      if (m->idx[nc * P + p] >= 0) m->dx[nc * HW + m->idx[nc * P + p]] += m->dout[nc * P + p];
}

FS_RPUB void FS_RK(fsN_maxpool2d_backward)(FS_REAL *dx, const FS_REAL *dout, const int64_t *idx, const fsN_conv *g) {
  maxpool_bw_args m = {dx, dout, idx, g};
  parallel_rows(g->N * g->C, g->N * g->C * g->H * g->W, maxpool_bw_planes, &m);
}

FS_RPUB void FS_RK(fsN_avgpool2d_forward)(FS_REAL *out, const FS_REAL *x, int64_t NC, const fsN_avgwin *w) {
  for (int64_t nc = 0; nc < NC; nc++) {
    const FS_REAL *xp = x + nc * w->H * w->W;
    for (int64_t oh = 0; oh < w->OH; oh++)
      for (int64_t ow = 0; ow < w->OW; ow++) {
        FS_REAL s = 0;
        for (int64_t h = w->hs[oh]; h < w->he[oh]; h++)
          for (int64_t c = w->ws[ow]; c < w->we[ow]; c++) s += xp[h * w->W + c];
        out[(nc * w->OH + oh) * w->OW + ow] = s / (FS_REAL)(w->hdiv[oh] * w->wdiv[ow]);
      }
  }
}

FS_RPUB void FS_RK(fsN_avgpool2d_backward)(FS_REAL *dx, const FS_REAL *dout, int64_t NC, const fsN_avgwin *w) {
  for (int64_t nc = 0; nc < NC; nc++) {
    FS_REAL *dp = dx + nc * w->H * w->W;
    for (int64_t oh = 0; oh < w->OH; oh++)
      for (int64_t ow = 0; ow < w->OW; ow++) {
        FS_REAL g = dout[(nc * w->OH + oh) * w->OW + ow] / (FS_REAL)(w->hdiv[oh] * w->wdiv[ow]);
        for (int64_t h = w->hs[oh]; h < w->he[oh]; h++)
          for (int64_t c = w->ws[ow]; c < w->we[ow]; c++) dp[h * w->W + c] += g;
      }
  }
}

/* Batch normalization's channels are independent: threads take runs of
 * channels, each computed as on one thread. */
typedef struct batchnorm_args {
  FS_REAL *out, *mean, *rstd, *rm, *rv;
  const FS_REAL *x, *w, *b;
  int64_t N, C, S;
  bool training;
  FS_REAL momentum, eps;
} batchnorm_args;

FS_VECTOR_TARGET
static void batchnorm_forward_channels(const void *args, int64_t c0, int64_t c1) {
  const batchnorm_args *A = args;
  const FS_REAL *x = A->x, *w = A->w, *b = A->b;
  FS_REAL *out = A->out, *rm = A->rm, *rv = A->rv, momentum = A->momentum, eps = A->eps;
  int64_t N = A->N, C = A->C, S = A->S, M = N * S;
  for (int64_t c = c0; c < c1; c++) {
    FS_REAL m, r;
    if (A->training) {
      double s = 0, ss = 0;
      for (int64_t n = 0; n < N; n++) s += row_sum(x + (n * C + c) * S, S);
      double mu = s / (double)M;
      FS_REAL muf = (FS_REAL)mu;
      for (int64_t n = 0; n < N; n++) {
        const FS_REAL *xp = x + (n * C + c) * S;
        FS_REAL r2 = 0;
#pragma omp simd reduction(+:r2)
        for (int64_t i = 0; i < S; i++) r2 += (xp[i] - muf) * (xp[i] - muf);
        ss += r2;
      }
      double var = ss / (double)M;
      m = (FS_REAL)mu;
      r = (FS_REAL)(1.0 / sqrt(var + eps));
      if (rm) rm[c] = (1 - momentum) * rm[c] + momentum * m;
      if (rv) rv[c] = (1 - momentum) * rv[c] + momentum * (FS_REAL)(M > 1 ? ss / (double)(M - 1) : var);
    } else {
      m = rm[c];
      r = (FS_REAL)1 / FS_RM(sqrt)(rv[c] + eps);
    }
    A->mean[c] = m;
    A->rstd[c] = r;
    FS_REAL sc = r * (w ? w[c] : (FS_REAL)1), sh = (b ? b[c] : (FS_REAL)0) - m * sc;
    for (int64_t n = 0; n < N; n++) {
      const FS_REAL *xp = x + (n * C + c) * S;
      FS_REAL *op = out + (n * C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; i++) op[i] = xp[i] * sc + sh;
    }
  }
}

FS_RPUB void FS_RK(fsN_batchnorm_forward)(FS_REAL *out, FS_REAL *mean, FS_REAL *rstd, const FS_REAL *x, const FS_REAL *w,
                           const FS_REAL *b, FS_REAL *rm, FS_REAL *rv, int64_t N, int64_t C, int64_t S,
                           bool training, FS_REAL momentum, FS_REAL eps) {
  batchnorm_args A = {.out = out, .mean = mean, .rstd = rstd, .rm = rm, .rv = rv, .x = x, .w = w, .b = b,
                      .N = N, .C = C, .S = S, .training = training, .momentum = momentum, .eps = eps};
  parallel_rows(C, 2 * N * C * S, batchnorm_forward_channels, &A);
}

typedef struct batchnorm_bw_args {
  FS_REAL *dx, *dw, *db;
  const FS_REAL *dout, *x, *w, *mean, *rstd;
  int64_t N, C, S;
  bool training;
} batchnorm_bw_args;

FS_VECTOR_TARGET
static void batchnorm_backward_channels(const void *args, int64_t c0, int64_t c1) {
  const batchnorm_bw_args *A = args;
  const FS_REAL *x = A->x, *w = A->w, *dout = A->dout, *mean = A->mean, *rstd = A->rstd;
  FS_REAL *dx = A->dx, *dw = A->dw, *db = A->db;
  int64_t N = A->N, C = A->C, S = A->S, M = N * S;
  bool training = A->training;
  for (int64_t c = c0; c < c1; c++) {
    FS_REAL m = mean[c], r = rstd[c], wc = w ? w[c] : (FS_REAL)1;
    double sdy = 0, sdyxh = 0;
    for (int64_t n = 0; n < N; n++) {
      const FS_REAL *xp = x + (n * C + c) * S, *dy = dout + (n * C + c) * S;
      FS_REAL a = 0, k = 0;
#pragma omp simd reduction(+:a, k)
      for (int64_t i = 0; i < S; i++) {
        a += dy[i];
        k += dy[i] * (xp[i] - m);
      }
      sdy += a;
      sdyxh += (double)k * r;
    }
    if (dw) dw[c] += (FS_REAL)sdyxh;
    if (db) db[c] += (FS_REAL)sdy;
    if (!dx) continue;
    /* training: dx = w r (dy - mean(dy) - xh mean(dy xh)) */
    FS_REAL a = training ? (FS_REAL)(sdy / (double)M) : (FS_REAL)0, k = training ? (FS_REAL)(sdyxh / (double)M) : (FS_REAL)0;
    for (int64_t n = 0; n < N; n++) {
      const FS_REAL *xp = x + (n * C + c) * S, *dy = dout + (n * C + c) * S;
      FS_REAL *dp = dx + (n * C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; i++) dp[i] += wc * r * (dy[i] - a - (xp[i] - m) * r * k);
    }
  }
}

FS_RPUB void FS_RK(fsN_batchnorm_backward)(FS_REAL *dx, FS_REAL *dw, FS_REAL *db, const FS_REAL *dout, const FS_REAL *x,
                            const FS_REAL *w, const FS_REAL *mean, const FS_REAL *rstd, int64_t N,
                            int64_t C, int64_t S, bool training) {
  batchnorm_bw_args A = {dx, dw, db, dout, x, w, mean, rstd, N, C, S, training};
  parallel_rows(C, 3 * N * C * S, batchnorm_backward_channels, &A);
}

/* A channel bias over x[N, C, P] (ConvTranspose2d's): out[n, c, p] += b[c] */
FS_RPUB void FS_RK(fsN_chanbias_forward)(FS_REAL *out, const FS_REAL *b, int64_t N, int64_t C, int64_t P) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t p = 0; p < P; p++) out[(n * C + c) * P + p] += b[c];
}

/* db[c] += sum_p dy[n, c, p], image by image (each plane's sum in double) */
FS_RPUB void FS_RK(fsN_chanbias_backward)(FS_REAL *db, const FS_REAL *dy, int64_t N, int64_t C, int64_t P) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      double sum = 0;
      for (int64_t p = 0; p < P; p++) sum += dy[(n * C + c) * P + p];
      db[c] += (FS_REAL)sum;
    }
}
