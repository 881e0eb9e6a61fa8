/* rng_mix.h -- the counter-based generator's arithmetic (rng.h documents the
 * scheme), shared by the C fills and the CUDA kernels so both produce the
 * same bits.  Under nvcc every function is __host__ __device__; device code
 * rounds the affine map's product and sum separately (no FMA contraction), so
 * uniform values match the CPU's bitwise. */
#ifndef FS_RNG_MIX_H
#define FS_RNG_MIX_H

#include <stdint.h>

#ifdef __CUDACC__
#define FSR_HD __host__ __device__
#else
#define FSR_HD
#endif

#define FSR_GAMMA 0x9e3779b97f4a7c15ULL

FSR_HD static inline uint64_t fsR_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A key derived from another and a counter (e.g. a dropout call number). */
FSR_HD static inline uint64_t fsR_subkey(uint64_t key, uint64_t counter) {
  return fsR_mix(key ^ fsR_mix(counter + FSR_GAMMA));
}
FSR_HD static inline uint64_t fsR_bits(uint64_t key, uint64_t i) {
  return fsR_mix(key + (i + 1) * FSR_GAMMA);
}
/* The top 24 bits of a stream element as a float in [0, 1). */
FSR_HD static inline float fsR_bits_u01(uint64_t bits) { return (float)(bits >> 40) * 0x1p-24f; }
FSR_HD static inline float fsR_u01(uint64_t key, uint64_t i) { return fsR_bits_u01(fsR_bits(key, i)); }

/* base + scale * x, each operation rounded (lo + span u; mean + std z). */
FSR_HD static inline float fsR_affine(float base, float scale, float x) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(base, __fmul_rn(scale, x));
#else
  return base + scale * x;
#endif
}

/* Box-Muller inputs of pair j: u1 in (0, 1] and the angle 2 pi u2. */
FSR_HD static inline void fsR_pair_inputs(uint64_t key, uint64_t j, float *u1, float *angle) {
  *u1 = (float)((fsR_bits(key, 2 * j) >> 40) + 1) * 0x1p-24f;
  *angle = 6.2831853071795864f * fsR_u01(key, 2 * j + 1);
}

#endif
