/* vmath.h -- branch-free float exp and erf that the compiler vectorizes
 * inside `#pragma omp simd` loops (libm's expf/erff are opaque calls that
 * keep a loop scalar: GELU spent most of its time in erff). */
#ifndef FS_VMATH_H
#define FS_VMATH_H

#include "config.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The hot elementwise and row loops are compiled for AVX2+FMA when configure
 * found this machine runs it (FS_NATIVE_SIMD, --disable-native-simd to opt
 * out); the rest of the program stays baseline x86-64. */
#if defined(FS_NATIVE_SIMD) && defined(__x86_64__) && defined(__GNUC__)
#define FS_VECTOR_TARGET __attribute__((target("arch=x86-64-v3")))
#else
#define FS_VECTOR_TARGET
#endif

/* exp(x) to about 1 ulp (Cephes expf: x = n ln2 + r, |r| <= ln2/2, degree-6
 * polynomial in r, times 2^n built in the exponent bits). n comes from the
 * round-to-nearest magic constant, so no float-to-int conversion is needed;
 * overflow gives inf, results under FLT_MIN give 0, nan stays nan. */
static inline float fsVM_expf(float x) {
  const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  float xc = x > 88.72283f ? 88.72283f : x;
  xc = xc < -87.33654f ? -87.33654f : xc;
  float t = xc * 1.44269504088896341f + magic;
  float n = t - magic;
  uint32_t tb;
  memcpy(&tb, &t, sizeof tb);
  int32_t ni = (int32_t)(tb - 0x4b400000u), n1 = ni / 2, n2 = ni - n1;
  float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  /* 2^n as 2^n1 * 2^n2: n reaches 128 at the top of the range, past one
   * exponent field */
  uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &b1, sizeof s1);
  memcpy(&s2, &b2, sizeof s2);
  y = y * s1 * s2;
  y = x > 88.72283f ? INFINITY : y;
  y = x < -87.33654f ? 0.0f : y; /* below FLT_MIN: flushed, not denormal */
  return x == x ? y : x;
}

/* 1 + erf(x / sqrt 2), given e = exp(-x^2 / 2): Abramowitz & Stegun 7.1.26,
 * absolute error under 1.5e-7, the approximation PyTorch's vectorized CPU
 * GELU uses. Returning 1 + erf keeps the far negative tail's precision. */
static inline float fsVM_one_plus_erf_sqrt1_2(float x, float e) {
  float ax = fabsf(x) * 0.70710678118654752f;
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  float tail = p * t * e; /* 1 - erf(|x| / sqrt 2) */
  return x < 0 ? tail : 2.0f - tail;
}

#endif
