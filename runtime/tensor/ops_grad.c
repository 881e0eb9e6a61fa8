/* ops_grad.c -- the torch-like ops' entry points (autograd.h, "tensor API"):
 * each checks its inputs with torch's messages, runs an ops.h forward and
 * records the matching backward on the tape.
 *
 * Devices: a backend without a complete `ops` table (cuda's and emulated
 * cuda's have only index.c's kernels) has these ops' inputs staged through
 * host memory: the cpu kernels run on host copies and
 * the result, and in backward the gradients, are moved back with
 * fsB_transfer.  On the cpu the "host copies" are the tensors themselves, so
 * that path costs nothing.  Kernels: ops.h/ops.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_int.h"
#include "ops.h"

/* ---- staging ---- */

void fsG_stage_end(fsG_stage *s) {
  for (int i = 0; i < 3; i++) fsT_release(s->h[i]);
}

/* Whether the table has the kernel at byte offset slot (SIZE_MAX: all of them). */
static bool has_kernel(const fsU_kernels *k, size_t slot) {
  if (!k) return false;
  if (slot == SIZE_MAX) return !k->partial;
  void (*fn)(void);
  memcpy(&fn, (const char *)k + slot, sizeof fn);
  return fn != NULL;
}

static int stage_begin(fsG_stage *s, const char *op, int n, fs_tensor *const *ins, size_t slot) {
  memset(s, 0, sizeof *s);
  const fsB_backend *be = fsG_check_inputs(op, n, ins);
  if (!be) return -1;
  s->staged = !has_kernel(be->ops, slot);
  s->k = s->staged ? &fsU_cpu : be->ops;
  s->dev = ins[0]->device;
  for (int i = 0; i < n; i++)
    if (ins[i] && !(s->h[i] = s->staged ? fsG_on_host(ins[i]) : fsT_retain(ins[i]))) {
      fsG_stage_end(s);
      return -1;
    }
  return 0;
}

int fsG_stage_begin(fsG_stage *s, const char *op, int n, fs_tensor *const *ins) {
  return stage_begin(s, op, n, ins, SIZE_MAX);
}

int fsG_stage_begin_slot(fsG_stage *s, const char *op, int n, fs_tensor *const *ins, size_t slot) {
  return stage_begin(s, op, n, ins, slot);
}

/* A host output of shape (rank dims) for the forward to fill. */
fs_tensor *fsG_host_new(fs_dtype dt, int rank, const int64_t *shape) {
  return fsT_new(dt, FS_DEV_CPU, rank, shape);
}

static void bw_release(fsG_bwstage *c) {
  for (int i = 0; i < 3; i++) {
    fsT_release(c->in[i]);
    fsT_release(c->scratch[i]);
  }
  for (int i = 0; i < 2; i++) fsT_release(c->saved[i]);
  fsT_release(c->out);
  fsT_release(c->gout);
}

static int bw_begin(fsG_bwstage *c, fsG_node *n, fs_tensor *out, size_t slot) {
  memset(c, 0, sizeof *c);
  const fsB_backend *be = fsB_of(out);
  c->staged = !has_kernel(be->ops, slot);
  c->k = c->staged ? &fsU_cpu : be->ops;
  fs_tensor *(*get)(fs_tensor *) = c->staged ? fsG_on_host : fsT_retain; /* where the kernel reads */
  int rc = 0;
  for (int i = 0; i < 3 && !rc; i++) {
    fs_tensor *x = n->in[i];
    if (!x) continue;
    if (!(c->in[i] = get(x))) rc = -1;
    else if (!x->requires_grad) continue;
    else if (!c->staged) rc = fsG_grad_buf(x, &c->d[i]);
    else if (!(c->scratch[i] = fsT_zeros(FS_F32, FS_DEV_CPU, x->rank, x->shape))) rc = -1;
    else c->d[i] = fsT_f32(c->scratch[i]);
  }
  for (int i = 0; i < 2 && !rc; i++)
    if (n->saved[i] && !(c->saved[i] = get(n->saved[i]))) rc = -1;
  if (!rc && (!(c->out = get(out)) || !(c->gout = get(out->grad)))) rc = -1;
  if (rc) bw_release(c);
  return rc;
}

int fsG_bw_begin(fsG_bwstage *c, fsG_node *n, fs_tensor *out) { return bw_begin(c, n, out, SIZE_MAX); }

int fsG_bw_begin_slot(fsG_bwstage *c, fsG_node *n, fs_tensor *out, size_t slot) {
  return bw_begin(c, n, out, slot);
}

/* Adds the staged gradients into the inputs' .grad on their device. */
int fsG_bw_end(fsG_bwstage *c, fsG_node *n) {
  int rc = 0;
  for (int i = 0; i < 3 && !rc; i++) {
    fs_tensor *x = n->in[i];
    if (!c->scratch[i]) continue;
    float *g;
    fs_tensor *dev = NULL;
    if (fsG_grad_buf(x, &g) < 0 || !(dev = fsT_to_device(c->scratch[i], x->device))) rc = -1;
    else fsB_of(x)->axpy((size_t)x->numel, 1.0f, fsT_f32(dev), g);
    fsT_release(dev);
  }
  bw_release(c);
  return rc;
}

/* A float32 version of t (new reference): integer inputs of math ops are
 * promoted, as torch promotes them. */
static fs_tensor *as_f32(fs_tensor *t) { return fsT_to_dtype(t, FS_F32); }

int fsG_norm_dim(int dim, int rank, int *out) {
  int r = rank ? rank : 1;
  if (dim < -r || dim >= r) {
    fsT_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, dim);
    return -1;
  }
  *out = dim < 0 ? dim + r : dim;
  return 0;
}

/* x seen as [O, L, I] around dim d */
void fsG_split_at(const fs_tensor *x, int d, int64_t *O, int64_t *L, int64_t *I) {
  *O = *I = 1;
  *L = x->rank ? x->shape[d] : 1;
  for (int i = 0; i < x->rank; i++) {
    if (i < d) *O *= x->shape[i];
    if (i > d) *I *= x->shape[i];
  }
}

/* x's shape with dim d reduced: kept as 1, or removed */
int fsG_reduced_shape(const fs_tensor *x, int d, bool keepdim, int64_t *shape) {
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (i != d) shape[r++] = x->shape[i];
    else if (keepdim) shape[r++] = 1;
  return r;
}

/* ---- unary ---- */

static int unary_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  if (c.d[0])
    c.k->unary_backward((fsU_unary)n->k, (size_t)out->numel, c.d[0], fsT_f32(c.gout), fsT_f32(c.in[0]),
                        fsT_f32(c.out), n->s, n->s2);
  return fsG_bw_end(&c, n);
}

/* A low-precision x on the cpu is widened and its result rounded block by
 * block (autograd_int.h's FSG_LOW_BLOCK path).  The gradients that read
 * the result read the float32 one, as the widened path's did: it is kept
 * (saved[0]) for those ops when x requires grad, and recomputed for the
 * others' backward, which does not read it. */
static bool reads_result(fsU_unary op) {
  return op == FSU_EXP || op == FSU_SQRT || op == FSU_RSQRT || op == FSU_TANH || op == FSU_SIGMOID;
}

static int unary_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *kept = n->saved[0];
  float *dx, X[FSG_LOW_BLOCK], Y[FSG_LOW_BLOCK], part[FSG_LOW_BLOCK];
  bool fresh;
  if (fsG_low_grad_buf(x, &dx, &fresh)) return -1;
  const float *g = fsT_f32(out->grad);
  for (size_t at = 0, N = (size_t)x->numel; dx && at < N; at += FSG_LOW_BLOCK) {
    size_t m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    const float *xv = fsG_low_block(x, at, m, true, X), *yv = kept ? fsT_f32(kept) + at : Y;
    if (!kept) fsU_cpu.unary_forward((fsU_unary)n->k, m, xv, Y, n->s, n->s2);
    memset(part, 0, m * sizeof *part);
    fsU_cpu.unary_backward((fsU_unary)n->k, m, part, g + at, xv, yv, n->s, n->s2);
    fsG_low_grad_add(x->dtype, dx + at, part, m, 1.0f, fresh);
  }
  return 0;
}

static fs_tensor *unary_low(fsU_unary op, fs_tensor *x, double p0, double p1) {
  if (!fsG_check_inputs("elementwise", 1, &x)) return NULL;
  fs_tensor *out = fsT_new(x->dtype, FS_DEV_CPU, x->rank, x->shape);
  fs_tensor *kept = out && x->requires_grad && reads_result(op) ? fsT_new(FS_F32, FS_DEV_CPU, x->rank, x->shape) : NULL;
  if (!out || (x->requires_grad && reads_result(op) && !kept)) {
    fsT_release(out);
    return NULL;
  }
  float X[FSG_LOW_BLOCK], Y[FSG_LOW_BLOCK];
  for (size_t at = 0, N = (size_t)x->numel; at < N; at += FSG_LOW_BLOCK) {
    size_t m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    float *y = kept ? fsT_f32(kept) + at : Y;
    fsU_cpu.unary_forward(op, m, fsG_low_block(x, at, m, true, X), y, p0, p1);
    fsG_low_store(out, at, m, y);
  }
  out = fsG_record(out, unary_low_bw, 1, &x, kept, NULL, p0, op);
  if (out && out->node) out->node->s2 = p1;
  return out;
}

fs_tensor *fsG_unary(fsU_unary op, fs_tensor *x, double p0, double p1) {
  if (fsG_any_f64(1, &x)) return fsG_unary_f64(op, x, p0, p1);
  if (fsT_is_low(x->dtype) && x->device == FS_DEV_CPU && x->data) return unary_low(op, x, p0, p1);
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_unary(op, lp.w[0], p0, p1));
  fs_tensor *fx = as_f32(x);
  fsG_stage s;
  if (!fx || fsG_stage_begin(&s, "elementwise", 1, &fx) < 0) {
    fsT_release(fx);
    return NULL;
  }
  fs_tensor *out = fsG_host_new(FS_F32, x->rank, x->shape);
  if (out) s.k->unary_forward(op, (size_t)x->numel, fsT_f32(s.h[0]), fsT_f32(out), p0, p1);
  fsG_stage_end(&s);
  out = fsG_to_dev(out, s.dev);
  if (out) out = fsG_record(out, unary_bw, 1, &fx, NULL, NULL, p0, op);
  if (out && out->node) out->node->s2 = p1;
  fsT_release(fx);
  return out;
}

/* ---- broadcasting binary and where ---- */

static int bcast_of(fsU_bcast *bc, int n, fs_tensor *const *ins) {
  bc->rank = 0;
  for (int i = 0; i < n; i++)
    if (fsU_broadcast_shape(bc->rank, bc->shape, ins[i]->rank, ins[i]->shape, &bc->rank, bc->shape) < 0)
      return -1;
  bc->numel = 1;
  for (int d = 0; d < bc->rank; d++) bc->numel *= bc->shape[d];
  for (int i = 0; i < n; i++) fsU_bcast_strides(ins[i]->rank, ins[i]->shape, bc->rank, bc->shape, bc->st[i]);
  return 0;
}

/* Broadcasting ops on low-precision tensors load and store them block by
 * block (autograd_int.h's FSG_LOW_BLOCK path): the output's index space is
 * cut into chunks of at most FSG_LOW_BLOCK elements (a range of one dim,
 * every dim after it whole), each run through the float32 kernel on a
 * sub-broadcast.  A side with the output's shape is widened a chunk at a
 * time on the stack; a broadcast side (a bias, a [B, 1] factor) is widened
 * whole once, and its gradient summed in float32 over every chunk in the
 * kernel's order before it is added (fsG_low_grad_add), as the widened
 * path's cast node added it.  Every element is the float32 kernel's, so the
 * bits are the widened path's. */
typedef struct low_side {
  fs_tensor *t;   /* NULL: not a float input (where's condition) */
  bool whole;     /* the output's shape: read at the chunk's block */
  float *wide;    /* a broadcast low side widened whole */
  float *d;       /* its gradient buffer; NULL when not wanted */
  float *dsum;    /* a broadcast low side's gradient summed over the chunks */
  bool fresh;     /* d is a fresh fsG_low_grad_buf */
  float buf[FSG_LOW_BLOCK], dbuf[FSG_LOW_BLOCK];
} low_side;

typedef struct low_bcast {
  fsU_bcast bc;
  bool where, backward;
  fsU_binary op;
  const int64_t *cond; /* where's, as int64 */
  low_side s[3];
  fs_tensor *out;      /* forward: written */
  const float *gout;   /* backward: the output's gradient */
} low_bcast;

/* Inputs the chunked path takes: cpu tensors holding data, float32 or low
 * (at least one low), or where's condition. */
static bool low_bcast_ok(int n, fs_tensor *const *ins, int first) {
  bool low = false;
  for (int i = 0; i < n; i++) {
    if (ins[i]->device != FS_DEV_CPU || !ins[i]->data) return false;
    if (i < first) continue;
    if (ins[i]->dtype != FS_F32 && !fsT_is_low(ins[i]->dtype)) return false;
    low |= fsT_is_low(ins[i]->dtype);
  }
  return low;
}

/* One chunk: elements [at, at + c->numel) of the output; off[j] is input
 * j's first element. */
static void low_bcast_chunk(low_bcast *L, const fsU_bcast *c, size_t at, const int64_t *off) {
  size_t m = (size_t)c->numel;
  const float *x[3] = {NULL, NULL, NULL};
  float *d[3] = {NULL, NULL, NULL}, y[FSG_LOW_BLOCK];
  for (int j = 0; j < 3; j++) {
    low_side *s = &L->s[j];
    if (!s->t) continue;
    bool low = fsT_is_low(s->t->dtype);
    x[j] = !low ? fsT_f32(s->t) + off[j] : s->whole ? fsG_low_block(s->t, at, m, true, s->buf) : s->wide + off[j];
    if (!L->backward || !s->d) continue;
    if (!low) d[j] = s->d + off[j];
    else if (!s->whole) d[j] = s->dsum + off[j];
    else d[j] = memset(s->dbuf, 0, m * sizeof *s->dbuf);
  }
  const int64_t *cond = L->where ? L->cond + off[0] : NULL;
  if (!L->backward) {
    float *o = fsG_low_out(L->out, at, y);
    if (L->where) fsU_cpu.where_forward(c, cond, x[1], x[2], o);
    else fsU_cpu.binary_forward(L->op, c, x[0], x[1], o);
    fsG_low_store(L->out, at, m, o);
    return;
  }
  if (L->where) fsU_cpu.where_backward(c, cond, d[1], d[2], L->gout + at);
  else {
    if (L->op == FSU_POWT) fsU_cpu.binary_forward(L->op, c, x[0], x[1], y); /* the float32 result its gradient reads */
    fsU_cpu.binary_backward(L->op, c, d[0], d[1], L->gout + at, x[0], x[1], y);
  }
  for (int j = 0; j < 3; j++) {
    low_side *s = &L->s[j];
    if (d[j] && fsT_is_low(s->t->dtype) && s->whole) fsG_low_grad_add(s->t->dtype, s->d + at, s->dbuf, m, 1.0f, s->fresh);
  }
}

/* The chunks in the output's order: dim k is the first whose trailing dims
 * hold at most FSG_LOW_BLOCK elements, and a chunk is a range of it. */
static void low_bcast_walk(low_bcast *L, int n) {
  const fsU_bcast *bc = &L->bc;
  if (bc->numel == 0) return;
  int64_t zero[3] = {0, 0, 0};
  if (bc->rank == 0) {
    low_bcast_chunk(L, bc, 0, zero);
    return;
  }
  int k = bc->rank - 1;
  int64_t inner = 1;
  while (k > 0 && inner * bc->shape[k] <= FSG_LOW_BLOCK) inner *= bc->shape[k--];
  int64_t span = FSG_LOW_BLOCK / inner < bc->shape[k] ? FSG_LOW_BLOCK / inner : bc->shape[k];
  if (span < 1) span = 1;
  fsU_bcast c = {.rank = bc->rank - k};
  for (int i = 1; i < c.rank; i++) {
    c.shape[i] = bc->shape[k + i];
    for (int j = 0; j < n; j++) c.st[j][i] = bc->st[j][k + i];
  }
  for (int j = 0; j < n; j++) c.st[j][0] = bc->st[j][k];
  int64_t idx[FS_MAX_RANK] = {0}, base[3] = {0, 0, 0};
  size_t at = 0;
  int d;
  do {
    for (int64_t l = 0; l < bc->shape[k]; l += span) {
      int64_t off[3];
      c.shape[0] = bc->shape[k] - l < span ? bc->shape[k] - l : span;
      c.numel = c.shape[0] * inner;
      for (int j = 0; j < n; j++) off[j] = base[j] + l * bc->st[j][k];
      low_bcast_chunk(L, &c, at, off);
      at += (size_t)c.numel;
    }
    for (d = k - 1; d >= 0; d--) { /* the odometer over the dims before k */
      for (int j = 0; j < n; j++) base[j] += bc->st[j][d];
      if (++idx[d] < bc->shape[d]) break;
      for (int j = 0; j < n; j++) base[j] -= bc->st[j][d] * bc->shape[d];
      idx[d] = 0;
    }
  } while (d >= 0);
}

static void low_bcast_end(low_bcast *L) {
  for (int j = 0; j < 3; j++) {
    free(L->s[j].wide);
    free(L->s[j].dsum);
  }
}

/* L's sides from ins[first..n): a broadcast low side widened whole, and in
 * backward the gradient buffers. */
static int low_bcast_sides(low_bcast *L, int n, fs_tensor *const *ins, int first) {
  for (int j = first; j < n; j++) {
    low_side *s = &L->s[j];
    s->t = ins[j];
    s->whole = s->t->numel == L->bc.numel;
    bool low = fsT_is_low(s->t->dtype);
    size_t k = (size_t)s->t->numel;
    if (low && !s->whole) {
      if (!(s->wide = malloc(k * sizeof *s->wide))) goto oom;
      fsT_convert(FS_F32, s->wide, s->t->dtype, s->t->data, k);
    }
    if (!L->backward) continue;
    if (low ? fsG_low_grad_buf(s->t, &s->d, &s->fresh) : fsG_grad_buf(s->t, &s->d)) return -1;
    if (s->d && low && !s->whole && !(s->dsum = calloc(k, sizeof *s->dsum))) goto oom;
  }
  return 0;
oom:
  fsT_seterr("out of memory");
  return -1;
}

/* in: {a, b} (binary, op n->k) or {cond as int64, a, b} (where) */
static int low_bcast_bw(fsG_node *n, fs_tensor *out) {
  bool where = n->in[2] != NULL;
  int nin = where ? 3 : 2;
  low_bcast L = {.where = where, .backward = true, .op = (fsU_binary)n->k, .gout = fsT_f32(out->grad)};
  if (bcast_of(&L.bc, nin, n->in) < 0) return -1;
  if (where) L.cond = fsT_i64(n->in[0]);
  int rc = low_bcast_sides(&L, nin, n->in, where);
  if (rc == 0 && (L.s[0].d || L.s[1].d || L.s[2].d)) {
    low_bcast_walk(&L, nin);
    for (int j = 0; j < 3; j++)
      if (L.s[j].dsum) fsG_low_grad_add(L.s[j].t->dtype, L.s[j].d, L.s[j].dsum, (size_t)L.s[j].t->numel, 1.0f, L.s[j].fresh);
  }
  low_bcast_end(&L);
  return rc;
}

static fs_tensor *low_bcast_run(bool where, fsU_binary op, int n, fs_tensor *const *ins) {
  low_bcast L = {.where = where, .op = op};
  if (bcast_of(&L.bc, n, ins) < 0) return NULL;
  if (where) L.cond = fsT_i64(ins[0]);
  L.out = fsT_new(fsG_promoted(n - where, ins + where), FS_DEV_CPU, L.bc.rank, L.bc.shape);
  if (!L.out || low_bcast_sides(&L, n, ins, where) < 0) {
    low_bcast_end(&L);
    fsT_release(L.out);
    return NULL;
  }
  low_bcast_walk(&L, n);
  low_bcast_end(&L);
  return fsG_record(L.out, low_bcast_bw, n, ins, NULL, NULL, 0, op);
}

static int binary_op_bw(fsG_node *n, fs_tensor *out) {
  fsU_bcast bc;
  fsG_bwstage c;
  if (bcast_of(&bc, 2, n->in) < 0 || fsG_bw_begin(&c, n, out) < 0) return -1;
  c.k->binary_backward((fsU_binary)n->k, &bc, c.d[0], c.d[1], fsT_f32(c.gout), fsT_f32(c.in[0]),
                       fsT_f32(c.in[1]), fsT_f32(c.out));
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_binary_op(fsU_binary op, fs_tensor *a, fs_tensor *b) {
  if (fsG_any_f64(2, (fs_tensor *const[]){a, b})) return fsG_binary_f64(op, a, b);
  if (low_bcast_ok(2, (fs_tensor *const[]){a, b}, 0)) return low_bcast_run(false, op, 2, (fs_tensor *const[]){a, b});
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 2, (fs_tensor *const[]){a, b}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_binary_op(op, lp.w[0], lp.w[1]));
  fsU_bcast bc;
  fs_tensor *ins[2] = {a, b};
  if (!fsG_check_inputs("arithmetic", 2, ins) || bcast_of(&bc, 2, ins) < 0) return NULL;
  bool ints = a->dtype == FS_I64 && b->dtype == FS_I64 && (op == FSU_MAXIMUM || op == FSU_MINIMUM);
  fs_tensor *f[2] = {as_f32(a), NULL}, *out = NULL;
  fsG_stage s;
  if (f[0] && (f[1] = as_f32(b)) && fsG_stage_begin(&s, "arithmetic", 2, f) == 0) {
    if ((out = fsG_host_new(FS_F32, bc.rank, bc.shape)))
      s.k->binary_forward(op, &bc, fsT_f32(s.h[0]), fsT_f32(s.h[1]), fsT_f32(out));
    fsG_stage_end(&s);
    out = fsG_to_dev(out, s.dev);
    if (out && ints) { /* torch keeps integer maximum/minimum integral */
      fs_tensor *i = fsT_to_dtype(out, FS_I64);
      fsT_release(out);
      out = i;
    } else if (out) out = fsG_record(out, binary_op_bw, 2, f, NULL, NULL, 0, op);
  }
  fsT_release(f[0]);
  fsT_release(f[1]);
  return out;
}

static int where_bw(fsG_node *n, fs_tensor *out) {
  fsU_bcast bc;
  fsG_bwstage c;
  if (bcast_of(&bc, 3, n->in) < 0 || fsG_bw_begin(&c, n, out) < 0) return -1;
  c.k->where_backward(&bc, fsT_i64(c.in[0]), c.d[1], c.d[2], fsT_f32(c.gout));
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_where(fs_tensor *cond, fs_tensor *a, fs_tensor *b) {
  if (fsG_any_f64(2, (fs_tensor *const[]){a, b})) return fsG_where_f64(cond, a, b);
  if ((cond->dtype == FS_BOOL || cond->dtype == FS_I64) && low_bcast_ok(3, (fs_tensor *const[]){cond, a, b}, 1)) {
    fs_tensor *c = fsG_unbool(cond), *out = c ? low_bcast_run(true, 0, 3, (fs_tensor *const[]){c, a, b}) : NULL;
    fsT_release(c);
    return out;
  }
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 3, (fs_tensor *const[]){cond, a, b}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_where(lp.w[0], lp.w[1], lp.w[2]));
  fsU_bcast bc;
  fs_tensor *ins[3] = {cond, a, b};
  if (!fsG_check_inputs("where", 3, ins) || bcast_of(&bc, 3, ins) < 0) return NULL;
  if (cond->dtype != FS_I64 && cond->dtype != FS_BOOL) {
    fsT_seterr("where expected condition to be a boolean tensor, but got a tensor with dtype %s",
               fsT_dtype_name(cond->dtype));
    return NULL;
  }
  fs_tensor *f[3] = {fsG_unbool(cond), as_f32(a), NULL}, *out = NULL; /* the kernel reads int64 */
  fsG_stage s;
  if (f[1] && (f[2] = as_f32(b)) && fsG_stage_begin(&s, "where", 3, f) == 0) {
    if ((out = fsG_host_new(FS_F32, bc.rank, bc.shape)))
      s.k->where_forward(&bc, fsT_i64(s.h[0]), fsT_f32(s.h[1]), fsT_f32(s.h[2]), fsT_f32(out));
    fsG_stage_end(&s);
    out = fsG_to_dev(out, s.dev);
    if (out) out = fsG_record(out, where_bw, 3, f, NULL, NULL, 0, 0);
  }
  for (int i = 0; i < 3; i++) fsT_release(f[i]);
  return out;
}

/* ---- windows: permute, transpose, expand, slices ---- */

static void window_save(fsG_node *n, const fsU_window *w) {
  n->iv[0] = w->rank;
  n->iv[1] = w->off;
  memcpy(n->iv + 2, w->shape, sizeof w->shape);
  memcpy(n->iv + 2 + FS_MAX_RANK, w->st, sizeof w->st);
}

static void window_load(const fsG_node *n, fsU_window *w) {
  w->rank = (int)n->iv[0];
  w->off = n->iv[1];
  memcpy(w->shape, n->iv + 2, sizeof w->shape);
  memcpy(w->st, n->iv + 2 + FS_MAX_RANK, sizeof w->st);
}

/* The window visits every element of a tensor of numel elements once (a
 * permute or transpose): its dims of more than one element, ordered by
 * stride, are that tensor's contiguous layout. */
static bool window_is_permutation(const fsU_window *w, int64_t numel) {
  int64_t sh[FS_MAX_RANK], st[FS_MAX_RANK];
  int m = 0;
  for (int d = 0; d < w->rank; d++)
    if (w->shape[d] != 1) { /* insertion by ascending stride */
      int i = m++;
      for (; i > 0 && st[i - 1] > w->st[d]; i--) {
        st[i] = st[i - 1];
        sh[i] = sh[i - 1];
      }
      st[i] = w->st[d];
      sh[i] = w->shape[d];
    }
  int64_t run = 1;
  for (int i = 0; i < m; i++) {
    if (st[i] != run) return false;
    run *= sh[i];
  }
  return w->off == 0 && run == numel;
}

/* A permutation's first gradient on the cpu is the output's gradient
 * scattered into a fresh buffer, not added to a zeroed one. */
static int window_bw(fsG_node *n, fs_tensor *out) {
  fsU_window w;
  fsG_bwstage c;
  window_load(n, &w);
  fs_tensor *x = n->in[0];
  if (x->dtype == FS_F64) return fsG_window_bw_f64(x, &w, out->grad);
  if (x->device == FS_DEV_CPU && window_is_permutation(&w, x->numel)) {
    float *dx;
    bool fresh;
    if (fsG_grad_whole(x, (size_t)x->numel, &dx, &fresh) < 0) return -1;
    if (fresh) {
      fsU_cpu.scatter(&w, sizeof *dx, fsT_f32(out->grad), dx);
      return 0;
    }
  }
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  if (c.d[0]) c.k->gather_backward(&w, c.d[0], fsT_f32(c.gout));
  return fsG_bw_end(&c, n);
}

/* The window's elements are one contiguous run of x, in order: it can be
 * a view (dims of one element have no stride to keep). */
static bool window_contiguous(const fsU_window *w) {
  int64_t run = 1;
  for (int d = w->rank - 1; d >= 0; d--) {
    if (w->shape[d] == 0) return true;
    if (w->shape[d] == 1) continue;
    if (w->st[d] != run) return false;
    run *= w->shape[d];
  }
  return true;
}

fs_tensor *fsG_window(fs_tensor *x, const fsU_window *w) {
  fsG_low lp; /* float64 moves as any 8-byte type, its backward is f64.c's */
  if (x->dtype != FS_F64 && fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_window(lp.w[0], w));
  if (!fsG_check_inputs("view", 1, &x)) return NULL;
  if (window_contiguous(w)) { /* shares x's storage, as torch's view would */
    int64_t n = 1;
    for (int d = 0; d < w->rank; d++) n *= w->shape[d];
    /* an empty window's offset may lie past the end (x[3:, 4] of 3 rows) */
    fs_tensor *v = fsT_view_at(x, n ? w->off : 0, w->rank, w->shape);
    if (v && (x->dtype == FS_F32 || x->dtype == FS_F64)) v = fsG_record(v, window_bw, 1, &x, NULL, NULL, 0, 0);
    if (v && v->node) window_save(v->node, w);
    return v;
  }
  fsG_stage s;
  if (fsG_stage_begin(&s, "view", 1, &x) < 0) return NULL;
  fs_tensor *out = fsG_host_new(x->dtype, w->rank, w->shape);
  if (out) s.k->gather(w, fsT_dtype_size(x->dtype), s.h[0]->data, out->data);
  fsG_stage_end(&s);
  out = fsG_to_dev(out, s.dev);
  if (out && (x->dtype == FS_F32 || x->dtype == FS_F64)) out = fsG_record(out, window_bw, 1, &x, NULL, NULL, 0, 0);
  if (out && out->node) window_save(out->node, w);
  return out;
}

static void window_of(const fs_tensor *x, fsU_window *w) {
  w->rank = x->rank;
  w->off = 0;
  memcpy(w->shape, x->shape, sizeof w->shape);
  fsU_contig_strides(x->rank, x->shape, w->st);
}

fs_tensor *fsG_permute(fs_tensor *x, const int *perm) {
  fsU_window w, c;
  window_of(x, &c);
  w = c;
  bool seen[FS_MAX_RANK] = {false};
  for (int d = 0; d < x->rank; d++) {
    int p;
    if (fsG_norm_dim(perm[d], x->rank, &p) < 0) return NULL;
    if (seen[p]) {
      fsT_seterr("permute(): duplicate dims are not allowed.");
      return NULL;
    }
    seen[p] = true;
    w.shape[d] = c.shape[p];
    w.st[d] = c.st[p];
  }
  return fsG_window(x, &w);
}

fs_tensor *fsG_transpose(fs_tensor *x, int d0, int d1) {
  int a, b, perm[FS_MAX_RANK];
  if (fsG_norm_dim(d0, x->rank, &a) < 0 || fsG_norm_dim(d1, x->rank, &b) < 0) return NULL;
  if (x->rank < 2) return fsG_reshape(x, x->rank, x->shape); /* 0-d and 1-d: itself */
  for (int d = 0; d < x->rank; d++) perm[d] = d;
  perm[a] = b;
  perm[b] = a;
  return fsG_permute(x, perm);
}

fs_tensor *fsG_expand(fs_tensor *x, int rank, const int64_t *shape) {
  char a[96], b[96];
  if (rank < x->rank) {
    fsT_seterr("expand(torch.FloatTensor{%s}, size=%s): the number of sizes provided (%d) must be greater or equal to the number of dimensions in the tensor (%d)",
               fsT_shape_str(x, a, sizeof a), fsT_dims_str(rank, shape, b, sizeof b), rank, x->rank);
    return NULL;
  }
  fsU_window w = {.rank = rank};
  int64_t own[FS_MAX_RANK];
  fsU_contig_strides(x->rank, x->shape, own);
  for (int d = 0; d < rank; d++) {
    int k = d - (rank - x->rank);
    int64_t want = shape[d], have = k >= 0 ? x->shape[k] : 1;
    if (want == -1 && k >= 0) want = have;
    if (want != have && have != 1) {
      fsT_seterr("The expanded size of the tensor (%lld) must match the existing size (%lld) at non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                 (long long)want, (long long)have, d, fsT_dims_str(rank, shape, a, sizeof a),
                 fsT_shape_str(x, b, sizeof b));
      return NULL;
    }
    if (want < 0) {
      fsT_seterr("The expanded size of the tensor (%lld) isn't allowed in a leading, non-existing dimension %d",
                 (long long)want, d);
      return NULL;
    }
    w.shape[d] = want;
    w.st[d] = k >= 0 && have == want ? own[k] : 0;
  }
  if (rank == x->rank && !memcmp(w.shape, x->shape, (size_t)rank * sizeof *shape))
    return fsG_reshape(x, rank, x->shape); /* nothing to stretch */
  return fsG_window(x, &w);
}

fs_tensor *fsG_slice(fs_tensor *x, int dim, int64_t start, int64_t stop, int64_t step) {
  int d;
  if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  if (x->rank == 0) {
    fsT_seterr("slice() cannot be applied to a 0-dim tensor.");
    return NULL;
  }
  if (step <= 0) {
    fsT_seterr("slice step must be positive");
    return NULL;
  }
  int64_t n = x->shape[d]; /* Python's clamping of slice bounds */
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  start = start < 0 ? 0 : start > n ? n : start;
  stop = stop < start ? start : stop > n ? n : stop;
  fsU_window w;
  window_of(x, &w);
  w.off = start * w.st[d];
  w.shape[d] = (stop - start + step - 1) / step;
  w.st[d] *= step;
  return fsG_window(x, &w);
}

fs_tensor *fsG_select(fs_tensor *x, int dim, int64_t i) {
  int d;
  if (x->rank == 0) {
    fsT_seterr("select() cannot be applied to a 0-dim tensor.");
    return NULL;
  }
  if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t n = x->shape[d];
  if (i < -n || i >= n) {
    fsT_seterr("index %lld is out of bounds for dimension %d with size %lld", (long long)i, d, (long long)n);
    return NULL;
  }
  if (i < 0) i += n;
  fsU_window w;
  window_of(x, &w);
  w.off = i * w.st[d];
  for (int k = d; k + 1 < w.rank; k++) {
    w.shape[k] = w.shape[k + 1];
    w.st[k] = w.st[k + 1];
  }
  w.rank--;
  return fsG_window(x, &w);
}

/* ---- cat ---- */

/* A low piece's (on the cpu): its window of the gradient rounded and
 * added to the piece's (fsG_low_grad_add), as the cast node of the widened
 * path did. */
static int cat_piece_low_bw(fsG_node *n, fs_tensor *out, const fsU_window *w) {
  fs_tensor *p = n->in[0];
  float *dp, *dc, *part = NULL;
  bool fresh;
  if (fsG_low_grad_buf(p, &dp, &fresh) || fsG_grad_buf(n->in[1], &dc)) return -1;
  if (dp && !(part = malloc((size_t)p->numel * sizeof *part + 1))) {
    fsT_seterr("out of memory");
    return -1;
  }
  if (dp) {
    fsU_cpu.gather(w, sizeof(float), fsT_f32(out->grad), part);
    for (int64_t i = 0; i < p->numel; i++) part[i] += 0.0f; /* the widened piece's zeroed gradient plus it */
    fsG_low_grad_add(p->dtype, dp, part, (size_t)p->numel, 1.0f, fresh);
  }
  for (int64_t i = 0; dc && i < out->numel; i++) dc[i] += fsT_f32(out->grad)[i];
  free(part);
  return 0;
}

/* The backward of one link of cat's chain: in[0] (a piece) gets its window
 * of the gradient, in[1] (the chain so far) all of it. */
static int cat_piece_bw(fsG_node *n, fs_tensor *out) {
  fsU_window w;
  fsG_bwstage c;
  window_load(n, &w);
  if (fsT_is_low(n->in[0]->dtype) && n->in[0]->device == FS_DEV_CPU) return cat_piece_low_bw(n, out, &w);
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  int rc = 0;
  if (c.d[0]) { /* d piece += the piece's window of the gradient */
    fs_tensor *part = fsG_host_new(FS_F32, w.rank, w.shape);
    if (part) {
      c.k->gather(&w, sizeof(float), fsT_f32(c.gout), fsT_f32(part));
      for (int64_t i = 0; i < part->numel; i++) c.d[0][i] += fsT_f32(part)[i];
    } else rc = -1;
    fsT_release(part);
  }
  if (c.d[1])
    for (int64_t i = 0; i < out->numel; i++) c.d[1][i] += fsT_f32(c.gout)[i];
  return fsG_bw_end(&c, n) < 0 ? -1 : rc;
}

/* float64's: the piece's window of the gradient (a view or a copy) added
 * to the piece's, in double (a float32 piece's converted, as a cast's) */
static int cat_piece64_bw(fsG_node *n, fs_tensor *out) {
  fsU_window w;
  window_load(n, &w);
  fs_tensor *part = n->in[0]->requires_grad ? fsG_window(out->grad, &w) : NULL;
  int rc = n->in[0]->requires_grad && (!part || fsG_add_grad_f64(n->in[0], part) < 0) ? -1 : 0;
  fsT_release(part);
  return rc < 0 || fsG_add_grad_f64(n->in[1], out->grad) < 0 ? -1 : 0;
}

/* Low-precision parts off the cpu or with float64 ones are concatenated as
 * float32 copies; the result is their type when every float part has it
 * (precision.c's rule for n inputs). */
static fs_tensor *cat_low(fs_tensor *const *ts, int n, int dim, fs_dtype low) {
  fs_tensor **w = calloc((size_t)n, sizeof *w);
  fs_tensor *out = NULL;
  int ok = w != NULL;
  for (int i = 0; ok && i < n; i++) ok = (w[i] = fsG_cast(ts[i], fsT_is_float(ts[i]->dtype) ? FS_F32 : ts[i]->dtype)) != NULL;
  if (ok) out = fsG_cat(w, n, dim);
  for (int i = 0; w && i < n; i++) fsT_release(w[i]);
  free(w);
  if (!w) fsT_seterr("out of memory");
  if (!out || !fsT_is_low(low)) return out;
  fs_tensor *r = fsG_cast(out, low);
  fsT_release(out);
  return r;
}

fs_tensor *fsG_cat(fs_tensor *const *ts, int n, int dim) {
  if (n == 0) {
    fsT_seterr("torch.cat(): expected a non-empty list of Tensors");
    return NULL;
  }
  /* on the cpu, low parts are copied as they are (into float32 when the
   * float parts' types differ), their gradients rounded (cat_piece_low_bw):
   * the widened path's values, and torch's bits for a signaling NaN too */
  fs_dtype floats = FS_I64;
  bool any_low = false, widen = false;
  for (int i = 0; i < n; i++) {
    fs_dtype t = ts[i]->dtype;
    any_low |= fsT_is_low(t);
    widen |= t == FS_F64 || ts[i]->device != FS_DEV_CPU;
    if (fsT_is_float(t)) floats = floats == FS_I64 || floats == t ? t : FS_F32;
  }
  if (any_low && widen) return cat_low(ts, n, dim, floats);
  int d;
  if (ts[0]->rank == 0) {
    fsT_seterr("zero-dimensional tensor (at position 0) cannot be concatenated");
    return NULL;
  }
  if (fsG_norm_dim(dim, ts[0]->rank, &d) < 0) return NULL;
  int64_t shape[FS_MAX_RANK];
  memcpy(shape, ts[0]->shape, sizeof shape);
  shape[d] = 0;
  bool any_f32 = false, any_f64 = false;
  for (int i = 0; i < n; i++) {
    const fs_tensor *t = ts[i];
    if (!fsG_check_inputs("cat", 1, (fs_tensor *const *)&ts[i])) return NULL;
    any_f64 |= t->dtype == FS_F64;
    if (t->device != ts[0]->device) {
      fsT_seterr("Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                 fsT_device_name(ts[0]->device), fsT_device_name(t->device));
      return NULL;
    }
    if (t->rank != ts[0]->rank) {
      fsT_seterr("Tensors must have same number of dimensions: got %d and %d", ts[0]->rank, t->rank);
      return NULL;
    }
    for (int k = 0; k < t->rank; k++)
      if (k != d && t->shape[k] != ts[0]->shape[k]) {
        fsT_seterr("Sizes of tensors must match except in dimension %d. Expected size %lld but got size %lld for tensor number %d in the list.",
                   d, (long long)ts[0]->shape[k], (long long)t->shape[k], i);
        return NULL;
      }
    shape[d] += t->shape[d];
    any_f32 |= t->dtype != FS_I64;
  }
  /* torch: float32 with float64 is float64 */
  fs_dtype dt = any_f64 ? FS_F64 : any_low ? floats : any_f32 ? FS_F32 : FS_I64;
  fs_tensor *out = fsG_host_new(dt, ts[0]->rank, shape);
  fsU_window w;
  int64_t at = 0;
  for (int i = 0; out && i < n; i++) { /* piece i fills out's [at, at + len) along d */
    fs_tensor *c = fsT_to_dtype(ts[i], dt), *h = c ? fsG_on_host(c) : NULL;
    window_of(out, &w);
    w.shape[d] = ts[i]->shape[d];
    w.off = at * w.st[d];
    if (h) fsU_cpu.scatter(&w, fsT_dtype_size(dt), h->data, out->data);
    else {
      fsT_release(out);
      out = NULL;
    }
    fsT_release(c);
    fsT_release(h);
    at += ts[i]->shape[d];
  }
  out = fsG_to_dev(out, ts[0]->device);
  if (!out || dt == FS_I64) return out;
  /* one node per piece would need n inputs; instead the output is a chain of
   * identity views, each of whose nodes routes its window back to one piece */
  at = 0;
  for (int i = 0; i < n && out; i++) {
    if (!ts[i]->requires_grad || !fsG_grad_enabled()) {
      at += ts[i]->shape[d];
      continue;
    }
    fs_tensor *v = fsT_view(out, out->rank, out->shape);
    fs_tensor *ins[2] = {ts[i], out};
    if (v) v = fsG_record(v, dt == FS_F64 ? cat_piece64_bw : cat_piece_bw, 2, ins, NULL, NULL, 0, 0);
    if (v && v->node) {
      window_of(out, &w);
      w.shape[d] = ts[i]->shape[d];
      w.off = at * w.st[d];
      window_save(v->node, &w);
    }
    fsT_release(out);
    out = v;
    at += ts[i]->shape[d];
  }
  return out;
}

/* ---- reductions over a dim ---- */

static int64_t *node_oli(fsG_node *n, int64_t O, int64_t L, int64_t I) {
  n->iv[0] = O;
  n->iv[1] = L;
  n->iv[2] = I;
  return n->iv;
}

/* ---- ops over one dim of a low-precision tensor, a chunk at a time ----
 * x[O, L, I] on the cpu is read in chunks [on, L, w] of whole rows along L,
 * with on == 1 or w == I (so each (o, l) row of a chunk, and the chunk of
 * an [O, I] result, is contiguous), widened into a buffer of at most
 * max(OLI_CHUNK, L) floats; the float32 kernel runs on it as on a tensor
 * [on, L, w].  Each (o, i) row is computed as the kernel computes
 * it on the whole tensor, so the result is the widened path's.
 * Gradients: each contribution rounded, then the sum (fsG_low_grad_add). */
enum { OLI_CHUNK = 64 * FSG_LOW_BLOCK }; /* a column chunk (w < I) loads L rows of w: make them long */
typedef struct oli_chunk {
  int64_t O, L, I;
  int64_t rows, W;     /* a chunk's most rows (W == I) and width */
  int64_t o, on, i, w; /* the current chunk */
  size_t cap;          /* floats in a chunk's buffer */
} oli_chunk;

/* The first chunk of x[O, L, I] (numel > 0). */
static oli_chunk oli_first(int64_t O, int64_t L, int64_t I) {
  oli_chunk c = {.O = O, .L = L, .I = I, .rows = 1, .W = I};
  if (L * I <= OLI_CHUNK) c.rows = OLI_CHUNK / (L * I) < O ? OLI_CHUNK / (L * I) : O;
  else c.W = OLI_CHUNK / L > 1 ? OLI_CHUNK / L : 1;
  c.on = c.rows;
  c.w = c.W;
  c.cap = (size_t)(c.rows * L * c.W);
  return c;
}

static bool oli_next(oli_chunk *c) {
  if ((c->i += c->w) >= c->I) c->i = 0, c->o += c->on;
  if (c->o >= c->O) return false;
  c->on = c->o + c->rows > c->O ? c->O - c->o : c->rows;
  c->w = c->i + c->W > c->I ? c->I - c->i : c->W;
  return true;
}

/* The chunk's rows of t ([O, L, I], any float type) as float32, in dst. */
static void oli_load(const oli_chunk *c, const fs_tensor *t, float *dst) {
  size_t es = fsT_dtype_size(t->dtype);
  if (c->w == c->I) {
    fsT_convert(FS_F32, dst, t->dtype, (const char *)t->data + (size_t)(c->o * c->L * c->I) * es,
                (size_t)(c->on * c->L * c->I));
    return;
  }
  for (int64_t l = 0; l < c->L; l++)
    fsT_convert(FS_F32, dst + l * c->w, t->dtype, (const char *)t->data + (size_t)((c->o * c->L + l) * c->I + c->i) * es,
                (size_t)c->w);
}

/* Offset of row (o, l) of the chunk, in t and in the chunk's buffer. */
static size_t oli_at(const oli_chunk *c, int64_t o, int64_t l) { return (size_t)(((c->o + o) * c->L + l) * c->I + c->i); }

/* A [O, L, I] result's chunk v rounded into t, or added to the gradient dx
 * of a tensor of low type dt (fsG_low_grad_add). */
static void oli_store(const oli_chunk *c, fs_tensor *t, fs_dtype dt, float *dx, bool fresh, const float *v) {
  bool whole = c->w == c->I; /* the chunk is one run of t */
  int64_t rows = whole ? 1 : c->L, len = whole ? c->on * c->L * c->I : c->w;
  for (int64_t l = 0; l < rows; l++) {
    const float *row = v + l * len;
    if (t) fsG_low_store(t, oli_at(c, 0, l), (size_t)len, row);
    else fsG_low_grad_add(dt, dx + oli_at(c, 0, l), row, (size_t)len, 1.0f, fresh);
  }
}

/* n buffers of cap floats each for a walk (one allocation), or NULL + the error. */
static float *oli_bufs(const oli_chunk *c, int n) {
  float *b = malloc((size_t)n * c->cap * sizeof *b + 1);
  if (!b) fsT_seterr("out of memory");
  return b;
}

/* Where an [O, I] result's chunk starts (contiguous: on == 1 or w == I). */
static size_t oli_out_at(const oli_chunk *c) { return (size_t)(c->o * c->I + c->i); }

/* The contributions of a gradient dy[O, I] spread over x[O, L, I]'s elements
 * (sum: each; extreme: the one at idx) added to x's low gradient dx, a block
 * at a time in x's order: what the float32 kernels add to a zeroed buffer. */
static void oli_spread_bw(const fs_tensor *x, int64_t L, int64_t I, float *dx, bool fresh, const float *dy,
                          float scale, const int64_t *idx) {
  float c[FSG_LOW_BLOCK];
  int64_t l = 0, i = 0, oI = 0; /* element (o, l, i) of x; oI = o I */
  for (size_t at = 0, N = (size_t)x->numel; at < N; at += FSG_LOW_BLOCK) {
    size_t m = N - at < FSG_LOW_BLOCK ? N - at : FSG_LOW_BLOCK;
    for (size_t k = 0; k < m; k++) {
      c[k] = !idx || idx[oI + i] == l ? 0.0f + dy[oI + i] * scale : 0.0f;
      if (++i == I && (i = 0, ++l == L)) l = 0, oI += I;
    }
    fsG_low_grad_add(x->dtype, dx + at, c, m, 1.0f, fresh);
  }
}

static bool oli_low_ok(const fs_tensor *x) { return fsT_is_low(x->dtype) && x->device == FS_DEV_CPU && x->data && x->numel > 0; }

/* The start of a low x's backward over its (O, L, I) chunks (n->iv): x's
 * gradient buffer and nb chunk buffers; 1 to go on, 0 when x takes no
 * gradient, -1 on failure */
static int oli_bw_begin(fsG_node *n, int nb, float **dx, bool *fresh, oli_chunk *c, float **b) {
  if (fsG_low_grad_buf(n->in[0], dx, fresh)) return -1;
  if (!*dx) return 0;
  *c = oli_first(n->iv[0], n->iv[1], n->iv[2]);
  return (*b = oli_bufs(c, nb)) ? 1 : -1;
}

static int sum_dim_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx;
  bool fresh;
  if (fsG_low_grad_buf(x, &dx, &fresh)) return -1;
  if (dx) oli_spread_bw(x, n->iv[1], n->iv[2], dx, fresh, fsT_f32(out->grad), (float)n->s, NULL);
  return 0;
}

/* sum / mean over dim of a low x (O, L, I around it; out made) */
static fs_tensor *sum_dim_low(fs_tensor *x, fs_tensor *out, int64_t O, int64_t L, int64_t I, bool mean) {
  oli_chunk c = oli_first(O, L, I);
  float *xb = oli_bufs(&c, 2), *y = xb ? xb + c.cap : NULL; /* y: on w <= cap */
  if (!xb) {
    fsT_release(out);
    return NULL;
  }
  do {
    oli_load(&c, x, xb);
    fsU_cpu.sum_dim_forward(c.on, L, c.w, xb, y);
    if (mean)
      for (int64_t k = 0; k < c.on * c.w; k++) y[k] /= (float)L;
    fsG_low_store(out, oli_out_at(&c), (size_t)(c.on * c.w), y);
  } while (oli_next(&c));
  free(xb);
  out = fsG_record(out, sum_dim_low_bw, 1, &x, NULL, NULL, mean ? 1.0 / (double)L : 1.0, 0);
  if (out && out->node) node_oli(out->node, O, L, I);
  return out;
}

static int extreme_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx;
  bool fresh;
  if (fsG_low_grad_buf(x, &dx, &fresh)) return -1;
  if (dx) oli_spread_bw(x, n->iv[1], n->iv[2], dx, fresh, fsT_f32(out->grad), 1.0f, fsT_i64(n->saved[0]));
  return 0;
}

/* max / min over dim of a low x: the values are x's, so storing them rounds nothing */
static fs_tensor *extreme_low(bool want_max, fs_tensor *x, fs_tensor *out, fs_tensor *idx, int64_t O, int64_t L,
                              int64_t I) {
  oli_chunk c = oli_first(O, L, I);
  float *xb = oli_bufs(&c, 2), *y = xb ? xb + c.cap : NULL;
  if (!xb) {
    fsT_release(out);
    return NULL;
  }
  do {
    oli_load(&c, x, xb);
    fsU_cpu.extreme_forward(want_max, c.on, L, c.w, xb, y, fsT_i64(idx) + oli_out_at(&c));
    fsG_low_store(out, oli_out_at(&c), (size_t)(c.on * c.w), y);
  } while (oli_next(&c));
  free(xb);
  out = fsG_record(out, extreme_low_bw, 1, &x, fsT_retain(idx), NULL, 0, 0);
  if (out && out->node) node_oli(out->node, O, L, I);
  return out;
}

/* softmax / log_softmax of a low x: backward reads the low output (torch's
 * _softmax_backward_data reads the result in its type), so no float32
 * result is kept. */
static int softmax_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx, *b;
  bool fresh;
  oli_chunk c;
  int go = oli_bw_begin(n, 3, &dx, &fresh, &c, &b);
  if (go <= 0) return go;
  do {
    float *g = b, *y = b + c.cap, *d = b + 2 * c.cap;
    oli_load(&c, out->grad, g);
    oli_load(&c, out, y);
    memset(d, 0, c.cap * sizeof *d);
    fsU_cpu.softmax_backward(n->k, c.on, c.L, c.w, d, g, y);
    oli_store(&c, NULL, x->dtype, dx, fresh, d);
  } while (oli_next(&c));
  free(b);
  return 0;
}

static fs_tensor *softmax_low(fs_tensor *x, int64_t O, int64_t L, int64_t I, bool log) {
  fs_tensor *out = fsT_new(x->dtype, FS_DEV_CPU, x->rank, x->shape);
  oli_chunk c = oli_first(O, L, I);
  float *b = out ? oli_bufs(&c, 2) : NULL;
  if (!b) {
    fsT_release(out);
    return NULL;
  }
  do {
    oli_load(&c, x, b);
    fsU_cpu.softmax_forward(log, c.on, L, c.w, b, b + c.cap);
    oli_store(&c, out, FS_F32, NULL, false, b + c.cap);
  } while (oli_next(&c));
  free(b);
  out = fsG_record(out, softmax_low_bw, 1, &x, NULL, NULL, 0, log);
  if (out && out->node) node_oli(out->node, O, L, I);
  return out;
}

static int sum_dim_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  const int64_t *v = n->iv;
  if (c.d[0]) {
    if (n->s != 1) { /* mean: the gradient scaled by 1/L */
      float *g = fsT_f32(c.gout);
      for (int64_t i = 0; i < c.gout->numel; i++) g[i] *= (float)n->s;
    }
    c.k->sum_dim_backward(v[0], v[1], v[2], c.d[0], fsT_f32(c.gout));
  }
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_sum_dim(fs_tensor *x, int dim, bool keepdim, bool mean) {
  if (fsG_any_f64(1, &x)) return fsG_sum_dim_f64(x, dim, keepdim, mean);
  if (oli_low_ok(x)) {
    int d;
    int64_t O, L, I, shape[FS_MAX_RANK];
    if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
    fsG_split_at(x, d, &O, &L, &I);
    fs_tensor *out = fsT_new(x->dtype, FS_DEV_CPU, fsG_reduced_shape(x, d, keepdim, shape), shape);
    return out ? sum_dim_low(x, out, O, L, I, mean) : NULL;
  }
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_sum_dim(lp.w[0], dim, keepdim, mean));
  int d;
  if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  if (mean && (x->dtype == FS_I64 || x->dtype == FS_BOOL)) {
    fsT_seterr("mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: %s",
               x->dtype == FS_BOOL ? "Bool" : "Long");
    return NULL;
  }
  if (x->dtype == FS_BOOL) { /* a bool sum counts, in int64 */
    fs_tensor *i = fsG_unbool(x), *r = i ? fsG_sum_dim(i, dim, keepdim, mean) : NULL;
    fsT_release(i);
    return r;
  }
  int64_t O, L, I, shape[FS_MAX_RANK];
  fsG_split_at(x, d, &O, &L, &I);
  int r = fsG_reduced_shape(x, d, keepdim, shape);
  fs_tensor *fx = as_f32(x), *out = NULL;
  fsG_stage s;
  if (fx && fsG_stage_begin(&s, mean ? "mean" : "sum", 1, &fx) == 0) {
    if ((out = fsG_host_new(FS_F32, r, shape))) {
      s.k->sum_dim_forward(O, L, I, fsT_f32(s.h[0]), fsT_f32(out));
      if (mean)
        for (int64_t i = 0; i < out->numel; i++) fsT_f32(out)[i] /= (float)L;
    }
    fsG_stage_end(&s);
    out = fsG_to_dev(out, s.dev);
    if (out && x->dtype == FS_I64) { /* integer sums stay integral */
      fs_tensor *i = fsT_to_dtype(out, FS_I64);
      fsT_release(out);
      out = i;
    } else if (out) out = fsG_record(out, sum_dim_bw, 1, &fx, NULL, NULL, mean ? 1.0 / (double)L : 1.0, 0);
    if (out && out->node) node_oli(out->node, O, L, I);
  }
  fsT_release(fx);
  return out;
}

static int extreme_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  if (c.d[0]) c.k->extreme_backward(n->iv[0], n->iv[1], n->iv[2], c.d[0], fsT_f32(c.gout), fsT_i64(c.saved[0]));
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_extreme(bool want_max, fs_tensor *x, int dim, bool keepdim, fs_tensor **indices) {
  if (fsG_any_f64(1, &x)) return fsG_extreme_f64(want_max, x, dim, keepdim, indices);
  if (oli_low_ok(x)) {
    int d;
    int64_t O, L, I, shape[FS_MAX_RANK];
    if (indices) *indices = NULL;
    if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
    fsG_split_at(x, d, &O, &L, &I);
    int r = fsG_reduced_shape(x, d, keepdim, shape);
    fs_tensor *out = fsT_new(x->dtype, FS_DEV_CPU, r, shape), *idx = out ? fsT_new(FS_I64, FS_DEV_CPU, r, shape) : NULL;
    out = idx ? extreme_low(want_max, x, out, idx, O, L, I) : (fsT_release(out), NULL);
    if (out && indices) *indices = idx;
    else fsT_release(idx);
    return out;
  }
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_extreme(want_max, lp.w[0], dim, keepdim, indices));
  int d;
  const char *name = want_max ? "max" : "min";
  if (indices) *indices = NULL;
  if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t O, L, I, shape[FS_MAX_RANK];
  fsG_split_at(x, d, &O, &L, &I);
  if (L == 0) {
    fsT_seterr("%s(): Expected reduction dim %d to have non-zero size.", name, d);
    return NULL;
  }
  int r = fsG_reduced_shape(x, d, keepdim, shape);
  fs_tensor *fx = as_f32(x), *out = NULL, *idx = NULL;
  fsG_stage s;
  if (fx && fsG_stage_begin(&s, name, 1, &fx) == 0) {
    out = fsG_host_new(FS_F32, r, shape);
    idx = out ? fsG_host_new(FS_I64, r, shape) : NULL;
    if (idx) s.k->extreme_forward(want_max, O, L, I, fsT_f32(s.h[0]), fsT_f32(out), fsT_i64(idx));
    fsG_stage_end(&s);
    out = idx ? fsG_to_dev(out, s.dev) : (fsT_release(out), NULL);
    idx = fsG_to_dev(idx, s.dev);
    if (!idx) {
      fsT_release(out);
      out = NULL;
    }
  }
  if (out && x->dtype == FS_I64) { /* integer values stay integral */
    fs_tensor *i = fsT_to_dtype(out, FS_I64);
    fsT_release(out);
    out = i;
  } else if (out) {
    out = fsG_record(out, extreme_bw, 1, &fx, fsT_retain(idx), NULL, 0, 0);
    if (out && out->node) node_oli(out->node, O, L, I);
  }
  fsT_release(fx);
  if (out && indices) *indices = idx;
  else fsT_release(idx);
  return out;
}

static int softmax_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  if (c.d[0]) c.k->softmax_backward(n->k, n->iv[0], n->iv[1], n->iv[2], c.d[0], fsT_f32(c.gout), fsT_f32(c.out));
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_softmax(fs_tensor *x, int dim, bool log) {
  if (fsG_any_f64(1, &x)) return fsG_softmax_f64(x, dim, log);
  if (oli_low_ok(x)) {
    int d;
    int64_t O, L, I;
    if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
    fsG_split_at(x, d, &O, &L, &I);
    return softmax_low(x, O, L, I, log);
  }
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_softmax(lp.w[0], dim, log));
  int d;
  if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  if (x->dtype == FS_I64) {
    fsT_seterr("\"%s_lastdim_kernel_impl\" not implemented for 'Long'", log ? "log_softmax" : "softmax");
    return NULL;
  }
  int64_t O, L, I;
  fsG_split_at(x, d, &O, &L, &I);
  fs_tensor *fx = as_f32(x), *out = NULL;
  fsG_stage s;
  if (fx && fsG_stage_begin(&s, "softmax", 1, &fx) == 0) {
    if ((out = fsG_host_new(FS_F32, x->rank, x->shape)))
      s.k->softmax_forward(log, O, L, I, fsT_f32(s.h[0]), fsT_f32(out));
    fsG_stage_end(&s);
    out = fsG_to_dev(out, s.dev);
    if (out) out = fsG_record(out, softmax_bw, 1, &fx, NULL, NULL, 0, log);
    if (out && out->node) node_oli(out->node, O, L, I);
  }
  fsT_release(fx);
  return out;
}

/* logsumexp of a low x over a dim: the float32 result [O, I] is kept
 * (saved[0]) for the backward, which reads it as the widened path's did. */
static int logsumexp_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx, *b;
  bool fresh;
  oli_chunk c;
  int go = oli_bw_begin(n, 2, &dx, &fresh, &c, &b);
  if (go <= 0) return go;
  do {
    oli_load(&c, x, b);
    memset(b + c.cap, 0, c.cap * sizeof *b);
    fsU_cpu.logsumexp_backward(c.on, c.L, c.w, b + c.cap, fsT_f32(out->grad) + oli_out_at(&c), b,
                               fsT_f32(n->saved[0]) + oli_out_at(&c));
    oli_store(&c, NULL, x->dtype, dx, fresh, b + c.cap);
  } while (oli_next(&c));
  free(b);
  return 0;
}

static fs_tensor *logsumexp_low(fs_tensor *x, fs_tensor *out, int64_t O, int64_t L, int64_t I) {
  int64_t n = O * I;
  oli_chunk c = oli_first(O, L, I);
  fs_tensor *y = fsT_new(FS_F32, FS_DEV_CPU, 1, &n);
  float *b = y ? oli_bufs(&c, 1) : NULL;
  if (!b) {
    fsT_release(y);
    fsT_release(out);
    return NULL;
  }
  do {
    oli_load(&c, x, b);
    fsU_cpu.logsumexp_forward(c.on, L, c.w, b, fsT_f32(y) + oli_out_at(&c));
    fsG_low_store(out, oli_out_at(&c), (size_t)(c.on * c.w), fsT_f32(y) + oli_out_at(&c));
  } while (oli_next(&c));
  free(b);
  out = fsG_record(out, logsumexp_low_bw, 1, &x, y, NULL, 0, 0);
  if (out && out->node) node_oli(out->node, O, L, I);
  return out;
}

static int logsumexp_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  if (c.d[0])
    c.k->logsumexp_backward(n->iv[0], n->iv[1], n->iv[2], c.d[0], fsT_f32(c.gout), fsT_f32(c.in[0]),
                            fsT_f32(c.out));
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_logsumexp(fs_tensor *x, int dim, bool keepdim) {
  if (fsG_any_f64(1, &x)) return fsG_logsumexp_f64(x, dim, keepdim);
  if (oli_low_ok(x)) {
    int d;
    int64_t O, L, I, shape[FS_MAX_RANK] = {0}; /* rank 0: none set */
    if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
    fsG_split_at(x, d, &O, &L, &I);
    fs_tensor *out = fsT_new(x->dtype, FS_DEV_CPU, fsG_reduced_shape(x, d, keepdim, shape), shape);
    return out ? logsumexp_low(x, out, O, L, I) : NULL;
  }
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_logsumexp(lp.w[0], dim, keepdim));
  int d;
  if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t O, L, I, shape[FS_MAX_RANK];
  fsG_split_at(x, d, &O, &L, &I);
  int r = fsG_reduced_shape(x, d, keepdim, shape);
  fs_tensor *fx = as_f32(x), *out = NULL;
  fsG_stage s;
  if (fx && fsG_stage_begin(&s, "logsumexp", 1, &fx) == 0) {
    if ((out = fsG_host_new(FS_F32, r, shape))) s.k->logsumexp_forward(O, L, I, fsT_f32(s.h[0]), fsT_f32(out));
    fsG_stage_end(&s);
    out = fsG_to_dev(out, s.dev);
    if (out) out = fsG_record(out, logsumexp_bw, 1, &fx, NULL, NULL, 0, 0);
    if (out && out->node) node_oli(out->node, O, L, I);
  }
  fsT_release(fx);
  return out;
}

/* cumsum of a low x along a dim: each (o, i) row summed in float32 as the
 * float32 kernel sums it, each output rounded */
static int cumsum_low_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0];
  float *dx, *b;
  bool fresh;
  oli_chunk c;
  int go = oli_bw_begin(n, 2, &dx, &fresh, &c, &b);
  if (go <= 0) return go;
  do {
    oli_load(&c, out->grad, b);
    memset(b + c.cap, 0, c.cap * sizeof *b);
    fsU_cpu.cumsum_backward(c.on, c.L, c.w, b + c.cap, b);
    oli_store(&c, NULL, x->dtype, dx, fresh, b + c.cap);
  } while (oli_next(&c));
  free(b);
  return 0;
}

static fs_tensor *cumsum_low(fs_tensor *x, int64_t O, int64_t L, int64_t I) {
  fs_tensor *out = fsT_new(x->dtype, FS_DEV_CPU, x->rank, x->shape);
  oli_chunk c = oli_first(O, L, I);
  float *b = out ? oli_bufs(&c, 2) : NULL;
  if (!b) {
    fsT_release(out);
    return NULL;
  }
  do {
    oli_load(&c, x, b);
    fsU_cpu.cumsum_forward(c.on, L, c.w, b, b + c.cap);
    oli_store(&c, out, FS_F32, NULL, false, b + c.cap);
  } while (oli_next(&c));
  free(b);
  out = fsG_record(out, cumsum_low_bw, 1, &x, NULL, NULL, 0, 0);
  if (out && out->node) node_oli(out->node, O, L, I);
  return out;
}

static int cumsum_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  if (c.d[0]) c.k->cumsum_backward(n->iv[0], n->iv[1], n->iv[2], c.d[0], fsT_f32(c.gout));
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_cumsum(fs_tensor *x, int dim) {
  if (x->dtype == FS_BOOL) { /* counts, in int64, as torch */
    fs_tensor *i = fsG_unbool(x), *r = i ? fsG_cumsum(i, dim) : NULL;
    fsT_release(i);
    return r;
  }
  if (fsG_any_f64(1, &x)) return fsG_cumsum_f64(x, dim);
  if (oli_low_ok(x)) {
    int d;
    int64_t O, L, I;
    if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
    fsG_split_at(x, d, &O, &L, &I);
    return cumsum_low(x, O, L, I);
  }
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_cumsum(lp.w[0], dim));
  int d;
  if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t O, L, I;
  fsG_split_at(x, d, &O, &L, &I);
  fs_tensor *fx = as_f32(x), *out = NULL;
  fsG_stage s;
  if (fx && fsG_stage_begin(&s, "cumsum", 1, &fx) == 0) {
    if ((out = fsG_host_new(FS_F32, x->rank, x->shape))) s.k->cumsum_forward(O, L, I, fsT_f32(s.h[0]), fsT_f32(out));
    fsG_stage_end(&s);
    out = fsG_to_dev(out, s.dev);
    if (out && x->dtype == FS_I64) {
      fs_tensor *i = fsT_to_dtype(out, FS_I64);
      fsT_release(out);
      out = i;
    } else if (out) out = fsG_record(out, cumsum_bw, 1, &fx, NULL, NULL, 0, 0);
    if (out && out->node) node_oli(out->node, O, L, I);
  }
  fsT_release(fx);
  return out;
}

/* ---- index_select ---- */

static int index_select_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  if (c.d[0])
    c.k->index_select_backward(n->iv[0], n->iv[1], n->iv[2], fsT_i64(c.in[1]), c.in[1]->numel, c.d[0],
                               fsT_f32(c.gout));
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_index_select(fs_tensor *x, int dim, fs_tensor *idx) {
  fsG_low lp;
  if (x->dtype != FS_F64 && fsG_low_begin(&lp, FSG_AC_KEEP, 2, (fs_tensor *const[]){x, idx}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_index_select(lp.w[0], dim, lp.w[1]));
  int d;
  if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  if (idx->dtype != FS_I64) {
    fsT_seterr("tensors used as indices must be long, int, byte or bool tensors");
    return NULL;
  }
  if (idx->rank > 1) {
    fsT_seterr("index_select(): Index is supposed to be a vector");
    return NULL;
  }
  int64_t O, L, I, shape[FS_MAX_RANK];
  fsG_split_at(x, d, &O, &L, &I);
  memcpy(shape, x->shape, sizeof shape);
  if (x->rank) shape[d] = idx->numel;
  fs_tensor *ins[2] = {x, idx}, *out = NULL;
  fsG_stage s;
  if (fsG_stage_begin(&s, "index_select", 2, ins) < 0) return NULL;
  int64_t *iv = fsT_i64(s.h[1]);
  for (int64_t k = 0; k < idx->numel; k++)
    if (iv[k] < -L || iv[k] >= L) {
      fsT_seterr("index %lld is out of bounds for dimension %d with size %lld", (long long)iv[k], d, (long long)L);
      fsG_stage_end(&s);
      return NULL;
    }
  /* negative indices count from the end, as Python's */
  fs_tensor *pos = fsG_host_new(FS_I64, 1, &idx->numel);
  for (int64_t k = 0; pos && k < idx->numel; k++) fsT_i64(pos)[k] = iv[k] < 0 ? iv[k] + L : iv[k];
  if (x->dtype == FS_F64) { /* taken by offsets, as indexing takes: float64's backward */
    fsG_stage_end(&s);
    out = pos ? fsG_index_select_f64(x, d, pos, shape) : NULL;
    fsT_release(pos);
    return out;
  }
  if (pos && (out = fsG_host_new(x->dtype, x->rank ? x->rank : 0, shape)))
    s.k->index_select(O, L, I, fsT_i64(pos), idx->numel, fsT_dtype_size(x->dtype), s.h[0]->data, out->data);
  fsG_stage_end(&s);
  out = fsG_to_dev(out, x->device);
  fs_tensor *dpos = pos ? fsG_to_dev(pos, x->device) : NULL;
  if (out && dpos && x->dtype == FS_F32) {
    fs_tensor *r[2] = {x, dpos};
    out = fsG_record(out, index_select_bw, 2, r, NULL, NULL, 0, 0);
    if (out && out->node) node_oli(out->node, O, L, I);
  } else if (!dpos) {
    fsT_release(out);
    out = NULL;
  }
  fsT_release(dpos);
  return out;
}

/* ---- bmm, matmul ---- */

/* batched: C[b] = alpha op(A[b]) op(B[b]) + beta C[b] through the backend's gemm */
static int gemm_batched(const fsB_backend *be, bool ta, bool tb, int64_t B, int64_t M, int64_t N,
                        int64_t K, const float *A, const float *Bm, float beta, float *C) {
  for (int64_t b = 0; b < B; b++)
    if (be->gemm(ta, tb, M, N, K, 1.0f, A + b * M * K, ta ? M : K, Bm + b * K * N, tb ? K : N, beta,
                 C + b * M * N, N) < 0)
      return -1;
  return 0;
}

static int bmm_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *a = n->in[0], *b = n->in[1];
  const fsB_backend *be = fsB_of(out);
  int64_t B = a->shape[0], M = a->shape[1], K = a->shape[2], N = b->shape[2];
  const float *g = fsT_f32(out->grad);
  float *da, *db;
  if (fsG_grad_buf(a, &da) < 0 || fsG_grad_buf(b, &db) < 0) return -1;
  /* da[B,M,K] += g[B,M,N] b^T;  db[B,K,N] += a^T g */
  if (da && gemm_batched(be, false, true, B, M, K, N, g, fsT_f32(b), 1.0f, da) < 0) return -1;
  if (db && gemm_batched(be, true, false, B, K, N, M, fsT_f32(a), g, 1.0f, db) < 0) return -1;
  return 0;
}

fs_tensor *fsG_bmm(fs_tensor *a, fs_tensor *b) {
  if (fsG_any_f64(2, (fs_tensor *const[]){a, b})) return fsG_matmul_f64(a, b);
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_LOW, 2, (fs_tensor *const[]){a, b}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_bmm(lp.w[0], lp.w[1]));
  fs_tensor *ins[2] = {a, b};
  const fsB_backend *be = fsG_check_inputs("bmm", 2, ins);
  if (!be) return NULL;
  if (a->rank != 3 || b->rank != 3) {
    fsT_seterr("batch%d must be a 3D tensor", a->rank != 3 ? 1 : 2);
    return NULL;
  }
  if (b->shape[0] != a->shape[0] || b->shape[1] != a->shape[2]) {
    fsT_seterr("Expected size for first two dimensions of batch2 tensor to be: [%lld, %lld] but got: [%lld, %lld].",
               (long long)a->shape[0], (long long)a->shape[2], (long long)b->shape[0], (long long)b->shape[1]);
    return NULL;
  }
  if (a->dtype != FS_F32 || b->dtype != FS_F32) {
    fsT_seterr("expected scalar type Float but found %s", fsT_dtype_name(a->dtype != FS_F32 ? a->dtype : b->dtype));
    return NULL;
  }
  int64_t shape[3] = {a->shape[0], a->shape[1], b->shape[2]};
  fs_tensor *out = fsT_new(FS_F32, a->device, 3, shape);
  if (!out) return NULL;
  if (a->shape[2] == 0) be->zero(out->data, fsT_nbytes(out));
  else if (gemm_batched(be, false, false, shape[0], shape[1], shape[2], a->shape[2], fsT_f32(a), fsT_f32(b),
                        0.0f, fsT_f32(out)) < 0) {
    fsT_release(out);
    return NULL;
  }
  return fsG_record(out, bmm_bw, 2, ins, NULL, NULL, 0, 0);
}

/* x reshaped (a view on the tape); consumes x */
static fs_tensor *reshaped(fs_tensor *x, int rank, const int64_t *shape) {
  if (!x) return NULL;
  fs_tensor *r = fsG_reshape(x, rank, shape);
  fsT_release(x);
  return r;
}

fs_tensor *fsG_matmul(fs_tensor *a, fs_tensor *b) {
  if (fsG_any_f64(2, (fs_tensor *const[]){a, b})) return fsG_matmul_f64(a, b);
  fsG_low lp;
  if (fsG_low_begin(&lp, FSG_AC_LOW, 2, (fs_tensor *const[]){a, b}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_matmul(lp.w[0], lp.w[1]));
  char sa[96], sb[96];
  if (a->rank == 0 || b->rank == 0) {
    fsT_seterr("both arguments to matmul need to be at least 1D, but they are %dD and %dD", a->rank, b->rank);
    return NULL;
  }
  int64_t ka = a->shape[a->rank - 1], kb = b->rank == 1 ? b->shape[0] : b->shape[b->rank - 2];
  if (ka != kb) {
    if (a->rank == 1 && b->rank == 1)
      fsT_seterr("inconsistent tensor size, expected tensor [%lld] and src [%lld] to have the same number of elements, but got %lld and %lld elements respectively",
                 (long long)ka, (long long)kb, (long long)ka, (long long)kb);
    else if (a->rank <= 2 && b->rank <= 2 && b->rank == 1)
      fsT_seterr("size mismatch, got %lld, %lldx%lld,%lld", (long long)a->shape[0], (long long)a->shape[0],
                 (long long)ka, (long long)kb);
    else if (a->rank <= 2 && b->rank <= 2)
      fsT_seterr("mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                 (long long)(a->rank == 1 ? 1 : a->shape[0]), (long long)ka, (long long)kb,
                 (long long)b->shape[b->rank - 1]);
    else
      fsT_seterr("Expected size for first two dimensions of batch2 tensor to be: [?, %lld] but got: [?, %lld]. (matmul of %s and %s)",
                 (long long)ka, (long long)kb, fsT_shape_str(a, sa, sizeof sa), fsT_shape_str(b, sb, sizeof sb));
    return NULL;
  }
  /* 1-d operands become matrices ([k] -> [1,k] on the left, [k,1] on the
   * right) and lose that dim again at the end, as torch.matmul */
  int64_t as[FS_MAX_RANK + 1], bs[FS_MAX_RANK + 1];
  int ra = a->rank, rb = b->rank;
  memcpy(as + (ra == 1), a->shape, (size_t)ra * sizeof *as);
  if (ra == 1) as[0] = 1, ra = 2;
  memcpy(bs, b->shape, (size_t)rb * sizeof *bs);
  if (rb == 1) bs[1] = 1, rb = 2;
  int64_t M = as[ra - 2], K = ka, N = bs[rb - 1];
  int64_t batch[FS_MAX_RANK] = {0}, B = 1;
  int rbatch = 0;
  if (fsU_broadcast_shape(ra - 2, as, rb - 2, bs, &rbatch, batch) < 0) return NULL;
  for (int d = 0; d < rbatch; d++) B *= batch[d];
  int64_t ea[FS_MAX_RANK + 2], eb[FS_MAX_RANK + 2], e3a[3] = {B, M, K}, e3b[3] = {B, K, N};
  if (rbatch + 2 > FS_MAX_RANK) {
    fsT_seterr("tensor rank %d is out of range (at most %d dimensions)", rbatch + 2, FS_MAX_RANK);
    return NULL;
  }
  memcpy(ea, batch, (size_t)rbatch * sizeof *ea);
  memcpy(eb, batch, (size_t)rbatch * sizeof *eb);
  ea[rbatch] = M, ea[rbatch + 1] = K;
  eb[rbatch] = K, eb[rbatch + 1] = N;
  fs_tensor *a2 = fsG_reshape(a, ra, as), *b2 = a2 ? fsG_reshape(b, rb, bs) : NULL;
  fs_tensor *a3 = b2 ? reshaped(fsG_expand(a2, rbatch + 2, ea), 3, e3a) : NULL;
  fs_tensor *b3 = a3 ? reshaped(fsG_expand(b2, rbatch + 2, eb), 3, e3b) : NULL;
  fs_tensor *fa = b3 ? as_f32(a3) : NULL, *fb = fa ? as_f32(b3) : NULL;
  fs_tensor *o3 = fb ? fsG_bmm(fa, fb) : NULL;
  fsT_release(a2);
  fsT_release(b2);
  fsT_release(a3);
  fsT_release(b3);
  fsT_release(fa);
  fsT_release(fb);
  if (!o3) return NULL;
  int64_t os[FS_MAX_RANK + 2];
  int ro = 0;
  for (int d = 0; d < rbatch; d++) os[ro++] = batch[d];
  if (a->rank != 1) os[ro++] = M;
  if (b->rank != 1) os[ro++] = N;
  return reshaped(o3, ro, os);
}
