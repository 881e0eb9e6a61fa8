/* plan_act.c -- activation memory of one forward and backward, per layer
 * kind, from the input's shape (see plan.h).
 *
 * The rule: count what the runtime keeps, no more.  A tape node holds its
 * inputs (autograd.c, fsG_record), so every tensor a layer makes stays alive
 * until the end of fabric.backward: each layer's output counts once, as the
 * next layer's saved input.  On top of the outputs, what a node saves
 * besides: LayerNorm's mean and rstd, BatchNorm's and GroupNorm's mean and
 * 1/std, RMSNorm's 1/rms (float32), MaxPool2d's int64 argmax, attention's
 * probabilities [B, heads, T, T], Upsample's first gather and the int64
 * indices of both.  Views (Flatten, Identity) and Dropout in eval mode make
 * nothing; Dropout keeps no mask (it is regenerated from its key).
 * docs/distributed.md ("Memory plan") sets this beside what torch saves.
 *
 * Backward, transiently: each tensor's gradient lives from the backward of
 * its consumer to its own (fsG_backward frees an intermediate's gradient once
 * its node has run), so a layer's output gradient, its input gradient and
 * the gradients of the residual streams around it are alive at once; the
 * cpu backend reuses a freed block only for the same size, so they count per
 * distinct size (`alive`).  Scratch a backward mallocs (attention's T x T,
 * a convolution's im2col columns from cnn.c's own sizing) counts as the
 * largest one.  Under autocast (*-mixed) matrix products and convolutions
 * write the low type and keep a low-precision copy of a float32 input, as
 * torch's autocast does; a new layer kind needs one case in `leaf` (and is
 * reported, not guessed, until it has one). */
#include "plan.h"

#include <stdlib.h>
#include <string.h>
#include "cnn.h"

typedef struct shape {
  int rank;
  int64_t d[FS_MAX_RANK];
  int bytes; /* per element */
} shape;

#define MAX_NEST 16 /* residual blocks inside residual blocks */

/* Gradients of one size: the most of them alive at once so far. */
typedef struct grad_size {
  uint64_t bytes;
  int most;
} grad_size;

typedef struct walk {
  const fsPL_sizes *sz;
  uint64_t saved;
  uint64_t scratch; /* the largest malloc'ed scratch of one backward */
  uint64_t around[MAX_NEST]; /* gradients of the residual streams enclosing the current layer */
  int naround;
  bool grad_flows; /* the current layer's input has a gradient: a layer before it has parameters */
  grad_size *grads;
  int ngrads, capgrads;
  char *err;
  size_t errlen;
} walk;

static uint64_t bytes_of(const shape *s) {
  uint64_t n = (uint64_t)s->bytes;
  for (int i = 0; i < s->rank; i++) n *= (uint64_t)s->d[i];
  return n;
}

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* out's shape as fsM_out_shape gives it (PyTorch's message on a mismatch). */
static int out_shape(walk *w, const fs_module *m, const shape *in, shape *out) {
  const fs_module *bad = NULL;
  out->bytes = in->bytes;
  return fsM_out_shape(m, in->rank, in->d, &out->rank, out->d, &bad, w->err, w->errlen);
}

/* Gradients of these n sizes (0: none) are alive at once during a
 * backward, with those of the residual streams around it.  The cpu backend
 * keeps freed blocks for reuse by exact size (backend_cpu.c), so a size's
 * blocks serve only that size: the memory gradients take is, per distinct
 * size, the most of that size ever alive at once. */
static int alive(walk *w, int n, const uint64_t *sizes) {
  uint64_t set[4 + MAX_NEST];
  int k = 0;
  for (int i = 0; i < n; i++)
    if (sizes[i]) set[k++] = sizes[i];
  for (int i = 0; i < w->naround; i++)
    if (w->around[i]) set[k++] = w->around[i];
  for (int i = 0; i < k; i++) {
    int count = 0;
    bool first = true;
    for (int j = 0; j < k; j++) {
      count += set[j] == set[i];
      if (set[j] == set[i] && j < i) first = false;
    }
    if (!first) continue;
    int g = 0;
    while (g < w->ngrads && w->grads[g].bytes != set[i]) g++;
    if (g == w->ngrads) {
      if (w->ngrads == w->capgrads) {
        int cap = w->capgrads ? 2 * w->capgrads : 16;
        grad_size *more = realloc(w->grads, (size_t)cap * sizeof *more);
        if (!more) {
          snprintf(w->err, w->errlen, "out of memory");
          return -1;
        }
        w->grads = more, w->capgrads = cap;
      }
      w->grads[w->ngrads++] = (grad_size){set[i], 0};
    }
    if (count > w->grads[g].most) w->grads[g].most = count;
  }
  return 0;
}

/* Layer m has run: it made out from in, keeping `extra` bytes besides; its
 * backward mallocs `scratch` bytes (freed to malloc, which serves any size
 * again).  Gradients exist from the first layer with parameters on. */
static int made(walk *w, const fs_module *m, const shape *in, const shape *out, uint64_t extra, uint64_t scratch) {
  bool in_grad = w->grad_flows;
  w->saved += bytes_of(out) + extra;
  w->grad_flows |= fsM_num_parameters(m) > 0;
  if (!w->grad_flows) return 0; /* no node: nothing runs backward */
  w->scratch = max64(w->scratch, scratch);
  return alive(w, 2, (uint64_t[]){in_grad ? bytes_of(in) : 0, bytes_of(out)});
}

/* in and out never alias: a layer reads its input's shape after writing its output's */
static int node(walk *w, const fs_module *m, const shape *in, shape *out);

static int chain(walk *w, const fs_module *m, const shape *in, shape *out) {
  shape cur = *in, next;
  for (int i = 0; i < m->nkids; i++, cur = next)
    if (node(w, m->kids[i], &cur, &next) < 0) return -1;
  *out = cur;
  return 0;
}

/* A matrix product's output element size; under autocast a float32 input is
 * first copied to the low type, and the copy is what backward keeps. */
static int matmul_bytes(walk *w, const shape *in, uint64_t *copy) {
  *copy = 0;
  if (!w->sz->autocast) return in->bytes;
  if (in->bytes != w->sz->act_low) *copy = bytes_of(in) / (uint64_t)in->bytes * (uint64_t)w->sz->act_low;
  return w->sz->act_low;
}

static uint64_t numel_of(const shape *s) { return bytes_of(s) / (uint64_t)s->bytes; }

/* The convolution that Conv1d/Conv2d runs on in (cnn_grad.c's fsG_conv),
 * or the one whose gradient ConvTranspose2d is (fsG_conv_transpose2d: its
 * output is that convolution's input).  1-d layers keep their one window
 * value at index 1 (module.h). */
static fsN_conv conv_geom(const fs_module *m, const shape *in, const shape *out) {
  bool transposed = m->kind == FSM_CONVTRANSPOSE2D, one = m->kind == FSM_CONV1D;
  const shape *x = transposed ? out : in, *y = transposed ? in : out;
  int r = x->rank;
  return (fsN_conv){.N = x->d[0], .C = x->d[1], .H = one ? 1 : x->d[r - 2], .W = x->d[r - 1],
                    .OC = y->d[1], .KH = one ? 1 : m->kernel[0], .KW = m->kernel[1],
                    .sh = one ? 1 : m->stride[0], .sw = m->stride[1], .ph = one ? 0 : m->pad[0],
                    .pw = m->pad[1], .dh = one ? 1 : m->dil[0], .dw = m->dil[1], .G = m->groups,
                    .OH = one ? 1 : y->d[r - 2], .OW = y->d[r - 1]};
}

/* The runtime's own scratch while a convolution's backward runs (cnn.c,
 * float32): the im2col column buffer of a chunk of images and the chunk's
 * gathered output gradient; a transposed one first computes its input's
 * gradient aside (a tensor of the input's size) with a forward's columns. */
static uint64_t conv_scratch(const fs_module *m, const shape *in, const shape *out) {
  fsN_conv g = conv_geom(m, in, out);
  uint64_t bw = 4 * (uint64_t)fsN_conv2d_scratch(&g, true);
  if (m->kind != FSM_CONVTRANSPOSE2D) return bw;
  return max64(bw, 4 * numel_of(in) + 4 * (uint64_t)fsN_conv2d_scratch(&g, false));
}

static int leaf(walk *w, const fs_module *m, const shape *in, shape *out) {
  if (out_shape(w, m, in, out) < 0) return -1;
  uint64_t copy = 0;
  switch (m->kind) {
  case FSM_LINEAR:
    out->bytes = matmul_bytes(w, in, &copy);
    return made(w, m, in, out, copy, 0);
  case FSM_EMBEDDING: /* token ids in, rows of the table out */
  case FSM_POSEMB:
    out->bytes = w->sz->act_high;
    return made(w, m, in, out, 0, 0);
  case FSM_LAYERNORM: { /* normalization runs in float32 under autocast; mean and rstd per row */
    uint64_t rows = bytes_of(in) / (uint64_t)in->bytes / (uint64_t)in->d[in->rank - 1];
    out->bytes = w->sz->act_high;
    return made(w, m, in, out, 2 * 4 * rows, 0);
  }
  case FSM_RELU:
  case FSM_GELU:
  case FSM_TANH:
  case FSM_SIGMOID:
  case FSM_SILU:
  case FSM_LEAKYRELU:
  case FSM_MISH:
  case FSM_AVGPOOL2D: /* windows recomputed from the geometry in backward */
  case FSM_ADAPTIVEAVGPOOL2D:
    return made(w, m, in, out, 0, 0);
  case FSM_CONV1D:
  case FSM_CONV2D:
  case FSM_CONVTRANSPOSE2D:
    out->bytes = matmul_bytes(w, in, &copy);
    return made(w, m, in, out, copy, conv_scratch(m, in, out));
  case FSM_MAXPOOL2D: /* the argmax of every window, int64 */
    return made(w, m, in, out, 8 * numel_of(out), 0);
  case FSM_BATCHNORM1D: /* in the input's type; mean and 1/std per channel, float32 */
  case FSM_BATCHNORM2D:
    return made(w, m, in, out, 2 * 4 * (uint64_t)in->d[1], 0);
  case FSM_GROUPNORM: /* float32 under autocast, as LayerNorm; mean and 1/std per (image, group) */
    out->bytes = w->sz->act_high;
    return made(w, m, in, out, 2 * 4 * (uint64_t)in->d[0] * (uint64_t)m->groups, 0);
  case FSM_RMSNORM: { /* 1/rms per row over the normalized dims, float32 */
    uint64_t row = 1;
    for (int i = 0; i < m->nnormalized; i++) row *= (uint64_t)m->normalized[i];
    return made(w, m, in, out, 4 * (numel_of(in) / row), 0);
  }
  case FSM_SOFTMAX: /* float32 under autocast */
    if (w->sz->autocast) out->bytes = w->sz->act_high;
    return made(w, m, in, out, 0, 0);
  case FSM_UPSAMPLE: { /* one index_select per spatial dim, each keeping its int64 source indices */
    if (in->rank == 3) return made(w, m, in, out, 8 * (uint64_t)out->d[2], 0);
    shape rows = *in; /* the rows first, then the columns */
    rows.d[2] = out->d[2];
    if (made(w, m, in, &rows, 8 * (uint64_t)out->d[2], 0) < 0) return -1;
    return made(w, m, &rows, out, 8 * (uint64_t)out->d[3], 0);
  }
  case FSM_DROPOUT:
    return m->training && m->p > 0 ? made(w, m, in, out, 0, 0) : 0;
  case FSM_FLATTEN: /* a view of its input */
  case FSM_IDENTITY:
    return 0;
  case FSM_MHA: /* fsM_forward refuses it too */
    snprintf(w->err, w->errlen, "MultiheadAttention takes (query, key, value): it is no layer of a model body");
    return -1;
  default:
    snprintf(w->err, w->errlen, "no activation model for %s", fsM_kind_name(m->kind));
    return -1;
  }
}

/* CausalSelfAttention: c_attn, the attention op (output and probabilities
 * [B, heads, T, T]; backward's scratch is one T x T float32 matrix), c_proj. */
static int attention(walk *w, const fs_module *m, const shape *in, shape *out) {
  shape qkv, y, probs;
  if (out_shape(w, m, in, &y) < 0 || node(w, m->kids[0], in, &qkv) < 0) return -1;
  int64_t B = in->d[0], T = in->d[1];
  y.bytes = qkv.bytes;
  probs = (shape){4, {B, m->out, T, T}, w->sz->autocast ? 4 : qkv.bytes}; /* softmax: float32 under autocast */
  if (made(w, m, &qkv, &y, bytes_of(&probs), 4 * (uint64_t)T * (uint64_t)T) < 0) return -1;
  return node(w, m->kids[1], &y, out);
}

static int node(walk *w, const fs_module *m, const shape *in, shape *out) {
  switch (m->kind) {
  case FSM_SEQUENTIAL:
  case FSM_REPEAT:
    return chain(w, m, in, out);
  case FSM_RESIDUAL: { /* x + body(x): x's gradient lives through the body's backward */
    shape body;
    if (w->naround == MAX_NEST) {
      snprintf(w->err, w->errlen, "residual blocks nested more than %d deep", MAX_NEST);
      return -1;
    }
    w->around[w->naround++] = w->grad_flows ? bytes_of(in) : 0; /* 0: x has no gradient */
    int rc = chain(w, m, in, &body);
    w->naround--;
    if (rc < 0) return -1;
    if (out_shape(w, m, in, out) < 0) return -1;
    out->bytes = in->bytes > body.bytes ? in->bytes : body.bytes; /* type promotion */
    w->saved += bytes_of(out);
    if (!w->grad_flows) return 0;
    /* the sum's backward: its output's gradient, the body's and x's */
    return alive(w, 3, (uint64_t[]){bytes_of(&body), bytes_of(out), w->around[w->naround]});
  }
  case FSM_ATTENTION:
    return attention(w, m, in, out);
  default:
    return leaf(w, m, in, out);
  }
}

/* A step of FSDP's wrapping (fsdp.c each_step): checkpointing keeps only its
 * output, and recomputes its activations during its own backward. */
static int step(walk *w, const fs_module *m, shape *cur, fsPL_acts *out) {
  uint64_t before = w->saved;
  shape next;
  if (node(w, m, cur, &next) < 0) return -1;
  *cur = next;
  uint64_t inside = w->saved - before;
  if (fsM_num_parameters(m) == 0) {
    out->ckpt_saved += inside; /* not a unit: nothing wraps it */
  } else {
    out->ckpt_saved += bytes_of(cur);
    out->ckpt_unit = max64(out->ckpt_unit, inside);
  }
  return 0;
}

int fsPL_activations(const fs_module *m, int rank, const int64_t *in, int in_bytes,
                     const fsPL_sizes *sz, fsPL_acts *out, char *err, size_t errlen) {
  walk w = {.sz = sz, .err = err, .errlen = errlen};
  shape cur = {.rank = rank, .bytes = in_bytes};
  memset(out, 0, sizeof *out);
  if (rank < 1 || rank > FS_MAX_RANK) {
    snprintf(err, errlen, "an input of %d dimensions", rank);
    return -1;
  }
  memcpy(cur.d, in, (size_t)rank * sizeof *in);
  w.saved = bytes_of(&cur); /* the batch itself, held by the first layer */
  out->ckpt_saved = w.saved;
  int rc = 0;
  if (m->kind != FSM_SEQUENTIAL) {
    rc = step(&w, m, &cur, out);
  } else {
    for (int i = 0; !rc && i < m->nkids; i++) {
      const fs_module *k = m->kids[i];
      for (int j = 0; !rc && j < (k->kind == FSM_REPEAT ? k->nkids : 1); j++)
        rc = step(&w, k->kind == FSM_REPEAT ? k->kids[j] : k, &cur, out);
    }
  }
  /* the loss's gradient with respect to the output, with the output's own */
  if (!rc && w.grad_flows) rc = alive(&w, 2, (uint64_t[]){bytes_of(&cur), bytes_of(&cur)});
  out->saved = w.saved;
  out->transient = w.scratch;
  for (int g = 0; g < w.ngrads; g++) out->transient += w.grads[g].bytes * (uint64_t)w.grads[g].most;
  free(w.grads);
  return rc;
}
