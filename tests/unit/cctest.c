/* cctest.c -- forked ranks for the distributed tests, and the values their ranks fill buffers with. */
#define _GNU_SOURCE
#include "cctest.h"
#include "comm.h"
#include "rendezvous.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int cc_fork_ranks(int world, cc_rank_fn fn, void *arg) {
  pid_t pid[64];
  int failed = 0;
  fflush(NULL); /* or the children print the parent's buffered output too */
  for (int r = 0; r < world; r++) {
    pid[r] = fork();
    if (pid[r] == 0) exit(fn(r, world, arg));
    if (pid[r] < 0) failed++;
  }
  for (int r = 0; r < world; r++) {
    int st;
    if (pid[r] > 0 && (waitpid(pid[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)))
      failed++;
  }
  return failed;
}

typedef struct rdzv_job {
  int port, lfd;
  int (*fn)(fsLN_rdzv *rv, void *arg);
  void *arg;
} rdzv_job;

static int rdzv_rank(int rank, int world, void *arg) {
  rdzv_job *j = arg;
  if (rank) close(j->lfd);
  fsLN_rdzv *rv = fsLN_rdzv_open("127.0.0.1", j->port, rank, world, 60, rank ? -1 : j->lfd);
  if (!rv) {
    fprintf(stderr, "rank %d: %s\n", rank, fsT_error());
    return 1;
  }
  int rc = j->fn(rv, j->arg);
  fsLN_rdzv_close(rv);
  return rc;
}

int cc_fork_rdzv(int world, int (*fn)(fsLN_rdzv *rv, void *arg), void *arg) {
  rdzv_job j = {.fn = fn, .arg = arg};
  j.lfd = fsLN_rdzv_listen("127.0.0.1", &j.port);
  if (j.lfd < 0) return world;
  int failed = cc_fork_ranks(world, rdzv_rank, &j);
  close(j.lfd);
  return failed;
}

void cc_shm_name(char *buf, size_t len) {
  static unsigned serial;
  snprintf(buf, len, "/fstest-%ld-%u", (long)getpid(), serial++);
}

int cc_free_port(void) {
  int port = 0, fd = fsLN_rdzv_listen("127.0.0.1", &port);
  if (fd >= 0) close(fd);
  return port;
}

float cc_fval(int r, size_t i) { return (float)((int)(i % 97) - 40) * 0.37f + (float)r * 1.13f; }
int64_t cc_ival(int r, size_t i) { return (int64_t)(i % 1000) * 3000000007LL - r * 123456789LL - 7; }
/* float64: values float32 cannot hold, so a float32 staging would show */
double cc_dval(int r, size_t i) { return cc_fval(r, i) + (double)(i % 13) * 1e-10 + r * 3e-11; }

void cc_fill(fs_dtype dt, int r, void *buf, size_t n, size_t base) {
  for (size_t i = 0; i < n; i++) {
    if (dt == FS_F32) ((float *)buf)[i] = cc_fval(r, base + i);
    else if (dt == FS_BF16) ((uint16_t *)buf)[i] = fsT_f32_to_bf16(cc_fval(r, base + i));
    else if (dt == FS_F64) ((double *)buf)[i] = cc_dval(r, base + i);
    else ((int64_t *)buf)[i] = cc_ival(r, base + i);
  }
}
