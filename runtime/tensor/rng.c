/* rng.c -- counter-based fills (see rng.h for the scheme). */
#include "rng.h"

#include <math.h>

uint64_t fsR_key(uint64_t seed, const char *name) {
  uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a: names are short, no need for better */
  for (const unsigned char *p = (const unsigned char *)(name ? name : ""); *p; p++)
    h = (h ^ *p) * 0x100000001b3ULL;
  return fsR_mix(fsR_mix(seed + FSR_GAMMA) ^ h);
}

void fsR_uniform_key(float *dst, size_t n, uint64_t key, size_t offset, float lo, float hi) {
  float span = hi - lo;
  for (size_t i = 0; i < n; i++) dst[i] = fsR_affine(lo, span, fsR_u01(key, offset + i));
}

/* One Box-Muller pair for pair index j. */
static void normal_pair(uint64_t key, uint64_t j, float *z0, float *z1) {
  float u1, a;
  fsR_pair_inputs(key, j, &u1, &a);
  float r = sqrtf(-2.0f * logf(u1));
  *z0 = r * cosf(a);
  *z1 = r * sinf(a);
}

void fsR_normal_key(float *dst, size_t n, uint64_t key, size_t offset, float mean, float std) {
  size_t i = 0;
  float z0, z1;
  if (n && (offset & 1)) { /* slice starts on the odd half of a pair */
    normal_pair(key, offset / 2, &z0, &z1);
    dst[i++] = fsR_affine(mean, std, z1);
  }
  for (; i + 1 < n; i += 2) {
    normal_pair(key, (offset + i) / 2, &z0, &z1);
    dst[i] = fsR_affine(mean, std, z0);
    dst[i + 1] = fsR_affine(mean, std, z1);
  }
  if (i < n) {
    normal_pair(key, (offset + i) / 2, &z0, &z1);
    dst[i] = fsR_affine(mean, std, z0);
  }
}

void fsR_fill_uniform(float *dst, size_t n, uint64_t seed, const char *name,
                      size_t offset, float lo, float hi) {
  fsR_uniform_key(dst, n, fsR_key(seed, name), offset, lo, hi);
}

void fsR_fill_normal(float *dst, size_t n, uint64_t seed, const char *name,
                     size_t offset, float mean, float std) {
  fsR_normal_key(dst, n, fsR_key(seed, name), offset, mean, std);
}
