/* test_comm_gloo.c -- the gloo transport (comm_gloo.c and its module,
 * gloo_shim.cc) on loopback: every op and dtype for worlds 2-4 against the
 * shm transport's contract (bf16 summed in float32 and rounded once, mean =
 * sum / world, int64 wraps and truncates, NaN propagates through max/min),
 * bitwise agreement between ranks, several buffers as one, in-place
 * all_gather and reduce_scatter, broadcast from any root; then the failures:
 * a dead peer named with its node, a timeout, a module that cannot load.
 * Built only with libgloo; the ranks find the module through FS_GLOO_MODULE
 * (set by the test harness, Makefile.am). */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cctest.h"
#include "comm.h"
#include "rendezvous.h"

typedef struct job {
  double timeout;
  int local_world;
  int (*body)(fsCC_comm *c, void *arg);
  void *arg;
} job;

static int rank_main(fsLN_rdzv *rv, void *arg) {
  job *j = arg;
  fsCC_config cfg = {.timeout = j->timeout ? j->timeout : 60, .local_world = j->local_world};
  fsCC_comm *c = fsCC_connect(rv, FSCC_GLOO, &cfg);
  CC_CHECK(c);
  int rc = j->body(c, j->arg);
  fsCC_destroy(c);
  return rc;
}

static int run(int world, int (*body)(fsCC_comm *, void *), void *arg) {
  job j = {.body = body, .arg = arg};
  return cc_fork_rdzv(world, rank_main, &j);
}

/* Element i of the reduction, as float32 (the ring's order differs from
 * rank order: float results are compared with a tolerance) or exact int64. */
static double expect(fs_dtype dt, fsCC_op op, int world, size_t i) {
  if (dt == FS_I64) {
    int64_t acc = cc_ival(0, i);
    for (int r = 1; r < world; r++) {
      int64_t v = cc_ival(r, i);
      acc = op == FSCC_MAX ? (v > acc ? v : acc) : op == FSCC_MIN ? (v < acc ? v : acc) : acc + v;
    }
    return (double)(op == FSCC_MEAN ? acc / world : acc);
  }
  double acc = 0;
  for (int r = 0; r < world; r++) {
    double v = dt == FS_BF16 ? fsT_bf16_to_f32(fsT_f32_to_bf16(cc_fval(r, i))) : dt == FS_F64 ? cc_dval(r, i) : cc_fval(r, i);
    acc = r == 0 ? v : op == FSCC_MAX ? fmax(acc, v) : op == FSCC_MIN ? fmin(acc, v) : acc + v;
  }
  return op == FSCC_MEAN ? acc / world : acc;
}

static bool close_to(fs_dtype dt, const void *buf, size_t i, double want) {
  if (dt == FS_I64) return ((const int64_t *)buf)[i] == (int64_t)want;
  double got = dt == FS_F32   ? ((const float *)buf)[i]
               : dt == FS_F64 ? ((const double *)buf)[i] : fsT_bf16_to_f32(((const uint16_t *)buf)[i]);
  double tol = (dt == FS_F32 ? 1e-5 : dt == FS_F64 ? 1e-13 : 1e-2) * (fabs(want) + 1);
  return fabs(got - want) <= tol;
}

/* Every rank holds the same bytes: gathered (as bfloat16 pairs: any
 * dtype's bytes) and compared with rank 0's. */
static int same_everywhere(fsCC_comm *c, const void *buf, size_t bytes) {
  unsigned char *all = malloc(bytes * (size_t)c->world);
  int rc = all && fsCC_all_gather(c, buf, all, bytes / 2, FS_BF16) == 0 ? 0 : 1;
  for (int r = 1; rc == 0 && r < c->world; r++)
    if (memcmp(all, all + (size_t)r * bytes, bytes)) rc = 1;
  free(all);
  return rc;
}

typedef struct reduce_case {
  fs_dtype dt;
  fsCC_op op;
  size_t count;
} reduce_case;

static int body_all_reduce(fsCC_comm *c, void *arg) {
  const reduce_case *k = arg;
  size_t es = fsT_dtype_size(k->dt);
  void *buf = malloc(k->count * es + 8);
  CC_CHECK(buf);
  cc_fill(k->dt, c->rank, buf, k->count, 0);
  int rc = fsCC_all_reduce(c, buf, k->count, k->dt, k->op);
  for (size_t i = 0; rc == 0 && i < k->count; i++)
    if (!close_to(k->dt, buf, i, expect(k->dt, k->op, c->world, i))) {
      fprintf(stderr, "rank %d %s %s element %zu: %g\n", c->rank, fsT_dtype_name(k->dt), fsCC_op_name(k->op), i,
              expect(k->dt, k->op, c->world, i));
      rc = 1;
    }
  if (rc == 0) rc = same_everywhere(c, buf, k->count * es);
  free(buf);
  CC_CHECK(rc == 0);
  return 0;
}

static void test_all_reduce(void **state) {
  const fs_dtype dts[] = {FS_F32, FS_BF16, FS_I64, FS_F64};
  for (int world = 2; world <= 4; world++)
    for (int d = 0; d < 4; d++)
      for (int op = FSCC_SUM; op <= FSCC_MIN; op++) {
        reduce_case k = {dts[d], (fsCC_op)op, world == 3 ? 1 : 1001};
        assert_int_equal(run(world, body_all_reduce, &k), 0);
      }
}

/* NaN wins max and min; int64 sums wrap; bf16 ties round to even once. */
static int body_special(fsCC_comm *c, void *arg) {
  float f[2] = {c->rank == 1 ? NAN : 1.0f, c->rank == 1 ? NAN : 2.0f};
  CC_CHECK(fsCC_all_reduce(c, f, 1, FS_F32, FSCC_MAX) == 0 && isnan(f[0]));
  CC_CHECK(fsCC_all_reduce(c, f + 1, 1, FS_F32, FSCC_MIN) == 0 && isnan(f[1]));
  int64_t w = INT64_MAX;
  CC_CHECK(fsCC_all_reduce(c, &w, 1, FS_I64, FSCC_SUM) == 0);
  CC_CHECK(w == (int64_t)((uint64_t)INT64_MAX * (uint64_t)c->world));
  int64_t m = c->rank == 0 ? -7 : 0; /* -7 / world truncates toward zero */
  CC_CHECK(fsCC_all_reduce(c, &m, 1, FS_I64, FSCC_MEAN) == 0 && m == -7 / c->world);
  /* 1 + 2^-8 per rank pair: summed in float32 the tie is decided once */
  uint16_t h = fsT_f32_to_bf16(c->rank == 0 ? 1.0f : 0.00390625f);
  CC_CHECK(fsCC_all_reduce(c, &h, 1, FS_BF16, FSCC_SUM) == 0);
  CC_CHECK(h == fsT_f32_to_bf16(1.0f + 0.00390625f * (float)(c->world - 1)));
  return 0;
}

static void test_special_values(void **state) {
  assert_int_equal(run(2, body_special, NULL), 0);
  assert_int_equal(run(3, body_special, NULL), 0);
}

/* DDP's gradients: several buffers (empty ones too) as one collective. */
static int body_bufs(fsCC_comm *c, void *arg) {
  float a[5], b[1], d[300];
  cc_fill(FS_F32, c->rank, a, 5, 0);
  cc_fill(FS_F32, c->rank, b, 1, 5);
  cc_fill(FS_F32, c->rank, d, 300, 6);
  fsCC_buf bufs[4] = {{a, 5}, {NULL, 0}, {b, 1}, {d, 300}};
  CC_CHECK(fsCC_all_reduce_bufs(c, bufs, 4, FS_F32, FSCC_MEAN) == 0);
  for (size_t i = 0; i < 306; i++) {
    const float *p = i < 5 ? a + i : i < 6 ? b : d + (i - 6);
    CC_CHECK(close_to(FS_F32, p, 0, expect(FS_F32, FSCC_MEAN, c->world, i)));
  }
  return 0;
}

static void test_all_reduce_bufs(void **state) { assert_int_equal(run(3, body_bufs, NULL), 0); }

/* all_gather and reduce_scatter, out of place and in place; broadcast from
 * every root. */
static int body_blocks(fsCC_comm *c, void *arg) {
  enum { N = 37 };
  int W = c->world, R = c->rank;
  float mine[N], all[4 * N], out[N], inplace[4 * N];
  cc_fill(FS_F32, R, mine, N, 0);
  CC_CHECK(fsCC_all_gather(c, mine, all, N, FS_F32) == 0);
  memcpy(inplace + R * N, mine, sizeof mine);
  CC_CHECK(fsCC_all_gather(c, inplace + R * N, inplace, N, FS_F32) == 0);
  for (int r = 0; r < W; r++)
    for (int i = 0; i < N; i++) CC_CHECK(all[r * N + i] == cc_fval(r, (size_t)i) && inplace[r * N + i] == all[r * N + i]);
  float send[4 * N];
  cc_fill(FS_F32, R, send, (size_t)(W * N), 0);
  CC_CHECK(fsCC_reduce_scatter(c, send, out, N, FS_F32, FSCC_SUM) == 0);
  CC_CHECK(fsCC_reduce_scatter(c, send, send + R * N, N, FS_F32, FSCC_SUM) == 0);
  for (int i = 0; i < N; i++) {
    CC_CHECK(close_to(FS_F32, out, (size_t)i, expect(FS_F32, FSCC_SUM, W, (size_t)(R * N + i))));
    CC_CHECK(send[R * N + i] == out[i]);
  }
  for (int root = 0; root < W; root++) {
    int64_t v[3] = {R, R * 10, -R};
    CC_CHECK(fsCC_broadcast(c, v, 3, FS_I64, root) == 0 && v[0] == root && v[1] == root * 10 && v[2] == -root);
  }
  CC_CHECK(fsCC_barrier(c) == 0);
  return 0;
}

static void test_blocks(void **state) {
  assert_int_equal(run(2, body_blocks, NULL), 0);
  assert_int_equal(run(4, body_blocks, NULL), 0);
}

/* Rank 2 (node 1 of two-rank nodes) dies: the others' next collective fails
 * at once, naming it or the rank that left because of it. */
static int body_dead(fsCC_comm *c, void *arg) {
  if (c->rank == 2) _exit(0);
  float x = 1;
  int rc = fsCC_all_reduce(c, &x, 1, FS_F32, FSCC_SUM);
  CC_CHECK(rc < 0 && strstr(fsT_error(), "lost rank ") && strstr(fsT_error(), "it died or left the run"));
  fprintf(stderr, "rank %d: %s\n", c->rank, fsT_error());
  CC_CHECK(fsCC_barrier(c) < 0 && strstr(fsT_error(), "aborted"));
  return 0;
}

static int dead_main(fsLN_rdzv *rv, void *arg) {
  fsCC_config cfg = {.timeout = 20, .local_world = 2};
  fsCC_comm *c = fsCC_connect(rv, FSCC_GLOO, &cfg);
  CC_CHECK(c);
  int rc = body_dead(c, arg);
  fsCC_destroy(c);
  return rc;
}

static void test_dead_peer(void **state) { assert_int_equal(cc_fork_rdzv(4, dead_main, NULL), 0); }

/* A rank that never calls: the others time out after the configured time. */
static int timeout_main(fsLN_rdzv *rv, void *arg) {
  fsCC_config cfg = {.timeout = 1};
  fsCC_comm *c = fsCC_connect(rv, FSCC_GLOO, &cfg);
  CC_CHECK(c);
  if (c->rank == 1) {
    sleep(3);
    fsCC_destroy(c);
    return 0;
  }
  float x = 1;
  int rc = fsCC_all_reduce(c, &x, 1, FS_F32, FSCC_SUM);
  fsCC_destroy(c);
  CC_CHECK(rc < 0 && strstr(fsT_error(), "timed out after 1 s"));
  return 0;
}

static void test_timeout(void **state) { assert_int_equal(cc_fork_rdzv(2, timeout_main, NULL), 0); }

/* A module that cannot load on one rank: every rank fails, naming it. */
static int no_module_main(fsLN_rdzv *rv, void *arg) {
  if (fsLN_rdzv_rank(rv) == 1) setenv("FS_GLOO_MODULE", "/nonexistent/fabricscript-gloo.so", 1);
  fsCC_config cfg = {.timeout = 20};
  fsCC_comm *c = fsCC_connect(rv, FSCC_GLOO, &cfg);
  CC_CHECK(!c);
  const char *want = fsLN_rdzv_rank(rv) == 1 ? "cannot load the module fabricscript-gloo.so" : "rank 1 could not";
  CC_CHECK(strstr(fsT_error(), want));
  return 0;
}

static void test_no_module(void **state) { assert_int_equal(cc_fork_rdzv(3, no_module_main, NULL), 0); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_special_values),
      cmocka_unit_test(test_all_reduce_bufs),
      cmocka_unit_test(test_blocks),
      cmocka_unit_test(test_dead_peer),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_no_module),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
