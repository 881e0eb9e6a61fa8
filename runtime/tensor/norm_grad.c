/* norm_grad.c -- autograd entry points of GroupNorm and RMSNorm
 * (autograd.h): checks with torch's messages, a norm.h forward on host
 * tensors (other devices staged, as cnn_grad.c), the backward recorded with
 * the per-group (per-row) statistics saved.  Float64 inputs pass the same
 * checks, then go to f64_cnn.c. */
#include <math.h>
#include <string.h>

#include "autograd_int.h"
#include "f64_cnn.h"
#include "norm.h"

static bool f32_or_null(const char *op, const fs_tensor *t) {
  if (!t || t->dtype == FS_F32) return true;
  fsT_seterr("%s: expected a float32 tensor, got %s", op, fsT_dtype_name(t->dtype));
  return false;
}

/* out plus two saved statistics of n values each, computed on host; NULL
 * + error, everything released */
typedef struct norm_out { fs_tensor *out, *s0, *s1; } norm_out;

static int norm_begin(norm_out *o, const fs_tensor *x, int64_t n, bool two) {
  o->out = fsG_host_new(FS_F32, x->rank, x->shape);
  o->s0 = fsG_host_new(FS_F32, 1, &n);
  o->s1 = two ? fsG_host_new(FS_F32, 1, &n) : NULL;
  if (o->out && o->s0 && (!two || o->s1)) return 0;
  fsT_release(o->out);
  fsT_release(o->s0);
  fsT_release(o->s1);
  return -1;
}

/* moves the results to dev and records fn; NULL on failure */
static fs_tensor *norm_end(norm_out *o, fs_device dev, backward_fn fn, fs_tensor *const *ins, double s, int64_t k) {
  bool two = o->s1 != NULL;
  o->out = fsG_to_dev(o->out, dev);
  o->s0 = fsG_to_dev(o->s0, dev);
  if (two) o->s1 = fsG_to_dev(o->s1, dev);
  if (!o->out || !o->s0 || (two && !o->s1)) {
    fsT_release(o->out);
    fsT_release(o->s0);
    fsT_release(o->s1);
    return NULL;
  }
  return fsG_record(o->out, fn, 3, ins, o->s0, o->s1, s, k);
}

/* ---- GroupNorm ---- */

static int groupnorm_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  fs_tensor *x = n->in[0];
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  int64_t N = x->shape[0], C = x->shape[1], S = N * C != 0 ? x->numel / (N * C) : 0;
  fsN_groupnorm_backward(c.d[0], c.d[1], c.d[2], fsT_f32(c.gout), fsT_f32(c.in[0]),
                         c.in[1] ? fsT_f32(c.in[1]) : NULL, fsT_f32(c.saved[0]), fsT_f32(c.saved[1]),
                         N, C, S, n->k);
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_group_norm(fs_tensor *x, int64_t groups, fs_tensor *w, fs_tensor *b, double eps) {
  bool f64 = fsG_any_f64(3, (fs_tensor *const[]){x, w, b});
  if (!f64 && fsG_group_norm_low_ok(x, groups, w, b)) return fsG_group_norm_low(x, groups, w, b, eps);
  fsG_low lp;
  if (!f64 && fsG_low_begin(&lp, FSG_AC_KEEP, 3, (fs_tensor *const[]){x, w, b}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_group_norm(lp.w[0], groups, lp.w[1], lp.w[2], eps));
  fs_tensor *ins[3] = {x, w, b};
  char a[96];
  if (!fsG_check_inputs("group_norm", 3, ins) ||
      (f64 ? !fsG_one_dtype(3, ins)
           : !f32_or_null("group_norm", x) || !f32_or_null("group_norm", w) || !f32_or_null("group_norm", b)))
    return NULL;
  if (x->rank < 2 || groups <= 0 || x->shape[1] % groups) {
    fsT_seterr("Expected number of channels in input to be divisible by num_groups, but got input of shape %s and num_groups=%lld",
               fsT_shape_str(x, a, sizeof a), (long long)groups);
    return NULL;
  }
  int64_t N = x->shape[0], C = x->shape[1], S = N * C != 0 ? x->numel / (N * C) : 0, NG = N * groups;
  if ((w && w->numel != C) || (b && b->numel != C)) {
    fsT_seterr("Expected weight to be a vector of size equal to the number of channels in input, but got weight of shape %s and input of shape %s",
               fsT_shape_str(w && w->numel != C ? w : b, a, sizeof a), fsT_shape_str(x, a + 48, 48));
    return NULL;
  }
  if (f64) return fsG_group_norm_f64(ins, groups, eps);
  fsG_stage st;
  norm_out o;
  if (fsG_stage_begin(&st, "group_norm", 3, ins) < 0) return NULL;
  if (norm_begin(&o, x, NG, true) < 0) {
    fsG_stage_end(&st);
    return NULL;
  }
  fsN_groupnorm_forward(fsT_f32(o.out), fsT_f32(o.s0), fsT_f32(o.s1), fsT_f32(st.h[0]),
                        w ? fsT_f32(st.h[1]) : NULL, b ? fsT_f32(st.h[2]) : NULL, N, C, S, groups, (float)eps);
  fsG_stage_end(&st);
  return norm_end(&o, st.dev, groupnorm_bw, ins, eps, groups);
}

/* ---- RMSNorm ---- */

static int rmsnorm_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  int64_t M = c.saved[0]->numel, D = M ? out->numel / M : 0;
  fsN_rmsnorm_backward(c.d[0], c.d[1], fsT_f32(c.gout), fsT_f32(c.in[0]), c.in[1] ? fsT_f32(c.in[1]) : NULL,
                       fsT_f32(c.saved[0]), M, D);
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_rms_norm(fs_tensor *x, int nd, const int64_t *shape, fs_tensor *w, double eps) {
  bool f64 = fsG_any_f64(2, (fs_tensor *const[]){x, w});
  if (!f64 && fsG_rms_norm_low_ok(x, nd, shape, w)) return fsG_rms_norm_low(x, nd, shape, w, eps);
  fsG_low lp;
  if (!f64 && fsG_low_begin(&lp, FSG_AC_KEEP, 2, (fs_tensor *const[]){x, w}))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_rms_norm(lp.w[0], nd, shape, lp.w[1], eps));
  fs_tensor *ins[3] = {x, w, NULL};
  char a[96], s[96];
  if (!fsG_check_inputs("rms_norm", 2, ins) ||
      (f64 ? !fsG_one_dtype(2, ins) : !f32_or_null("rms_norm", x) || !f32_or_null("rms_norm", w)))
    return NULL;
  if (nd > x->rank || nd < 1 || memcmp(x->shape + x->rank - nd, shape, (size_t)nd * sizeof *shape) ||
      (w && (w->rank != nd || memcmp(w->shape, shape, (size_t)nd * sizeof *shape)))) {
    fsT_seterr("Given normalized_shape=%s, expected input with shape [*, %s, but got input of size%s",
               fsT_dims_str(nd, shape, a, sizeof a), fsT_dims_str(nd, shape, s, sizeof s) + 1,
               fsT_shape_str(x, s + 48, 48));
    return NULL;
  }
  int64_t D = 1;
  for (int i = 0; i < nd; i++) D *= shape[i];
  int64_t M = D ? x->numel / D : 0;
  if (isnan(eps)) eps = f64 ? 2.220446049250313e-16 : 1.1920928955078125e-07; /* eps=None: finfo(x.dtype).eps */
  if (f64) return fsG_rms_norm_f64(ins, M, D, nd, eps);
  fsG_stage st;
  norm_out o;
  if (fsG_stage_begin(&st, "rms_norm", 2, ins) < 0) return NULL;
  if (norm_begin(&o, x, M, false) < 0) {
    fsG_stage_end(&st);
    return NULL;
  }
  fsN_rmsnorm_forward(fsT_f32(o.out), fsT_f32(o.s0), fsT_f32(st.h[0]), w ? fsT_f32(st.h[1]) : NULL, M, D,
                      (float)eps);
  fsG_stage_end(&st);
  return norm_end(&o, st.dev, rmsnorm_bw, ins, eps, nd);
}
