/* blas1_typed.h -- the cpu's level-1 loops over FS_REAL (typed.h): axpy,
 * scale, clamp, sum, sum of squares, largest magnitude.  backend_cpu.c
 * instantiates them for float (fsB_cpu's, under their names), f64_kernels.c
 * for double (fsB_f64_cpu's, NAME_f64).
 *
 * Invariant: one text for both types, every loop in element order; sums
 * accumulate in double whatever the element type ((double)x * x is x * x
 * for double), absmax in the element type, a NaN winning.  Included once
 * per translation unit.  The other half: cuda_common.cuh's loops of the
 * same names (fscu_axpy, ...), one template for cuda's float and double. */
#include "typed.h"

FS_VECTOR_TARGET
static void FS_RK(cpu_axpy)(size_t n, FS_REAL alpha, const FS_REAL *x, FS_REAL *y) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

static void FS_RK(cpu_scale)(size_t n, FS_REAL alpha, FS_REAL *x) {
  for (size_t i = 0; i < n; i++) x[i] *= alpha;
}

static void FS_RK(cpu_clamp)(size_t n, FS_REAL lo, FS_REAL hi, FS_REAL *x) {
  for (size_t i = 0; i < n; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

static double FS_RK(cpu_sum)(size_t n, const FS_REAL *x) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += x[i];
  return s;
}

static double FS_RK(cpu_sumsq)(size_t n, const FS_REAL *x) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

static FS_REAL FS_RK(cpu_absmax)(size_t n, const FS_REAL *x) {
  FS_REAL m = 0;
  for (size_t i = 0; i < n; i++) {
    FS_REAL a = FS_RM(fabs)(x[i]);
    if (a > m || isnan(a)) m = a;
  }
  return m;
}

/* the table entries of the loops above (fsB_backend's and fsB_f64_kernels'
 * fields of the same names) */
#define FS_BLAS1_TYPED_ENTRIES                                                             \
  .axpy = FS_RK(cpu_axpy), .scale = FS_RK(cpu_scale), .clamp = FS_RK(cpu_clamp), .sum = FS_RK(cpu_sum), \
  .sumsq = FS_RK(cpu_sumsq), .absmax = FS_RK(cpu_absmax)
