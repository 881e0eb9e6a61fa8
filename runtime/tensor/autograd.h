/* autograd.h -- a small tape: every op on tensors that require grad records a
 * node (its backward function, inputs, saved buffers) in its output, so the
 * graph hangs off the loss.  fsG_backward walks it in reverse topological
 * order, accumulating (+=) into the .grad of leaves that require grad (the
 * parameters), then frees it (torch's retain_graph=False): the intermediates'
 * grads and nodes go, and those tensors no longer require grad.
 *
 * Ops return a new reference or NULL + fsT_error (torch's message where
 * torch has one).  Inputs must have data (not meta) on one device.
 *
 * Broadcasting is torch's: shapes align on the right and a dim of 1 (or a
 * missing one) stretches; the backward of an op sums the gradient over the
 * dims it stretched.  Equal shapes and one-element operands take the
 * original fast paths; other pairs go through ops.h's strided kernels.
 *
 * Strides: every tensor is contiguous row-major.  Ops that keep that layout
 * share storage, as torch's views do: reshape/view/flatten/squeeze/
 * unsqueeze (fsG_reshape), and every window (fsG_window: a slice, select,
 * permute or expand) whose elements are one contiguous run of the input in
 * order (x[0], x[1:3], x[:, None], split/chunk along dim 0).  Other windows
 * (x[:, 0], x[::2], transpose of a matrix, expand that stretches) return a
 * contiguous COPY, so a write through their result is not seen in the
 * original (torch would show it).  Keeping one layout keeps every kernel a
 * plain loop over contiguous memory, which is what the training speed
 * rests on.
 *
 * Comparisons give bool tensors (torch.bool, one byte per element); bool
 * promotes to int64 in arithmetic and sums, so `(pred == y).sum().item()`
 * counts. */
#ifndef FS_AUTOGRAD_H
#define FS_AUTOGRAD_H

#include "backend.h"
#include "loss.h"
#include "nn.h"
#include "ops.h"
#include "tensor.h"

/* no_grad: returns the previous setting so scopes nest. */
bool fsG_set_grad_enabled(bool enabled);
bool fsG_grad_enabled(void);

/* ---- precision (precision.c) ----
 * x.to(dt), differentiable between float types (the gradient is rounded to
 * x's type when that is low).  Autocast: while it is bfloat16 (or float16),
 * linear, matmul, bmm, convolutions and attention compute in that type,
 * losses in float32 and every other op in its inputs' types, as torch's
 * CPU autocast; FS_F32 turns it off.  Returns the previous type. */
fs_tensor *fsG_cast(fs_tensor *x, fs_dtype dt);
fs_dtype fsG_set_autocast(fs_dtype dt);
fs_dtype fsG_autocast(void);
/* t's gradient (float32 storage) rounded to t's own type when that is low:
 * after anything that changes a low parameter's gradient outside the tape
 * (clipping, DDP's average).  -1 + fsT_error. */
int fsG_round_grad(fs_tensor *t);

/* loss.backward(): loss must have one element and require grad. */
int fsG_backward(fs_tensor *loss);
/* Drops t's node (and with it the references the node holds). */
void fsG_detach(fs_tensor *t);

/* A hook on the tape: a view of x whose backward first calls fn(ud, k),
 * then passes its gradient on to x.  FSDP marks a unit's output with it, so
 * the unit's parameters are gathered again just before its backward.  Grad
 * mode off or x not requiring grad: a plain new reference to x. */
typedef int (*fsG_hook_fn)(void *ud, int64_t k);
fs_tensor *fsG_hook(fs_tensor *x, fsG_hook_fn fn, void *ud, int64_t k);

/* ---- layers ---- x[..., C] etc.; see nn.h for the kernels */
fs_tensor *fsG_linear(fs_tensor *x, fs_tensor *W, fs_tensor *b);       /* b may be NULL */
fs_tensor *fsG_embedding(fs_tensor *idx, fs_tensor *W);                /* idx int64 */
fs_tensor *fsG_posemb(fs_tensor *x, fs_tensor *W);                     /* x[B,T,D] */
fs_tensor *fsG_layernorm(fs_tensor *x, fs_tensor *w, fs_tensor *b, double eps);
fs_tensor *fsG_act(fsN_act act, fs_tensor *x);
fs_tensor *fsG_dropout(fs_tensor *x, double p, uint64_t key);          /* training mode */
fs_tensor *fsG_attention(fs_tensor *qkv, int64_t heads);               /* [B,T,3C] -> [B,T,C] */
fs_tensor *fsG_reshape(fs_tensor *x, int rank, const int64_t *shape);  /* a view */

/* ---- convolutional layers (cnn_grad.c; kernels in cnn.h) ----
 * Images are NCHW; stride/padding/dilation/kernel arrays hold one value per
 * spatial dim (nd of them, [H, W] order). */
/* x[N,C,L] W[OC,C/G,K] (nd 1) or x[N,C,H,W] W[OC,C/G,KH,KW] (nd 2); b may be NULL */
fs_tensor *fsG_conv(int nd, fs_tensor *x, fs_tensor *W, fs_tensor *b, const int64_t *stride,
                    const int64_t *pad, const int64_t *dil, int64_t groups);
/* x[N,Cin,H,W] W[Cin,Cout/G,KH,KW] -> [N,Cout,OH,OW], OH = (H-1) s - 2p +
 * d (KH-1) + output_pad + 1 (output_pad < stride); b [Cout] or NULL */
fs_tensor *fsG_conv_transpose2d(fs_tensor *x, fs_tensor *W, fs_tensor *b, const int64_t *stride,
                                const int64_t *pad, const int64_t *output_pad, const int64_t *dil,
                                int64_t groups);
/* x[N,C,H,W] or [C,H,W]; padding at most half the kernel, as torch */
fs_tensor *fsG_max_pool2d(fs_tensor *x, const int64_t *k, const int64_t *s, const int64_t *p,
                          const int64_t *d, bool ceil_mode);
fs_tensor *fsG_avg_pool2d(fs_tensor *x, const int64_t *k, const int64_t *s, const int64_t *p,
                          bool ceil_mode, bool count_include_pad);
/* size[i] < 0 keeps that input dim (torch's None) */
fs_tensor *fsG_adaptive_avg_pool2d(fs_tensor *x, const int64_t *size);
/* x[N,C,...]; rm/rv (running stats, may both be NULL when training) are
 * updated in place when training; w, b may be NULL (affine=False) */
fs_tensor *fsG_batch_norm(fs_tensor *x, fs_tensor *rm, fs_tensor *rv, fs_tensor *w, fs_tensor *b,
                          bool training, double momentum, double eps);

/* ---- normalization (norm_grad.c; kernels in norm.h) ---- */
/* x[N,C,...] over groups of C/groups channels; w, b [C] or NULL */
fs_tensor *fsG_group_norm(fs_tensor *x, int64_t groups, fs_tensor *w, fs_tensor *b, double eps);
/* over x's last nd dims, which must be shape[0..nd); w of that shape or
 * NULL; eps NaN = torch's None (float32's machine epsilon) */
fs_tensor *fsG_rms_norm(fs_tensor *x, int nd, const int64_t *shape, fs_tensor *w, double eps);

/* softmax(q k^T / sqrt(E) + mask) v over q[..., L, E], k[..., S, E],
 * v[..., S, Ev] (batch dims broadcast); mask: bool or int64 0/1 (1 = attend, torch's
 * boolean) or float (added), broadcast to [..., L, S], or NULL; is_causal:
 * key j only for query i >= j; dropout on the probabilities with rng key
 * `key` (compose.c) */
fs_tensor *fsG_scaled_dot_product_attention(fs_tensor *q, fs_tensor *k, fs_tensor *v, fs_tensor *mask,
                                            double dropout_p, bool is_causal, uint64_t key);

/* interpolate(mode='nearest') of x[N, C, (H,) W] to size[nd]; scale_factor[i]
 * NaN unless given (torch computes the source index from it then) */
fs_tensor *fsG_interpolate_nearest(fs_tensor *x, int nd, const int64_t *size, const double *scale_factor);

/* torch's multi_head_attention_forward with batch-first q[B,L,E], k and
 * v[B,S,E]: packed in_w[3E,E] (in_b[3E] or NULL), out_w[E,E], out_b or NULL,
 * H heads; masks bool or int64 0/1 (1 = masked out, torch's boolean) or float added:
 * attn_mask [L,S] or [B*H,L,S], key_padding_mask [B,S]; *weights (when not
 * NULL) gets the attention probabilities, averaged over heads when average
 * (compose.c) */
fs_tensor *fsG_multihead_attention(fs_tensor *q, fs_tensor *k, fs_tensor *v, fs_tensor *in_w, fs_tensor *in_b,
                                   fs_tensor *out_w, fs_tensor *out_b, int64_t H, fs_tensor *attn_mask,
                                   fs_tensor *key_padding_mask, double dropout_p, uint64_t key,
                                   bool average, fs_tensor **weights);

/* ---- arithmetic ---- int64 op int64 stays int64 except `/`; else float32 */
fs_tensor *fsG_binary(fsB_binop op, fs_tensor *a, fs_tensor *b);
/* a op s, or s op a when scalar_first; s is an int64 scalar when s_is_int */
fs_tensor *fsG_binary_scalar(fsB_binop op, fs_tensor *a, double s, bool s_is_int, bool scalar_first);
fs_tensor *fsG_neg(fs_tensor *x);
fs_tensor *fsG_sum(fs_tensor *x);   /* all elements -> rank 0; int64 stays int64 */
fs_tensor *fsG_mean(fs_tensor *x);  /* float only, as torch */

/* ---- the tensor API's ops (ops_grad.c; kernels in ops.h) ---- */
/* dims may be negative (count from the end); out-of-range dims and shape
 * mismatches fail with torch's message.  Integer inputs of float math are
 * promoted to float32. */
fs_tensor *fsG_unary(fsU_unary op, fs_tensor *x, double p0, double p1);
fs_tensor *fsG_binary_op(fsU_binary op, fs_tensor *a, fs_tensor *b);   /* broadcasting */
fs_tensor *fsG_where(fs_tensor *cond, fs_tensor *a, fs_tensor *b);     /* cond bool or int64 0/1 */
fs_tensor *fsG_unbool(fs_tensor *t);  /* bool as int64 (new reference); other dtypes: t */
fs_tensor *fsG_window(fs_tensor *x, const fsU_window *w);              /* a strided copy */
fs_tensor *fsG_permute(fs_tensor *x, const int *perm);                 /* x->rank dims */
fs_tensor *fsG_transpose(fs_tensor *x, int d0, int d1);
fs_tensor *fsG_expand(fs_tensor *x, int rank, const int64_t *shape);   /* -1 keeps a dim */
/* x[..., start:stop:step, ...] along dim (Python's clamping; step > 0) */
fs_tensor *fsG_slice(fs_tensor *x, int dim, int64_t start, int64_t stop, int64_t step);
fs_tensor *fsG_select(fs_tensor *x, int dim, int64_t i);               /* removes dim */
fs_tensor *fsG_cat(fs_tensor *const *ts, int n, int dim);
fs_tensor *fsG_sum_dim(fs_tensor *x, int dim, bool keepdim, bool mean);
/* max/min over dim; *indices (int64, may be NULL) gets the argmax/argmin */
fs_tensor *fsG_extreme(bool want_max, fs_tensor *x, int dim, bool keepdim, fs_tensor **indices);
fs_tensor *fsG_softmax(fs_tensor *x, int dim, bool log);
fs_tensor *fsG_logsumexp(fs_tensor *x, int dim, bool keepdim);
fs_tensor *fsG_cumsum(fs_tensor *x, int dim);
fs_tensor *fsG_index_select(fs_tensor *x, int dim, fs_tensor *idx);   /* idx int64 [K] */
fs_tensor *fsG_bmm(fs_tensor *a, fs_tensor *b);                        /* [B,M,K] [B,K,N] */
fs_tensor *fsG_matmul(fs_tensor *a, fs_tensor *b);                     /* torch.matmul */

/* ---- indexing and selection (index.c) ----
 * x[i, a:b:c, None, ..., idx, mask]: torch's basic and advanced indexing.
 * Items are not held; a TENSOR item is int64 (positions, negative from the
 * end) or bool (a mask over as many dims as it has). */
typedef enum fsG_index_kind { FSG_IX_INT, FSG_IX_SLICE, FSG_IX_NONE, FSG_IX_ELLIPSIS, FSG_IX_TENSOR } fsG_index_kind;
typedef struct fsG_subscript {
  fsG_index_kind kind;
  int64_t i;                       /* INT */
  bool has_start, has_stop;        /* SLICE: absent bounds are Python's */
  int64_t start, stop, step;
  fs_tensor *t;                    /* TENSOR */
} fsG_subscript;
/* x[ix]: a view sharing x's storage when the selected elements are one
 * contiguous run in x's order (x[0], x[1:3], x[:, None]...), otherwise a
 * copy; differentiable (backward scatter-adds, so repeated indices sum). */
fs_tensor *fsG_index(fs_tensor *x, const fsG_subscript *ix, int n);
/* x[ix] = v (v broadcast to the indexed shape, converted to x's dtype).
 * Written IN PLACE (returns a new reference to x) unless autograd records
 * it -- grad mode on, x float32 and x or v requiring grad -- then x's values
 * with v's written in come back as a NEW tensor on the tape (x unchanged;
 * the caller rebinds its name).  A leaf requiring grad, or a view of one,
 * fails with torch's in-place message while grad mode is on. */
fs_tensor *fsG_index_put(fs_tensor *x, const fsG_subscript *ix, int n, fs_tensor *v);
/* -1 + torch's message when writing into x in place is torch's error: grad
 * mode on and x (or the tensor x is a view of) a leaf that requires grad;
 * through_view words it as a view of a leaf. */
int fsG_inplace_check(const fs_tensor *x, bool through_view);
/* x's values := src's (same shape; src's dtype must cast to x's as torch's
 * in-place ops allow), in place; the in-place check first. */
int fsG_assign(fs_tensor *x, fs_tensor *src);
/* the k largest (smallest) along dim, in order; *indices (int64) */
fs_tensor *fsG_topk(fs_tensor *x, int64_t k, int dim, bool largest, fs_tensor **indices);
/* n category indices per row of probs [C] or [R, C] (int64 [n] / [R, n]),
 * drawn with uniforms [offset, offset + R n) of rng key `key` */
fs_tensor *fsG_multinomial(fs_tensor *probs, int64_t n, bool replacement, uint64_t key, uint64_t offset);

/* ---- losses ---- */
/* logits [N,C] with targets [N], or [B,T,C] with [B,T]; mean over rows */
fs_tensor *fsG_cross_entropy(fs_tensor *logits, fs_tensor *targets);
fs_tensor *fsG_mse_loss(fs_tensor *pred, fs_tensor *target);           /* mean */

/* torch.nn.functional's losses with their options (loss_grad.c; kernels in
 * loss.h).  reduction: 'none' keeps the per-element (per-row) shape,
 * 'mean' divides by the count (class losses with index targets: by the
 * summed class weights of the rows not ignored, as torch), 'batchmean'
 * (kl_div) by the first dim. */
typedef enum fsG_reduction { FSG_NONE, FSG_MEAN, FSG_SUM, FSG_BATCHMEAN } fsG_reduction;
/* cross_entropy (from_logits) / nll_loss: x [N, C] / [N, C, d...] (torch's
 * class dim 1) / [B, T, C] with [B, T]; target int64 class indices, or
 * (cross_entropy) float class probabilities of x's shape; weight [C] or NULL */
fs_tensor *fsG_nll(fs_tensor *x, fs_tensor *target, fs_tensor *weight, bool from_logits,
                   int64_t ignore_index, double smoothing, fsG_reduction red);
/* elementwise losses (loss.h fsN_ploss); param: beta, delta, log_target;
 * pos_weight [last dim] (BCE with logits), weight broadcast (BCE) or NULL */
fs_tensor *fsG_ploss(fsN_ploss kind, fs_tensor *x, fs_tensor *y, double param, fs_tensor *pos_weight,
                     fs_tensor *weight, fsG_reduction red);
fs_tensor *fsG_cosine_similarity(fs_tensor *a, fs_tensor *b, int dim, double eps);

/* ---- not differentiable ---- */
typedef enum fsG_cmp { FSG_EQ, FSG_NE, FSG_LT, FSG_LE, FSG_GT, FSG_GE } fsG_cmp;
fs_tensor *fsG_compare(fsG_cmp op, fs_tensor *a, fs_tensor *b);
fs_tensor *fsG_compare_scalar(fsG_cmp op, fs_tensor *a, double s, bool scalar_first);
/* argmax over dim (negative counts from the end), removing it; int64 */
fs_tensor *fsG_argmax(fs_tensor *x, int dim);
/* .item(): -1 + fsT_error unless exactly one element; an int64 tensor's
 * item is a Python int */
int fsG_item(const fs_tensor *t, double *out);

#endif
