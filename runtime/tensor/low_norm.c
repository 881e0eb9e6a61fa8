/* low_norm.c -- LayerNorm, RMSNorm, GroupNorm and BatchNorm of a bfloat16/float16 x on the cpu
 * that load and store the low type themselves (autograd_int.h's
 * FSG_LOW_BLOCK family): no float32 copy of x, of its result or of their
 * gradients.
 *
 * x [N, C] is cut into parts of whole rows (about LOW_LN_PART floats, fixed
 * by N and C alone) run on the worker pool (fsB_parallel); a part widens its
 * rows into its worker's scratch, runs nn.h's float32 kernel on them and
 * rounds the rows of the result once.  w and b (x's type or float32) are
 * widened whole once.  Statistics (mean, rstd; RMSNorm's rstd) are float32
 * and saved, as torch's.  Backward: dx by the same row parts (the kernel's
 * dinp on a zeroed part, rounded into x's gradient, fsG_low_grad_add), dw
 * and db by parts of LOW_LN_COLUMNS columns each summing over every row in
 * row order in float32, rounded once when w, b are low.  Every value is
 * what the float32 kernels (nn.c's split and one-thread ones, norm.c's)
 * compute on the widened tensors, so the bits are the float32-copy path's
 * at any thread count. */
#include "autograd_int.h"
#include "blas.h"
#include "cnn.h"
#include "nn.h"
#include "norm.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { LOW_LN_PART = 16384, LOW_LN_COLUMNS = 512 };

typedef struct ln_low {
  const fs_tensor *x;
  fs_tensor *out;         /* forward: x's promoted type */
  bool rms;               /* RMSNorm: no b, no mean */
  const float *w, *b;     /* widened, or NULL */
  float *mean, *rstd;     /* [N] */
  const float *dy;        /* backward: out's float32 gradient */
  float *dx, *dw, *db;    /* x's low gradient; w's, b's float32 sums (or their gradients) */
  bool dx_fresh;
  float *scratch;         /* 2 * rows * C floats per worker */
  int64_t N, C, rows, row_parts;
  float eps;
} ln_low;

static int ln_low_forward_part(void *ctx, int part, int worker) {
  const ln_low *j = ctx;
  int64_t r0 = part * j->rows, n = j->N - r0 < j->rows ? j->N - r0 : j->rows;
  size_t at = (size_t)(r0 * j->C), m = (size_t)(n * j->C);
  float *buf = j->scratch + (size_t)worker * 2 * (size_t)(j->rows * j->C), *y = fsG_low_out(j->out, at, buf + m);
  const float *x = fsG_low_block(j->x, at, m, true, buf);
  if (j->rms) fsN_rmsnorm_forward(y, j->rstd + r0, x, j->w, n, j->C, j->eps);
  else fsN_layernorm_forward(y, j->mean + r0, j->rstd + r0, x, j->w, j->b, n, j->C, j->eps);
  fsG_low_store(j->out, at, m, y);
  return 0;
}

/* dw, db over columns [c0, c1): the expressions and row order of the
 * kernels' parameter sums */
FS_VECTOR_TARGET
static void ln_low_columns(const ln_low *j, int64_t c0, int64_t c1) {
  float xs[LOW_LN_COLUMNS];
  for (int64_t n = 0; n < j->N; n++) {
    const float *x = fsG_low_block(j->x, (size_t)(n * j->C + c0), (size_t)(c1 - c0), true, xs);
    const float *dy = j->dy + n * j->C + c0;
    float m = j->rms ? 0 : j->mean[n], s = j->rstd[n], *db = j->db ? j->db + c0 : NULL, *dw = j->dw ? j->dw + c0 : NULL;
    if (j->rms) {
#pragma omp simd
      for (int64_t c = 0; c < c1 - c0; c++) dw[c] += dy[c] * x[c] * s;
      continue;
    }
    if (db) {
#pragma omp simd
      for (int64_t c = 0; c < c1 - c0; c++) db[c] += dy[c];
    }
    if (dw) {
#pragma omp simd
      for (int64_t c = 0; c < c1 - c0; c++) dw[c] += (x[c] - m) * s * dy[c];
    }
  }
}

static int ln_low_backward_part(void *ctx, int part, int worker) {
  const ln_low *j = ctx;
  if (part >= j->row_parts) {
    int64_t c0 = (int64_t)(part - j->row_parts) * LOW_LN_COLUMNS;
    ln_low_columns(j, c0, j->C - c0 < LOW_LN_COLUMNS ? j->C : c0 + LOW_LN_COLUMNS);
    return 0;
  }
  int64_t r0 = part * j->rows, n = j->N - r0 < j->rows ? j->N - r0 : j->rows;
  size_t at = (size_t)(r0 * j->C), m = (size_t)(n * j->C);
  float *buf = j->scratch + (size_t)worker * 2 * (size_t)(j->rows * j->C), *d = buf + m;
  memset(d, 0, m * sizeof *d); /* the kernel adds to dinp, as to the zeroed float32 gradient */
  const float *x = fsG_low_block(j->x, at, m, true, buf);
  if (j->rms) fsN_rmsnorm_backward(d, NULL, j->dy + at, x, j->w, j->rstd + r0, n, j->C);
  else fsN_layernorm_backward(d, NULL, NULL, j->dy + at, x, j->w, j->mean + r0, j->rstd + r0, n, j->C);
  fsG_low_grad_add(j->x->dtype, j->dx + at, d, m, 1.0f, j->dx_fresh);
  return 0;
}

/* j's parts over the workers, or here in order when the tensor (numel
 * elements) is small */
static void low_run(void *j, int64_t numel, int parts, fsB_part_fn fn) {
  if (numel < 2 * LOW_LN_PART)
    for (int p = 0; p < parts; p++) fn(j, p, 0);
  else fsB_parallel(parts, fn, j); /* the parts cannot fail */
}

/* j's shape (rows of C), scratch and widened w, b (wide: 2 C floats for
 * the low ones); -1 + error */
static int ln_low_begin(ln_low *j, const fs_tensor *x, const fs_tensor *w, const fs_tensor *b, int64_t C, float **wide) {
  int64_t N = x->numel / C, rows = C >= LOW_LN_PART ? 1 : LOW_LN_PART / C;
  if (rows > N) rows = N;
  *j = (ln_low){.x = x, .rms = !b, .N = N, .C = C, .rows = rows, .row_parts = (N + rows - 1) / rows};
  int workers = j->N * j->C < 2 * LOW_LN_PART ? 1 : fsB_threads();
  size_t per = 2 * (size_t)(rows * C);
  if (j->row_parts + (C + LOW_LN_COLUMNS - 1) / LOW_LN_COLUMNS >= INT32_MAX) {
    fsT_seterr("layer_norm: %lld rows are too many", (long long)N);
    return -1;
  }
  if (!(*wide = malloc(((size_t)workers * per + 2 * (size_t)C) * sizeof **wide))) {
    fsT_seterr("out of memory");
    return -1;
  }
  j->scratch = *wide + 2 * C;
  j->w = w ? fsG_low_block(w, 0, (size_t)C, true, *wide) : NULL;
  j->b = b ? fsG_low_block(b, 0, (size_t)C, true, *wide + C) : NULL;
  return 0;
}

/* t (NULL, x's type or float32) on the cpu with its data */
static bool low_side_ok(const fs_tensor *t, fs_dtype dt) {
  return !t || (t->device == FS_DEV_CPU && t->data && (t->dtype == dt || t->dtype == FS_F32));
}

bool fsG_layernorm_low_ok(const fs_tensor *x, const fs_tensor *w, const fs_tensor *b) {
  if (!x || !w || !b || !fsT_is_low(x->dtype) || x->rank == 0 || x->numel == 0 || !low_side_ok(x, x->dtype) ||
      !low_side_ok(w, x->dtype) || !low_side_ok(b, x->dtype))
    return false;
  return x->shape[x->rank - 1] == w->numel && b->numel == w->numel;
}

bool fsG_rms_norm_low_ok(const fs_tensor *x, int nd, const int64_t *shape, const fs_tensor *w) {
  if (!x || !fsT_is_low(x->dtype) || x->numel == 0 || !low_side_ok(x, x->dtype) || !low_side_ok(w, x->dtype) ||
      nd < 1 || nd > x->rank || memcmp(x->shape + x->rank - nd, shape, (size_t)nd * sizeof *shape))
    return false;
  return !w || (w->rank == nd && !memcmp(w->shape, shape, (size_t)nd * sizeof *shape));
}

/* a low parameter's float32 sum, rounded into its gradient after the parts */
static int ln_low_param(fs_tensor *t, float **d, float **sum, bool *fresh) {
  *sum = NULL;
  if (!t) return 0;
  if (!fsT_is_low(t->dtype)) return fsG_grad_buf(t, d);
  if (fsG_low_grad_buf(t, d, fresh)) return -1;
  if (*d && !(*sum = calloc((size_t)t->numel, sizeof **sum))) {
    fsT_seterr("out of memory");
    return -1;
  }
  return 0;
}

/* The gradients of a norm's weight and bias (either may be absent): dw and
 * db are where the parts add them, a float32 .grad or, for a low
 * parameter, a float32 sum that low_affine_end rounds into its .grad. */
typedef struct low_affine {
  float *dw, *db, *d[2], *sum[2];
  bool fresh[2];
} low_affine;

static int low_affine_begin(low_affine *a, fs_tensor *w, fs_tensor *b) {
  *a = (low_affine){0};
  fs_tensor *t[2] = {w, b};
  int rc = 0;
  for (int i = 0; i < 2 && rc == 0; i++) rc = ln_low_param(t[i], &a->d[i], &a->sum[i], &a->fresh[i]);
  a->dw = a->sum[0] ? a->sum[0] : a->d[0];
  a->db = a->sum[1] ? a->sum[1] : a->d[1];
  return rc;
}

/* rc 0: the sums into the low parameters' gradients; always frees them */
static void low_affine_end(low_affine *a, fs_tensor *w, fs_tensor *b, int rc) {
  fs_tensor *t[2] = {w, b};
  for (int i = 0; i < 2; i++) {
    if (rc == 0 && a->sum[i]) fsG_low_grad_add(t[i]->dtype, a->d[i], a->sum[i], (size_t)t[i]->numel, 1.0f, a->fresh[i]);
    free(a->sum[i]);
  }
}

static int ln_low_bw(fsG_node *n, fs_tensor *out) {
  bool rms = n->k;
  fs_tensor *x = n->in[0], *w = n->in[1], *b = rms ? NULL : n->in[2], *rstd = n->saved[rms ? 0 : 1];
  ln_low j;
  low_affine g = {0};
  float *wide;
  if (ln_low_begin(&j, x, w, b, x->numel / rstd->numel, &wide) < 0) return -1;
  int rc = fsG_low_grad_buf(x, &j.dx, &j.dx_fresh) || low_affine_begin(&g, w, b) ? -1 : 0;
  if (rc == 0) {
    j.dy = fsT_f32(out->grad);
    j.mean = rms ? NULL : fsT_f32(n->saved[0]);
    j.rstd = fsT_f32(rstd);
    j.dw = g.dw;
    j.db = g.db;
    if (!j.dx) j.row_parts = 0;
    int64_t cols = j.dw || j.db ? (j.C + LOW_LN_COLUMNS - 1) / LOW_LN_COLUMNS : 0;
    low_run(&j, j.N * j.C, (int)(j.row_parts + cols), ln_low_backward_part);
  }
  low_affine_end(&g, w, b, rc);
  free(wide);
  return rc;
}

/* LayerNorm (b given) or RMSNorm of x's rows of C */
static fs_tensor *norm_low(const char *op, fs_tensor *x, fs_tensor *w, fs_tensor *b, int64_t C, double eps) {
  fs_tensor *ins[3] = {x, w, b};
  if (!fsG_check_inputs(op, 3, ins)) return NULL;
  ln_low j;
  float *wide;
  if (ln_low_begin(&j, x, w, b, C, &wide) < 0) return NULL;
  fs_tensor *out = fsT_new(fsG_promoted(3, ins), FS_DEV_CPU, x->rank, x->shape);
  fs_tensor *mean = b ? fsT_new(FS_F32, FS_DEV_CPU, 1, &j.N) : NULL, *rstd = fsT_new(FS_F32, FS_DEV_CPU, 1, &j.N);
  if (!out || (b && !mean) || !rstd) {
    free(wide);
    fsT_release(out);
    fsT_release(mean);
    fsT_release(rstd);
    return NULL;
  }
  j.out = out;
  j.mean = b ? fsT_f32(mean) : NULL;
  j.rstd = fsT_f32(rstd);
  j.eps = (float)eps;
  low_run(&j, j.N * j.C, (int)j.row_parts, ln_low_forward_part);
  free(wide);
  if (!b) return fsG_record(out, ln_low_bw, 2, ins, rstd, NULL, eps, 1);
  return fsG_record(out, ln_low_bw, 3, ins, mean, rstd, eps, 0);
}

fs_tensor *fsG_layernorm_low(fs_tensor *x, fs_tensor *w, fs_tensor *b, double eps) {
  return norm_low("layer_norm", x, w, b, w->numel, eps);
}

fs_tensor *fsG_rms_norm_low(fs_tensor *x, int nd, const int64_t *shape, fs_tensor *w, double eps) {
  int64_t D = 1;
  for (int i = 0; i < nd; i++) D *= shape[i];
  if (isnan(eps)) eps = 1.1920928955078125e-07; /* eps=None: torch.finfo(float32).eps, as fsG_rms_norm */
  return norm_low("rms_norm", x, w, NULL, D, eps);
}

/* ---- GroupNorm: x [N, C, S...] by chunks of whole images of about
 * LOW_GN_CHUNK floats on the calling thread, norm.c's kernels on each
 * chunk widened: a group is in one image, and dw, db add the images in
 * order, so every value is the float32-copy path's. ---- */
enum { LOW_GN_CHUNK = 65536 };

typedef struct gn_low {
  int64_t N, C, S, G, imgs; /* imgs: images per chunk */
  float *wide, *buf;        /* w, b widened (2 C); a chunk's x and result (2 imgs C S) */
  const float *w, *b;
} gn_low;

bool fsG_group_norm_low_ok(const fs_tensor *x, int64_t groups, const fs_tensor *w, const fs_tensor *b) {
  if (!x || !fsT_is_low(x->dtype) || x->numel == 0 || x->rank < 2 || groups <= 0 || x->shape[1] % groups ||
      !low_side_ok(x, x->dtype) || !low_side_ok(w, x->dtype) || !low_side_ok(b, x->dtype))
    return false;
  return (!w || w->numel == x->shape[1]) && (!b || b->numel == x->shape[1]);
}

static int gn_low_begin(gn_low *g, const fs_tensor *x, int64_t groups, const fs_tensor *w, const fs_tensor *b) {
  int64_t N = x->shape[0], C = x->shape[1], S = x->numel / (N * C), img = C * S;
  *g = (gn_low){.N = N, .C = C, .S = S, .G = groups, .imgs = img >= LOW_GN_CHUNK ? 1 : LOW_GN_CHUNK / img};
  if (g->imgs > N) g->imgs = N;
  if (!(g->wide = malloc((2 * (size_t)C + 2 * (size_t)(g->imgs * img)) * sizeof *g->wide))) {
    fsT_seterr("out of memory");
    return -1;
  }
  g->buf = g->wide + 2 * C;
  g->w = w ? fsG_low_block(w, 0, (size_t)C, true, g->wide) : NULL;
  g->b = b ? fsG_low_block(b, 0, (size_t)C, true, g->wide + C) : NULL;
  return 0;
}

static int gn_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
  gn_low g;
  low_affine p = {0};
  float *dx;
  bool fresh = false;
  if (gn_low_begin(&g, x, n->k, w, b) < 0) return -1;
  int rc = fsG_low_grad_buf(x, &dx, &fresh) || low_affine_begin(&p, w, b) ? -1 : 0;
  for (int64_t n0 = 0; rc == 0 && (dx || p.dw || p.db) && n0 < g.N; n0 += g.imgs) {
    int64_t k = g.N - n0 < g.imgs ? g.N - n0 : g.imgs;
    size_t at = (size_t)(n0 * g.C * g.S), m = (size_t)(k * g.C * g.S);
    float *d = g.buf + m;
    if (dx) memset(d, 0, m * sizeof *d); /* the kernel adds to dx, as to the zeroed float32 gradient */
    fsN_groupnorm_backward(dx ? d : NULL, p.dw, p.db, fsT_f32(out->grad) + at,
                           fsG_low_block(x, at, m, true, g.buf), g.w, fsT_f32(n->saved[0]) + n0 * g.G,
                           fsT_f32(n->saved[1]) + n0 * g.G, k, g.C, g.S, g.G);
    if (dx) fsG_low_grad_add(x->dtype, dx + at, d, m, 1.0f, fresh);
  }
  low_affine_end(&p, w, b, rc);
  free(g.wide);
  return rc;
}

fs_tensor *fsG_group_norm_low(fs_tensor *x, int64_t groups, fs_tensor *w, fs_tensor *b, double eps) {
  fs_tensor *ins[3] = {x, w, b};
  if (!fsG_check_inputs("group_norm", 3, ins)) return NULL;
  gn_low g;
  if (gn_low_begin(&g, x, groups, w, b) < 0) return NULL;
  int64_t NG = g.N * groups;
  fs_tensor *out = fsT_new(fsG_promoted(3, ins), FS_DEV_CPU, x->rank, x->shape);
  fs_tensor *mean = fsT_new(FS_F32, FS_DEV_CPU, 1, &NG), *rstd = fsT_new(FS_F32, FS_DEV_CPU, 1, &NG);
  if (!out || !mean || !rstd) {
    free(g.wide);
    fsT_release(out);
    fsT_release(mean);
    fsT_release(rstd);
    return NULL;
  }
  for (int64_t n0 = 0; n0 < g.N; n0 += g.imgs) {
    int64_t k = g.N - n0 < g.imgs ? g.N - n0 : g.imgs;
    size_t at = (size_t)(n0 * g.C * g.S), m = (size_t)(k * g.C * g.S);
    float *y = fsG_low_out(out, at, g.buf + m);
    fsN_groupnorm_forward(y, fsT_f32(mean) + n0 * groups, fsT_f32(rstd) + n0 * groups,
                          fsG_low_block(x, at, m, true, g.buf), g.w, g.b, k, g.C, g.S, groups, (float)eps);
    fsG_low_store(out, at, m, y);
  }
  free(g.wide);
  return fsG_record(out, gn_low_bw, 3, ins, mean, rstd, eps, groups);
}

/* ---- BatchNorm: x [N, C, S...] by parts of whole channels (about
 * LOW_LN_PART floats, fixed by the shape) on the worker pool.  A part
 * gathers its k channels of every image into its worker's scratch as
 * [N, k, S], runs cnn.h's kernel on them as a batch of k channels and
 * scatters the result rounded once.  A channel's statistics, running
 * statistics and gradients are the kernel's over that channel alone (in
 * the same order whatever k), so every value is the float32-copy path's.
 * Running statistics of any float type but float64 are widened whole,
 * updated by the kernel and stored back rounded, as torch's in-place
 * update of a bfloat16 buffer computes in float. ---- */

typedef struct bn_low {
  const fs_tensor *x;
  fs_tensor *out;               /* forward: x's promoted type */
  const float *w, *b, *dy;      /* widened w, b; backward: out's float32 gradient */
  float *rm, *rv, *mean, *rstd; /* running statistics (widened, or their own floats); [C] */
  float *dx, *dw, *db;          /* x's low gradient; w's, b's float32 sums (or their gradients) */
  float *scratch;               /* 3 N k S floats per worker */
  int64_t N, C, S, k;           /* k: channels per part */
  bool training, dx_fresh;
  float momentum, eps;
} bn_low;

bool fsG_batch_norm_low_ok(const fs_tensor *x, const fs_tensor *w, const fs_tensor *b, const fs_tensor *rm,
                           const fs_tensor *rv) {
  if (!x || !fsT_is_low(x->dtype) || x->rank < 2 || x->numel == 0 || !low_side_ok(x, x->dtype) ||
      !low_side_ok(w, x->dtype) || !low_side_ok(b, x->dtype))
    return false;
  const fs_tensor *stats[2] = {rm, rv};
  for (int i = 0; i < 2; i++)
    if (stats[i] && (stats[i]->device != FS_DEV_CPU || !stats[i]->data || stats[i]->dtype == FS_F64 ||
                     !fsT_is_float(stats[i]->dtype)))
      return false;
  return true;
}

/* channels [c0, c0 + k) of every image of a [N, C, S] array of type dt,
 * widened into buf as [N, k, S] */
static void bn_gather(const bn_low *j, fs_dtype dt, const void *src, int64_t c0, int64_t k, float *buf) {
  size_t es = fsT_dtype_size(dt), m = (size_t)(k * j->S);
  for (int64_t n = 0; n < j->N; n++)
    fsT_convert(FS_F32, buf + n * m, dt, (const char *)src + (size_t)((n * j->C + c0) * j->S) * es, m);
}

static int bn_low_forward_part(void *ctx, int part, int worker) {
  const bn_low *j = ctx;
  int64_t c0 = part * j->k, k = j->C - c0 < j->k ? j->C - c0 : j->k;
  size_t m = (size_t)(k * j->S), es = fsT_dtype_size(j->out->dtype);
  float *x = j->scratch + (size_t)worker * 3 * (size_t)(j->N * j->k * j->S), *y = x + j->N * m;
  bn_gather(j, j->x->dtype, j->x->data, c0, k, x);
  fsN_batchnorm_forward(y, j->mean + c0, j->rstd + c0, x, j->w ? j->w + c0 : NULL, j->b ? j->b + c0 : NULL,
                        j->rm ? j->rm + c0 : NULL, j->rv ? j->rv + c0 : NULL, j->N, k, j->S, j->training,
                        j->momentum, j->eps);
  for (int64_t n = 0; n < j->N; n++)
    fsT_convert(j->out->dtype, (char *)j->out->data + (size_t)((n * j->C + c0) * j->S) * es, FS_F32, y + n * m, m);
  return 0;
}

static int bn_low_backward_part(void *ctx, int part, int worker) {
  const bn_low *j = ctx;
  int64_t c0 = part * j->k, k = j->C - c0 < j->k ? j->C - c0 : j->k;
  size_t m = (size_t)(k * j->S);
  float *x = j->scratch + (size_t)worker * 3 * (size_t)(j->N * j->k * j->S), *dy = x + j->N * m, *d = dy + j->N * m;
  bn_gather(j, j->x->dtype, j->x->data, c0, k, x);
  bn_gather(j, FS_F32, j->dy, c0, k, dy);
  if (j->dx) memset(d, 0, j->N * m * sizeof *d); /* the kernel adds to dx, as to the zeroed float32 gradient */
  fsN_batchnorm_backward(j->dx ? d : NULL, j->dw ? j->dw + c0 : NULL, j->db ? j->db + c0 : NULL, dy, x,
                         j->w ? j->w + c0 : NULL, j->mean + c0, j->rstd + c0, j->N, k, j->S, j->training);
  for (int64_t n = 0; j->dx && n < j->N; n++)
    fsG_low_grad_add(j->x->dtype, j->dx + (n * j->C + c0) * j->S, d + n * m, m, 1.0f, j->dx_fresh);
  return 0;
}

/* j's shape, scratch and widened w, b, rm, rv (wide: 4 C floats first);
 * -1 + error */
static int bn_low_begin(bn_low *j, const fs_tensor *x, const fs_tensor *w, const fs_tensor *b, fs_tensor *rm,
                        fs_tensor *rv, float **wide) {
  int64_t N = x->shape[0], C = x->shape[1], S = x->numel / (N * C), k = LOW_LN_PART / (N * S);
  *j = (bn_low){.x = x, .N = N, .C = C, .S = S, .k = k < 1 ? 1 : k > C ? C : k};
  int workers = x->numel < 2 * LOW_LN_PART ? 1 : fsB_threads();
  if (!(*wide = malloc((4 * (size_t)C + (size_t)workers * 3 * (size_t)(N * j->k * S)) * sizeof **wide))) {
    fsT_seterr("out of memory");
    return -1;
  }
  j->scratch = *wide + 4 * C;
  j->w = w ? fsG_low_block(w, 0, (size_t)C, true, *wide) : NULL;
  j->b = b ? fsG_low_block(b, 0, (size_t)C, true, *wide + C) : NULL;
  fs_tensor *stats[2] = {rm, rv};
  for (int i = 0; i < 2; i++) {
    float *s = NULL;
    if (stats[i] && stats[i]->dtype == FS_F32) s = fsT_f32(stats[i]);
    else if (stats[i]) fsT_convert(FS_F32, s = *wide + (2 + i) * C, stats[i]->dtype, stats[i]->data, (size_t)C);
    *(i ? &j->rv : &j->rm) = s;
  }
  return 0;
}

static int bn_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
  bn_low j;
  low_affine g = {0};
  float *wide;
  if (bn_low_begin(&j, x, w, b, NULL, NULL, &wide) < 0) return -1;
  int rc = fsG_low_grad_buf(x, &j.dx, &j.dx_fresh) || low_affine_begin(&g, w, b) ? -1 : 0;
  if (rc == 0 && (j.dx || g.dw || g.db)) {
    j.dy = fsT_f32(out->grad);
    j.mean = fsT_f32(n->saved[0]);
    j.rstd = fsT_f32(n->saved[1]);
    j.dw = g.dw;
    j.db = g.db;
    j.training = n->k != 0;
    low_run(&j, x->numel, (int)((j.C + j.k - 1) / j.k), bn_low_backward_part);
  }
  low_affine_end(&g, w, b, rc);
  free(wide);
  return rc;
}

fs_tensor *fsG_batch_norm_low(fs_tensor *x, fs_tensor *rm, fs_tensor *rv, fs_tensor *w, fs_tensor *b, bool training,
                              double momentum, double eps) {
  fs_tensor *ins[3] = {x, w, b};
  if (!fsG_check_inputs("batch_norm", 3, ins)) return NULL;
  bn_low j;
  float *wide;
  if (bn_low_begin(&j, x, w, b, rm, rv, &wide) < 0) return NULL;
  int64_t C = j.C;
  fs_tensor *out = fsT_new(fsG_promoted(3, ins), FS_DEV_CPU, x->rank, x->shape);
  fs_tensor *mean = fsT_new(FS_F32, FS_DEV_CPU, 1, &C), *rstd = fsT_new(FS_F32, FS_DEV_CPU, 1, &C);
  if (!out || !mean || !rstd) {
    free(wide);
    fsT_release(out);
    fsT_release(mean);
    fsT_release(rstd);
    return NULL;
  }
  j.out = out;
  j.mean = fsT_f32(mean);
  j.rstd = fsT_f32(rstd);
  j.training = training;
  j.momentum = (float)momentum;
  j.eps = (float)eps;
  low_run(&j, x->numel, (int)((C + j.k - 1) / j.k), bn_low_forward_part);
  fs_tensor *stats[2] = {rm, rv};
  for (int i = 0; training && i < 2; i++)
    if (stats[i] && stats[i]->dtype != FS_F32)
      fsT_convert(stats[i]->dtype, stats[i]->data, FS_F32, i ? j.rv : j.rm, (size_t)C);
  free(wide);
  return fsG_record(out, bn_low_bw, 3, ins, mean, rstd, eps, training);
}
