/* cnn_grad.c -- autograd entry points of the convolutional layers
 * (autograd.h "cnn"): each checks its inputs with torch's messages, runs a
 * cnn.h forward on host tensors and records the matching backward.
 *
 * Devices: the kernels are the cpu's; tensors of another device are staged
 * through host memory (fsG_stage, as ops_grad.c stages the tensor API), so
 * on the cpu nothing is copied.  A node keeps its geometry (fsN_conv) in its
 * integer slots, so backward recomputes windows instead of storing them.
 * Float64 inputs pass the same checks and geometry, then go to f64_cnn.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_int.h"
#include "cnn.h"
#include "f64_cnn.h"

/* The float operands present are all float32, or (f64) all float64 */
static bool float_inputs(const char *op, int n, fs_tensor *const *ins, bool f64) {
  if (f64) return fsG_one_dtype(n, ins);
  for (int i = 0; i < n; i++)
    if (ins[i] && ins[i]->dtype != FS_F32) {
      fsT_seterr("%s: expected a float32 tensor, got %s", op, fsT_dtype_name(ins[i]->dtype));
      return false;
    }
  return true;
}

/* torch's pooling_output_shape (also a convolution's, with ceil false) */
static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--;
  return o;
}

/* ---- convolution ---- */

static int conv_bw(fsG_node *n, fs_tensor *out) {
  fsN_conv g;
  fsG_bwstage c;
  fsG_geom_load(n, &g);
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  int rc = fsN_conv2d_backward(c.d[0], c.d[1], c.d[2], fsT_f32(c.gout), fsT_f32(c.in[0]),
                               fsT_f32(c.in[1]), &g);
  int end = fsG_bw_end(&c, n);
  return rc ? -1 : end;
}

fs_tensor *fsG_conv(int nd, fs_tensor *x, fs_tensor *W, fs_tensor *b, const int64_t *stride,
                    const int64_t *pad, const int64_t *dil, int64_t groups) {
  fs_tensor *ins[3] = {x, W, b};
  bool f64 = fsG_any_f64(3, ins);
  fsG_low lp;
  if (!f64 && fsG_low_begin(&lp, FSG_AC_LOW, 3, ins))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_conv(nd, lp.w[0], lp.w[1], lp.w[2], stride, pad, dil, groups));
  const char *op = nd == 1 ? "conv1d" : "conv2d";
  if (!fsG_check_inputs(op, 3, ins) || !float_inputs(op, 3, ins, f64)) return NULL;
  char a[96], s[96];
  if (W->rank != nd + 2) {
    fsT_seterr("%s: expected a weight of %d dimensions [out_channels, in_channels/groups, kernel...], got %s",
               op, nd + 2, fsT_shape_str(W, a, sizeof a));
    return NULL;
  }
  if (x->rank != nd + 2) {
    fsT_seterr("Expected %dD (unbatched) or %dD (batched) input to %s, but got input of size: %s",
               nd + 1, nd + 2, op, fsT_shape_str(x, a, sizeof a));
    return NULL;
  }
  for (int i = 0; i < nd; i++)
    if (stride[i] <= 0 || pad[i] < 0 || dil[i] <= 0) {
      fsT_seterr("%s: %s", op, stride[i] <= 0 ? "non-positive stride is not supported"
                               : pad[i] < 0 ? "negative padding is not supported"
                               : "dilation should be greater than zero");
      return NULL;
    }
  if (groups <= 0 || W->shape[0] % groups) {
    fsT_seterr(groups <= 0 ? "non-positive groups is not supported"
                           : "Given groups=%lld, expected weight to be divisible by %lld at dimension 0, but got weight of size %s instead",
               (long long)groups, (long long)groups, fsT_shape_str(W, a, sizeof a));
    return NULL;
  }
  if (x->shape[1] != W->shape[1] * groups) {
    fsT_seterr("Given groups=%lld, weight of size %s, expected input%s to have %lld channels, but got %lld channels instead",
               (long long)groups, fsT_shape_str(W, a, sizeof a), fsT_shape_str(x, s, sizeof s),
               (long long)(W->shape[1] * groups), (long long)x->shape[1]);
    return NULL;
  }
  if (b && (b->rank != 1 || b->shape[0] != W->shape[0])) {
    fsT_seterr("%s: expected a bias of shape [%lld], got %s", op, (long long)W->shape[0],
               fsT_shape_str(b, a, sizeof a));
    return NULL;
  }
  int q = nd == 1; /* 1-d: height 1, the one spatial dim is the width */
  fsN_conv g = {.N = x->shape[0], .C = x->shape[1], .H = q ? 1 : x->shape[2], .W = x->shape[3 - q],
                .OC = W->shape[0], .KH = q ? 1 : W->shape[2], .KW = W->shape[3 - q],
                .sh = q ? 1 : stride[0], .sw = stride[1 - q], .ph = q ? 0 : pad[0], .pw = pad[1 - q],
                .dh = q ? 1 : dil[0], .dw = dil[1 - q], .G = groups};
  g.OH = out_size(g.H, g.KH, g.sh, g.ph, g.dh, false);
  g.OW = out_size(g.W, g.KW, g.sw, g.pw, g.dw, false);
  if (g.OH <= 0 || g.OW <= 0) {
    fsT_seterr("Given input size per channel: (%lldx%lld). Calculated output size per channel: (%lldx%lld). Output size is too small",
               (long long)g.H, (long long)g.W, (long long)g.OH, (long long)g.OW);
    return NULL;
  }
  if (f64) return fsG_conv_f64(op, ins, &g);
  fsG_stage st;
  if (fsG_stage_begin(&st, op, 3, ins) < 0) return NULL;
  int64_t shape[4] = {g.N, g.OC, g.OH, g.OW};
  if (q) shape[2] = g.OW;
  fs_tensor *out = fsG_host_new(FS_F32, nd + 2, shape);
  if (out && fsN_conv2d_forward(fsT_f32(out), fsT_f32(st.h[0]), fsT_f32(st.h[1]),
                                st.h[2] ? fsT_f32(st.h[2]) : NULL, &g) < 0) {
    fsT_release(out);
    out = NULL;
  }
  fsG_stage_end(&st);
  out = fsG_to_dev(out, st.dev);
  if (out) out = fsG_record(out, conv_bw, 3, ins, NULL, NULL, 0, 0);
  if (out && out->node) fsG_geom_save(out->node, &g);
  return out;
}

/* ---- transposed convolution ----
 * ConvTranspose2d of x[N,Cin,H,W] by W[Cin,Cout/G,KH,KW] is the gradient
 * of a convolution of its output [N,Cout,OH,OW] by W: the geometry g below
 * is that convolution's (C = Cout, OC = Cin, its output = this input), so
 * the forward is conv2d's backward-data, and the backward is conv2d's
 * forward (for dx) and weight gradient (for dW) with the roles swapped. */

static int conv_transpose_bw(fsG_node *n, fs_tensor *out) {
  fsN_conv g;
  fsG_bwstage c;
  fsG_geom_load(n, &g);
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  int rc = 0;
  if (c.d[0]) { /* dx += conv2d(dy, W): computed aside, then added */
    fs_tensor *tmp = fsG_host_new(FS_F32, 4, c.in[0]->shape);
    rc = tmp ? fsN_conv2d_forward(fsT_f32(tmp), fsT_f32(c.gout), fsT_f32(c.in[1]), NULL, &g) : -1;
    for (int64_t i = 0; !rc && i < tmp->numel; i++) c.d[0][i] += fsT_f32(tmp)[i];
    fsT_release(tmp);
  }
  if (!rc && c.d[1])
    rc = fsN_conv2d_backward(NULL, c.d[1], NULL, fsT_f32(c.in[0]), fsT_f32(c.gout), fsT_f32(c.in[1]), &g);
  if (!rc && c.d[2]) fsN_chanbias_backward(c.d[2], fsT_f32(c.gout), g.N, g.C, g.H * g.W);
  int end = fsG_bw_end(&c, n);
  return rc ? -1 : end;
}

fs_tensor *fsG_conv_transpose2d(fs_tensor *x, fs_tensor *W, fs_tensor *b, const int64_t *stride,
                                const int64_t *pad, const int64_t *output_pad, const int64_t *dil,
                                int64_t groups) {
  fs_tensor *ins[3] = {x, W, b};
  bool f64 = fsG_any_f64(3, ins);
  fsG_low lp;
  if (!f64 && fsG_low_begin(&lp, FSG_AC_LOW, 3, ins))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_conv_transpose2d(lp.w[0], lp.w[1], lp.w[2], stride, pad, output_pad, dil, groups));
  const char *op = "conv_transpose2d";
  char a[96], s[96];
  if (!fsG_check_inputs(op, 3, ins) || !float_inputs(op, 3, ins, f64)) return NULL;
  if (x->rank != 4 || W->rank != 4) {
    fsT_seterr("conv_transpose2d: expected a 4D input [N, C, H, W] and a 4D weight [in, out/groups, kH, kW], got %s and %s",
               fsT_shape_str(x, a, sizeof a), fsT_shape_str(W, s, sizeof s));
    return NULL;
  }
  if (groups <= 0 || x->shape[1] != W->shape[0] || W->shape[0] % groups) {
    fsT_seterr("Given transposed=1, weight of size %s, expected input%s to have %lld channels, but got %lld channels instead",
               fsT_shape_str(W, a, sizeof a), fsT_shape_str(x, s, sizeof s), (long long)W->shape[0],
               (long long)x->shape[1]);
    return NULL;
  }
  for (int i = 0; i < 2; i++)
    if (stride[i] <= 0 || pad[i] < 0 || dil[i] <= 0 || output_pad[i] < 0 || output_pad[i] >= stride[i]) {
      fsT_seterr(output_pad[i] >= stride[i] ? "conv_transpose2d: output padding must be smaller than the stride (torch also allows it below the dilation; not supported)"
                                            : "conv_transpose2d: stride and dilation must be positive, padding non-negative");
      return NULL;
    }
  int64_t Cout = W->shape[1] * groups;
  if (b && (b->rank != 1 || b->shape[0] != Cout)) {
    fsT_seterr("conv_transpose2d: expected a bias of shape [%lld], got %s", (long long)Cout, fsT_shape_str(b, a, sizeof a));
    return NULL;
  }
  int64_t OH = (x->shape[2] - 1) * stride[0] - 2 * pad[0] + dil[0] * (W->shape[2] - 1) + output_pad[0] + 1;
  int64_t OW = (x->shape[3] - 1) * stride[1] - 2 * pad[1] + dil[1] * (W->shape[3] - 1) + output_pad[1] + 1;
  if (OH <= 0 || OW <= 0) {
    fsT_seterr("Given input size per channel: (%lldx%lld). Calculated output size per channel: (%lldx%lld). Output size is too small",
               (long long)x->shape[2], (long long)x->shape[3], (long long)OH, (long long)OW);
    return NULL;
  }
  fsN_conv g = {.N = x->shape[0], .C = Cout, .H = OH, .W = OW, .OC = W->shape[0], .KH = W->shape[2],
                .KW = W->shape[3], .sh = stride[0], .sw = stride[1], .ph = pad[0], .pw = pad[1],
                .dh = dil[0], .dw = dil[1], .G = groups, .OH = x->shape[2], .OW = x->shape[3]};
  if (f64) return fsG_conv_transpose2d_f64(ins, &g);
  fsG_stage st;
  if (fsG_stage_begin(&st, op, 3, ins) < 0) return NULL;
  int64_t shape[4] = {g.N, Cout, OH, OW};
  fs_tensor *out = fsG_host_new(FS_F32, 4, shape);
  int rc = out ? 0 : -1;
  if (!rc) {
    memset(out->data, 0, fsT_nbytes(out));
    rc = fsN_conv2d_backward(fsT_f32(out), NULL, NULL, fsT_f32(st.h[0]), NULL, fsT_f32(st.h[1]), &g);
  }
  if (!rc && b) fsN_chanbias_forward(fsT_f32(out), fsT_f32(st.h[2]), g.N, Cout, OH * OW);
  fsG_stage_end(&st);
  if (rc) {
    fsT_release(out);
    return NULL;
  }
  out = fsG_to_dev(out, st.dev);
  if (out) out = fsG_record(out, conv_transpose_bw, 3, ins, NULL, NULL, 0, 0);
  if (out && out->node) fsG_geom_save(out->node, &g);
  return out;
}

/* ---- pooling ---- */

/* The window of pooling x[N,C,H,W] (or [C,H,W]) as a conv geometry; -1 +
 * torch's message when the padding or output size is invalid. */
static int pool_geom(const char *op, const fs_tensor *x, const int64_t *k, const int64_t *s,
                     const int64_t *p, const int64_t *d, bool ceil_mode, fsN_conv *g) {
  char a[96];
  if (x->rank != 3 && x->rank != 4) {
    fsT_seterr("%s: Expected 3D or 4D (batch mode) tensor for input, but got: %s", op,
               fsT_shape_str(x, a, sizeof a));
    return -1;
  }
  for (int i = 0; i < 2; i++) {
    if (k[i] <= 0 || s[i] <= 0 || d[i] <= 0) {
      fsT_seterr("%s: kernel_size, stride and dilation must be greater than zero", op);
      return -1;
    }
    if (p[i] < 0 || p[i] > k[i] / 2) {
      fsT_seterr("pad should be at most half of effective kernel size, but got pad=%lld, kernel_size=%lld and dilation=%lld",
                 (long long)p[i], (long long)k[i], (long long)d[i]);
      return -1;
    }
  }
  int r = x->rank;
  *g = (fsN_conv){.N = r == 4 ? x->shape[0] : 1, .C = x->shape[r - 3], .H = x->shape[r - 2],
                  .W = x->shape[r - 1], .KH = k[0], .KW = k[1], .sh = s[0], .sw = s[1], .ph = p[0],
                  .pw = p[1], .dh = d[0], .dw = d[1]};
  g->OC = g->G = g->C;
  g->OH = out_size(g->H, g->KH, g->sh, g->ph, g->dh, ceil_mode);
  g->OW = out_size(g->W, g->KW, g->sw, g->pw, g->dw, ceil_mode);
  if (g->OH <= 0 || g->OW <= 0) {
    fsT_seterr("Given input size: (%lldx%lldx%lld). Calculated output size: (%lldx%lldx%lld). Output size is too small",
               (long long)g->C, (long long)g->H, (long long)g->W, (long long)g->C, (long long)g->OH,
               (long long)g->OW);
    return -1;
  }
  return 0;
}

/* x's shape with the last two dims replaced by OH, OW */
static void pooled_shape(const fs_tensor *x, const fsN_conv *g, int64_t *shape) {
  memcpy(shape, x->shape, (size_t)x->rank * sizeof *shape);
  shape[x->rank - 2] = g->OH;
  shape[x->rank - 1] = g->OW;
}

static int maxpool_bw(fsG_node *n, fs_tensor *out) {
  fsN_conv g;
  fsG_bwstage c;
  fsG_geom_load(n, &g);
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  if (c.d[0]) fsN_maxpool2d_backward(c.d[0], fsT_f32(c.gout), fsT_i64(c.saved[0]), &g);
  return fsG_bw_end(&c, n);
}

fs_tensor *fsG_max_pool2d(fs_tensor *x, const int64_t *k, const int64_t *s, const int64_t *p,
                          const int64_t *d, bool ceil_mode) {
  bool f64 = fsG_any_f64(1, &x);
  fsG_low lp;
  if (!f64 && fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_max_pool2d(lp.w[0], k, s, p, d, ceil_mode));
  fsN_conv g;
  if (!fsG_check_inputs("max_pool2d", 1, &x) || !float_inputs("max_pool2d", 1, &x, f64) ||
      pool_geom("max_pool2d", x, k, s, p, d, ceil_mode, &g) < 0)
    return NULL;
  if (f64) return fsG_max_pool2d_f64(x, &g);
  fsG_stage st;
  if (fsG_stage_begin(&st, "max_pool2d", 1, &x) < 0) return NULL;
  int64_t shape[4];
  pooled_shape(x, &g, shape);
  fs_tensor *out = fsG_host_new(FS_F32, x->rank, shape), *idx = fsG_host_new(FS_I64, x->rank, shape);
  if (out && idx) fsN_maxpool2d_forward(fsT_f32(out), fsT_i64(idx), fsT_f32(st.h[0]), &g);
  else {
    fsT_release(out);
    out = NULL;
  }
  fsG_stage_end(&st);
  out = fsG_to_dev(out, st.dev);
  idx = out ? fsG_to_dev(idx, st.dev) : (fsT_release(idx), NULL);
  if (out && !idx) {
    fsT_release(out);
    return NULL;
  }
  if (out) out = fsG_record(out, maxpool_bw, 1, &x, idx, NULL, 0, 0);
  if (out && out->node) fsG_geom_save(out->node, &g);
  return out;
}

/* Average pooling keeps its mode (cnn.h's FSN_POOL_*) in the node's
 * spare integer slot and remakes its windows from the geometry. */

static int avgpool_bw(fsG_node *n, fs_tensor *out) {
  fsN_conv g;
  fsG_bwstage c;
  fsN_avgwin w;
  int64_t *mem;
  fsG_geom_load(n, &g);
  if (fsN_avgwin_make(&w, &mem, &g, (int)n->iv[FSN_CONV_FIELDS]) < 0) return -1;
  if (fsG_bw_begin(&c, n, out) < 0) {
    free(mem);
    return -1;
  }
  if (c.d[0]) fsN_avgpool2d_backward(c.d[0], fsT_f32(c.gout), g.N * g.C, &w);
  free(mem);
  return fsG_bw_end(&c, n);
}

static fs_tensor *avg_pool(const char *op, fs_tensor *x, const fsN_conv *g, int mode) {
  if (x->dtype == FS_F64) return fsG_avg_pool_f64(op, x, g, mode);
  fsN_avgwin w;
  int64_t *mem;
  fsG_stage st;
  if (fsN_avgwin_make(&w, &mem, g, mode) < 0) return NULL;
  if (fsG_stage_begin(&st, op, 1, &x) < 0) {
    free(mem);
    return NULL;
  }
  int64_t shape[4];
  pooled_shape(x, g, shape);
  fs_tensor *out = fsG_host_new(FS_F32, x->rank, shape);
  if (out) fsN_avgpool2d_forward(fsT_f32(out), fsT_f32(st.h[0]), g->N * g->C, &w);
  free(mem);
  fsG_stage_end(&st);
  out = fsG_to_dev(out, st.dev);
  if (out) out = fsG_record(out, avgpool_bw, 1, &x, NULL, NULL, 0, 0);
  if (out && out->node) {
    fsG_geom_save(out->node, g);
    out->node->iv[FSN_CONV_FIELDS] = mode;
  }
  return out;
}

fs_tensor *fsG_avg_pool2d(fs_tensor *x, const int64_t *k, const int64_t *s, const int64_t *p,
                          bool ceil_mode, bool count_include_pad) {
  bool f64 = fsG_any_f64(1, &x);
  fsG_low lp;
  if (!f64 && fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_avg_pool2d(lp.w[0], k, s, p, ceil_mode, count_include_pad));
  static const int64_t one[2] = {1, 1};
  fsN_conv g;
  if (!fsG_check_inputs("avg_pool2d", 1, &x) || !float_inputs("avg_pool2d", 1, &x, f64) ||
      pool_geom("avg_pool2d", x, k, s, p, one, ceil_mode, &g) < 0)
    return NULL;
  return avg_pool("avg_pool2d", x, &g, count_include_pad ? FSN_POOL_INCL : FSN_POOL_EXCL);
}

fs_tensor *fsG_adaptive_avg_pool2d(fs_tensor *x, const int64_t *size) {
  bool f64 = fsG_any_f64(1, &x);
  fsG_low lp;
  if (!f64 && fsG_low_begin(&lp, FSG_AC_KEEP, 1, &x))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_adaptive_avg_pool2d(lp.w[0], size));
  char a[96];
  if (!fsG_check_inputs("adaptive_avg_pool2d", 1, &x) || !float_inputs("adaptive_avg_pool2d", 1, &x, f64))
    return NULL;
  if (x->rank != 3 && x->rank != 4) {
    fsT_seterr("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got %s", fsT_shape_str(x, a, sizeof a));
    return NULL;
  }
  int r = x->rank;
  fsN_conv g = {.N = r == 4 ? x->shape[0] : 1, .C = x->shape[r - 3], .H = x->shape[r - 2],
                .W = x->shape[r - 1], .OH = size[0] < 0 ? x->shape[r - 2] : size[0],
                .OW = size[1] < 0 ? x->shape[r - 1] : size[1]};
  g.OC = g.G = g.C;
  if (g.OH <= 0 || g.OW <= 0 || g.H <= 0 || g.W <= 0) {
    fsT_seterr("adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch dimensions, and an output size greater than zero, but got input %s and output size (%lld, %lld)",
               fsT_shape_str(x, a, sizeof a), (long long)g.OH, (long long)g.OW);
    return NULL;
  }
  return avg_pool("adaptive_avg_pool2d", x, &g, FSN_POOL_ADAPTIVE);
}

/* ---- batch normalization ---- */

static int batchnorm_bw(fsG_node *n, fs_tensor *out) {
  fsG_bwstage c;
  fs_tensor *x = n->in[0];
  if (fsG_bw_begin(&c, n, out) < 0) return -1;
  int64_t C = x->shape[1], S = x->numel / (x->shape[0] * C);
  fsN_batchnorm_backward(c.d[0], c.d[1], c.d[2], fsT_f32(c.gout), fsT_f32(c.in[0]),
                         c.in[1] ? fsT_f32(c.in[1]) : NULL, fsT_f32(c.saved[0]), fsT_f32(c.saved[1]),
                         x->shape[0], C, S, n->k != 0);
  return fsG_bw_end(&c, n);
}

/* Low-precision running statistics (a *-true BatchNorm) are updated in
 * float32 copies and stored back rounded, as torch's in-place update of a
 * bfloat16 buffer computes in float. */
static fs_tensor *batch_norm_low_stats(fs_tensor *x, fs_tensor *rm, fs_tensor *rv, fs_tensor *w, fs_tensor *b,
                                       bool training, double momentum, double eps) {
  fs_tensor *rm32 = fsT_to_dtype(rm, FS_F32), *rv32 = rm32 ? fsT_to_dtype(rv, FS_F32) : NULL;
  fs_tensor *out = rv32 ? fsG_batch_norm(x, rm32, rv32, w, b, training, momentum, eps) : NULL;
  if (out && training && (fsT_set_dtype(rm32, rm->dtype) < 0 || fsT_set_dtype(rv32, rv->dtype) < 0 ||
                          fsB_transfer(rm->device, rm->data, rm32->device, rm32->data, fsT_nbytes(rm)) < 0 ||
                          fsB_transfer(rv->device, rv->data, rv32->device, rv32->data, fsT_nbytes(rv)) < 0)) {
    fsT_release(out);
    out = NULL;
  }
  fsT_release(rm32);
  fsT_release(rv32);
  return out;
}

/* x's shape against w, b and the running statistics; false + error */
static bool batch_norm_shapes(const fs_tensor *x, const fs_tensor *rm, const fs_tensor *rv, const fs_tensor *w,
                              const fs_tensor *b, bool training) {
  char a[96];
  if (x->rank < 2) {
    fsT_seterr("batch_norm: expected an input of at least 2 dimensions [N, C, ...], got %s",
               fsT_shape_str(x, a, sizeof a));
    return false;
  }
  int64_t N = x->shape[0], C = x->shape[1], S = N * C != 0 ? x->numel / (N * C) : 0;
  const fs_tensor *per_channel[4] = {w, b, rm, rv};
  for (int i = 0; i < 4; i++)
    if (per_channel[i] && per_channel[i]->numel != C) {
      fsT_seterr("running_mean should contain %lld elements not %lld", (long long)C,
                 (long long)per_channel[i]->numel);
      return false;
    }
  if (!rm != !rv || (!training && !rm)) {
    fsT_seterr("batch_norm: running_mean and running_var must both be given when not training");
    return false;
  }
  if (training && N * S <= 1) {
    fsT_seterr("Expected more than 1 value per channel when training, got input size %s",
               fsT_shape_str(x, a, sizeof a));
    return false;
  }
  return true;
}

fs_tensor *fsG_batch_norm(fs_tensor *x, fs_tensor *rm, fs_tensor *rv, fs_tensor *w, fs_tensor *b,
                          bool training, double momentum, double eps) {
  if (fsG_batch_norm_low_ok(x, w, b, rm, rv))
    return batch_norm_shapes(x, rm, rv, w, b, training) ? fsG_batch_norm_low(x, rm, rv, w, b, training, momentum, eps)
                                                        : NULL;
  if (rm && rv && rm->data && rv->data && (fsT_is_low(rm->dtype) || fsT_is_low(rv->dtype)))
    return batch_norm_low_stats(x, rm, rv, w, b, training, momentum, eps);
  fs_tensor *ins[3] = {x, w, b}, *stats[2] = {rm, rv};
  bool f64 = fsG_any_f64(3, ins);
  fsG_low lp;
  if (!f64 && fsG_low_begin(&lp, FSG_AC_KEEP, 3, ins))
    return fsG_low_end(&lp, lp.failed ? NULL : fsG_batch_norm(lp.w[0], rm, rv, lp.w[1], lp.w[2], training, momentum, eps));
  if (!fsG_check_inputs("batch_norm", 3, ins) ||
      !float_inputs("batch_norm", f64 ? 5 : 1, (fs_tensor *const[]){x, w, b, rm, rv}, f64))
    return NULL;
  if ((rm || rv) && !fsG_check_inputs("batch_norm", 2, stats)) return NULL;
  if (!batch_norm_shapes(x, rm, rv, w, b, training)) return NULL;
  int64_t N = x->shape[0], C = x->shape[1], S = N * C != 0 ? x->numel / (N * C) : 0;
  if (f64) return fsG_batch_norm_f64(ins, rm, rv, training, momentum, eps);
  fsG_stage st;
  if (fsG_stage_begin(&st, "batch_norm", 3, ins) < 0) return NULL;
  fs_tensor *hm = rm ? fsG_on_host(rm) : NULL, *hv = rv ? fsG_on_host(rv) : NULL;
  fs_tensor *out = fsG_host_new(FS_F32, x->rank, x->shape);
  fs_tensor *mean = fsG_host_new(FS_F32, 1, &C), *rstd = fsG_host_new(FS_F32, 1, &C);
  int rc = (!rm || (hm && hv)) && out && mean && rstd ? 0 : -1;
  if (!rc) {
    fsN_batchnorm_forward(fsT_f32(out), fsT_f32(mean), fsT_f32(rstd), fsT_f32(st.h[0]),
                          st.h[1] ? fsT_f32(st.h[1]) : NULL, st.h[2] ? fsT_f32(st.h[2]) : NULL,
                          hm ? fsT_f32(hm) : NULL, hv ? fsT_f32(hv) : NULL, N, C, S, training,
                          (float)momentum, (float)eps);
    /* staged running statistics go back to their device */
    if (training && rm && rm->device != FS_DEV_CPU &&
        (fsB_transfer(rm->device, rm->data, FS_DEV_CPU, hm->data, fsT_nbytes(rm)) < 0 ||
         fsB_transfer(rv->device, rv->data, FS_DEV_CPU, hv->data, fsT_nbytes(rv)) < 0))
      rc = -1;
  }
  fsT_release(hm);
  fsT_release(hv);
  fsG_stage_end(&st);
  if (rc) {
    fsT_release(out);
    fsT_release(mean);
    fsT_release(rstd);
    return NULL;
  }
  out = fsG_to_dev(out, st.dev);
  mean = fsG_to_dev(mean, st.dev);
  rstd = fsG_to_dev(rstd, st.dev);
  if (!out || !mean || !rstd) {
    fsT_release(out);
    fsT_release(mean);
    fsT_release(rstd);
    return NULL;
  }
  return fsG_record(out, batchnorm_bw, 3, ins, mean, rstd, eps, training);
}
