/* rng.h -- counter-based random numbers: value = f(seed, name, index).
 *
 * There is no generator state.  A stream is keyed by (seed, name) -- name is
 * a parameter's full state-dict key -- and element i of the stream is
 * splitmix64's output mix applied to key + (i + 1) * golden-gamma.  Any
 * slice [offset, offset + n) of a stream can therefore be produced on its
 * own, bitwise equal to the same elements of the whole: a tensor built on
 * meta and materialized later, or an FSDP rank filling only its shard, gets
 * exactly the values of a direct build.
 *
 * Uniform floats take the top 24 bits: u = (bits >> 40) * 2^-24 in [0, 1).
 * Normals use Box-Muller on the pair of stream elements (2j, 2j + 1) for
 * j = i / 2: even i gets r*cos(2*pi*u2), odd i gets r*sin(2*pi*u2), with
 * u1 = ((bits(2j) >> 40) + 1) * 2^-24 in (0, 1] and r = sqrt(-2 ln u1). */
#ifndef FS_RNG_H
#define FS_RNG_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t fsR_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

#define FSR_GAMMA 0x9e3779b97f4a7c15ULL

/* The stream key of (seed, name); name may be NULL (same as ""). */
uint64_t fsR_key(uint64_t seed, const char *name);
/* A key derived from another and a counter (e.g. a dropout call number). */
static inline uint64_t fsR_subkey(uint64_t key, uint64_t counter) {
  return fsR_mix(key ^ fsR_mix(counter + FSR_GAMMA));
}
static inline uint64_t fsR_bits(uint64_t key, uint64_t i) {
  return fsR_mix(key + (i + 1) * FSR_GAMMA);
}
static inline float fsR_u01(uint64_t key, uint64_t i) {
  return (float)(fsR_bits(key, i) >> 40) * 0x1p-24f;
}

/* Elements [offset, offset + n) of the stream, mapped to U(lo, hi) or
 * N(mean, std). */
void fsR_uniform_key(float *dst, size_t n, uint64_t key, size_t offset, float lo, float hi);
void fsR_normal_key(float *dst, size_t n, uint64_t key, size_t offset, float mean, float std);
void fsR_fill_uniform(float *dst, size_t n, uint64_t seed, const char *name,
                      size_t offset, float lo, float hi);
void fsR_fill_normal(float *dst, size_t n, uint64_t seed, const char *name,
                     size_t offset, float mean, float std);

#endif
