/* test_comm_nccl.c -- the NCCL transport (built with CUDA only).  Without a
 * CUDA device it checks what works anyway (unique ids) and that opening says
 * why it cannot, then skips the collectives with a message.  With devices it
 * runs every op and dtype on device buffers, world 1 and, with more than one
 * device, one rank per device.  CUDA is touched only in forked ranks: a
 * process that initialized CUDA cannot use it in its children. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <cuda_runtime.h>

#include "cctest.h"
#include "comm.h"
#include "rendezvous.h"

/* cudaGetDeviceCount in a child: the count, 0 with the reason in why. */
static int device_count(char *why, size_t len) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0, e = (int)cudaGetDeviceCount(&n), msg[2] = {e, n};
    exit(write(p[1], msg, sizeof msg) == sizeof msg ? 0 : 1);
  }
  int msg[2] = {-1, 0};
  close(p[1]);
  ssize_t got = read(p[0], msg, sizeof msg);
  close(p[0]);
  waitpid(pid, NULL, 0);
  assert_int_equal(got, sizeof msg);
  /* 35: no driver; 100: a driver and no device */
  if (msg[0] == cudaErrorInsufficientDriver || msg[0] == cudaErrorNoDevice || msg[1] == 0)
    snprintf(why, len, "no CUDA device (cudaGetDeviceCount returned %d, count %d)", msg[0], msg[1]);
  return msg[0] == 0 ? msg[1] : 0;
}

static int body_ids(int rank, int world, void *arg) {
  unsigned char a[FSCC_NCCL_ID_BYTES], b[FSCC_NCCL_ID_BYTES], zero[FSCC_NCCL_ID_BYTES] = {0};
  if (fsCC_nccl_unique_id(a) < 0 || fsCC_nccl_unique_id(b) < 0) {
    fprintf(stderr, "%s\n", fsT_error());
    return 1;
  }
  CC_CHECK(memcmp(a, b, sizeof a) != 0 && memcmp(a, zero, sizeof a) != 0);
  if (*(int *)arg == 0) { /* no device: opening says so */
    fsCC_config cfg = {.rank = 0, .world = 1};
    CC_CHECK(fsCC_nccl_open(a, &cfg) == NULL);
    CC_CHECK(strstr(fsT_error(), "no CUDA device"));
  }
  return 0;
}

static void test_unique_id(void **state) {
  char why[128];
  int n = device_count(why, sizeof why);
  assert_int_equal(cc_fork_ranks(1, body_ids, &n), 0);
}

/* --- collectives on the device ---------------------------------------------- */

/* Small integers: every sum and mean is exact whatever order NCCL uses. */
static double val(int r, size_t i) { return (double)(i % 16) + (double)r; }

static void put(fs_dtype dt, void *buf, size_t i, double v) {
  if (dt == FS_F32) ((float *)buf)[i] = (float)v;
  else if (dt == FS_BF16) ((uint16_t *)buf)[i] = fsT_f32_to_bf16((float)v);
  else if (dt == FS_F64) ((double *)buf)[i] = v;
  else ((int64_t *)buf)[i] = (int64_t)v;
}

static double get(fs_dtype dt, const void *buf, size_t i) {
  return dt == FS_F32 ? ((const float *)buf)[i]
         : dt == FS_BF16 ? fsT_bf16_to_f32(((const uint16_t *)buf)[i])
         : dt == FS_F64  ? ((const double *)buf)[i]
                         : (double)((const int64_t *)buf)[i];
}

static double expect(fsCC_op op, int world, size_t i) {
  double sum = 0, lo = val(0, i), hi = val(world - 1, i);
  for (int r = 0; r < world; r++) sum += val(r, i);
  return op == FSCC_SUM ? sum : op == FSCC_MEAN ? sum / world : op == FSCC_MAX ? hi : lo;
}

static int body_collectives(fsLN_rdzv *rv, void *arg) {
  fsCC_config cfg = {.local_rank = fsLN_rdzv_rank(rv), .timeout = 120};
  fsCC_comm *c = fsCC_connect(rv, FSCC_NCCL, &cfg);
  if (!c) fprintf(stderr, "%s\n", fsT_error());
  CC_CHECK(c);
  CC_CHECK(c->device == FS_DEV_CUDA);
  const size_t n = 1001, w = (size_t)c->world;
  const fs_dtype dts[] = {FS_F32, FS_BF16, FS_I64, FS_F64};
  int rc = 0;
  void *host = malloc(n * w * 8), *dev = NULL, *dev2 = NULL;
  CC_CHECK(host && cudaMalloc(&dev, n * w * 8) == cudaSuccess && cudaMalloc(&dev2, n * w * 8) == cudaSuccess);
  for (int d = 0; !rc && d < (int)(sizeof dts / sizeof *dts); d++) {
    fs_dtype dt = dts[d];
    size_t es = fsT_dtype_size(dt);
    for (int op = FSCC_SUM; !rc && op <= FSCC_MIN; op++) {
      if (op == FSCC_MEAN && c->world > 1) continue; /* averages of these values are not exact */
      for (size_t i = 0; i < n; i++) put(dt, host, i, val(c->rank, i));
      rc = cudaMemcpy(dev, host, n * es, cudaMemcpyHostToDevice) != cudaSuccess ||
           fsCC_all_reduce(c, dev, n, dt, op) < 0 ||
           cudaMemcpy(host, dev, n * es, cudaMemcpyDeviceToHost) != cudaSuccess;
      for (size_t i = 0; !rc && i < n; i++) rc = get(dt, host, i) != expect(op, c->world, i);
      if (rc) fprintf(stderr, "all_reduce %s %s: %s\n", fsT_dtype_name(dt), fsCC_op_name(op), fsT_error());
    }
    /* all_gather of n per rank, then reduce_scatter of that back to n */
    for (size_t i = 0; !rc && i < n; i++) put(dt, host, i, val(c->rank, i));
    rc = rc || cudaMemcpy(dev, host, n * es, cudaMemcpyHostToDevice) != cudaSuccess ||
         fsCC_all_gather(c, dev, dev2, n, dt) < 0 ||
         cudaMemcpy(host, dev2, n * w * es, cudaMemcpyDeviceToHost) != cudaSuccess;
    for (size_t k = 0; !rc && k < n * w; k++) rc = get(dt, host, k) != val((int)(k / n), k % n);
    rc = rc || fsCC_reduce_scatter(c, dev2, dev, n, dt, FSCC_SUM) < 0 ||
         cudaMemcpy(host, dev, n * es, cudaMemcpyDeviceToHost) != cudaSuccess;
    for (size_t i = 0; !rc && i < n; i++) rc = get(dt, host, i) != w * val(c->rank, i);
    /* broadcast from the last rank */
    for (size_t i = 0; !rc && i < n; i++) put(dt, host, i, val(c->rank, i));
    rc = rc || cudaMemcpy(dev, host, n * es, cudaMemcpyHostToDevice) != cudaSuccess ||
         fsCC_broadcast(c, dev, n, dt, c->world - 1) < 0 ||
         cudaMemcpy(host, dev, n * es, cudaMemcpyDeviceToHost) != cudaSuccess;
    for (size_t i = 0; !rc && i < n; i++) rc = get(dt, host, i) != val(c->world - 1, i);
    if (rc) fprintf(stderr, "%s: %s\n", fsT_dtype_name(dt), fsT_error());
  }
  rc = rc || fsCC_barrier(c) < 0;
  fs_tensor t = {.dtype = FS_F32, .device = FS_DEV_CPU, .numel = 1, .data = host};
  rc = rc || fsCC_all_reduce_tensor(c, &t, FSCC_SUM) == 0; /* a host tensor is refused */
  cudaFree(dev);
  cudaFree(dev2);
  free(host);
  fsCC_destroy(c);
  return rc;
}

static void test_collectives(void **state) {
  char why[128];
  int n = device_count(why, sizeof why);
  if (n == 0) {
    print_message("NCCL runtime test skipped: %s\n", why);
    skip();
  }
  assert_int_equal(cc_fork_rdzv(1, body_collectives, NULL), 0);
  if (n > 1) assert_int_equal(cc_fork_rdzv(n < 4 ? n : 4, body_collectives, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unique_id),
      cmocka_unit_test(test_collectives),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
