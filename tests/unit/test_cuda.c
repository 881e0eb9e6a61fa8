/* test_cuda.c -- the cuda backend against the cpu one: every fsB_backend
 * function and every fsN_kernels kernel on the same random inputs, forward
 * and backward, the rng fills bitwise (uniform) and within 2 ulp (normal) on
 * sharded slices, bfloat16 conversion bit for bit, the float64 table
 * (f64_table_check.h), the low-precision kernels (low_table_check.h).
 * Tolerances are stated per kernel: |cuda - cpu| <= atol + rtol |cpu|.
 * Without a device it checks the no-device path, prints "SKIP: no CUDA
 * device (...)" and exits 77. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "blas.h"
#include "backend_cuda.h"
#include "nn.h"
#include "ops.h"
#include "rt_testutil.h"
#include "f64_table_check.h"
#include "low_table_check.h"

static const fsB_backend *cpu = &fsB_cpu, *gpu = &fsB_cuda;

/* A call that returns 0 or -1 + fsT_error. */
#define OK(call) do { if ((call) != 0) fail_msg("%s: %s", #call, fsT_error()); } while (0)

/* --- host <-> device helpers ---------------------------------------------- */

static void *up(const void *host, size_t nbytes) {
  void *d = gpu->alloc(nbytes ? nbytes : 1);
  if (!d) fail_msg("cuda alloc: %s", fsT_error());
  if (nbytes && fsCU_upload(d, host, nbytes)) fail_msg("%s", fsT_error());
  return d;
}

static float *upf(const float *host, size_t n) { return up(host, n * sizeof(float)); }

static float *down(const float *dev, size_t n) {
  float *h = malloc((n ? n : 1) * sizeof *h);
  assert_non_null(h);
  if (fsCU_sync() || (n && fsCU_download(h, dev, n * sizeof *h))) fail_msg("%s", fsT_error());
  return h;
}

static void dfree(void *d) { gpu->free(d, 0); }

static float *rnd(const char *name, size_t n, float lo, float hi) {
  float *h = malloc((n ? n : 1) * sizeof *h);
  assert_non_null(h);
  fsR_fill_uniform(h, n, 77, name, 0, lo, hi);
  return h;
}

/* Checks device array dev against host reference ref; frees nothing. */
static void expect_close(const float *dev, const float *ref, size_t n, double atol, double rtol,
                         const char *what) {
  float *h = down(dev, n);
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    double err = fabs((double)h[i] - ref[i]), lim = atol + rtol * fabs(ref[i]);
    if (!(err <= lim) && !(isnan(h[i]) && isnan(ref[i]))) {
      fprintf(stderr, "%s[%zu]: cuda %.9g cpu %.9g (limit %.3g)\n", what, i, h[i], ref[i], lim);
      free(h);
      fail_msg("%s differs", what);
    }
    if (err > worst) worst = err, at = i;
  }
  if (getenv("FS_TEST_VERBOSE"))
    printf("  %-28s n=%-8zu max |err| %.3g at %zu\n", what, n, worst, at);
  free(h);
}

static void expect_bitwise(const float *dev, const float *ref, size_t n, const char *what) {
  float *h = down(dev, n);
  for (size_t i = 0; i < n; i++)
    if (memcmp(&h[i], &ref[i], sizeof *h)) {
      fprintf(stderr, "%s[%zu]: cuda %a cpu %a\n", what, i, h[i], ref[i]);
      free(h);
      fail_msg("%s not bitwise equal", what);
    }
  free(h);
}

static void expect_scalar(double got, double ref, double rtol, const char *what) {
  if (!(fabs(got - ref) <= rtol * fabs(ref)) && !(isnan(got) && isnan(ref)))
    fail_msg("%s: cuda %.17g cpu %.17g", what, got, ref);
}

/* --- no device ------------------------------------------------------------ */

static char no_device_reason[256];

static void test_no_device(void **state) {
  assert_int_equal(fsCU_device_count(no_device_reason, sizeof no_device_reason), 0);
  assert_true(strstr(no_device_reason, "no CUDA device: ") == no_device_reason ||
              strstr(no_device_reason, "CUDA is not usable: ") == no_device_reason);
  assert_non_null(strstr(no_device_reason, "accelerator=\"cpu\""));
  /* the backend table is refused with the same message, and so is a tensor */
  assert_null(fsB_get(FS_DEV_CUDA));
  assert_string_equal(fsT_error(), no_device_reason);
  int64_t shape[] = {4, 4};
  assert_null(fsT_new(FS_F32, FS_DEV_CUDA, 2, shape));
  assert_string_equal(fsT_error(), no_device_reason);
  /* a cpu tensor still works */
  fs_tensor *t = fsT_zeros(FS_F32, FS_DEV_CPU, 2, shape);
  assert_non_null(t);
  fsT_release(t);
}

/* --- backend functions ---------------------------------------------------- */

static void test_memory(void **state) {
  enum { N = 100003 };
  assert_ptr_equal(fsB_get(FS_DEV_CUDA), &fsB_cuda);
  float *h = rnd("mem", N, -1, 1);
  float *a = upf(h, N), *b = gpu->alloc(N * sizeof(float));
  assert_non_null(b);
  gpu->copy(b, a, N * sizeof(float));
  expect_bitwise(b, h, N, "copy");
  gpu->zero(b + 10, 100 * sizeof(float));
  memset(h + 10, 0, 100 * sizeof(float));
  expect_bitwise(b, h, N, "zero");
  gpu->fill(b, N, -2.5f);
  cpu->fill(h, N, -2.5f);
  expect_bitwise(b, h, N, "fill");
  dfree(a);
  dfree(b);
  free(h);
  /* a device tensor through the core */
  int64_t shape[] = {3, 5};
  fs_tensor *t = rt_ok(fsT_zeros(FS_F32, FS_DEV_CUDA, 2, shape));
  float zeros[15] = {0};
  expect_bitwise(fsT_f32(t), zeros, 15, "fsT_zeros on cuda");
  fsT_release(t);
  OK(fsCU_sync());
}

/* Slices [offset, offset + n) of one stream: even and odd offsets (normal
 * pairs split at both ends), lengths 1 and 2, a multi-block length, and a
 * shard far into a large tensor. */
static const size_t slices[][2] = {
  {0, 1}, {1, 1}, {0, 2}, {1, 2}, {3, 1000}, {0, 1000003}, {4097, 65537}, {(1u << 30) + 7, 12345},
};

static void test_fill_uniform(void **state) {
  uint64_t key = fsR_key(1234, "transformer.h.3.attn.c_attn.weight");
  for (size_t s = 0; s < sizeof slices / sizeof *slices; s++) {
    size_t off = slices[s][0], n = slices[s][1];
    float *ref = malloc(n * sizeof *ref), *d = gpu->alloc(n * sizeof(float));
    assert_non_null(d);
    cpu->fill_uniform(ref, n, key, off, -0.125f, 0.375f);
    gpu->fill_uniform(d, n, key, off, -0.125f, 0.375f);
    expect_bitwise(d, ref, n, "fill_uniform");
    free(ref);
    dfree(d);
  }
  /* shards filled one by one equal the whole */
  enum { N = 300001 };
  float *whole = malloc(N * sizeof *whole), *d = gpu->alloc(N * sizeof(float));
  assert_non_null(d);
  cpu->fill_uniform(whole, N, key, 0, -1, 1);
  size_t cuts[] = {0, 1, 77777, 150000, 150001, N};
  for (int c = 0; c < 5; c++)
    gpu->fill_uniform(d + cuts[c], cuts[c + 1] - cuts[c], key, cuts[c], -1, 1);
  expect_bitwise(d, whole, N, "fill_uniform shards");
  free(whole);
  dfree(d);
}

static int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  memcpy(&ia, &a, 4);
  memcpy(&ib, &b, 4);
  if (ia < 0) ia = INT32_MIN - ia; /* a monotonic integer line across zero */
  if (ib < 0) ib = INT32_MIN - ib;
  return llabs((long long)ia - ib);
}

/* Box-Muller's log/sin/cos differ between glibc and the device: 2 ulp. */
static void test_fill_normal(void **state) {
  uint64_t key = fsR_key(99, "lm_head.weight");
  const float params[][2] = {{0.0f, 1.0f}, {0.0f, 0.02f}, {1.0f, 0.05f}};
  for (size_t p = 0; p < 3; p++)
    for (size_t s = 0; s < sizeof slices / sizeof *slices; s++) {
      size_t off = slices[s][0], n = slices[s][1], differ = 0;
      float *ref = malloc(n * sizeof *ref), *d = gpu->alloc(n * sizeof(float));
      assert_non_null(d);
      cpu->fill_normal(ref, n, key, off, params[p][0], params[p][1]);
      gpu->fill_normal(d, n, key, off, params[p][0], params[p][1]);
      float *h = down(d, n);
      int64_t worst = 0;
      for (size_t i = 0; i < n; i++) {
        int64_t u = ulp_distance(h[i], ref[i]);
        differ += u != 0;
        if (u > worst) worst = u;
        /* 4: the cpu rounds logf, cosf/sinf, sqrtf and two products in float, the
         * device log/sin/cos in double; an H200 measured 4 ulp at most (2026-12-04) */
        if (u > 4) fail_msg("fill_normal[%zu] (offset %zu): cuda %a cpu %a, %lld ulp", i, off,
                            h[i], ref[i], (long long)u);
      }
      if (getenv("FS_TEST_VERBOSE"))
        printf("  fill_normal off=%zu n=%zu: %zu differ, max %lld ulp\n", off, n, differ,
               (long long)worst);
      free(h);
      free(ref);
      dfree(d);
    }
}

static void test_elementwise(void **state) {
  enum { N = 70001 };
  float *a = rnd("a", N, -2, 2), *b = rnd("b", N, 0.5f, 3), *ref = malloc(N * sizeof *ref);
  float *da = upf(a, N), *db = upf(b, N), *dout = gpu->alloc(N * sizeof(float));
  assert_non_null(dout);
  const size_t strides[][2] = {{1, 1}, {0, 1}, {1, 0}};
  for (int op = FSB_ADD; op <= FSB_DIV; op++)
    for (int s = 0; s < 3; s++) { /* one rounding: bitwise */
      cpu->binary(op, N, a, strides[s][0], b, strides[s][1], ref);
      gpu->binary(op, N, da, strides[s][0], db, strides[s][1], dout);
      expect_bitwise(dout, ref, N, "binary");
    }
  /* y += alpha x may contract to an FMA on the device: 1 ulp of the terms */
  cpu->axpy(N, -0.75f, a, b);
  gpu->axpy(N, -0.75f, da, db);
  expect_close(db, b, N, 1e-6, 1e-6, "axpy");
  cpu->scale(N, 1.5f, a);
  gpu->scale(N, 1.5f, da);
  expect_bitwise(da, a, N, "scale");
  cpu->clamp(N, -1.0f, 0.5f, a);
  gpu->clamp(N, -1.0f, 0.5f, da);
  expect_bitwise(da, a, N, "clamp");
  free(a), free(b), free(ref);
  dfree(da), dfree(db), dfree(dout);
}

static void test_reductions(void **state) {
  const size_t sizes[] = {1, 255, 256, 1000003, 5000000};
  for (size_t k = 0; k < 5; k++) {
    size_t n = sizes[k];
    float *h = rnd("red", n, -3, 2), *d = upf(h, n);
    /* double sums in another order: 1e-12 relative */
    expect_scalar(gpu->sum(n, d), cpu->sum(n, h), 1e-11, "sum");
    expect_scalar(gpu->sumsq(n, d), cpu->sumsq(n, h), 1e-11, "sumsq");
    assert_true(gpu->absmax(n, d) == cpu->absmax(n, h)); /* max is exact */
    if (n > 300) {
      float nan = NAN;
      OK(fsCU_upload(d + 300, &nan, sizeof nan));
      assert_true(isnan(gpu->absmax(n, d)));
    }
    free(h);
    dfree(d);
  }
}

/* gemm against cblas (OpenBLAS) for every transpose pair, padded leading
 * dimensions, alpha and beta; float sums in another order: 1e-5 + 1e-5 rel.
 * Then with bfloat16 and with float16 operands (autocast's products: both
 * round the float operands to the type, cuBLAS's GemmEx with 16-bit inputs
 * on the GPU, the cpu's fsB_gemm_low here): the products are exact in
 * float32 on both, so only the order of the sums differs; each type's
 * second pass leaves the operands unrounded. */
static void test_gemm(void **state) {
  const int64_t M = 37, N = 53, K = 29, pad = 3;
  static const fs_dtype low[] = {FS_F32, FS_BF16, FS_BF16, FS_F16, FS_F16};
  static const char *const what[] = {"gemm", "gemm, bfloat16 operands", "gemm, bfloat16 operands",
                                     "gemm, float16 operands", "gemm, float16 operands"};
  for (int pass = 0; pass < 5; pass++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
        size_t na = (size_t)((ta ? K : M) * lda), nb = (size_t)((tb ? N : K) * ldb), nc = (size_t)(M * ldc);
        float *A = rnd("A", na, -1, 1), *B = rnd("B", nb, -1, 1), *C = rnd("C", nc, -1, 1);
        if (pass % 2) { /* operands already of the type */
          fsT_round_array(low[pass], A, na);
          fsT_round_array(low[pass], B, nb);
        }
        float *dA = upf(A, na), *dB = upf(B, nb), *dC = upf(C, nc);
        fs_dtype old = fsB_set_gemm_operands(low[pass]);
        OK(cpu->gemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, -1.25f, C, ldc));
        OK(gpu->gemm(ta, tb, M, N, K, 0.5f, dA, lda, dB, ldb, -1.25f, dC, ldc));
        fsB_set_gemm_operands(old);
        expect_close(dC, C, nc, 1e-5, 1e-5, what[pass]);
        free(A), free(B), free(C);
        dfree(dA), dfree(dB), dfree(dC);
      }
  /* a shape cuBLAS cannot take is an error, not a crash */
  assert_int_equal(gpu->gemm(false, false, (int64_t)1 << 32, 1, 1, 1, NULL, 1, NULL, 1, 0, NULL, 1), -1);
  assert_non_null(strstr(fsT_error(), "too large"));
}

/* three steps of each optimizer and option; the kernels share the cpu's
 * fused multiply-adds, the GPU's sqrt and division may differ: 1e-6 rel */
static void test_optimizers(void **state) {
  enum { N = 4099 };
  static const char *const names[] = {"sgd", "sgd nesterov wd", "adam", "adamw amsgrad maximize",
                                      "rmsprop", "rmsprop centered momentum", "adagrad", "adadelta"};
  for (int variant = 0; variant < 8; variant++) {
    float *p = rnd("p", N, -1, 1), *g = rnd("g", N, -0.1f, 0.1f), *m = rnd("m", N, 0, 0);
    float *v = rnd("v", N, 0, 0), *w = rnd("w", N, 0, 0);
    float *dp = upf(p, N), *dg = upf(g, N), *dm = upf(m, N), *dv = upf(v, N), *dw = upf(w, N);
    bool alt = variant == 1 || variant == 3 || variant == 5;
    for (int step = 1; step <= 3; step++) {
      if (variant < 2) {
        cpu->sgd_update(N, p, g, m, step == 1, 0.1, 0.9, 0.1 * !alt, alt ? 0.01 : 0, alt, false);
        gpu->sgd_update(N, dp, dg, dm, step == 1, 0.1, 0.9, 0.1 * !alt, alt ? 0.01 : 0, alt, false);
      } else if (variant < 4) {
        cpu->adam_update(N, p, g, m, v, alt ? w : NULL, 1e-3, 0.9, 0.999, 1e-8, 0.01, alt, alt, step);
        gpu->adam_update(N, dp, dg, dm, dv, alt ? dw : NULL, 1e-3, 0.9, 0.999, 1e-8, 0.01, alt, alt, step);
      } else if (variant < 6) {
        cpu->rmsprop_update(N, p, g, m, alt ? v : NULL, alt ? w : NULL, 1e-2, 0.99, 1e-8, 0.01, 0.9 * alt, false);
        gpu->rmsprop_update(N, dp, dg, dm, alt ? dv : NULL, alt ? dw : NULL, 1e-2, 0.99, 1e-8, 0.01, 0.9 * alt,
                            false);
      } else if (variant < 7) {
        cpu->adagrad_update(N, p, g, m, 0.1 / (1 + (step - 1) * 0.01), 1e-10, 0.01, true);
        gpu->adagrad_update(N, dp, dg, dm, 0.1 / (1 + (step - 1) * 0.01), 1e-10, 0.01, true);
      } else {
        cpu->adadelta_update(N, p, g, m, v, 1.0, 0.9, 1e-6, 0.01, true);
        gpu->adadelta_update(N, dp, dg, dm, dv, 1.0, 0.9, 1e-6, 0.01, true);
      }
    }
    expect_close(dp, p, N, 1e-6, 1e-6, names[variant]);
    expect_close(dm, m, N, 1e-7, 1e-6, names[variant]);
    expect_close(dv, v, N, 1e-9, 1e-6, names[variant]);
    expect_close(dw, w, N, 1e-7, 1e-6, names[variant]);
    free(p), free(g), free(m), free(v), free(w);
    dfree(dp), dfree(dg), dfree(dm), dfree(dv), dfree(dw);
  }
}

static void test_bf16(void **state) {
  enum { N = 65536 + 12 };
  float *h = malloc(N * sizeof *h);
  uint16_t *ref = malloc(N * sizeof *ref), *got = malloc(N * sizeof *got);
  for (uint32_t i = 0; i < 65536; i++) { /* every bf16 pattern, nudged to hit ties and rounding */
    uint32_t u = (i << 16) | (i & 1 ? 0x8000u : (i * 2654435761u) & 0xffffu);
    memcpy(&h[i], &u, 4);
  }
  const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f800001u, 0xffffffffu,
                              0x00000001u, 0x80000000u, 0x0, 0x7f7fffffu, 0x3f808000u,
                              0x3f818000u, 0x7f7f8000u};
  memcpy(h + 65536, special, sizeof special);
  for (size_t i = 0; i < N; i++) ref[i] = fsT_f32_to_bf16(h[i]);
  float *dh = upf(h, N);
  uint16_t *db = gpu->alloc(N * sizeof *db);
  float *dback = gpu->alloc(N * sizeof(float));
  assert_non_null(db);
  assert_non_null(dback);
  OK(fsCU_f32_to_bf16(db, dh, N));
  OK(fsCU_download(got, db, N * sizeof *got));
  assert_memory_equal(got, ref, N * sizeof *ref);
  OK(fsCU_bf16_to_f32(dback, db, N));
  for (size_t i = 0; i < N; i++) h[i] = fsT_bf16_to_f32(ref[i]);
  expect_bitwise(dback, h, N, "bf16_to_f32");
  free(h), free(ref), free(got);
  dfree(dh), dfree(db), dfree(dback);
}

/* fsB_backend.convert between every pair of float types against fsT_convert:
 * bitwise but for NaN's payload (one rounding to nearest even on both; ties,
 * NaN, infinities, subnormals and float16's overflow among the values) */
static void test_convert(void **state) {
  enum { N = 4096 };
  static const fs_dtype types[] = {FS_F32, FS_F64, FS_BF16, FS_F16};
  float *f = rnd("convert", N, -70000, 70000);
  const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000001u, 0x80000000u,
                              0x3f808000u, 0x3f818000u, 0x477ff000u, 0x38800000u, 0x33800000u};
  memcpy(f, special, sizeof special);
  for (size_t i = sizeof special / 4; i < N / 2; i++) f[i] /= 65536.0f * (float)(i % 97 + 1);
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) {
      size_t sa = fsT_dtype_size(types[a]), sb = fsT_dtype_size(types[b]);
      void *src = malloc(N * sa), *ref = malloc(N * sb), *got = malloc(N * sb);
      fsT_convert(types[a], src, FS_F32, f, N);
      fsT_convert(types[b], ref, types[a], src, N);
      void *dsrc = up(src, N * sa), *ddst = gpu->alloc(N * sb);
      assert_non_null(ddst);
      OK(gpu->convert(types[b], ddst, types[a], dsrc, N));
      OK(fsCU_download(got, ddst, N * sb));
      double *g = malloc(N * sizeof *g), *r = malloc(N * sizeof *r); /* exact widenings */
      fsT_convert(FS_F64, g, types[b], got, N);
      fsT_convert(FS_F64, r, types[b], ref, N);
      for (size_t i = 0; i < N; i++)
        if (memcmp(&g[i], &r[i], sizeof *g) && !(isnan(g[i]) && isnan(r[i])))
          fail_msg("convert %s -> %s [%zu]: cuda %a cpu %a", fsT_dtype_name(types[a]), fsT_dtype_name(types[b]), i,
                   g[i], r[i]);
      free(src), free(ref), free(got), free(g), free(r);
      dfree(dsrc), dfree(ddst);
    }
  assert_int_equal(gpu->convert(FS_I64, NULL, FS_F32, NULL, 0), -1); /* the integer types: the host's */
  free(f);
}

/* --- layer kernels -------------------------------------------------------- */

static const fsN_kernels *kc = &fsN_cpu, *kg = &fsN_cuda;

static void test_linear(void **state) {
  const int64_t N = 67, C = 45, OC = 33;
  float *x = rnd("x", N * C, -1, 1), *W = rnd("W", OC * C, -0.5f, 0.5f), *b = rnd("b", OC, -1, 1);
  float *dy = rnd("dy", N * OC, -1, 1), *out = malloc(N * OC * sizeof *out);
  float *dx = rnd("dx", N * C, -1, 1), *dW = rnd("dW", OC * C, -1, 1), *dbias = rnd("db", OC, -1, 1);
  float *gx = upf(x, N * C), *gW = upf(W, OC * C), *gb = upf(b, OC), *gdy = upf(dy, N * OC);
  float *gout = gpu->alloc(N * OC * sizeof(float));
  float *gdx = upf(dx, N * C), *gdW = upf(dW, OC * C), *gdb = upf(dbias, OC);
  for (int bias = 0; bias < 2; bias++) {
    OK(kc->linear_forward(out, x, W, bias ? b : NULL, N, C, OC));
    OK(kg->linear_forward(gout, gx, gW, bias ? gb : NULL, N, C, OC));
    expect_close(gout, out, N * OC, 1e-5, 1e-5, "linear_forward");
  }
  OK(kc->linear_backward(dx, dW, dbias, dy, x, W, N, C, OC));
  OK(kg->linear_backward(gdx, gdW, gdb, gdy, gx, gW, N, C, OC));
  expect_close(gdx, dx, N * C, 1e-5, 1e-5, "linear_backward dinp");
  expect_close(gdW, dW, OC * C, 1e-5, 1e-5, "linear_backward dW");
  expect_close(gdb, dbias, OC, 1e-5, 1e-5, "linear_backward db");
  /* NULL gradients are skipped */
  OK(kc->linear_backward(NULL, dW, NULL, dy, x, W, N, C, OC));
  OK(kg->linear_backward(NULL, gdW, NULL, gdy, gx, gW, N, C, OC));
  expect_close(gdW, dW, OC * C, 1e-5, 1e-5, "linear_backward dW only");
  expect_close(gdb, dbias, OC, 1e-5, 1e-5, "linear_backward db untouched");
  free(x), free(W), free(b), free(dy), free(out), free(dx), free(dW), free(dbias);
  dfree(gx), dfree(gW), dfree(gb), dfree(gdy), dfree(gout), dfree(gdx), dfree(gdW), dfree(gdb);
}

static void test_embeddings(void **state) {
  const int64_t V = 50, N = 300, D = 24, B = 3, T = 100;
  int64_t idx[300];
  for (int i = 0; i < N; i++) idx[i] = (i * 7919) % V; /* repeated rows */
  float *W = rnd("wte", V * D, -1, 1), *dy = rnd("dy", N * D, -1, 1), *dW = rnd("dW", V * D, -1, 1);
  float *out = malloc(N * D * sizeof *out);
  int64_t *gidx = up(idx, sizeof idx);
  float *gW = upf(W, V * D), *gdy = upf(dy, N * D), *gdW = upf(dW, V * D);
  float *gout = gpu->alloc(N * D * sizeof(float));
  kc->embedding_forward(out, idx, W, N, D);
  kg->embedding_forward(gout, gidx, gW, N, D);
  expect_bitwise(gout, out, N * D, "embedding_forward");
  kc->embedding_backward(dW, dy, idx, N, D);
  kg->embedding_backward(gdW, gdy, gidx, N, D);
  expect_close(gdW, dW, V * D, 1e-6, 1e-6, "embedding_backward"); /* atomics: any order */
  /* positional: out = inp + W[t]; dinp += dout, dW[t] += sum_b dout[b, t] */
  float *P = rnd("wpe", T * D, -1, 1), *dP = rnd("dP", T * D, -1, 1), *dx = rnd("dx", B * T * D, -1, 1);
  float *gP = upf(P, T * D), *gdP = upf(dP, T * D), *gdx = upf(dx, B * T * D);
  kc->posemb_forward(out, dy, P, B, T, D);
  kg->posemb_forward(gout, gdy, gP, B, T, D);
  expect_bitwise(gout, out, B * T * D, "posemb_forward");
  kc->posemb_backward(dx, dP, dy, B, T, D);
  kg->posemb_backward(gdx, gdP, gdy, B, T, D);
  expect_bitwise(gdx, dx, B * T * D, "posemb_backward dinp");
  expect_close(gdP, dP, T * D, 1e-6, 1e-6, "posemb_backward dW");
  free(W), free(dy), free(dW), free(out), free(P), free(dP), free(dx);
  dfree(gidx), dfree(gW), dfree(gdy), dfree(gdW), dfree(gout), dfree(gP), dfree(gdP), dfree(gdx);
}

static void test_layernorm(void **state) {
  const int64_t N = 130, C = 97;
  float *x = rnd("x", N * C, -2, 3), *w = rnd("w", C, 0.5f, 1.5f), *b = rnd("b", C, -1, 1);
  float *dy = rnd("dy", N * C, -1, 1), *dx = rnd("dx", N * C, -1, 1), *dw = rnd("dw", C, -1, 1);
  float *dbias = rnd("dbias", C, -1, 1), *out = malloc(N * C * sizeof *out);
  float *mean = malloc(N * sizeof *mean), *rstd = malloc(N * sizeof *rstd);
  float *gx = upf(x, N * C), *gw = upf(w, C), *gb = upf(b, C), *gdy = upf(dy, N * C);
  float *gdx = upf(dx, N * C), *gdw = upf(dw, C), *gdb = upf(dbias, C);
  float *gout = gpu->alloc(N * C * sizeof(float)), *gmean = gpu->alloc(N * sizeof(float));
  float *grstd = gpu->alloc(N * sizeof(float));
  kc->layernorm_forward(out, mean, rstd, x, w, b, N, C, 1e-5f);
  kg->layernorm_forward(gout, gmean, grstd, gx, gw, gb, N, C, 1e-5f);
  /* float sums in another order */
  expect_close(gmean, mean, N, 1e-6, 1e-5, "layernorm mean");
  expect_close(grstd, rstd, N, 1e-6, 1e-5, "layernorm rstd");
  expect_close(gout, out, N * C, 1e-5, 1e-5, "layernorm_forward");
  kc->layernorm_backward(dx, dw, dbias, dy, x, w, mean, rstd, N, C);
  kg->layernorm_backward(gdx, gdw, gdb, gdy, gx, gw, gmean, grstd, N, C);
  expect_close(gdx, dx, N * C, 1e-5, 1e-4, "layernorm_backward dinp");
  expect_close(gdw, dw, C, 1e-4, 1e-5, "layernorm_backward dw");
  expect_close(gdb, dbias, C, 1e-4, 1e-5, "layernorm_backward db");
  free(x), free(w), free(b), free(dy), free(dx), free(dw), free(dbias), free(out), free(mean), free(rstd);
  dfree(gx), dfree(gw), dfree(gb), dfree(gdy), dfree(gdx), dfree(gdw), dfree(gdb), dfree(gout);
  dfree(gmean), dfree(grstd);
}

/* CUDA's erff/tanhf/expf are within 2 ulp of glibc's: 1e-6 + 4e-6 rel */
static void test_activations(void **state) {
  enum { N = 20011 };
  float *x = rnd("x", N, -6, 6), *dy = rnd("dy", N, -1, 1), *out = malloc(N * sizeof *out);
  float *gx = upf(x, N), *gdy = upf(dy, N), *gout = gpu->alloc(N * sizeof(float));
  for (int act = FSN_RELU; act <= FSN_SILU; act++) {
    float *dx = rnd("dx", N, -1, 1), *gdx = upf(dx, N);
    kc->act_forward(act, out, x, N);
    kg->act_forward(act, gout, gx, N);
    expect_close(gout, out, N, 1e-6, 4e-6, "act_forward");
    /* backward takes the cpu's forward output on both sides */
    OK(fsCU_upload(gout, out, N * sizeof *out));
    kc->act_backward(act, dx, dy, x, out, N);
    kg->act_backward(act, gdx, gdy, gx, gout, N);
    expect_close(gdx, dx, N, 1e-6, 4e-6, "act_backward");
    free(dx);
    dfree(gdx);
  }
  free(x), free(dy), free(out);
  dfree(gx), dfree(gdy), dfree(gout);
}

static void test_dropout(void **state) {
  enum { N = 100003 };
  uint64_t key = fsR_subkey(fsR_key(7, "dropout"), 3);
  float *x = rnd("x", N, -1, 1), *dx = rnd("dx", N, -1, 1), *out = malloc(N * sizeof *out);
  float *gx = upf(x, N), *gdx = upf(dx, N), *gout = gpu->alloc(N * sizeof(float));
  const float ps[] = {0.0f, 0.1f, 0.5f, 1.0f};
  for (int k = 0; k < 4; k++) { /* the same mask: bitwise */
    kc->dropout_forward(out, x, N, ps[k], key);
    kg->dropout_forward(gout, gx, N, ps[k], key);
    expect_bitwise(gout, out, N, "dropout_forward");
    kc->dropout_backward(dx, x, N, ps[k], key);
    kg->dropout_backward(gdx, gx, N, ps[k], key);
    expect_bitwise(gdx, dx, N, "dropout_backward");
  }
  free(x), free(dx), free(out);
  dfree(gx), dfree(gdx), dfree(gout);
}

static void test_attention(void **state) {
  const int64_t B = 3, T = 37, C = 48, NH = 4;
  size_t ni = (size_t)(B * T * 3 * C), no = (size_t)(B * T * C), na = (size_t)(B * NH * T * T);
  float *inp = rnd("qkv", ni, -1, 1), *dy = rnd("dy", no, -1, 1), *dinp = rnd("dinp", ni, -1, 1);
  float *out = malloc(no * sizeof *out), *att = malloc(na * sizeof *att);
  float *ginp = upf(inp, ni), *gdy = upf(dy, no), *gdinp = upf(dinp, ni);
  float *gout = gpu->alloc(no * sizeof(float)), *gatt = gpu->alloc(na * sizeof(float));
  OK(kc->attention_forward(out, att, inp, B, T, C, NH));
  OK(kg->attention_forward(gout, gatt, ginp, B, T, C, NH));
  expect_close(gatt, att, na, 1e-6, 1e-5, "attention_forward att");
  expect_close(gout, out, no, 1e-6, 1e-5, "attention_forward out");
  OK(kc->attention_backward(dinp, dy, inp, att, B, T, C, NH));
  OK(kg->attention_backward(gdinp, gdy, ginp, gatt, B, T, C, NH));
  expect_close(gdinp, dinp, ni, 1e-5, 1e-4, "attention_backward");
  free(inp), free(dy), free(dinp), free(out), free(att);
  dfree(ginp), dfree(gdy), dfree(gdinp), dfree(gout), dfree(gatt);
}

/* the tensor API's partial table (ops_cuda.cu): take, its scatter-add,
 * put, topk and its backward against ops.c's */
static void test_index_ops(void **state) {
  const fsU_kernels *uc = &fsU_cpu, *ug = &fsU_cuda;
  enum { N = 4000, M = 1500, O = 3, L = 50, I = 7, K = 5 };
  int64_t off[M];
  for (int i = 0; i < M; i++) off[i] = (i * 7919) % N; /* repeated offsets */
  float *x = rnd("x", N, -1, 1), *dx = rnd("dx", N, -1, 1), *dy = rnd("dy", M, -1, 1), *y = malloc(M * sizeof *y);
  int64_t *goff = up(off, sizeof off);
  float *gx = upf(x, N), *gdx = upf(dx, N), *gdy = upf(dy, M), *gy = gpu->alloc(M * sizeof(float));
  uc->take(M, off, sizeof(float), x, y);
  ug->take(M, goff, sizeof(float), gx, gy);
  expect_bitwise(gy, y, M, "take");
  uc->take_backward(M, off, dx, dy);
  ug->take_backward(M, goff, gdx, gdy);
  expect_close(gdx, dx, N, 1e-6, 1e-6, "take_backward"); /* atomics: any order */
  int64_t uoff[M]; /* distinct offsets: put's result does not depend on the order */
  for (int i = 0; i < M; i++) uoff[i] = (int64_t)i * 2;
  int64_t *guoff = up(uoff, sizeof uoff);
  uc->put(M, uoff, sizeof(float), dy, x);
  ug->put(M, guoff, sizeof(float), gdy, gx);
  expect_bitwise(gx, x, N, "put");
  float *t = rnd("t", O * L * I, -1, 1), *tv = malloc(O * K * I * sizeof *tv);
  t[3] = NAN, t[10] = t[17]; /* a NaN and a tie */
  int64_t ti[O * K * I];
  float *gt = upf(t, O * L * I), *gtv = gpu->alloc(O * K * I * sizeof(float));
  int64_t *gti = gpu->alloc(sizeof ti);
  for (int largest = 0; largest < 2; largest++) {
    OK(uc->topk_forward(largest, O, L, I, K, t, tv, ti));
    OK(ug->topk_forward(largest, O, L, I, K, gt, gtv, gti));
    expect_bitwise(gtv, tv, O * K * I, "topk_forward values");
    int64_t hi[O * K * I];
    if (fsCU_sync() || fsCU_download(hi, gti, sizeof hi)) fail_msg("%s", fsT_error());
    assert_memory_equal(hi, ti, sizeof hi);
  }
  float *dt = rnd("dt", O * L * I, -1, 1), *gdt = upf(dt, O * L * I), *gdv = upf(dy, O * K * I);
  uc->topk_backward(O, L, I, K, dt, dy, ti);
  ug->topk_backward(O, L, I, K, gdt, gdv, gti);
  expect_bitwise(gdt, dt, O * L * I, "topk_backward");
  free(x), free(dx), free(dy), free(y), free(t), free(tv), free(dt);
  dfree(goff), dfree(gx), dfree(gdx), dfree(gdy), dfree(gy), dfree(guoff), dfree(gt), dfree(gtv), dfree(gti);
  dfree(gdt), dfree(gdv);
}

static void test_losses(void **state) {
  const int64_t N = 77, C = 1003;
  int64_t tgt[77];
  for (int i = 0; i < N; i++) tgt[i] = (i * 131) % C;
  float *logits = rnd("logits", N * C, -8, 8), *dl = rnd("dl", N * C, -1, 1);
  float *gl = upf(logits, N * C), *gdl = upf(dl, N * C);
  int64_t *gt = up(tgt, sizeof tgt);
  /* rows in double from the device's float exp/log, summed in another order
   * (an H200 measured 9e-12 rel) */
  expect_scalar(kg->cross_entropy_forward(gl, gt, N, C), kc->cross_entropy_forward(logits, tgt, N, C),
                1e-10, "cross_entropy_forward");
  assert_true(isnan(kg->cross_entropy_forward(gl, gt, 0, C)));
  kc->cross_entropy_backward(dl, logits, tgt, N, C, 0.5f);
  kg->cross_entropy_backward(gdl, gl, gt, N, C, 0.5f);
  expect_close(gdl, dl, N * C, 1e-7, 1e-6, "cross_entropy_backward");
  size_t n = (size_t)(N * C);
  float *t = rnd("target", n, -1, 1), *dt = rnd("dt", n, -1, 1);
  float *gtt = upf(t, n), *gdt = upf(dt, n);
  expect_scalar(kg->mse_forward(gl, gtt, n), kc->mse_forward(logits, t, n), 1e-12, "mse_forward");
  kc->mse_backward(dl, dt, logits, t, n, 2.0f);
  kg->mse_backward(gdl, gdt, gl, gtt, n, 2.0f);
  expect_close(gdl, dl, n, 1e-7, 1e-6, "mse_backward dpred");
  expect_close(gdt, dt, n, 1e-7, 1e-6, "mse_backward dtarget");
  free(logits), free(dl), free(t), free(dt);
  dfree(gl), dfree(gdl), dfree(gt), dfree(gtt), dfree(gdt);
}

/* 64-true's kernels (f64_cuda.cu) against the cpu's double ones: the
 * products are cuBLAS's, the sums trees, the scatter-adds atomics, so a
 * relative tolerance of a few hundred double ulps */
static void test_f64(void **state) {
  f64chk c = {.be = gpu, .rtol = 1e-12};
  f64chk_elementwise(&c);
  f64chk_ops(&c);
  f64chk_layers(&c);
  f64chk_more(&c);
  if (gpu->f64->cnn) { /* a table of cuda kernels for the convolutional layers and norms */
    f64chk_cnn(&c);
    return;
  }
  /* none: a float64 conv or norm on cuda is refused by name, not staged and not crashed */
  static const int64_t one[2] = {1, 1}, s[4] = {1, 1, 2, 2};
  fs_tensor *x = fsT_zeros(FS_F64, FS_DEV_CUDA, 4, s), *w = fsT_zeros(FS_F64, FS_DEV_CUDA, 4, (int64_t[]){1, 1, 1, 1});
  assert_non_null(x);
  assert_non_null(w);
  assert_null(fsG_conv(2, x, w, NULL, one, one, one, 1));
  assert_non_null(strstr(fsT_error(), "conv2d: float64 has no cuda kernel"));
  assert_null(fsG_batch_norm(x, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
  assert_non_null(strstr(fsT_error(), "batch_norm: float64 has no cuda kernel"));
  fsT_release(x);
  fsT_release(w);
}

int main(void) {
  char why[256];
  if (fsCU_device_count(why, sizeof why) == 0) {
    const struct CMUnitTest none[] = {cmocka_unit_test(test_no_device)};
    int failed = cmocka_run_group_tests_name("cuda (no device)", none, NULL, NULL);
    if (failed) return 1;
    const char *reason = strncmp(why, "no CUDA device: ", 16) ? why : why + 16;
    const char *end = strstr(reason, " -- ");
    printf("SKIP: no CUDA device (%.*s)\n", end ? (int)(end - reason) : (int)strlen(reason), reason);
    return 77;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_memory),      cmocka_unit_test(test_fill_uniform),
    cmocka_unit_test(test_fill_normal), cmocka_unit_test(test_elementwise),
    cmocka_unit_test(test_reductions),  cmocka_unit_test(test_gemm),
    cmocka_unit_test(test_optimizers),  cmocka_unit_test(test_bf16),
    cmocka_unit_test(test_convert),
    cmocka_unit_test(test_linear),      cmocka_unit_test(test_embeddings),
    cmocka_unit_test(test_layernorm),   cmocka_unit_test(test_activations),
    cmocka_unit_test(test_low_elementwise),
    cmocka_unit_test(test_dropout),     cmocka_unit_test(test_attention),
    cmocka_unit_test(test_losses),      cmocka_unit_test(test_index_ops),
    cmocka_unit_test(test_f64),
  };
  return cmocka_run_group_tests_name("cuda backend", tests, NULL, NULL);
}
