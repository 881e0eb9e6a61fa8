/* cnn.h -- the convolutional layers' kernels (Conv1d/Conv2d, max and average
 * pooling, adaptive average pooling, batch normalization) as forward/backward
 * pairs on contiguous float arrays, in nn.h's conventions: backward functions
 * ACCUMULATE (+=) into every gradient they are given, a NULL gradient means
 * "not needed", functions that can fail return -1 + fsT_error.
 *
 * Letters: N batch, C input channels, H W input height and width, OC output
 * channels, KH KW kernel, OH OW output height and width, G groups; images
 * are NCHW (torch's layout).  A 1-d layer is the 2-d one with H = KH = 1.
 *
 * The float32 kernels exist for the cpu only: their autograd entry points
 * (cnn_grad.c) stage the tensors of any other device through host memory
 * (autograd_int.h's fsG_stage), so no float32 backend table has a slot for
 * them.  Their bodies are cnn_typed.h's, over float here and over double in
 * float64's tables (f64_cnn_kernels.h), which devices without them leave
 * NULL.  Their other half: cnn_grad.c (entry points), module.c (layers). */
#ifndef FS_CNN_H
#define FS_CNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The geometry of one convolution (or pooling window: OC = C, G = C).
 * OH = (H + 2 ph - dh (KH - 1) - 1) / sh + 1, likewise OW. */
typedef struct fsN_conv {
  int64_t N, C, H, W, OC, KH, KW, sh, sw, ph, pw, dh, dw, G, OH, OW;
} fsN_conv;
#define FSN_CONV_FIELDS 16

/* out[N,OC,OH,OW] = x[N,C,H,W] (*) W[OC,C/G,KH,KW] + b[OC]  (b may be NULL);
 * per image and group an im2col buffer col[C/G*KH*KW, OH*OW] and one sgemm
 * into out (backward: per chunk of images side by side). */
int fsN_conv2d_forward(float *out, const float *x, const float *W, const float *b, const fsN_conv *g);
/* dx += col2im(W^T dout);  dW += dout col^T;  db += sum dout over N, OH, OW */
int fsN_conv2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x,
                        const float *W, const fsN_conv *g);
/* The floats of scratch fsN_conv2d_forward (backward false) or
 * fsN_conv2d_backward allocates while it runs on one thread: its column
 * buffer and, in backward, a chunk's output gradient gathered by channel,
 * plus the backward's partial weight gradients of its slices.  Each further
 * worker thread (fsB_threads) adds its own columns and gathered gradient.
 * The memory plan counts one thread's (interp/eval/plan_act.c). */
size_t fsN_conv2d_scratch(const fsN_conv *g, bool backward);

/* out[N,C,OH,OW] = max of x over each KHxKW window (dilated; padding is -inf),
 * idx[N,C,OH,OW] = the flat h*W+w of the first maximum (NaN wins, as torch) */
void fsN_maxpool2d_forward(float *out, int64_t *idx, const float *x, const fsN_conv *g);
/* dx[n,c,idx] += dout */
void fsN_maxpool2d_backward(float *dx, const float *dout, const int64_t *idx, const fsN_conv *g);

/* Average pooling over arbitrary per-output windows: output row oh averages
 * input rows [hs[oh], he[oh]) (clipped to the input), column ow likewise,
 * dividing by hdiv[oh] * wdiv[ow] (torch's pool size: unclipped with
 * count_include_pad, clipped without; adaptive pooling's windows are
 * [floor(i H / OH), ceil((i+1) H / OH))).  x[N*C, H, W], out[N*C, OH, OW]. */
typedef struct fsN_avgwin {
  int64_t H, W, OH, OW;
  const int64_t *hs, *he, *hdiv, *ws, *we, *wdiv;
} fsN_avgwin;
void fsN_avgpool2d_forward(float *out, const float *x, int64_t NC, const fsN_avgwin *w);
void fsN_avgpool2d_backward(float *dx, const float *dout, int64_t NC, const fsN_avgwin *w);
/* The windows of pooling g in a mode: count_include_pad false or true, or
 * adaptive (the output size is g->OH, g->OW; the kernel unused).  *mem holds
 * w's arrays (free() it); -1 + fsT_error when out of memory. */
enum { FSN_POOL_EXCL, FSN_POOL_INCL, FSN_POOL_ADAPTIVE };
int fsN_avgwin_make(fsN_avgwin *w, int64_t **mem, const fsN_conv *g, int mode);

/* ConvTranspose2d's bias over x[N,C,P]: out[n,c,p] += b[c];
 * db[c] += sum dy over N, P (each image's plane summed in double) */
void fsN_chanbias_forward(float *out, const float *b, int64_t N, int64_t C, int64_t P);
void fsN_chanbias_backward(float *db, const float *dy, int64_t N, int64_t C, int64_t P);

/* Batch normalization of x[N,C,S] per channel c (S = H*W, L or 1).
 * training: mean[C], rstd[C] = 1/sqrt(var + eps) of this batch (biased
 * variance), and the running statistics (when rm, rv are not NULL) move by
 * momentum: rm = (1-m) rm + m mean, rv = (1-m) rv + m var * M/(M-1), M = N*S.
 * Not training: mean = rm, rstd = 1/sqrt(rv + eps).  Then
 * out = (x - mean[c]) * rstd[c] * w[c] + b[c]  (w, b NULL: 1 and 0). */
void fsN_batchnorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                           const float *b, float *rm, float *rv, int64_t N, int64_t C, int64_t S,
                           bool training, float momentum, float eps);
/* training: dx += rstd/M (M dxh - sum dxh - xh sum(dxh xh)), dxh = dy w;
 * not training (the statistics are constants): dx += dy w rstd;
 * dw += sum dy xh, db += sum dy (xh = (x - mean) rstd) */
void fsN_batchnorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, const float *mean, const float *rstd, int64_t N,
                            int64_t C, int64_t S, bool training);

#endif
