/* f64.c -- float64 on the tape: the double path of the ops a float64
 * training step uses (precision="64-true": Fabric's DoublePrecision makes
 * parameters, inputs and the forward's tensors torch.float64).  The
 * kernels float32 has too are not repeated here: ops_typed.h, nn_typed.h
 * and loss_typed.h hold each one's body once over an element type
 * (typed.h), which ops.c, nn.c and loss.c instantiate for float32 and
 * f64_kernels.c for double (the cpu's float64 table); here the ops check,
 * allocate, record the tape and call their device's kernels.
 *
 * Invariant: a float64 tensor is only computed on here, in double, through
 * its device's float64 table (fsB_of(t)->f64, f64_kernels.h: the cpu's,
 * emulated cuda's, cuda's), so these ops are one text on every device and
 * never read device memory from the host (a host check of indices copies
 * them first); its gradient is a float64 tensor on its device
 * (fsG_grad_buf_f64), as torch's .grad has the parameter's dtype.  The ops
 * with a double path dispatch here at their entry point (fsG_any_f64): linear, matmul/bmm, activations, the
 * tensor API's elementwise functions, broadcast arithmetic, sum/mean (whole
 * or over a dim), softmax/log_softmax, cross_entropy, the cast, and the
 * GPT's embedding, positional embedding, layer norm and fused causal
 * attention; reshapes, windows and indexing move 8-byte elements and take
 * their backward from here.  f64_ops.c has the others' (where, max/min,
 * topk, logsumexp, cumsum, dropout, the elementwise and class losses,
 * index_select; f64_cnn.c the convolutional layers and norms).  An op
 * without a double path would meet float64 inputs in fsG_low_begin
 * (precision.c), which refuses them with an error naming the op, so no
 * float32 kernel ever reads double storage.  Formulas are
 * torch 1.13's; matrix products are the table's dgemm (OpenBLAS's,
 * cuBLAS's).  The other half: autograd_int.h declares these, precision.c's
 * cast and refusal, f64_kernels.c / backend_emu.c / f64_cuda.cu the
 * kernels. */
#include "autograd.h"
#include "autograd_int.h"
#include "f64_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool fsG_any_f64(int n, fs_tensor *const *ins) {
  for (int i = 0; i < n; i++)
    if (ins[i] && ins[i]->dtype == FS_F64) return true;
  return false;
}

/* The float64 kernels of the inputs' one device (every backend has them),
 * or NULL + fsT_error (data missing, devices mixed). */
static const fsB_f64_kernels *kernels_of(const char *op, int n, fs_tensor *const *ins) {
  const fsB_backend *be = fsG_check_inputs(op, n, ins);
  return be ? be->f64 : NULL;
}

static const fsB_f64_kernels *f64_of(const fs_tensor *t) { return fsB_of(t)->f64; }

static fs_tensor *new64(fs_device dev, int rank, const int64_t *shape) { return fsT_new(FS_F64, dev, rank, shape); }

/* A 0-dim float64 tensor holding v on dev */
static fs_tensor *scalar64(fs_device dev, double v) {
  fs_tensor *t = new64(dev, 0, NULL);
  if (t && fsB_get(dev)->from_host(t->data, &v, sizeof v) < 0) {
    fsT_release(t);
    return NULL;
  }
  return t;
}

int fsG_grad_buf_f64(fs_tensor *t, double **g) {
  *g = NULL;
  if (!t || !t->requires_grad) return 0;
  if (!t->grad && !(t->grad = fsT_zeros(FS_F64, t->device, t->rank, t->shape))) return -1;
  if (t->grad->dtype != FS_F64 && fsT_set_dtype(t->grad, FS_F64) < 0) return -1;
  *g = fsT_f64(t->grad);
  return 0;
}

int fsG_add_grad_f64(fs_tensor *x, const fs_tensor *g) {
  if (!x->requires_grad) return 0;
  if (x->dtype != FS_F64) { /* a float32 input of a cast to float64 */
    float *dx;
    if (fsG_grad_buf(x, &dx)) return -1;
    fs_tensor *hg = fsT_to_device((fs_tensor *)g, FS_DEV_CPU), *g32 = hg ? fsT_to_dtype(hg, FS_F32) : NULL;
    fs_tensor *dg = g32 ? fsT_to_device(g32, x->device) : NULL;
    int rc = dg ? 0 : -1;
    if (dg) fsB_of(x)->axpy((size_t)x->numel, 1.0f, fsT_f32(dg), dx);
    fsT_release(hg);
    fsT_release(g32);
    fsT_release(dg);
    return rc < 0 ? rc : fsG_round_grad(x);
  }
  double *dx;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  fs_tensor *g64 = fsT_to_dtype((fs_tensor *)g, FS_F64);
  if (!g64) return -1;
  f64_of(x)->axpy((size_t)x->numel, 1.0, fsT_f64(g64), dx);
  fsT_release(g64);
  return 0;
}

/* Every int64 index of idx lies in [0, n), read on the host (a copy of a
 * device's); false + fsT_error with fmt (the index, then n) otherwise. */
static bool indices_below(const char *fmt, fs_tensor *idx, int64_t n) {
  fs_tensor *h = fsG_on_host(idx);
  if (!h) return false;
  bool ok = true;
  for (int64_t i = 0; ok && i < h->numel; i++)
    if (fsT_i64(h)[i] < 0 || fsT_i64(h)[i] >= n) {
      fsT_seterr(fmt, (long long)fsT_i64(h)[i], (long long)n);
      ok = false;
    }
  fsT_release(h);
  return ok;
}

/* Element 0 of an output gradient, as a double. */
static int grad_item(const fs_tensor *out, double *g) { return fsG_item(out->grad, g); }

static int64_t rows_of(const fs_tensor *t) {
  return t->rank ? t->numel / (t->shape[t->rank - 1] ? t->shape[t->rank - 1] : 1) : 1;
}

/* x converted to float64 on the tape (a float input's gradient flows back
 * through the cast), or a new reference to x when it is float64 already. */
static fs_tensor *as64(fs_tensor *x) { return x ? fsG_cast(x, FS_F64) : NULL; }

/* torch's name of a scalar type in its dtype-mismatch message */
static const char *scalar_type(fs_dtype dt) {
  static const char *const names[] = {[FS_F32] = "Float", [FS_BF16] = "BFloat16", [FS_I64] = "Long",
                                      [FS_BOOL] = "Bool", [FS_F16] = "Half", [FS_F64] = "Double"};
  return names[dt];
}

/* The ops that do not promote (linear, matmul, layer_norm): every operand
 * present has the first one's dtype, else torch's error. */
bool fsG_one_dtype(int n, fs_tensor *const *ins) {
  for (int i = 1; i < n; i++)
    if (ins[i] && ins[i]->dtype != ins[0]->dtype) {
      fsT_seterr("expected scalar type %s but found %s", scalar_type(ins[0]->dtype), scalar_type(ins[i]->dtype));
      return false;
    }
  return true;
}

/* ---- linear: out = x W^T + b ---- */

static int linear64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *W = n->in[1], *b = n->in[2];
  double *dx, *dW, *db;
  if (fsG_grad_buf_f64(x, &dx) || fsG_grad_buf_f64(W, &dW) || fsG_grad_buf_f64(b, &db)) return -1;
  return f64_of(x)->linear_backward(dx, dW, db, fsT_f64(out->grad), fsT_f64(x), fsT_f64(W), rows_of(x),
                                    W->shape[1], W->shape[0]);
}

fs_tensor *fsG_linear_f64(fs_tensor *x, fs_tensor *W, fs_tensor *b) {
  fs_tensor *ins[3] = {x, W, b};
  const fsB_f64_kernels *f = fsG_one_dtype(3, ins) ? kernels_of("linear", 3, ins) : NULL;
  if (!f) return NULL;
  int64_t C = x->rank ? x->shape[x->rank - 1] : 1;
  if (x->rank == 0 || W->rank != 2 || C != W->shape[1]) {
    fsT_seterr("mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)", (long long)rows_of(x),
               (long long)C, (long long)(W->rank == 2 ? W->shape[1] : W->numel), (long long)W->shape[0]);
    return NULL;
  }
  int64_t shape[FS_MAX_RANK], R = rows_of(x), O = W->shape[0];
  memcpy(shape, x->shape, sizeof shape);
  shape[x->rank - 1] = O;
  fs_tensor *out = new64(x->device, x->rank, shape);
  if (!out) return NULL;
  if (f->linear_forward(fsT_f64(out), fsT_f64(x), fsT_f64(W), b ? fsT_f64(b) : NULL, R, C, O) < 0) {
    fsT_release(out);
    return NULL;
  }
  return fsG_record(out, linear64_bw, 3, ins, NULL, NULL, 0, 0);
}

/* ---- activations (nn.h's fsN_act) ---- */

static int act64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dx;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  if (dx) f64_of(x)->act_backward((fsN_act)n->k, dx, fsT_f64(out->grad), fsT_f64(x), fsT_f64(out), (size_t)x->numel);
  return 0;
}

fs_tensor *fsG_act_f64(fsN_act act, fs_tensor *x) {
  const fsB_f64_kernels *f = kernels_of("activation", 1, &x);
  fs_tensor *out = f ? new64(x->device, x->rank, x->shape) : NULL;
  if (!out) return NULL;
  f->act_forward(act, fsT_f64(out), fsT_f64(x), (size_t)x->numel);
  return fsG_record(out, act64_bw, 1, &x, NULL, NULL, 0, act);
}

/* ---- arithmetic: a op b, broadcast as torch ---- */

/* a and b broadcast to out's shape, for ops.c's binary kernels */
static fsU_bcast bcast_of(const fs_tensor *a, const fs_tensor *b, const fs_tensor *out) {
  fsU_bcast bc = {.rank = out->rank, .numel = out->numel};
  memcpy(bc.shape, out->shape, sizeof bc.shape);
  fsU_bcast_strides(a->rank, a->shape, out->rank, out->shape, bc.st[0]);
  fsU_bcast_strides(b->rank, b->shape, out->rank, out->shape, bc.st[1]);
  return bc;
}

static int binary64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *a = n->in[0], *b = n->in[1];
  double *da, *db;
  if (fsG_grad_buf_f64(a, &da) || fsG_grad_buf_f64(b, &db)) return -1;
  if (!da && !db) return 0;
  fsU_bcast bc = bcast_of(a, b, out);
  f64_of(out)->binary_backward((fsU_binary)n->k, &bc, da, db, fsT_f64(out->grad), fsT_f64(a), fsT_f64(b), fsT_f64(out));
  return 0;
}

fs_dtype fsG_promoted64(const fs_tensor *a, const fs_tensor *b) {
  const fs_tensor *other = a->dtype == FS_F64 ? b : a, *f64 = a->dtype == FS_F64 ? a : b;
  if (other->dtype != FS_F64 && fsT_is_float(other->dtype) && other->rank && !f64->rank) return other->dtype;
  return FS_F64;
}

fs_tensor *fsG_binary_f64(fsU_binary op, fs_tensor *a0, fs_tensor *b0) {
  fs_dtype to = fsG_promoted64(a0, b0);
  if (to != FS_F64) { /* a float64 0-dim tensor with a float tensor: the float's type */
    fs_tensor *a = fsG_cast(a0, to), *b = a ? fsG_cast(b0, to) : NULL;
    fs_tensor *out = !b ? NULL : op <= FSU_DIV ? fsG_binary((fsB_binop)op, a, b) : fsG_binary_op(op, a, b);
    fsT_release(a);
    fsT_release(b);
    return out;
  }
  fs_tensor *a = as64(a0), *b = a ? as64(b0) : NULL, *out = NULL;
  fs_tensor *ins[2] = {a, b};
  const fsB_f64_kernels *f = b ? kernels_of("arithmetic", 2, ins) : NULL;
  if (!f) goto done;
  int64_t shape[FS_MAX_RANK];
  int rank;
  if (fsU_broadcast_shape(a->rank, a->shape, b->rank, b->shape, &rank, shape) < 0 ||
      !(out = new64(a->device, rank, shape)))
    goto done;
  fsU_bcast bc = bcast_of(a, b, out);
  f->binary_forward(op, &bc, fsT_f64(a), fsT_f64(b), fsT_f64(out));
  out = fsG_record(out, binary64_bw, 2, ins, NULL, NULL, 0, op);
done:
  fsT_release(a);
  fsT_release(b);
  return out;
}

fs_tensor *fsG_binary_scalar_f64(fsB_binop op, fs_tensor *a, double s, bool scalar_first) {
  fs_tensor *st = scalar64(a->device, s); /* a Python float stays a double, as torch's scalar arguments do */
  if (!st) return NULL;
  fsU_binary u = (fsU_binary)op; /* FSB_ADD..DIV are FSU_'s */
  fs_tensor *out = scalar_first ? fsG_binary_f64(u, st, a) : fsG_binary_f64(u, a, st);
  fsT_release(st);
  return out;
}

/* ---- reductions ---- */

static int sum64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dx, g;
  if (fsG_grad_buf_f64(x, &dx) || grad_item(out, &g) < 0) return -1;
  if (dx) f64_of(x)->shift((size_t)x->numel, g * n->s, dx); /* s = 1 for sum, 1/N for mean */
  return 0;
}

fs_tensor *fsG_reduce_f64(fs_tensor *x, bool mean) {
  const fsB_f64_kernels *f = kernels_of(mean ? "mean" : "sum", 1, &x);
  if (!f) return NULL;
  double s = f->sum((size_t)x->numel, fsT_f64(x));
  fs_tensor *out = scalar64(x->device, mean ? s / (double)x->numel : s);
  if (!out) return NULL;
  return fsG_record(out, sum64_bw, 1, &x, NULL, NULL, mean ? 1.0 / (double)x->numel : 1.0, 0);
}

/* ---- cross_entropy: logits [N, C] (or [B, T, C]) with int64 targets, mean ---- */

static int cross_entropy64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *logits = n->in[0], *targets = n->in[1];
  double *dl, g;
  if (fsG_grad_buf_f64(logits, &dl) || grad_item(out, &g) < 0) return -1;
  if (dl)
    f64_of(logits)->cross_entropy_backward(dl, fsT_f64(logits), fsT_i64(targets), targets->numel,
                                   logits->shape[logits->rank - 1], g);
  return 0;
}

fs_tensor *fsG_cross_entropy_f64(fs_tensor *logits, fs_tensor *targets) {
  fs_tensor *ins[2] = {logits, targets};
  const fsB_f64_kernels *f = kernels_of("cross_entropy", 2, ins);
  if (!f) return NULL;
  if (targets->dtype != FS_I64 || logits->rank < 2 || targets->rank != logits->rank - 1 ||
      memcmp(logits->shape, targets->shape, (size_t)targets->rank * sizeof targets->shape[0])) {
    char a[96], b[96];
    fsT_seterr("cross_entropy: float64 logits %s with %s targets %s (expected [N, C] with int64 [N], or [B, T, C] with [B, T])",
               fsT_shape_str(logits, a, sizeof a), fsT_dtype_name(targets->dtype), fsT_shape_str(targets, b, sizeof b));
    return NULL;
  }
  int64_t C = logits->shape[logits->rank - 1], R = targets->numel;
  if (!indices_below("Target %lld is out of bounds.", targets, C)) return NULL;
  fs_tensor *out = scalar64(logits->device, f->cross_entropy_forward(fsT_f64(logits), fsT_i64(targets), R, C));
  if (!out) return NULL;
  return fsG_record(out, cross_entropy64_bw, 2, ins, NULL, NULL, 0, 0);
}

/* ---- the tensor API's elementwise functions (ops.h's fsU_unary) ---- */

static int unary64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dx;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  if (dx)
    f64_of(x)->unary_backward((fsU_unary)n->k, (size_t)x->numel, dx, fsT_f64(out->grad), fsT_f64(x), fsT_f64(out), n->s,
                           n->s2);
  return 0;
}

fs_tensor *fsG_unary_f64(fsU_unary op, fs_tensor *x, double p0, double p1) {
  const fsB_f64_kernels *f = kernels_of("elementwise", 1, &x);
  fs_tensor *out = f ? new64(x->device, x->rank, x->shape) : NULL;
  if (!out) return NULL;
  f->unary_forward(op, (size_t)x->numel, fsT_f64(x), fsT_f64(out), p0, p1);
  out = fsG_record(out, unary64_bw, 1, &x, NULL, NULL, p0, op);
  if (out && out->node) out->node->s2 = p1;
  return out;
}

/* ---- softmax / log_softmax over one dim: x seen as [O, L, I] ---- */

/* out, its node keeping the [O, L, I] view of the input for the backward */
static fs_tensor *with_oli(fs_tensor *out, int64_t O, int64_t L, int64_t I) {
  if (out && out->node) {
    out->node->iv[0] = O;
    out->node->iv[1] = L;
    out->node->iv[2] = I;
  }
  return out;
}

static int softmax64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dx;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  if (!dx) return 0;
  /* k: log_softmax */
  f64_of(x)->softmax_backward(n->k, n->iv[0], n->iv[1], n->iv[2], dx, fsT_f64(out->grad), fsT_f64(out));
  return 0;
}

fs_tensor *fsG_softmax_f64(fs_tensor *x, int dim, bool log_) {
  int d;
  const fsB_f64_kernels *f = kernels_of(log_ ? "log_softmax" : "softmax", 1, &x);
  if (!f || fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t O, L, I;
  fsG_split_at(x, d, &O, &L, &I);
  fs_tensor *out = new64(x->device, x->rank, x->shape);
  if (!out) return NULL;
  f->softmax_forward(log_, O, L, I, fsT_f64(x), fsT_f64(out));
  return with_oli(fsG_record(out, softmax64_bw, 1, &x, NULL, NULL, 0, log_), O, L, I);
}

/* ---- the GPT's layers: embedding, positional embedding, layer norm,
 * causal self-attention (nn_typed.h's kernels, over double) ---- */

static int embedding64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *idx = n->in[0], *W = n->in[1];
  double *dW;
  if (fsG_grad_buf_f64(W, &dW)) return -1;
  if (dW) f64_of(W)->embedding_backward(dW, fsT_f64(out->grad), fsT_i64(idx), idx->numel, W->shape[1]);
  return 0;
}

fs_tensor *fsG_embedding_f64(fs_tensor *idx, fs_tensor *W) {
  fs_tensor *ins[2] = {idx, W};
  const fsB_f64_kernels *f = kernels_of("embedding", 2, ins);
  if (!f) return NULL;
  if (idx->dtype != FS_I64 || idx->rank >= FS_MAX_RANK || W->rank != 2) {
    fsT_seterr("embedding: expected int64 indices of rank < %d and a float64 weight [num, dim], got %s indices",
               FS_MAX_RANK, fsT_dtype_name(idx->dtype));
    return NULL;
  }
  if (!indices_below("index %lld is out of range for an embedding of %lld rows", idx, W->shape[0])) return NULL;
  int64_t shape[FS_MAX_RANK], D = W->shape[1];
  memcpy(shape, idx->shape, (size_t)idx->rank * sizeof *shape);
  shape[idx->rank] = D;
  fs_tensor *out = new64(W->device, idx->rank + 1, shape);
  if (!out) return NULL;
  f->embedding_forward(fsT_f64(out), fsT_i64(idx), fsT_f64(W), idx->numel, D);
  return fsG_record(out, embedding64_bw, 2, ins, NULL, NULL, 0, 0);
}

static int posemb64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *W = n->in[1];
  double *dx, *dW;
  if (fsG_grad_buf_f64(x, &dx) || fsG_grad_buf_f64(W, &dW)) return -1;
  int64_t T = x->shape[x->rank - 2], D = x->shape[x->rank - 1], B = T && D ? x->numel / (T * D) : 0;
  f64_of(W)->posemb_backward(dx, dW, fsT_f64(out->grad), B, T, D);
  return 0;
}

fs_tensor *fsG_posemb_f64(fs_tensor *x0, fs_tensor *W0) {
  fs_tensor *x = as64(x0), *W = x ? as64(W0) : NULL, *out = NULL;
  fs_tensor *ins[2] = {x, W};
  const fsB_f64_kernels *f = W ? kernels_of("positional embedding", 2, ins) : NULL;
  if (!f) goto done;
  if (x->rank < 2 || W->rank != 2 || x->shape[x->rank - 1] != W->shape[1] || x->shape[x->rank - 2] > W->shape[0]) {
    char s[96];
    fsT_seterr("PositionalEmbedding(%lld, %lld): expected input [..., T <= %lld, %lld], got %s", (long long)W->shape[0],
               (long long)W->shape[1], (long long)W->shape[0], (long long)W->shape[1], fsT_shape_str(x, s, sizeof s));
    goto done;
  }
  if (!(out = new64(x->device, x->rank, x->shape))) goto done;
  int64_t T = x->shape[x->rank - 2], D = x->shape[x->rank - 1], B = T && D ? x->numel / (T * D) : 0;
  f->posemb_forward(fsT_f64(out), fsT_f64(x), fsT_f64(W), B, T, D);
  out = fsG_record(out, posemb64_bw, 2, ins, NULL, NULL, 0, 0);
done:
  fsT_release(x);
  fsT_release(W);
  return out;
}

/* saved[0] holds the rows' means, then their rstds */
static int layernorm64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
  double *dx, *dw, *db;
  if (fsG_grad_buf_f64(x, &dx) || fsG_grad_buf_f64(w, &dw) || fsG_grad_buf_f64(b, &db)) return -1;
  int64_t C = w->numel, N = rows_of(x);
  const double *st = fsT_f64(n->saved[0]);
  f64_of(x)->layernorm_backward(dx, dw, db, fsT_f64(out->grad), fsT_f64(x), fsT_f64(w), st, st + N, N, C);
  return 0;
}

fs_tensor *fsG_layernorm_f64(fs_tensor *x, fs_tensor *w, fs_tensor *b, double eps) {
  if (!w || !b) {
    fsT_seterr("layer_norm: the float64 path takes a weight and a bias");
    return NULL;
  }
  fs_tensor *out = NULL, *st = NULL, *ins[3] = {x, w, b};
  const fsB_f64_kernels *f = fsG_one_dtype(3, ins) ? kernels_of("layer_norm", 3, ins) : NULL;
  if (!f) return NULL;
  int64_t C = w->numel, N = rows_of(x), two_n = 2 * N;
  if (x->rank == 0 || x->shape[x->rank - 1] != C || b->numel != C) {
    char s[96];
    fsT_seterr("Given normalized_shape=[%lld], expected input with shape [*, %lld], but got input of size%s",
               (long long)C, (long long)C, fsT_shape_str(x, s, sizeof s));
    return NULL;
  }
  if (!(out = new64(x->device, x->rank, x->shape)) || !(st = new64(x->device, 1, &two_n))) {
    fsT_release(out);
    return NULL;
  }
  f->layernorm_forward(fsT_f64(out), fsT_f64(st), fsT_f64(st) + N, fsT_f64(x), fsT_f64(w), fsT_f64(b), N, C, eps);
  return fsG_record(out, layernorm64_bw, 3, ins, st, NULL, eps, 0);
}

/* qkv [B, T, 3C] -> [B, T, C]; saved[0] the probabilities [B, NH, T, T] */
static int attention64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dinp;
  if (fsG_grad_buf_f64(x, &dinp)) return -1;
  if (!dinp) return 0;
  return f64_of(x)->attention_backward(dinp, fsT_f64(out->grad), fsT_f64(x), fsT_f64(n->saved[0]), x->shape[0],
                                    x->shape[1], x->shape[2] / 3, n->k);
}

fs_tensor *fsG_attention_f64(fs_tensor *qkv, int64_t heads) {
  const fsB_f64_kernels *f = kernels_of("attention", 1, &qkv);
  if (!f) return NULL;
  if (qkv->rank != 3 || qkv->shape[2] % 3 || heads <= 0 || (qkv->shape[2] / 3) % heads) {
    char s[96];
    fsT_seterr("attention: expected input [B, T, 3*C] with C divisible by %lld heads, got %s", (long long)heads,
               fsT_shape_str(qkv, s, sizeof s));
    return NULL;
  }
  int64_t B = qkv->shape[0], T = qkv->shape[1], C = qkv->shape[2] / 3;
  int64_t oshape[3] = {B, T, C}, ashape[4] = {B, heads, T, T};
  fs_tensor *out = new64(qkv->device, 3, oshape), *att = out ? new64(qkv->device, 4, ashape) : NULL;
  if (!att) {
    fsT_release(out);
    return NULL;
  }
  if (f->attention_forward(fsT_f64(out), fsT_f64(att), fsT_f64(qkv), B, T, C, heads) < 0) {
    fsT_release(out);
    fsT_release(att);
    return NULL;
  }
  return fsG_record(out, attention64_bw, 1, &qkv, att, NULL, 0, heads);
}

/* ---- windows of float64 tensors: the forward moves 8-byte elements
 * (ops_grad.c's fsG_window); the backward finds where each element came
 * from by running the same window over the positions 0..numel-1 ---- */

int fsG_window_bw_f64(fs_tensor *x, const fsU_window *w, const fs_tensor *g) {
  double *dx;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  if (!dx) return 0;
  int64_t *pos = malloc((size_t)x->numel * sizeof *pos + 1);
  fs_tensor *at = pos ? fsT_new(FS_I64, FS_DEV_CPU, g->rank, g->shape) : NULL;
  if (!at) {
    free(pos);
    if (!pos) fsT_seterr("out of memory");
    return -1;
  }
  for (int64_t i = 0; i < x->numel; i++) pos[i] = i;
  fsU_cpu.gather(w, sizeof *pos, pos, fsT_i64(at));
  free(pos);
  int rc = fsG_take_bw_f64(x, at, g);
  fsT_release(at);
  return rc;
}

/* ---- sum / mean over one dim: x seen as [O, L, I] ---- */

static int sum_dim64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  double *dx;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  if (!dx) return 0;
  int64_t O = n->iv[0], L = n->iv[1], I = n->iv[2];
  const fsB_f64_kernels *f = f64_of(x);
  fs_tensor *scaled = NULL;
  if (n->s != 1) { /* mean: the gradient scaled by 1/L, then summed back as a sum's */
    if (!(scaled = new64(out->device, out->rank, out->shape))) return -1;
    fsB_of(out)->copy(scaled->data, out->grad->data, (size_t)out->numel * sizeof(double));
    f->scale((size_t)out->numel, n->s, fsT_f64(scaled));
  }
  f->sum_dim_backward(O, L, I, dx, fsT_f64(scaled ? scaled : out->grad));
  fsT_release(scaled);
  return 0;
}

fs_tensor *fsG_sum_dim_f64(fs_tensor *x, int dim, bool keepdim, bool mean) {
  int d;
  const fsB_f64_kernels *f = kernels_of(mean ? "mean" : "sum", 1, &x);
  if (!f || fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t O, L, I, shape[FS_MAX_RANK];
  fsG_split_at(x, d, &O, &L, &I);
  int rank = 0;
  for (int k = 0; k < x->rank; k++)
    if (k != d || keepdim) shape[rank++] = k == d ? 1 : x->shape[k];
  fs_tensor *out = new64(x->device, rank, shape);
  if (!out) return NULL;
  f->sum_dim_forward(O, L, I, fsT_f64(x), fsT_f64(out));
  if (mean) f->divide((size_t)out->numel, (double)L, fsT_f64(out));
  return with_oli(fsG_record(out, sum_dim64_bw, 1, &x, NULL, NULL, mean ? 1.0 / (double)L : 1.0, 0), O, L, I);
}

/* ---- matmul: [..., M, K] @ [K, N] and [..., M, K] @ [..., K, N] (the
 * same leading dims: a batch of products) ---- */

/* k: 0 when b is one matrix shared by every row block of a, else a batch */
static int matmul64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *a = n->in[0], *b = n->in[1];
  double *da, *db;
  if (fsG_grad_buf_f64(a, &da) || fsG_grad_buf_f64(b, &db)) return -1;
  const fsB_f64_kernels *f = f64_of(a);
  int64_t K = a->shape[a->rank - 1], N = b->shape[b->rank - 1];
  int64_t M = n->k ? a->shape[a->rank - 2] : rows_of(a), B = n->k && M * K != 0 ? a->numel / (M * K) : 1;
  for (int64_t i = 0; i < B; i++) {
    const double *g = fsT_f64(out->grad) + i * M * N, *av = fsT_f64(a) + i * M * K, *bv = fsT_f64(b) + (n->k ? i * K * N : 0);
    if (da && f->gemm(false, true, M, K, N, 1.0, g, N, bv, N, 1.0, da + i * M * K, K) < 0) return -1;
    if (db && f->gemm(true, false, K, N, M, 1.0, av, K, g, N, 1.0, db + (n->k ? i * K * N : 0), N) < 0) return -1;
  }
  return 0;
}

fs_tensor *fsG_matmul_f64(fs_tensor *a, fs_tensor *b) {
  fs_tensor *ins[2] = {a, b};
  const fsB_f64_kernels *f = fsG_one_dtype(2, ins) ? kernels_of("matmul", 2, ins) : NULL;
  if (!f) return NULL;
  bool shared = b->rank == 2 && a->rank >= 2;
  bool batched = a->rank >= 3 && b->rank == a->rank &&
                 !memcmp(a->shape, b->shape, (size_t)(a->rank - 2) * sizeof *a->shape); /* the same leading dims */
  if ((shared || batched) && a->shape[a->rank - 1] != b->shape[b->rank - 2]) {
    fsT_seterr("mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)", (long long)rows_of(a),
               (long long)a->shape[a->rank - 1], (long long)b->shape[b->rank - 2], (long long)b->shape[b->rank - 1]);
    return NULL;
  }
  if (!shared && !batched) {
    char sa[96], sb[96];
    fsT_seterr("matmul: float64 operands %s and %s: the float64 path multiplies [..., M, K] by [K, N] or "
               "[..., M, K] by [..., K, N]", fsT_shape_str(a, sa, sizeof sa), fsT_shape_str(b, sb, sizeof sb));
    return NULL;
  }
  int64_t shape[FS_MAX_RANK], K = a->shape[a->rank - 1], N = b->shape[b->rank - 1];
  memcpy(shape, a->shape, sizeof shape);
  shape[a->rank - 1] = N;
  fs_tensor *out = new64(a->device, a->rank, shape);
  if (!out) return NULL;
  int64_t M = batched ? a->shape[a->rank - 2] : rows_of(a), B = batched && M * K != 0 ? a->numel / (M * K) : 1;
  for (int64_t i = 0; i < B; i++)
    if (f->gemm(false, false, M, N, K, 1.0, fsT_f64(a) + i * M * K, K, fsT_f64(b) + (batched ? i * K * N : 0), N,
                  0.0, fsT_f64(out) + i * M * N, N) < 0) {
      fsT_release(out);
      return NULL;
    }
  return fsG_record(out, matmul64_bw, 2, ins, NULL, NULL, 0, batched);
}

int fsG_take_bw_f64(fs_tensor *x, const fs_tensor *offs, const fs_tensor *g) {
  double *dx;
  if (fsG_grad_buf_f64(x, &dx)) return -1;
  if (!dx) return 0;
  /* the offsets where the gradient is (a staged take kept them on the host) */
  fs_tensor *at = fsT_to_device((fs_tensor *)offs, x->device);
  if (!at) return -1;
  f64_of(x)->take_backward(offs->numel, fsT_i64(at), dx, fsT_f64(g));
  fsT_release(at);
  return 0;
}
