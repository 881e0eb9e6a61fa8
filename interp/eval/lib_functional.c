/* lib_functional.c -- torch.nn.functional's forms of the layers (`conv2d`,
 * `max_pool2d`, `batch_norm` ...) over runtime/tensor/autograd.h, named as
 * torch names them (the import work maps `F.x` to `x`).  Each takes its
 * weights as arguments; the layer classes (lib_nn.c) hold them.  Rows:
 * interp/lang/signatures.c ("torch.nn.functional"); the checker knows them
 * only by their rows' return type.  Messages are torch's words. */
#include <string.h>

#include "autograd.h"
#include "eval_int.h"

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

static const fsE_reg functional_funcs[] = {
  {"conv1d", functional_conv1d}, {"conv2d", functional_conv2d},
  {"max_pool2d", functional_max_pool2d}, {"avg_pool2d", functional_avg_pool2d},
  {"adaptive_avg_pool2d", functional_adaptive_avg_pool2d}, {"batch_norm", functional_batch_norm},
  {NULL, NULL},
};
const fsE_lib fsE_lib_functional = {"functional", functional_funcs};
