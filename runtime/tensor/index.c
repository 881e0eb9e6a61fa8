/* index.c -- torch's indexing, index assignment and the selecting ops
 * (topk, multinomial) over ops.h's kernels.
 *
 * An index (autograd.h's fsG_subscript items: ints, slices, None, `...`,
 * int64 and bool tensors) becomes a plan: a strided window over x's
 * contiguous storage for the basic items, plus the advanced (tensor)
 * indices broadcast together, as torch's advanced indexing does (ints are
 * applied first as selects, so they never count as advanced; the broadcast
 * index dims go where the first tensor index stood when the tensor indices
 * are adjacent, in front otherwise).  Reading without tensor indices is
 * fsG_window (a view when the window is one contiguous run); with them,
 * every result element's offset in x is computed and `take` gathers it.
 * Writing always goes by offsets (`put`).  Backward of a read is the
 * scatter-add `take_backward`.  These kernels run on the device when its
 * table has them (cuda, emulated cuda: partial tables), else on host
 * copies.  Other half: lib_index.c (the Python-side subscripts), ops.c and
 * ops_cuda.cu (kernels), autograd.h (the in-place rules). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_int.h"
#include "ops.h"
#include "rng.h"

typedef struct plan {
  fsU_window w;                   /* the basic items; advanced dims kept whole */
  int nadv;
  int advdim[FS_MAX_RANK];        /* window dims the tensor indices address */
  fs_tensor *adv[FS_MAX_RANK];    /* their int64 indices on the host (held) */
  int brank;                      /* the indices' broadcast shape */
  int64_t bshape[FS_MAX_RANK];
  int rank;                       /* the result's shape */
  int64_t shape[FS_MAX_RANK];
  int bat;                        /* where the broadcast dims start in it */
} plan;

static void plan_free(plan *p) {
  for (int j = 0; j < p->nadv; j++) fsT_release(p->adv[j]);
  p->nadv = 0;
}

static int oob(int64_t i, int d, int64_t n) {
  fsT_seterr("index %lld is out of bounds for dimension %d with size %lld", (long long)i, d, (long long)n);
  return -1;
}

/* dims the item consumes of the indexed tensor */
static int consumes(const fsG_subscript *it) {
  if (it->kind == FSG_IX_INT || it->kind == FSG_IX_SLICE) return 1;
  if (it->kind == FSG_IX_TENSOR) return it->t->dtype == FS_BOOL ? it->t->rank : 1;
  return 0;
}

/* mask's nonzero positions as k int64 index vectors, one per mask dim */
static int mask_indices(plan *p, const fs_tensor *mask, int r) {
  fs_tensor *h = fsG_on_host((fs_tensor *)mask);
  if (!h) return -1;
  int64_t nnz = 0, st[FS_MAX_RANK];
  for (int64_t i = 0; i < h->numel; i++) nnz += fsT_bool(h)[i] != 0;
  fsU_contig_strides(h->rank, h->shape, st);
  int rc = 0;
  for (int j = 0; j < h->rank && rc == 0; j++) {
    fs_tensor *ix = fsT_new(FS_I64, FS_DEV_CPU, 1, &nnz);
    if (!ix) {
      rc = -1;
      break;
    }
    for (int64_t i = 0, k = 0; i < h->numel; i++)
      if (fsT_bool(h)[i]) fsT_i64(ix)[k++] = (i / st[j]) % h->shape[j];
    p->advdim[p->nadv] = r + j;
    p->adv[p->nadv++] = ix;
  }
  fsT_release(h);
  return rc;
}

static int plan_items(plan *p, fs_tensor *x, const fsG_subscript *ix, int n) {
  int used = 0, ellipses = 0; /* counted as they are met */
  for (int k = 0; k < n; k++) {
    used += consumes(&ix[k]);
    if (ix[k].kind == FSG_IX_TENSOR && ix[k].t->dtype == FS_BOOL && ix[k].t->rank == 0) {
      fsT_seterr("indexing with a 0-dim bool tensor is not supported");
      return -1;
    }
    if (ix[k].kind == FSG_IX_TENSOR && ix[k].t->dtype != FS_BOOL && ix[k].t->dtype != FS_I64) {
      fsT_seterr("tensors used as indices must be long, byte or bool tensors");
      return -1;
    }
  }
  if (used > x->rank) {
    fsT_seterr("too many indices for tensor of dimension %d", x->rank);
    return -1;
  }
  int64_t st[FS_MAX_RANK];
  fsU_contig_strides(x->rank, x->shape, st);
  fsU_window *w = &p->w;
  int d = 0, r = 0;
  w->off = 0;
  for (int k = 0; k <= n; k++) {
    const fsG_subscript *it = k < n ? &ix[k] : NULL;
    /* the first `...` spans the dims no item names (torch 1.13 lets later ones span none) */
    int whole = !it ? x->rank - d : it->kind == FSG_IX_ELLIPSIS && !ellipses++ ? x->rank - used : 0;
    if (r + whole > FS_MAX_RANK) goto too_many;
    for (int j = 0; j < whole; j++, d++, r++) { /* `...` and the dims no item names */
      w->shape[r] = x->shape[d];
      w->st[r] = st[d];
    }
    if (!it || it->kind == FSG_IX_ELLIPSIS) continue;
    if (r >= FS_MAX_RANK && it->kind != FSG_IX_INT) goto too_many;
    switch (it->kind) {
    case FSG_IX_INT: {
      int64_t len = x->shape[d], i = it->i;
      if (i < -len || i >= len) return oob(i, k, len); /* torch names the item's place in the index */
      w->off += (i < 0 ? i + len : i) * st[d++];
      break;
    }
    case FSG_IX_SLICE: {
      int64_t len = x->shape[d], step = it->step;
      if (step == 0) {
        fsT_seterr("slice step cannot be zero");
        return -1;
      }
      if (step < 0) {
        fsT_seterr("step must be greater than zero");
        return -1;
      }
      int64_t a = it->has_start ? it->start : 0, b = it->has_stop ? it->stop : len;
      if (a < 0) a += len; /* Python's clamping of slice bounds */
      if (b < 0) b += len;
      a = a < 0 ? 0 : a > len ? len : a;
      b = b < a ? a : b > len ? len : b;
      w->shape[r] = (b - a + step - 1) / step;
      w->st[r++] = st[d] * step;
      w->off += a * st[d++];
      break;
    }
    case FSG_IX_NONE:
      w->shape[r] = 1;
      w->st[r++] = 0;
      break;
    case FSG_IX_TENSOR:
      if (it->t->dtype == FS_BOOL) {
        for (int j = 0; j < it->t->rank; j++)
          if (it->t->shape[j] != x->shape[d + j]) {
            char a[96], b[96];
            fsT_seterr("The shape of the mask %s at index %d does not match the shape of the indexed tensor %s at index %d",
                       fsT_shape_str(it->t, a, sizeof a), j, fsT_shape_str(x, b, sizeof b), d + j);
            return -1;
          }
        if (r + it->t->rank > FS_MAX_RANK) goto too_many;
        if (mask_indices(p, it->t, r) < 0) return -1;
        for (int j = 0; j < it->t->rank; j++, d++, r++) {
          w->shape[r] = x->shape[d];
          w->st[r] = st[d];
        }
      } else {
        fs_tensor *h = fsG_on_host(it->t);
        if (!h) return -1;
        p->advdim[p->nadv] = r;
        p->adv[p->nadv++] = h;
        w->shape[r] = x->shape[d];
        w->st[r++] = st[d++];
      }
      break;
    case FSG_IX_ELLIPSIS: break;
    }
  }
  w->rank = r;
  return 0;
too_many:
  fsT_seterr("tensor rank %d is out of range (at most %d dimensions)", FS_MAX_RANK + 1, FS_MAX_RANK);
  return -1;
}

/* The plan of x[ix]: its window, its advanced indices (bounds checked)
 * and the result's shape.  -1 + torch's message. */
static int plan_of(plan *p, fs_tensor *x, const fsG_subscript *ix, int n) {
  memset(p, 0, sizeof *p);
  if (plan_items(p, x, ix, n) < 0) {
    plan_free(p);
    return -1;
  }
  const fsU_window *w = &p->w;
  if (!p->nadv) {
    p->rank = w->rank;
    memcpy(p->shape, w->shape, sizeof p->shape);
    return 0;
  }
  for (int j = 0; j < p->nadv; j++) {
    const fs_tensor *t = p->adv[j];
    int64_t len = w->shape[p->advdim[j]];
    for (int64_t i = 0; i < t->numel; i++)
      if (fsT_i64(t)[i] < -len || fsT_i64(t)[i] >= len) {
        oob(fsT_i64(t)[i], j, len); /* torch names the tensor index's place among them */
        goto fail;
      }
    int64_t prev[FS_MAX_RANK];
    memcpy(prev, p->bshape, sizeof prev);
    if (fsU_broadcast_shape(p->brank, prev, t->rank, t->shape, &p->brank, p->bshape) < 0) {
      char a[256] = "", b[96];
      for (int k = 0; k < p->nadv; k++) {
        size_t at = strlen(a);
        snprintf(a + at, sizeof a - at, "%s%s", k ? ", " : "", fsT_shape_str(p->adv[k], b, sizeof b));
      }
      fsT_seterr("shape mismatch: indexing tensors could not be broadcast together with shapes %s", a);
      goto fail;
    }
  }
  bool adjacent = true;
  for (int j = 1; j < p->nadv; j++) adjacent &= p->advdim[j] == p->advdim[j - 1] + 1;
  int first = p->advdim[0];
  p->bat = adjacent ? first : 0;
  if (w->rank - p->nadv + p->brank > FS_MAX_RANK) {
    fsT_seterr("tensor rank %d is out of range (at most %d dimensions)", w->rank - p->nadv + p->brank, FS_MAX_RANK);
    goto fail;
  }
  int r = 0;
  for (int d = 0; d < w->rank; d++) {
    if (d == (adjacent ? first : 0)) {
      memcpy(p->shape + r, p->bshape, (size_t)p->brank * sizeof *p->shape);
      r += p->brank;
    }
    bool is_adv = false;
    for (int j = 0; j < p->nadv; j++) is_adv |= p->advdim[j] == d;
    if (!is_adv) p->shape[r++] = w->shape[d];
  }
  p->rank = r;
  return 0;
fail:
  plan_free(p);
  return -1;
}

/* Every result element's offset in x's storage, as a host int64 tensor. */
static fs_tensor *plan_offsets(const plan *p) {
  fs_tensor *offs = fsT_new(FS_I64, FS_DEV_CPU, p->rank, p->shape);
  if (!offs || offs->numel == 0) return offs;
  const fsU_window *w = &p->w;
  /* result dim e: a window dim (stride wst[e]) or broadcast dim e - bat */
  int64_t wst[FS_MAX_RANK] = {0}, bst[FS_MAX_RANK][FS_MAX_RANK] = {{0}}, ast[FS_MAX_RANK];
  bool bdim[FS_MAX_RANK] = {false};
  int e = 0;
  for (int d = 0; d < w->rank; d++) {
    if (p->nadv && e == p->bat && !bdim[e]) {
      for (int b = 0; b < p->brank; b++) bdim[e + b] = true;
      e += p->brank;
    }
    bool is_adv = false;
    for (int j = 0; j < p->nadv; j++) is_adv |= p->advdim[j] == d;
    if (!is_adv) wst[e++] = w->st[d];
  }
  for (int j = 0; j < p->nadv; j++) {
    fsU_bcast_strides(p->adv[j]->rank, p->adv[j]->shape, p->brank, p->bshape, bst[j]);
    ast[j] = w->st[p->advdim[j]];
  }
  int64_t idx[FS_MAX_RANK] = {0};
  for (int64_t i = 0; i < offs->numel; i++) {
    int64_t off = w->off;
    for (int k = 0; k < p->rank; k++)
      if (!bdim[k]) off += idx[k] * wst[k];
    for (int j = 0; j < p->nadv; j++) {
      int64_t at = 0, len = w->shape[p->advdim[j]];
      for (int b = 0; b < p->brank; b++) at += idx[p->bat + b] * bst[j][b];
      int64_t v = fsT_i64(p->adv[j])[at];
      off += (v < 0 ? v + len : v) * ast[j];
    }
    fsT_i64(offs)[i] = off;
    for (int k = p->rank - 1; k >= 0 && ++idx[k] == p->shape[k]; k--) idx[k] = 0;
  }
  return offs;
}

/* ---- reading ---- */

static int take_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (n->in[0]->dtype == FS_F64) return fsG_take_bw_f64(n->in[0], n->saved[0], out->grad);
  if (fsG_bw_begin_slot(&c, n, out, FSG_SLOT(take_backward)) < 0) return -1;
  if (c.d[0]) c.k->take_backward(c.saved[0]->numel, fsT_i64(c.saved[0]), c.d[0], fsT_f32(c.gout));
  return fsG_bw_end(&c, n);
}

/* The output of a staged op on the host, of an unstaged one on its device. */
static fs_tensor *out_new(const fsG_stage *s, fs_dtype dt, int rank, const int64_t *shape) {
  return fsT_new(dt, s->staged ? FS_DEV_CPU : s->dev, rank, shape);
}

fs_tensor *fsG_take(fs_tensor *x, fs_tensor *offs) {
  fsG_stage s;
  if (fsG_stage_begin_slot(&s, "index", 1, &x, FSG_SLOT(take)) < 0) return NULL;
  fs_tensor *o = s.staged ? fsT_retain(offs) : fsT_to_device(offs, s.dev);
  fs_tensor *out = o ? out_new(&s, x->dtype, offs->rank, offs->shape) : NULL;
  if (out) s.k->take(offs->numel, fsT_i64(o), fsT_dtype_size(x->dtype), s.h[0]->data, out->data);
  fsG_stage_end(&s);
  out = fsG_to_dev(out, s.dev);
  if (out && (x->dtype == FS_F32 || x->dtype == FS_F64)) out = fsG_record(out, take_bw, 1, &x, fsT_retain(o), NULL, 0, 0);
  fsT_release(o);
  return out;
}

fs_tensor *fsG_index(fs_tensor *x, const fsG_subscript *ix, int n) {
  plan p;
  if (!fsG_check_inputs("index", 1, &x)) return NULL;
  if (x->rank == 0 && n == 1 && ix[0].kind == FSG_IX_INT) {
    fsT_seterr("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
    return NULL;
  }
  if (plan_of(&p, x, ix, n) < 0) return NULL;
  if (!p.nadv) return fsG_window(x, &p.w);
  fs_tensor *offs = plan_offsets(&p), *out = offs ? fsG_take(x, offs) : NULL;
  fsT_release(offs);
  plan_free(&p);
  return out;
}

/* ---- writing ---- */

int fsG_inplace_check(const fs_tensor *x, bool through_view) {
  if (!fsG_grad_enabled()) return 0;
  const fs_tensor *leaf = x->requires_grad && !x->node ? x : NULL;
  if (!leaf && x->base && x->base->requires_grad && !x->base->node) {
    leaf = x->base;
    through_view = true;
  }
  if (!leaf) return 0;
  fsT_seterr("a %sleaf Variable that requires grad is being used in an in-place operation.",
             through_view ? "view of a " : "");
  return -1;
}

/* v's values in x's storage at offs (host int64, v already in offs's shape
 * and x's dtype): on the cpu directly, elsewhere through a host copy */
static int put_values(fs_tensor *x, fs_tensor *offs, fs_tensor *v) {
  fsG_stage s;
  fs_tensor *ins[2] = {x, v};
  if (fsG_stage_begin_slot(&s, "index_put_", 2, ins, FSG_SLOT(put)) < 0) return -1;
  fs_tensor *o = s.staged ? fsT_retain(offs) : fsT_to_device(offs, s.dev);
  int rc = o ? 0 : -1;
  if (o) s.k->put(offs->numel, fsT_i64(o), fsT_dtype_size(x->dtype), s.h[1]->data, s.h[0]->data);
  if (o && s.staged) rc = fsB_transfer(x->device, x->data, FS_DEV_CPU, s.h[0]->data, fsT_nbytes(x));
  fsT_release(o);
  fsG_stage_end(&s);
  return rc;
}

/* d x += the gradient with the overwritten elements zeroed;
 * d v += the gradient at those elements (host loops over the staged
 * buffers, as cat's backward) */
static int put_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  const int64_t *o = fsT_i64(c.saved[0]), N = c.saved[0]->numel;
  const float *g = fsT_f32(c.gout);
  int rc = 0;
  if (c.d[1])
    for (int64_t i = 0; i < N; i++) c.d[1][i] += g[o[i]];
  if (c.d[0]) {
    unsigned char *written = calloc((size_t)out->numel + 1, 1);
    if (!written) {
      fsT_seterr("out of memory");
      rc = -1;
    }
    for (int64_t i = 0; written && i < N; i++) written[o[i]] = 1;
    for (int64_t j = 0; written && j < out->numel; j++)
      if (!written[j]) c.d[0][j] += g[j];
    free(written);
  }
  return fsG_bw_end(&c, n) < 0 ? -1 : rc;
}

/* float64's: d v += the gradient at the written offsets (a take of it,
 * repeated offsets each getting it, as torch's); d x += the gradient with
 * those elements zeroed (a put of zeros) */
static int put64_bw(fsG_node *n, fs_tensor *out) {
  fs_tensor *x = n->in[0], *v = n->in[1], *offs = n->saved[0];
  fs_tensor *gv = v->requires_grad ? fsG_take(out->grad, offs) : NULL;
  int rc = v->requires_grad && (!gv || fsG_add_grad_f64(v, gv) < 0) ? -1 : 0;
  fsT_release(gv);
  if (rc == 0 && x->requires_grad) {
    fs_tensor *gx = fsT_copy(out->grad), *z = gx ? fsT_zeros(FS_F64, gx->device, offs->rank, offs->shape) : NULL;
    rc = z && put_values(gx, offs, z) == 0 && fsG_add_grad_f64(x, gx) == 0 ? 0 : -1;
    fsT_release(gx);
    fsT_release(z);
  }
  return rc;
}

/* v shaped for x[ix] = v: leading dims of 1 beyond the target's rank are
 * dropped (torch allows them), then broadcast (torch's expand message) */
static fs_tensor *value_for(fs_tensor *v, int rank, const int64_t *shape) {
  int lead = 0;
  while (v->rank - lead > rank && v->shape[lead] == 1) lead++;
  fs_tensor *r = lead ? fsG_reshape(v, v->rank - lead, v->shape + lead) : fsT_retain(v);
  fs_tensor *e = r ? fsG_expand(r, rank, shape) : NULL;
  fsT_release(r);
  return e;
}

fs_tensor *fsG_index_put(fs_tensor *x, const fsG_subscript *ix, int n, fs_tensor *v) {
  fs_tensor *ins[2] = {x, v};
  if (!fsG_check_inputs("index_put_", 2, ins)) return NULL;
  bool advanced = false;
  for (int k = 0; k < n; k++) advanced |= ix[k].kind == FSG_IX_TENSOR;
  if (fsG_inplace_check(x, !advanced) < 0) return NULL;
  if (x->dtype != FS_F64 && v->dtype == FS_F64 && fsG_grad_enabled() && v->requires_grad) {
    fsT_seterr("index_put_: this op has no float64 backward into a %s tensor in this runtime (the float64 value "
               "requires grad)", fsT_dtype_name(x->dtype));
    return NULL;
  }
  plan p;
  if (x->rank == 0 && n == 1 && ix[0].kind == FSG_IX_INT) {
    fsT_seterr("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
    return NULL;
  }
  if (plan_of(&p, x, ix, n) < 0) return NULL;
  fs_tensor *offs = plan_offsets(&p), *ve = offs ? value_for(v, p.rank, p.shape) : NULL, *out = NULL;
  plan_free(&p);
  bool records =
    fsG_grad_enabled() && (x->dtype == FS_F32 || x->dtype == FS_F64) && (x->requires_grad || v->requires_grad);
  if (ve && !records) { /* in place: every holder of x (and its views) sees the write */
    fs_tensor *c = fsT_to_dtype(ve, x->dtype);
    if (c && put_values(x, offs, c) == 0) out = fsT_retain(x);
    fsT_release(c);
  } else if (ve && x->dtype == FS_F64) { /* on the tape in double, on x's device */
    fs_tensor *fv = fsG_cast(ve, FS_F64), *o = fv ? fsT_copy(x) : NULL;
    if (o && put_values(o, offs, fv) == 0)
      out = fsG_record(o, put64_bw, 2, (fs_tensor *const[]){x, fv}, fsT_retain(offs), NULL, 0, 0);
    else fsT_release(o);
    fsT_release(fv);
  } else if (ve) { /* on the tape: a new tensor, x's values with v's written in */
    fs_tensor *fv = fsT_to_dtype(ve, FS_F32), *hx = fv ? fsG_on_host(x) : NULL;
    fs_tensor *hv = hx ? fsG_on_host(fv) : NULL, *o = hv ? fsT_copy(hx) : NULL;
    if (o) fsU_cpu.put(offs->numel, fsT_i64(offs), sizeof(float), hv->data, o->data);
    out = fsG_to_dev(o, x->device);
    fs_tensor *r[2] = {x, fv};
    if (out) out = fsG_record(out, put_bw, 2, r, fsT_retain(offs), NULL, 0, 0);
    fsT_release(fv);
    fsT_release(hx);
    fsT_release(hv);
  }
  fsT_release(ve);
  fsT_release(offs);
  return out;
}

int fsG_assign(fs_tensor *x, fs_tensor *src) {
  fs_tensor *ins[2] = {x, src};
  if (!fsG_check_inputs("copy_", 2, ins) || fsG_inplace_check(x, false) < 0) return -1;
  if (!fsT_same_shape(x, src)) {
    char a[96], b[96];
    fsT_seterr("output with shape %s doesn't match the broadcast shape %s", fsT_shape_str(x, a, sizeof a),
               fsT_shape_str(src, b, sizeof b));
    return -1;
  }
  bool x_int = x->dtype == FS_I64 || x->dtype == FS_BOOL;
  if (x_int && (src->dtype == FS_F32 || src->dtype == FS_BF16 || (x->dtype == FS_BOOL && src->dtype == FS_I64))) {
    fsT_seterr("result type %s can't be cast to the desired output type %s",
               src->dtype == FS_I64 ? "Long" : src->dtype == FS_BF16 ? "BFloat16" : "Float",
               x->dtype == FS_BOOL ? "Bool" : "Long");
    return -1;
  }
  fs_tensor *c = fsT_to_dtype(src, x->dtype);
  int rc = c ? fsB_transfer(x->device, x->data, c->device, c->data, fsT_nbytes(x)) : -1;
  fsT_release(c);
  return rc;
}

/* ---- topk ---- */

static int topk_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin_slot(&c, n, out, FSG_SLOT(topk_backward)) < 0) return -1;
  if (c.d[0])
    c.k->topk_backward(n->iv[0], n->iv[1], n->iv[2], n->iv[3], c.d[0], fsT_f32(c.gout), fsT_i64(c.saved[0]));
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_topk(fs_tensor *x, int64_t k, int dim, bool largest, fs_tensor **indices) {
  int d;
  *indices = NULL;
  if (fsG_norm_dim(dim, x->rank, &d) < 0) return NULL;
  int64_t O, L, I, shape[FS_MAX_RANK];
  fsG_split_at(x, d, &O, &L, &I);
  if (k < 0 || k > L) {
    fsT_seterr("selected index k out of range");
    return NULL;
  }
  if (x->dtype == FS_F64) return fsG_topk_f64(x, k, d, largest, indices);
  memcpy(shape, x->shape, sizeof shape);
  if (x->rank) shape[d] = k;
  fs_tensor *fx = fsT_to_dtype(x, x->dtype == FS_BOOL ? FS_I64 : FS_F32), *out = NULL, *idx = NULL;
  fs_tensor *f32 = fx ? fsT_to_dtype(fx, FS_F32) : NULL;
  fsG_stage s;
  if (f32 && fsG_stage_begin_slot(&s, "topk", 1, &f32, FSG_SLOT(topk_forward)) == 0) {
    out = out_new(&s, FS_F32, x->rank, shape);
    idx = out ? out_new(&s, FS_I64, x->rank, shape) : NULL;
    if (idx && s.k->topk_forward(largest, O, L, I, k, fsT_f32(s.h[0]), fsT_f32(out), fsT_i64(idx)) < 0) {
      fsT_seterr("out of memory");
      fsT_release(idx);
      idx = NULL;
    }
    fsG_stage_end(&s);
    if (!idx) {
      fsT_release(out);
      out = NULL;
    }
    out = fsG_to_dev(out, s.dev);
    idx = out ? fsG_to_dev(idx, s.dev) : (fsT_release(idx), NULL);
    if (out && !idx) {
      fsT_release(out);
      out = NULL;
    }
  }
  if (out && x->dtype != FS_F32) { /* integer values stay integral */
    fs_tensor *c = fsT_to_dtype(out, x->dtype == FS_BOOL ? FS_BOOL : x->dtype);
    fsT_release(out);
    out = c;
  } else if (out) {
    out = fsG_record(out, topk_bw, 1, &f32, fsT_retain(idx), NULL, 0, 0);
    if (out && out->node) {
      out->node->iv[0] = O, out->node->iv[1] = L, out->node->iv[2] = I, out->node->iv[3] = k;
    }
  }
  fsT_release(fx);
  fsT_release(f32);
  if (out) *indices = idx;
  else fsT_release(idx);
  return out;
}

/* ---- multinomial ----
 * Every float type samples the same way: its weights read as doubles
 * (float32, bfloat16 widened exactly; float64 as they are), summed in
 * double, against float32 uniforms of the script's stream at (key,
 * offset), so probabilities of equal values give the same samples in any
 * type; torch's distribution, not its draws. */

fs_tensor *fsG_multinomial(fs_tensor *probs, int64_t n, bool replacement, uint64_t key, uint64_t offset) {
  if (!fsG_check_inputs("multinomial", 1, &probs)) return NULL;
  if (probs->rank != 1 && probs->rank != 2) {
    fsT_seterr("prob_dist must be 1 or 2 dim");
    return NULL;
  }
  if (!fsT_is_floating(probs->dtype)) {
    fsT_seterr("multinomial only supports floating-point dtypes for input, got: %s",
               probs->dtype == FS_BOOL ? "Bool" : "Long");
    return NULL;
  }
  if (probs->dtype == FS_F16 && probs->device == FS_DEV_CPU) { /* torch 1.13's cpu kernel has no half */
    fsT_seterr("multinomial is not implemented for half on CPU");
    return NULL;
  }
  int64_t C = probs->shape[probs->rank - 1], R = probs->rank == 2 ? probs->shape[0] : 1;
  if (n <= 0) {
    fsT_seterr("cannot sample n_sample <= 0 samples");
    return NULL;
  }
  if (!replacement && n > C) {
    fsT_seterr("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    return NULL;
  }
  fs_tensor *h = fsG_on_host(probs);
  if (!h) return NULL;
  for (int64_t i = 0; i < h->numel; i++) {
    double v = fsT_get(h, i);
    if (!isfinite(v) || v < 0) {
      fsT_seterr("probability tensor contains either `inf`, `nan` or element < 0");
      fsT_release(h);
      return NULL;
    }
  }
  int64_t shape[2] = {R, n};
  fs_tensor *out = fsT_new(FS_I64, FS_DEV_CPU, probs->rank, probs->rank == 2 ? shape : shape + 1);
  double *w = out ? malloc((size_t)(C ? C : 1) * sizeof *w) : NULL;
  float *u = w ? malloc((size_t)n * sizeof *u) : NULL;
  int rc = u ? 0 : -1;
  if (rc) fsT_seterr("out of memory");
  for (int64_t r = 0; rc == 0 && r < R; r++) {
    double total = 0;
    for (int64_t c = 0; c < C; c++) total += w[c] = fsT_get(h, r * C + c);
    if (!(total > 0)) {
      fsT_seterr("invalid multinomial distribution (sum of probabilities <= 0)");
      rc = -1;
      break;
    }
    fsR_uniform_key(u, (size_t)n, key, (size_t)(offset + (uint64_t)(r * n)), 0, 1);
    for (int64_t k = 0; k < n; k++) {
      /* the first category whose cumulative weight passes u * total;
       * without replacement a drawn category is marked used (-1), and once
       * the positive weights are used up the lowest unused one is taken */
      int64_t pick = -1;
      if (total > 0) {
        double target = u[k] * total, acc = 0;
        for (int64_t c = 0; c < C; c++)
          if (w[c] > 0) {
            pick = c; /* the last positive one when rounding leaves acc short */
            if ((acc += w[c]) > target) break;
          }
      } else {
        for (int64_t c = 0; c < C && pick < 0; c++)
          if (w[c] == 0) pick = c;
      }
      if (pick < 0) pick = C - 1; /* unreachable: n <= C unused categories */
      fsT_i64(out)[r * n + k] = pick;
      if (!replacement) { /* the remaining mass, summed afresh (no drift) */
        w[pick] = -1;
        total = 0;
        for (int64_t c = 0; c < C; c++) total += w[c] > 0 ? w[c] : 0;
      }
    }
  }
  free(w);
  free(u);
  fsT_release(h);
  if (rc) {
    fsT_release(out);
    return NULL;
  }
  return fsG_to_dev(out, probs->device);
}
