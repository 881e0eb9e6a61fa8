/* typed.h -- the element type of the kernels written once for float and
 * double, as ggml writes its kernels once over its types: ops_typed.h
 * (with ops_scalar.h's per-element formulas, which cuda's double kernels
 * share), nn_typed.h, loss_typed.h and blas1_typed.h hold kernel bodies over
 * FS_REAL, and each file that instantiates them includes them once.
 *
 * Invariant: the float instantiation is the float32 kernels themselves,
 * under their own names (ops.c, nn.c, loss.c, backend_cpu.c include the
 * bodies where the kernels stood), so float32 code is what it was;
 * f64_kernels.c (and f64_cuda.cu, for ops_scalar.h) defines
 * FS_REAL_DOUBLE 1 before including them and gets the same text over
 * double, named NAME_f64 and static.  A translation unit instantiates one
 * type only.  The other half: the typed headers, and f64_kernels.c (the cpu's
 * float64 table, f64_kernels.h). */
#ifndef FS_TYPED_H
#define FS_TYPED_H

#include <math.h>
#include "blas.h"
#include "vmath.h"

#if defined(FS_REAL_DOUBLE) && FS_REAL_DOUBLE
#define FS_REAL double
#define FS_RM(fn) fn           /* libm's double function: exp, tanh, ... */
#define FS_RVEXP exp           /* the exp of vectorized loops (float: vmath.h's) */
/* 1 + erf(x / sqrt 2) given e = exp(-x^2 / 2); double takes libm's erf */
#define FS_RONE_PLUS_ERF_SQRT1_2(x, e) (1 + erf((x) * 0.70710678118654752440))
#define FS_RGEMM fsB_dgemm
#define FS_RK(name) name##_f64 /* an instantiation's name */
#define FS_RPUB static         /* a kernel float32 exports: f64_kernels.c's own */
#else
#define FS_REAL float
#define FS_RM(fn) fn##f
#define FS_RVEXP fsVM_expf
#define FS_RONE_PLUS_ERF_SQRT1_2(x, e) fsVM_one_plus_erf_sqrt1_2(x, e)
#define FS_RGEMM fsB_sgemm
#define FS_RK(name) name
#define FS_RPUB
#endif

#endif
