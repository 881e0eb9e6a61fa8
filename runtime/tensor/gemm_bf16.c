/* gemm_bf16.c -- C = alpha op(A) op(B) + beta C with A and B taken at
 * bfloat16 precision (rounded to nearest even) and float32 accumulation:
 * the matrix products of ops that compute in bfloat16 (blas.h).
 *
 * Invariant: the result is the float32 product of the rounded operands,
 * whichever path runs, so a run differs between machines only in the order
 * of float32 additions.  Where configure found AVX-512 BF16 (FS_NATIVE_BF16)
 * the operands are packed into pairs of bfloat16 and multiplied with
 * vdpbf16ps (two products per float32 lane, accumulated in float32);
 * elsewhere they are rounded into float32 copies and given to OpenBLAS's
 * sgemm (blas.c, which routes here). */
#include "blas.h"

#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "tensor.h"

/* op(X)[r, c] of a row-major X with leading dimension ld */
static inline float elem(const float *X, int64_t ld, bool trans, int64_t r, int64_t c) {
  return trans ? X[c * ld + r] : X[r * ld + c];
}

#if defined(FS_NATIVE_BF16) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))
#define MR 8  /* rows of C per micro-tile */
#define NR 32 /* columns of C per micro-tile: two zmm of float32 */

/* fsT_f32_to_bf16 inline, so the conversion loops vectorize */
static inline uint16_t bf16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40 : r);
}

/* Y[r, 0..Kp) = bf16(op(X)[r, 0..K)), zero past K (and for rows R..Rp):
 * X is R x K under op, so row r of op(X) lies along X's rows unless trans. */
BF16_TARGET
static void to_rows(uint16_t *Y, int64_t Rp, int64_t Kp, const float *X, int64_t ld, bool trans,
                    int64_t R, int64_t K) {
  memset(Y, 0, (size_t)(Rp * Kp) * sizeof *Y);
  if (!trans) {
    for (int64_t r = 0; r < R; r++) {
      const float *x = X + r * ld;
      uint16_t *y = Y + r * Kp;
#pragma omp simd
      for (int64_t k = 0; k < K; k++) y[k] = bf16_of(x[k]);
    }
  } else { /* a transpose: X's rows are read in order; a block of 32 k
              * writes one 64-byte line of each row of Y, which stay cached */
    for (int64_t k0 = 0; k0 < K; k0 += 32) {
      int64_t k1 = k0 + 32 < K ? k0 + 32 : K;
      for (int64_t k = k0; k < k1; k++) {
        const float *x = X + k * ld;
        for (int64_t r = 0; r < R; r++) Y[r * Kp + k] = bf16_of(x[r]);
      }
    }
  }
}

/* One MR x NR tile of C: rows of A (bf16 pairs, stride KP pairs) times the
 * panel Bp[kp][j] (pairs of column j); m, n: the valid part. */
BF16_TARGET
static void tile(const uint32_t *A, int64_t KP, const uint32_t *Bp, float alpha, float beta,
                 float *C, int64_t ldc, int64_t m, int64_t n) {
  __m512 acc[MR][2]; /* unrolled, so the 16 accumulators stay in registers */
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t kp = 0; kp < KP; kp++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(Bp + kp * NR);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(Bp + kp * NR + 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      __m512bh ai = (__m512bh)_mm512_set1_epi32((int)A[i * KP + kp]);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int64_t i = 0; i < MR; i++) {
    if (i >= m) break;
    for (int h = 0; h < 2; h++) {
      int64_t left = n - 16 * h;
      if (left <= 0) break;
      __mmask16 mask = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
      float *c = C + i * ldc + 16 * h;
      __m512 r = _mm512_mul_ps(va, acc[i][h]);
      if (beta != 0) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask, c), r);
      _mm512_mask_storeu_ps(c, mask, r);
    }
  }
}

int fsB_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb,
                  float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0) return 0;
  int64_t KP = (K + 1) / 2, Kp = 2 * KP > 0 ? 2 * KP : 2, MB = (M + MR - 1) / MR, NB = (N + NR - 1) / NR;
  /* rows of op(A) and columns of op(B) as bf16 with k contiguous: a pair
   * (k, k+1) is then one uint32; the panels interleave 32 columns' pairs */
  uint16_t *Ar = malloc((size_t)(MB * MR * Kp) * sizeof *Ar), *Bc = malloc((size_t)(NB * NR * Kp) * sizeof *Bc);
  uint32_t *Bp = malloc((size_t)(NB * NR * (Kp / 2)) * sizeof *Bp);
  if (!Ar || !Bc || !Bp) {
    free(Ar);
    free(Bc);
    free(Bp);
    fsT_seterr("out of memory packing a %lldx%lldx%lld bfloat16 GEMM", (long long)M, (long long)N,
               (long long)K);
    return -1;
  }
  to_rows(Ar, MB * MR, Kp, A, lda, ta, M, K);
  to_rows(Bc, NB * NR, Kp, B, ldb, !tb, N, K); /* column c of op(B) is row c of op(B)^T */
  const uint32_t *Bpairs = (const uint32_t *)Bc, *Apairs = (const uint32_t *)Ar;
  for (int64_t p = 0; p < NB; p++)
    for (int64_t kp = 0; kp < KP; kp++)
      for (int64_t j = 0; j < NR; j++) Bp[(p * KP + kp) * NR + j] = Bpairs[(p * NR + j) * (Kp / 2) + kp];
  for (int64_t p = 0; p < NB; p++) /* a B panel stays in cache across the row blocks */
    for (int64_t q = 0; q < MB; q++) {
      int64_t m = M - q * MR < MR ? M - q * MR : MR, n = N - p * NR < NR ? N - p * NR : NR;
      tile(Apairs + q * MR * (Kp / 2), Kp / 2, Bp + p * KP * NR, alpha, beta, C + q * MR * ldc + p * NR,
           ldc, m, n);
    }
  free(Ar);
  free(Bc);
  free(Bp);
  return 0;
}

#else /* no AVX-512 BF16: rounded float32 copies through sgemm */

/* op(X) [R, Ccols] rounded to bfloat16 precision, untransposed, row-major */
static float *rounded(const float *X, int64_t ld, bool trans, int64_t R, int64_t Cc) {
  float *Y = malloc((size_t)(R * Cc ? R * Cc : 1) * sizeof *Y);
  if (!Y) return NULL;
  for (int64_t r = 0; r < R; r++)
    for (int64_t c = 0; c < Cc; c++) Y[r * Cc + c] = elem(X, ld, trans, r, c);
  fsT_round_array(FS_BF16, Y, (size_t)(R * Cc));
  return Y;
}

int fsB_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb,
                  float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0) return 0;
  float *Ar = rounded(A, lda, ta, M, K), *Br = Ar ? rounded(B, ldb, tb, K, N) : NULL;
  int rc = -1;
  if (!Br) fsT_seterr("out of memory rounding a %lldx%lldx%lld bfloat16 GEMM", (long long)M,
                      (long long)N, (long long)K);
  else rc = fsB_sgemm_f32(false, false, M, N, K, alpha, Ar, K, Br, N, beta, C, ldc);
  free(Ar);
  free(Br);
  return rc;
}

#endif
