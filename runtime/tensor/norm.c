/* norm.c -- cpu kernels of GroupNorm and RMSNorm (norm.h gives the shapes):
 * norm_typed.h's bodies instantiated for float, under the fsN_ names
 * themselves (f64_cnn_kernels.c instantiates them for double). */
#include "norm.h"

#include "norm_typed.h"
