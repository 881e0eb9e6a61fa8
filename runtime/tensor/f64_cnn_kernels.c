/* f64_cnn_kernels.c -- the cpu's float64 kernels of the convolutional
 * layers and the normalizations (fsB_f64_cnn_cpu, f64_cnn_kernels.h):
 * cnn_typed.h and norm_typed.h instantiated over double (static
 * fsN_NAME_f64), so 64-true's convolutions, pooling and norms are the
 * float32 kernels' text, threading and loop order included (the same bits
 * at every thread count). */
#include "f64_cnn_kernels.h"
#include "norm.h"
#define FS_REAL_DOUBLE 1 /* the shared kernel bodies, instantiated over double */
#include "cnn_typed.h"
#include "norm_typed.h"

/* cnn_typed.h's and norm_typed.h's forward and backward kernel of a layer */
#define LAYER(name) .name##_forward = fsN_##name##_forward_f64, .name##_backward = fsN_##name##_backward_f64

const fsB_f64_cnn fsB_f64_cnn_cpu = {
  LAYER(conv2d), LAYER(chanbias), LAYER(maxpool2d), LAYER(avgpool2d), LAYER(batchnorm), LAYER(groupnorm),
  LAYER(rmsnorm),
};
