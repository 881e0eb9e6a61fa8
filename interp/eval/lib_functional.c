/* lib_functional.c -- torch.nn.functional's forms of the layers (`conv2d`,
 * `max_pool2d`, `batch_norm` ...) and its losses (`cross_entropy` with all
 * its options, `nll_loss`, ...) with their module forms (`CrossEntropyLoss()`,
 * Loss values), over runtime/tensor/autograd.h, named as torch names them
 * (the import work maps `F.x` to `x`).  Layer functions take their weights as
 * arguments; the layer classes (lib_nn.c) hold them.  Rows:
 * interp/lang/signatures.c ("torch.nn.functional"); the checker knows them
 * only by their rows' return type.  Messages are torch's words. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "eval_int.h"
#include "rng.h"

/* ---- sizes: an int or a tuple of nd ints (kernel_size, stride, ...) ---- */

int fsE_size_arg(const fs_value *v, const char *fn, const char *what, int nd, int64_t *out) {
  if (v->type == FSV_INT || v->type == FSV_BOOL) {
    for (int i = 0; i < nd; i++) out[i] = fsE_ival(v);
    return 0;
  }
  if ((v->type == FSV_LIST || v->type == FSV_TUPLE) && v->u.seq.n == (size_t)nd) {
    for (int i = 0; i < nd; i++) {
      const fs_value *x = v->u.seq.items[i];
      if (x->type != FSV_INT) goto bad;
      out[i] = x->u.i;
    }
    return 0;
  }
bad:
  fsV_seterr("%s(): argument '%s' must be an int or a tuple of %d ints", fn, what, nd);
  return -1;
}

int fsE_conv_padding(const fs_value *v, const char *fn, int nd, const int64_t *kernel,
                     const int64_t *stride, const int64_t *dil, int64_t *pad) {
  if (v->type != FSV_STR) return fsE_size_arg(v, fn, "padding", nd, pad);
  const char *s = v->u.str.s;
  if (strcmp(s, "valid") && strcmp(s, "same")) {
    fsV_seterr("Invalid padding string '%s'", s);
    return -1;
  }
  for (int i = 0; i < nd; i++) {
    int64_t total = dil[i] * (kernel[i] - 1);
    if (s[0] == 'v') pad[i] = 0;
    else if (stride[i] != 1) {
      fsV_seterr("padding='same' is not supported for strided convolutions");
      return -1;
    } else if (total % 2) {
      fsV_seterr("%s(): padding='same' with an even effective kernel size is not supported (torch pads one side more)", fn);
      return -1;
    } else pad[i] = total / 2;
  }
  return 0;
}

/* An optional tensor argument: NULL for None; -1 when neither. */
static int opt_tensor(const fs_value *v, const char *fn, const char *what, fs_tensor **t) {
  *t = NULL;
  if (v->type == FSV_NONE) return 0;
  return (*t = fsE_need_tensor(v, fn, what)) ? 0 : -1;
}

/* ---- convolution ---- */

/* conv1d/conv2d(input, weight, bias, stride, padding, dilation, groups) */
static fs_value *functional_conv(int nd, fs_value **s) {
  const char *fn = nd == 1 ? "conv1d" : "conv2d";
  fs_tensor *x = fsE_need_tensor(s[0], fn, "input"), *W = x ? fsE_need_tensor(s[1], fn, "weight") : NULL, *b;
  int64_t stride[2], pad[2], dil[2], kernel[2];
  if (!W || opt_tensor(s[2], fn, "bias", &b) < 0 || fsE_size_arg(s[3], fn, "stride", nd, stride) < 0 ||
      fsE_size_arg(s[5], fn, "dilation", nd, dil) < 0)
    return NULL;
  for (int i = 0; i < nd; i++) kernel[i] = W->rank == nd + 2 ? W->shape[2 + i] : 1;
  if (fsE_conv_padding(s[4], fn, nd, kernel, stride, dil, pad) < 0) return NULL;
  return fsE_tensor_value(fsG_conv(nd, x, W, b, stride, pad, dil, fsE_ival(s[6])));
}

NATIVE(functional_conv1d) { return functional_conv(1, s); }
NATIVE(functional_conv2d) { return functional_conv(2, s); }

/* conv_transpose2d(input, weight, bias, stride, padding, output_padding,
 * groups, dilation) */
NATIVE(functional_conv_transpose2d) {
  const char *fn = "conv_transpose2d";
  fs_tensor *x = fsE_need_tensor(s[0], fn, "input"), *W = x ? fsE_need_tensor(s[1], fn, "weight") : NULL, *b;
  int64_t st[2], pad[2], op[2], dil[2];
  if (!W || opt_tensor(s[2], fn, "bias", &b) < 0 || fsE_size_arg(s[3], fn, "stride", 2, st) < 0 ||
      fsE_size_arg(s[4], fn, "padding", 2, pad) < 0 || fsE_size_arg(s[5], fn, "output_padding", 2, op) < 0 ||
      fsE_size_arg(s[7], fn, "dilation", 2, dil) < 0)
    return NULL;
  return fsE_tensor_value(fsG_conv_transpose2d(x, W, b, st, pad, op, dil, fsE_ival(s[6])));
}

/* ---- pooling ---- */

/* kernel_size, stride (None: the kernel), padding of a pooling call */
static int pool_sizes(fs_value **s, const char *fn, int64_t *k, int64_t *st, int64_t *p) {
  if (fsE_size_arg(s[0], fn, "kernel_size", 2, k) < 0 || fsE_size_arg(s[2], fn, "padding", 2, p) < 0)
    return -1;
  if (s[1]->type == FSV_NONE || ((s[1]->type == FSV_LIST || s[1]->type == FSV_TUPLE) && s[1]->u.seq.n == 0)) {
    memcpy(st, k, 2 * sizeof *k);
    return 0;
  }
  return fsE_size_arg(s[1], fn, "stride", 2, st);
}

/* max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices) */
NATIVE(functional_max_pool2d) {
  int64_t k[2], st[2], p[2], d[2];
  fs_tensor *x = fsE_need_tensor(s[0], "max_pool2d", "input");
  if (!x || pool_sizes(s + 1, "max_pool2d", k, st, p) < 0 || fsE_size_arg(s[4], "max_pool2d", "dilation", 2, d) < 0)
    return NULL;
  if (fsV_truthy(s[6])) {
    fsV_seterr("max_pool2d(): return_indices=True is not supported");
    return NULL;
  }
  return fsE_tensor_value(fsG_max_pool2d(x, k, st, p, d, fsV_truthy(s[5])));
}

/* avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) */
NATIVE(functional_avg_pool2d) {
  int64_t k[2], st[2], p[2];
  fs_tensor *x = fsE_need_tensor(s[0], "avg_pool2d", "input");
  if (!x || pool_sizes(s + 1, "avg_pool2d", k, st, p) < 0) return NULL;
  if (s[6]->type != FSV_NONE) {
    fsV_seterr("avg_pool2d(): divisor_override is not supported");
    return NULL;
  }
  return fsE_tensor_value(fsG_avg_pool2d(x, k, st, p, fsV_truthy(s[4]), fsV_truthy(s[5])));
}

/* An adaptive pool's output size: an int, or a pair whose None keeps the
 * input's size (-1). */
int fsE_adaptive_size(const fs_value *v, const char *fn, int64_t *size) {
  if ((v->type == FSV_LIST || v->type == FSV_TUPLE) && v->u.seq.n == 2) {
    for (int i = 0; i < 2; i++) {
      const fs_value *x = v->u.seq.items[i];
      if (x->type != FSV_INT && x->type != FSV_NONE) return fsE_size_arg(v, fn, "output_size", 2, size);
      size[i] = x->type == FSV_NONE ? -1 : x->u.i;
    }
    return 0;
  }
  return fsE_size_arg(v, fn, "output_size", 2, size);
}

NATIVE(functional_adaptive_avg_pool2d) {
  int64_t size[2];
  fs_tensor *x = fsE_need_tensor(s[0], "adaptive_avg_pool2d", "input");
  if (!x || fsE_adaptive_size(s[1], "adaptive_avg_pool2d", size) < 0) return NULL;
  return fsE_tensor_value(fsG_adaptive_avg_pool2d(x, size));
}

/* ---- normalization ---- */

/* batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps) */
NATIVE(functional_batch_norm) {
  fs_tensor *x = fsE_need_tensor(s[0], "batch_norm", "input"), *rm, *rv, *w, *b;
  if (!x || opt_tensor(s[1], "batch_norm", "running_mean", &rm) < 0 ||
      opt_tensor(s[2], "batch_norm", "running_var", &rv) < 0 || opt_tensor(s[3], "batch_norm", "weight", &w) < 0 ||
      opt_tensor(s[4], "batch_norm", "bias", &b) < 0)
    return NULL;
  return fsE_tensor_value(fsG_batch_norm(x, rm, rv, w, b, fsV_truthy(s[5]), fsV_to_double(s[6]),
                                         fsV_to_double(s[7])));
}

/* leaky_relu(input, negative_slope, inplace), relu(input, inplace), mish(input, inplace) */
static bool not_inplace(const fs_value *v, const char *fn) {
  if (!fsV_truthy(v)) return true;
  fsV_seterr("%s(): inplace=True is not supported", fn);
  return false;
}

NATIVE(functional_leaky_relu) {
  fs_tensor *x = fsE_need_tensor(s[0], "leaky_relu", "input");
  if (!x || !not_inplace(s[2], "leaky_relu")) return NULL;
  return fsE_tensor_value(fsG_unary(FSU_LEAKY_RELU, x, fsV_to_double(s[1]), 0));
}

NATIVE(functional_relu) {
  fs_tensor *x = fsE_need_tensor(s[0], "relu", "input");
  return x && not_inplace(s[1], "relu") ? fsE_tensor_value(fsG_unary(FSU_RELU, x, 0, 0)) : NULL;
}

NATIVE(functional_mish) {
  fs_tensor *x = fsE_need_tensor(s[0], "mish", "input");
  return x && not_inplace(s[1], "mish") ? fsE_tensor_value(fsG_unary(FSU_MISH, x, 0, 0)) : NULL;
}

/* group_norm(input, num_groups, weight, bias, eps) */
NATIVE(functional_group_norm) {
  fs_tensor *x = fsE_need_tensor(s[0], "group_norm", "input"), *w, *b;
  if (!x || opt_tensor(s[2], "group_norm", "weight", &w) < 0 || opt_tensor(s[3], "group_norm", "bias", &b) < 0)
    return NULL;
  return fsE_tensor_value(fsG_group_norm(x, fsE_ival(s[1]), w, b, fsV_to_double(s[4])));
}

/* A weight or bias left None: `value` in x's type, not requiring grad */
static fs_tensor *norm_param(fs_tensor *given, const fs_tensor *x, int64_t C, float value) {
  if (given) return fsT_retain(given);
  fs_tensor *f = fsT_zeros(FS_F32, FS_DEV_CPU, 1, &C), *t = NULL;
  if (f) {
    for (int64_t i = 0; i < C; i++) fsT_f32(f)[i] = value;
    t = fsT_to_dtype(f, x->dtype);
  }
  fsT_release(f);
  fs_tensor *d = t ? fsT_to_device(t, x->device) : NULL;
  fsT_release(t);
  return d;
}

/* layer_norm(input, normalized_shape, weight, bias, eps): over the last dim
 * only; a None weight or bias is ones or zeros (torch's values) */
NATIVE(functional_layer_norm) {
  fs_tensor *x = fsE_need_tensor(s[0], "layer_norm", "input"), *w, *b;
  int64_t C;
  if (!x || opt_tensor(s[2], "layer_norm", "weight", &w) < 0 || opt_tensor(s[3], "layer_norm", "bias", &b) < 0)
    return NULL;
  if (!(s[1]->type == FSV_INT || s[1]->u.seq.n == 1)) {
    fsV_seterr("layer_norm(): this runtime normalizes over the last dimension only (a normalized_shape of one size)");
    return NULL;
  }
  if (fsE_size_arg(s[1], "layer_norm", "normalized_shape", 1, &C) < 0) return NULL;
  fs_tensor *wt = norm_param(w, x, C, 1.0f), *bt = wt ? norm_param(b, x, C, 0.0f) : NULL;
  fs_tensor *out = bt ? fsG_layernorm(x, wt, bt, fsV_to_double(s[4])) : NULL;
  fsT_release(wt);
  fsT_release(bt);
  return fsE_tensor_value(out);
}

/* rms_norm(input, normalized_shape, weight, eps): torch 2.4's, not in 1.13 */
NATIVE(functional_rms_norm) {
  fs_tensor *x = fsE_need_tensor(s[0], "rms_norm", "input"), *w;
  int64_t shape[FS_MAX_RANK];
  int nd = s[1]->type == FSV_INT ? 1 : (int)s[1]->u.seq.n;
  if (!x || opt_tensor(s[2], "rms_norm", "weight", &w) < 0) return NULL;
  if (nd < 1 || nd > FS_MAX_RANK) {
    fsV_seterr("rms_norm(): normalized_shape must have 1 to %d dims", FS_MAX_RANK);
    return NULL;
  }
  if (fsE_size_arg(s[1], "rms_norm", "normalized_shape", nd, shape) < 0) return NULL;
  return fsE_tensor_value(fsG_rms_norm(x, nd, shape, w, s[3]->type == FSV_NONE ? NAN : fsV_to_double(s[3])));
}

/* scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
 * is_causal): dropout masks come from the script's random stream */
NATIVE(functional_sdpa) {
  const char *fn = "scaled_dot_product_attention";
  fs_tensor *q = fsE_need_tensor(s[0], fn, "query"), *k = q ? fsE_need_tensor(s[1], fn, "key") : NULL;
  fs_tensor *v = k ? fsE_need_tensor(s[2], fn, "value") : NULL, *mask;
  if (!v || opt_tensor(s[3], fn, "attn_mask", &mask) < 0) return NULL;
  double p = fsV_to_double(s[4]);
  uint64_t key = p > 0 ? fsR_subkey(fsR_key(E->seed, "F.dropout"), fsE_draw(E, 1)) : 0;
  return fsE_tensor_value(fsG_scaled_dot_product_attention(q, k, v, mask, p, fsV_truthy(s[5]), key));
}

/* interpolate(input, size, scale_factor, mode, align_corners,
 * recompute_scale_factor[, antialias]) with s pointing at size: the output
 * size per spatial dim and the scale factors as given (NaN: none) */
int fsE_interp_args(fs_value **s, const fs_tensor *x, int64_t *size, double *scale) {
  int nd = x->rank - 2;
  if (nd < 1 || nd > 2) {
    fsV_seterr("interpolate: only 3D and 4D input (1 or 2 spatial dims) is supported, got %dD", x->rank);
    return -1;
  }
  if (strcmp(s[2]->u.str.s, "nearest")) {
    fsV_seterr("interpolate: mode '%s' is not supported (only 'nearest')", s[2]->u.str.s);
    return -1;
  }
  if (s[3]->type != FSV_NONE || fsV_truthy(s[4])) {
    fsV_seterr("interpolate: align_corners and recompute_scale_factor are not supported with mode 'nearest'");
    return -1;
  }
  if ((s[0]->type == FSV_NONE) == (s[1]->type == FSV_NONE)) {
    fsV_seterr("only one of size or scale_factor should be defined");
    return -1;
  }
  if (s[0]->type != FSV_NONE) {
    for (int i = 0; i < nd; i++) scale[i] = NAN;
    return fsE_size_arg(s[0], "interpolate", "size", nd, size);
  }
  const fs_value *f = s[1];
  bool seq = f->type == FSV_LIST || f->type == FSV_TUPLE;
  if (seq && f->u.seq.n != (size_t)nd) {
    fsV_seterr("Input and scale_factor must have the same number of spatial dimensions, but got input with spatial dimensions of %d and scale_factor of length %zu",
               nd, f->u.seq.n);
    return -1;
  }
  for (int i = 0; i < nd; i++) {
    const fs_value *v = seq ? f->u.seq.items[i] : f;
    if (v->type != FSV_INT && v->type != FSV_FLOAT) {
      fsV_seterr("interpolate(): scale_factor must be a number or a tuple of numbers");
      return -1;
    }
    scale[i] = fsV_to_double(v);
    size[i] = (int64_t)floor((double)x->shape[2 + i] * scale[i]); /* torch: floor(float(size * factor)) */
  }
  return 0;
}

NATIVE(functional_interpolate) {
  int64_t size[2];
  double scale[2];
  fs_tensor *x = fsE_need_tensor(s[0], "interpolate", "input");
  if (!x || fsE_interp_args(s + 1, x, size, scale) < 0) return NULL;
  if (fsV_truthy(s[6])) {
    fsV_seterr("interpolate: antialias=True is not supported with mode 'nearest'");
    return NULL;
  }
  return fsE_tensor_value(fsG_interpolate_nearest(x, x->rank - 2, size, scale));
}

/* ---- losses (issue 14 point 5) ---- */

/* reduction= as torch spells it; 'batchmean' is kl_div's only */
static int reduction_of(const fs_value *v, bool batchmean, fsG_reduction *red) {
  const char *r = v->u.str.s;
  if (!strcmp(r, "mean")) *red = FSG_MEAN;
  else if (!strcmp(r, "sum")) *red = FSG_SUM;
  else if (!strcmp(r, "none")) *red = FSG_NONE;
  else if (batchmean && !strcmp(r, "batchmean")) *red = FSG_BATCHMEAN;
  else {
    fsV_seterr("%s is not a valid value for reduction", r);
    return -1;
  }
  return 0;
}

/* input, target and the deprecated size_average/reduce (which must be None) */
static int loss_inputs(fs_value **s, const char *fn, const fs_value *size_average, const fs_value *reduce,
                       fs_tensor **x, fs_tensor **y) {
  if ((size_average && size_average->type != FSV_NONE) || (reduce && reduce->type != FSV_NONE)) {
    fsV_seterr("%s(): size_average and reduce are deprecated and not supported; use reduction= instead", fn);
    return -1;
  }
  *x = fsE_need_tensor(s[0], fn, "input");
  *y = *x ? fsE_need_tensor(s[1], fn, "target") : NULL;
  return *y ? 0 : -1;
}

/* cross_entropy / nll_loss (input, target, weight, size_average, ignore_index,
 * reduce, reduction[, label_smoothing]) */
static fs_value *class_loss(fs_value **s, bool logits) {
  const char *fn = logits ? "cross_entropy" : "nll_loss";
  fs_tensor *x, *y, *w;
  fsG_reduction red;
  if (loss_inputs(s, fn, s[3], s[5], &x, &y) < 0 || opt_tensor(s[2], fn, "weight", &w) < 0 ||
      reduction_of(s[6], false, &red) < 0)
    return NULL;
  int64_t ignore = fsE_ival(s[4]);
  double ls = logits ? fsV_to_double(s[7]) : 0.0;
  /* torch's defaults on class-last rows take the training fast path, unless
   * a target is ignore_index (the fast kernel knows no ignored rows) */
  bool fast = logits && !w && ls == 0 && red == FSG_MEAN && y->dtype == FS_I64 && x->rank >= 2 &&
              y->rank == x->rank - 1 && !memcmp(y->shape, x->shape, (size_t)y->rank * sizeof *y->shape);
  if (fast) {
    fs_tensor *hy = fsT_to_device(y, FS_DEV_CPU);
    if (!hy) return fsE_rt_fail();
    for (int64_t i = 0; fast && i < hy->numel; i++) fast = fsT_i64(hy)[i] != ignore;
    fsT_release(hy);
  }
  if (fast) return fsE_tensor_value(fsG_cross_entropy(x, y));
  return fsE_tensor_value(fsG_nll(x, y, w, logits, ignore, ls, red));
}

NATIVE(functional_cross_entropy) { return class_loss(s, true); }
NATIVE(functional_nll_loss) { return class_loss(s, false); }

/* an elementwise loss: x, y already bound; the rest from its row */
static fs_value *point_loss(fsN_ploss kind, const char *fn, fs_value **s, const fs_value *sa, const fs_value *rd,
                            const fs_value *reduction, double param, const fs_value *weight, const fs_value *pos_weight) {
  fs_tensor *x, *y, *w = NULL, *pw = NULL;
  fsG_reduction red;
  if (loss_inputs(s, fn, sa, rd, &x, &y) < 0 || reduction_of(reduction, kind == FSN_KL_DIV, &red) < 0 ||
      (weight && opt_tensor(weight, fn, "weight", &w) < 0) ||
      (pos_weight && opt_tensor(pos_weight, fn, "pos_weight", &pw) < 0))
    return NULL;
  if (kind == FSN_MSE && red == FSG_MEAN && x->dtype == FS_F32 && y->dtype == FS_F32 && fsT_same_shape(x, y))
    return fsE_tensor_value(fsG_mse_loss(x, y)); /* the training fast path */
  return fsE_tensor_value(fsG_ploss(kind, x, y, param, pw, w, red));
}

/* mse_loss/l1_loss(input, target, size_average, reduce, reduction) */
NATIVE(functional_mse_loss) { return point_loss(FSN_MSE, "mse_loss", s, s[2], s[3], s[4], 0, NULL, NULL); }
NATIVE(functional_l1_loss) { return point_loss(FSN_L1, "l1_loss", s, s[2], s[3], s[4], 0, NULL, NULL); }

/* smooth_l1_loss(input, target, size_average, reduce, reduction, beta) */
NATIVE(functional_smooth_l1_loss) {
  double beta = fsV_to_double(s[5]);
  if (beta < 0) {
    fsV_seterr("smooth_l1_loss does not support negative values for beta.");
    return NULL;
  }
  return point_loss(FSN_SMOOTH_L1, "smooth_l1_loss", s, s[2], s[3], s[4], beta, NULL, NULL);
}

/* huber_loss(input, target, reduction, delta) */
NATIVE(functional_huber_loss) {
  double delta = fsV_to_double(s[3]);
  if (!(delta > 0)) {
    fsV_seterr("huber_loss does not support non-positive values for delta.");
    return NULL;
  }
  return point_loss(FSN_HUBER, "huber_loss", s, NULL, NULL, s[2], delta, NULL, NULL);
}

/* binary_cross_entropy(input, target, weight, size_average, reduce, reduction) */
NATIVE(functional_bce) {
  return point_loss(FSN_BCE, "binary_cross_entropy", s, s[3], s[4], s[5], 0, s[2], NULL);
}

/* binary_cross_entropy_with_logits(input, target, weight, size_average, reduce, reduction, pos_weight) */
NATIVE(functional_bce_logits) {
  return point_loss(FSN_BCE_LOGITS, "binary_cross_entropy_with_logits", s, s[3], s[4], s[5], 0, s[2], s[6]);
}

/* kl_div(input, target, size_average, reduce, reduction, log_target) */
NATIVE(functional_kl_div) {
  return point_loss(FSN_KL_DIV, "kl_div", s, s[2], s[3], s[4], fsV_truthy(s[5]), NULL, NULL);
}

/* cosine_similarity(x1, x2, dim, eps) */
NATIVE(functional_cosine_similarity) {
  fs_tensor *x1 = fsE_need_tensor(s[0], "cosine_similarity", "x1");
  fs_tensor *x2 = x1 ? fsE_need_tensor(s[1], "cosine_similarity", "x2") : NULL;
  return x2 ? fsE_tensor_value(fsG_cosine_similarity(x1, x2, (int)fsE_ival(s[2]), fsV_to_double(s[3]))) : NULL;
}

/* ---- the losses' module forms: CrossEntropyLoss(...)(input, target) ----
 * A Loss value keeps its constructor's bound slots; calling it runs the
 * function whose parameters are (input, target) followed by those slots. */

typedef struct lossv {
  const char *cls;
  fsE_native fn;
  size_t n;
  fs_value **slots; /* held */
} lossv;

static void loss_free(void *p) {
  lossv *l = p;
  for (size_t i = 0; i < l->n; i++) fsV_release(l->slots[i]);
  free(l->slots);
  free(l);
}

static fs_value *loss_call(fsE_ctx *E, fs_value *self, const fsV_args *a) {
  lossv *l = self->u.obj.data;
  if (a->npos != 2 || a->nkw) {
    fsV_seterr("%s.forward() takes exactly two tensor arguments (input, target)", l->cls);
    return NULL;
  }
  fs_value **s = malloc((l->n + 2) * sizeof *s);
  if (!s) {
    fsV_seterr("out of memory");
    return NULL;
  }
  s[0] = a->pos[0];
  s[1] = a->pos[1];
  memcpy(s + 2, l->slots, l->n * sizeof *s);
  fs_value *r = l->fn(E, NULL, s, a);
  free(s);
  return r;
}

static char *loss_repr(fs_value *v) {
  lossv *l = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "%s()", l->cls);
  return fsV_buf_take(&b);
}

static const fsV_class loss_class = {.name = "Loss", .call = loss_call, .repr = loss_repr, .free = loss_free};

static fs_value *loss_value(const char *cls, fsE_native fn, fs_value **s) {
  const fsSig *sig = fsSig_find(cls);
  assert(sig && sig->kind == FSSIG_CLASS);
  lossv *l = calloc(1, sizeof *l);
  if (l) l->slots = calloc(sig->nparams + 1, sizeof *l->slots);
  if (!l || !l->slots) {
    free(l);
    fsV_seterr("out of memory");
    return NULL;
  }
  l->cls = sig->name;
  l->fn = fn;
  for (; l->n < sig->nparams; l->n++) l->slots[l->n] = fsV_retain(s[l->n]);
  return fsV_obj(&loss_class, l);
}

#define LOSS_CLASS(cls, fn) NATIVE(module_##fn) { return loss_value(cls, functional_##fn, s); }
LOSS_CLASS("CrossEntropyLoss", cross_entropy)
LOSS_CLASS("NLLLoss", nll_loss)
LOSS_CLASS("MSELoss", mse_loss)
LOSS_CLASS("L1Loss", l1_loss)
LOSS_CLASS("SmoothL1Loss", smooth_l1_loss)
LOSS_CLASS("HuberLoss", huber_loss)
LOSS_CLASS("BCELoss", bce)
LOSS_CLASS("BCEWithLogitsLoss", bce_logits)
LOSS_CLASS("KLDivLoss", kl_div)
LOSS_CLASS("CosineSimilarity", cosine_similarity)

static const fsE_reg functional_funcs[] = {
  {"conv1d", functional_conv1d}, {"conv2d", functional_conv2d},
  {"conv_transpose2d", functional_conv_transpose2d}, {"max_pool2d", functional_max_pool2d}, {"avg_pool2d", functional_avg_pool2d},
  {"adaptive_avg_pool2d", functional_adaptive_avg_pool2d}, {"batch_norm", functional_batch_norm},
  {"scaled_dot_product_attention", functional_sdpa}, {"interpolate", functional_interpolate}, {"leaky_relu", functional_leaky_relu}, {"mish", functional_mish},
  {"relu", functional_relu},
  {"group_norm", functional_group_norm}, {"layer_norm", functional_layer_norm}, {"rms_norm", functional_rms_norm},
  {"cross_entropy", functional_cross_entropy}, {"nll_loss", functional_nll_loss},
  {"mse_loss", functional_mse_loss}, {"l1_loss", functional_l1_loss},
  {"smooth_l1_loss", functional_smooth_l1_loss}, {"huber_loss", functional_huber_loss},
  {"binary_cross_entropy", functional_bce}, {"binary_cross_entropy_with_logits", functional_bce_logits},
  {"kl_div", functional_kl_div}, {"cosine_similarity", functional_cosine_similarity},
  {"CrossEntropyLoss", module_cross_entropy}, {"NLLLoss", module_nll_loss}, {"MSELoss", module_mse_loss},
  {"L1Loss", module_l1_loss}, {"SmoothL1Loss", module_smooth_l1_loss}, {"HuberLoss", module_huber_loss},
  {"BCELoss", module_bce}, {"BCEWithLogitsLoss", module_bce_logits}, {"KLDivLoss", module_kl_div},
  {"CosineSimilarity", module_cosine_similarity},
  {NULL, NULL},
};
const fsE_lib fsE_lib_functional = {"functional", functional_funcs};
