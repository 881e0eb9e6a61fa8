/* lib_arith.c -- arithmetic on Tensor values: elementwise math and
 * where/masked_fill/clamp, reductions over a dim (with keepdim), softmax
 * and log_softmax, matmul/bmm.  Broadcasting and dtype promotion follow
 * torch (autograd.h's opening comment); every op is differentiable. */
#include <math.h>
#include <string.h>

#include "autograd.h"
#include "eval_int.h"

/* ---- elementwise ---- */

static fs_value *unary(fs_value *x, fsU_unary op, double p0, double p1, const char *fn) {
  fs_tensor *t = fsE_need_tensor(x, fn, "input");
  return t ? fsE_tensor_value(fsG_unary(op, t, p0, p1)) : NULL;
}

/* A method and a function of one tensor: self is the tensor, or slot 0 is */
#define UNARY(name, op)                                                            \
  NATIVE(t_##name) { return unary(self ? self : s[0], op, 0, 0, #name); }
UNARY(exp, FSU_EXP)
UNARY(log, FSU_LOG)
UNARY(sqrt, FSU_SQRT)
UNARY(rsqrt, FSU_RSQRT)
UNARY(abs, FSU_ABS)
UNARY(sin, FSU_SIN)
UNARY(cos, FSU_COS)
UNARY(tanh, FSU_TANH)
UNARY(sigmoid, FSU_SIGMOID)
UNARY(relu, FSU_RELU)

/* other: a tensor or a number, as a tensor on x's device (new reference) */
static fs_tensor *operand(const fs_value *v, const fs_tensor *x, const char *fn) {
  fs_tensor *t = fsE_as_tensor(v);
  if (t) return fsT_retain(t);
  if (!fsV_is_number(v)) {
    fsV_seterr("%s(): argument 'other' must be Tensor or Number, not %s", fn, fsV_type_name(v));
    return NULL;
  }
  fs_tensor *c = fsE_filled(v->type == FSV_FLOAT ? FS_F32 : FS_I64, 0, NULL, fsV_to_double(v));
  fs_tensor *d = c ? fsT_to_device(c, x->device) : NULL;
  fsT_release(c);
  return d;
}

NATIVE(t_pow) {
  fs_tensor *x = fsE_need_tensor(self ? self : s[0], "pow", "input");
  fs_value *e = self ? s[0] : s[1];
  if (!x) return NULL;
  if (fsV_is_number(e)) return fsE_tensor_value(fsG_unary(FSU_POW, x, fsV_to_double(e), 0));
  fs_tensor *y = operand(e, x, "pow");
  fs_value *r = y ? fsE_tensor_value(fsG_binary_op(FSU_POWT, x, y)) : NULL;
  fsT_release(y);
  return r;
}

static fs_value *binary_fn(fs_value *a, fs_value *b, fsU_binary op, const char *fn) {
  fs_tensor *x = fsE_need_tensor(a, fn, "input"), *y = x ? fsE_need_tensor(b, fn, "other") : NULL;
  return y ? fsE_tensor_value(fsG_binary_op(op, x, y)) : NULL;
}

NATIVE(t_maximum) { return self ? binary_fn(self, s[0], FSU_MAXIMUM, "maximum") : binary_fn(s[0], s[1], FSU_MAXIMUM, "maximum"); }
NATIVE(t_minimum) { return self ? binary_fn(self, s[0], FSU_MINIMUM, "minimum") : binary_fn(s[0], s[1], FSU_MINIMUM, "minimum"); }

NATIVE(t_clamp) {
  fs_tensor *x = fsE_need_tensor(self ? self : s[0], "clamp", "input");
  fs_value **b = self ? s : s + 1;
  if (!x) return NULL;
  if (b[0]->type == FSV_NONE && b[1]->type == FSV_NONE) {
    fsV_seterr("torch.clamp: At least one of 'min' or 'max' must not be None");
    return NULL;
  }
  double lo = b[0]->type == FSV_NONE ? NAN : fsV_to_double(b[0]), hi = b[1]->type == FSV_NONE ? NAN : fsV_to_double(b[1]);
  return fsE_tensor_value(fsG_unary(FSU_CLAMP, x, lo, hi));
}

NATIVE(b_where) {
  fs_tensor *c = fsE_need_tensor(s[0], "where", "condition");
  if (!c) return NULL;
  if (c->dtype != FS_BOOL) { /* torch 1.13 takes bool conditions only (masked_fill also takes int64) */
    fsV_seterr("where expected condition to be a boolean tensor, but got a tensor with dtype %s",
               c->dtype == FS_I64 ? "Long" : c->dtype == FS_BF16 ? "BFloat16" : "Float");
    return NULL;
  }
  fs_tensor *a_ = operand(s[1], c, "where"), *b = a_ ? operand(s[2], c, "where") : NULL;
  fs_value *r = b ? fsE_tensor_value(fsG_where(c, a_, b)) : NULL;
  fsT_release(a_);
  fsT_release(b);
  return r;
}

NATIVE(t_masked_fill) {
  fs_tensor *x = TENSOR(self), *m = fsE_need_tensor(s[0], "masked_fill", "mask");
  if (!m) return NULL;
  if (!fsV_is_number(s[1]) && !fsE_as_tensor(s[1])) {
    fsV_seterr("masked_fill() received an invalid combination of arguments - got (Tensor, %s)", fsV_type_name(s[1]));
    return NULL;
  }
  fs_tensor *v = operand(s[1], x, "masked_fill");
  fs_tensor *out = v ? fsG_where(m, v, x) : NULL;
  fsT_release(v);
  if (out && x->dtype == FS_I64) { /* an integer tensor stays integral */
    fs_tensor *i = fsT_to_dtype(out, FS_I64);
    fsT_release(out);
    out = i;
  }
  return fsE_tensor_value(out);
}

/* tril/triu(diagonal=0): x * mask over the last two dims */
static fs_value *triangle(fs_value *self, fs_value *diag, bool lower) {
  fs_tensor *x = TENSOR(self);
  if (x->rank < 2) {
    fsV_seterr("%s: input tensor must have at least 2 dimensions", lower ? "tril" : "triu");
    return NULL;
  }
  int64_t k = fsE_ival(diag), R = x->shape[x->rank - 2], C = x->shape[x->rank - 1], dims[2] = {R, C};
  fs_tensor *m = fsT_new(FS_I64, FS_DEV_CPU, 2, dims);
  for (int64_t i = 0; m && i < R; i++)
    for (int64_t j = 0; j < C; j++) fsT_i64(m)[i * C + j] = lower ? j - i <= k : j - i >= k;
  fs_tensor *dm = m ? fsT_to_device(m, x->device) : NULL, *zero = fsE_filled(x->dtype, 0, NULL, 0);
  fs_tensor *dz = zero ? fsT_to_device(zero, x->device) : NULL;
  fs_tensor *out = dm && dz ? fsG_where(dm, x, dz) : NULL;
  fsT_release(m);
  fsT_release(dm);
  fsT_release(zero);
  fsT_release(dz);
  if (out && out->dtype != x->dtype) { /* an integer or bool tensor keeps its dtype (where promoted it) */
    fs_tensor *i = fsT_to_dtype(out, x->dtype);
    fsT_release(out);
    out = i;
  }
  return fsE_tensor_value(out);
}

/* x.tril(diagonal) and torch.tril(input, diagonal) */
static fs_value *triangle_of(fs_value *self, fs_value **s, bool lower) {
  if (self) return triangle(self, s[0], lower);
  return fsE_need_tensor(s[0], lower ? "tril" : "triu", "input") ? triangle(s[0], s[1], lower) : NULL;
}

NATIVE(t_tril) { return triangle_of(self, s, true); }
NATIVE(t_triu) { return triangle_of(self, s, false); }

/* ---- reductions ---- */

static fs_value *pair_value(fs_tensor *a, fs_tensor *b) {
  if (!a || !b) {
    fsT_release(a);
    fsT_release(b);
    return fsE_rt_fail();
  }
  return fsV_pair(fsE_tensor_value(a), fsE_tensor_value(b));
}

/* max/min(): the total; max/min(dim, keepdim=False): (values, indices);
 * max/min(other): maximum/minimum */
static fs_value *extreme(fs_value *self, fs_value **s, bool want_max) {
  fs_tensor *x = TENSOR(self);
  if (fsE_as_tensor(s[0])) return binary_fn(self, s[0], want_max ? FSU_MAXIMUM : FSU_MINIMUM, want_max ? "max" : "min");
  if (s[0]->type == FSV_NONE) {
    if (x->numel == 0) {
      fsV_seterr("%s(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
                 want_max ? "max" : "min");
      return NULL;
    }
    int64_t flat = x->numel;
    fs_tensor *f = fsG_reshape(x, 1, &flat);
    fs_tensor *r = f ? fsG_extreme(want_max, f, 0, false, NULL) : NULL;
    fsT_release(f);
    return fsE_tensor_value(r);
  }
  int d;
  if (fsE_dim_arg(s[0], &d) < 0) return NULL;
  fs_tensor *idx;
  fs_tensor *v = fsG_extreme(want_max, x, d, fsV_truthy(s[1]), &idx);
  return pair_value(v, idx);
}

NATIVE(t_max) { return extreme(self, s, true); }
NATIVE(t_min) { return extreme(self, s, false); }

NATIVE(t_argmin) {
  fs_tensor *x = TENSOR(self), *idx = NULL, *v;
  if (s[0]->type == FSV_NONE) {
    int64_t flat = x->numel;
    fs_tensor *f = fsG_reshape(x, 1, &flat);
    v = f ? fsG_extreme(false, f, 0, false, &idx) : NULL;
    fsT_release(f);
  } else v = fsG_extreme(false, x, (int)fsE_ival(s[0]), fsV_truthy(s[1]), &idx);
  fsT_release(v);
  return fsE_tensor_value(idx);
}

/* over dim, or over everything (a flat view) when dim is None */
static fs_tensor *over(fs_tensor *x, const fs_value *dim, bool keepdim, int *d, fs_tensor **flat) {
  *flat = NULL;
  if (dim->type != FSV_NONE) {
    *d = (int)fsE_ival(dim);
    return x;
  }
  int64_t n = x->numel;
  *d = 0;
  (void)keepdim;
  return *flat = fsG_reshape(x, 1, &n);
}

/* var/std/norm of a bfloat16/float16 x: computed on its float32 copy and
 * rounded once, as torch's kernels (float accumulators) give them; the ops
 * of the formulas below would each round to the low type.  stat(x32, ctx)
 * is the statistic of a float32 (or any other type's) x. */
static fs_tensor *low_stat(fs_tensor *x, fs_tensor *(*stat)(fs_tensor *x, fs_value **s), fs_value **s) {
  if (!fsT_is_low(x->dtype)) return stat(x, s);
  fs_tensor *w = fsG_cast(x, FS_F32), *r = w ? stat(w, s) : NULL, *out = r ? fsG_cast(r, x->dtype) : NULL;
  fsT_release(w);
  fsT_release(r);
  return out;
}

/* var/std(dim=None, unbiased=True, keepdim=False, *, correction=None):
 * sum((x - mean)^2) / (N - c), c = correction if given, else 1 or 0 */
static fs_tensor *variance(fs_tensor *x, const fs_value *dim, bool unbiased, bool keepdim, const fs_value *corr) {
  int d;
  fs_tensor *flat, *src = over(x, dim, keepdim, &d, &flat);
  if (!src) return NULL;
  fs_tensor *m = fsG_sum_dim(src, d, true, true), *c = m ? fsG_binary(FSB_SUB, src, m) : NULL;
  fs_tensor *sq = c ? fsG_binary(FSB_MUL, c, c) : NULL;
  fs_tensor *sum = sq ? fsG_sum_dim(sq, d, keepdim && dim->type != FSV_NONE, false) : NULL;
  int dd = d < 0 ? d + src->rank : d;
  int64_t n = src->rank ? src->shape[dd] : 1;
  int64_t corr_n = corr->type != FSV_NONE ? fsE_ival(corr) : unbiased ? 1 : 0;
  fs_tensor *v = sum ? fsG_binary_scalar(FSB_DIV, sum, (double)(n - corr_n), false, false) : NULL;
  fsT_release(flat);
  fsT_release(m);
  fsT_release(c);
  fsT_release(sq);
  fsT_release(sum);
  return v;
}

static fs_tensor *var_of(fs_tensor *x, fs_value **s) { return variance(x, s[0], fsV_truthy(s[1]), fsV_truthy(s[2]), s[3]); }

static fs_tensor *std_of(fs_tensor *x, fs_value **s) {
  fs_tensor *v = var_of(x, s), *r = v ? fsG_unary(FSU_SQRT, v, 0, 0) : NULL;
  fsT_release(v);
  return r;
}

/* norm(p=2, dim=None, keepdim=False): (sum |x|^p)^(1/p) */
static fs_tensor *norm_of(fs_tensor *x, fs_value **s) {
  double p = fsV_to_double(s[0]);
  int d;
  fs_tensor *flat, *src = over(x, s[1], false, &d, &flat);
  if (!src) return NULL;
  fs_tensor *a_ = fsG_unary(FSU_ABS, src, 0, 0), *ap = a_ ? fsG_unary(FSU_POW, a_, p, 0) : NULL;
  fs_tensor *sum = ap ? fsG_sum_dim(ap, d, fsV_truthy(s[2]) && s[1]->type != FSV_NONE, false) : NULL;
  fs_tensor *r = sum ? fsG_unary(FSU_POW, sum, 1.0 / p, 0) : NULL;
  fsT_release(flat);
  fsT_release(a_);
  fsT_release(ap);
  fsT_release(sum);
  return r;
}

NATIVE(t_var) { return fsE_tensor_value(low_stat(TENSOR(self), var_of, s)); }
NATIVE(t_std) { return fsE_tensor_value(low_stat(TENSOR(self), std_of, s)); }
NATIVE(t_norm) { return fsE_tensor_value(low_stat(TENSOR(self), norm_of, s)); }

NATIVE(t_logsumexp) {
  int d;
  if (fsE_dim_arg(s[0], &d) < 0) return NULL;
  return fsE_tensor_value(fsG_logsumexp(TENSOR(self), d, fsV_truthy(s[1])));
}

NATIVE(t_cumsum) {
  int d;
  if (fsE_dim_arg(s[0], &d) < 0) return NULL;
  return fsE_tensor_value(fsG_cumsum(TENSOR(self), d));
}

static fs_value *softmax_of(fs_value *x, fs_value *dim, bool log, const char *fn) {
  fs_tensor *t = fsE_need_tensor(x, fn, "input");
  int d;
  if (!t || fsE_dim_arg(dim, &d) < 0) return NULL;
  return fsE_tensor_value(fsG_softmax(t, d, log));
}

NATIVE(t_softmax) { return softmax_of(self ? self : s[0], self ? s[0] : s[1], false, "softmax"); }
NATIVE(t_log_softmax) { return softmax_of(self ? self : s[0], self ? s[0] : s[1], true, "log_softmax"); }

/* ---- matmul ---- */

NATIVE(t_matmul) { 
  fs_value *a_ = self ? self : s[0], *b = self ? s[0] : s[1];
  fs_tensor *x = fsE_need_tensor(a_, "matmul", "input"), *y = x ? fsE_need_tensor(b, "matmul", "other") : NULL;
  return y ? fsE_tensor_value(fsG_matmul(x, y)) : NULL;
}

NATIVE(t_bmm) {
  fs_value *a_ = self ? self : s[0], *b = self ? s[0] : s[1];
  fs_tensor *x = fsE_need_tensor(a_, "bmm", "input"), *y = x ? fsE_need_tensor(b, "bmm", "mat2") : NULL;
  return y ? fsE_tensor_value(fsG_bmm(x, y)) : NULL;
}

static const fsE_reg arith_funcs[] = {
  {"exp", t_exp}, {"log", t_log}, {"sqrt", t_sqrt}, {"tanh", t_tanh}, {"sigmoid", t_sigmoid},
  {"Tensor.exp", t_exp}, {"Tensor.log", t_log}, {"Tensor.sqrt", t_sqrt}, {"Tensor.rsqrt", t_rsqrt},
  {"Tensor.abs", t_abs}, {"Tensor.sin", t_sin}, {"Tensor.cos", t_cos}, {"Tensor.tanh", t_tanh},
  {"Tensor.sigmoid", t_sigmoid}, {"Tensor.relu", t_relu},
  {"where", b_where}, {"maximum", t_maximum}, {"minimum", t_minimum}, {"clamp", t_clamp},
  {"softmax", t_softmax}, {"log_softmax", t_log_softmax}, {"matmul", t_matmul}, {"bmm", t_bmm},
  {"Tensor.pow", t_pow}, {"Tensor.clamp", t_clamp}, {"Tensor.maximum", t_maximum},
  {"Tensor.minimum", t_minimum}, {"Tensor.masked_fill", t_masked_fill}, {"Tensor.tril", t_tril},
  {"Tensor.triu", t_triu}, {"Tensor.max", t_max}, {"Tensor.min", t_min}, {"Tensor.argmin", t_argmin},
  {"Tensor.var", t_var}, {"Tensor.std", t_std}, {"Tensor.norm", t_norm}, {"Tensor.logsumexp", t_logsumexp},
  {"Tensor.cumsum", t_cumsum}, {"Tensor.softmax", t_softmax}, {"Tensor.log_softmax", t_log_softmax},
  {"Tensor.matmul", t_matmul}, {"Tensor.bmm", t_bmm},
  {"sin", t_sin}, {"cos", t_cos}, {"tril", t_tril}, {"triu", t_triu},
  {NULL, NULL},
};
const fsE_lib fsE_lib_arith = {"arith", arith_funcs};
