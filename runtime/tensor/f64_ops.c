/* f64_ops.c -- the double path of the ops beyond the MLP's and the GPT's
 * (f64.c has those): where / masked_fill, max / min over a dim (and so
 * over everything, argmax, argmin), topk, logsumexp and cumsum over a
 * dim, dropout, the elementwise losses' per-element values and the class
 * losses' rows (nll_loss, cross_entropy with its options), index_select.
 * As in f64.c, each op checks, allocates and records the tape once and
 * calls its device's float64 table (fsB_of(t)->f64, f64_kernels.h), whose
 * kernels are the float32 ones' text over double (ops_typed.h,
 * nn_typed.h, loss_typed.h; cuda's f64_cuda.cu), so emulated cuda runs
 * them with the cpu's bits.
 *
 * Invariant: formulas are torch 1.13's for float64 tensors; what these
 * ops compose (nll's rows, index_select's offsets) goes through the tape's
 * float64 ops, whose backwards give the gradient.  The other half: the
 * float32 entry points (ops_grad.c, autograd.c, loss_grad.c), which
 * dispatch here with fsG_any_f64. */
#include "autograd.h"
#include "autograd_int.h"
#include "f64_kernels.h"

#include <string.h>

static const fsB_f64_kernels *kernels_of(const char *op, int n, fs_tensor *const *ins) {
  const fsB_backend *be = fsG_check_inputs(op, n, ins);
  return be ? be->f64 : NULL;
}

static const fsB_f64_kernels *f64_of(const fs_tensor *t) { return fsB_of(t)->f64; }

/* out, its node keeping x's [O, L, I] view for the backward */
static fs_tensor *with_oli(fs_tensor *out, int64_t O, int64_t L, int64_t I) {
  if (out && out->node) out->node->iv[0] = O, out->node->iv[1] = L, out->node->iv[2] = I;
  return out;
}

/* ---- where(cond, a, b) (masked_fill is where(mask, value, x)) ---- */

/* bc over {cond, a, b} */
static int where_bcast(fsU_bcast *bc, fs_tensor *const *ins) {
  bc->rank = 0;
  for (int i = 0; i < 3; i++)
    if (fsU_broadcast_shape(bc->rank, bc->shape, ins[i]->rank, ins[i]->shape, &bc->rank, bc->shape) < 0) return -1;
  bc->numel = 1;
  for (int d = 0; d < bc->rank; d++) bc->numel *= bc->shape[d];
  for (int i = 0; i < 3; i++) fsU_bcast_strides(ins[i]->rank, ins[i]->shape, bc->rank, bc->shape, bc->st[i]);
  return 0;
}

static int where64_bw(fsG_node *n, fs_tensor *out) {
  double *da, *db;
  fsU_bcast bc;
  if (fsG_grad_buf_f64(n->in[1], &da) || fsG_grad_buf_f64(n->in[2], &db) || where_bcast(&bc, n->in) < 0) return -1;
  if (da || db) f64_of(out)->where_backward(&bc, fsT_i64(n->in[0]), da, db, fsT_f64(out->grad));
  return 0;
}

fs_tensor *fsG_where_f64(fs_tensor *cond, fs_tensor *a0, fs_tensor *b0) {
  fs_dtype to = fsG_promoted64(a0, b0);
  if (to != FS_F64) { /* a 0-dim float64 with a float tensor: the float's type */
    fs_tensor *a = fsG_cast(a0, to), *b = a ? fsG_cast(b0, to) : NULL;
    fs_tensor *out = b ? fsG_where(cond, a, b) : NULL;
    fsT_release(a);
    fsT_release(b);
    return out;
  }
  if (cond->dtype != FS_I64 && cond->dtype != FS_BOOL) {
    fsT_seterr("where expected condition to be a boolean tensor, but got a tensor with dtype %s",
               fsT_dtype_name(cond->dtype));
    return NULL;
  }
  fs_tensor *c = fsG_unbool(cond), *a = c ? fsG_cast(a0, FS_F64) : NULL, *b = a ? fsG_cast(b0, FS_F64) : NULL;
  fs_tensor *ins[3] = {c, a, b}, *out = NULL;
  const fsB_f64_kernels *f = b ? kernels_of("where", 3, ins) : NULL;
  fsU_bcast bc;
  if (f && where_bcast(&bc, ins) == 0 && (out = fsT_new(FS_F64, a->device, bc.rank, bc.shape))) {
    f->where_forward(&bc, fsT_i64(c), fsT_f64(a), fsT_f64(b), fsT_f64(out));
    out = fsG_record(out, where64_bw, 3, ins, NULL, NULL, 0, 0);
  }
  for (int i = 0; i < 3; i++) fsT_release(ins[i]);
  return out;
}

/* ---- max / min over a dim: values and their first indices ---- */

/* saved[0]: the indices; iv: x as [O, L, I] */
static int extreme64_bw(fsG_node *n, fs_tensor *out) {
  double *dx;
  if (fsG_grad_buf_f64(n->in[0], &dx)) return -1;
  if (dx) f64_of(out)->extreme_backward(n->iv[0], n->iv[1], n->iv[2], dx, fsT_f64(out->grad), fsT_i64(n->saved[0]));
  return 0;
}

fs_tensor *fsG_extreme_f64(bool want_max, fs_tensor *x, int dim, bool keepdim, fs_tensor **indices) {
  int d;
  const char *name = want_max ? "max" : "min";
  if (indices) *indices = NULL;
  const fsB_f64_kernels *f = kernels_of(name, 1, &x);
  if (!f || fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t O, L, I, shape[FS_MAX_RANK];
  fsG_split_at(x, d, &O, &L, &I);
  if (L == 0) {
    fsT_seterr("%s(): Expected reduction dim %d to have non-zero size.", name, d);
    return NULL;
  }
  int rank = fsG_reduced_shape(x, d, keepdim, shape);
  fs_tensor *out = fsT_new(FS_F64, x->device, rank, shape);
  fs_tensor *idx = out ? fsT_new(FS_I64, x->device, rank, shape) : NULL;
  if (!idx) {
    fsT_release(out);
    return NULL;
  }
  f->extreme_forward(want_max, O, L, I, fsT_f64(x), fsT_f64(out), fsT_i64(idx));
  out = with_oli(fsG_record(out, extreme64_bw, 1, &x, fsT_retain(idx), NULL, 0, 0), O, L, I);
  if (out && indices) *indices = idx;
  else fsT_release(idx);
  return out;
}

/* ---- topk over a dim: the k largest (smallest) and their indices ---- */

/* saved[0]: the indices; iv: x as [O, L, I], k */
static int topk64_bw(fsG_node *n, fs_tensor *out) {
  double *dx;
  if (fsG_grad_buf_f64(n->in[0], &dx)) return -1;
  if (dx)
    f64_of(out)->topk_backward(n->iv[0], n->iv[1], n->iv[2], n->iv[3], dx, fsT_f64(out->grad), fsT_i64(n->saved[0]));
  return 0;
}

fs_tensor *fsG_topk_f64(fs_tensor *x, int64_t k, int d, bool largest, fs_tensor **indices) {
  const fsB_f64_kernels *f = kernels_of("topk", 1, &x);
  if (!f) return NULL;
  int64_t O, L, I, shape[FS_MAX_RANK];
  fsG_split_at(x, d, &O, &L, &I);
  memcpy(shape, x->shape, sizeof shape);
  if (x->rank) shape[d] = k;
  fs_tensor *out = fsT_new(FS_F64, x->device, x->rank, shape);
  fs_tensor *idx = out ? fsT_new(FS_I64, x->device, x->rank, shape) : NULL;
  if (idx && f->topk_forward(largest, O, L, I, k, fsT_f64(x), fsT_f64(out), fsT_i64(idx)) < 0) {
    fsT_seterr("out of memory");
    fsT_release(idx);
    idx = NULL;
  }
  if (!idx) {
    fsT_release(out);
    return NULL;
  }
  out = with_oli(fsG_record(out, topk64_bw, 1, &x, fsT_retain(idx), NULL, 0, 0), O, L, I);
  if (out && out->node) out->node->iv[3] = k;
  if (out) *indices = idx;
  else fsT_release(idx);
  return out;
}

/* ---- logsumexp over a dim, cumsum along one: torch's float64 formulas
 * (the exponentials summed and the running sums kept in double) ---- */

/* out: the forward's result, exp(x - out) the softmax the gradient spreads by */
static int logsumexp64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dx;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  if (dx)
    f64_of(x)->logsumexp_backward(n->iv[0], n->iv[1], n->iv[2], dx, fsT_f64(out->grad), fsT_f64(x), fsT_f64(out));
  return 0;
}

fs_tensor *fsG_logsumexp_f64(fs_tensor *x, int dim, bool keepdim) {
  int d;
  const fsB_f64_kernels *f = kernels_of("logsumexp", 1, &x);
  if (!f || fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t O, L, I, shape[FS_MAX_RANK];
  fsG_split_at(x, d, &O, &L, &I);
  fs_tensor *out = fsT_new(FS_F64, x->device, fsG_reduced_shape(x, d, keepdim, shape), shape);
  if (!out) return NULL;
  f->logsumexp_forward(O, L, I, fsT_f64(x), fsT_f64(out));
  return with_oli(fsG_record(out, logsumexp64_bw, 1, &x, NULL, NULL, 0, 0), O, L, I);
}

static int cumsum64_bw(fsG_node *n, fs_tensor *out) {
  double *dx;
  if (fsG_grad_buf_f64(n->in[0], &dx)) return -1;
  if (dx) f64_of(out)->cumsum_backward(n->iv[0], n->iv[1], n->iv[2], dx, fsT_f64(out->grad));
  return 0;
}

fs_tensor *fsG_cumsum_f64(fs_tensor *x, int dim) {
  int d;
  const fsB_f64_kernels *f = kernels_of("cumsum", 1, &x);
  if (!f || fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t O, L, I;
  fsG_split_at(x, d, &O, &L, &I);
  fs_tensor *out = fsT_new(FS_F64, x->device, x->rank, x->shape);
  if (!out) return NULL;
  f->cumsum_forward(O, L, I, fsT_f64(x), fsT_f64(out));
  return with_oli(fsG_record(out, cumsum64_bw, 1, &x, NULL, NULL, 0, 0), O, L, I);
}

/* ---- dropout: the float32 mask, the scale 1 / (1 - p) in double ---- */

static int dropout64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dx;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  if (dx) f64_of(x)->dropout_backward(dx, fsT_f64(out->grad), (size_t)x->numel, n->s, n->key);
  return 0;
}

fs_tensor *fsG_dropout_f64(fs_tensor *x, double p, uint64_t key) {
  const fsB_f64_kernels *f = kernels_of("dropout", 1, &x);
  fs_tensor *out = f ? fsT_new(FS_F64, x->device, x->rank, x->shape) : NULL;
  if (!out) return NULL;
  f->dropout_forward(fsT_f64(out), fsT_f64(x), (size_t)x->numel, p, key);
  out = fsG_record(out, dropout64_bw, 1, &x, NULL, NULL, p, 0);
  if (out && out->node) out->node->key = key;
  return out;
}

/* ---- elementwise losses: the per-element values of same-shaped float64
 * x and y (loss_grad.c broadcasts, weighs and reduces them) ---- */

/* in[2]: pos_weight (float64) or NULL; s: the loss's parameter */
static int ploss64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *y = n->in[1], *pw = n->in[2];
  double *dx, *dy;
  if (fsG_grad_buf_f64(x, &dx) || fsG_grad_buf_f64(y, &dy)) return -1;
  if (dx || dy)
    f64_of(out)->ploss_backward((fsN_ploss)n->k, n->s, pw ? fsT_f64(pw) : NULL, pw ? pw->numel : 0, dx, dy,
                                fsT_f64(out->grad), fsT_f64(x), fsT_f64(y), (size_t)out->numel);
  return 0;
}

fs_tensor *fsG_ploss_f64(fsN_ploss kind, fs_tensor *x, fs_tensor *y, double param, fs_tensor *pos_weight) {
  /* torch's pos_weight takes no gradient here */
  fs_tensor *pw = pos_weight ? fsT_to_dtype(pos_weight, FS_F64) : NULL, *out = NULL;
  fs_tensor *ins[3] = {x, y, pw};
  const fsB_f64_kernels *f = !pos_weight || pw ? kernels_of("loss", 3, ins) : NULL;
  if (f && (out = fsT_new(FS_F64, x->device, x->rank, x->shape))) {
    f->ploss_forward(kind, param, pw ? fsT_f64(pw) : NULL, pw ? pw->numel : 0, fsT_f64(out), fsT_f64(x), fsT_f64(y),
                     (size_t)out->numel);
    out = fsG_record(out, ploss64_bw, 3, ins, NULL, NULL, param, kind);
  }
  fsT_release(pw);
  return out;
}

/* ---- index_select: x's elements at the offsets the indices pick, taken
 * as indexing takes them (index.c's fsG_take: its backward scatter-adds) ---- */

fs_tensor *fsG_index_select_f64(fs_tensor *x, int d, const fs_tensor *pos, const int64_t *shape) {
  int64_t O, L, I, K = pos->numel;
  fsG_split_at(x, d, &O, &L, &I);
  fs_tensor *offs = fsT_new(FS_I64, FS_DEV_CPU, x->rank ? x->rank : 1, x->rank ? shape : &K);
  if (!offs) return NULL;
  int64_t *o = fsT_i64(offs);
  for (int64_t a = 0; a < O; a++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t i = 0; i < I; i++) *o++ = (a * L + fsT_i64(pos)[k]) * I + i;
  fs_tensor *out = fsG_take(x, offs);
  fsT_release(offs);
  return out;
}

/* ---- class losses: rows x [M, C] of logits (from_logits) or
 * log-probabilities, composed of the tape's float64 ops (their backwards
 * give the gradient), the per-row losses of loss.h's fsN_nll ---- */

static fs_tensor *released(fs_tensor *keep, fs_tensor *a, fs_tensor *b) {
  fsT_release(a);
  fsT_release(b);
  return keep;
}

/* a * s (a Python float: a double) */
static fs_tensor *times(fs_tensor *a, double s) { return a ? fsG_binary_scalar_f64(FSB_MUL, a, s, false) : NULL; }

/* sum_c lp[m, c] w[c] (w NULL: 1) over the class dim */
static fs_tensor *weighted_row_sums(fs_tensor *lp, fs_tensor *w) {
  fs_tensor *prod = w ? fsG_binary(FSB_MUL, lp, w) : fsT_retain(lp);
  return released(prod ? fsG_sum_dim(prod, 1, false, false) : NULL, prod, NULL);
}

/* index targets t [M]: loss[m] = -(1-ls) w[t] lp[m, t] - ls/C sum_c w[c] lp[m, c],
 * 0 where t = ignore_index; *wsum: sum_m w[t_m] over the rows not ignored */
static fs_tensor *nll_index_rows(fs_tensor *lp, fs_tensor *t, fs_tensor *w, int64_t ignore, double ls, double *wsum) {
  int64_t M = lp->shape[0], C = lp->shape[1];
  fs_tensor *ht = fsG_on_host(t), *hw = w && ht ? fsG_on_host(w) : NULL; /* ht: t itself on the cpu */
  fs_tensor *offs = ht && (!w || hw) ? fsT_new(FS_I64, FS_DEV_CPU, 1, &M) : NULL;
  fs_tensor *wrow = offs ? fsT_new(FS_F64, FS_DEV_CPU, 1, &M) : NULL;
  fs_tensor *keep = wrow ? fsT_new(FS_F64, FS_DEV_CPU, 1, &M) : NULL, *per = NULL;
  double W = 0;
  for (int64_t m = 0; keep && m < M; m++) {
    int64_t tm = fsT_i64(ht)[m];
    if (tm != ignore && (tm < 0 || tm >= C)) {
      fsT_seterr("Target %lld is out of bounds.", (long long)tm);
      goto done;
    }
    fsT_i64(offs)[m] = m * C + (tm == ignore ? 0 : tm);
    fsT_f64(keep)[m] = tm != ignore;
    W += fsT_f64(wrow)[m] = tm == ignore ? 0 : hw ? fsT_f64(hw)[tm] : 1;
  }
  if (!keep || !(wrow = fsG_to_dev(wrow, lp->device)) || !(keep = fsG_to_dev(keep, lp->device))) goto done;
  fs_tensor *picked = fsG_take(lp, offs), *wp = picked ? fsG_binary(FSB_MUL, picked, wrow) : NULL;
  per = times(released(wp, picked, NULL), -(1 - ls));
  fsT_release(wp);
  if (per && ls > 0) { /* the smoothing term, 0 on ignored rows */
    fs_tensor *s = weighted_row_sums(lp, w), *ks = s ? fsG_binary(FSB_MUL, s, keep) : NULL;
    fs_tensor *sm = times(ks, -ls / (double)C), *sum = sm ? fsG_binary(FSB_ADD, per, sm) : NULL;
    fsT_release(s);
    fsT_release(ks);
    fsT_release(sm);
    fsT_release(per);
    per = sum;
  }
  *wsum = W;
done:
  fsT_release(keep);
  fsT_release(wrow);
  fsT_release(offs);
  fsT_release(hw);
  fsT_release(ht);
  return per;
}

/* probability targets p [M, C]: loss[m] = -sum_c w[c] q[c] lp[m, c], q = (1-ls) p + ls/C */
static fs_tensor *nll_prob_rows(fs_tensor *lp, fs_tensor *p, fs_tensor *w, double ls) {
  int64_t C = lp->shape[1];
  fs_tensor *q = ls > 0 ? times(p, 1 - ls) : fsT_retain(p);
  if (q && ls > 0) q = released(fsG_binary_scalar_f64(FSB_ADD, q, ls / (double)C, false), q, NULL);
  fs_tensor *lq = q ? fsG_binary(FSB_MUL, lp, q) : NULL, *s = lq ? weighted_row_sums(lq, w) : NULL;
  return released(released(times(s, -1), s, lq), q, NULL);
}

fs_tensor *fsG_nll_rows_f64(fs_tensor *x, fs_tensor *target, fs_tensor *weight, bool from_logits, int64_t ignore,
                            double ls, double *wsum) {
  fs_tensor *x64 = fsG_cast(x, FS_F64), *w = x64 && weight ? fsG_cast(weight, FS_F64) : NULL, *per = NULL;
  fs_tensor *lp = x64 && (!weight || w) ? (from_logits ? fsG_softmax(x64, 1, true) : fsT_retain(x64)) : NULL;
  if (lp && target->dtype == FS_I64) per = nll_index_rows(lp, target, w, ignore, ls, wsum);
  else if (lp) {
    fs_tensor *p = fsG_cast(target, FS_F64);
    per = p ? nll_prob_rows(lp, p, w, ls) : NULL;
    fsT_release(p);
    *wsum = (double)x->shape[0];
  }
  fsT_release(lp);
  return released(per, x64, w);
}
