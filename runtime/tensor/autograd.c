/* autograd.c -- the tape and the differentiable ops (see autograd.h). */
#include "autograd.h"
#include "autograd_int.h"
#include "ops.h"
#include "blas.h"
#include "rng.h"
#include "vmath.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local bool grad_enabled = true;

bool fsG_set_grad_enabled(bool enabled) {
  bool old = grad_enabled;
  grad_enabled = enabled;
  return old;
}

bool fsG_grad_enabled(void) { return grad_enabled; }

void fsG_detach(fs_tensor *t) {
  fsG_node *n = t->node;
  if (!n) return;
  t->node = NULL;
  for (int i = 0; i < 3; i++) fsT_release(n->in[i]);
  for (int i = 0; i < 2; i++) fsT_release(n->saved[i]);
  free(n);
}

/* ---- helpers ---- */

/* Every input present must hold data (not meta), all on one device. */
const fsB_backend *fsG_check_inputs(const char *op, int n, fs_tensor *const *ts) {
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    if (!ts[i]->data) {
      fsT_seterr("%s: tensor is on the meta device (no data); materialize it first", op);
      return NULL;
    }
    if (ts[i]->device != ts[0]->device) {
      fsT_seterr("Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                 fsT_device_name(ts[0]->device), fsT_device_name(ts[i]->device));
      return NULL;
    }
  }
  return fsB_of(ts[0]);
}

static bool needs_grad(int n, fs_tensor *const *ts) {
  if (!grad_enabled) return false;
  for (int i = 0; i < n; i++)
    if (ts[i] && ts[i]->requires_grad) return true;
  return false;
}

/* Records a node on out when any input requires grad; takes over saved
 * buffers either way.  Returns out, or NULL (out released) on OOM. */
fs_tensor *fsG_record(fs_tensor *out, backward_fn fn, int n, fs_tensor *const *ins,
                         fs_tensor *saved0, fs_tensor *saved1, double s, int64_t k) {
  if (!needs_grad(n, ins)) {
    fsT_release(saved0);
    fsT_release(saved1);
    return out;
  }
  fsG_node *node = calloc(1, sizeof *node);
  if (!node) {
    fsT_release(saved0);
    fsT_release(saved1);
    fsT_release(out);
    fsT_seterr("out of memory");
    return NULL;
  }
  node->backward = fn;
  for (int i = 0; i < n; i++) node->in[i] = fsT_retain(ins[i]);
  node->saved[0] = saved0;
  node->saved[1] = saved1;
  node->s = s;
  node->k = k;
  node->gemm = fsB_gemm_operands();
  out->node = node;
  out->requires_grad = true;
  return out;
}

/* t's gradient buffer, allocated zeroed on first use; *g = NULL when t does
 * not require grad.  -1 on OOM. */
int fsG_grad_buf(fs_tensor *t, float **g) {
  *g = NULL;
  if (!t || !t->requires_grad) return 0;
  if (!t->grad && !(t->grad = fsT_zeros_like(t))) return -1;
  if (t->grad->dtype != FS_F32 && fsT_set_dtype(t->grad, FS_F32) < 0) return -1;
  if (fsT_is_low(t->dtype) && !t->node && fsG_note_low_leaf(t) < 0) return -1;
  *g = fsT_f32(t->grad);
  return 0;
}

int fsG_grad_whole(fs_tensor *t, size_t n, float **g, bool *fresh) {
  *fresh = false;
  if (!t || !t->requires_grad || t->grad || t->dtype != FS_F32 || (size_t)t->numel != n)
    return fsG_grad_buf(t, g);
  fs_tensor *d = fsT_new(FS_F32, t->device, t->rank, t->shape);
  if (!d) return -1;
  t->grad = d;
  *g = fsT_f32(d);
  *fresh = true;
  return 0;
}

/* Scalars and the integer ops below work on values from the CPU: a device
 * tensor is read through a host copy (on_host: t itself on the cpu) and
 * results are written through its backend. */
fs_tensor *fsG_on_host(fs_tensor *t) { return fsT_to_device(t, FS_DEV_CPU); }

/* out, built on the cpu, moved to dev (out is consumed). */
fs_tensor *fsG_to_dev(fs_tensor *out, fs_device dev) {
  if (!out || dev == FS_DEV_CPU) return out;
  fs_tensor *d = fsT_to_device(out, dev);
  fsT_release(out);
  return d;
}

/* Element 0 of a float32, float64 or int64 tensor := v. */
static int write_scalar(fs_tensor *t, double v) {
  int64_t i = (int64_t)v;
  float f = (float)v;
  if (t->dtype == FS_F64) return fsB_of(t)->from_host(t->data, &v, sizeof v);
  return fsB_of(t)->from_host(t->data, t->dtype == FS_I64 ? (const void *)&i : (const void *)&f,
                              t->dtype == FS_I64 ? sizeof i : sizeof f);
}

/* A 0-d tensor holding v, on dev. */
static fs_tensor *scalar_on(fs_dtype dt, fs_device dev, double v) {
  fs_tensor *t = fsT_new(dt, dev, 0, NULL);
  if (t && write_scalar(t, v) < 0) {
    fsT_release(t);
    return NULL;
  }
  return t;
}

static fs_tensor *new_f32(const fs_tensor *like, int rank, const int64_t *shape) {
  return fsT_new(FS_F32, like->device, rank, shape);
}

static int64_t rows_of(const fs_tensor *t) { /* product of all dims but the last */
  return t->rank ? t->numel / (t->shape[t->rank - 1] ? t->shape[t->rank - 1] : 1) : 1;
}

static bool want_f32(const char *op, const fs_tensor *t) {
  if (t->dtype == FS_F32) return true;
  fsT_seterr("%s: expected a float32 tensor, got %s", op, fsT_dtype_name(t->dtype));
  return false;
}

/* ---- linear ---- */

/* On the cpu a fresh dx is the GEMM's output (beta 0), not a zeroed buffer
 * it adds to. */
static int linear_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *W = n->in[1], *b = n->in[2];
  int64_t N = rows_of(x), C = W->shape[1], OC = W->shape[0];
  float *dx, *dW, *db;
  bool fresh = false;
  if ((x->device == FS_DEV_CPU ? fsG_grad_whole(x, (size_t)x->numel, &dx, &fresh) : fsG_grad_buf(x, &dx)) ||
      fsG_grad_buf(W, &dW) || fsG_grad_buf(b, &db))
    return -1;
  if (fresh && fsB_sgemm(false, false, N, C, OC, 1.0f, fsT_f32(out->grad), OC, fsT_f32(W), C, 0.0f, dx, C) < 0)
    return -1;
  return fsB_of(x)->nn->linear_backward(fresh ? NULL : dx, dW, db, fsT_f32(out->grad), fsT_f32(x),
                                        fsT_f32(W), N, C, OC);
}

/* Linear under bfloat16 autocast on the cpu, as one node with a bfloat16
 * output: the general path (fsG_low_begin/fsG_low_end) wraps the float32
 * linear in cast and round nodes, which cost a float32 copy of a bfloat16
 * input, a float32 output converted to bfloat16, and in backward a
 * gradient buffer, a copy, a rounding and an addition for each of them.
 * The arithmetic is the general path's: operands at bfloat16 precision
 * (the GEMM rounds them), the bias rounded, the float32 result rounded
 * once; backward rounds dW and db (and dx of a float32 x) before adding
 * them to the float32 gradients, as round nodes do, and for a bfloat16 x
 * rounds x's accumulated gradient, as its cast node does. */
static bool linear_bf16_direct(const fs_tensor *x, const fs_tensor *W, const fs_tensor *b) {
  fs_tensor *const ins[3] = {(fs_tensor *)x, (fs_tensor *)W, (fs_tensor *)b};
  for (int i = 0; i < 3; i++)
    if (ins[i] && (ins[i]->device != FS_DEV_CPU || !ins[i]->data)) return false;
  return fsG_autocast() == FS_BF16 && (x->dtype == FS_F32 || x->dtype == FS_BF16) && W->dtype == FS_F32 &&
         W->rank == 2 && x->rank >= 1 && x->shape[x->rank - 1] == W->shape[1] &&
         (!b || (b->dtype == FS_F32 && b->numel == W->shape[0]));
}

/* scratch float32 buffers from the cpu allocator (its size-keyed cache) */
static float *scratch(size_t n, bool zeroed) {
  float *p = fsB_get(FS_DEV_CPU)->alloc((n ? n : 1) * sizeof *p);
  if (!p) fsT_seterr("out of memory");
  else if (zeroed) memset(p, 0, n * sizeof *p);
  return p;
}

static void scratch_free(float *p, size_t n) {
  if (p) fsB_get(FS_DEV_CPU)->free(p, (n ? n : 1) * sizeof *p);
}

/* The bias gradient of a bfloat16 Linear, db += (dy summed over its rows)
 * rounded to bfloat16 (a round node's backward: the contribution rounded,
 * the float32 bias's sum not), in parts of BIAS_PART_COLUMNS columns over
 * the worker pool: each column sums its rows in row order from 0, as
 * fsN_linear_backward's db into a zeroed buffer did, so the split (fixed by
 * the shape) changes no bits.  Parts of whole rows up to 512 columns: the
 * sums over 64-column strips ran at 2x the time. */
enum { BIAS_PART_COLUMNS = 512 };
typedef struct bias_bf16_job {
  float *db;
  const float *dy;
  int64_t N, OC;
} bias_bf16_job;

FS_VECTOR_TARGET
static int bias_bf16_part(void *ctx, int part, int worker) {
  (void)worker;
  const bias_bf16_job *j = ctx;
  int64_t o0 = (int64_t)part * BIAS_PART_COLUMNS, m = j->OC - o0 < BIAS_PART_COLUMNS ? j->OC - o0 : BIAS_PART_COLUMNS;
  float sum[BIAS_PART_COLUMNS] = {0};
  for (int64_t n = 0; n < j->N; n++) {
    const float *row = j->dy + n * j->OC + o0;
#pragma omp simd
    for (int64_t o = 0; o < m; o++) sum[o] += row[o];
  }
  fsT_round_array(FS_BF16, sum, (size_t)m);
  for (int64_t o = 0; o < m; o++) j->db[o0 + o] += sum[o];
  return 0;
}

static int bias_bf16_grad(float *db, const float *dy, int64_t N, int64_t OC) {
  int64_t parts = (OC + BIAS_PART_COLUMNS - 1) / BIAS_PART_COLUMNS;
  if (parts >= INT32_MAX) {
    fsT_seterr("linear: %lld output features are too many", (long long)OC);
    return -1;
  }
  return fsB_parallel((int)parts, bias_bf16_part, &(bias_bf16_job){db, dy, N, OC});
}

/* A float32 N x C matrix of a bfloat16 Linear as bfloat16 (h), which the
 * products take as it is instead of each rounding the float32 matrix in a
 * pass of its own: dy, for dx's product (rows read in place) and dW's, and
 * a float32 x, for the forward's and dW's.  dW's product takes dy^T as
 * pairs of rows (fsB_mat's pairs), written here too when pairs is not NULL,
 * from the rows just rounded, instead of paired by its packing from h.  In
 * parts of about H_PART_FLOATS elements of whole rows, an even count, over
 * the worker pool (a pass of 64-column strips ran at 2.5x the time). */
enum { H_PART_FLOATS = 1 << 16 };
typedef struct bf16_copy_job {
  uint16_t *h;
  uint32_t *pairs; /* or NULL */
  const float *src;
  int64_t N, C, rows; /* rows per part */
} bf16_copy_job;

FS_VECTOR_TARGET
static int bf16_copy_part(void *ctx, int part, int worker) {
  (void)worker;
  const bf16_copy_job *j = ctx;
  int64_t r0 = part * j->rows, r1 = j->N - r0 < j->rows ? j->N : r0 + j->rows, C = j->C;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = j->src + r * C;
    uint16_t *h = j->h + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; c++) h[c] = fsT_f32_to_bf16(x[c]);
    if (!j->pairs || (r % 2 == 0 && r + 1 < j->N)) continue;
    uint32_t *y = j->pairs + r / 2 * C;
    const uint16_t *lo = r % 2 ? h - C : h, *hi = h;
    if (r % 2) {
#pragma omp simd
      for (int64_t c = 0; c < C; c++) y[c] = lo[c] | (uint32_t)hi[c] << 16;
    } else { /* an odd last row: high halves 0 */
#pragma omp simd
      for (int64_t c = 0; c < C; c++) y[c] = lo[c];
    }
  }
  return 0;
}

static int bf16_copy(uint16_t *h, uint32_t *pairs, const float *src, int64_t N, int64_t C) {
  int64_t rows = C >= H_PART_FLOATS ? 2 : (H_PART_FLOATS / C + 1) / 2 * 2;
  int64_t parts = (N + rows - 1) / rows;
  if (parts >= INT32_MAX) {
    fsT_seterr("linear: %lld rows are too many", (long long)N);
    return -1;
  }
  return fsB_parallel((int)parts, bf16_copy_part, &(bf16_copy_job){h, pairs, src, N, C, rows});
}

/* a bfloat16 x is used by the GEMMs as it is */
static fsB_mat linear_input(const fs_tensor *x, int64_t C) { return (fsB_mat){x->data, x->dtype == FS_BF16, C, false}; }

/* t's gradient buffer for a product to finish into (*beta 1), or, when t
 * has no gradient yet, a fresh one left unset for the product to
 * overwrite (*beta 0), which saves zeroing it (*fresh: t's new gradient,
 * to drop if the product fails).  A bfloat16 t's gradient is float32 too. */
static int product_grad(fs_tensor *t, float **g, float *beta, fs_tensor **fresh) {
  *beta = 1.0f;
  *fresh = NULL;
  if (t && t->requires_grad && !t->grad) {
    if (!(t->grad = *fresh = fsT_new(FS_F32, FS_DEV_CPU, t->rank, t->shape))) return -1;
    *beta = 0.0f;
  }
  return fsG_grad_buf(t, g);
}

/* a fresh gradient that a failed product left unset is dropped */
static void drop_fresh(fs_tensor *t, fs_tensor *fresh) {
  if (fresh && t->grad == fresh) {
    fsT_release(fresh);
    t->grad = NULL;
  }
}

/* dx and dW are finished tile by tile as their products run
 * (fsB_gemm_bf16o): rounded then added, as a round node's backward does,
 * or, for a bfloat16 x's own gradient, rounded, added and the sum rounded
 * (fsG_low_grad_add's rule); db likewise takes its contribution rounded
 * (bias_bf16_grad), its float32 sum unrounded as a round node's backward;
 * both products read dy rounded once (bf16_copy);
 * a float32 x is read from the forward's bfloat16 copy (saved[0]) */
static int linear_bf16_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *W = n->in[1], *b = n->in[2], *fx = NULL, *fW = NULL;
  int64_t N = rows_of(x), C = W->shape[1], OC = W->shape[0];
  float *dx = NULL, *dW = NULL, *db = NULL, bx, bW;
  int rc = product_grad(x, &dx, &bx, &fx) || product_grad(W, &dW, &bW, &fW) || fsG_grad_buf(b, &db) ? -1 : 0;
  const fsB_backend *cpu = fsB_get(FS_DEV_CPU);
  size_t hbytes = (size_t)(N * OC > 0 ? N * OC : 1) * sizeof(uint16_t), pbytes = (size_t)((N + 1) / 2 * OC + 1) * sizeof(uint32_t);
  uint16_t *dyh = rc == 0 && (dx || dW) ? cpu->alloc(hbytes) : NULL;
  uint32_t *dyp = dyh && dW ? cpu->alloc(pbytes) : NULL;
  if (rc == 0 && (dx || dW) && (!dyh || (dW && !dyp))) {
    fsT_seterr("out of memory");
    rc = -1;
  }
  if (rc == 0 && dyh) rc = bf16_copy(dyh, dyp, fsT_f32(out->grad), N, OC);
  if (rc == 0 && db) rc = bias_bf16_grad(db, fsT_f32(out->grad), N, OC);
  if (rc == 0 && dx)
    rc = fsB_gemm_bf16o(false, false, N, C, OC, 1.0f, (fsB_mat){dyh, true, OC, false}, (fsB_mat){fsT_f32(W), false, C, false},
                        (fsB_out){x->dtype == FS_BF16 ? FSB_ROUNDED_SUM : FSB_ADD_ROUNDED, dx, C, bx, NULL});
  if (rc == 0 && dW)
    rc = fsB_gemm_bf16o(true, false, OC, C, N, 1.0f, (fsB_mat){dyp, true, OC, true},
                        linear_input(n->saved[0] ? n->saved[0] : x, C), (fsB_out){FSB_ADD_ROUNDED, dW, C, bW, NULL});
  if (dyh) cpu->free(dyh, hbytes);
  if (dyp) cpu->free(dyp, pbytes);
  if (rc < 0) {
    drop_fresh(x, fx);
    drop_fresh(W, fW);
  }
  return rc;
}

/* the product, bias added and rounded, is written as bfloat16 tile by
 * tile; a float32 x whose dW will be wanted is rounded once into a
 * bfloat16 copy (bf16_copy) that the product reads and the node keeps for
 * dW's, which then pairs 16-bit halves instead of rounding x again */
static fs_tensor *linear_bf16(fs_tensor *x, fs_tensor *W, fs_tensor *b) {
  int64_t N = rows_of(x), C = W->shape[1], OC = W->shape[0];
  int64_t shape[FS_MAX_RANK];
  memcpy(shape, x->shape, sizeof shape);
  shape[x->rank - 1] = OC;
  fs_tensor *out = fsT_new(FS_BF16, FS_DEV_CPU, x->rank, shape), *xh = NULL;
  if (!out) return NULL;
  if (x->dtype == FS_F32 && fsG_grad_enabled() && W->requires_grad &&
      (!(xh = fsT_new(FS_BF16, FS_DEV_CPU, x->rank, x->shape)) || bf16_copy(xh->data, NULL, x->data, N, C) < 0)) {
    fsT_release(xh);
    fsT_release(out);
    return NULL;
  }
  if (fsB_gemm_bf16o(false, true, N, OC, C, 1.0f, linear_input(xh ? xh : x, C), (fsB_mat){fsT_f32(W), false, C, false},
                     (fsB_out){FSB_BF16_BIAS, out->data, OC, 0.0f, b ? fsT_f32(b) : NULL}) < 0) {
    fsT_release(xh);
    fsT_release(out);
    return NULL;
  }
  return fsG_record(out, linear_bf16_bw, 3, (fs_tensor *const[]){x, W, b}, xh, NULL, 0, 0);
}

fs_tensor *fsG_linear(fs_tensor *x, fs_tensor *W, fs_tensor *b) {
  if (fsG_any_f64(3, (fs_tensor *const[]){x, W, b})) return fsG_linear_f64(x, W, b);
  if (linear_bf16_direct(x, W, b)) return linear_bf16(x, W, b);
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_LOW, 3, (fs_tensor *const[]){x, W, b}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_linear(lp.w[0], lp.w[1], lp.w[2]));
  fs_tensor *ins[3] = {x, W, b};
  const fsB_backend *be = fsG_check_inputs("linear", 3, ins);
  if (!be || !want_f32("linear", x)) return NULL;
  int64_t C = x->rank ? x->shape[x->rank - 1] : 1;
  if (x->rank == 0 || C != W->shape[1]) {
    fsT_seterr("mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
               (long long)rows_of(x), (long long)C, (long long)W->shape[1], (long long)W->shape[0]);
    return NULL;
  }
  int64_t shape[FS_MAX_RANK];
  memcpy(shape, x->shape, sizeof shape);
  shape[x->rank - 1] = W->shape[0];
  fs_tensor *out = new_f32(x, x->rank, shape);
  if (!out) return NULL;
  if (be->nn->linear_forward(fsT_f32(out), fsT_f32(x), fsT_f32(W), b ? fsT_f32(b) : NULL,
                             rows_of(x), C, W->shape[0]) < 0) {
    fsT_release(out);
    return NULL;
  }
  return fsG_record(out, linear_bw, 3, ins, NULL, NULL, 0, 0);
}

/* ---- embedding and positional embedding ---- */

static int embedding_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *idx = n->in[0], *W = n->in[1];
  float *dW;
  if (fsG_grad_buf(W, &dW)) return -1;
  if (dW) fsB_of(W)->nn->embedding_backward(dW, fsT_f32(out->grad), fsT_i64(idx), idx->numel, W->shape[1]);
  return 0;
}

/* A low W on the cpu: each row's gradient summed in float32 in index order
 * (embedding_bw's), then rounded into W's once, as the widened path's cast
 * node. */
static int embedding_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *idx = n->in[0], *W = n->in[1];
  float *dW, *sum;
  bool fresh;
  if (fsG_low_grad_buf(W, &dW, &fresh)) return -1;
  if (!dW) return 0;
  if (!(sum = calloc((size_t)W->numel + 1, sizeof *sum))) {
    fsT_seterr("out of memory");
    return -1;
  }
  fsB_of(out)->nn->embedding_backward(sum, fsT_f32(out->grad), fsT_i64(idx), idx->numel, W->shape[1]);
  fsG_low_grad_add(W->dtype, dW, sum, (size_t)W->numel, 1.0f, fresh);
  free(sum);
  return 0;
}

fs_tensor *fsG_embedding(fs_tensor *idx, fs_tensor *W) {
  if (fsG_any_f64(1, &W)) return fsG_embedding_f64(idx, W);
  /* a low W on the cpu: its rows copied as they are (torch's, and the
   * widened path's values) */
  bool low = fsT_is_low(W->dtype) && W->device == FS_DEV_CPU && W->data && idx->device == FS_DEV_CPU;
  fsG_low lp;
  if (!low && fsG_low_begin(&lp, FSG_AC_KEEP, 2, (fs_tensor *const[]){idx, W}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_embedding(lp.w[0], lp.w[1]));
  fs_tensor *ins[2] = {idx, W};
  const fsB_backend *be = fsG_check_inputs("embedding", 2, ins);
  if (!be) return NULL;
  if (idx->dtype != FS_I64) {
    fsT_seterr("Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got %s instead (while checking arguments for embedding)",
               fsT_dtype_name(idx->dtype));
    return NULL;
  }
  if (idx->rank >= FS_MAX_RANK) {
    fsT_seterr("embedding: input has too many dimensions");
    return NULL;
  }
  fs_tensor *hidx = fsG_on_host(idx);
  if (!hidx) return NULL;
  for (int64_t i = 0; i < idx->numel; i++)
    if (fsT_i64(hidx)[i] < 0 || fsT_i64(hidx)[i] >= W->shape[0]) {
      fsT_seterr("index out of range in self (index %lld, embedding size %lld)",
                 (long long)fsT_i64(hidx)[i], (long long)W->shape[0]);
      fsT_release(hidx);
      return NULL;
    }
  fsT_release(hidx);
  int64_t shape[FS_MAX_RANK];
  memcpy(shape, idx->shape, sizeof shape);
  shape[idx->rank] = W->shape[1];
  fs_tensor *out = low ? fsT_new(W->dtype, FS_DEV_CPU, idx->rank + 1, shape) : new_f32(W, idx->rank + 1, shape);
  if (!out) return NULL;
  size_t row = (size_t)W->shape[1] * fsT_dtype_size(W->dtype);
  for (int64_t i = 0; low && i < idx->numel; i++)
    memcpy((char *)out->data + (size_t)i * row, (const char *)W->data + (size_t)fsT_i64(idx)[i] * row, row);
  if (!low) be->nn->embedding_forward(fsT_f32(out), fsT_i64(idx), fsT_f32(W), idx->numel, W->shape[1]);
  return fsG_record(out, low ? embedding_low_bw : embedding_bw, 2, ins, NULL, NULL, 0, 0);
}

static int posemb_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *W = n->in[1];
  float *dx, *dW;
  if (fsG_grad_buf(x, &dx) || fsG_grad_buf(W, &dW)) return -1;
  int64_t D = x->shape[x->rank - 1], T = x->shape[x->rank - 2];
  fsB_of(x)->nn->posemb_backward(dx, dW, fsT_f32(out->grad), x->numel / (T * D > 0 ? T * D : 1), T, D);
  return 0;
}

/* x, W low (or one of them float32) on the cpu: x + W's first T rows a
 * block at a time (a block within one [T, D] image), rounded once.
 * Backward: each image's gradient added to W's float32 sum in image order
 * (posemb_bw's) and rounded once into a low W; x's gradient rounded into
 * it a block at a time. */
static bool posemb_low_ok(const fs_tensor *x, const fs_tensor *W) {
  return (fsT_is_low(x->dtype) || fsT_is_low(W->dtype)) && fsT_is_float(x->dtype) && fsT_is_float(W->dtype) &&
         x->device == FS_DEV_CPU && W->device == FS_DEV_CPU && x->data && W->data;
}

static int posemb_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *W = n->in[1];
  float *dx, *dW, *sum = NULL, c[FSG_LOW_BLOCK];
  bool fx = false, fw = false;
  if ((fsT_is_low(x->dtype) ? fsG_low_grad_buf(x, &dx, &fx) : fsG_grad_buf(x, &dx)) ||
      (fsT_is_low(W->dtype) ? fsG_low_grad_buf(W, &dW, &fw) : fsG_grad_buf(W, &dW)))
    return -1;
  if (dW && fsT_is_low(W->dtype) && !(sum = calloc((size_t)W->numel + 1, sizeof *sum))) {
    fsT_seterr("out of memory");
    return -1;
  }
  const float *g = fsT_f32(out->grad);
  size_t N = (size_t)x->numel, P = (size_t)(x->shape[x->rank - 2] * x->shape[x->rank - 1]);
  for (size_t at = 0, m; at < N; at += m) {
    size_t p = at % P;
    m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    if (m > P - p) m = P - p;
    float *s = sum ? sum : dW;
    for (size_t i = 0; s && i < m; i++) s[p + i] += g[at + i];
    if (dx && fsT_is_low(x->dtype)) {
      for (size_t i = 0; i < m; i++) c[i] = g[at + i] + 0.0f; /* the widened x's zeroed gradient plus g */
      fsG_low_grad_add(x->dtype, dx + at, c, m, 1.0f, fx);
    } else
      for (size_t i = 0; dx && i < m; i++) dx[at + i] += g[at + i];
  }
  if (sum) fsG_low_grad_add(W->dtype, dW, sum, (size_t)W->numel, 1.0f, fw);
  free(sum);
  return 0;
}

static fs_tensor *posemb_low(fs_tensor *x, fs_tensor *W) {
  fs_tensor *ins[2] = {x, W};
  fs_tensor *out = fsT_new(fsG_promoted(2, ins), FS_DEV_CPU, x->rank, x->shape);
  if (!out) return NULL;
  float X[FSG_LOW_BLOCK], Wb[FSG_LOW_BLOCK], Y[FSG_LOW_BLOCK];
  size_t N = (size_t)x->numel, P = (size_t)(x->shape[x->rank - 2] * x->shape[x->rank - 1]);
  for (size_t at = 0, m; at < N; at += m) {
    size_t p = at % P;
    m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    if (m > P - p) m = P - p;
    const float *xv = fsG_low_block(x, at, m, true, X), *wv = fsG_low_block(W, p, m, true, Wb);
    float *y = fsG_low_out(out, at, Y);
    for (size_t i = 0; i < m; i++) y[i] = xv[i] + wv[i];
    fsG_low_store(out, at, m, y);
  }
  return fsG_record(out, posemb_low_bw, 2, ins, NULL, NULL, 0, 0);
}

fs_tensor *fsG_posemb(fs_tensor *x, fs_tensor *W) {
  if (fsG_any_f64(2, (fs_tensor *const[]){x, W})) return fsG_posemb_f64(x, W);
  bool low = posemb_low_ok(x, W);
  fsG_low lp;
  if (!low && fsG_low_begin(&lp, FSG_AC_KEEP, 2, (fs_tensor *const[]){x, W}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_posemb(lp.w[0], lp.w[1]));
  fs_tensor *ins[2] = {x, W};
  const fsB_backend *be = fsG_check_inputs("positional embedding", 2, ins);
  if (!be || (!low && !want_f32("positional embedding", x))) return NULL;
  char s[96];
  if (x->rank < 2 || x->shape[x->rank - 1] != W->shape[1]) {
    fsT_seterr("PositionalEmbedding(%lld, %lld): expected input [..., T, %lld], got %s",
               (long long)W->shape[0], (long long)W->shape[1], (long long)W->shape[1],
               fsT_shape_str(x, s, sizeof s));
    return NULL;
  }
  int64_t T = x->shape[x->rank - 2], D = W->shape[1];
  if (T > W->shape[0]) {
    fsT_seterr("PositionalEmbedding: sequence length %lld exceeds the context %lld",
               (long long)T, (long long)W->shape[0]);
    return NULL;
  }
  if (low) return posemb_low(x, W);
  fs_tensor *out = new_f32(x, x->rank, x->shape);
  if (!out) return NULL;
  be->nn->posemb_forward(fsT_f32(out), fsT_f32(x), fsT_f32(W), x->numel / (T * D > 0 ? T * D : 1), T, D);
  return fsG_record(out, posemb_bw, 2, ins, NULL, NULL, 0, 0);
}

/* ---- layernorm ---- */

static int layernorm_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
  float *dx, *dw, *db;
  if (fsG_grad_buf(x, &dx) || fsG_grad_buf(w, &dw) || fsG_grad_buf(b, &db)) return -1;
  fsB_of(x)->nn->layernorm_backward(dx, dw, db, fsT_f32(out->grad), fsT_f32(x), fsT_f32(w),
                                    fsT_f32(n->saved[0]), fsT_f32(n->saved[1]), rows_of(x),
                                    w->numel);
  return 0;
}

fs_tensor *fsG_layernorm(fs_tensor *x, fs_tensor *w, fs_tensor *b, double eps) {
  if (fsG_any_f64(3, (fs_tensor *const[]){x, w, b})) return fsG_layernorm_f64(x, w, b, eps);
  if (fsG_layernorm_low_ok(x, w, b)) return fsG_layernorm_low(x, w, b, eps);
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 3, (fs_tensor *const[]){x, w, b}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_layernorm(lp.w[0], lp.w[1], lp.w[2], eps));
  fs_tensor *ins[3] = {x, w, b};
  const fsB_backend *be = fsG_check_inputs("layer_norm", 3, ins);
  if (!be || !want_f32("layer_norm", x)) return NULL;
  if (x->rank == 0 || x->shape[x->rank - 1] != w->numel) {
    char s[96];
    fsT_seterr("Given normalized_shape=[%lld], expected input with shape [*, %lld], but got input of size%s",
               (long long)w->numel, (long long)w->numel, fsT_shape_str(x, s, sizeof s));
    return NULL;
  }
  int64_t N = rows_of(x);
  fs_tensor *out = new_f32(x, x->rank, x->shape);
  fs_tensor *mean = new_f32(x, 1, &N), *rstd = new_f32(x, 1, &N);
  if (!out || !mean || !rstd) {
    fsT_release(out);
    fsT_release(mean);
    fsT_release(rstd);
    return NULL;
  }
  be->nn->layernorm_forward(fsT_f32(out), fsT_f32(mean), fsT_f32(rstd), fsT_f32(x),
                            fsT_f32(w), fsT_f32(b), N, w->numel, (float)eps);
  return fsG_record(out, layernorm_bw, 3, ins, mean, rstd, eps, 0);
}

/* ---- activations, dropout ---- */

/* The table of a device with kernels of its own for low-precision
 * elementwise ops, or NULL (the cpu, whose blocks are here, or a device
 * without them). */
static const fsB_low_kernels *low_kernels(const fs_tensor *x) {
  return x->device == FS_DEV_CPU || !x->data ? NULL : fsB_of(x)->low;
}

/* The output is saved (a view of out, not a copy) for tanh/sigmoid. */
static int act_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx;
  if (fsG_grad_buf(x, &dx)) return -1;
  fsB_of(x)->nn->act_backward((fsN_act)n->k, dx, fsT_f32(out->grad), fsT_f32(x), fsT_f32(out),
                              (size_t)x->numel);
  return 0;
}

/* A bfloat16 activation on the cpu loads and stores bfloat16 itself, a
 * block at a time through float32 on the stack, instead of widening the
 * whole tensor into a float32 copy and rounding a float32 result (two
 * tensors and two passes saved each way).  The arithmetic is the widened
 * path's: the float32 result rounded once; backward adds x's contribution
 * to its float32 gradient buffer as a cast node's backward does
 * (fsG_low_grad_add).
 * Only the activations whose backward reads the input, not the output.
 * A device with low kernels (fsB_low_kernels) does the same for bfloat16
 * and float16, tanh too (its derivative a function of x: the table's). */
enum { BF16_BLOCK = 1024 };

static bool act_low_direct(fsN_act act, const fs_tensor *x) {
  bool in_table = act == FSN_RELU || act == FSN_GELU || act == FSN_GELU_TANH;
  if (x->device == FS_DEV_CPU) return x->dtype == FS_BF16 && x->data && in_table;
  return fsT_is_low(x->dtype) && low_kernels(x) && (in_table || act == FSN_TANH);
}

/* GELU (either form) of a bfloat16 x: the table of its output and
 * derivative for all 65536 values (fsN_act_low_table), made once per
 * process, replaces an exp and an erf or a tanh per element (1.5 ns each;
 * a lookup in L2 costs a fraction).  ReLU stays computed: its select is
 * cheaper. */
typedef struct act_table {
  uint16_t out[65536];
  float slope[65536];
} act_table;

static act_table *act_tables[FSN_GELU_TANH + 1];
static pthread_mutex_t act_tables_lock = PTHREAD_MUTEX_INITIALIZER;

/* act's table, made on first use; NULL for ReLU, or when there is no
 * memory for it (the kernels then run per element) */
static const act_table *act_table_of(fsN_act act) {
  if (act != FSN_GELU && act != FSN_GELU_TANH) return NULL;
  pthread_mutex_lock(&act_tables_lock);
  act_table *t = act_tables[act];
  if (!t && (t = malloc(sizeof *t)) && fsN_act_low_table(act, FS_BF16, t->out, t->slope) < 0) {
    free(t);
    t = NULL;
  }
  act_tables[act] = t;
  pthread_mutex_unlock(&act_tables_lock);
  return t;
}

/* One bfloat16 activation, forward (dx NULL) or backward, in parts of
 * ACT_PART_BLOCKS blocks (more for a tensor of over 2^31 parts) handed to
 * the worker pool (fsB_parallel): at about a nanosecond an element, a part
 * outweighs handing it out.  Elementwise, so the parts' bounds change no
 * bits. */
enum { ACT_PART_BLOCKS = 16 };
typedef struct act_bf16_job {
  fsN_act act;
  const act_table *table; /* or NULL: computed per element */
  const uint16_t *xs;
  uint16_t *ys;
  float *dx;
  bool dx_fresh; /* x's first gradient (fsG_low_grad_buf): written, not read */
  const float *dout;
  size_t total, per_part;
} act_bf16_job;

static int act_bf16_part(void *ctx, int part, int worker) {
  (void)worker;
  const act_bf16_job *j = ctx;
  size_t at = (size_t)part * j->per_part, end = at + j->per_part;
  float wide[BF16_BLOCK];
  const act_table *t = j->table;
  for (end = end < j->total ? end : j->total; at < end; at += BF16_BLOCK) {
    size_t m = end - at < BF16_BLOCK ? end - at : BF16_BLOCK;
    const uint16_t *x = j->xs + at;
    if (j->dx) { /* the block's contribution as fsN_act_backward gives it (0 + dout * factor), then
                    added to x's gradient as every gradient reaching a low tensor is (fsG_low_grad_add) */
      const float *dout = j->dout + at;
      if (t)
        for (size_t i = 0; i < m; i++) wide[i] = 0.0f + dout[i] * t->slope[x[i]];
      else {
        float xw[BF16_BLOCK];
        fsT_convert(FS_F32, xw, FS_BF16, x, m);
        memset(wide, 0, m * sizeof *wide);
        fsN_act_backward(j->act, wide, dout, xw, NULL, m);
      }
      fsG_low_grad_add(FS_BF16, j->dx + at, wide, m, 1.0f, j->dx_fresh);
      continue;
    }
    if (t) {
      for (size_t i = 0; i < m; i++) j->ys[at + i] = t->out[x[i]];
      continue;
    }
    fsT_convert(FS_F32, wide, FS_BF16, x, m);
    fsN_act_forward(j->act, wide, wide, m);
    fsT_convert(FS_BF16, j->ys + at, FS_F32, wide, m);
  }
  return 0;
}

static void act_bf16_run(act_bf16_job *j) {
  size_t blocks = (j->total + BF16_BLOCK - 1) / BF16_BLOCK, per = ACT_PART_BLOCKS;
  if (blocks / per >= INT32_MAX) per = blocks / (INT32_MAX - 1) + 1;
  j->per_part = per * BF16_BLOCK;
  fsB_parallel((int)((blocks + per - 1) / per), act_bf16_part, j);
}

static int act_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  const fsB_low_kernels *k = low_kernels(x);
  fsN_act act = (fsN_act)n->k;
  size_t N = (size_t)x->numel;
  float *dx;
  bool fresh;
  if (fsG_low_grad_buf(x, &dx, &fresh)) return -1;
  if (dx && k) return k->act_backward(act, x->dtype, N, dx, fresh, fsT_f32(out->grad), x->data);
  if (dx) act_bf16_run(&(act_bf16_job){act, act_table_of(act), x->data, NULL, dx, fresh, fsT_f32(out->grad), N, 0});
  return 0;
}

static fs_tensor *act_low(fsN_act act, fs_tensor *x) {
  const fsB_low_kernels *k = low_kernels(x);
  size_t N = (size_t)x->numel;
  fs_tensor *out = fsT_new(x->dtype, x->device, x->rank, x->shape);
  if (!out) return NULL;
  if (!k) act_bf16_run(&(act_bf16_job){act, act_table_of(act), x->data, out->data, NULL, false, NULL, N, 0});
  else if (k->act_forward(act, x->dtype, N, x->data, out->data) < 0) {
    fsT_release(out);
    return NULL;
  }
  return fsG_record(out, act_low_bw, 1, &x, NULL, NULL, 0, act);
}

fs_tensor *fsG_act(fsN_act act, fs_tensor *x) {
  if (fsG_any_f64(1, &x)) return fsG_act_f64(act, x);
  if (act_low_direct(act, x)) return fsG_check_inputs("activation", 1, &x) ? act_low(act, x) : NULL;
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_act(act, lp.w[0]));
  const fsB_backend *be = fsG_check_inputs("activation", 1, &x);
  if (!be || !want_f32("activation", x)) return NULL;
  fs_tensor *out = new_f32(x, x->rank, x->shape);
  if (!out) return NULL;
  be->nn->act_forward(act, fsT_f32(out), fsT_f32(x), (size_t)x->numel);
  return fsG_record(out, act_bw, 1, &x, NULL, NULL, 0, act);
}

static int dropout_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx;
  if (fsG_grad_buf(x, &dx)) return -1;
  fsB_of(x)->nn->dropout_backward(dx, fsT_f32(out->grad), (size_t)x->numel, (float)n->s, n->key);
  return 0;
}

/* Dropout of a low x on the cpu, a block at a time (the FSG_LOW_BLOCK
 * path): nn.h's rule, element i kept iff u(key, i) >= p and scaled by
 * 1/(1-p) (0 when p == 1), applied here because its kernels count i from
 * the pointer they get.  Forward rounds x s (the widened path's value);
 * backward adds the kept elements' g s rounded (fsG_low_grad_add). */
static float dropout_low_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

static int dropout_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx, c[FSG_LOW_BLOCK], p = (float)n->s, sc = dropout_low_scale(p);
  bool fresh;
  if (fsG_low_grad_buf(x, &dx, &fresh)) return -1;
  const float *g = fsT_f32(out->grad);
  for (size_t at = 0, N = (size_t)x->numel; dx && at < N; at += FSG_LOW_BLOCK) {
    size_t m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    for (size_t i = 0; i < m; i++) c[i] = fsR_u01(n->key, at + i) >= p ? 0.0f + g[at + i] * sc : 0.0f;
    fsG_low_grad_add(x->dtype, dx + at, c, m, 1.0f, fresh);
  }
  return 0;
}

static fs_tensor *dropout_low(fs_tensor *x, double p, uint64_t key) {
  fs_tensor *out = fsT_new(x->dtype, FS_DEV_CPU, x->rank, x->shape);
  if (!out) return NULL;
  float X[FSG_LOW_BLOCK], Y[FSG_LOW_BLOCK], pf = (float)p, sc = dropout_low_scale(pf);
  for (size_t at = 0, N = (size_t)x->numel; at < N; at += FSG_LOW_BLOCK) {
    size_t m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    const float *v = fsG_low_block(x, at, m, true, X);
    for (size_t i = 0; i < m; i++) Y[i] = fsR_u01(key, at + i) >= pf ? v[i] * sc : 0.0f;
    fsG_low_store(out, at, m, Y);
  }
  out = fsG_record(out, dropout_low_bw, 1, &x, NULL, NULL, p, 0);
  if (out && out->node) out->node->key = key;
  return out;
}

fs_tensor *fsG_dropout(fs_tensor *x, double p, uint64_t key) {
  if (fsG_any_f64(1, &x)) return fsG_dropout_f64(x, p, key);
  if (fsT_is_low(x->dtype) && x->device == FS_DEV_CPU && x->data) return dropout_low(x, p, key);
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_dropout(lp.w[0], p, key));
  const fsB_backend *be = fsG_check_inputs("dropout", 1, &x);
  if (!be || !want_f32("dropout", x)) return NULL;
  fs_tensor *out = new_f32(x, x->rank, x->shape);
  if (!out) return NULL;
  be->nn->dropout_forward(fsT_f32(out), fsT_f32(x), (size_t)x->numel, (float)p, key);
  out = fsG_record(out, dropout_bw, 1, &x, NULL, NULL, p, 0);
  if (out && out->node) out->node->key = key;
  return out;
}

/* ---- attention ---- */

static int attention_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx;
  if (fsG_grad_buf(x, &dx)) return -1;
  if (!dx) return 0;
  return fsB_of(x)->nn->attention_backward(dx, fsT_f32(out->grad), fsT_f32(x),
                                           fsT_f32(n->saved[0]), x->shape[0], x->shape[1],
                                           x->shape[2] / 3, n->k);
}

/* Attention under bfloat16 autocast on a bfloat16 qkv on the cpu, as one
 * node with a bfloat16 output (as linear_bf16): the general path widens
 * qkv into a float32 copy and wraps the float32 attention in cast nodes,
 * whose backward zeroes, adds and rounds qkv's gradient in passes of their
 * own.  The arithmetic is the general path's (fsN_attention_bf16_*). */
static bool attention_bf16_direct(const fs_tensor *qkv, int64_t heads) {
  return fsG_autocast() == FS_BF16 && qkv->dtype == FS_BF16 && qkv->device == FS_DEV_CPU && qkv->data &&
         qkv->rank == 3 && qkv->shape[2] % 3 == 0 && heads > 0 && (qkv->shape[2] / 3) % heads == 0;
}

static int attention_bf16_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *fresh;
  float *dx, beta;
  if (product_grad(x, &dx, &beta, &fresh)) return -1;
  if (!dx) return 0;
  if (fsN_attention_bf16_backward(dx, beta == 0, fsT_f32(out->grad), x->data, fsT_f32(n->saved[0]), x->shape[0],
                                  x->shape[1], x->shape[2] / 3, n->k) < 0) {
    drop_fresh(x, fresh);
    return -1;
  }
  return 0;
}

static fs_tensor *attention_bf16(fs_tensor *qkv, int64_t heads) {
  int64_t B = qkv->shape[0], T = qkv->shape[1], C = qkv->shape[2] / 3;
  int64_t oshape[3] = {B, T, C}, ashape[4] = {B, heads, T, T};
  fs_tensor *out = fsT_new(FS_BF16, FS_DEV_CPU, 3, oshape), *att = fsT_new(FS_F32, FS_DEV_CPU, 4, ashape);
  if (!out || !att || fsN_attention_bf16_forward(out->data, fsT_f32(att), qkv->data, B, T, C, heads) < 0) {
    fsT_release(out);
    fsT_release(att);
    return NULL;
  }
  return fsG_record(out, attention_bf16_bw, 1, &qkv, att, NULL, 0, heads);
}

fs_tensor *fsG_attention(fs_tensor *qkv, int64_t heads) {
  if (fsG_any_f64(1, &qkv)) return fsG_attention_f64(qkv, heads);
  if (attention_bf16_direct(qkv, heads))
    return fsG_check_inputs("attention", 1, &qkv) ? attention_bf16(qkv, heads) : NULL;
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_LOW, 1, &qkv))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_attention(lp.w[0], heads));
  const fsB_backend *be = fsG_check_inputs("attention", 1, &qkv);
  if (!be || !want_f32("attention", qkv)) return NULL;
  if (qkv->rank != 3 || qkv->shape[2] % 3 || heads <= 0 || (qkv->shape[2] / 3) % heads) {
    char s[96];
    fsT_seterr("attention: expected input [B, T, 3*C] with C divisible by %lld heads, got %s",
               (long long)heads, fsT_shape_str(qkv, s, sizeof s));
    return NULL;
  }
  int64_t B = qkv->shape[0], T = qkv->shape[1], C = qkv->shape[2] / 3;
  int64_t oshape[3] = {B, T, C}, ashape[4] = {B, heads, T, T};
  fs_tensor *out = new_f32(qkv, 3, oshape), *att = new_f32(qkv, 4, ashape);
  if (!out || !att) {
    fsT_release(out);
    fsT_release(att);
    return NULL;
  }
  if (be->nn->attention_forward(fsT_f32(out), fsT_f32(att), fsT_f32(qkv), B, T, C, heads) < 0) {
    fsT_release(out);
    fsT_release(att);
    return NULL;
  }
  return fsG_record(out, attention_bw, 1, &qkv, att, NULL, 0, heads);
}

/* ---- reshape ---- */

/* A float32 tensor's first gradient contribution, the whole gradient gout
 * of a node's output (of t's numel), becomes its gradient.  An intermediate
 * t takes gout's buffer itself (as a view of t's shape) when nothing else
 * holds it: the output drops its gradient after its backward, and t's lives
 * only until t's own backward; otherwise gout is copied into a fresh
 * buffer.  No pass or one instead of zeroing a buffer and adding gout to
 * it.  1 done, 0 not this case, -1 out of memory. */
static int grad_first(fs_tensor *t, fs_tensor *gout) {
  if (!t || !t->requires_grad || t->grad || t->dtype != FS_F32 || t->numel != gout->numel) return 0;
  if (t->node && gout->refcount == 1 && (!gout->base || gout->base->refcount == 1))
    return (t->grad = fsT_view(gout, t->rank, t->shape)) ? 1 : -1;
  float *d;
  bool fresh;
  if (fsG_grad_whole(t, (size_t)t->numel, &d, &fresh) < 0) return -1;
  fsB_of(t)->copy(d, fsT_f32(gout), (size_t)t->numel * sizeof *d);
  return 1;
}

static int reshape_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  if (x->dtype == FS_F64) return fsG_add_grad_f64(x, out->grad);
  int first = grad_first(x, out->grad);
  if (first) return first < 0 ? -1 : 0;
  float *dx;
  if (fsG_grad_buf(x, &dx)) return -1;
  fsB_of(x)->axpy((size_t)x->numel, 1.0f, fsT_f32(out->grad), dx);
  return fsG_round_grad(x); /* a view of a low tensor accumulates in its type */
}

fs_tensor *fsG_reshape(fs_tensor *x, int rank, const int64_t *shape) {
  fs_tensor *out = fsT_view(x, rank, shape);
  return out ? fsG_record(out, reshape_bw, 1, &x, NULL, NULL, 0, 0) : NULL;
}

/* ---- arithmetic ---- */

/* The shape of a op b when one side has it already (equal shapes, or a
 * one-element side of no higher rank): the fast paths below.  NULL when the
 * shapes need general broadcasting (ops_grad.c). */
static const fs_tensor *same_or_scalar(const fs_tensor *a, const fs_tensor *b) {
  if (fsT_same_shape(a, b)) return a;
  if (b->numel == 1 && b->rank <= a->rank) return a;
  if (a->numel == 1 && a->rank <= b->rank) return b;
  return NULL;
}

/* a and b expanded to their broadcast shape (copies), for the integer and
 * comparison paths, which then run elementwise; -1 + torch's message. */
static int expand_both(fs_tensor *a, fs_tensor *b, fs_tensor **ea, fs_tensor **eb) {
  int64_t shape[FS_MAX_RANK];
  int rank;
  *ea = *eb = NULL;
  if (fsU_broadcast_shape(a->rank, a->shape, b->rank, b->shape, &rank, shape) < 0) return -1;
  if (!(*ea = fsG_expand(a, rank, shape)) || !(*eb = fsG_expand(b, rank, shape))) {
    fsT_release(*ea);
    return -1;
  }
  return 0;
}

/* d(a op b) into the gradient of one side: the full-size contribution g
 * (already scaled) is summed when that side is a broadcast scalar. */
static void accumulate(const fsB_backend *be, float *d, const fs_tensor *side, const float *g,
                       size_t n, float sign) {
  if ((size_t)side->numel == n) be->axpy(n, sign, g, d);
  else d[0] += sign * (float)be->sum(n, g);
}

static int binary_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *a = n->in[0], *b = n->in[1];
  const fsB_backend *be = fsB_of(out);
  size_t N = (size_t)out->numel, sa = a->numel == out->numel, sb = b->numel == out->numel;
  const float *g = fsT_f32(out->grad), *av = fsT_f32(a), *bv = fsT_f32(b);
  float *da, *db;
  if (n->k == FSB_ADD || n->k == FSB_SUB) { /* a (and b of a sum) first: a + a adds the second */
    int fa = grad_first(a, out->grad), fb = fa < 0 || n->k == FSB_SUB ? 0 : grad_first(b, out->grad);
    if (fa < 0 || fb < 0 || fsG_grad_buf(fa ? NULL : a, &da) || fsG_grad_buf(fb ? NULL : b, &db)) return -1;
    if (da) accumulate(be, da, a, g, N, 1.0f);
    if (db) accumulate(be, db, b, g, N, n->k == FSB_SUB ? -1.0f : 1.0f);
    return 0;
  }
  /* a fresh gradient is written, not added to: da = g b or g / b, db = g a
   * (b's of a quotient is added to a zeroed one); a * a has one buffer */
  bool fresh_a, fresh_b = false;
  if (fsG_grad_whole(a, N, &da, &fresh_a) ||
      (b == a ? (db = da, 0) : n->k == FSB_MUL ? fsG_grad_whole(b, N, &db, &fresh_b) : fsG_grad_buf(b, &db)))
    return -1;
  if (fresh_a) be->binary(n->k == FSB_MUL ? FSB_MUL : FSB_DIV, N, g, 1, bv, sb, da);
  if (fresh_b) be->binary(FSB_MUL, N, g, 1, av, sa, db);
  if (fresh_a) da = NULL;
  if (fresh_b) db = NULL;
  if (!da && !db) return 0;
  float *tmp = be->alloc(N * sizeof *tmp + 1);
  if (!tmp) {
    fsT_seterr("out of memory");
    return -1;
  }
  if (n->k == FSB_MUL) { /* da = g b, db = g a */
    if (da) { be->binary(FSB_MUL, N, g, 1, bv, sb, tmp); accumulate(be, da, a, tmp, N, 1.0f); }
    if (db) { be->binary(FSB_MUL, N, g, 1, av, sa, tmp); accumulate(be, db, b, tmp, N, 1.0f); }
  } else { /* FSB_DIV: da = g / b, db = -g a / b^2 = -(g / b) * out */
    be->binary(FSB_DIV, N, g, 1, bv, sb, tmp);
    if (da) accumulate(be, da, a, tmp, N, 1.0f);
    if (db) {
      be->binary(FSB_MUL, N, tmp, 1, fsT_f32(out), 1, tmp);
      accumulate(be, db, b, tmp, N, -1.0f);
    }
  }
  be->free(tmp, N * sizeof *tmp + 1);
  return 0;
}

static fs_tensor *binary_i64(fsB_binop op, fs_tensor *a, fs_tensor *b, const fs_tensor *shape) {
  fs_tensor *ha = fsG_on_host(a), *hb = ha ? fsG_on_host(b) : NULL;
  fs_tensor *out = hb ? fsT_new(FS_I64, FS_DEV_CPU, shape->rank, shape->shape) : NULL;
  if (out) {
    size_t sa = a->numel == out->numel, sb = b->numel == out->numel;
    for (int64_t i = 0; i < out->numel; i++) {
      /* unsigned: wraps on overflow as torch does, without UB */
      uint64_t x = (uint64_t)fsT_i64(ha)[i * sa], y = (uint64_t)fsT_i64(hb)[i * sb];
      fsT_i64(out)[i] = (int64_t)(op == FSB_ADD ? x + y : op == FSB_SUB ? x - y : x * y);
    }
  }
  fsT_release(ha);
  fsT_release(hb);
  return fsG_to_dev(out, shape->device);
}

/* A bool tensor as int64 (new reference; other dtypes: t itself): torch
 * promotes bool to the other operand's type in arithmetic and reductions. */
fs_tensor *fsG_unbool(fs_tensor *t) { return fsT_to_dtype(t, t->dtype == FS_BOOL ? FS_I64 : t->dtype); }

/* ---- binary ops on low-precision tensors, loading and storing them
 * directly (autograd_int.h's FSG_LOW_BLOCK path on the cpu, the device's
 * fsB_low_kernels elsewhere) ---- */

/* Same shapes or a scalar side, float inputs (at least one low; bfloat16
 * with float16 gives float32, as fsG_promoted, on the cpu only: a device's
 * low kernels take one low type), on the cpu or a device with low kernels,
 * and two distinct tensors: a op a through fsG_low_begin widens a twice and
 * rounds its gradient after each side. */
static bool binary_low_direct(const fs_tensor *a, const fs_tensor *b) {
  if (a == b || !fsT_is_float(a->dtype) || !fsT_is_float(b->dtype)) return false;
  if (!fsT_is_low(a->dtype) && !fsT_is_low(b->dtype)) return false;
  if (a->device != b->device || !a->data || !b->data || !same_or_scalar(a, b)) return false;
  if (a->device == FS_DEV_CPU) return true;
  return !(fsT_is_low(a->dtype) && fsT_is_low(b->dtype) && a->dtype != b->dtype) && low_kernels(a);
}

/* Side i's float32 contribution to its gradient over block [at, at + m)
 * (times *sign), as binary_bw computes it: g itself, g b, g a, g / b, or
 * (g / b) out with out = a / b recomputed (the float32 result the widened
 * path saved). */
static const float *binary_low_part(const fsB_backend *be, fsB_binop op, int i, size_t m, const float *g,
                                    const float *A, size_t sa, const float *B, size_t sb, float *tmp,
                                    float *quot, float *sign) {
  *sign = op == FSB_SUB && i == 1 ? -1.0f : 1.0f;
  if (op == FSB_ADD || op == FSB_SUB) return g;
  if (op == FSB_MUL) {
    be->binary(FSB_MUL, m, g, 1, i == 0 ? B : A, i == 0 ? sb : sa, tmp);
    return tmp;
  }
  be->binary(FSB_DIV, m, g, 1, B, sb, tmp);
  if (i == 0) return tmp;
  be->binary(FSB_DIV, m, A, sa, B, sb, quot);
  be->binary(FSB_MUL, m, tmp, 1, quot, 1, tmp);
  *sign = -1.0f;
  return tmp;
}

/* A scalar side's gradient: its contribution summed over the whole
 * output (binary_bw's accumulate), from widened copies of both sides; the
 * one element added on the host (d may be a device's). */
static int binary_low_scalar_bw(const fsB_backend *be, fsB_binop op, int i, fs_tensor *a, fs_tensor *b,
                                const float *g, size_t N, float *d, bool fresh) {
  fs_tensor *wa = fsT_to_dtype(a, FS_F32), *wb = wa ? fsT_to_dtype(b, FS_F32) : NULL;
  float *tmp = wb ? be->alloc(2 * N * sizeof *tmp + 1) : NULL;
  int rc = -1;
  if (tmp) {
    float sign, d0 = 0.0f;
    const float *c = binary_low_part(be, op, i, N, g, fsT_f32(wa), wa->numel == (int64_t)N, fsT_f32(wb),
                                     wb->numel == (int64_t)N, tmp, tmp + N, &sign);
    float s = sign * (float)be->sum(N, c);
    if ((rc = fresh ? 0 : be->to_host(&d0, d, sizeof d0)) == 0) {
      if (fsT_is_low((i ? b : a)->dtype)) fsG_low_grad_add((i ? b : a)->dtype, &d0, &s, 1, 1.0f, fresh);
      else d0 += s;
      rc = be->from_host(d, &d0, sizeof d0);
    }
    be->free(tmp, 2 * N * sizeof *tmp + 1);
  } else if (wb)
    fsT_seterr("out of memory");
  fsT_release(wa);
  fsT_release(wb);
  return rc;
}

/* The blocks of a direct binary op, forward (out) or backward (g), go to
 * the worker pool (fsB_parallel) in parts of BINARY_LOW_PART_BLOCKS: each
 * block is computed as before, elementwise, so the split changes no bits. */
enum { BINARY_LOW_PART_BLOCKS = 16 };
typedef struct binary_low_job {
  const fsB_backend *be;
  fsB_binop op;
  fs_tensor *a, *b, *out; /* out: forward */
  const float *g;         /* backward: the output's gradient; d[i] side i's, or NULL */
  float *d[2];
  bool whole[2], fresh[2];
  size_t N;
} binary_low_job;

static int binary_low_blocks(void *ctx, int part, int worker) {
  (void)worker;
  const binary_low_job *j = ctx;
  const fsB_backend *be = j->be;
  size_t at = (size_t)part * BINARY_LOW_PART_BLOCKS * FSG_LOW_BLOCK;
  size_t end = j->N - at < BINARY_LOW_PART_BLOCKS * FSG_LOW_BLOCK ? j->N : at + BINARY_LOW_PART_BLOCKS * FSG_LOW_BLOCK;
  float A[FSG_LOW_BLOCK], B[FSG_LOW_BLOCK], tmp[FSG_LOW_BLOCK], quot[FSG_LOW_BLOCK];
  fs_tensor *side[2] = {j->a, j->b};
  for (; at < end; at += FSG_LOW_BLOCK) {
    size_t m = end - at < FSG_LOW_BLOCK ? end - at : FSG_LOW_BLOCK;
    const float *av = fsG_low_block(j->a, at, m, j->whole[0], A), *bv = fsG_low_block(j->b, at, m, j->whole[1], B);
    if (j->out) {
      float *y = fsG_low_out(j->out, at, tmp);
      be->binary(j->op, m, av, j->whole[0], bv, j->whole[1], y);
      fsG_low_store(j->out, at, m, y);
      continue;
    }
    for (int i = 0; i < 2; i++) {
      if (!j->d[i] || !j->whole[i]) continue;
      float sign;
      const float *c = binary_low_part(be, j->op, i, m, j->g + at, av, j->whole[0], bv, j->whole[1], tmp, quot, &sign);
      if (fsT_is_low(side[i]->dtype)) fsG_low_grad_add(side[i]->dtype, j->d[i] + at, c, m, sign, j->fresh[i]);
      else if (j->fresh[i]) memcpy(j->d[i] + at, c, m * sizeof *c);
      else be->axpy(m, sign, c, j->d[i] + at);
    }
  }
  return 0;
}

/* A device's kernels (fsB_low_kernels) over the whole op at once. */
static int binary_low_device(const fsB_low_kernels *k, const binary_low_job *j) {
  const fs_tensor *a = j->a, *b = j->b;
  if (j->out)
    return k->binary(j->op, j->N, a->dtype, a->data, j->whole[0], b->dtype, b->data, j->whole[1], j->out->dtype,
                     j->out->data);
  for (int i = 0; i < 2; i++)
    if (j->d[i] && j->whole[i] &&
        k->binary_backward(j->op, i, j->N, j->g, a->dtype, a->data, j->whole[0], b->dtype, b->data, j->whole[1],
                           (i ? b : a)->dtype, j->d[i], j->fresh[i]) < 0)
      return -1;
  return 0;
}

static int binary_low_run(binary_low_job *j) {
  const fsB_low_kernels *k = low_kernels(j->a);
  if (k) return binary_low_device(k, j);
  size_t per = BINARY_LOW_PART_BLOCKS * FSG_LOW_BLOCK, parts = (j->N + per - 1) / per;
  if (parts >= INT32_MAX) {
    fsT_seterr("arithmetic: %zu elements are too many", j->N);
    return -1;
  }
  return fsB_parallel((int)parts, binary_low_blocks, j);
}

static int binary_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *side[2] = {n->in[0], n->in[1]};
  fsB_binop op = (fsB_binop)n->k;
  const fsB_backend *be = fsB_of(out);
  size_t N = (size_t)out->numel;
  bool whole[2] = {side[0]->numel == out->numel, side[1]->numel == out->numel}, fresh[2] = {false, false};
  const float *g = fsT_f32(out->grad);
  float *d[2] = {NULL, NULL};
  /* float32 sides take their first gradient as binary_bw does (shared or
   * written, not added to zeros); low sides always add, as a cast node does */
  for (int i = 0; i < 2; i++) {
    fs_tensor *x = side[i];
    bool f32 = x->dtype == FS_F32 && whole[i];
    if (f32 && (op == FSB_ADD || (op == FSB_SUB && i == 0))) {
      int first = grad_first(x, out->grad);
      if (first < 0) return -1;
      if (first) continue;
    }
    if (fsT_is_low(x->dtype) ? fsG_low_grad_buf(x, &d[i], &fresh[i])
        : f32 && (op == FSB_MUL || (op == FSB_DIV && i == 0)) ? fsG_grad_whole(x, N, &d[i], &fresh[i])
                                                               : fsG_grad_buf(x, &d[i]))
      return -1;
    if (d[i] && !whole[i] && binary_low_scalar_bw(be, op, i, side[0], side[1], g, N, d[i], fresh[i]) < 0) return -1;
  }
  if ((d[0] && whole[0]) || (d[1] && whole[1]))
    return binary_low_run(&(binary_low_job){be, op, side[0], side[1], NULL, g, {d[0], d[1]}, {whole[0], whole[1]},
                                            {fresh[0], fresh[1]}, N});
  return 0;
}

static fs_tensor *binary_low(fsB_binop op, fs_tensor *a, fs_tensor *b) {
  if (!fsG_check_inputs("arithmetic", 2, (fs_tensor *const[]){a, b})) return NULL;
  const fs_tensor *shape = same_or_scalar(a, b);
  fs_tensor *out = fsT_new(fsG_promoted(2, (fs_tensor *const[]){a, b}), a->device, shape->rank, shape->shape);
  if (!out) return NULL;
  binary_low_job j = {fsB_of(out), op, a, b, out, NULL, {NULL, NULL}, {a->numel == out->numel, b->numel == out->numel},
                      {false, false}, (size_t)out->numel};
  if (binary_low_run(&j) < 0) {
    fsT_release(out);
    return NULL;
  }
  return fsG_record(out, binary_low_bw, 2, (fs_tensor *const[]){a, b}, NULL, NULL, 0, op);
}

fs_tensor *fsG_binary(fsB_binop op, fs_tensor *a, fs_tensor *b) {
  if (a->dtype == FS_BOOL || b->dtype == FS_BOOL) {
    fs_tensor *ia = fsG_unbool(a), *ib = ia ? fsG_unbool(b) : NULL;
    fs_tensor *out = ib ? fsG_binary(op, ia, ib) : NULL;
    fsT_release(ia);
    fsT_release(ib);
    return out;
  }
  if (fsG_any_f64(2, (fs_tensor *const[]){a, b})) return fsG_binary_f64((fsU_binary)op, a, b);
  if (binary_low_direct(a, b)) return binary_low(op, a, b);
  if (!same_or_scalar(a, b) && (fsT_is_low(a->dtype) || fsT_is_low(b->dtype)))
    return fsG_binary_op((fsU_binary)op, a, b); /* broadcasting: its own low path */
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 2, (fs_tensor *const[]){a, b}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_binary(op, lp.w[0], lp.w[1]));
  fs_tensor *ins[2] = {a, b};
  const fsB_backend *be = fsG_check_inputs("arithmetic", 2, ins);
  if (!be) return NULL;
  const fs_tensor *shape = same_or_scalar(a, b);
  if (!shape && (a->dtype != FS_I64 || b->dtype != FS_I64 || op == FSB_DIV))
    return fsG_binary_op((fsU_binary)op, a, b);
  if (!shape) {
    fs_tensor *ea, *eb;
    if (expand_both(a, b, &ea, &eb) < 0) return NULL;
    fs_tensor *out = binary_i64(op, ea, eb, ea);
    fsT_release(ea);
    fsT_release(eb);
    return out;
  }
  if (a->dtype == FS_I64 && b->dtype == FS_I64 && op != FSB_DIV) return binary_i64(op, a, b, shape);
  fs_tensor *fa = fsT_to_dtype(a, FS_F32), *fb = fa ? fsT_to_dtype(b, FS_F32) : NULL;
  fs_tensor *out = fb ? fsT_new(FS_F32, shape->device, shape->rank, shape->shape) : NULL;
  if (out) {
    size_t n = (size_t)out->numel;
    be->binary(op, n, fsT_f32(fa), fa->numel == out->numel, fsT_f32(fb), fb->numel == out->numel,
               fsT_f32(out));
    fs_tensor *fins[2] = {fa, fb};
    out = fsG_record(out, binary_bw, 2, fins, NULL, NULL, 0, op);
  }
  fsT_release(fa);
  fsT_release(fb);
  return out;
}

fs_tensor *fsG_binary_scalar(fsB_binop op, fs_tensor *a, double s, bool s_is_int, bool scalar_first) {
  if (a->dtype == FS_F64) return fsG_binary_scalar_f64(op, a, s, scalar_first);
  fs_tensor *st = scalar_on(s_is_int ? FS_I64 : FS_F32, a->device, s);
  if (!st) return NULL;
  fs_tensor *out = scalar_first ? fsG_binary(op, st, a) : fsG_binary(op, a, st);
  fsT_release(st);
  return out;
}

fs_tensor *fsG_neg(fs_tensor *x) {
  return fsG_binary_scalar(FSB_MUL, x, -1, x->dtype == FS_I64, false);
}

/* ---- reductions ---- */

static int sum_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx;
  if (fsG_grad_buf(x, &dx)) return -1;
  double g;
  if (fsG_item(out->grad, &g) < 0) return -1;
  fs_tensor *gs = scalar_on(FS_F32, x->device, (float)g * (float)n->s); /* s = 1 for sum, 1/N for mean */
  if (!gs) return -1;
  fsB_of(x)->binary(FSB_ADD, (size_t)x->numel, dx, 1, fsT_f32(gs), 0, dx);
  fsT_release(gs);
  return 0;
}

/* sum / mean of a low x on the cpu, read a block at a time (the
 * FSG_LOW_BLOCK path): one double sum in element order, as be->sum sums the
 * widened copy, rounded once; backward adds the rounded contribution
 * (fsG_low_grad_add) a block at a time. */
static int reduce_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx, c[FSG_LOW_BLOCK];
  bool fresh;
  double g;
  if (fsG_low_grad_buf(x, &dx, &fresh) || (dx && fsG_item(out->grad, &g) < 0)) return -1;
  for (size_t k = 0; dx && k < FSG_LOW_BLOCK; k++) c[k] = 0.0f + (float)g * (float)n->s; /* s = 1 for sum, 1/N for mean */
  for (size_t at = 0, N = (size_t)x->numel; dx && at < N; at += FSG_LOW_BLOCK)
    fsG_low_grad_add(x->dtype, dx + at, c, N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK, 1.0f, fresh);
  return 0;
}

static fs_tensor *reduce_low(fs_tensor *x, bool mean) {
  fs_tensor *out = fsT_new(x->dtype, FS_DEV_CPU, 0, NULL);
  if (!out) return NULL;
  float X[FSG_LOW_BLOCK];
  double s = 0;
  for (size_t at = 0, N = (size_t)x->numel; at < N; at += FSG_LOW_BLOCK) {
    size_t m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    const float *v = fsG_low_block(x, at, m, true, X);
    for (size_t i = 0; i < m; i++) s += v[i];
  }
  float r = (float)(mean ? s / (double)x->numel : s);
  fsG_low_store(out, 0, 1, &r);
  return fsG_record(out, reduce_low_bw, 1, &x, NULL, NULL, mean ? 1.0 / (double)x->numel : 1.0, 0);
}

static fs_tensor *reduce(fs_tensor *x, bool mean) {
  if (fsG_any_f64(1, &x)) return fsG_reduce_f64(x, mean);
  if (fsT_is_low(x->dtype) && x->device == FS_DEV_CPU && x->data) return reduce_low(x, mean);
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : reduce(lp.w[0], mean));
  const fsB_backend *be = fsG_check_inputs(mean ? "mean" : "sum", 1, &x);
  if (!be) return NULL;
  if (x->dtype == FS_I64 || x->dtype == FS_BOOL) {
    if (mean) {
      fsT_seterr("mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: %s",
                 x->dtype == FS_BOOL ? "Bool" : "Long");
      return NULL;
    }
    fs_tensor *hx = fsG_on_host(x);
    if (!hx) return NULL;
    uint64_t s = 0;
    for (int64_t i = 0; i < x->numel; i++) s += (uint64_t)(int64_t)fsT_get(hx, i); /* bool sums to int64 */
    fsT_release(hx);
    return scalar_on(FS_I64, x->device, (double)(int64_t)s);
  }
  fs_tensor *fx = fsT_to_dtype(x, FS_F32);
  fs_tensor *out = fx ? fsT_new(FS_F32, x->device, 0, NULL) : NULL;
  if (out) {
    double s = be->sum((size_t)fx->numel, fsT_f32(fx));
    if (write_scalar(out, (float)(mean ? s / (double)fx->numel : s)) < 0) {
      fsT_release(out);
      out = NULL;
    } else out = fsG_record(out, sum_bw, 1, &fx, NULL, NULL, mean ? 1.0 / (double)fx->numel : 1.0, 0);
  }
  fsT_release(fx);
  return out;
}

fs_tensor *fsG_sum(fs_tensor *x) { return reduce(x, false); }
fs_tensor *fsG_mean(fs_tensor *x) { return reduce(x, true); }

/* ---- losses ---- */

static int cross_entropy_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *logits = n->in[0], *targets = n->in[1];
  float *dl;
  if (fsG_grad_buf(logits, &dl)) return -1;
  int64_t C = logits->shape[logits->rank - 1];
  double dloss;
  if (fsG_item(out->grad, &dloss) < 0) return -1;
  fsB_of(logits)->nn->cross_entropy_backward(dl, fsT_f32(logits), fsT_i64(targets), targets->numel,
                                             C, (float)dloss);
  return 0;
}

/* Low-precision logits on the cpu are read a row at a time through a
 * float32 row, instead of a float32 copy of them all (and in backward a
 * zeroed float32 gradient of that copy, added to theirs).  The arithmetic
 * is the widened path's: each row's term of the loss summed in the same
 * order, the loss float32 under autocast (else rounded to the logits'
 * type), each row's gradient added as a cast node adds it. */
static bool cross_entropy_low_direct(const fs_tensor *logits, const fs_tensor *targets) {
  return fsT_is_low(logits->dtype) && logits->device == FS_DEV_CPU && logits->data && targets->device == FS_DEV_CPU &&
         targets->data;
}

/* The rows go to the worker pool (fsB_parallel) in parts of CE_PART_ROWS:
 * each row is computed as one row alone, the loss's terms are summed
 * afterwards in row order and each row's gradient touches its row only, so
 * the split (fixed by the shape) changes no bits. */
enum { CE_PART_ROWS = 16 };
typedef struct ce_low_job {
  const fsN_kernels *nn;
  const fs_tensor *logits;
  const int64_t *targets;
  int64_t N, C;
  float *rows;  /* 2 C floats per worker */
  double *terms; /* forward: each row's term */
  float *dl, scale;
  bool fresh;
} ce_low_job;

static int ce_low_part(void *ctx, int part, int worker) {
  const ce_low_job *j = ctx;
  int64_t C = j->C, r = (int64_t)part * CE_PART_ROWS, end = r + CE_PART_ROWS < j->N ? r + CE_PART_ROWS : j->N;
  float *row = j->rows + (size_t)worker * 2 * (size_t)C, *grad = row + C;
  for (; r < end; r++) {
    fsT_convert(FS_F32, row, j->logits->dtype, (const uint16_t *)j->logits->data + r * C, (size_t)C);
    if (!j->dl) {
      j->terms[r] = j->nn->cross_entropy_forward(row, j->targets + r, 1, C);
      continue;
    }
    memset(grad, 0, (size_t)C * sizeof *grad);
    j->nn->cross_entropy_backward(grad, row, j->targets + r, 1, C, j->scale);
    fsG_low_grad_add(j->logits->dtype, j->dl + r * C, grad, (size_t)C, 1.0f, j->fresh);
  }
  return 0;
}

/* the floats of j's scratch: a 2 C row pair per worker, then, forward, a
 * double per row (2 C per worker is even: the doubles stay aligned) */
static size_t ce_low_scratch(const ce_low_job *j) {
  return (size_t)fsB_threads() * 2 * (size_t)j->C + (j->dl ? 0 : 2 * (size_t)j->N);
}

/* runs j over its rows (N > 0); forward leaves the terms' sum, in row order, in terms[0] */
static int ce_low_run(ce_low_job *j) {
  int64_t parts = (j->N + CE_PART_ROWS - 1) / CE_PART_ROWS;
  if (parts >= INT32_MAX) {
    fsT_seterr("cross_entropy: %lld rows are too many", (long long)j->N);
    return -1;
  }
  if (!(j->rows = scratch(ce_low_scratch(j), false))) return -1;
  j->terms = j->dl ? NULL : (double *)(void *)(j->rows + (size_t)fsB_threads() * 2 * (size_t)j->C);
  int rc = fsB_parallel((int)parts, ce_low_part, j);
  if (rc == 0 && !j->dl) {
    double total = 0;
    for (int64_t r = 0; r < j->N; r++) total += j->terms[r];
    j->terms[0] = total;
  }
  return rc;
}

static int cross_entropy_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *logits = n->in[0], *targets = n->in[1];
  int64_t C = logits->shape[logits->rank - 1], N = targets->numel;
  float *dl;
  double dloss;
  bool fresh;
  if (fsG_low_grad_buf(logits, &dl, &fresh) || (dl && fsG_item(out->grad, &dloss) < 0)) return -1;
  if (!dl || N == 0) return 0;
  /* the kernel's dloss / N, given one row at a time */
  ce_low_job j = {fsB_of(logits)->nn, logits, fsT_i64(targets), N, C, NULL, NULL, dl, (float)dloss / (float)N, fresh};
  int rc = ce_low_run(&j);
  scratch_free(j.rows, ce_low_scratch(&j));
  return rc;
}

static fs_tensor *cross_entropy_low(fs_tensor *logits, fs_tensor *targets, int64_t C) {
  int64_t N = targets->numel;
  double total = 0;
  if (N > 0) {
    ce_low_job j = {fsB_of(logits)->nn, logits, fsT_i64(targets), N, C, NULL, NULL, NULL, 0, false};
    int rc = ce_low_run(&j);
    if (rc == 0) total = j.terms[0];
    scratch_free(j.rows, ce_low_scratch(&j));
    if (rc < 0) return NULL;
  }
  float loss = (float)(N ? total / (double)N : NAN);
  fs_tensor *out = fsT_new(fsG_autocast() != FS_F32 ? FS_F32 : logits->dtype, FS_DEV_CPU, 0, NULL);
  if (!out) return NULL;
  fsT_convert(out->dtype, out->data, FS_F32, &loss, 1);
  return fsG_record(out, cross_entropy_low_bw, 2, (fs_tensor *const[]){logits, targets}, NULL, NULL, 0, 0);
}

fs_tensor *fsG_cross_entropy(fs_tensor *logits, fs_tensor *targets) {
  if (fsG_any_f64(1, &logits)) return fsG_cross_entropy_f64(logits, targets);
  bool direct = cross_entropy_low_direct(logits, targets);
  fsG_low lp;
  if (!direct && fsG_low_begin(&lp, FSG_AC_F32, 2, (fs_tensor *const[]){logits, targets}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_cross_entropy(lp.w[0], lp.w[1]));
  fs_tensor *ins[2] = {logits, targets};
  const fsB_backend *be = fsG_check_inputs("cross_entropy", 2, ins);
  if (!be || (!direct && !want_f32("cross_entropy", logits))) return NULL;
  char a[96], b[96];
  if (targets->dtype != FS_I64) {
    fsT_seterr("expected scalar type Long but found %s (cross_entropy targets are class indices)",
               fsT_dtype_name(targets->dtype));
    return NULL;
  }
  if (logits->rank < 2 || targets->rank != logits->rank - 1 ||
      memcmp(logits->shape, targets->shape, (size_t)targets->rank * sizeof targets->shape[0])) {
    fsT_seterr("cross_entropy: logits %s do not match targets %s (expected [N, C] with [N], or [B, T, C] with [B, T])",
               fsT_shape_str(logits, a, sizeof a), fsT_shape_str(targets, b, sizeof b));
    return NULL;
  }
  int64_t C = logits->shape[logits->rank - 1];
  fs_tensor *ht = fsG_on_host(targets);
  if (!ht) return NULL;
  for (int64_t i = 0; i < targets->numel; i++)
    if (fsT_i64(ht)[i] < 0 || fsT_i64(ht)[i] >= C) {
      fsT_seterr("Target %lld is out of bounds.", (long long)fsT_i64(ht)[i]);
      fsT_release(ht);
      return NULL;
    }
  fsT_release(ht);
  if (direct) return cross_entropy_low(logits, targets, C);
  fs_tensor *out = scalar_on(FS_F32, logits->device,
                             (float)be->nn->cross_entropy_forward(fsT_f32(logits), fsT_i64(targets),
                                                                  targets->numel, C));
  if (!out) return NULL;
  return fsG_record(out, cross_entropy_bw, 2, ins, NULL, NULL, 0, 0);
}

static int mse_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *p = n->in[0], *t = n->in[1];
  float *dp, *dt;
  double dloss;
  if (fsG_grad_buf(p, &dp) || fsG_grad_buf(t, &dt) || fsG_item(out->grad, &dloss) < 0) return -1;
  fsB_of(p)->nn->mse_backward(dp, dt, fsT_f32(p), fsT_f32(t), (size_t)p->numel, (float)dloss);
  return 0;
}

fs_tensor *fsG_mse_loss(fs_tensor *pred, fs_tensor *target) {
  fsG_low lp;
  if (fsG_any_f64(2, (fs_tensor *const[]){pred, target}))
    return fsG_ploss(FSN_MSE, pred, target, 0, NULL, NULL, FSG_MEAN);
  if (fsG_low_begin(&lp, FSG_AC_F32, 2, (fs_tensor *const[]){pred, target}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_mse_loss(lp.w[0], lp.w[1]));
  fs_tensor *ins[2] = {pred, target};
  const fsB_backend *be = fsG_check_inputs("mse_loss", 2, ins);
  if (!be || !want_f32("mse_loss", pred) || !want_f32("mse_loss", target)) return NULL;
  if (!fsT_same_shape(pred, target)) {
    char a[96], b[96];
    fsT_seterr("mse_loss: input %s and target %s must have the same shape",
               fsT_shape_str(pred, a, sizeof a), fsT_shape_str(target, b, sizeof b));
    return NULL;
  }
  fs_tensor *out = scalar_on(FS_F32, pred->device,
                             (float)be->nn->mse_forward(fsT_f32(pred), fsT_f32(target), (size_t)pred->numel));
  if (!out) return NULL;
  return fsG_record(out, mse_bw, 2, ins, NULL, NULL, 0, 0);
}

/* ---- not differentiable ---- */

static bool cmp(fsG_cmp op, double x, double y) {
  switch (op) {
  case FSG_EQ: return x == y;
  case FSG_NE: return x != y;
  case FSG_LT: return x < y;
  case FSG_LE: return x <= y;
  case FSG_GT: return x > y;
  case FSG_GE: return x >= y;
  }
  return false;
}

fs_tensor *fsG_compare(fsG_cmp op, fs_tensor *a, fs_tensor *b) {
  fs_tensor *ins[2] = {a, b};
  if (!fsG_check_inputs("comparison", 2, ins)) return NULL;
  const fs_tensor *shape = same_or_scalar(a, b);
  if (!shape) {
    fs_tensor *ea, *eb;
    if (expand_both(a, b, &ea, &eb) < 0) return NULL;
    fs_tensor *out = fsG_compare(op, ea, eb);
    fsT_release(ea);
    fsT_release(eb);
    return out;
  }
  fs_tensor *ha = fsG_on_host(a), *hb = ha ? fsG_on_host(b) : NULL;
  fs_tensor *out = hb ? fsT_new(FS_BOOL, FS_DEV_CPU, shape->rank, shape->shape) : NULL;
  if (out) {
    int64_t sa = a->numel == out->numel, sb = b->numel == out->numel;
    for (int64_t i = 0; i < out->numel; i++)
      fsT_bool(out)[i] = cmp(op, fsT_get(ha, i * sa), fsT_get(hb, i * sb));
  }
  fsT_release(ha);
  fsT_release(hb);
  return fsG_to_dev(out, shape->device);
}

fs_tensor *fsG_compare_scalar(fsG_cmp op, fs_tensor *a, double s, bool scalar_first) {
  if (!fsG_check_inputs("comparison", 1, &a)) return NULL;
  fs_tensor *ha = fsG_on_host(a);
  fs_tensor *out = ha ? fsT_new(FS_BOOL, FS_DEV_CPU, a->rank, a->shape) : NULL;
  for (int64_t i = 0; out && i < a->numel; i++) {
    double v = fsT_get(ha, i);
    fsT_bool(out)[i] = scalar_first ? cmp(op, s, v) : cmp(op, v, s);
  }
  fsT_release(ha);
  return fsG_to_dev(out, a->device);
}

fs_tensor *fsG_argmax(fs_tensor *x, int dim) {
  if (!fsG_check_inputs("argmax", 1, &x)) return NULL;
  int r = x->rank ? x->rank : 1;
  if (dim < -r || dim >= r) {
    fsT_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, dim);
    return NULL;
  }
  if (dim < 0) dim += r;
  int64_t len = x->rank ? x->shape[dim] : 1;
  if (len == 0) {
    fsT_seterr("argmax(): Expected reduction dim %d to have non-zero size.", dim);
    return NULL;
  }
  int64_t outer = 1, inner = 1, shape[FS_MAX_RANK];
  for (int i = 0; i < x->rank; i++) {
    if (i < dim) outer *= x->shape[i];
    if (i > dim) inner *= x->shape[i];
    if (i != dim) shape[i - (i > dim)] = x->shape[i];
  }
  fs_tensor *hx = fsG_on_host(x);
  fs_tensor *out = hx ? fsT_new(FS_I64, FS_DEV_CPU, x->rank ? x->rank - 1 : 0, shape) : NULL;
  for (int64_t o = 0; out && o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t best = 0;
      double bv = fsT_get(hx, o * len * inner + in);
      for (int64_t k = 1; k < len; k++) {
        double v = fsT_get(hx, (o * len + k) * inner + in);
        if (v > bv || (isnan(v) && !isnan(bv))) { /* first maximum; nan wins, as torch */
          bv = v;
          best = k;
        }
      }
      fsT_i64(out)[o * inner + in] = best;
    }
  fsT_release(hx);
  return fsG_to_dev(out, x->device);
}

int fsG_item(const fs_tensor *t, double *out) {
  if (t->numel != 1) {
    fsT_seterr("a Tensor with %lld elements cannot be converted to Scalar", (long long)t->numel);
    return -1;
  }
  if (!t->data) {
    fsT_seterr("Tensor.item() cannot be called on meta tensors");
    return -1;
  }
  if (t->device == FS_DEV_CPU) {
    *out = fsT_get(t, 0);
    return 0;
  }
  fs_tensor *h = fsT_to_device((fs_tensor *)t, FS_DEV_CPU);
  if (!h) return -1;
  *out = fsT_get(h, 0);
  fsT_release(h);
  return 0;
}

/* ---- hooks ---- */

static int hook_bw(fsG_node *n, fs_tensor *out) {
  if (n->hook(n->ud, n->k) < 0) return -1;
  float *dx;
  if (fsG_grad_buf(n->in[0], &dx)) return -1;
  if (dx) fsB_of(out)->axpy((size_t)out->numel, 1.0f, fsT_f32(out->grad), dx);
  return fsG_round_grad(n->in[0]);
}

fs_tensor *fsG_hook(fs_tensor *x, fsG_hook_fn fn, void *ud, int64_t k) {
  if (!needs_grad(1, &x)) return fsT_retain(x);
  fs_tensor *out = fsT_view(x, x->rank, x->shape);
  if (!out || !(out = fsG_record(out, hook_bw, 1, &x, NULL, NULL, 0, k))) return NULL;
  out->node->hook = fn;
  out->node->ud = ud;
  return out;
}

/* ---- backward ---- */

typedef struct { fs_tensor **v; size_t n, cap; } tlist;

static int push(tlist *l, fs_tensor *t) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    fs_tensor **v = realloc(l->v, cap * sizeof *v);
    if (!v) return -1;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = t;
  return 0;
}

/* Post-order DFS with an explicit stack: a deep network must not overflow
 * the C stack.  Each tensor with a node enters `order` once, after all the
 * tensors it was computed from. */
static int topo(fs_tensor *root, unsigned mark, tlist *order) {
  tlist stack = {0};
  int rc = 0;
  root->node->mark = mark;
  if (push(&stack, root)) rc = -1;
  while (!rc && stack.n) {
    fs_tensor *t = stack.v[stack.n - 1];
    bool pushed = false;
    for (int i = 0; i < 3 && !pushed; i++) {
      fs_tensor *in = t->node->in[i];
      if (in && in->node && in->node->mark != mark) {
        in->node->mark = mark;
        if (push(&stack, in)) rc = -1;
        pushed = true;
      }
    }
    if (!pushed) {
      stack.n--;
      if (push(order, fsT_retain(t))) {
        fsT_release(t);
        rc = -1;
      }
    }
  }
  free(stack.v);
  if (rc) fsT_seterr("out of memory");
  return rc;
}

int fsG_backward(fs_tensor *loss) {
  if (!loss->requires_grad) {
    fsT_seterr("element 0 of tensors does not require grad and does not have a grad_fn");
    return -1;
  }
  if (loss->numel != 1) {
    fsT_seterr("grad can be implicitly created only for scalar outputs");
    return -1;
  }
  float *g;
  double g0, *g64;
  if ((loss->dtype == FS_F64 ? fsG_grad_buf_f64(loss, &g64) : fsG_grad_buf(loss, &g)) || fsG_item(loss->grad, &g0) < 0 || write_scalar(loss->grad, g0 + 1.0) < 0)
    return -1;
  if (!loss->node) return 0; /* a leaf: its grad is the answer */
  static _Thread_local unsigned stamp;
  tlist order = {0};
  int rc = topo(loss, ++stamp, &order);
  for (size_t i = order.n; !rc && i-- > 0;) {
    fs_tensor *t = order.v[i];
    if (t->grad) {
      fs_dtype gemm = fsB_set_gemm_operands(t->node->gemm);
      rc = t->node->backward(t->node, t);
      fsB_set_gemm_operands(gemm);
    }
    fsT_release(t->grad); /* intermediates keep no grad, as torch */
    t->grad = NULL;
  }
  for (size_t i = 0; i < order.n; i++) {
    fs_tensor *t = order.v[i];
    fsT_release(t->grad);
    t->grad = NULL;
    fsG_detach(t);
    t->requires_grad = false;
  }
  for (size_t i = 0; i < order.n; i++) fsT_release(order.v[i]);
  free(order.v);
  return fsG_store_low_grads() < 0 ? -1 : rc;
}
