/* loss_grad.c -- autograd entry points of torch.nn.functional's losses with
 * all their options (autograd.h "losses"): each checks its inputs with
 * torch's messages, computes per-row or per-element losses with a loss.h
 * kernel on host tensors (staged off other devices, as cnn_grad.c), records
 * the backward, and reduces with the tape's own ops (sum, mean, a scale), so
 * the reduction's gradient needs no code of its own.  The fast paths that
 * training uses by default stay fsG_cross_entropy and fsG_mse_loss. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_int.h"
#include "blas.h"
#include "loss.h"

static bool float_arg(const char *op, const fs_tensor *t) {
  if (!t || t->dtype == FS_F32 || t->dtype == FS_F64) return true;
  fsT_seterr("%s: expected a float32 tensor, got %s", op, fsT_dtype_name(t->dtype));
  return false;
}

/* ---- reduction ---- */

/* Takes `per`; divisor: the mean's (float64 divides by it, as torch does
 * in double; float32 multiplies by its reciprocal). */
static fs_tensor *reduce(fs_tensor *per, fsG_reduction red, double divisor, int rank, const int64_t *shape) {
  fs_tensor *out = NULL;
  switch (red) {
  case FSG_NONE: out = fsG_reshape(per, rank, shape); break;
  case FSG_SUM: out = fsG_sum(per); break;
  case FSG_MEAN:
  case FSG_BATCHMEAN: {
    fs_tensor *s = fsG_sum(per);
    out = !s ? NULL : s->dtype == FS_F64 ? fsG_binary_scalar(FSB_DIV, s, divisor, false, false)
                                          : fsG_binary_scalar(FSB_MUL, s, 1.0 / divisor, false, false);
    fsT_release(s);
    break;
  }
  }
  fsT_release(per);
  return out;
}

/* ---- class losses ---- */

static void nll_opts(const fsG_node *n, const fs_tensor *x, const fs_tensor *w, fsN_nll *o) {
  *o = (fsN_nll){.M = x->shape[0], .C = x->shape[1], .from_logits = n->iv[0] != 0,
                 .weight = w ? fsT_f32(w) : NULL, .ignore_index = n->k, .smoothing = (float)n->s};
}

static int nll_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  fsN_nll o;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  nll_opts(n, c.in[0], c.in[2], &o);
  if (n->iv[1]) fsN_nll_prob_backward(c.d[0], c.d[1], fsT_f32(c.gout), fsT_f32(c.in[0]), fsT_f32(c.in[1]), &o);
  else if (c.d[0]) fsN_nll_backward(c.d[0], fsT_f32(c.gout), fsT_f32(c.in[0]), fsT_i64(c.in[1]), &o);
  return fsG_bw_end(&c, n);
}

/* x's class dim moved last (a copy on the tape when it moves) */
static fs_tensor *class_last(fs_tensor *x, bool move) {
  if (!move) return fsG_reshape(x, x->rank, x->shape);
  int perm[FS_MAX_RANK];
  for (int d = 0; d < x->rank; d++) perm[d] = d == x->rank - 1 ? 1 : d < 1 ? d : d + 1;
  return fsG_permute(x, perm);
}

/* nll_loss / cross_entropy with options on a low x on the cpu, its class
 * dim last ([C] with [], [N, C] with [N], [B, T, C] with [B, T]) or torch's
 * [N, C, d...] with [N, d...], index targets or (cross_entropy) class
 * probabilities of x's shape (float32 or x's type): rows read by parts of
 * about NLL_PART floats (fixed by the shape) on the worker pool, each
 * part's rows widened into its worker's scratch as [rows, C] (in torch's
 * layout gathered across the d... positions, the float32 path's permuted
 * copy, a part at a time) for loss.h's float32 kernel.  The per-row losses
 * are float32 and reduced as the float32 path reduces them, the result
 * rounded once to its type (float32 under autocast); each row's weight
 * comes back from a one-row call and the mean's divisor sums them
 * afterwards in row order, so every value is the widened path's at any
 * thread count.  Backward: the kernel's dx (and a probability target's
 * dp) on zeroed parts, rounded into a low input's gradient, added to a
 * float32 one's. */
enum { NLL_PART = 16384 };
typedef struct nll_low {
  const fs_tensor *x, *p; /* p: probability targets, or NULL */
  const int64_t *t;       /* index targets, or NULL */
  float *per;             /* forward: [M] losses */
  double *ws;             /* forward: [M] rows' weights */
  const float *g;         /* backward: per's gradient */
  float *dx, *dp;         /* backward: x's low gradient, p's gradient (or NULL) */
  bool fresh, p_fresh;
  float *scratch;         /* 4 * rows * C + rows floats per worker */
  fsN_nll o;              /* M, C of the whole x */
  int64_t rows;           /* per part */
  int64_t S;              /* torch's layout: the d... positions per image; 0: class dim last */
} nll_low;

/* 0: x's class dim is last for this target; S > 0: torch's [N, C, d...]
 * layout with S positions; -1: neither (the float32 path's layout rules) */
static int64_t nll_layout(const fs_tensor *x, const fs_tensor *t, bool probs) {
  int r = x->rank;
  if (!probs && t->rank == r - 1 && !memcmp(t->shape, x->shape, (size_t)t->rank * sizeof *t->shape)) return 0;
  if (probs) return r > 2 ? x->numel / (x->shape[0] * x->shape[1]) : 0;
  if (r > 2 && t->rank == r - 1 && t->shape[0] == x->shape[0] &&
      !memcmp(t->shape + 1, x->shape + 2, (size_t)(r - 2) * sizeof *x->shape))
    return x->numel / (x->shape[0] * x->shape[1]);
  return -1;
}

static bool nll_low_ok(const fs_tensor *x, const fs_tensor *t, const fs_tensor *w, bool from_logits, double smoothing) {
  if (!fsT_is_low(x->dtype) || x->device != FS_DEV_CPU || !x->data || x->rank == 0 || x->numel == 0 ||
      t->device != FS_DEV_CPU || !t->data || !(smoothing >= 0 && smoothing <= 1))
    return false;
  bool probs = t->dtype != FS_I64;
  if (probs && (!from_logits || (t->dtype != FS_F32 && t->dtype != x->dtype) || !fsT_same_shape(x, t))) return false;
  int64_t S = nll_layout(x, t, probs), C = x->shape[S ? 1 : x->rank - 1];
  if (S < 0) return false;
  return !w || (w->rank == 1 && w->numel == C && w->device == FS_DEV_CPU && w->data &&
                (w->dtype == FS_F32 || w->dtype == x->dtype));
}

/* rows [r0, r0 + n) of t (x's layout) as float32 [n, C]: t's own floats
 * or widened into buf (tmp: n floats) */
static const float *nll_rows(const nll_low *j, const fs_tensor *t, int64_t r0, int64_t n, float *buf, float *tmp) {
  int64_t C = j->o.C, S = j->S;
  if (!S) return fsG_low_block(t, (size_t)(r0 * C), (size_t)(n * C), true, buf);
  for (int64_t r = r0; r < r0 + n;) { /* row r is position r % S of image r / S */
    int64_t i = r / S, s = r % S, k = S - s < r0 + n - r ? S - s : r0 + n - r;
    for (int64_t c = 0; c < C; c++) {
      const float *v = fsG_low_block(t, (size_t)((i * C + c) * S + s), (size_t)k, true, tmp);
      for (int64_t q = 0; q < k; q++) buf[(r - r0 + q) * C + c] = v[q];
    }
    r += k;
  }
  return buf;
}

/* v[0..m) into the gradient g of t: rounded and added when t is low,
 * added when float32 */
static void nll_grad_add(const fs_tensor *t, float *g, const float *v, size_t m, bool fresh) {
  if (fsT_is_low(t->dtype)) fsG_low_grad_add(t->dtype, g, v, m, 1.0f, fresh);
  else
    for (size_t q = 0; q < m; q++) g[q] += v[q];
}

/* d [n, C], rows [r0, r0 + n), into t's gradient g (x's layout; tmp: n
 * floats) */
static void nll_grad_rows(const nll_low *j, const fs_tensor *t, float *g, bool fresh, int64_t r0, int64_t n,
                          const float *d, float *tmp) {
  int64_t C = j->o.C, S = j->S;
  if (!S) {
    nll_grad_add(t, g + r0 * C, d, (size_t)(n * C), fresh);
    return;
  }
  for (int64_t r = r0; r < r0 + n;) { /* as nll_rows */
    int64_t i = r / S, s = r % S, k = S - s < r0 + n - r ? S - s : r0 + n - r;
    for (int64_t c = 0; c < C; c++) {
      for (int64_t q = 0; q < k; q++) tmp[q] = d[(r - r0 + q) * C + c];
      nll_grad_add(t, g + (i * C + c) * S + s, tmp, (size_t)k, fresh);
    }
    r += k;
  }
}

static int nll_low_part(void *ctx, int part, int worker) {
  const nll_low *j = ctx;
  int64_t C = j->o.C, r0 = part * j->rows, n = j->o.M - r0 < j->rows ? j->o.M - r0 : j->rows;
  size_t m = (size_t)(n * C), per = (size_t)(j->rows * C);
  float *buf = j->scratch + (size_t)worker * (4 * per + (size_t)j->rows), *tmp = buf + 4 * per;
  const float *xs = nll_rows(j, j->x, r0, n, buf, tmp), *ps = j->p ? nll_rows(j, j->p, r0, n, buf + per, tmp) : NULL;
  fsN_nll one = j->o;
  one.M = n;
  if (!j->g && ps) fsN_nll_prob_forward(j->per + r0, xs, ps, &one);
  if (!j->g && !ps) { /* index targets: a row at a time, for its weight */
    one.M = 1;
    for (int64_t r = 0; r < n; r++)
      if (fsN_nll_forward(j->per + r0 + r, j->ws + r0 + r, xs + r * C, j->t + r0 + r, &one) < 0) return -1;
  }
  if (!j->g) return 0;
  /* the kernel adds to dx (dp), as to the zeroed float32 gradient */
  float *d = j->dx ? memset(buf + 2 * per, 0, m * sizeof *d) : NULL, *dp = j->dp ? memset(buf + 3 * per, 0, m * sizeof *dp) : NULL;
  if (ps) fsN_nll_prob_backward(d, dp, j->g + r0, xs, ps, &one);
  else if (d) fsN_nll_backward(d, j->g + r0, xs, j->t + r0, &one);
  if (d) nll_grad_rows(j, j->x, j->dx, j->fresh, r0, n, d, tmp);
  if (dp) nll_grad_rows(j, j->p, j->dp, j->p_fresh, r0, n, dp, tmp);
  return 0;
}

/* the parts of j (x, t or p, S and weight set) on the workers, or here
 * when small */
static int nll_low_run(nll_low *j, const fs_tensor *weight) {
  int64_t C = j->o.C, M = j->o.M, rows = C >= NLL_PART ? 1 : NLL_PART / C;
  j->rows = rows < M ? rows : M;
  int64_t parts = (M + j->rows - 1) / j->rows;
  bool pool = M * C >= 2 * NLL_PART;
  size_t per = 4 * (size_t)(j->rows * C) + (size_t)j->rows;
  float *mem = parts < INT32_MAX ? malloc(((pool ? (size_t)fsB_threads() : 1) * per + (size_t)C) * sizeof *mem) : NULL;
  if (!mem) {
    fsT_seterr(parts < INT32_MAX ? "out of memory" : "nll_loss: %lld rows are too many", (long long)M);
    return -1;
  }
  j->scratch = mem + C;
  j->o.weight = weight ? fsG_low_block(weight, 0, (size_t)C, true, mem) : NULL;
  int rc = 0;
  if (pool) rc = fsB_parallel((int)parts, nll_low_part, j);
  else
    for (int64_t p = 0; p < parts && rc == 0; p++) rc = nll_low_part(j, (int)p, 0);
  free(mem);
  return rc;
}

/* j's targets and layout for x and target (nll_low_ok) */
static void nll_low_shape(nll_low *j, const fs_tensor *x, const fs_tensor *target) {
  bool probs = target->dtype != FS_I64;
  j->x = x;
  j->p = probs ? target : NULL;
  j->t = probs ? NULL : fsT_i64(target);
  j->S = nll_layout(x, target, probs);
  j->o.C = x->shape[j->S ? 1 : x->rank - 1];
  j->o.M = x->numel / j->o.C;
}

static int nll_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *target = n->in[1];
  nll_low j = {.g = fsT_f32(out->grad)};
  nll_opts(n, x, NULL, &j.o);
  nll_low_shape(&j, x, target);
  if (fsG_low_grad_buf(x, &j.dx, &j.fresh) ||
      (j.p && (fsT_is_low(j.p->dtype) ? fsG_low_grad_buf(target, &j.dp, &j.p_fresh) : fsG_grad_buf(target, &j.dp))))
    return -1;
  return j.dx || j.dp ? nll_low_run(&j, n->in[2]) : 0;
}

/* the loss (nll_low_ok), reduced and rounded to its type */
static fs_tensor *nll_low_loss(fs_tensor *x, fs_tensor *target, fs_tensor *weight, bool from_logits,
                               int64_t ignore_index, double smoothing, fsG_reduction red) {
  fs_tensor *ins[3] = {x, target, weight};
  fs_dtype to = fsG_autocast() != FS_F32 ? FS_F32 : fsG_promoted(3, ins);
  if (!fsG_check_inputs(from_logits ? "cross_entropy" : "nll_loss", 3, ins)) return NULL;
  nll_low j = {.o = {.from_logits = from_logits, .ignore_index = ignore_index, .smoothing = (float)smoothing}};
  nll_low_shape(&j, x, target);
  int64_t M = j.o.M;
  fs_tensor *per = fsT_new(FS_F32, FS_DEV_CPU, 1, &M);
  j.ws = per && !j.p ? malloc((size_t)M * sizeof *j.ws) : NULL;
  j.per = per ? fsT_f32(per) : NULL;
  if (!per || (!j.p && !j.ws) || nll_low_run(&j, weight) < 0) {
    if (per && !j.p && !j.ws) fsT_seterr("out of memory");
    free(j.ws);
    fsT_release(per);
    return NULL;
  }
  double wsum = j.p ? (double)M : 0; /* probabilities: the mean is over the rows */
  for (int64_t m = 0; !j.p && m < M; m++) wsum += j.ws[m];
  free(j.ws);
  per = fsG_record(per, nll_low_bw, 3, ins, NULL, NULL, smoothing, ignore_index);
  if (per && per->node) per->node->iv[0] = from_logits;
  /* 'none' keeps the target's shape without the class dim */
  int64_t shape[FS_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < x->rank; d++)
    if (d != (j.S ? 1 : x->rank - 1)) shape[rank++] = x->shape[d];
  fs_tensor *r = per ? reduce(per, red, wsum, rank, shape) : NULL, *out = r ? fsG_cast(r, to) : NULL;
  fsT_release(r);
  return out;
}

fs_tensor *fsG_nll(fs_tensor *x, fs_tensor *target, fs_tensor *weight, bool from_logits,
                   int64_t ignore_index, double smoothing, fsG_reduction red) {
  if (nll_low_ok(x, target, weight, from_logits, smoothing)) return nll_low_loss(x, target, weight, from_logits, ignore_index, smoothing, red);
  fsG_low lp;
  bool f64 = fsG_any_f64(3, (fs_tensor *const[]){x, target, weight});
  if (!f64 && fsG_low_begin(&lp, FSG_AC_F32, 3, (fs_tensor *const[]){x, target, weight}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_nll(lp.w[0], lp.w[1], lp.w[2], from_logits, ignore_index, smoothing, red));
  const char *op = from_logits ? "cross_entropy" : "nll_loss";
  fs_tensor *ins[3] = {x, target, weight};
  char a[96], b[96];
  if (!fsG_check_inputs(op, 3, ins) || !float_arg(op, x) || !float_arg(op, weight)) return NULL;
  bool probs = target->dtype != FS_I64;
  if (probs && (!from_logits || !fsT_same_shape(x, target))) {
    fsT_seterr(from_logits ? "cross_entropy: a float target holds class probabilities and must have the input's shape; input %s, target %s"
                           : "expected scalar type Long but found %s", from_logits ? fsT_shape_str(x, a, sizeof a) : fsT_dtype_name(target->dtype),
               fsT_shape_str(target, b, sizeof b));
    return NULL;
  }
  if (!(smoothing >= 0 && smoothing <= 1)) {
    fsT_seterr("label_smoothing must be between 0.0 and 1.0. Got: %g", smoothing);
    return NULL;
  }
  /* layouts: [C] with [] (one row), [N, C] with [N], torch's [N, C, d...] with
   * [N, d...], or this runtime's [B, T, C] with [B, T] (class dim last) */
  int r = x->rank; /* where both layouts fit ([B, T, T] with [B, T]) the class dim is the last */
  bool last_layout = r >= 2 && !probs && target->rank == r - 1 &&
                     !memcmp(target->shape, x->shape, (size_t)(r - 1) * sizeof *x->shape);
  bool torch_layout = r > 2 && !last_layout &&
                      (probs || (target->rank == r - 1 && target->shape[0] == x->shape[0] &&
                                 !memcmp(target->shape + 1, x->shape + 2, (size_t)(r - 2) * sizeof *x->shape)));
  if (r == 0 || (r == 1 && !probs && target->rank != 0) || (r >= 2 && !probs && !torch_layout && !last_layout)) {
    fsT_seterr("%s: input %s and target %s do not match (expected [N, C] with [N], or [N, C, d1, ...] with [N, d1, ...])",
               op, fsT_shape_str(x, a, sizeof a), fsT_shape_str(target, b, sizeof b));
    return NULL;
  }
  int64_t C = torch_layout ? x->shape[1] : x->shape[r - 1], M = C ? x->numel / C : 0;
  if (weight && (weight->rank != 1 || weight->shape[0] != C)) {
    fsT_seterr("%s: weight tensor should be defined either for all %lld classes or no classes but got weight tensor of shape: %s",
               op, (long long)C, fsT_shape_str(weight, a, sizeof a));
    return NULL;
  }
  /* the rows [M, C] of x and the targets [M] (or [M, C]) */
  int64_t rows[2] = {M, C};
  fs_tensor *xl = class_last(x, torch_layout), *xr = xl ? fsG_reshape(xl, 2, rows) : NULL;
  fs_tensor *tl = probs ? class_last(target, torch_layout) : fsT_retain(target);
  fs_tensor *tr = tl ? fsG_reshape(tl, probs ? 2 : 1, rows) : NULL;
  fsT_release(xl);
  fsT_release(tl);
  fs_tensor *per = NULL;
  double wsum = (double)M;
  fsG_stage st;
  fs_tensor *rins[3] = {xr, tr, weight};
  if (tr && f64) per = fsG_nll_rows_f64(xr, tr, weight, from_logits, ignore_index, smoothing, &wsum);
  else if (tr && fsG_stage_begin(&st, op, 3, rins) == 0) {
    fsN_nll o = {.M = M, .C = C, .from_logits = from_logits, .weight = weight ? fsT_f32(st.h[2]) : NULL,
                 .ignore_index = ignore_index, .smoothing = (float)smoothing};
    if ((per = fsG_host_new(FS_F32, 1, &M))) {
      if (probs) fsN_nll_prob_forward(fsT_f32(per), fsT_f32(st.h[0]), fsT_f32(st.h[1]), &o);
      else if (fsN_nll_forward(fsT_f32(per), &wsum, fsT_f32(st.h[0]), fsT_i64(st.h[1]), &o) < 0) {
        fsT_release(per);
        per = NULL;
      }
    }
    fsG_stage_end(&st);
    per = fsG_to_dev(per, st.dev);
    if (per) per = fsG_record(per, nll_bw, 3, rins, NULL, NULL, smoothing, ignore_index);
    if (per && per->node) {
      per->node->iv[0] = from_logits;
      per->node->iv[1] = probs;
    }
  }
  fsT_release(xr);
  fsT_release(tr);
  if (!per) return NULL;
  /* 'none' keeps the target's shape (without the class dim for probabilities) */
  int64_t shape[FS_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < r; d++)
    if (d != (torch_layout ? 1 : r - 1)) shape[rank++] = x->shape[d];
  return reduce(per, red, wsum, rank, shape);
}

/* ---- elementwise losses ---- */

static int ploss_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  fsN_ploss_opts o = {.op = (fsN_ploss)n->k, .param = n->s, .pos_weight = c.in[2] ? fsT_f32(c.in[2]) : NULL,
                      .n_pw = c.in[2] ? c.in[2]->numel : 0};
  fsN_ploss_backward(c.d[0], c.d[1], fsT_f32(c.gout), fsT_f32(c.in[0]), fsT_f32(c.in[1]),
                     (size_t)out->numel, &o);
  return fsG_bw_end(&c, n);
}

/* Elementwise losses of same-shaped low (or low and float32) x and y on
 * the cpu read a block at a time (autograd_int.h's FSG_LOW_BLOCK path; a
 * target y broadcast to x's shape is first widened and expanded on the
 * tape, as the float32 path does it, so its gradient is that path's):
 * the per-element losses are the float32 kernel's on the widened values
 * (a float32 tensor, weighted and reduced as the float32 path does it, then
 * rounded once to the result's type), and backward adds each input's
 * float32 contribution rounded (fsG_low_grad_add).  pos_weight [P] is
 * widened twice over, so that a block starting at element `at` reads it
 * from at % P on with the kernel's i % P. */
static bool ploss_low_ok(fsN_ploss kind, const fs_tensor *x, const fs_tensor *y, const fs_tensor *pos_weight,
                         const fs_tensor *weight) {
  if (!(fsT_is_low(x->dtype) || fsT_is_low(y->dtype))) return false;
  if (!fsT_same_shape(x, y)) { /* a target broadcast to x's shape (BCE refuses it below) */
    int64_t shape[FS_MAX_RANK];
    int rank;
    if (kind == FSN_BCE || kind == FSN_BCE_LOGITS ||
        fsU_broadcast_shape(x->rank, x->shape, y->rank, y->shape, &rank, shape) < 0 || rank != x->rank ||
        memcmp(shape, x->shape, (size_t)rank * sizeof *shape))
      return false;
  }
  if (pos_weight && pos_weight->numel != 1 && (x->rank == 0 || pos_weight->numel != x->shape[x->rank - 1])) return false;
  const fs_tensor *ts[4] = {x, y, pos_weight, weight};
  for (int i = 0; i < 4; i++) {
    const fs_tensor *t = ts[i];
    if (t && ((t->dtype != FS_F32 && !fsT_is_low(t->dtype)) || t->device != FS_DEV_CPU || !t->data)) return false;
  }
  return true;
}

/* pos_weight (or NULL) widened twice over, in *pw; -1 + error */
static int ploss_low_pw(const fs_tensor *pos_weight, float **pw) {
  *pw = NULL;
  if (!pos_weight) return 0;
  size_t P = (size_t)pos_weight->numel;
  if (!(*pw = malloc(2 * P * sizeof **pw))) {
    fsT_seterr("out of memory");
    return -1;
  }
  for (int k = 0; k < 2; k++) fsT_convert(FS_F32, *pw + k * P, pos_weight->dtype, pos_weight->data, P);
  return 0;
}

/* o's pos_weight for the block at `at` */
static void ploss_low_at(fsN_ploss_opts *o, const float *pw, int64_t P, size_t at) {
  o->pos_weight = pw ? pw + at % (size_t)P : NULL;
  o->n_pw = pw ? P : 0;
}

static int ploss_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *side[2] = {n->in[0], n->in[1]};
  fsN_ploss_opts o = {.op = (fsN_ploss)n->k, .param = n->s};
  float *d[2], X[FSG_LOW_BLOCK], Y[FSG_LOW_BLOCK], C[2][FSG_LOW_BLOCK], *pw;
  bool fresh[2] = {false, false}, low[2];
  for (int i = 0; i < 2; i++) {
    low[i] = fsT_is_low(side[i]->dtype);
    if (low[i] ? fsG_low_grad_buf(side[i], &d[i], &fresh[i]) : fsG_grad_buf(side[i], &d[i])) return -1;
  }
  if (ploss_low_pw(n->in[2], &pw) < 0) return -1;
  const float *g = fsT_f32(out->grad);
  for (size_t at = 0, N = (size_t)out->numel; (d[0] || d[1]) && at < N; at += FSG_LOW_BLOCK) {
    size_t m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    float *c[2];
    if (pw) ploss_low_at(&o, pw, n->in[2]->numel, at);
    for (int i = 0; i < 2; i++)
      c[i] = !d[i] ? NULL : low[i] ? memset(C[i], 0, m * sizeof(float)) : d[i] + at; /* float32: added in place */
    fsN_ploss_backward(c[0], c[1], g + at, fsG_low_block(side[0], at, m, true, X), fsG_low_block(side[1], at, m, true, Y),
                       m, &o);
    for (int i = 0; i < 2; i++)
      if (d[i] && low[i]) fsG_low_grad_add(side[i]->dtype, d[i] + at, C[i], m, 1.0f, fresh[i]);
  }
  free(pw);
  return 0;
}

/* per-element losses of x and y (ploss_low_ok): a float32 tensor on the tape */
static fs_tensor *ploss_low(fsN_ploss kind, fs_tensor *x, fs_tensor *y, double param, fs_tensor *pos_weight) {
  fs_tensor *per = fsT_new(FS_F32, FS_DEV_CPU, x->rank, x->shape);
  float *pw;
  if (!per || ploss_low_pw(pos_weight, &pw) < 0) {
    fsT_release(per);
    return NULL;
  }
  fsN_ploss_opts o = {.op = kind, .param = param};
  float X[FSG_LOW_BLOCK], Y[FSG_LOW_BLOCK];
  for (size_t at = 0, N = (size_t)per->numel; at < N; at += FSG_LOW_BLOCK) {
    size_t m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    if (pw) ploss_low_at(&o, pw, pos_weight->numel, at);
    fsN_ploss_forward(fsT_f32(per) + at, fsG_low_block(x, at, m, true, X), fsG_low_block(y, at, m, true, Y), m, &o);
  }
  free(pw);
  return fsG_record(per, ploss_low_bw, 3, (fs_tensor *const[]){x, y, pos_weight}, NULL, NULL, param, kind);
}

static const char *const ploss_names[] = {
  "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
  "binary_cross_entropy_with_logits", "kl_div",
};

fs_tensor *fsG_ploss(fsN_ploss kind, fs_tensor *x, fs_tensor *y, double param, fs_tensor *pos_weight,
                     fs_tensor *weight, fsG_reduction red) {
  bool f64 = fsG_any_f64(4, (fs_tensor *const[]){x, y, pos_weight, weight});
  if (!f64 && ploss_low_ok(kind, x, y, pos_weight, weight)) { /* the widened path's result type: float32 under autocast */
    fs_tensor *ins[4] = {x, y, pos_weight, weight};
    fs_dtype to = fsG_autocast() != FS_F32 ? FS_F32 : fsG_promoted(4, ins);
    fs_tensor *yf = fsT_same_shape(x, y) ? fsT_retain(y) : fsG_cast(y, FS_F32);
    fs_tensor *ye = !yf || fsT_same_shape(x, yf) ? yf : fsG_expand(yf, x->rank, x->shape);
    fs_tensor *per = ye ? ploss_low(kind, x, ye, param, pos_weight) : NULL;
    if (ye != yf) fsT_release(ye);
    fsT_release(yf);
    if (per && weight) { /* as the float32 path: per * weight, broadcast (the weight's gradient rounded once) */
      fs_tensor *w = fsG_binary_op(FSU_MUL, per, weight);
      fsT_release(per);
      per = w;
    }
    fs_tensor *r = per ? reduce(per, red, red == FSG_BATCHMEAN ? (double)(per->rank ? per->shape[0] : 1) : (double)per->numel,
                                per->rank, per->shape)
                       : NULL;
    fs_tensor *out = r ? fsG_cast(r, to) : NULL;
    fsT_release(r);
    return out;
  }
  fsG_low lp;
  if (!f64 && fsG_low_begin(&lp, FSG_AC_F32, 4, (fs_tensor *const[]){x, y, pos_weight, weight}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_ploss(kind, lp.w[0], lp.w[1], param, lp.w[2], lp.w[3], red));
  const char *op = ploss_names[kind];
  fs_tensor *ins[3] = {x, y, pos_weight};
  char a[96], b[96];
  if (!fsG_check_inputs(op, 3, ins) || !float_arg(op, x) || !float_arg(op, pos_weight) ||
      (weight && !fsG_check_inputs(op, 1, &weight)))
    return NULL;
  if (!fsT_same_shape(x, y) && (kind == FSN_BCE || kind == FSN_BCE_LOGITS)) {
    fsT_seterr(kind == FSN_BCE ? "Using a target size (torch.Size(%s)) that is different to the input size (torch.Size(%s)) is deprecated. Please ensure they have the same size."
                               : "Target size (torch.Size(%s)) must be the same as input size (torch.Size(%s))",
               fsT_shape_str(y, a, sizeof a), fsT_shape_str(x, b, sizeof b));
    return NULL;
  }
  if (pos_weight && pos_weight->numel != 1 && (x->rank == 0 || pos_weight->numel != x->shape[x->rank - 1])) {
    fsT_seterr("%s: pos_weight of shape %s must broadcast over the last dim of input %s", op,
               fsT_shape_str(pos_weight, a, sizeof a), fsT_shape_str(x, b, sizeof b));
    return NULL;
  }
  /* the target as float (float64: both, on the tape), both broadcast to
   * one shape (copies on the tape) */
  int64_t shape[FS_MAX_RANK];
  int rank;
  if (fsU_broadcast_shape(x->rank, x->shape, y->rank, y->shape, &rank, shape) < 0) return NULL;
  fs_tensor *yf = f64 ? fsG_cast(y, FS_F64) : fsT_to_dtype(y, FS_F32), *xf = f64 ? fsG_cast(x, FS_F64) : fsT_retain(x);
  fs_tensor *xe = yf && xf ? fsG_expand(xf, rank, shape) : NULL, *ye = xe ? fsG_expand(yf, rank, shape) : NULL;
  fsT_release(yf);
  fsT_release(xf);
  fs_tensor *per = NULL;
  fs_tensor *pins[3] = {xe, ye, pos_weight};
  fsG_stage st;
  if (ye && f64) per = fsG_ploss_f64(kind, xe, ye, param, pos_weight);
  else if (ye && fsG_stage_begin(&st, op, 3, pins) == 0) {
    fsN_ploss_opts o = {.op = kind, .param = param, .pos_weight = pos_weight ? fsT_f32(st.h[2]) : NULL,
                        .n_pw = pos_weight ? pos_weight->numel : 0};
    if ((per = fsG_host_new(FS_F32, rank, shape)))
      fsN_ploss_forward(fsT_f32(per), fsT_f32(st.h[0]), fsT_f32(st.h[1]), (size_t)per->numel, &o);
    fsG_stage_end(&st);
    per = fsG_to_dev(per, st.dev);
    if (per) per = fsG_record(per, ploss_bw, 3, pins, NULL, NULL, param, kind);
  }
  fsT_release(xe);
  fsT_release(ye);
  if (per && weight) { /* BCE's per-element weight, broadcast */
    fs_tensor *w = fsG_binary_op(FSU_MUL, per, weight);
    fsT_release(per);
    per = w;
    if (per) memcpy(shape, per->shape, sizeof shape), rank = per->rank;
  }
  if (!per) return NULL;
  double divisor = red == FSG_BATCHMEAN ? (double)(rank ? shape[0] : 1) : (double)per->numel;
  return reduce(per, red, divisor, rank, shape);
}

/* ---- cosine similarity ---- */

/* sum(a b, dim) / sqrt(max(sum(a a, dim) sum(b b, dim), eps^2)), torch 1.12's
 * formula, composed of the tape's ops (their backwards give its gradient) */
fs_tensor *fsG_cosine_similarity(fs_tensor *a, fs_tensor *b, int dim, double eps) {
  int64_t shape[FS_MAX_RANK];
  int rank;
  if (fsU_broadcast_shape(a->rank, a->shape, b->rank, b->shape, &rank, shape) < 0) return NULL;
  /* both in the broadcast shape (views when nothing stretches), then the sums */
  fs_tensor *ea = fsG_expand(a, rank, shape), *eb = ea ? fsG_expand(b, rank, shape) : NULL;
  fs_tensor *ab = eb ? fsG_binary_op(FSU_MUL, ea, eb) : NULL, *aa = ab ? fsG_binary_op(FSU_MUL, ea, ea) : NULL;
  fs_tensor *bb = aa ? fsG_binary_op(FSU_MUL, eb, eb) : NULL;
  fs_tensor *w12 = bb ? fsG_sum_dim(ab, dim, false, false) : NULL;
  fs_tensor *w1 = w12 ? fsG_sum_dim(aa, dim, false, false) : NULL, *w2 = w1 ? fsG_sum_dim(bb, dim, false, false) : NULL;
  fs_tensor *n = w2 ? fsG_binary_op(FSU_MUL, w1, w2) : NULL;
  fs_tensor *c = n ? fsG_unary(FSU_CLAMP, n, eps * eps, NAN) : NULL, *q = c ? fsG_unary(FSU_SQRT, c, 0, 0) : NULL;
  fs_tensor *out = q ? fsG_binary_op(FSU_DIV, w12, q) : NULL;
  fs_tensor *all[] = {ea, eb, ab, aa, bb, w12, w1, w2, n, c, q};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fsT_release(all[i]);
  return out;
}
