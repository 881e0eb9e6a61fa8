/* test_rt_core.c -- tensors (lifetime, views, dtypes, errors), bfloat16
 * rounding, the counter-based rng's slice property, lazy OpenBLAS, the
 * emulated cuda's poisoned device pointers. */
#include "config.h"
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "backend.h"
#include "blas.h"
#include "rt_testutil.h"
#include "vmath.h"

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static void test_rng_slices(void **state) {
  enum { N = 10007 };
  float *full = malloc(N * sizeof *full), *parts = malloc(N * sizeof *parts);
  for (int normal = 0; normal < 2; normal++) {
    void (*fill)(float *, size_t, uint64_t, const char *, size_t, float, float) =
      normal ? fsR_fill_normal : fsR_fill_uniform;
    fill(full, N, 5, "h.0.0.1.c_attn.weight", 0, normal ? 0 : -0.5f, normal ? 1 : 0.5f);
    /* uneven slices, odd offsets (normal pairs split) */
    size_t cuts[] = {0, 1, 4, 999, 5000, 5001, N};
    for (size_t c = 0; c + 1 < sizeof cuts / sizeof *cuts; c++)
      fill(parts + cuts[c], cuts[c + 1] - cuts[c], 5, "h.0.0.1.c_attn.weight", cuts[c],
           normal ? 0 : -0.5f, normal ? 1 : 0.5f);
    assert_true(fnv(full, N * sizeof *full, 7) == fnv(parts, N * sizeof *parts, 7));
    for (int i = 0; !normal && i < N; i++) assert_true(full[i] >= -0.5f && full[i] < 0.5f);
    double mean = 0, var = 0;
    for (int i = 0; i < N; i++) mean += full[i];
    mean /= N;
    for (int i = 0; i < N; i++) var += (full[i] - mean) * (full[i] - mean);
    var /= N - 1;
    assert_true(fabs(mean) < 0.03);
    assert_true(fabs(var - (normal ? 1.0 : 1.0 / 12)) < (normal ? 0.05 : 0.005));
    /* another name or seed gives another stream */
    fill(parts, N, 5, "h.0.0.1.c_attn.bias", 0, 0, 1);
    assert_memory_not_equal(full, parts, 64);
    fill(parts, N, 6, "h.0.0.1.c_attn.weight", 0, 0, 1);
    assert_memory_not_equal(full, parts, 64);
  }
  free(full);
  free(parts);
}

static void test_bf16(void **state) {
  assert_int_equal(fsT_f32_to_bf16(1.0f), 0x3f80);
  float f;
  uint32_t u = 0x3f808000; /* exactly halfway between 0x3f80 and 0x3f81: to even */
  memcpy(&f, &u, 4);
  assert_int_equal(fsT_f32_to_bf16(f), 0x3f80);
  u = 0x3f818000; /* halfway, odd below: rounds up to even */
  memcpy(&f, &u, 4);
  assert_int_equal(fsT_f32_to_bf16(f), 0x3f82);
  u = 0x3f808001; /* just above halfway */
  memcpy(&f, &u, 4);
  assert_int_equal(fsT_f32_to_bf16(f), 0x3f81);
  assert_true(isnan(fsT_bf16_to_f32(fsT_f32_to_bf16(NAN))));
  assert_true(isinf(fsT_bf16_to_f32(fsT_f32_to_bf16(INFINITY))));
  assert_float_equal(fsT_bf16_to_f32(fsT_f32_to_bf16(3.14159f)), 3.140625f, 0);
  int64_t s[1] = {3};
  fs_tensor *t = rt_rand("t", -2, 2, 1, s), *b = rt_ok(fsT_to_dtype(t, FS_BF16));
  assert_int_equal(b->dtype, FS_BF16);
  assert_int_equal(fsT_nbytes(b), 6);
  for (int i = 0; i < 3; i++) assert_float_equal(fsT_get(b, i), fsT_f32(t)[i], 1e-2);
  fsT_release(b);
  fsT_release(t);
}

static void test_tensor_lifetime(void **state) {
  int64_t s[3] = {2, 3, 4};
  fs_tensor *t = rt_ok(fsT_zeros(FS_F32, FS_DEV_CPU, 3, s));
  assert_int_equal(t->numel, 24);
  fsT_f32(t)[5] = 7;
  int64_t vs[2] = {6, 4};
  fs_tensor *v = rt_ok(fsT_view(t, 2, vs));
  assert_ptr_equal(v->data, t->data);
  fsT_release(t); /* the view keeps the storage */
  assert_float_equal(fsT_f32(v)[5], 7, 0);
  int64_t bad[1] = {5};
  assert_null(fsT_view(v, 1, bad));
  assert_string_equal(fsT_error(), "shape [5] is invalid for input of shape [6, 4]");
  char buf[64];
  assert_string_equal(fsT_shape_str(v, buf, sizeof buf), "[6, 4]");
  fsT_release(v);
  int64_t neg[1] = {-2};
  assert_null(fsT_new(FS_F32, FS_DEV_CPU, 1, neg));
  assert_null(fsT_new(FS_F32, FS_DEV_CPU, FS_MAX_RANK + 1, s));
  int64_t huge[2] = {INT64_MAX / 4, 4};
  assert_null(fsT_new(FS_F32, FS_DEV_META, 2, huge));
#ifndef FS_HAVE_CUDA /* with CUDA, test_cuda checks the device and the no-device paths */
  assert_null(fsT_new(FS_F32, FS_DEV_CUDA, 1, s));
  assert_string_equal(fsT_error(), "no cuda backend in this build");
#endif
  fs_tensor *m = rt_ok(fsT_new(FS_F32, FS_DEV_META, 3, s));
  assert_null(m->data);
  assert_int_equal(fsT_alloc_storage(m, FS_DEV_CPU), 0);
  assert_non_null(m->data);
  fsT_release(m);
  int64_t two[1] = {2};
  fs_tensor *i = rt_ok(fsT_new(FS_I64, FS_DEV_CPU, 1, two));
  fsT_i64(i)[0] = -3;
  fsT_i64(i)[1] = 9;
  fs_tensor *f = rt_ok(fsT_to_dtype(i, FS_F32));
  assert_true(fsT_f32(f)[0] == -3.0f && fsT_f32(f)[1] == 9.0f);
  fs_tensor *same = fsT_to_dtype(f, FS_F32);
  assert_ptr_equal(same, f);
  fsT_release(same);
  fsT_release(f);
  fsT_release(i);
}

static void test_blas_lazy(void **state) {
  assert_false(fsB_blas_loaded()); /* nothing so far needed a GEMM */
  float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1}, C[4];
  /* [2x3] @ [3x2] */
  assert_int_equal(fsB_sgemm(false, false, 2, 2, 3, 1, A, 3, B, 2, 0, C, 2), 0);
  assert_true(fsB_blas_loaded());
  float want[4] = {4, 5, 10, 11};
  assert_memory_equal(C, want, sizeof want);
  assert_int_equal(fsB_sgemm(true, false, 3, 2, 2, 1, A, 3, C, 2, 0, B, 2), 0); /* A^T C */
  assert_float_equal(B[0], 1 * 4 + 4 * 10, 0);
}

static void test_cpu_allocator_reuses_blocks(void **state) {
  /* a freed large block comes back for the same size (no fresh page faults
   * every training step); small blocks go straight back to malloc */
  const fsB_backend *be = fsB_get(FS_DEV_CPU);
  size_t big = 3u << 20;
  void *a = be->alloc(big);
  assert_non_null(a);
  memset(a, 1, big);
  be->free(a, big);
  void *b = be->alloc(big), *c = be->alloc(big);
  assert_ptr_equal(a, b);
  assert_ptr_not_equal(b, c);
  be->free(b, big);
  be->free(c, big);
  assert_null(fsB_get(FS_DEV_META));
  assert_string_equal(fsT_error(), "tensors on the meta device have no data");
}

/* --emulate-cuda: the table's entries, transfers and device pointer
 * arithmetic work, and a host read of device memory faults as on a GPU (in
 * a child: emulation is for the rest of the process). */
static void test_emulated_cuda_faults(void **state) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    fsB_emulate_cuda();
    const fsB_backend *be = fsB_get(FS_DEV_CUDA);
    float host[4] = {1, 2, 3, 4}, third = 0;
    fs_tensor *t = fsT_new(FS_F32, FS_DEV_CUDA, 1, (int64_t[]){4}), *u = t ? fsT_copy(t) : NULL;
    fs_tensor *h = u ? fsT_to_device(u, FS_DEV_CPU) : NULL;
    bool ok = h && be->from_host(t->data, host, sizeof host) == 0 &&
              fsB_transfer(FS_DEV_CUDA, u->data, FS_DEV_CUDA, t->data, sizeof host) == 0 &&
              be->to_host(&third, fsT_f32(u) + 2, sizeof third) == 0 && third == 3 &&
              be->sum(4, fsT_f32(u)) == 10 && fsB_emu_host(t->data) != t->data &&
              !strcmp(be->name, "cuda (emulated)");
    if (!ok) _exit(3);
    int null = open("/dev/null", O_WRONLY); /* ASan's report on the fault is expected */
    if (null >= 0) dup2(null, 2);
    _exit(*(volatile float *)fsT_f32(t) == 1 ? 0 : 4);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  /* SIGSEGV, or the exit status ASan gives after its report */
  assert_true((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) || (WIFEXITED(st) && WEXITSTATUS(st) == 1));
}

/* The vectorizable exp and erf: within 1 ulp of libm's expf over the whole
 * normal range, inf/0/nan at the edges, and 1 + erf within 6e-7 of libm's
 * double erf (A&S 7.1.26 plus float rounding near 2). */
static void test_vmath_accuracy(void **state) {
  (void)state;
  for (float x = -87.3f; x < 88.7f; x += 0.00731f) {
    float want = expf(x), got = fsVM_expf(x);
    float ulp = nextafterf(want, INFINITY) - want;
    assert_true(fabsf(got - want) <= ulp);
  }
  assert_true(isinf(fsVM_expf(89.0f)) && fsVM_expf(89.0f) > 0);
  assert_true(fsVM_expf(-88.0f) == 0.0f && fsVM_expf(-INFINITY) == 0.0f);
  assert_true(isnan(fsVM_expf(NAN)));
  for (float x = -12.0f; x < 12.0f; x += 0.001f) {
    double want = 1.0 + erf(x / sqrt(2.0));
    assert_true(fabs(fsVM_one_plus_erf_sqrt1_2(x, fsVM_expf(-0.5f * x * x)) - want) < 6e-7);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_blas_lazy), /* first: checks nothing loaded BLAS before */
    cmocka_unit_test(test_rng_slices),
    cmocka_unit_test(test_bf16),
    cmocka_unit_test(test_tensor_lifetime),
    cmocka_unit_test(test_cpu_allocator_reuses_blocks),
    cmocka_unit_test(test_vmath_accuracy),
    cmocka_unit_test(test_emulated_cuda_faults),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
