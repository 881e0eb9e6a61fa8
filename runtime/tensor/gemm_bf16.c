/* gemm_bf16.c -- C = alpha op(A) op(B) + beta C with A and B taken at
 * bfloat16 (or float16) precision (rounded to nearest even) and float32
 * accumulation: the matrix products of ops that compute in a low type
 * (blas.h).  float16 takes the rounded copies below only.
 *
 * Invariant: the result is the float32 product of the rounded operands,
 * whichever path runs, so a run differs between machines only in the order
 * of float32 additions.  Where configure found AVX-512 BF16 (FS_NATIVE_BF16)
 * the operands are packed into pairs of bfloat16 and multiplied with
 * vdpbf16ps (two products per float32 lane, accumulated in float32);
 * elsewhere they are rounded into float32 copies and given to OpenBLAS's
 * sgemm (blas.c, which routes here).  An operand may also be bfloat16
 * storage (fsB_gemm_bf16x), taken as it is, and the result may be finished
 * as it is stored (fsB_gemm_bf16o: rounded to bfloat16, added to a
 * gradient), tile by tile, with the same arithmetic as a pass over the
 * float32 product afterwards. */
#include "blas.h"
#include "backend.h"

#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "tensor.h"

/* C[r, c0 + j] for j < n from v[j] = alpha op(A) op(B) [r, c0 + j], as
 * out->how says, for the results that are not a plain float32 store:
 * rounding and accumulating here, while the row is in cache, replaces a
 * float32 scratch product and passes over it (fsB_finish).  Always inlined,
 * so that inside the AVX-512 tile its loops vectorize with the tile's
 * instructions (called, it ran at the baseline ISA's width: 10% of a
 * bf16-mixed GPT step). */
__attribute__((always_inline)) static inline void finish_row(const fsB_out *out, int64_t r, int64_t c0, const float *v, int64_t n) {
  if (out->how == FSB_BF16_BIAS) {
    uint16_t *c = (uint16_t *)out->C + r * out->ldc + c0;
    const float *b = out->bias ? out->bias + c0 : NULL;
    if (b) {
#pragma omp simd
      for (int64_t j = 0; j < n; j++) c[j] = fsT_f32_to_bf16(v[j] + fsT_bf16_round(b[j]));
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; j++) c[j] = fsT_f32_to_bf16(v[j]);
    }
    return;
  }
  float *c = (float *)out->C + r * out->ldc + c0;
  if (out->beta == 0) { /* C taken as zeros, unread: 0 + x, so -0 becomes +0 as in a zeroed C */
#pragma omp simd
    for (int64_t j = 0; j < n; j++) c[j] = 0.0f + fsT_bf16_round(v[j]);
  } else if (out->how == FSB_ADD_ROUNDED) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) c[j] += fsT_bf16_round(v[j]);
  } else { /* FSB_ROUNDED_SUM: fsG_low_grad_add's rule, the contribution rounded before it is added */
#pragma omp simd
    for (int64_t j = 0; j < n; j++) c[j] = fsT_bf16_round(c[j] + fsT_bf16_round(v[j]));
  }
}

#if defined(FS_NATIVE_BF16) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))
#define MR 8  /* rows of C per micro-tile */
#define NR 32 /* columns of C per micro-tile: two zmm of float32 */

static inline uint32_t pair_of(float lo, float hi) { return fsT_f32_to_bf16(lo) | (uint32_t)fsT_f32_to_bf16(hi) << 16; }

/* Pairs along X's rows: P[r * KP + kp] = pair(X[r, 2kp], X[r, 2kp+1]) (the
 * row as bfloat16, read as uint32), zero past K; rows R..Rp zero.  A
 * bfloat16 X's rows are copied as they are. */
BF16_TARGET
static void pairs_along(uint32_t *P, int64_t Rp, int64_t KP, fsB_mat X, int64_t R, int64_t K) {
  for (int64_t r = 0; r < Rp; r++) {
    uint16_t *y = (uint16_t *)(P + r * KP);
    if (r >= R) {
      memset(y, 0, (size_t)KP * sizeof *P);
      continue;
    }
    if (X.bf16) {
      memcpy(y, (const uint16_t *)X.p + r * X.ld, (size_t)K * sizeof *y);
    } else {
      const float *x = (const float *)X.p + r * X.ld;
#pragma omp simd
      for (int64_t k = 0; k < K; k++) y[k] = fsT_f32_to_bf16(x[k]);
    }
    if (K % 2) y[K] = 0;
  }
}

/* Pairs across X's rows: P[kp * ldp + c] = pair(X[2kp, c], X[2kp+1, c]) for
 * c < C (row K of X counts as zeros), zero for C <= c < ldp. */
BF16_TARGET
static void pairs_across(uint32_t *P, int64_t ldp, int64_t KP, fsB_mat X, int64_t C, int64_t K) {
  for (int64_t kp = 0; kp < KP; kp++) {
    bool odd = 2 * kp + 1 == K; /* row K counts as zeros */
    uint32_t *y = P + kp * ldp;
    if (X.pairs) {
      memcpy(y, (const uint32_t *)X.p + kp * X.ld, (size_t)C * sizeof *y);
    } else if (X.bf16 && !odd) {
      const uint16_t *x0 = (const uint16_t *)X.p + 2 * kp * X.ld, *x1 = x0 + X.ld;
#pragma omp simd
      for (int64_t c = 0; c < C; c++) y[c] = x0[c] | (uint32_t)x1[c] << 16;
    } else if (X.bf16) {
      const uint16_t *x0 = (const uint16_t *)X.p + 2 * kp * X.ld;
#pragma omp simd
      for (int64_t c = 0; c < C; c++) y[c] = x0[c];
    } else if (!odd) {
      const float *x0 = (const float *)X.p + 2 * kp * X.ld, *x1 = x0 + X.ld;
#pragma omp simd
      for (int64_t c = 0; c < C; c++) y[c] = pair_of(x0[c], x1[c]);
    } else {
      const float *x0 = (const float *)X.p + 2 * kp * X.ld;
#pragma omp simd
      for (int64_t c = 0; c < C; c++) y[c] = fsT_f32_to_bf16(x0[c]);
    }
    for (int64_t c = C; c < ldp; c++) y[c] = 0;
  }
}

/* r[0..16) (16 rows of 16 uint32) := their transpose */
BF16_TARGET
static inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; j++) {
      t[i + j] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; j++) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
  }
}

/* Panels from rows of pairs: Bp[p][kp][j] = Bt[p * NR + j][kp] for Np rows
 * (a multiple of NR) of KP pairs, in 16 x 16 blocks transposed in
 * registers (an element-by-element transpose ran at 2 ns an element). */
BF16_TARGET
static void panels_of_rows(uint32_t *Bp, const uint32_t *Bt, int64_t Np, int64_t KP) {
  for (int64_t r0 = 0; r0 < Np; r0 += 16) {
    uint32_t *panel = Bp + (r0 / NR) * KP * NR + r0 % NR;
    int64_t kp0 = 0;
    for (; kp0 + 16 <= KP; kp0 += 16) {
      __m512i r[16];
      for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(Bt + (r0 + i) * KP + kp0);
      transpose16(r);
      for (int c = 0; c < 16; c++) _mm512_storeu_si512(panel + (kp0 + c) * NR, r[c]);
    }
    for (; kp0 < KP; kp0++)
      for (int i = 0; i < 16; i++) panel[kp0 * NR + i] = Bt[(r0 + i) * KP + kp0];
  }
}

/* One MR x NR tile of the result, rows r0.., columns c0..: A's pair for
 * row i and pair kp at A[i*sa + kp*sk], times the panel Bp[kp][j] (pairs of
 * column j); m, n: the valid part. */
BF16_TARGET
static void tile(const uint32_t *A, int64_t sa, int64_t sk, int64_t KP, const uint32_t *Bp, float alpha,
                 const fsB_out *out, int64_t r0, int64_t c0, int64_t m, int64_t n) {
  __m512 acc[MR][2]; /* unrolled, so the 16 accumulators stay in registers */
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t kp = 0; kp < KP; kp++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(Bp + kp * NR);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(Bp + kp * NR + 16);
    const uint32_t *a = A + kp * sk;
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i * sa]);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  __m512 va = _mm512_set1_ps(alpha);
  if (out->how != FSB_STORE) {
#pragma GCC unroll 8
    for (int64_t i = 0; i < MR; i++) {
      if (i >= m) break;
      float v[NR];
      _mm512_storeu_ps(v, _mm512_mul_ps(va, acc[i][0]));
      _mm512_storeu_ps(v + 16, _mm512_mul_ps(va, acc[i][1]));
      finish_row(out, r0 + i, c0, v, n);
    }
    return;
  }
  float beta = out->beta, *C = (float *)out->C + r0 * out->ldc + c0;
  int64_t ldc = out->ldc;
  __m512 vb = _mm512_set1_ps(beta);
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

/* The tiles of C for panels [p0, p1) and row blocks [q0, q1). */
typedef struct tiles {
  const uint32_t *Ap, *Bp;
  int64_t sa, sk, KP, M, N, p0, p1, q0, q1;
  float alpha;
  const fsB_out *out;
} tiles;

static void run_tiles(const tiles *t) {
  for (int64_t p = t->p0; p < t->p1; p++) /* a B panel stays in cache across the row blocks */
    for (int64_t q = t->q0; q < t->q1; q++) {
      int64_t m = t->M - q * MR < MR ? t->M - q * MR : MR, n = t->N - p * NR < NR ? t->N - p * NR : NR;
      tile(t->Ap + q * MR * t->sa, t->sa, t->sk, t->KP, t->Bp + p * t->KP * NR, t->alpha, t->out,
           q * MR, p * NR, m, n);
    }
}

/* part t of the tiles job[] (fsB_parallel) */
static int run_tiles_part(void *job, int t, int worker) {
  (void)worker;
  run_tiles((tiles *)job + t);
  return 0;
}

/* The packing of a product in `parts` shares: op(A)'s row blocks (pairs
 * of A's rows when A is transposed) and op(B)'s panels. */
typedef struct packing {
  fsB_mat A, B;
  bool ta, tb;
  int64_t M, N, K, KP, Mp, Np;
  uint32_t *Ap, *Bp, *Bt;
  bool a_in_place; /* Ap is A itself */
  int parts;
} packing;

/* X from row r on (even, for pairs) */
static fsB_mat rows_from(fsB_mat X, int64_t r) {
  size_t row = X.pairs ? sizeof(uint32_t) / 2 : X.bf16 ? sizeof(uint16_t) : sizeof(float);
  return (fsB_mat){(const char *)X.p + r * X.ld * row, X.bf16, X.ld, X.pairs};
}

/* X from column c on */
static fsB_mat cols_from(fsB_mat X, int64_t c) {
  return (fsB_mat){(const char *)X.p + c * (X.bf16 ? sizeof(uint16_t) : sizeof(float)), X.bf16, X.ld, false};
}

enum { PACK_PAIRS = 8 };

static int64_t clamp0(int64_t v, int64_t hi) { return v < 0 ? 0 : v > hi ? hi : v; }

/* share `part` of the packing (fsB_parallel); the shares write disjoint
 * parts of Ap, Bt and Bp, so the packed bytes are those of one share */
static int pack_part(void *ctx, int part, int worker) {
  (void)worker;
  const packing *k = ctx;
  int64_t KP = k->KP;
  if (k->ta && !k->a_in_place) { /* pairs of rows [kp0, kp1) */
    int64_t kp0 = KP * part / k->parts, kp1 = KP * (part + 1) / k->parts;
    pairs_across(k->Ap + kp0 * k->Mp, k->Mp, kp1 - kp0, rows_from(k->A, 2 * kp0), k->M, k->K - 2 * kp0);
  } else if (!k->a_in_place) { /* row blocks [r0, r1) */
    int64_t MB = k->Mp / MR, r0 = MB * part / k->parts * MR, r1 = MB * (part + 1) / k->parts * MR;
    pairs_along(k->Ap + r0 * KP, r1 - r0, KP, rows_from(k->A, r0), clamp0(k->M - r0, r1 - r0), k->K);
  }
  int64_t NB = k->Np / NR, p0 = NB * part / k->parts, p1 = NB * (part + 1) / k->parts;
  if (k->tb) {
    uint32_t *Bt = k->Bt + p0 * NR * KP;
    pairs_along(Bt, (p1 - p0) * NR, KP, rows_from(k->B, p0 * NR), clamp0(k->N - p0 * NR, (p1 - p0) * NR), k->K);
    panels_of_rows(k->Bp + p0 * KP * NR, Bt, (p1 - p0) * NR, KP);
  } else { /* a panel is pairs_across NR columns wide; PACK_PAIRS pairs of B's
            * rows at a time, so that they stay in L1 across the panels */
    for (int64_t kb = 0; kb < KP; kb += PACK_PAIRS) {
      int64_t kn = KP - kb < PACK_PAIRS ? KP - kb : PACK_PAIRS;
      for (int64_t p = p0; p < p1; p++)
        pairs_across(k->Bp + (p * KP + kb) * NR, NR, kn, rows_from(cols_from(k->B, p * NR), 2 * kb),
                     k->N - p * NR < NR ? k->N - p * NR : NR, k->K - 2 * kb);
    }
  }
  return 0;
}

static void release_packs(const fsB_backend *cpu, uint32_t *Ap, size_t abytes, uint32_t *Bp, uint32_t *Bt,
                          size_t bbytes) {
  if (Ap && abytes) cpu->free(Ap, abytes);
  if (Bp) cpu->free(Bp, bbytes);
  if (Bt) cpu->free(Bt, bbytes);
}

/* packs of small products (an attention head's: 3,072 products a GPT
 * step) are carved from this much stack instead: malloc and free, three
 * each per product, cost about as much as their tiles */
enum { STACK_PACK_WORDS = 4096 };

static int gemm_native(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, fsB_mat A, fsB_mat B,
                       const fsB_out *out) {
  int64_t KP = (K + 1) / 2, KPa = KP ? KP : 1, Mp = (M + MR - 1) / MR * MR, Np = (N + NR - 1) / NR * NR;
  /* op(A) as pairs (k, k+1) of bfloat16 in a uint32: along A's rows when A
   * is not transposed, across them when it is; op(B) as panels of NR
   * columns, Bp[p][kp][j], made across B's rows, or along them (as op(B)'s
   * columns, Bt) and transposed */
  /* from the cpu backend's allocator, which keeps freed blocks for reuse by
   * size: the same products recur every step, and fresh memory from malloc
   * (mmap'ed at these sizes) faulted in page by page took longer than the
   * product itself */
  /* a bfloat16 A that is its packing already, in whole row blocks and
   * 4-byte aligned, is read in place (abytes 0): a transposed A given as
   * pairs of rows, or an untransposed one whose rows are pairs (K and ld
   * even) */
  bool a_in_place = (ta ? A.pairs : A.bf16 && K % 2 == 0 && A.ld % 2 == 0) && M % MR == 0 && (uintptr_t)A.p % 4 == 0;
  const fsB_backend *cpu = fsB_get(FS_DEV_CPU);
  size_t abytes = a_in_place ? 0 : (size_t)(Mp * KPa) * sizeof(uint32_t), bbytes = (size_t)(Np * KPa) * sizeof(uint32_t);
  _Alignas(64) uint32_t stack[STACK_PACK_WORDS];
  bool small = abytes + (tb ? 2 : 1) * bbytes <= sizeof stack;
  uint32_t *Ap, *Bp, *Bt;
  if (small) {
    Ap = stack;
    Bp = stack + abytes / sizeof *stack;
    Bt = tb ? Bp + bbytes / sizeof *Bp : NULL;
  } else {
    Ap = abytes ? cpu->alloc(abytes) : NULL;
    Bp = cpu->alloc(bbytes);
    Bt = tb ? cpu->alloc(bbytes) : NULL;
    if ((abytes && !Ap) || !Bp || (tb && !Bt)) {
      release_packs(cpu, Ap, abytes, Bp, Bt, bbytes);
      fsT_seterr("out of memory packing a %lldx%lldx%lld bfloat16 GEMM", (long long)M, (long long)N,
                 (long long)K);
      return -1;
    }
  }
  if (a_in_place) Ap = (uint32_t *)A.p;
  /* threads split the panels (or the row blocks when there are fewer
   * panels than threads), and before that the packing; small products stay
   * on this thread.  Each element of C is one tile's sum over all of K
   * whichever thread computes it, so the split changes no bits. */
  int64_t NB = Np / NR, MB = Mp / MR;
  int nt = fsB_threads();
  if ((double)M * (double)N * (double)K < 4e6) nt = 1;
  bool by_panel = NB >= nt;
  int64_t parts = by_panel ? NB : MB;
  if (nt > parts) nt = (int)parts;
  packing pk = {A, B, ta, tb, M, N, K, KP, Mp, Np, Ap, Bp, Bt, a_in_place, nt};
  fsB_parallel(nt, pack_part, &pk);
  int64_t sa = ta ? 1 : a_in_place ? A.ld / 2 : KP, sk = !ta ? 1 : a_in_place ? A.ld : Mp;
  tiles job[FSB_MAX_THREADS];
  for (int t = 0; t < nt; t++) {
    int64_t lo = parts * t / nt, hi = parts * (t + 1) / nt;
    job[t] = (tiles){Ap, Bp, sa, sk, KP, M, N, by_panel ? lo : 0, by_panel ? hi : NB, by_panel ? 0 : lo,
                     by_panel ? MB : hi, alpha, out};
  }
  fsB_parallel(nt, run_tiles_part, job);
  if (!small) release_packs(cpu, Ap, abytes, Bp, Bt, bbytes);
  return 0;
}

#endif

/* Without AVX-512 BF16 (not built with it, or a CPU without it: another
 * machine, valgrind's), and for float16: rounded float32 copies through
 * sgemm (a product of two float16 or bfloat16 values is exact in float32). */

/* op(X)[r, c] of a row-major X (pairs: little-endian halves) */
static inline float elem(fsB_mat X, bool trans, int64_t r, int64_t c) {
  int64_t row = trans ? c : r, col = trans ? r : c;
  int64_t i = X.pairs ? (row / 2 * X.ld + col) * 2 + row % 2 : row * X.ld + col;
  return X.bf16 ? fsT_bf16_to_f32(((const uint16_t *)X.p)[i]) : ((const float *)X.p)[i];
}

/* op(X) [R, Ccols] rounded to dt's precision, untransposed, row-major */
static float *rounded(fs_dtype dt, fsB_mat X, bool trans, int64_t R, int64_t Cc) {
  float *Y = malloc((size_t)(R * Cc > 0 ? R * Cc : 1) * sizeof *Y);
  if (!Y) return NULL;
  if (!X.bf16 && !trans) /* float32 rows (every float16 operand): copied whole */
    for (int64_t r = 0; r < R; r++) memcpy(Y + r * Cc, (const float *)X.p + r * X.ld, (size_t)Cc * sizeof *Y);
  else
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < Cc; c++) Y[r * Cc + c] = elem(X, trans, r, c);
  fsT_round_array(dt, Y, (size_t)(R * Cc));
  return Y;
}

/* the float32 product, then its finish row by row (finish_row: bfloat16's;
 * float16 only stores, FSB_STORE) */
static int gemm_rounded(fs_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, fsB_mat A,
                        fsB_mat B, const fsB_out *out) {
  float *Ar = rounded(dt, A, ta, M, K), *Br = Ar ? rounded(dt, B, tb, K, N) : NULL;
  float *P = Br && out->how != FSB_STORE ? malloc((size_t)(M * N) * sizeof *P) : NULL;
  int rc = -1;
  if (!Br || (out->how != FSB_STORE && !P))
    fsT_seterr("out of memory rounding a %lldx%lldx%lld %s GEMM", (long long)M, (long long)N, (long long)K,
               fsT_dtype_name(dt));
  else if (out->how == FSB_STORE)
    rc = fsB_sgemm_f32(false, false, M, N, K, alpha, Ar, K, Br, N, out->beta, out->C, out->ldc);
  else if ((rc = fsB_sgemm_f32(false, false, M, N, K, alpha, Ar, K, Br, N, 0.0f, P, N)) == 0)
    for (int64_t r = 0; r < M; r++) finish_row(out, r, 0, P + r * N, N);
  free(Ar);
  free(Br);
  free(P);
  return rc;
}

int fsB_gemm_bf16o(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, fsB_mat A, fsB_mat B,
                   fsB_out out) {
  if (M == 0 || N == 0) return 0;
#if defined(FS_NATIVE_BF16) && defined(__x86_64__) && defined(__GNUC__)
  /* configure chose the instructions for the CPU it ran on; the CPU running
   * the binary decides whether they are there */
  if (__builtin_cpu_supports("avx512bf16")) return gemm_native(ta, tb, M, N, K, alpha, A, B, &out);
#endif
  return gemm_rounded(FS_BF16, ta, tb, M, N, K, alpha, A, B, &out);
}

int fsB_gemm_bf16x(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, fsB_mat A, fsB_mat B,
                   float beta, float *C, int64_t ldc) {
  return fsB_gemm_bf16o(ta, tb, M, N, K, alpha, A, B, (fsB_out){FSB_STORE, C, ldc, beta, NULL});
}

int fsB_gemm_low(fs_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb,
                 float beta, float *C, int64_t ldc) {
  fsB_mat a = {A, false, lda, false}, b = {B, false, ldb, false};
  if (dt == FS_BF16) return fsB_gemm_bf16x(ta, tb, M, N, K, alpha, a, b, beta, C, ldc);
  if (K == 0) return fsB_sgemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); /* reads neither */
  if (M == 0 || N == 0) return 0;
  return gemm_rounded(dt, ta, tb, M, N, K, alpha, a, b, &(fsB_out){FSB_STORE, C, ldc, beta, NULL});
}
