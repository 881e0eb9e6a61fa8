/* low_norm.c -- LayerNorm of a bfloat16/float16 x on the cpu that loads and
 * stores the low type itself (autograd_int.h's FSG_LOW_BLOCK family): no
 * float32 copy of x, of its result or of their gradients.
 *
 * x [N, C] is cut into parts of whole rows (about LOW_LN_PART floats, fixed
 * by N and C alone) run on the worker pool (fsB_parallel); a part widens its
 * rows into its worker's scratch, runs nn.h's float32 kernel on them and
 * rounds the rows of the result once.  w and b (x's type or float32) are
 * widened whole once.  Statistics (mean, rstd) are float32 and saved, as
 * torch's.  Backward: dx by the same row parts (the kernel's dinp on a
 * zeroed part, rounded into x's gradient, fsG_low_grad_add), dw and db by
 * parts of LOW_LN_COLUMNS columns each summing over every row in row order
 * in float32, rounded once when w, b are low.  Every value is what the
 * float32 kernels (nn.c's split and one-thread ones alike) compute on the
 * widened tensors, so the bits are the float32-copy path's at any thread
 * count. */
#include "autograd_int.h"
#include "blas.h"
#include "nn.h"
#include "vmath.h"

#include <stdlib.h>
#include <string.h>

enum { LOW_LN_PART = 16384, LOW_LN_COLUMNS = 512 };

typedef struct ln_low {
  const fs_tensor *x;
  fs_tensor *out;         /* forward: x's promoted type */
  const float *w, *b;     /* widened */
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
  fsN_layernorm_forward(y, j->mean + r0, j->rstd + r0, fsG_low_block(j->x, at, m, true, buf), j->w, j->b, n, j->C,
                        j->eps);
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
    float m = j->mean[n], s = j->rstd[n], *db = j->db ? j->db + c0 : NULL, *dw = j->dw ? j->dw + c0 : NULL;
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
  fsN_layernorm_backward(d, NULL, NULL, j->dy + at, fsG_low_block(j->x, at, m, true, buf), j->w, j->mean + r0,
                         j->rstd + r0, n, j->C);
  fsG_low_grad_add(j->x->dtype, j->dx + at, d, m, 1.0f, j->dx_fresh);
  return 0;
}

/* j's parts over the workers, or here in order when the tensor is small */
static void ln_low_run(ln_low *j, int parts, fsB_part_fn fn) {
  if (j->N * j->C < 2 * LOW_LN_PART)
    for (int p = 0; p < parts; p++) fn(j, p, 0);
  else fsB_parallel(parts, fn, j); /* the parts cannot fail */
}

/* j's shape, scratch and widened w, b (wide: 2 C floats for the low ones);
 * -1 + error */
static int ln_low_begin(ln_low *j, const fs_tensor *x, const fs_tensor *w, const fs_tensor *b, float **wide) {
  int64_t C = w->numel, N = x->numel / C, rows = C >= LOW_LN_PART ? 1 : LOW_LN_PART / C;
  if (rows > N) rows = N;
  *j = (ln_low){.x = x, .N = N, .C = C, .rows = rows, .row_parts = (N + rows - 1) / rows};
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
  j->w = fsG_low_block(w, 0, (size_t)C, true, *wide);
  j->b = fsG_low_block(b, 0, (size_t)C, true, *wide + C);
  return 0;
}

bool fsG_layernorm_low_ok(const fs_tensor *x, const fs_tensor *w, const fs_tensor *b) {
  if (!x || !w || !b || !fsT_is_low(x->dtype) || x->rank == 0 || x->numel == 0) return false;
  const fs_tensor *ts[3] = {x, w, b};
  for (int i = 0; i < 3; i++)
    if (ts[i]->device != FS_DEV_CPU || !ts[i]->data || (ts[i]->dtype != x->dtype && ts[i]->dtype != FS_F32))
      return false;
  return x->shape[x->rank - 1] == w->numel && b->numel == w->numel;
}

/* a low parameter's float32 sum, rounded into its gradient after the parts */
static int ln_low_param(fs_tensor *t, float **d, float **sum, bool *fresh) {
  *sum = NULL;
  if (!fsT_is_low(t->dtype)) return fsG_grad_buf(t, d);
  if (fsG_low_grad_buf(t, d, fresh)) return -1;
  if (*d && !(*sum = calloc((size_t)t->numel, sizeof **sum))) {
    fsT_seterr("out of memory");
    return -1;
  }
  return 0;
}

static int ln_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
  ln_low j;
  float *wide, *dwl = NULL, *dbl = NULL, *dw, *db;
  bool wf = false, bf = false;
  if (ln_low_begin(&j, x, w, b, &wide) < 0) return -1;
  int rc = fsG_low_grad_buf(x, &j.dx, &j.dx_fresh) || ln_low_param(w, &dw, &dwl, &wf) || ln_low_param(b, &db, &dbl, &bf)
               ? -1
               : 0;
  if (rc == 0) {
    j.dy = fsT_f32(out->grad);
    j.mean = fsT_f32(n->saved[0]);
    j.rstd = fsT_f32(n->saved[1]);
    j.dw = dwl ? dwl : dw;
    j.db = dbl ? dbl : db;
    if (!j.dx) j.row_parts = 0;
    int64_t cols = j.dw || j.db ? (j.C + LOW_LN_COLUMNS - 1) / LOW_LN_COLUMNS : 0;
    ln_low_run(&j, (int)(j.row_parts + cols), ln_low_backward_part);
    if (dwl) fsG_low_grad_add(w->dtype, dw, dwl, (size_t)j.C, 1.0f, wf);
    if (dbl) fsG_low_grad_add(b->dtype, db, dbl, (size_t)j.C, 1.0f, bf);
  }
  free(dwl);
  free(dbl);
  free(wide);
  return rc;
}

fs_tensor *fsG_layernorm_low(fs_tensor *x, fs_tensor *w, fs_tensor *b, double eps) {
  fs_tensor *ins[3] = {x, w, b};
  if (!fsG_check_inputs("layer_norm", 3, ins)) return NULL;
  ln_low j;
  float *wide;
  if (ln_low_begin(&j, x, w, b, &wide) < 0) return NULL;
  fs_tensor *out = fsT_new(fsG_promoted(3, ins), FS_DEV_CPU, x->rank, x->shape);
  fs_tensor *mean = fsT_new(FS_F32, FS_DEV_CPU, 1, &j.N), *rstd = fsT_new(FS_F32, FS_DEV_CPU, 1, &j.N);
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
  j.eps = (float)eps;
  ln_low_run(&j, (int)j.row_parts, ln_low_forward_part);
  free(wide);
  return fsG_record(out, ln_low_bw, 3, ins, mean, rstd, eps, 0);
}
