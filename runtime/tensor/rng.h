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

#include "rng_mix.h" /* fsR_mix, fsR_subkey, fsR_bits, fsR_u01 (shared with CUDA) */

/* The stream key of (seed, name); name may be NULL (same as ""). */
uint64_t fsR_key(uint64_t seed, const char *name);
/* Elements [offset, offset + n) of the stream, mapped to U(lo, hi) or
 * N(mean, std). */
void fsR_uniform_key(float *dst, size_t n, uint64_t key, size_t offset, float lo, float hi);
void fsR_normal_key(float *dst, size_t n, uint64_t key, size_t offset, float mean, float std);
void fsR_fill_uniform(float *dst, size_t n, uint64_t seed, const char *name,
                      size_t offset, float lo, float hi);
void fsR_fill_normal(float *dst, size_t n, uint64_t seed, const char *name,
                     size_t offset, float mean, float std);

#endif
