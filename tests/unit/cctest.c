/* cctest.c -- forked ranks for the distributed tests. */
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
