/* test_comm_shm.c -- the shared-memory collectives: every op, dtype and world
 * size 1-4, counts that do not divide by the world size, buffers many times
 * the staging area, bitwise results, and the failures (mismatched calls, a
 * dead or absent rank, bad arguments). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "cctest.h"
#include "comm.h"

#define SMALL_STAGING 1024 /* bytes per rank: most tests move many chunks */

typedef struct job {
  char name[64];
  double timeout;
  int (*body)(fsCC_comm *c, void *arg);
  void *arg;
} job;

static int rank_main(int rank, int world, void *arg) {
  job *j = arg;
  fsCC_config cfg = {.rank = rank, .world = world, .timeout = j->timeout};
  fsCC_comm *c = fsCC_shm_open(j->name, &cfg);
  if (!c) {
    fprintf(stderr, "rank %d: %s\n", rank, fsT_error());
    return 1;
  }
  int rc = j->body(c, j->arg);
  fsCC_destroy(c);
  return rc;
}

/* The parent makes the segment (as the launcher does), the ranks attach. */
static int run(int world, size_t staging, double timeout, int (*body)(fsCC_comm *, void *),
               void *arg) {
  job j = {.timeout = timeout ? timeout : 60, .body = body, .arg = arg};
  cc_shm_name(j.name, sizeof j.name);
  if (fsCC_shm_create(j.name, world, staging) < 0) fail_msg("%s", fsT_error());
  int failed = cc_fork_ranks(world, rank_main, &j);
  shm_unlink(j.name);
  return failed;
}

/* The contract: in rank order, bf16 accumulated in f32 and rounded once,
 * float64 in double. */
static void expect_reduce(fs_dtype dt, fsCC_op op, int world, size_t i, void *out) {
  if (dt == FS_F64) {
    double acc = cc_dval(0, i);
    for (int r = 1; r < world; r++) {
      double v = cc_dval(r, i);
      acc = op == FSCC_MAX ? (v > acc ? v : acc) : op == FSCC_MIN ? (v < acc ? v : acc) : acc + v;
    }
    *(double *)out = op == FSCC_MEAN ? acc / world : acc;
    return;
  }
  if (dt == FS_I64) {
    int64_t acc = cc_ival(0, i);
    for (int r = 1; r < world; r++) {
      int64_t v = cc_ival(r, i);
      acc = op == FSCC_MAX ? (v > acc ? v : acc) : op == FSCC_MIN ? (v < acc ? v : acc) : acc + v;
    }
    *(int64_t *)out = op == FSCC_MEAN ? acc / world : acc;
    return;
  }
  float acc = 0;
  for (int r = 0; r < world; r++) {
    float v = dt == FS_F32 ? cc_fval(r, i) : fsT_bf16_to_f32(fsT_f32_to_bf16(cc_fval(r, i)));
    acc = r == 0 ? v : op == FSCC_MAX ? (v > acc ? v : acc) : op == FSCC_MIN ? (v < acc ? v : acc) : acc + v;
  }
  if (op == FSCC_MEAN) acc /= (float)world;
  if (dt == FS_F32) *(float *)out = acc;
  else *(uint16_t *)out = fsT_f32_to_bf16(acc);
}

typedef struct params {
  fs_dtype dt;
  fsCC_op op;
  size_t count;
  int root;
} params;

static int body_all_reduce(fsCC_comm *c, void *arg) {
  params *p = arg;
  size_t es = fsT_dtype_size(p->dt);
  unsigned char *buf = malloc(p->count * es + 1), want[8];
  CC_CHECK(buf);
  cc_fill(p->dt, c->rank, buf, p->count, 0);
  int rc = fsCC_all_reduce(c, buf, p->count, p->dt, p->op);
  if (rc) fprintf(stderr, "%s\n", fsT_error());
  for (size_t i = 0; !rc && i < p->count; i++) {
    expect_reduce(p->dt, p->op, c->world, i, want);
    if (memcmp(buf + i * es, want, es)) {
      fprintf(stderr, "all_reduce %s %s: element %zu differs\n", fsT_dtype_name(p->dt),
              fsCC_op_name(p->op), i);
      rc = 1;
    }
  }
  free(buf);
  return rc != 0;
}

static int body_all_gather(fsCC_comm *c, void *arg) {
  params *p = arg;
  size_t es = fsT_dtype_size(p->dt), n = p->count;
  unsigned char *send = malloc(n * es + 1), *recv = malloc(n * es * (size_t)c->world + 1),
                *want = malloc(n * es + 1);
  int rc = !send || !recv || !want;
  if (!rc) {
    cc_fill(p->dt, c->rank, send, n, 0);
    rc = fsCC_all_gather(c, send, recv, n, p->dt) != 0;
    if (rc) fprintf(stderr, "%s\n", fsT_error());
  }
  for (int r = 0; !rc && r < c->world; r++) {
    cc_fill(p->dt, r, want, n, 0);
    rc = memcmp(recv + (size_t)r * n * es, want, n * es) != 0;
  }
  free(send);
  free(recv);
  free(want);
  return rc;
}

static int body_reduce_scatter(fsCC_comm *c, void *arg) {
  params *p = arg;
  size_t es = fsT_dtype_size(p->dt), n = p->count, total = n * (size_t)c->world;
  unsigned char *send = malloc(total * es + 1), *recv = malloc(n * es + 1), want[8];
  int rc = !send || !recv;
  if (!rc) {
    cc_fill(p->dt, c->rank, send, total, 0);
    rc = fsCC_reduce_scatter(c, send, recv, n, p->dt, p->op) != 0;
    if (rc) fprintf(stderr, "%s\n", fsT_error());
  }
  for (size_t i = 0; !rc && i < n; i++) {
    expect_reduce(p->dt, p->op, c->world, (size_t)c->rank * n + i, want);
    rc = memcmp(recv + i * es, want, es) != 0;
  }
  free(send);
  free(recv);
  return rc;
}

static int body_broadcast(fsCC_comm *c, void *arg) {
  params *p = arg;
  size_t es = fsT_dtype_size(p->dt), n = p->count;
  unsigned char *buf = malloc(n * es + 1), *want = malloc(n * es + 1);
  int rc = !buf || !want;
  if (!rc) {
    cc_fill(p->dt, c->rank, buf, n, 0);
    cc_fill(p->dt, p->root, want, n, 0);
    rc = fsCC_broadcast(c, buf, n, p->dt, p->root) != 0 || memcmp(buf, want, n * es) != 0;
  }
  free(buf);
  free(want);
  return rc;
}

static const fs_dtype dtypes[] = {FS_F32, FS_BF16, FS_I64, FS_F64};
#define NDTYPES (int)(sizeof dtypes / sizeof *dtypes)

/* Counts: 1, odd, and several times what one staging chunk holds. */
static size_t counts(fs_dtype dt, int k) {
  size_t per = SMALL_STAGING / fsT_dtype_size(dt);
  return k == 0 ? 1 : k == 1 ? 7 : 3 * per + 5;
}

/* Every dtype, op (where the collective takes one) and count, in one run of
 * the ranks: the cases follow one another on the same communicator. */
typedef struct matrix {
  const char *name;
  int (*fn)(fsCC_comm *c, void *arg);
  bool ops;
} matrix;

static int body_matrix(fsCC_comm *c, void *arg) {
  const matrix *m = arg;
  for (int d = 0; d < NDTYPES; d++)
    for (int op = FSCC_SUM; op <= (m->ops ? FSCC_MIN : FSCC_SUM); op++)
      for (int k = 0; k < 3; k++) {
        params p = {.dt = dtypes[d], .op = op, .count = counts(dtypes[d], k), .root = c->world - 1};
        if (m->fn(c, &p)) {
          fprintf(stderr, "%s world %d %s %s count %zu failed\n", m->name, c->world,
                  fsT_dtype_name(p.dt), fsCC_op_name(p.op), p.count);
          return 1;
        }
      }
  return 0;
}

static void run_matrix(const matrix *m) {
  for (int world = 1; world <= 4; world++)
    if (run(world, SMALL_STAGING, 0, body_matrix, (void *)m)) fail_msg("%s world %d", m->name, world);
}

static void test_all_reduce(void **state) { run_matrix(&(matrix){"all_reduce", body_all_reduce, true}); }
static void test_all_gather(void **state) { run_matrix(&(matrix){"all_gather", body_all_gather, false}); }
static void test_reduce_scatter(void **state) {
  run_matrix(&(matrix){"reduce_scatter", body_reduce_scatter, true});
}
static void test_broadcast(void **state) { run_matrix(&(matrix){"broadcast", body_broadcast, false}); }

/* Several buffers reduced as one concatenation (empty ones included), the
 * chunks straddling buffer boundaries. */
static int body_bufs(fsCC_comm *c, void *arg) {
  static const size_t counts_of[] = {0, 3, 0, 1000, 1, 257, 0};
  enum { NB = sizeof counts_of / sizeof *counts_of };
  for (int d = 0; d < NDTYPES; d++)
    for (int op = FSCC_SUM; op <= FSCC_MAX; op += 2) {
      fs_dtype dt = dtypes[d];
      size_t es = fsT_dtype_size(dt), base = 0;
      fsCC_buf bufs[NB];
      unsigned char want[8];
      for (int i = 0; i < NB; i++) {
        bufs[i] = (fsCC_buf){malloc(counts_of[i] * es + 1), counts_of[i]};
        CC_CHECK(bufs[i].data);
        cc_fill(dt, c->rank, bufs[i].data, counts_of[i], base);
        base += counts_of[i];
      }
      int rc = fsCC_all_reduce_bufs(c, bufs, NB, dt, op);
      base = 0;
      for (int i = 0; i < NB; i++) {
        for (size_t k = 0; rc == 0 && k < counts_of[i]; k++) {
          expect_reduce(dt, op, c->world, base + k, want);
          rc = memcmp((unsigned char *)bufs[i].data + k * es, want, es) != 0;
        }
        base += counts_of[i];
        free(bufs[i].data);
      }
      if (rc) {
        fprintf(stderr, "all_reduce_bufs %s %s: %s\n", fsT_dtype_name(dt), fsCC_op_name(op), fsT_error());
        return 1;
      }
    }
  return 0;
}

static void test_all_reduce_bufs(void **state) {
  for (int world = 1; world <= 4; world++)
    assert_int_equal(run(world, SMALL_STAGING, 0, body_bufs, NULL), 0);
}

/* With the default staging (4 MiB per rank): a buffer larger than it. */
static void test_default_staging_large(void **state) {
  params p = {.dt = FS_F32, .op = FSCC_SUM, .count = (FSCC_DEFAULT_STAGING / 4) * 3 / 2 + 3};
  assert_int_equal(run(2, 0, 0, body_all_reduce, &p), 0);
  p.count = FSCC_DEFAULT_STAGING / 4 / 2 + 1; /* x2 ranks: more than one slot */
  assert_int_equal(run(2, 0, 0, body_reduce_scatter, &p), 0);
}

/* bf16: 1 + 3 * 2^-9 rounds up to 1 + 2^-7 when accumulated in f32; adding
 * in bf16 step by step would lose every 2^-9 and give 1.  Ties go to even. */
static int body_bf16_rounding(fsCC_comm *c, void *arg) {
  uint16_t v[3] = {
      fsT_f32_to_bf16(c->rank == 0 ? 1.0f : 0x1p-9f),
      fsT_f32_to_bf16(c->rank == 0 ? 1.0f : c->rank == 1 ? 0x1p-8f : 0.0f),
      fsT_f32_to_bf16(c->rank == 0 ? 1.0f + 0x1p-7f : c->rank == 1 ? 0x1p-8f : 0.0f),
  };
  CC_CHECK(fsCC_all_reduce(c, v, 3, FS_BF16, FSCC_SUM) == 0);
  CC_CHECK(fsT_bf16_to_f32(v[0]) == 1.0f + 0x1p-7f);
  CC_CHECK(fsT_bf16_to_f32(v[1]) == 1.0f);               /* tie: to even (down) */
  CC_CHECK(fsT_bf16_to_f32(v[2]) == 1.0f + 0x1p-6f);     /* tie: to even (up) */
  return 0;
}

static void test_bf16_rounding(void **state) {
  assert_int_equal(run(4, SMALL_STAGING, 0, body_bf16_rounding, NULL), 0);
}

/* int64 mean truncates toward zero, as NCCL's average of integers. */
static int body_i64_mean(fsCC_comm *c, void *arg) {
  int64_t v[2] = {c->rank == 0 ? -7 : 0, c->rank == 0 ? INT64_MAX : 1};
  CC_CHECK(fsCC_all_reduce(c, v, 1, FS_I64, FSCC_MEAN) == 0);
  CC_CHECK(v[0] == -3);
  CC_CHECK(fsCC_all_reduce(c, v + 1, 1, FS_I64, FSCC_MAX) == 0);
  CC_CHECK(v[1] == INT64_MAX);
  return 0;
}

static void test_i64_mean(void **state) { assert_int_equal(run(2, SMALL_STAGING, 0, body_i64_mean, NULL), 0); }

/* FSDP's pattern on n elements that do not divide by the world size: pad to
 * fsCC_padded, reduce-scatter to shards, all-gather back (in place): the
 * first n elements equal an all_reduce of the unpadded vector. */
static int body_padded_roundtrip(fsCC_comm *c, void *arg) {
  size_t n = *(size_t *)arg, shard = fsCC_shard(n, c->world), padded = fsCC_padded(n, c->world);
  CC_CHECK(padded % (size_t)c->world == 0 && padded >= n && padded - n < (size_t)c->world);
  float *full = calloc(padded, sizeof *full), *sum = calloc(n, sizeof *sum);
  CC_CHECK(full && sum);
  cc_fill(FS_F32, c->rank, full, n, 0);
  cc_fill(FS_F32, c->rank, sum, n, 0);
  int rc = fsCC_all_reduce(c, sum, n, FS_F32, FSCC_SUM) ||
           fsCC_reduce_scatter(c, full, full + (size_t)c->rank * shard, shard, FS_F32, FSCC_SUM) ||
           fsCC_all_gather(c, full + (size_t)c->rank * shard, full, shard, FS_F32) ||
           memcmp(full, sum, n * sizeof *sum);
  for (size_t i = n; !rc && i < padded; i++) rc = full[i] != 0.0f;
  free(full);
  free(sum);
  return rc;
}

static void test_padded_roundtrip(void **state) {
  size_t ns[] = {1, 10, 257, 3 * SMALL_STAGING + 1};
  for (int world = 1; world <= 4; world++)
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
      if (run(world, SMALL_STAGING, 0, body_padded_roundtrip, &ns[k]))
        fail_msg("padded round trip world %d n %zu", world, ns[k]);
}

/* Two runs of the same reduction give the same bits (fixed order). */
static int body_repeat(fsCC_comm *c, void *arg) {
  size_t n = 3 * SMALL_STAGING;
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  CC_CHECK(a && b);
  for (size_t i = 0; i < n; i++) a[i] = b[i] = 1.0f / (float)(i + 1 + (size_t)c->rank * 7);
  int rc = fsCC_all_reduce(c, a, n, FS_F32, FSCC_MEAN) || fsCC_barrier(c) ||
           fsCC_all_reduce(c, b, n, FS_F32, FSCC_MEAN) || memcmp(a, b, n * sizeof *a);
  free(a);
  free(b);
  return rc;
}

static void test_repeatable(void **state) { assert_int_equal(run(3, SMALL_STAGING, 0, body_repeat, NULL), 0); }

/* --- failures ---------------------------------------------------------------- */

static int body_mismatch(fsCC_comm *c, void *arg) {
  float v[5] = {0};
  CC_CHECK(fsCC_all_reduce(c, v, c->rank ? 5 : 4, FS_F32, FSCC_SUM) < 0);
  CC_CHECK(strstr(fsT_error(), "collective mismatch"));
  CC_CHECK(strstr(fsT_error(), "all_reduce(4 x float32)") || strstr(fsT_error(), "all_reduce(5 x float32)"));
  CC_CHECK(fsCC_barrier(c) < 0); /* aborted for good */
  CC_CHECK(strstr(fsT_error(), "aborted"));
  return 0;
}

static void test_mismatch(void **state) { assert_int_equal(run(2, SMALL_STAGING, 0, body_mismatch, NULL), 0); }

/* Rank 1 attaches and exits without a word (its pid stays registered). */
static int body_dead_peer(fsCC_comm *c, void *arg) {
  if (c->rank == 1) _exit(0);
  CC_CHECK(fsCC_barrier(c) < 0);
  CC_CHECK(strstr(fsT_error(), "rank 1 (pid"));
  CC_CHECK(strstr(fsT_error(), "died"));
  return 0;
}

static void test_dead_peer(void **state) {
  /* the peer check, not the timeout, must end the wait */
  assert_int_equal(run(2, SMALL_STAGING, 600, body_dead_peer, NULL), 0);
}

/* Rank 2 stays attached but never calls (until the others have given up):
 * they time out, naming it.  Rank 0 starts its wait only once rank 1 is about
 * to call, so on a loaded machine a late rank 1 is not named too. */
static int body_absent(fsCC_comm *c, void *arg) {
  int *p = arg;
  char b[2];
  if (c->rank == 2) {
    struct pollfd pf = {p[0], POLLIN, 0};
    for (int got = 0; got < 2 && poll(&pf, 1, 60000) == 1;) got += (int)read(p[0], b, 2 - (size_t)got);
    return 0;
  }
  struct pollfd ready = {p[2], POLLIN, 0}; /* bounded: a failed rank 1 must not hang rank 0 */
  if (c->rank == 1) CC_CHECK(write(p[3], "r", 1) == 1);
  else CC_CHECK(poll(&ready, 1, 60000) == 1 && read(p[2], b, 1) == 1);
  float v = 1;
  int rc = fsCC_all_reduce(c, &v, 1, FS_F32, FSCC_SUM);
  CC_CHECK(write(p[1], "x", 1) == 1);
  CC_CHECK(rc < 0);
  CC_CHECK(strstr(fsT_error(), "timed out after 0.3 s waiting for rank(s) 2") ||
           strstr(fsT_error(), "failed, the collective is abandoned"));
  return 0;
}

static void test_timeout(void **state) {
  int p[4]; /* rank 2's wake-up; rank 1's "about to call" to rank 0 */
  assert_int_equal(pipe(p), 0);
  assert_int_equal(pipe(p + 2), 0);
  assert_int_equal(run(3, SMALL_STAGING, 0.3, body_absent, p), 0);
  for (int i = 0; i < 4; i++) close(p[i]);
}

/* Rank 1 closes its communicator: waiting for it is an error at once. */
static int body_left(fsCC_comm *c, void *arg) {
  if (c->rank == 1) {
    fsCC_destroy(c);
    _exit(0);
  }
  CC_CHECK(fsCC_barrier(c) < 0);
  CC_CHECK(strstr(fsT_error(), "barrier: rank 1 has finished (it closed its communicator)"));
  return 0;
}

static void test_left(void **state) { assert_int_equal(run(2, SMALL_STAGING, 600, body_left, NULL), 0); }

static int body_bad_args(fsCC_comm *c, void *arg) {
  float v[2] = {1, 2};
  CC_CHECK(fsCC_broadcast(c, v, 2, FS_F32, c->world) < 0);
  CC_CHECK(strstr(fsT_error(), "src=2 is not a rank of a world of 2"));
  CC_CHECK(fsCC_all_reduce(c, NULL, 2, FS_F32, FSCC_SUM) < 0);
  CC_CHECK(strstr(fsT_error(), "NULL buffer"));
  CC_CHECK(fsCC_all_reduce(c, v, 2, FS_F32, (fsCC_op)9) < 0);
  CC_CHECK(strstr(fsT_error(), "unknown reduce op"));
  CC_CHECK(fsCC_all_gather(c, v, v, SIZE_MAX / 4, FS_F32) < 0);
  CC_CHECK(strstr(fsT_error(), "overflow"));
  fs_tensor meta = {.dtype = FS_F32, .device = FS_DEV_META, .numel = 2};
  CC_CHECK(fsCC_all_reduce_tensor(c, &meta, FSCC_SUM) < 0);
  CC_CHECK(strstr(fsT_error(), "tensor is on meta but the shm communicator works on cpu"));
  /* rejected calls never reach the peers: the communicator still works */
  fs_tensor t = {.dtype = FS_F32, .device = FS_DEV_CPU, .numel = 2, .data = v};
  CC_CHECK(fsCC_all_reduce_tensor(c, &t, FSCC_SUM) == 0 && v[0] == 2 && v[1] == 4);
  CC_CHECK(fsCC_broadcast_tensor(c, &t, 1) == 0 && v[0] == 2);
  int64_t iv = 3;
  fs_tensor ti = {.dtype = FS_I64, .device = FS_DEV_CPU, .numel = 1, .data = &iv};
  float w = 5;
  fs_tensor tw = {.dtype = FS_F32, .device = FS_DEV_CPU, .numel = 1, .data = &w};
  fs_tensor *both[2] = {&t, &tw}, *mixed[2] = {&ti, &t};
  CC_CHECK(fsCC_all_reduce_tensors(c, mixed, 2, FSCC_SUM) < 0);
  CC_CHECK(strstr(fsT_error(), "tensor 1 is float32, tensor 0 is int64 (one dtype per call)"));
  CC_CHECK(fsCC_all_reduce_tensors(c, both, 2, FSCC_SUM) == 0 && v[0] == 4 && v[1] == 8 && w == 10);
  return 0;
}

/* Fabric's all_gather: a new [world, *shape] tensor. */
static int body_gather_tensor(fsCC_comm *c, void *arg) {
  int64_t shape[FS_MAX_RANK] = {2, 3, 1, 1, 1, 1, 1, 1};
  fs_tensor *t = fsT_new(FS_I64, FS_DEV_CPU, 2, shape);
  CC_CHECK(t);
  for (int64_t i = 0; i < 6; i++) fsT_i64(t)[i] = c->rank * 10 + i;
  fs_tensor *g = fsCC_all_gather_tensor(c, t);
  fs_tensor *deep = fsT_new(FS_F32, FS_DEV_CPU, FS_MAX_RANK, shape);
  fs_tensor *none = deep ? fsCC_all_gather_tensor(c, deep) : NULL;
  int rc = !g || !deep || none || !strstr(fsT_error(), "more than 8 dimensions") ||
           g->rank != 3 || g->shape[0] != c->world || g->shape[1] != 2 || g->shape[2] != 3;
  for (int64_t i = 0; !rc && i < 6 * c->world; i++) rc = fsT_i64(g)[i] != (i / 6) * 10 + i % 6;
  fsT_release(t);
  fsT_release(g);
  fsT_release(deep);
  return rc;
}

static void test_gather_tensor(void **state) {
  for (int world = 1; world <= 3; world++)
    assert_int_equal(run(world, SMALL_STAGING, 0, body_gather_tensor, NULL), 0);
}

static void test_bad_args(void **state) { assert_int_equal(run(2, SMALL_STAGING, 0, body_bad_args, NULL), 0); }

static void test_open_errors(void **state) {
  fsCC_config cfg = {.rank = 0, .world = 2};
  assert_null(fsCC_shm_open("/fstest-no-such-segment", &cfg));
  assert_non_null(strstr(fsT_error(), "/fstest-no-such-segment"));
  assert_int_equal(fsCC_shm_create("/x", FSCC_MAX_WORLD + 1, 0), -1);
  assert_non_null(strstr(fsT_error(), "out of range"));
  assert_int_equal(fsCC_shm_create("/x", 2, 16), -1);
  assert_non_null(strstr(fsT_error(), "staging"));

  char name[64];
  cc_shm_name(name, sizeof name);
  assert_int_equal(fsCC_shm_create(name, 2, SMALL_STAGING), 0);
  assert_int_equal(fsCC_shm_create(name, 2, SMALL_STAGING), -1); /* exists */
  assert_non_null(strstr(fsT_error(), "File exists"));
  fsCC_comm *a = fsCC_shm_open(name, &cfg);
  assert_non_null(a);
  assert_null(fsCC_shm_open(name, &cfg));
  assert_non_null(strstr(fsT_error(), "rank 0 is already attached"));
  fsCC_destroy(a);
  assert_null(fsCC_shm_open(name, &cfg));
  assert_non_null(strstr(fsT_error(), "rank 0 has already been and left"));
  cfg.world = 3;
  cfg.rank = 1;
  assert_null(fsCC_shm_open(name, &cfg));
  assert_non_null(strstr(fsT_error(), "made for 2 ranks"));
  cfg.rank = 3;
  assert_null(fsCC_shm_open(name, &cfg));
  assert_non_null(strstr(fsT_error(), "rank 3 of world 3 is out of range"));
  shm_unlink(name);
  assert_int_equal(fsCC_barrier(NULL), -1);
  assert_non_null(strstr(fsT_error(), "no communicator"));
}

static void test_op_names(void **state) {
  assert_int_equal(fsCC_op_parse("MEAN"), FSCC_MEAN);
  assert_int_equal(fsCC_op_parse("avg"), FSCC_MEAN);
  assert_int_equal(fsCC_op_parse("sum"), FSCC_SUM);
  assert_int_equal(fsCC_op_parse("Max"), FSCC_MAX);
  assert_int_equal(fsCC_op_parse("min"), FSCC_MIN);
  assert_int_equal(fsCC_op_parse("product"), -1);
  assert_string_equal(fsCC_op_name(FSCC_MIN), "min");
  assert_int_equal(fsCC_shard(10, 3), 4);
  assert_int_equal(fsCC_padded(10, 3), 12);
  assert_int_equal(fsCC_padded(12, 4), 12);
  assert_int_equal(fsCC_padded(0, 4), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_all_reduce_bufs),
      cmocka_unit_test(test_all_gather),
      cmocka_unit_test(test_reduce_scatter),
      cmocka_unit_test(test_broadcast),
      cmocka_unit_test(test_default_staging_large),
      cmocka_unit_test(test_bf16_rounding),
      cmocka_unit_test(test_i64_mean),
      cmocka_unit_test(test_padded_roundtrip),
      cmocka_unit_test(test_repeatable),
      cmocka_unit_test(test_mismatch),
      cmocka_unit_test(test_dead_peer),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_left),
      cmocka_unit_test(test_gather_tensor),
      cmocka_unit_test(test_bad_args),
      cmocka_unit_test(test_open_errors),
      cmocka_unit_test(test_op_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
