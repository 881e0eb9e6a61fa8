/* layers.c -- the module builders, static shapes and forwards of the layers
 * of issue 14 (convolutions, pooling, normalization, upsampling, multi-head
 * attention, activations with a parameter): module.h declares them and the
 * module tree's own code (module.c) names, initializes and dispatches them,
 * through model_int.h's shared helpers.  Kernels: runtime/tensor (cnn.h,
 * norm.h, compose.c); builtins: interp/eval/lib_nn.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd.h"
#include "model_int.h"
#include "rng.h"

/* ---- builders ---- */

fs_module *fsM_conv(int nd, int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                    const int64_t *pad, const int64_t *dil, int64_t groups, bool bias) {
  const char *name = nd == 1 ? "Conv1d" : "Conv2d";
  if (!fsM_positive(name, in, "in_channels") || !fsM_positive(name, out, "out_channels") ||
      !fsM_positive(name, groups, "groups"))
    return NULL;
  if (in % groups || out % groups) {
    fsT_seterr(in % groups ? "in_channels must be divisible by groups" : "out_channels must be divisible by groups");
    return NULL;
  }
  for (int i = 0; i < nd; i++)
    if (!fsM_positive(name, kernel[i], "kernel_size") || !fsM_positive(name, stride[i], "stride") ||
        !fsM_positive(name, dil[i], "dilation") || (pad[i] < 0 && !fsM_positive(name, pad[i], "padding")))
      return NULL;
  fs_module *m = fsM_new_module(nd == 1 ? FSM_CONV1D : FSM_CONV2D);
  if (!m) return NULL;
  m->in = in;
  m->out = out;
  m->bias = bias;
  m->groups = groups;
  for (int i = 0; i < 2; i++) { /* 1-d: height 1 (index 0), the one dim at index 1 */
    int j = nd == 1 ? 0 : i;
    bool used = nd == 2 || i == 1;
    m->kernel[i] = used ? kernel[j] : 1;
    m->stride[i] = used ? stride[j] : 1;
    m->pad[i] = used ? pad[j] : 0;
    m->dil[i] = used ? dil[j] : 1;
  }
  int64_t shape[4] = {out, in / groups, m->kernel[2 - nd], m->kernel[1]};
  if (fsM_add_param_shape(m, nd + 2, shape) || (bias && fsM_add_param(m, 1, out, 0))) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

fs_module *fsM_conv_transpose2d(int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                                const int64_t *pad, const int64_t *output_pad, const int64_t *dil,
                                int64_t groups, bool bias) {
  fs_module *m = fsM_conv(2, in, out, kernel, stride, pad, dil, groups, bias);
  if (!m) return NULL;
  for (int i = 0; i < 2; i++)
    if (output_pad[i] < 0 || output_pad[i] >= stride[i]) {
      fsT_seterr("ConvTranspose2d: output padding must be smaller than the stride");
      fsM_release(m);
      return NULL;
    }
  m->kind = FSM_CONVTRANSPOSE2D;
  memcpy(m->output_pad, output_pad, sizeof m->output_pad);
  m->params[0]->shape[0] = in; /* torch's transposed weight [in, out/groups, kH, kW] */
  m->params[0]->shape[1] = out / groups;
  return m;
}

fs_module *fsM_mha(int64_t embed, int64_t heads, double dropout, bool bias, bool batch_first) {
  if (!fsM_positive("MultiheadAttention", embed, "embed_dim") || !fsM_positive("MultiheadAttention", heads, "num_heads"))
    return NULL;
  if (embed % heads) {
    fsT_seterr("embed_dim must be divisible by num_heads");
    return NULL;
  }
  if (!(dropout >= 0 && dropout <= 1)) {
    fsT_seterr("dropout probability has to be between 0 and 1, but got %g", dropout);
    return NULL;
  }
  fs_module *m = fsM_new_module(FSM_MHA);
  if (!m) return NULL;
  m->in = embed;
  m->out = heads;
  m->p = dropout;
  m->bias = bias;
  m->batch_first = batch_first;
  fs_module *proj = fsM_linear(embed, embed, bias);
  if (proj) proj->zero_bias_init = true;
  if (fsM_add_param(m, 2, 3 * embed, embed) || (bias && fsM_add_param(m, 1, 3 * embed, 0)) ||
      fsM_append(m, "out_proj", proj)) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

fs_tensor *fsM_mha_forward(fs_module *m, fs_tensor *q, fs_tensor *k, fs_tensor *v, fs_tensor *key_padding_mask,
                           fs_tensor *attn_mask, bool average, fs_tensor **weights) {
  fs_tensor *in[3] = {q, k, v}, *bf[3] = {NULL, NULL, NULL}, *out = NULL;
  bool ok = true;
  for (int i = 0; i < 3; i++) /* batch_first=False: [T, B, E] seen as [B, T, E] */
    ok = ok && (bf[i] = m->batch_first || in[i]->rank != 3 ? fsT_retain(in[i]) : fsG_transpose(in[i], 0, 1));
  const fs_module *proj = m->kids[0];
  bool drop = m->training && m->p > 0;
  if (ok)
    out = fsG_multihead_attention(bf[0], bf[1], bf[2], m->params[0], m->bias ? m->params[1] : NULL,
                                  proj->params[0], proj->bias ? proj->params[1] : NULL, m->out, attn_mask,
                                  key_padding_mask, drop ? m->p : 0, drop ? fsR_subkey(m->seed, m->calls++) : 0,
                                  average, weights);
  if (out && !m->batch_first) {
    fs_tensor *t = fsG_transpose(out, 0, 1);
    fsT_release(out);
    out = t;
  }
  for (int i = 0; i < 3; i++) fsT_release(bf[i]);
  return out;
}

fs_module *fsM_batchnorm(int nd, int64_t features, double eps, double momentum, bool affine,
                         bool track_running_stats) {
  const char *name = nd == 1 ? "BatchNorm1d" : "BatchNorm2d";
  if (!fsM_positive(name, features, "num_features")) return NULL;
  if (!(eps > 0)) {
    fsT_seterr("%s: eps must be positive, got %g", name, eps);
    return NULL;
  }
  fs_module *m = fsM_new_module(nd == 1 ? FSM_BATCHNORM1D : FSM_BATCHNORM2D);
  if (!m) return NULL;
  m->in = m->out = features;
  m->p = eps;
  m->momentum = momentum;
  if ((affine && (fsM_add_param(m, 1, features, 0) || fsM_add_param(m, 1, features, 0))) ||
      (track_running_stats && (fsM_add_buffer(m, FS_F32, 1, features) || fsM_add_buffer(m, FS_F32, 1, features) ||
                               fsM_add_buffer(m, FS_I64, 0, 0)))) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

fs_module *fsM_pool2d(fsM_kind kind, const int64_t *kernel, const int64_t *stride, const int64_t *pad,
                      const int64_t *dil, bool ceil_mode, bool count_include_pad) {
  const char *name = fsM_kind_name(kind);
  for (int i = 0; i < 2; i++) {
    if (!fsM_positive(name, kernel[i], "kernel_size") || !fsM_positive(name, stride[i], "stride") ||
        !fsM_positive(name, dil[i], "dilation"))
      return NULL;
    if (pad[i] < 0 || pad[i] > kernel[i] / 2) {
      fsT_seterr("pad should be at most half of effective kernel size, but got pad=%lld, kernel_size=%lld and dilation=%lld",
                 (long long)pad[i], (long long)kernel[i], (long long)dil[i]);
      return NULL;
    }
  }
  fs_module *m = fsM_new_module(kind);
  if (!m) return NULL;
  memcpy(m->kernel, kernel, sizeof m->kernel);
  memcpy(m->stride, stride, sizeof m->stride);
  memcpy(m->pad, pad, sizeof m->pad);
  memcpy(m->dil, dil, sizeof m->dil);
  m->ceil_mode = ceil_mode;
  m->count_include_pad = count_include_pad;
  return m;
}

fs_module *fsM_adaptive_avg_pool2d(const int64_t *size) {
  for (int i = 0; i < 2; i++)
    if (size[i] == 0) {
      fsT_seterr("AdaptiveAvgPool2d: output_size must be positive or None, got 0");
      return NULL;
    }
  fs_module *m = fsM_new_module(FSM_ADAPTIVEAVGPOOL2D);
  if (m) memcpy(m->kernel, size, sizeof m->kernel); /* the output size */
  return m;
}

fs_module *fsM_leaky_relu(double negative_slope) {
  fs_module *m = fsM_new_module(FSM_LEAKYRELU);
  if (m) m->p = negative_slope;
  return m;
}

fs_module *fsM_softmax(int64_t dim, bool dim_none) {
  fs_module *m = fsM_new_module(FSM_SOFTMAX);
  if (m) {
    m->in = dim;
    m->bias = dim_none; /* the flag: no dim given */
  }
  return m;
}

fs_module *fsM_mish(void) { return fsM_new_module(FSM_MISH); }

fs_module *fsM_upsample(int nsize, const int64_t *size, int nscale, const double *scale) {
  if ((nsize > 0) == (nscale > 0) || nsize > 2 || nscale > 2) {
    fsT_seterr("Upsample: give either size or scale_factor (one value or one per spatial dim)");
    return NULL;
  }
  fs_module *m = fsM_new_module(FSM_UPSAMPLE);
  if (!m) return NULL;
  m->up_n = nsize;
  m->up_nscale = nscale;
  for (int i = 0; i < nsize; i++) m->up_size[i] = size[i];
  for (int i = 0; i < nscale; i++) m->up_scale[i] = scale[i];
  return m;
}

/* Upsample's output sizes size[0..nd) (scale: the factors, NaN when sizes
 * were given) for an input of `rank` dims in (torch: floor(size *
 * scale_factor); an unknown dim, -1, stays unknown); nd, or -1 when the rank
 * does not fit the module's sizes. */
static int upsample_dims(const fs_module *m, int rank, const int64_t *in, int64_t *size, double *scale) {
  int nd = rank - 2, n = m->up_n ? m->up_n : m->up_nscale;
  if (nd < 1 || nd > 2 || (n == 2 && nd != 2)) return -1;
  for (int i = 0; i < nd; i++) {
    int j = n == 1 ? 0 : i;
    scale[i] = m->up_n ? NAN : m->up_scale[j];
    size[i] = m->up_n ? m->up_size[j] : in[2 + i] < 0 ? -1 : (int64_t)floor((double)in[2 + i] * scale[i]);
  }
  return nd;
}

#define UPSAMPLE_RANK_MSG "Upsample: expected a 3D or 4D input matching its %d size(s), got %s"

fs_tensor *fsM_upsample_forward(const fs_module *m, fs_tensor *x) {
  int64_t size[2];
  double scale[2];
  int nd = upsample_dims(m, x->rank, x->shape, size, scale);
  if (nd < 0) {
    char s[96];
    fsT_seterr(UPSAMPLE_RANK_MSG, m->up_n ? m->up_n : m->up_nscale, fsT_shape_str(x, s, sizeof s));
    return NULL;
  }
  return fsG_interpolate_nearest(x, nd, size, scale);
}

fs_module *fsM_groupnorm(int64_t groups, int64_t channels, double eps, bool affine) {
  if (!fsM_positive("GroupNorm", groups, "num_groups") || !fsM_positive("GroupNorm", channels, "num_channels")) return NULL;
  if (channels % groups) {
    fsT_seterr("num_channels must be divisible by num_groups");
    return NULL;
  }
  fs_module *m = fsM_new_module(FSM_GROUPNORM);
  if (!m) return NULL;
  m->in = m->out = channels;
  m->groups = groups;
  m->p = eps;
  if (affine && (fsM_add_param(m, 1, channels, 0) || fsM_add_param(m, 1, channels, 0))) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

fs_module *fsM_rmsnorm(int nd, const int64_t *shape, double eps, bool affine) {
  for (int i = 0; i < nd; i++)
    if (!fsM_positive("RMSNorm", shape[i], "normalized_shape")) return NULL;
  fs_module *m = fsM_new_module(FSM_RMSNORM);
  if (!m) return NULL;
  memcpy(m->normalized, shape, (size_t)nd * sizeof *shape);
  m->nnormalized = nd;
  m->in = m->out = shape[nd - 1];
  m->p = eps;
  if (affine && fsM_add_param_shape(m, nd, shape)) {
    fsM_release(m);
    return NULL;
  }
  return m;
}

/* ---- static shapes ---- */

/* One spatial output size of a window (torch's pooling_output_shape); -1
 * stays unknown */
static int64_t window_len(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  if (in < 0) return -1;
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--;
  return o;
}

/* Conv, BatchNorm and pooling: the input's rank, channels and spatial sizes. */
int fsM_spatial_shape(const fs_module *m, int *rank, int64_t *cur, const fs_module **bad,
                         char *err, size_t errlen) {
  char s[160];
  fsT_dims_str(*rank, cur, s, sizeof s);
  int nd = m->kind == FSM_CONV1D ? 1 : 2;
  switch (m->kind) {
  case FSM_CONV1D:
  case FSM_CONV2D:
    if (*rank != nd + 2)
      return fsM_shape_err(m, bad, err, errlen, "Expected %dD (unbatched) or %dD (batched) input to conv%dd, but got input of size: %s",
                       nd + 1, nd + 2, nd, s);
    if (cur[1] >= 0 && cur[1] != m->in)
      return fsM_shape_err(m, bad, err, errlen, "Given groups=%lld, expected input%s to have %lld channels, but got %lld channels instead",
                       (long long)m->groups, s, (long long)m->in, (long long)cur[1]);
    cur[1] = m->out;
    for (int i = 2 - nd; i < 2; i++) {
      int64_t *d = &cur[*rank - 2 + i];
      *d = window_len(*d, m->kernel[i], m->stride[i], m->pad[i], m->dil[i], false);
      if (*d == 0 || *d < -1)
        return fsM_shape_err(m, bad, err, errlen, "%s: input %s gives an output size that is too small",
                         fsM_kind_name(m->kind), s);
    }
    return 0;
  case FSM_BATCHNORM1D:
  case FSM_BATCHNORM2D:
    if (m->kind == FSM_BATCHNORM1D ? *rank != 2 && *rank != 3 : *rank != 4)
      return fsM_shape_err(m, bad, err, errlen, m->kind == FSM_BATCHNORM1D ? "expected 2D or 3D input (got %dD input)"
                                                                          : "expected 4D input (got %dD input)", *rank);
    if (cur[1] >= 0 && cur[1] != m->in)
      return fsM_shape_err(m, bad, err, errlen, "running_mean should contain %lld elements not %lld",
                       (long long)cur[1], (long long)m->in);
    return 0;
  case FSM_UPSAMPLE: {
    int64_t size[2];
    double scale[2];
    int spatial = upsample_dims(m, *rank, cur, size, scale);
    if (spatial < 0) return fsM_shape_err(m, bad, err, errlen, UPSAMPLE_RANK_MSG, m->up_n ? m->up_n : m->up_nscale, s);
    memcpy(cur + 2, size, (size_t)spatial * sizeof *size);
    return 0;
  }
  default: /* pooling */
    if (*rank != 3 && *rank != 4)
      return fsM_shape_err(m, bad, err, errlen, "%s: Expected 3D or 4D (batch mode) tensor for input, but got: %s",
                       fsM_kind_name(m->kind), s);
    for (int i = 0; i < 2; i++) {
      int64_t *d = &cur[*rank - 2 + i];
      if (m->kind == FSM_ADAPTIVEAVGPOOL2D) *d = m->kernel[i] < 0 ? *d : m->kernel[i];
      else *d = window_len(*d, m->kernel[i], m->stride[i], m->pad[i], m->kind == FSM_MAXPOOL2D ? m->dil[i] : 1,
                           m->ceil_mode);
      if (*d == 0 || *d < -1)
        return fsM_shape_err(m, bad, err, errlen, "%s: input %s gives an output size that is too small",
                         fsM_kind_name(m->kind), s);
    }
    return 0;
  }
}

/* ---- forwards ---- */

/* BatchNorm's forward: batch statistics when training (updating the
 * running ones) or when it keeps none; the running ones otherwise. */
fs_tensor *fsM_batchnorm_forward(fs_module *m, fs_tensor *x) {
  int nd = m->kind == FSM_BATCHNORM1D ? 1 : 2;
  if (nd == 1 ? x->rank != 2 && x->rank != 3 : x->rank != 4) {
    fsT_seterr(nd == 1 ? "expected 2D or 3D input (got %dD input)" : "expected 4D input (got %dD input)", x->rank);
    return NULL;
  }
  bool track = m->nbuffers > 0, affine = m->nparams > 0;
  double factor = m->momentum;
  if (m->training && track) {
    fs_tensor *nbt = m->buffers[2];
    int64_t count;
    if (!nbt->data) {
      fsT_seterr("BatchNorm: buffer num_batches_tracked is on the meta device; materialize it first");
      return NULL;
    }
    const fsB_backend *be = fsB_of(nbt);
    if (be->to_host(&count, nbt->data, sizeof count) < 0) return NULL;
    count++;
    if (be->from_host(nbt->data, &count, sizeof count) < 0) return NULL;
    if (isnan(factor)) factor = 1.0 / (double)count; /* momentum=None: cumulative average */
  }
  return fsG_batch_norm(x, track ? m->buffers[0] : NULL, track ? m->buffers[1] : NULL,
                        affine ? m->params[0] : NULL, affine ? m->params[1] : NULL,
                        m->training || !track, factor, m->p);
}
