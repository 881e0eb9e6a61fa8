/* f64_cnn_kernels.h -- float64's kernels of the convolutional layers and
 * the normalizations (64-true), a table of their own in a device's float64
 * table: fsB_of(t)->f64->cnn.  cnn.h's and norm.h's kernels over double,
 * with their shapes and conventions (backward ACCUMULATES, a NULL gradient
 * is one not needed, -1 + fsT_error from those that can fail).  Every
 * double and int64 pointer is a device pointer of that backend; the
 * geometry (fsN_conv, fsN_avgwin and its window arrays) is host memory.
 *
 * Invariant: the cpu's table (fsB_f64_cnn_cpu, f64_cnn_kernels.c) is
 * cnn_typed.h and norm_typed.h instantiated over double, the float32
 * kernels' text; emulated cuda's (backend_emu.c) serves it behind device
 * pointers, bit for bit.  A device without these kernels has cnn NULL
 * (cuda: its float32 layers are staged through the host, so there is no
 * cuda kernel to instantiate over double), and f64_cnn.c refuses float64
 * there by the op's name.  The other half: f64_cnn.c calls only this. */
#ifndef FS_F64_CNN_KERNELS_H
#define FS_F64_CNN_KERNELS_H

#include "cnn.h"
#include "f64_kernels.h"

struct fsB_f64_cnn {
  int (*conv2d_forward)(double *out, const double *x, const double *W, const double *b, const fsN_conv *g);
  int (*conv2d_backward)(double *dx, double *dW, double *db, const double *dout, const double *x, const double *W,
                         const fsN_conv *g);
  void (*chanbias_forward)(double *out, const double *b, int64_t N, int64_t C, int64_t P);
  void (*chanbias_backward)(double *db, const double *dy, int64_t N, int64_t C, int64_t P);
  void (*maxpool2d_forward)(double *out, int64_t *idx, const double *x, const fsN_conv *g);
  void (*maxpool2d_backward)(double *dx, const double *dout, const int64_t *idx, const fsN_conv *g);
  void (*avgpool2d_forward)(double *out, const double *x, int64_t NC, const fsN_avgwin *w);
  void (*avgpool2d_backward)(double *dx, const double *dout, int64_t NC, const fsN_avgwin *w);
  void (*batchnorm_forward)(double *out, double *mean, double *rstd, const double *x, const double *w,
                            const double *b, double *rm, double *rv, int64_t N, int64_t C, int64_t S, bool training,
                            double momentum, double eps);
  void (*batchnorm_backward)(double *dx, double *dw, double *db, const double *dout, const double *x,
                             const double *w, const double *mean, const double *rstd, int64_t N, int64_t C,
                             int64_t S, bool training);
  void (*groupnorm_forward)(double *out, double *mean, double *rstd, const double *x, const double *w,
                            const double *b, int64_t N, int64_t C, int64_t S, int64_t G, double eps);
  void (*groupnorm_backward)(double *dx, double *dw, double *db, const double *dout, const double *x,
                             const double *w, const double *mean, const double *rstd, int64_t N, int64_t C,
                             int64_t S, int64_t G);
  void (*rmsnorm_forward)(double *out, double *rstd, const double *x, const double *w, int64_t M, int64_t D,
                          double eps);
  void (*rmsnorm_backward)(double *dx, double *dw, const double *dout, const double *x, const double *w,
                           const double *rstd, int64_t M, int64_t D);
};

extern const fsB_f64_cnn fsB_f64_cnn_cpu;

#endif
