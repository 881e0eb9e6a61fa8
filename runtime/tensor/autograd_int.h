/* autograd_int.h -- the tape's node and the helpers every op's entry point
 * uses (autograd.c defines them; autograd.c's layers and ops_grad.c's
 * torch-like ops are their users).  Only runtime/tensor/ includes it. */
#ifndef FS_AUTOGRAD_INT_H
#define FS_AUTOGRAD_INT_H

#include <stddef.h>

#include "autograd.h"

typedef int (*backward_fn)(fsG_node *n, fs_tensor *out);

struct fsG_node {
  backward_fn backward;
  fs_tensor *in[3];     /* held; NULL where absent */
  fs_tensor *saved[2];  /* op-specific buffers (layernorm mean/rstd, attention probs) */
  double s, s2;         /* op-specific scalars (eps, p; clamp's bounds) */
  int64_t k;            /* op-specific integer (heads, binop) */
  int64_t iv[2 * FS_MAX_RANK + 2]; /* op-specific integers: a window, a dim's [O, L, I] */
  uint64_t key;         /* dropout mask key */
  unsigned mark;        /* topological sort visit stamp */
  fsG_hook_fn hook;     /* fsG_hook's callback and its argument */
  void *ud;
  fs_dtype gemm;        /* the GEMM operands' type when recorded (blas.h): its backward's too */
};

/* Every input present must hold data (not meta), all on one device: that
 * device's table, or NULL + fsT_error. */
const fsB_backend *fsG_check_inputs(const char *op, int n, fs_tensor *const *ts);
/* Records a node on out when grad mode is on and any input requires grad;
 * takes over the saved buffers either way.  Returns out, or NULL (out
 * released) on OOM. */
fs_tensor *fsG_record(fs_tensor *out, backward_fn fn, int n, fs_tensor *const *ins,
                      fs_tensor *saved0, fs_tensor *saved1, double s, int64_t k);
/* t's gradient buffer, allocated zeroed on first use; *g = NULL when t does
 * not require grad.  -1 on OOM. */
int fsG_grad_buf(fs_tensor *t, float **g);
/* A float32 tensor's gradient buffer for a contribution that covers all n
 * of its elements: when it has none yet, a fresh uninitialized one (*fresh:
 * the caller writes its contribution instead of zeroing a buffer and adding
 * to it), else fsG_grad_buf's (*fresh false).  -1 on OOM. */
int fsG_grad_whole(fs_tensor *t, size_t n, float **g, bool *fresh);
/* t's values on the cpu: t itself (a new reference) when it is there. */
fs_tensor *fsG_on_host(fs_tensor *t);
/* out, built on the cpu, moved to dev (out is consumed). */
fs_tensor *fsG_to_dev(fs_tensor *out, fs_device dev);

/* dim (negative counts from the end) of a tensor of rank `rank` into *out;
 * -1 + torch's "Dimension out of range ..." (ops_grad.c) */
int fsG_norm_dim(int dim, int rank, int *out);
/* x seen as [O, L, I] around dim d (ops.h's letters) */
void fsG_split_at(const fs_tensor *x, int d, int64_t *O, int64_t *L, int64_t *I);
/* x's shape with dim d reduced (kept as 1 when keepdim, else removed) into
 * shape; returns its rank */
int fsG_reduced_shape(const fs_tensor *x, int d, bool keepdim, int64_t *shape);

/* ---- staging through host memory (ops_grad.c) ----
 * Kernels that exist for the cpu only (the tensor API's ops when a backend
 * has no `ops` table; the cnn.h layers on every device but the cpu) run on
 * host copies: on the cpu the "copies" are the tensors themselves. */

/* An op's view of its inputs: the kernels to run and host tensors to run
 * them on (new references). */
typedef struct fsG_stage {
  const fsU_kernels *k;
  bool staged;         /* inputs were copied off a device */
  fs_device dev;       /* where results go */
  fs_tensor *h[3];
} fsG_stage;
/* Checks the inputs (fsG_check_inputs) and makes their host copies, unless
 * the device's table is complete (the cpu: the "copies" are the inputs). */
int fsG_stage_begin(fsG_stage *s, const char *op, int n, fs_tensor *const *ins);
/* The same for an op that runs the one kernel at byte offset `slot` of
 * fsU_kernels: no staging (h[i] are the inputs themselves, on their
 * device) when the device's table has that slot, even a partial table. */
int fsG_stage_begin_slot(fsG_stage *s, const char *op, int n, fs_tensor *const *ins, size_t slot);
#define FSG_SLOT(name) offsetof(fsU_kernels, name)
void fsG_stage_end(fsG_stage *s);
/* A host output of shape (rank dims) for the forward to fill. */
fs_tensor *fsG_host_new(fs_dtype dt, int rank, const int64_t *shape);

/* Backward's view: host copies of the node's inputs, saved buffers, the
 * output and its gradient, and host gradient buffers d[i] for the inputs
 * that need one (the inputs' own .grad on the cpu; zeroed scratch added to
 * .grad at fsG_bw_end otherwise). */
typedef struct fsG_bwstage {
  const fsU_kernels *k;
  bool staged;
  fs_tensor *in[3], *saved[2], *out, *gout, *scratch[3];
  float *d[3];
} fsG_bwstage;
int fsG_bw_begin(fsG_bwstage *c, fsG_node *n, fs_tensor *out);
/* The same for a backward that runs only the kernel at `slot` (above). */
int fsG_bw_begin_slot(fsG_bwstage *c, fsG_node *n, fs_tensor *out, size_t slot);
/* Adds the staged gradients into the inputs' .grad on their device. */
int fsG_bw_end(fsG_bwstage *c, fsG_node *n);

/* ---- low-precision inputs (precision.c) ----
 * Every op's entry point starts with
 *   fsG_low lp;
 *   if (fsG_low_begin(&lp, FSG_AC_..., n, ins))
 *     return fsG_low_end(&lp, lp.failed ? NULL : fsG_op(lp.w[0], ...));
 * which runs the op on float32 copies of its low-precision inputs (under
 * autocast: of the inputs autocast converts) and rounds a float32 result
 * back to the type the inputs promote to.  The policy is the op's place in
 * torch's CPU autocast lists. */
typedef enum fsG_ac {
  FSG_AC_KEEP, /* not in autocast's lists: inputs' own types */
  FSG_AC_LOW,  /* matrix products, linear, convolution, attention: autocast's type */
  FSG_AC_F32,  /* losses: float32 under autocast */
} fsG_ac;
/* A low-precision leaf whose gradient backward accumulates in float32:
 * fsG_store_low_grads (at the end of fsG_backward) stores it in the leaf's
 * type, as torch's .grad of a bfloat16 parameter is bfloat16. */
int fsG_note_low_leaf(fs_tensor *t);
int fsG_store_low_grads(void);
typedef struct fsG_low {
  fs_tensor *w[4];     /* the inputs to run on (new references; NULL where absent) */
  fs_dtype out;        /* the result's type */
  fs_dtype autocast;   /* restored by fsG_low_end */
  fs_dtype gemm;       /* the GEMM operands' type, restored by fsG_low_end */
  bool failed;
} fsG_low;
/* false: no input needs widening, run the op as it is.  A float64 input
 * fails the op (L->failed) with an error naming it: `op` is the calling
 * function's name, which the macro passes. */
bool fsG_low_begin_in(const char *op, fsG_low *L, fsG_ac policy, int n, fs_tensor *const *ins);
#define fsG_low_begin(...) fsG_low_begin_in(__func__, __VA_ARGS__)
fs_tensor *fsG_low_end(fsG_low *L, fs_tensor *out);
/* The type torch's promotion gives the float inputs (the result type of an
 * FSG_AC_KEEP op): tensors with dims decide over 0-dim ones; among them one
 * type wins, two different types give float32. */
fs_dtype fsG_promoted(int n, fs_tensor *const *ins);

/* ---- ops that load and store low-precision floats themselves (the
 * same-shape binary ops, dropout, whole sums and embeddings in autograd.c;
 * the unary, broadcasting, where, over-a-dim, softmax and cat ones in
 * ops_grad.c; the losses in loss_grad.c; the norms in low_norm.c): cpu tensors
 * of one low type (and float32 ones) are read and written FSG_LOW_BLOCK
 * elements at a time through float32 buffers on the stack, so no float32
 * copy of an input or of the result exists.  The arithmetic is
 * fsG_low_begin's: the float32 op on the widened values, its result rounded
 * once; backward computes each input's float32 contribution as the op's
 * float32 backward does and adds it to the input's float32 gradient as a
 * cast node's backward does (fsG_low_grad_add). ---- */
enum { FSG_LOW_BLOCK = 1024 };
/* Elements [at, at + m) of x (float32, bfloat16 or float16, cpu) as
 * float32: x's own floats, or widened into buf (m floats).  A side that is
 * not whole (a scalar broadcast against the others) gives its one element. */
const float *fsG_low_block(const fs_tensor *x, size_t at, size_t m, bool whole, float *buf);
/* Where to compute elements [at, ...) of t: in t itself when it is float32,
 * else in buf, which fsG_low_store then rounds into t. */
float *fsG_low_out(fs_tensor *t, size_t at, float *buf);
void fsG_low_store(fs_tensor *t, size_t at, size_t m, const float *v);
/* dx[0..n) += alpha c[0..n) for the float32 gradient of a cpu tensor of
 * low type dt: torch adds a gradient to a bfloat16 or float16 tensor's as a
 * tensor of that type, so the contribution is rounded, and then the sum;
 * fresh: dx is a fresh fsG_low_grad_buf, written, not read.
 * (Rounding the contribution first makes the result independent of which
 * of two contributions comes first.) */
void fsG_low_grad_add(fs_dtype dt, float *dx, const float *c, size_t n, float alpha, bool fresh);
/* t's float32 gradient buffer as fsG_grad_buf gives it, but uninitialized
 * and *fresh when it is made now: the first fsG_low_grad_add (fresh) over
 * each element writes it instead of adding to zeros. */
int fsG_low_grad_buf(fs_tensor *t, float **g, bool *fresh);
/* LayerNorm, RMSNorm, GroupNorm and BatchNorm of a low x (w, b: x's type or float32) on the
 * cpu, loading and storing the low type (low_norm.c); _ok: the inputs
 * they take. */
bool fsG_layernorm_low_ok(const fs_tensor *x, const fs_tensor *w, const fs_tensor *b);
fs_tensor *fsG_layernorm_low(fs_tensor *x, fs_tensor *w, fs_tensor *b, double eps);
bool fsG_rms_norm_low_ok(const fs_tensor *x, int nd, const int64_t *shape, const fs_tensor *w);
fs_tensor *fsG_rms_norm_low(fs_tensor *x, int nd, const int64_t *shape, fs_tensor *w, double eps);
bool fsG_group_norm_low_ok(const fs_tensor *x, int64_t groups, const fs_tensor *w, const fs_tensor *b);
fs_tensor *fsG_group_norm_low(fs_tensor *x, int64_t groups, fs_tensor *w, fs_tensor *b, double eps);
/* BatchNorm of a low x the same way (w, b as above; running statistics of
 * any float type but float64, updated in place); the caller checked the
 * shapes. */
bool fsG_batch_norm_low_ok(const fs_tensor *x, const fs_tensor *w, const fs_tensor *b, const fs_tensor *rm,
                           const fs_tensor *rv);
fs_tensor *fsG_batch_norm_low(fs_tensor *x, fs_tensor *rm, fs_tensor *rv, fs_tensor *w, fs_tensor *b, bool training,
                              double momentum, double eps);

/* ---- float64 (f64.c) ----
 * An op with a double path starts with
 *   if (fsG_any_f64(n, ins)) return fsG_op_f64(...);
 * (every op that calls fsG_low_begin has one); an op without would meet
 * float64 inputs in fsG_low_begin, which refuses them. */
bool fsG_any_f64(int n, fs_tensor *const *ins);
/* The ops that do not promote: every operand present has the first one's
 * dtype, else false + torch's "expected scalar type ... but found ...". */
bool fsG_one_dtype(int n, fs_tensor *const *ins);
/* t's float64 gradient buffer (as fsG_grad_buf). */
int fsG_grad_buf_f64(fs_tensor *t, double **g);
/* x.grad += g, g converted to x's gradient's type (a cast's backward). */
int fsG_add_grad_f64(fs_tensor *x, const fs_tensor *g);
fs_tensor *fsG_linear_f64(fs_tensor *x, fs_tensor *W, fs_tensor *b);
fs_tensor *fsG_act_f64(fsN_act act, fs_tensor *x);
/* The type torch's promotion gives a op b when one side is float64: a side
 * with dims decides over a 0-dim one among float types; otherwise float64. */
fs_dtype fsG_promoted64(const fs_tensor *a, const fs_tensor *b);
fs_tensor *fsG_binary_f64(fsU_binary op, fs_tensor *a, fs_tensor *b);
fs_tensor *fsG_binary_scalar_f64(fsB_binop op, fs_tensor *a, double s, bool scalar_first);
fs_tensor *fsG_reduce_f64(fs_tensor *x, bool mean);
fs_tensor *fsG_cross_entropy_f64(fs_tensor *logits, fs_tensor *targets);
fs_tensor *fsG_unary_f64(fsU_unary op, fs_tensor *x, double p0, double p1);
fs_tensor *fsG_softmax_f64(fs_tensor *x, int dim, bool log);
fs_tensor *fsG_embedding_f64(fs_tensor *idx, fs_tensor *W);
fs_tensor *fsG_posemb_f64(fs_tensor *x, fs_tensor *W);
fs_tensor *fsG_layernorm_f64(fs_tensor *x, fs_tensor *w, fs_tensor *b, double eps);
fs_tensor *fsG_attention_f64(fs_tensor *qkv, int64_t heads);
fs_tensor *fsG_sum_dim_f64(fs_tensor *x, int dim, bool keepdim, bool mean);
fs_tensor *fsG_matmul_f64(fs_tensor *a, fs_tensor *b);
/* The backward of a window (slice, select, permute, transpose, expand) of
 * a float64 x: g scatter-added at the positions the window read. */
int fsG_window_bw_f64(fs_tensor *x, const fsU_window *w, const fs_tensor *g);
/* The backward of x's elements taken at offs (int64, host): indexing. */
int fsG_take_bw_f64(fs_tensor *x, const fs_tensor *offs, const fs_tensor *g);
/* f64_ops.c: where (a or b float64), max/min over a dim, topk, dropout,
 * logsumexp and cumsum over a dim */
fs_tensor *fsG_where_f64(fs_tensor *cond, fs_tensor *a, fs_tensor *b);
fs_tensor *fsG_extreme_f64(bool want_max, fs_tensor *x, int dim, bool keepdim, fs_tensor **indices);
/* topk over dim d (checked), 0 <= k <= L (checked) */
fs_tensor *fsG_topk_f64(fs_tensor *x, int64_t k, int d, bool largest, fs_tensor **indices);
fs_tensor *fsG_dropout_f64(fs_tensor *x, double p, uint64_t key);
fs_tensor *fsG_logsumexp_f64(fs_tensor *x, int dim, bool keepdim);
fs_tensor *fsG_cumsum_f64(fs_tensor *x, int dim);
/* The per-element losses of float64 x and y of one shape (pos_weight: any
 * float type, or NULL), on the tape. */
fs_tensor *fsG_ploss_f64(fsN_ploss kind, fs_tensor *x, fs_tensor *y, double param, fs_tensor *pos_weight);
/* The per-row losses [M] of rows x [M, C] (any float type; logits when
 * from_logits, else log-probabilities) with int64 targets [M] or
 * probabilities [M, C], in float64 on the tape (loss.h's fsN_nll formulas;
 * weight [C] or NULL); *wsum: the mean's divisor.  NULL + fsT_error (a
 * target out of bounds). */
fs_tensor *fsG_nll_rows_f64(fs_tensor *x, fs_tensor *target, fs_tensor *weight, bool from_logits,
                            int64_t ignore_index, double smoothing, double *wsum);
/* x's index_select along dim d at pos (int64, host, in [0, L)): shape is
 * the result's. */
fs_tensor *fsG_index_select_f64(fs_tensor *x, int d, const fs_tensor *pos, const int64_t *shape);
/* x's elements at offs (int64, host) in offs's shape, on the tape (index.c;
 * any dtype; float32 and float64 have a backward); the offsets go where
 * the kernel runs and stay there for backward */
fs_tensor *fsG_take(fs_tensor *x, fs_tensor *offs);

#endif
