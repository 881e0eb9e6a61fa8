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

static inline uint32_t pair(float lo, float hi) {
  return (uint32_t)fsT_f32_to_bf16(lo) | (uint32_t)fsT_f32_to_bf16(hi) << 16;
}

/* Bp[p][kp][j]: the pair (op(B)[2kp, j], op(B)[2kp+1, j]) of panel p
 * (columns p*NR ..), zero past K and N. */
static void pack_b(uint32_t *Bp, const float *B, int64_t ldb, bool tb, int64_t K, int64_t N, int64_t KP) {
  for (int64_t p = 0; p * NR < N; p++)
    for (int64_t kp = 0; kp < KP; kp++) {
      uint32_t *dst = Bp + (p * KP + kp) * NR;
      for (int64_t j = 0; j < NR; j++) {
        int64_t c = p * NR + j, k = 2 * kp;
        float lo = c < N && k < K ? elem(B, ldb, tb, k, c) : 0;
        float hi = c < N && k + 1 < K ? elem(B, ldb, tb, k + 1, c) : 0;
        dst[j] = pair(lo, hi);
      }
    }
}

/* Ap[q][kp][i]: the pair (op(A)[q*MR+i, 2kp], op(A)[q*MR+i, 2kp+1]). */
static void pack_a(uint32_t *Ap, const float *A, int64_t lda, bool ta, int64_t M, int64_t K, int64_t KP) {
  for (int64_t q = 0; q * MR < M; q++)
    for (int64_t kp = 0; kp < KP; kp++) {
      uint32_t *dst = Ap + (q * KP + kp) * MR;
      for (int64_t i = 0; i < MR; i++) {
        int64_t r = q * MR + i, k = 2 * kp;
        float lo = r < M && k < K ? elem(A, lda, ta, r, k) : 0;
        float hi = r < M && k + 1 < K ? elem(A, lda, ta, r, k + 1) : 0;
        dst[i] = pair(lo, hi);
      }
    }
}

/* One MR x NR tile of C from packed panels; m, n: the valid part. */
BF16_TARGET
static void tile(const uint32_t *Ap, const uint32_t *Bp, int64_t KP, float alpha, float beta,
                 float *C, int64_t ldc, int64_t m, int64_t n) {
  __m512 acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t kp = 0; kp < KP; kp++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(Bp + kp * NR);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(Bp + kp * NR + 16);
    const uint32_t *a = Ap + kp * MR;
    for (int i = 0; i < MR; i++) {
      __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t i = 0; i < m; i++)
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

int fsB_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb,
                  float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0) return 0;
  int64_t KP = (K + 1) / 2, MB = (M + MR - 1) / MR, NB = (N + NR - 1) / NR;
  uint32_t *Ap = malloc((size_t)(MB * MR * (KP ? KP : 1)) * sizeof *Ap);
  uint32_t *Bp = malloc((size_t)(NB * NR * (KP ? KP : 1)) * sizeof *Bp);
  if (!Ap || !Bp) {
    free(Ap);
    free(Bp);
    fsT_seterr("out of memory packing a %lldx%lldx%lld bfloat16 GEMM", (long long)M, (long long)N,
               (long long)K);
    return -1;
  }
  pack_a(Ap, A, lda, ta, M, K, KP);
  pack_b(Bp, B, ldb, tb, K, N, KP);
  for (int64_t p = 0; p < NB; p++) /* a B panel stays in cache across the row blocks */
    for (int64_t q = 0; q < MB; q++) {
      int64_t m = M - q * MR < MR ? M - q * MR : MR, n = N - p * NR < NR ? N - p * NR : NR;
      tile(Ap + q * KP * MR, Bp + p * KP * NR, KP, alpha, beta, C + q * MR * ldc + p * NR, ldc, m, n);
    }
  free(Ap);
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
