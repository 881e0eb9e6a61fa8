/* test_rt_precision.c -- low-precision types (runtime/tensor/precision.c,
 * gemm_bf16.c): conversions round to nearest even as torch's, the bfloat16
 * GEMM equals float32 products of rounded operands for every transpose and
 * ragged size and its finishes equal that product rounded and added
 * afterwards, ops promote and round as torch, gradients reach bfloat16
 * leaves rounded and in their type, and autocast picks the op's type; the
 * elementwise ops that read and write the low types directly equal the
 * float32 op rounded once, forward and backward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "autograd_int.h"
#include "blas.h"
#include "loss.h"
#include "nn.h"
#include "ops.h"
#include "rt_testutil.h"

static float bits_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_rounding(void **state) {
  (void)state;
  /* ties to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 */
  assert_int_equal(fsT_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  assert_int_equal(fsT_f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);
  assert_true(fsT_round_to(FS_BF16, 1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  assert_true(fsT_round_to(FS_F16, 1.0f + 0x1p-11f) == 1.0f);       /* tie to even */
  assert_true(fsT_round_to(FS_F16, 70000.0f) == INFINITY);         /* past float16's range */
  assert_true(fsT_f16_to_f32(fsT_f32_to_f16(0x1p-24f)) == 0x1p-24f); /* subnormal */
  float x[5] = {1.0f + 0x1p-8f, -3.14159f, bits_f(0x7fc00001u), INFINITY, 0.0f};
  fsT_round_array(FS_BF16, x, 5);
  assert_true(x[0] == 1.0f && x[1] == fsT_bf16_to_f32(fsT_f32_to_bf16(-3.14159f)));
  assert_true(isnan(x[2]) && x[3] == INFINITY && x[4] == 0.0f);
  /* the vectorized conversion agrees with the scalar one on every bf16 neighbourhood */
  enum { N = 4096 };
  float src[N];
  uint16_t fast[N];
  for (int i = 0; i < N; i++) src[i] = bits_f(0x3f800000u + (uint32_t)i * 0x1357u);
  fsT_convert(FS_BF16, fast, FS_F32, src, N);
  for (int i = 0; i < N; i++) assert_int_equal(fast[i], fsT_f32_to_bf16(src[i]));
}

/* The float16 conversions are integer arithmetic (tensor.h); the compiler's
 * _Float16 casts are IEEE's and are the reference, bit for bit: every float16
 * widened, and narrowed from each rounding boundary (the midpoint between two
 * neighbours and the floats either side of it), from specials and from a
 * stride through all float32 bit patterns; the vectorized fsT_convert gives
 * the scalar results. */
static uint16_t f16_ref(float f) {
  _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}

static void check_narrow(uint32_t u) {
  float f = bits_f(u);
  uint16_t got = fsT_f32_to_f16(f), want = f16_ref(f);
  if (got != want) fail_msg("float16 of float32 0x%08x: 0x%04x, the cast gives 0x%04x", u, got, want);
}

static void test_f16_conversion(void **state) {
  (void)state;
  enum { N = 65536 };
  static uint16_t h[N];
  static float wide[N];
  for (uint32_t i = 0; i < N; i++) h[i] = (uint16_t)i;
  fsT_convert(FS_F32, wide, FS_F16, h, N);
  for (uint32_t i = 0; i < N; i++) {
    _Float16 r;
    memcpy(&r, &h[i], 2);
    float want = (float)r, got = fsT_f16_to_f32(h[i]);
    if (memcmp(&got, &want, 4) || memcmp(&wide[i], &want, 4))
      fail_msg("float32 of float16 0x%04x: %a (convert %a), the cast gives %a", i, got, wide[i], want);
    /* a finite positive float16 and its successor: their midpoint, +-1 ulp */
    if (i < 0x7c00) {
      uint32_t lo, hi;
      float a = (float)r, b = fsT_f16_to_f32((uint16_t)(i + 1)), mid = a + (b - a) / 2;
      memcpy(&lo, &mid, 4);
      for (uint32_t d = 0; d < 3; d++) {
        hi = lo - 1 + d;
        check_narrow(hi);
        check_narrow(hi | 0x80000000u);
      }
    }
  }
  static const uint32_t specials[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                      0x7f800001u, 0xffc12345u, 0x7fffffffu, 0x00000001u, 0x477fe000u,
                                      0x477fefffu, 0x477ff000u, 0x33000000u, 0x33000001u};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) check_narrow(specials[i]);
  static float src[4096];
  static uint16_t fast[4096];
  for (uint32_t base = 0; base < 0xfffff000u; base += 4096u * 0x1001u) {
    for (uint32_t i = 0; i < 4096; i++) src[i] = bits_f(base + i * 0x1001u);
    fsT_convert(FS_F16, fast, FS_F32, src, 4096);
    for (uint32_t i = 0; i < 4096; i++) {
      check_narrow(base + i * 0x1001u);
      if (fast[i] != fsT_f32_to_f16(src[i])) fail_msg("fsT_convert to float16 of 0x%08x", base + i * 0x1001u);
    }
  }
}

/* fsB_gemm_low (and fsB_gemm_bf16x on bfloat16 storage) against sgemm of
 * the rounded operands, all four transposes, sizes that are not multiples
 * of the tile and ones whose bfloat16 A is read in place (64x64x32
 * packed on the stack, 40x64x300 not), beta 0 and 1; float16's is that
 * very sgemm (its bits). */
static void test_gemm_bf16(void **state) {
  (void)state;
  /* the last is large enough to be split across threads */
  static const int64_t sizes[][3] = {{1, 1, 1}, {7, 45, 3}, {33, 17, 9}, {64, 64, 32},
                                     {9, 70, 130}, {40, 64, 300}, {130, 200, 170}};
  for (int d = 0; d < 2; d++)
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int t = 0; t < 4; t++)
      for (int b = 0; b < 2; b++) {
        fs_dtype dt = d ? FS_F16 : FS_BF16;
        int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
        bool ta = t & 1, tb = t & 2;
        int64_t as[2] = {M, K}, bs[2] = {K, N}, cs[2] = {M, N};
        fs_tensor *A = rt_rand("A", -1, 1, 2, as), *B = rt_rand("B", -1, 1, 2, bs);
        fs_tensor *C0 = rt_rand("C", -1, 1, 2, cs), *C1 = fsT_copy(C0);
        fs_tensor *Ar = fsT_copy(A), *Br = fsT_copy(B);
        fsT_round_array(dt, fsT_f32(Ar), (size_t)Ar->numel);
        fsT_round_array(dt, fsT_f32(Br), (size_t)Br->numel);
        /* the same values, laid out as op() expects: a transposed operand is
         * stored [K, M] / [N, K] */
        fs_tensor *At = fsT_new(FS_F32, FS_DEV_CPU, 2, (int64_t[]){K, M});
        fs_tensor *Bt = fsT_new(FS_F32, FS_DEV_CPU, 2, (int64_t[]){N, K});
        for (int64_t i = 0; i < M; i++)
          for (int64_t k = 0; k < K; k++) fsT_f32(At)[k * M + i] = fsT_f32(A)[i * K + k];
        for (int64_t k = 0; k < K; k++)
          for (int64_t j = 0; j < N; j++) fsT_f32(Bt)[j * K + k] = fsT_f32(B)[k * N + j];
        float beta = (float)b;
        assert_int_equal(fsB_sgemm_f32(false, false, M, N, K, 0.5f, fsT_f32(Ar), K, fsT_f32(Br), N, beta,
                                       fsT_f32(C0), N), 0);
        assert_int_equal(fsB_gemm_low(dt, ta, tb, M, N, K, 0.5f, fsT_f32(ta ? At : A), ta ? M : K,
                                      fsT_f32(tb ? Bt : B), tb ? K : N, beta, fsT_f32(C1), N), 0);
        for (int64_t i = 0; i < M * N; i++) /* float32 sums of exact products: order only */
          assert_true(fabsf(fsT_f32(C0)[i] - fsT_f32(C1)[i]) <= 1e-5f * (float)K);
        if (dt == FS_F16) {
          assert_memory_equal(fsT_f32(C1), fsT_f32(C0), (size_t)(M * N) * sizeof(float));
          fs_tensor *f16[] = {A, B, C0, C1, Ar, Br, At, Bt};
          for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++) fsT_release(f16[i]);
          continue;
        }
        /* operands stored as bfloat16 (A always, B in every other case) give the same */
        bool b16 = (t + b) % 2 == 0;
        fs_tensor *A16 = fsT_to_dtype(ta ? At : A, FS_BF16), *B16 = fsT_to_dtype(tb ? Bt : B, FS_BF16);
        fs_tensor *C2 = rt_rand("C", -1, 1, 2, cs), *C3 = fsT_copy(C2);
        fsB_mat am = {A16->data, true, ta ? M : K, false},
                bm = {b16 ? B16->data : fsT_f32(tb ? Bt : B), b16, tb ? K : N, false};
        assert_int_equal(fsB_gemm_bf16x(ta, tb, M, N, K, 0.5f, am, bm, beta, fsT_f32(C2), N), 0);
        for (int64_t i = 0; i < M * N; i++)
          assert_true(fabsf(fsT_f32(C0)[i] - fsT_f32(C2)[i]) <= 1e-5f * (float)K);
        if (ta) { /* a transposed A given as pairs of its rows: the same bits */
          uint32_t *pairs = calloc((size_t)((K + 1) / 2 * M), sizeof *pairs);
          assert_non_null(pairs);
          for (int64_t k = 0; k < K; k++)
            for (int64_t i = 0; i < M; i++)
              pairs[k / 2 * M + i] |= (uint32_t)((const uint16_t *)A16->data)[k * M + i] << (k % 2 * 16);
          assert_int_equal(fsB_gemm_bf16x(ta, tb, M, N, K, 0.5f, (fsB_mat){pairs, true, M, true}, bm, beta,
                                          fsT_f32(C3), N), 0);
          assert_memory_equal(fsT_f32(C3), fsT_f32(C2), (size_t)(M * N) * sizeof(float));
          free(pairs);
        }
        fs_tensor *all[] = {A, B, C0, C1, Ar, Br, At, Bt, A16, B16, C2, C3};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fsT_release(all[i]);
      }
}

/* fsB_gemm_bf16o's finishes equal the float32 product (fsB_gemm_bf16x)
 * rounded and added afterwards, bit for bit: the bias rounded, added and
 * the sum stored as bfloat16; the product rounded then added to C; C plus
 * the rounded product, rounded (fsG_low_grad_add's rule); with beta 0, C
 * unread. */
static void test_gemm_bf16_finish(void **state) {
  (void)state;
  static const int64_t sizes[][3] = {{1, 1, 1}, {9, 70, 33}, {130, 200, 170}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int t = 0; t < 4; t++) {
      int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
      bool ta = t & 1, tb = t & 2;
      int64_t as[2] = {ta ? K : M, ta ? M : K}, bs[2] = {tb ? N : K, tb ? K : N}, cs[2] = {M, N};
      fs_tensor *A = rt_rand("A", -1, 1, 2, as), *B = rt_rand("B", -1, 1, 2, bs), *bias = rt_rand("b", -1, 1, 1, &N);
      fs_tensor *P = fsT_new(FS_F32, FS_DEV_CPU, 2, cs), *C0 = rt_rand("C", -1, 1, 2, cs), *C1 = fsT_copy(C0);
      fs_tensor *Y = fsT_new(FS_BF16, FS_DEV_CPU, 2, cs);
      fsB_mat am = {fsT_f32(A), false, as[1], false}, bm = {fsT_f32(B), false, bs[1], false};
      assert_int_equal(fsB_gemm_bf16x(ta, tb, M, N, K, 0.5f, am, bm, 0.0f, fsT_f32(P), N), 0);
      assert_int_equal(fsB_gemm_bf16o(ta, tb, M, N, K, 0.5f, am, bm, (fsB_out){FSB_BF16_BIAS, Y->data, N, 0, fsT_f32(bias)}), 0);
      for (int64_t i = 0; i < M * N; i++)
        assert_int_equal(((uint16_t *)Y->data)[i],
                         fsT_f32_to_bf16(fsT_f32(P)[i] + fsT_round_to(FS_BF16, fsT_f32(bias)[i % N])));
      assert_int_equal(fsB_gemm_bf16o(ta, tb, M, N, K, 0.5f, am, bm, (fsB_out){FSB_ADD_ROUNDED, fsT_f32(C1), N, 1, NULL}), 0);
      for (int64_t i = 0; i < M * N; i++)
        assert_true(fsT_f32(C1)[i] == fsT_f32(C0)[i] + fsT_round_to(FS_BF16, fsT_f32(P)[i]));
      memcpy(fsT_f32(C1), fsT_f32(C0), (size_t)(M * N) * sizeof(float));
      assert_int_equal(fsB_gemm_bf16o(ta, tb, M, N, K, 0.5f, am, bm, (fsB_out){FSB_ROUNDED_SUM, fsT_f32(C1), N, 1, NULL}), 0);
      for (int64_t i = 0; i < M * N; i++)
        assert_true(fsT_f32(C1)[i] ==
                    fsT_round_to(FS_BF16, fsT_f32(C0)[i] + fsT_round_to(FS_BF16, fsT_f32(P)[i])));
      /* beta 0: C taken as zeros, not read (NaN here) */
      for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < M * N; i++) fsT_f32(C1)[i] = NAN;
        fsB_finish how = k ? FSB_ROUNDED_SUM : FSB_ADD_ROUNDED;
        assert_int_equal(fsB_gemm_bf16o(ta, tb, M, N, K, 0.5f, am, bm, (fsB_out){how, fsT_f32(C1), N, 0, NULL}), 0);
        for (int64_t i = 0; i < M * N; i++)
          assert_true(fsT_f32(C1)[i] == fsT_round_to(FS_BF16, fsT_f32(P)[i]));
      }
      fs_tensor *all[] = {A, B, bias, P, C0, C1, Y};
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fsT_release(all[i]);
    }
}

/* bf16 op bf16 stays bf16 and rounds once; a float32 tensor with dims
 * promotes to float32; a 0-dim float32 (a Python scalar) does not. */
static void test_promotion(void **state) {
  (void)state;
  int64_t n = 4;
  fs_tensor *x = rt_rand("x", -2, 2, 1, &n), *a = rt_ok(fsG_cast(x, FS_BF16));
  fs_tensor *s = fsT_scalar(0.1f);
  fs_tensor *y = rt_ok(fsG_binary(FSB_MUL, a, s)), *z = rt_ok(fsG_binary(FSB_ADD, a, x));
  assert_int_equal(y->dtype, FS_BF16);
  assert_int_equal(z->dtype, FS_F32);
  for (int64_t i = 0; i < n; i++) {
    float av = fsT_bf16_to_f32(((uint16_t *)a->data)[i]);
    assert_true(fsT_get(y, i) == fsT_round_to(FS_BF16, av * 0.1f));
    assert_true(fsT_get(z, i) == av + fsT_f32(x)[i]);
  }
  fs_tensor *all[] = {x, a, s, y, z};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fsT_release(all[i]);
}

/* A bfloat16 leaf used twice: its gradient is the rounded sum, stored in
 * bfloat16; the float32 leaf it came from gets the rounded gradient too. */
static void test_low_grads(void **state) {
  (void)state;
  int64_t n = 64;
  fs_tensor *w = rt_rand("w", -1, 1, 1, &n), *w16 = fsT_copy(w);
  assert_int_equal(fsT_set_dtype(w16, FS_BF16), 0);
  w16->requires_grad = true;
  fs_tensor *u = rt_rand("u", -1, 1, 1, &n), *v = rt_rand("v", -1, 1, 1, &n);
  fs_tensor *p = rt_ok(fsG_binary(FSB_MUL, w16, u)), *q = rt_ok(fsG_binary(FSB_MUL, w16, v));
  fs_tensor *r = rt_ok(fsG_binary(FSB_ADD, p, q)), *loss = rt_ok(fsG_sum(r));
  assert_int_equal(fsG_backward(loss), 0);
  assert_non_null(w16->grad);
  assert_int_equal(w16->grad->dtype, FS_BF16);
  for (int64_t i = 0; i < n; i++) /* u and v reach w16 as rounded float32 sums */
    assert_true(fabs(fsT_get(w16->grad, i) - (fsT_f32(u)[i] + fsT_f32(v)[i])) <=
                (fabs(fsT_f32(u)[i]) + fabs(fsT_f32(v)[i])) * 0x1p-7);
  fs_tensor *all[] = {w, w16, u, v, p, q, r, loss};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fsT_release(all[i]);
}

/* GELU (both forms) of a bfloat16 tensor, forward and backward, gives the
 * float32 kernels' bits for every one of the 65536 bfloat16 values (the
 * cpu path looks them up in tables those kernels filled). */
static void test_act_bf16(void **state) {
  (void)state;
  int64_t n = 65536;
  fs_tensor *xf = fsT_new(FS_F32, FS_DEV_CPU, 1, &n), *u = rt_rand("u", -2, 2, 1, &n);
  for (int64_t i = 0; i < n; i++) {
    uint32_t bits = (uint32_t)i << 16;
    memcpy(fsT_f32(xf) + i, &bits, sizeof bits);
  }
  for (int k = 0; k < 2; k++) {
    fsN_act act = k ? FSN_GELU_TANH : FSN_GELU;
    fs_tensor *x = fsT_copy(xf);
    assert_int_equal(fsT_set_dtype(x, FS_BF16), 0);
    x->requires_grad = true;
    fs_tensor *y = rt_ok(fsG_act(act, x)), *yu = rt_ok(fsG_binary(FSB_MUL, y, u)), *l = rt_ok(fsG_sum(yu));
    assert_int_equal(y->dtype, FS_BF16);
    assert_int_equal(fsG_backward(l), 0);
    for (int64_t i = 0; i < n; i++) {
      float xi = fsT_f32(xf)[i], want, dout = fsT_round_to(FS_BF16, fsT_f32(u)[i]), dwant = 0;
      fsN_act_forward(act, &want, &xi, 1);
      fsN_act_backward(act, &dwant, &dout, &xi, NULL, 1);
      double got = fsT_get(y, i), dgot = fsT_get(x->grad, i);
      want = fsT_round_to(FS_BF16, want);
      dwant = fsT_round_to(FS_BF16, dwant);
      assert_true(isnan(want) ? isnan(got) : got == want);
      assert_true(isnan(dwant) ? isnan(dgot) : dgot == dwant);
    }
    fs_tensor *all[] = {x, y, yu, l};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fsT_release(all[i]);
  }
  fsT_release(xf);
  fsT_release(u);
}

/* Under autocast a linear layer computes in bfloat16, its result rounds
 * once, and its weight's gradient comes back float32. */
static void test_autocast(void **state) {
  (void)state;
  int64_t xs[2] = {3, 5}, ws[2] = {4, 5};
  fs_tensor *x = rt_rand("x", -1, 1, 2, xs), *W = rt_rand("W", -1, 1, 2, ws);
  W->requires_grad = true;
  fs_dtype old = fsG_set_autocast(FS_BF16);
  fs_tensor *y = rt_ok(fsG_linear(x, W, NULL));
  fs_tensor *l = rt_ok(fsG_mse_loss(y, y));
  fsG_set_autocast(old);
  assert_int_equal(y->dtype, FS_BF16);
  assert_int_equal(l->dtype, FS_F32); /* a loss: float32 under autocast */
  for (int64_t i = 0; i < 3; i++)
    for (int64_t o = 0; o < 4; o++) {
      float acc = 0;
      for (int64_t c = 0; c < 5; c++)
        acc += fsT_round_to(FS_BF16, fsT_f32(x)[i * 5 + c]) * fsT_round_to(FS_BF16, fsT_f32(W)[o * 5 + c]);
      assert_true(fabsf((float)fsT_get(y, i * 4 + o) - fsT_round_to(FS_BF16, acc)) <= fabsf(acc) * 0x1p-7f);
    }
  fs_tensor *s = rt_ok(fsG_sum(y)), *sf = rt_ok(fsG_cast(s, FS_F32));
  assert_int_equal(fsG_backward(sf), 0);
  assert_int_equal(W->grad->dtype, FS_F32);
  fs_tensor *all[] = {x, W, y, l, s, sf};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fsT_release(all[i]);
}

/* ---- elementwise ops that load and store bfloat16/float16 themselves ----
 * Each is compared with its reference: the float32 op on the widened
 * values, rounded once (and for gradients: the float32 backward with the
 * rounded incoming gradient, rounded), on sizes around the block of 1024
 * and with NaN, infinities, signed zeros, the largest floats and a
 * subnormal among the inputs. */

static const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3e38f, -3e38f, 1e-40f, 1.0f, -2.5f};

/* A low leaf (requires grad) from float32 values with k of the specials first
 * (all of them when k is larger), and the same rounded values as a float32
 * leaf. */
static void low_pair_k(fs_dtype dt, int rank, const int64_t *shape, const char *seed, float lo, int64_t k,
                       fs_tensor **low, fs_tensor **wide) {
  fs_tensor *x = rt_rand(seed, lo, lo + 4, rank, shape);
  int64_t n = x->numel;
  int64_t ns = (int64_t)(sizeof specials / sizeof *specials);
  for (int64_t i = 0; i < n && i < k && i < ns; i++)
    fsT_f32(x)[(i * 7 + 3) % n] = specials[i];
  *low = fsT_copy(x);
  assert_int_equal(fsT_set_dtype(*low, dt), 0);
  *wide = rt_ok(fsT_to_dtype(*low, FS_F32));
  (*low)->requires_grad = (*wide)->requires_grad = true;
  fsT_release(x);
}

static void low_pair(fs_dtype dt, int rank, const int64_t *shape, const char *seed, float lo, fs_tensor **low,
                     fs_tensor **wide) {
  low_pair_k(dt, rank, shape, seed, lo, (int64_t)(sizeof specials / sizeof *specials), low, wide);
}

/* The same values: both NaN, or equal bits. */
static void assert_same(const fs_tensor *got, const float *want, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float g = (float)fsT_get(got, i), w = want[i];
    if (isnan(g) || isnan(w)) assert_true(isnan(g) && isnan(w));
    else assert_memory_equal(&g, &w, sizeof g);
  }
}

/* y's float32 values rounded to dt (a new float32 tensor). */
static fs_tensor *rounded(const fs_tensor *y, fs_dtype dt) {
  fs_tensor *r = rt_ok(fsT_copy(y));
  fsT_round_array(dt, fsT_f32(r), (size_t)r->numel);
  return r;
}

/* loss = sum(y.float() * w): y's incoming gradient is w rounded to its type. */
static void backward_weighted(fs_tensor *y, const fs_tensor *w) {
  fs_tensor *yf = rt_ok(fsG_cast(y, FS_F32)), *p = rt_ok(fsG_binary(FSB_MUL, yf, (fs_tensor *)w));
  fs_tensor *l = rt_ok(fsG_sum(p));
  assert_int_equal(fsG_backward(l), 0);
  fsT_release(yf);
  fsT_release(p);
  fsT_release(l);
}

/* x (a low leaf) got the reference gradient: ref's float32 gradient rounded
 * and added to a zeroed buffer (so a -0 contribution gives +0, as main's
 * cast nodes gave). */
static void assert_grad(const fs_tensor *x, const fs_tensor *ref, fs_dtype dt) {
  if (!ref->grad) {
    assert_null(x->grad);
    return;
  }
  assert_non_null(x->grad);
  assert_int_equal(x->grad->dtype, dt);
  fs_tensor *r = rounded(ref->grad, dt);
  for (int64_t i = 0; i < r->numel; i++) fsT_f32(r)[i] += 0.0f;
  assert_same(x->grad, fsT_f32(r), r->numel);
  fsT_release(r);
}

/* out, a low op's result, against ref, the float32 op on the widened
 * inputs, rounded to dt (out's type); then each's backward with the same
 * weights (ref's rounded as out's gradient is), and the gradient of each
 * input x[i] (a low leaf, or a float32 one) against its widened xw[i]'s.
 * Releases out, ref and the n pairs. */
static void check_low(fs_tensor *out, fs_tensor *ref, fs_tensor **x, fs_tensor **xw, fs_dtype dt, int n) {
  assert_int_equal(out->dtype, dt);
  fs_tensor *r = rounded(ref, dt);
  assert_same(out, fsT_f32(r), r->numel);
  fs_tensor *w = rt_rand("w", -1, 1, out->rank, out->shape), *wr = rounded(w, dt);
  backward_weighted(out, w);
  backward_weighted(ref, wr);
  for (int i = 0; i < n; i++) {
    if (fsT_is_low(x[i]->dtype)) assert_grad(x[i], xw[i], x[i]->dtype);
    else assert_same(x[i]->grad, fsT_f32(xw[i]->grad), xw[i]->numel);
    fsT_release(x[i]);
    fsT_release(xw[i]);
  }
  fs_tensor *all[] = {out, ref, r, w, wr};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) fsT_release(all[i]);
}

static void test_low_binary(void **state) {
  (void)state;
  static const int64_t sizes[] = {1, 7, 1023, 1024, 1025, 3001};
  static const fs_dtype types[] = {FS_BF16, FS_F16};
  /* second operand: low, float32 with dims (the result is float32), a
   * 0-dim float32 (a Python scalar: the result keeps the low type), the
   * other low type with dims (float32, as torch promotes bfloat16 and
   * float16) or 0-dim (the result keeps the first's type) */
  enum { LOW, F32, SCALAR, OTHER, OTHER_SCALAR };
  for (size_t t = 0; t < 2; t++)
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
      for (int op = FSB_ADD; op <= FSB_DIV; op++)
        for (int kind = LOW; kind <= OTHER_SCALAR; kind++)
          for (int swap = 0; swap < 2; swap++) {
            fs_dtype dt = types[t];
            int64_t n = sizes[s];
            fs_tensor *a, *aw, *b, *bw;
            low_pair(dt, 1, &n, "a", -2, &a, &aw);
            if (kind == LOW || kind == OTHER) low_pair(kind == LOW ? dt : types[1 - t], 1, &n, "b", 0.25f, &b, &bw);
            else if (kind == OTHER_SCALAR) low_pair_k(types[1 - t], 0, &n, "b", 0.25f, 0, &b, &bw);
            else {
              b = kind == F32 ? rt_rand("b", 0.25f, 4, 1, &n) : fsT_scalar(-1.75f);
              b->requires_grad = kind == F32;
              bw = rt_ok(fsT_copy(b));
              bw->requires_grad = b->requires_grad;
            }
            fs_tensor *x = swap ? b : a, *y = swap ? a : b, *xw = swap ? bw : aw, *yw = swap ? aw : bw;
            fs_tensor *out = rt_ok(fsG_binary((fsB_binop)op, x, y)), *ref = rt_ok(fsG_binary((fsB_binop)op, xw, yw));
            fs_dtype want = kind == F32 || kind == OTHER ? FS_F32 : dt;
            assert_int_equal(out->dtype, want);
            fs_tensor *r = rounded(ref, want);
            assert_same(out, fsT_f32(r), n);
            /* gradients: the reference's incoming gradient is rounded as out's is */
            fs_tensor *w = rt_rand("w", -1, 1, 1, &n), *wr = rounded(w, want);
            backward_weighted(out, w);
            backward_weighted(ref, wr);
            assert_grad(a, aw, dt);
            if (fsT_is_low(b->dtype)) assert_grad(b, bw, b->dtype);
            else if (kind == F32) assert_same(b->grad, fsT_f32(bw->grad), n);
            fs_tensor *all[] = {a, aw, b, bw, out, ref, r, w, wr};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++) fsT_release(all[i]);
          }
}

static void test_low_unary(void **state) {
  (void)state;
  static const int64_t sizes[] = {1, 7, 1023, 1025, 3001};
  static const struct { fsU_unary op; double p0, p1; } ops[] = {
    {FSU_EXP, 0, 0}, {FSU_LOG, 0, 0}, {FSU_SQRT, 0, 0}, {FSU_ABS, 0, 0}, {FSU_TANH, 0, 0},
    {FSU_SIGMOID, 0, 0}, {FSU_POW, 2, 0}, {FSU_CLAMP, -0.5, 0.5}, {FSU_SIN, 0, 0},
  };
  for (int t = 0; t < 2; t++)
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
      for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
        fs_dtype dt = t ? FS_F16 : FS_BF16;
        int64_t n = sizes[s];
        fs_tensor *x, *xw;
        low_pair(dt, 1, &n, "x", -2, &x, &xw);
        fs_tensor *out = rt_ok(fsG_unary(ops[o].op, x, ops[o].p0, ops[o].p1));
        check_low(out, rt_ok(fsG_unary(ops[o].op, xw, ops[o].p0, ops[o].p1)), &x, &xw, dt, 1);
      }
}

/* Two contributions to one low tensor's gradient, in either order, give
 * torch's bfloat16 sum: each rounded, then their sum rounded. */
static void test_low_grad_order(void **state) {
  (void)state;
  int64_t n = 1500;
  fs_tensor *a, *aw;
  low_pair(FS_BF16, 1, &n, "a", -2, &a, &aw);
  fs_tensor *u = rt_rand("u", -1, 1, 1, &n), *v = rt_rand("v", -1, 1, 1, &n);
  /* p = a u is float32 (u has dims) and so is p + q: p's gradient is v, q's v rounded */
  fs_tensor *p = rt_ok(fsG_binary(FSB_MUL, a, u)), *q = rt_ok(fsG_unary(FSU_TANH, a, 0, 0));
  fs_tensor *pq = rt_ok(fsG_binary(FSB_ADD, q, p)); /* q's node runs first in backward */
  backward_weighted(pq, v);
  fs_tensor *vr = rounded(v, FS_BF16), *th = rt_ok(fsG_unary(FSU_TANH, aw, 0, 0)); /* the kernel's float32 tanh */
  float want[1500];
  for (int64_t i = 0; i < n; i++) {
    float y = fsT_f32(th)[i], c1 = fsT_round_to(FS_BF16, fsT_f32(v)[i] * fsT_f32(u)[i]);
    float c2 = fsT_round_to(FS_BF16, fsT_f32(vr)[i] * (1 - y * y));
    want[i] = fsT_round_to(FS_BF16, 0.0f + c1 + c2);
  }
  assert_same(a->grad, want, n);
  fs_tensor *all[] = {a, aw, u, v, p, q, pq, vr, th};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) fsT_release(all[i]);
}

/* cross_entropy on low logits reads them a row at a time: the loss is the
 * float32 path's (float32 under autocast, else rounded to the logits'
 * type) and so is the logits' gradient. */
static void test_low_cross_entropy(void **state) {
  (void)state;
  for (int mode = 0; mode < 3; mode++) { /* bfloat16, bfloat16 under autocast, float16 */
    fs_dtype dt = mode == 2 ? FS_F16 : FS_BF16;
    int64_t N = 37, C = 1029, shape[2] = {N, C};
    fs_tensor *x = rt_rand("x", -4, 4, 2, shape), *t = fsT_new(FS_I64, FS_DEV_CPU, 1, &N);
    for (int64_t i = 0; i < N; i++) fsT_i64(t)[i] = (i * 131) % C;
    fs_tensor *low = fsT_copy(x);
    assert_int_equal(fsT_set_dtype(low, dt), 0);
    fs_tensor *wide = rt_ok(fsT_to_dtype(low, FS_F32));
    low->requires_grad = wide->requires_grad = true;
    fs_dtype old = fsG_set_autocast(mode == 1 ? FS_BF16 : FS_F32);
    fs_tensor *l = rt_ok(fsG_cross_entropy(low, t));
    fsG_set_autocast(old);
    fs_tensor *ref = rt_ok(fsG_cross_entropy(wide, t));
    assert_int_equal(l->dtype, mode == 1 ? FS_F32 : dt);
    float want = fsT_round_to(l->dtype, fsT_f32(ref)[0]);
    assert_same(l, &want, 1);
    fs_tensor *lf = rt_ok(fsG_cast(l, FS_F32));
    assert_int_equal(fsG_backward(lf), 0);
    assert_int_equal(fsG_backward(ref), 0);
    assert_grad(low, wide, dt);
    fs_tensor *all[] = {x, t, low, wide, l, ref, lf};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) fsT_release(all[i]);
  }
}

/* Broadcasting arithmetic and where on low tensors read and write them a
 * chunk at a time: the float32 op rounded once, and a broadcast side's
 * gradient summed in float32 and rounded once (the widened path's bits),
 * for chunks cut across every dim and a float32 side with dims. */
static const struct { int ra, rb; int64_t a[3], b[3]; } bcast_shapes[] = {
  {3, 1, {2, 3, 40}, {40}},   {3, 2, {3, 700, 5}, {700, 1}}, {2, 2, {37, 1}, {37, 60}},
  {2, 2, {50, 1}, {1, 70}},   {2, 1, {4, 1100}, {1100}},     {1, 2, {3001}, {2, 1}},
  {3, 3, {2, 1, 1500}, {1, 3, 1}},
};

static void test_low_bcast(void **state) {
  (void)state;
  for (int t = 0; t < 2; t++)
    for (size_t s = 0; s < sizeof bcast_shapes / sizeof *bcast_shapes; s++)
      for (int op = FSU_ADD; op <= FSU_MINIMUM + 1; op++) /* FSU_MINIMUM + 1: where */
        for (int f32 = 0; f32 < 3; f32++) { /* b: low, float32, the other low type (a float32 result) */
          fs_dtype dt = t ? FS_F16 : FS_BF16;
          fs_tensor *a, *aw, *b, *bw, *cond = NULL, *out, *ref;
          low_pair(dt, bcast_shapes[s].ra, bcast_shapes[s].a, "a", op == FSU_POWT ? 0.25f : -2, &a, &aw);
          if (f32 != 1)
            low_pair(f32 ? (t ? FS_BF16 : FS_F16) : dt, bcast_shapes[s].rb, bcast_shapes[s].b, "b", 0.25f, &b, &bw);
          else {
            b = rt_rand("b", 0.25f, 4, bcast_shapes[s].rb, bcast_shapes[s].b);
            bw = rt_ok(fsT_copy(b));
            b->requires_grad = bw->requires_grad = true;
          }
          if (op > FSU_MINIMUM) {
            cond = fsT_new(FS_I64, FS_DEV_CPU, bcast_shapes[s].ra, bcast_shapes[s].a);
            for (int64_t i = 0; i < cond->numel; i++) fsT_i64(cond)[i] = i % 3 == 0;
            out = rt_ok(fsG_where(cond, a, b));
            ref = rt_ok(fsG_where(cond, aw, bw));
          } else {
            out = rt_ok(fsG_binary_op((fsU_binary)op, a, b));
            ref = rt_ok(fsG_binary_op((fsU_binary)op, aw, bw));
          }
          check_low(out, ref, (fs_tensor *[]){a, b}, (fs_tensor *[]){aw, bw}, f32 ? FS_F32 : dt, 2);
          fsT_release(cond);
        }
}

/* Reductions (whole, over a dim, max/min, logsumexp), cumsum and softmax
 * on low tensors read them a chunk at a time: the float32 kernel's values
 * rounded once.
 * Softmax's backward reads the rounded output (torch's), the others
 * compute what the float32 backward computes; each gradient reaches the
 * low tensor rounded. */
static const struct { int rank; int64_t shape[3]; } red_shapes[] = {
  {2, {37, 1029}}, {3, {5, 300, 3}}, {2, {1, 3001}}, {2, {2000, 1}}, {3, {3, 11, 700}}, {1, {7}},
};

static void test_low_reduce(void **state) {
  (void)state;
  enum { SUM, MEAN, MAX, MIN, SOFTMAX, LOGSOFTMAX, LOGSUMEXP, CUMSUM, KINDS };
  for (int t = 0; t < 2; t++)
    for (size_t s = 0; s < sizeof red_shapes / sizeof *red_shapes; s++)
      for (int dim = -1; dim < red_shapes[s].rank; dim++) /* -1: every element (sum, mean) */
        for (int kind = SUM; kind < KINDS; kind++) {
          if (dim < 0 && kind > MEAN) continue;
          fs_dtype dt = t ? FS_F16 : FS_BF16;
          fs_tensor *x, *xw, *out, *ref, *ix = NULL, *iw = NULL;
          low_pair(dt, red_shapes[s].rank, red_shapes[s].shape, "x", -2, &x, &xw);
          bool keep = (s + (size_t)dim) % 2;
          for (int side = 0; side < 2; side++) {
            fs_tensor *v = side ? xw : x, **o = side ? &ref : &out, **ix_ = side ? &iw : &ix;
            if (dim < 0) *o = rt_ok(kind == SUM ? fsG_sum(v) : fsG_mean(v));
            else if (kind <= MEAN) *o = rt_ok(fsG_sum_dim(v, dim, keep, kind == MEAN));
            else if (kind <= MIN) *o = rt_ok(fsG_extreme(kind == MAX, v, dim, keep, ix_));
            else if (kind == LOGSUMEXP) *o = rt_ok(fsG_logsumexp(v, dim, keep));
            else if (kind == CUMSUM) *o = rt_ok(fsG_cumsum(v, dim));
            else *o = rt_ok(fsG_softmax(v, dim, kind == LOGSOFTMAX));
          }
          assert_int_equal(out->dtype, dt);
          fs_tensor *r = rounded(ref, dt);
          assert_same(out, fsT_f32(r), r->numel);
          if (ix) assert_memory_equal(fsT_i64(ix), fsT_i64(iw), (size_t)ix->numel * sizeof(int64_t));
          fs_tensor *w = rt_rand("w", -1, 1, out->rank, out->shape), *wr = rounded(w, dt);
          backward_weighted(out, w);
          if (kind != SOFTMAX && kind != LOGSOFTMAX) {
            backward_weighted(ref, wr);
            assert_grad(x, xw, dt);
          } else { /* the float32 backward on the rounded output */
            int64_t O, L, I;
            fsG_split_at(x, dim, &O, &L, &I);
            fs_tensor *d = rt_ok(fsT_zeros(FS_F32, FS_DEV_CPU, x->rank, x->shape));
            fsU_cpu.softmax_backward(kind == LOGSOFTMAX, O, L, I, fsT_f32(d), fsT_f32(wr), fsT_f32(r));
            xw->grad = d;
            assert_grad(x, xw, dt);
          }
          fs_tensor *all[] = {x, xw, out, ref, ix, iw, r, w, wr};
          for (size_t i = 0; i < sizeof all / sizeof *all; i++) fsT_release(all[i]);
        }
}

/* Dropout of a low tensor drops the elements the float32 kernel drops
 * (the same key and counters) and rounds the kept ones scaled. */
static void test_low_dropout(void **state) {
  (void)state;
  static const int64_t sizes[] = {1, 1023, 3001};
  static const double ps[] = {0.0, 0.1, 0.5, 1.0};
  for (int t = 0; t < 2; t++)
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
      for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) {
        fs_dtype dt = t ? FS_F16 : FS_BF16;
        int64_t n = sizes[s];
        fs_tensor *x, *xw;
        low_pair(dt, 1, &n, "x", -2, &x, &xw);
        fs_tensor *out = rt_ok(fsG_dropout(x, ps[k], 77 + s));
        check_low(out, rt_ok(fsG_dropout(xw, ps[k], 77 + s)), &x, &xw, dt, 1);
      }
}

/* The elementwise losses on low inputs (and a low input with a float32
 * target) read them a block at a time: the float32 path's per-element
 * losses, weighting and reduction, rounded once to the result's type
 * (float32 under autocast), and its gradients rounded into the low
 * inputs'; with a weight broadcast over the last dim (low or float32, its
 * gradient too) and BCE with logits' pos_weight (61 floats: blocks of 1024
 * start inside it). */
static void test_low_ploss(void **state) {
  (void)state;
  int64_t shape[2] = {37, 61}, C = 61;
  for (int mode = 0; mode < 3; mode++) /* bfloat16, float16, bfloat16 under autocast */
    for (int kind = FSN_MSE; kind <= FSN_KL_DIV; kind++)
      for (int red = FSG_NONE; red <= FSG_BATCHMEAN; red++)
        for (int f32 = 0; f32 < 2; f32++)
          for (int wk = 0; wk < 3; wk++) { /* no weights; low weights; float32 weights */
            fs_dtype dt = mode == 1 ? FS_F16 : FS_BF16;
            fs_tensor *x[3], *xw[3], *pw = NULL, *pww = NULL;
            low_pair(dt, 2, shape, "x", kind == FSN_BCE ? -0.5f : -2, &x[0], &xw[0]);
            if (!f32) low_pair(dt, 2, shape, "y", -1, &x[1], &xw[1]);
            else {
              x[1] = rt_rand("y", 0, 1, 2, shape);
              xw[1] = rt_ok(fsT_copy(x[1]));
              x[1]->requires_grad = xw[1]->requires_grad = true;
            }
            if (wk) {
              fs_tensor *w = rt_rand("weight", 0.25f, 2, 1, &C);
              x[2] = wk == 1 ? rt_ok(fsT_to_dtype(w, dt)) : rt_ok(fsT_copy(w));
              xw[2] = rt_ok(fsT_to_dtype(x[2], FS_F32));
              x[2]->requires_grad = xw[2]->requires_grad = true;
              if (kind == FSN_BCE_LOGITS) {
                pw = wk == 1 ? rt_ok(fsT_to_dtype(w, dt)) : rt_ok(fsT_copy(w));
                pww = rt_ok(fsT_to_dtype(pw, FS_F32));
              }
              fsT_release(w);
            }
            double param = kind == FSN_KL_DIV ? kind % 2 : 0.5;
            fs_dtype old = fsG_set_autocast(mode == 2 ? FS_BF16 : FS_F32);
            fs_tensor *out = rt_ok(fsG_ploss((fsN_ploss)kind, x[0], x[1], param, pw, wk ? x[2] : NULL, (fsG_reduction)red));
            fsG_set_autocast(old);
            fs_tensor *ref = rt_ok(fsG_ploss((fsN_ploss)kind, xw[0], xw[1], param, pww, wk ? xw[2] : NULL, (fsG_reduction)red));
            check_low(out, ref, x, xw, mode == 2 || f32 || wk == 2 ? FS_F32 : dt, wk ? 3 : 2);
            fsT_release(pw);
            fsT_release(pww);
          }
}

/* The same with a target broadcast to x's shape ([C] and [N, 1]; low or
 * float32): the target widened and expanded as the float32 path does (its
 * gradient that path's), x read a block at a time. */
static void test_low_ploss_bcast(void **state) {
  (void)state;
  int64_t shape[2] = {37, 61}, ys[2][2] = {{61, 0}, {37, 1}};
  for (int t = 0; t < 2; t++)
    for (int kind = FSN_MSE; kind <= FSN_KL_DIV; kind++)
      for (int b = 0; b < 4 && kind != FSN_BCE && kind != FSN_BCE_LOGITS; b++) { /* bit 0: [N, 1]; bit 1: float32 */
        fs_dtype dt = t ? FS_F16 : FS_BF16;
        int yr = b & 1 ? 2 : 1;
        fs_tensor *x[2], *xw[2];
        low_pair(dt, 2, shape, "x", -2, &x[0], &xw[0]);
        if (b & 2) {
          x[1] = rt_rand("y", -1, 1, yr, ys[b & 1]);
          xw[1] = rt_ok(fsT_copy(x[1]));
          x[1]->requires_grad = xw[1]->requires_grad = true;
        } else
          low_pair_k(dt, yr, ys[b & 1], "y", -1, 0, &x[1], &xw[1]);
        fsG_reduction red = (fsG_reduction)((kind + b) % 3); /* none, mean, sum */
        double param = kind == FSN_KL_DIV ? b % 2 : 0.5;
        fs_tensor *out = rt_ok(fsG_ploss((fsN_ploss)kind, x[0], x[1], param, NULL, NULL, red));
        fs_tensor *ref = rt_ok(fsG_ploss((fsN_ploss)kind, xw[0], xw[1], param, NULL, NULL, red));
        check_low(out, ref, x, xw, b & 2 ? FS_F32 : dt, 2);
      }
}

/* cat of low pieces on the cpu copies them as they are (into float32 when
 * the float pieces' types differ), along the first dim and the last, with
 * a piece given twice (its two gradients rounded and added) and an int64
 * piece (converted to the result's type): the float32-copy path's values
 * and gradients. */
static void test_low_cat(void **state) {
  (void)state;
  static const int64_t sa[2] = {3, 5}, sb[2][2] = {{4, 5}, {3, 2}};
  for (int t = 0; t < 2; t++)
    for (int d = 0; d < 2; d++)
      for (int kind = 0; kind < 4; kind++) { /* b: low, float32, the other low type, int64 */
        fs_dtype dt = t ? FS_F16 : FS_BF16, other = t ? FS_BF16 : FS_F16;
        fs_tensor *x[2], *xw[2], *ints = NULL;
        low_pair(dt, 2, sa, "a", -2, &x[0], &xw[0]);
        if (kind == 0 || kind == 2) low_pair_k(kind ? other : dt, 2, sb[d], "b", -1, 0, &x[1], &xw[1]);
        else if (kind == 1) {
          x[1] = rt_rand("b", -1, 1, 2, sb[d]);
          xw[1] = rt_ok(fsT_copy(x[1]));
          x[1]->requires_grad = xw[1]->requires_grad = true;
        } else {
          ints = fsT_new(FS_I64, FS_DEV_CPU, 2, sb[d]);
          for (int64_t i = 0; i < ints->numel; i++) fsT_i64(ints)[i] = i * 37 - 200; /* some not bfloat16's */
        }
        fs_tensor *b = ints ? ints : x[1], *bw = ints ? ints : xw[1];
        /* a twice when the result is low (a float32 result's two gradients
         * are rounded each, the reference's sum once) */
        int n = kind == 1 || kind == 2 ? 2 : 3;
        fs_tensor *out = rt_ok(fsG_cat((fs_tensor *[]){x[0], b, x[0]}, n, d));
        fs_tensor *ref = rt_ok(fsG_cat((fs_tensor *[]){xw[0], bw, xw[0]}, n, d));
        check_low(out, ref, x, xw, kind == 1 || kind == 2 ? FS_F32 : dt, ints ? 1 : 2);
        fsT_release(ints);
      }
}

/* An embedding of a low W copies its rows; W's gradient sums each row's in
 * float32 in index order (repeated indices) and rounds it once: the
 * float32-copy path's values. */
static void test_low_embedding(void **state) {
  (void)state;
  static const int64_t ws[2] = {7, 5}, is[2] = {3, 4};
  for (int t = 0; t < 2; t++) {
    fs_dtype dt = t ? FS_F16 : FS_BF16;
    fs_tensor *W, *Ww, *idx = fsT_new(FS_I64, FS_DEV_CPU, 2, is);
    low_pair(dt, 2, ws, "W", -2, &W, &Ww);
    for (int64_t i = 0; i < idx->numel; i++) fsT_i64(idx)[i] = (i * 5 + 1) % 6; /* row 6 unused, others repeated */
    fs_tensor *out = rt_ok(fsG_embedding(idx, W));
    check_low(out, rt_ok(fsG_embedding(idx, Ww)), &W, &Ww, dt, 1);
    fsT_release(idx);
  }
}

/* A positional embedding of low x and W (or one of them float32): x + W's
 * first T rows a block at a time (blocks inside an image of 1,200 too),
 * W's gradient summed over the images in float32 and rounded once: the
 * float32-copy path's values. */
static void test_low_posemb(void **state) {
  (void)state;
  static const int64_t xs[2][3] = {{3, 5, 7}, {2, 40, 30}}, ws[2][2] = {{6, 7}, {45, 30}};
  for (int t = 0; t < 2; t++)
    for (int s = 0; s < 2; s++)
      for (int kind = 0; kind < 3; kind++) { /* both low; W float32; x float32 */
        fs_dtype dt = t ? FS_F16 : FS_BF16;
        fs_tensor *x[2], *xw[2];
        for (int i = 0; i < 2; i++) {
          if (kind == 2 - i) {
            x[i] = rt_rand(i ? "W" : "x", -2, 2, i ? 2 : 3, i ? ws[s] : xs[s]);
            xw[i] = rt_ok(fsT_copy(x[i]));
            x[i]->requires_grad = xw[i]->requires_grad = true;
          } else
            low_pair_k(dt, i ? 2 : 3, i ? ws[s] : xs[s], i ? "W" : "x", -2, s ? 0 : 10, &x[i], &xw[i]);
        }
        fs_tensor *out = rt_ok(fsG_posemb(x[0], x[1]));
        check_low(out, rt_ok(fsG_posemb(xw[0], xw[1])), x, xw, kind ? FS_F32 : dt, 2);
      }
}

/* LayerNorm of a low x (w and b low, or float32: a float32 result) reads
 * and writes it by parts of rows: the float32 kernels' values rounded
 * once, forward and backward, on rows of odd lengths, parts over the
 * worker pool (the last two shapes) and a row of the specials. */
static void test_low_layernorm(void **state) {
  (void)state;
  static const struct { int rank; int64_t shape[3]; } shapes[] = {
    {1, {1}}, {2, {5, 7}}, {3, {3, 2, 33}}, {2, {4, 1029}}, {2, {64, 1029}}, {2, {3, 20000}},
  };
  for (int t = 0; t < 2; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int f32 = 0; f32 < 2; f32++) {
        fs_dtype dt = t ? FS_F16 : FS_BF16;
        int64_t C = shapes[s].shape[shapes[s].rank - 1];
        fs_tensor *x[3], *xw[3];
        /* the specials in the first row of one shape only: a NaN row makes dw, db NaN */
        low_pair_k(dt, shapes[s].rank, shapes[s].shape, "x", -2, s == 3 ? C : 0, &x[0], &xw[0]);
        for (int i = 1; i < 3; i++) {
          if (!f32) low_pair_k(dt, 1, &C, i == 1 ? "w" : "b", 0.25f, 0, &x[i], &xw[i]);
          else {
            x[i] = rt_rand(i == 1 ? "w" : "b", 0.25f, 4, 1, &C);
            xw[i] = rt_ok(fsT_copy(x[i]));
            x[i]->requires_grad = xw[i]->requires_grad = true;
          }
        }
        fs_tensor *out = rt_ok(fsG_layernorm(x[0], x[1], x[2], 1e-5));
        check_low(out, rt_ok(fsG_layernorm(xw[0], xw[1], xw[2], 1e-5)), x, xw, f32 ? FS_F32 : dt, 3);
      }
}

/* nll_loss and cross_entropy with options on low x (class dim last) read it
 * by parts of rows: the float32 path's per-row losses, reduction and
 * gradients, rounded once (float32 under autocast); class weights float32
 * or low, ignored rows, label smoothing, every reduction, parts over the
 * worker pool (the last shape). */
static void test_low_nll(void **state) {
  (void)state;
  static const struct { int rank; int64_t shape[3]; } shapes[] = {{1, {9}}, {3, {3, 5, 7}}, {2, {37, 1029}}};
  for (int mode = 0; mode < 3; mode++) /* bfloat16, float16, bfloat16 under autocast */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int opt = 0; opt < 8; opt++) { /* bit 0: logits; bit 1: smoothing; bit 2: a weight */
        fs_dtype dt = mode == 1 ? FS_F16 : FS_BF16;
        int rank = shapes[s].rank;
        int64_t C = shapes[s].shape[rank - 1], M = 1;
        for (int d = 0; d < rank - 1; d++) M *= shapes[s].shape[d];
        fs_tensor *x, *xw, *t = fsT_new(FS_I64, FS_DEV_CPU, rank - 1, shapes[s].shape), *w = NULL, *ww = NULL;
        low_pair_k(dt, rank, shapes[s].shape, "x", opt & 1 ? -4 : -6, 0, &x, &xw);
        for (int64_t m = 0; m < M; m++) fsT_i64(t)[m] = m % 4 == 1 ? -100 : (m * 131 + 7) % C; /* -100: ignored */
        if (opt & 4) { /* float32 weights, or the low type's (the result's type either way: see promotion) */
          fs_tensor *wf = rt_rand("w", 0.25f, 2, 1, &C);
          w = s % 2 ? rt_ok(fsT_to_dtype(wf, dt)) : fsT_retain(wf);
          ww = rt_ok(fsT_to_dtype(w, FS_F32));
          fsT_release(wf);
        }
        fsG_reduction red = (fsG_reduction)((s + (size_t)opt) % 3); /* none, mean, sum */
        double ls = opt & 2 ? 0.1 : 0;
        fs_dtype old = fsG_set_autocast(mode == 2 ? FS_BF16 : FS_F32);
        fs_tensor *out = rt_ok(fsG_nll(x, t, w, opt & 1, -100, ls, red));
        fsG_set_autocast(old);
        fs_dtype want = mode == 2 || (w && w->dtype == FS_F32) ? FS_F32 : dt;
        check_low(out, rt_ok(fsG_nll(xw, t, ww, opt & 1, -100, ls, red)), &x, &xw, want, 1);
        fsT_release(t);
        fsT_release(w);
        fsT_release(ww);
      }
}

/* The same in torch's [N, C, d...] layout with index targets [N, d...],
 * and cross_entropy with probability targets (low, or float32; requiring
 * grad) in either layout: rows gathered across the d... positions a part
 * at a time (the float32 path's permuted copy), parts crossing images and
 * on the worker pool (the last shape). */
static void test_low_nll_layouts(void **state) {
  (void)state;
  static const struct { int rank; int64_t shape[4]; } shapes[] = {
    {2, {6, 9}}, {3, {4, 7, 5}}, {4, {2, 5, 3, 3}}, {3, {8, 33, 130}},
  };
  for (int mode = 0; mode < 3; mode++) /* bfloat16, float16, bfloat16 under autocast */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int kind = 0; kind < 3; kind++) /* index targets; low probabilities; float32 ones */
        for (int opt = 0; opt < 4; opt++) { /* bit 0: smoothing; bit 1: a weight */
          fs_dtype dt = mode == 1 ? FS_F16 : FS_BF16;
          int rank = shapes[s].rank;
          const int64_t *xs = shapes[s].shape;
          int64_t C = xs[1], ts[3], M = 1;
          if (kind == 0 && rank == 2) continue; /* [N, C] with [N]: test_low_nll's */
          for (int d = 0; d < rank - 1; d++) M *= (ts[d] = xs[d ? d + 1 : 0]);
          fs_tensor *x[2], *xw[2], *w = NULL, *ww = NULL;
          low_pair_k(dt, rank, xs, "x", -4, 0, &x[0], &xw[0]);
          if (kind == 0) {
            x[1] = fsT_new(FS_I64, FS_DEV_CPU, rank - 1, ts);
            for (int64_t m = 0; m < M; m++) fsT_i64(x[1])[m] = m % 4 == 1 ? -100 : (m * 131 + 7) % C;
          } else if (kind == 1)
            low_pair_k(dt, rank, xs, "p", 0, 0, &x[1], &xw[1]);
          else {
            x[1] = rt_rand("p", 0, 1, rank, xs);
            xw[1] = rt_ok(fsT_copy(x[1]));
            x[1]->requires_grad = xw[1]->requires_grad = true;
          }
          if (opt & 2) {
            fs_tensor *wf = rt_rand("w", 0.25f, 2, 1, &C);
            w = s % 2 ? rt_ok(fsT_to_dtype(wf, dt)) : fsT_retain(wf);
            ww = rt_ok(fsT_to_dtype(w, FS_F32));
            fsT_release(wf);
          }
          bool logits = kind || s % 2 == 0;
          fsG_reduction red = (fsG_reduction)((s + (size_t)opt + (size_t)kind) % 3); /* none, mean, sum */
          double ls = opt & 1 ? 0.1 : 0;
          fs_dtype old = fsG_set_autocast(mode == 2 ? FS_BF16 : FS_F32);
          fs_tensor *out = rt_ok(fsG_nll(x[0], x[1], w, logits, -100, ls, red));
          fsG_set_autocast(old);
          fs_tensor *ref = rt_ok(fsG_nll(xw[0], kind ? xw[1] : x[1], ww, logits, -100, ls, red));
          fs_dtype want = mode == 2 || (w && w->dtype == FS_F32) || kind == 2 ? FS_F32 : dt;
          if (kind == 0) {
            check_low(out, ref, x, xw, want, 1);
            fsT_release(x[1]);
          } else
            check_low(out, ref, x, xw, want, 2);
          fsT_release(w);
          fsT_release(ww);
        }
}

/* RMSNorm of a low x, with a weight (low or float32) or none: the float32
 * kernels' values rounded once, forward and backward, over one or two
 * normalized dims and parts over the worker pool (the last shape). */
static void test_low_rmsnorm(void **state) {
  (void)state;
  static const struct { int rank, nd; int64_t shape[3]; } shapes[] = {
    {2, 1, {5, 7}}, {3, 2, {3, 2, 33}}, {2, 1, {64, 1029}},
  };
  for (int t = 0; t < 2; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int kind = 0; kind < 3; kind++) { /* a low weight, a float32 one, none */
        fs_dtype dt = t ? FS_F16 : FS_BF16;
        int rank = shapes[s].rank, nd = shapes[s].nd;
        const int64_t *ns = shapes[s].shape + rank - nd;
        fs_tensor *x[2], *xw[2];
        low_pair_k(dt, rank, shapes[s].shape, "x", -2, s == 0 ? 10 : 0, &x[0], &xw[0]);
        if (kind == 0) low_pair_k(dt, nd, ns, "w", 0.25f, 0, &x[1], &xw[1]);
        else if (kind == 1) {
          x[1] = rt_rand("w", 0.25f, 4, nd, ns);
          xw[1] = rt_ok(fsT_copy(x[1]));
          x[1]->requires_grad = xw[1]->requires_grad = true;
        }
        fs_tensor *out = rt_ok(fsG_rms_norm(x[0], nd, ns, kind < 2 ? x[1] : NULL, NAN));
        check_low(out, rt_ok(fsG_rms_norm(xw[0], nd, ns, kind < 2 ? xw[1] : NULL, NAN)), x, xw, kind == 1 ? FS_F32 : dt,
                  kind < 2 ? 2 : 1);
      }
}

/* GroupNorm of a low x, with a weight and bias (low or float32) or none:
 * the float32 kernels' values rounded once, forward and backward, over
 * several chunks of images (the last shape). */
static void test_low_groupnorm(void **state) {
  (void)state;
  static const struct { int rank; int64_t shape[3], groups; } shapes[] = {
    {3, {2, 6, 5}, 3}, {2, {3, 4}, 2}, {3, {40, 8, 300}, 4},
  };
  for (int t = 0; t < 2; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int kind = 0; kind < 3; kind++) { /* low weight and bias, float32 ones, none */
        fs_dtype dt = t ? FS_F16 : FS_BF16;
        int64_t C = shapes[s].shape[1];
        fs_tensor *x[3], *xw[3];
        low_pair_k(dt, shapes[s].rank, shapes[s].shape, "x", -2, 0, &x[0], &xw[0]);
        for (int i = 1; i < 3 && kind < 2; i++) {
          if (kind == 0) low_pair_k(dt, 1, &C, i == 1 ? "w" : "b", 0.25f, 0, &x[i], &xw[i]);
          else {
            x[i] = rt_rand(i == 1 ? "w" : "b", 0.25f, 4, 1, &C);
            xw[i] = rt_ok(fsT_copy(x[i]));
            x[i]->requires_grad = xw[i]->requires_grad = true;
          }
        }
        int64_t G = shapes[s].groups;
        fs_tensor *out = rt_ok(fsG_group_norm(x[0], G, kind < 2 ? x[1] : NULL, kind < 2 ? x[2] : NULL, 1e-5));
        check_low(out, rt_ok(fsG_group_norm(xw[0], G, kind < 2 ? xw[1] : NULL, kind < 2 ? xw[2] : NULL, 1e-5)), x, xw,
                  kind == 1 ? FS_F32 : dt, kind < 2 ? 3 : 1);
      }
}

/* BatchNorm of a low x (weight and bias low, float32 or none), training
 * and not, with running statistics of x's type, float32 or none: the
 * float32 kernels' values rounded once, forward and backward, and the
 * running statistics the float32-copy path's, over parts of several
 * channels and of one (the last two shapes, on the worker pool). */
static void test_low_batchnorm(void **state) {
  (void)state;
  static const struct { int rank; int64_t shape[4]; } shapes[] = {
    {2, {16, 6}}, {4, {3, 5, 7, 3}}, {3, {8, 40, 130}}, {3, {3, 3, 6000}},
  };
  for (int t = 0; t < 2; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int kind = 0; kind < 3; kind++)  /* low weight and bias, float32 ones, none */
        for (int st = 0; st < 5; st++) { /* training: stats low, float32, none; eval: low, float32 */
          fs_dtype dt = t ? FS_F16 : FS_BF16;
          int64_t C = shapes[s].shape[1];
          bool training = st < 3;
          fs_tensor *x[3], *xw[3], *stats[2][2] = {{NULL, NULL}, {NULL, NULL}};
          low_pair_k(dt, shapes[s].rank, shapes[s].shape, "x", -2, s == 1 ? 10 : 0, &x[0], &xw[0]);
          for (int i = 1; i < 3 && kind < 2; i++) {
            if (kind == 0) low_pair_k(dt, 1, &C, i == 1 ? "w" : "b", 0.25f, 0, &x[i], &xw[i]);
            else {
              x[i] = rt_rand(i == 1 ? "w" : "b", 0.25f, 4, 1, &C);
              xw[i] = rt_ok(fsT_copy(x[i]));
              x[i]->requires_grad = xw[i]->requires_grad = true;
            }
          }
          for (int i = 0; i < 2 && st != 2; i++) {
            fs_tensor *v = rt_rand(i ? "rv" : "rm", i ? 0.5f : -1, 2, 1, &C);
            for (int k = 0; k < 2; k++) stats[k][i] = rt_ok(fsT_to_dtype(v, st % 3 == 0 ? dt : FS_F32));
            fsT_release(v);
          }
          fs_tensor *out = rt_ok(fsG_batch_norm(x[0], stats[0][0], stats[0][1], kind < 2 ? x[1] : NULL,
                                                kind < 2 ? x[2] : NULL, training, 0.1, 1e-5));
          fs_tensor *ref = rt_ok(fsG_batch_norm(xw[0], stats[1][0], stats[1][1], kind < 2 ? xw[1] : NULL,
                                                kind < 2 ? xw[2] : NULL, training, 0.1, 1e-5));
          check_low(out, ref, x, xw, kind == 1 ? FS_F32 : dt, kind < 2 ? 3 : 1);
          for (int i = 0; i < 2 && st != 2; i++) {
            fs_tensor *want = rt_ok(fsT_to_dtype(stats[1][i], FS_F32));
            assert_int_equal(stats[0][i]->dtype, stats[1][i]->dtype);
            assert_same(stats[0][i], fsT_f32(want), C);
            fsT_release(want);
            fsT_release(stats[0][i]);
            fsT_release(stats[1][i]);
          }
        }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_rounding), cmocka_unit_test(test_f16_conversion), cmocka_unit_test(test_gemm_bf16), cmocka_unit_test(test_gemm_bf16_finish),
    cmocka_unit_test(test_promotion),
    cmocka_unit_test(test_low_grads), cmocka_unit_test(test_act_bf16), cmocka_unit_test(test_autocast),
    cmocka_unit_test(test_low_binary), cmocka_unit_test(test_low_unary), cmocka_unit_test(test_low_grad_order),
    cmocka_unit_test(test_low_cross_entropy), cmocka_unit_test(test_low_bcast), cmocka_unit_test(test_low_reduce),
    cmocka_unit_test(test_low_dropout), cmocka_unit_test(test_low_ploss), cmocka_unit_test(test_low_ploss_bcast),
    cmocka_unit_test(test_low_cat), cmocka_unit_test(test_low_embedding), cmocka_unit_test(test_low_posemb),
    cmocka_unit_test(test_low_layernorm),
    cmocka_unit_test(test_low_nll), cmocka_unit_test(test_low_nll_layouts), cmocka_unit_test(test_low_rmsnorm),
    cmocka_unit_test(test_low_groupnorm), cmocka_unit_test(test_low_batchnorm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
