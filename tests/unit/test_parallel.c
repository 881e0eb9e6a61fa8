/* test_parallel.c -- the kernels' worker pool (parallel.c): every part runs
 * once per call over many calls in a row, no worker runs two parts at once,
 * the lowest failing part's message comes back, nested calls and calls
 * from several threads at once, the caller's bfloat16-operand setting in
 * the parts, OpenBLAS held to one thread only inside parts that reach it,
 * and a forked child's own workers.  Run at 3 threads (two workers) on any
 * machine: OPENBLAS_NUM_THREADS is set before the pool reads it. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "config.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "blas.h"
#include "rt_testutil.h"

enum { THREADS = 3, MAXP = 64 };

typedef struct job {
  int call;                 /* written into each part's slot */
  int out[MAXP];
  atomic_int runs[MAXP];    /* times each part ran */
  atomic_int busy[THREADS]; /* a worker inside a part */
  atomic_int overlap;       /* a worker found busy */
  atomic_int on_workers;    /* parts run off the calling thread */
  int fail_from;            /* parts >= this fail (MAXP: none) */
  fs_dtype gemm_seen[MAXP];
} job;

static int part(void *ctx, int i, int worker) {
  job *j = ctx;
  if (worker < 0 || worker >= THREADS || atomic_exchange(&j->busy[worker], 1)) atomic_fetch_add(&j->overlap, 1);
  if (worker > 0) atomic_fetch_add(&j->on_workers, 1);
  for (volatile int spin = 0; spin < 2000; spin++) {} /* long enough for a worker to take some */
  j->out[i] = j->call * 1000 + i;
  j->gemm_seen[i] = fsB_gemm_operands();
  atomic_fetch_add(&j->runs[i], 1);
  if (worker >= 0 && worker < THREADS) atomic_store(&j->busy[worker], 0);
  if (i >= j->fail_from) {
    fsT_seterr("part %d failed", i);
    return -1;
  }
  return 0;
}

static void job_init(job *j, int call, int fail_from) {
  memset(j, 0, sizeof *j);
  j->call = call;
  j->fail_from = fail_from;
}

/* every part ran exactly once and wrote its slot */
static void check_ran(job *j, int nparts) {
  for (int i = 0; i < nparts; i++) {
    assert_int_equal(atomic_load(&j->runs[i]), 1);
    assert_int_equal(j->out[i], j->call * 1000 + i);
  }
  for (int i = nparts; i < MAXP; i++) assert_int_equal(atomic_load(&j->runs[i]), 0);
  assert_int_equal(atomic_load(&j->overlap), 0);
}

/* The first test: parts that never reach OpenBLAS do not load it. */
static void test_many_calls(void **state) {
  (void)state;
  assert_int_equal(fsB_threads(), THREADS);
  int on_workers = 0;
  for (int call = 0; call < 20000; call++) {
    int nparts = 1 + call % MAXP;
    job j;
    job_init(&j, call, MAXP);
    assert_int_equal(fsB_parallel(nparts, part, &j), 0);
    check_ran(&j, nparts);
    on_workers += atomic_load(&j.on_workers);
  }
  assert_true(on_workers > 0); /* the workers took part */
  assert_false(fsB_blas_loaded());
}

static void test_errors(void **state) {
  (void)state;
  for (int call = 0; call < 2000; call++) {
    job j;
    job_init(&j, call, 5 + call % 7); /* parts from 5..11 on fail */
    fsT_seterr("stale");
    assert_int_equal(fsB_parallel(20, part, &j), -1);
    check_ran(&j, 20); /* the other parts still ran */
    char want[32];
    snprintf(want, sizeof want, "part %d failed", 5 + call % 7);
    assert_string_equal(fsT_error(), want);
    /* and the next call succeeds */
    job_init(&j, call, MAXP);
    assert_int_equal(fsB_parallel(20, part, &j), 0);
    check_ran(&j, 20);
  }
}

/* A part that runs a whole call of its own (on its thread, in order). */
typedef struct nest {
  job inner[MAXP];
  int fail_part; /* the outer part whose inner call fails */
} nest;

static int outer_part(void *ctx, int i, int worker) {
  (void)worker;
  nest *n = ctx;
  job_init(&n->inner[i], i, i == n->fail_part ? 3 : MAXP);
  return fsB_parallel(8, part, &n->inner[i]);
}

static void test_nested(void **state) {
  (void)state;
  for (int round = 0; round < 200; round++) {
    nest *n = malloc(sizeof *n);
    assert_non_null(n);
    n->fail_part = round % 2 ? 6 : MAXP;
    int rc = fsB_parallel(12, outer_part, n);
    for (int i = 0; i < 12; i++) {
      check_ran(&n->inner[i], 8);
      assert_int_equal(atomic_load(&n->inner[i].on_workers), 0); /* inner parts stay on their thread */
    }
    if (round % 2) {
      assert_int_equal(rc, -1);
      assert_string_equal(fsT_error(), "part 3 failed");
    } else {
      assert_int_equal(rc, 0);
    }
    free(n);
  }
}

static void *caller(void *arg) {
  int *bad = arg;
  for (int call = 0; call < 3000; call++) {
    job j;
    job_init(&j, call, MAXP);
    int nparts = 1 + call % 33;
    if (fsB_parallel(nparts, part, &j) != 0) (*bad)++;
    for (int i = 0; i < nparts; i++)
      if (atomic_load(&j.runs[i]) != 1 || j.out[i] != call * 1000 + i) (*bad)++;
    if (atomic_load(&j.overlap)) (*bad)++;
  }
  return NULL;
}

static void test_concurrent_callers(void **state) {
  (void)state;
  pthread_t t[3];
  int bad[3] = {0};
  for (int k = 0; k < 3; k++) assert_int_equal(pthread_create(&t[k], NULL, caller, &bad[k]), 0);
  for (int k = 0; k < 3; k++) {
    pthread_join(t[k], NULL);
    assert_int_equal(bad[k], 0);
  }
}

static void test_gemm_setting(void **state) {
  (void)state;
  static const fs_dtype types[] = {FS_F32, FS_BF16, FS_F16};
  for (int round = 0; round < 99; round++) {
    fs_dtype on = types[round % 3];
    fs_dtype old = fsB_set_gemm_operands(on);
    job j;
    job_init(&j, round, MAXP);
    assert_int_equal(fsB_parallel(MAXP, part, &j), 0);
    for (int i = 0; i < MAXP; i++) assert_int_equal(j.gemm_seen[i], on);
    assert_int_equal(fsB_gemm_operands(), on);
    fsB_set_gemm_operands(old);
  }
}

/* A part that runs a product through OpenBLAS and reads the thread count
 * it ran with. */
typedef struct blas_job {
  int seen[THREADS * 4];
  int failed;
} blas_job;

static int blas_part(void *ctx, int i, int worker) {
  (void)worker;
  blas_job *b = ctx;
  float a[4] = {1, 2, 3, 4}, c[4];
  if (fsB_sgemm_f32(false, false, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2) != 0) return -1;
  if (c[0] != 7 || c[3] != 22) b->failed++;
  b->seen[i] = fsB_set_blas_threads(1); /* held: already 1 */
  return 0;
}

static void test_blas_held_in_parts(void **state) {
  (void)state;
  float a[4] = {1, 2, 3, 4}, c[4];
  if (fsB_sgemm_f32(false, false, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2) != 0) skip(); /* no OpenBLAS */
  int own = fsB_set_blas_threads(THREADS);
  assert_true(own > 0);
  for (int round = 0; round < 50; round++) {
    blas_job b = {{0}, 0};
    assert_int_equal(fsB_parallel(THREADS * 4, blas_part, &b), 0);
    assert_int_equal(b.failed, 0);
    for (int i = 0; i < THREADS * 4; i++) assert_int_equal(b.seen[i], 1);
    assert_int_equal(fsB_set_blas_threads(THREADS), THREADS); /* given back after the call */
  }
  fsB_set_blas_threads(own);
}

static void test_forked_child(void **state) {
  (void)state;
  job j;
  job_init(&j, 1, MAXP);
  assert_int_equal(fsB_parallel(MAXP, part, &j), 0); /* the parent's workers exist */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int on_workers = 0;
    for (int call = 0; call < 2000; call++) {
      job_init(&j, call, MAXP);
      if (fsB_parallel(MAXP, part, &j) != 0) _exit(1);
      for (int i = 0; i < MAXP; i++)
        if (atomic_load(&j.runs[i]) != 1 || j.out[i] != call * 1000 + i) _exit(2);
      on_workers += atomic_load(&j.on_workers);
    }
    _exit(on_workers > 0 ? 0 : 3);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
  setenv("OPENBLAS_NUM_THREADS", "3", 1);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_many_calls), /* first: checks nothing loaded OpenBLAS before */
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_nested),
    cmocka_unit_test(test_concurrent_callers),
    cmocka_unit_test(test_gemm_setting),
    cmocka_unit_test(test_blas_held_in_parts),
    cmocka_unit_test(test_forked_child),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
