/* test_rendezvous.c -- the TCP rendezvous on loopback: joining (inherited
 * socket, or rank 0 listening late), blobs, barriers, and every way joining
 * or exchanging can go wrong; then fsCC_connect over it. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "cctest.h"
#include "comm.h"
#include "rendezvous.h"

typedef struct setup {
  int port, lfd;      /* lfd >= 0: rank 0 inherits it */
  double timeout;
  int world_of[4];    /* the world size each rank claims; 0: the real one */
  int (*body)(fsLN_rdzv *rv, void *arg);
  int (*on_fail)(int rank, void *arg);  /* when open fails: 0 if that was expected */
  void *arg;
} setup;

static int rank_main(int rank, int world, void *arg) {
  setup *s = arg;
  int lfd = rank == 0 ? s->lfd : -1;
  if (rank && s->lfd >= 0) close(s->lfd);
  int w = s->world_of[rank] ? s->world_of[rank] : world;
  fsLN_rdzv *rv = fsLN_rdzv_open("127.0.0.1", s->port, rank, w, s->timeout, lfd);
  if (!rv) {
    if (s->on_fail) return s->on_fail(rank, s->arg);
    fprintf(stderr, "rank %d: %s\n", rank, fsT_error());
    return 1;
  }
  int rc = s->body ? s->body(rv, s->arg) : 0;
  fsLN_rdzv_close(rv);
  return rc;
}

static int run_with(int world, setup *s) {
  if (!s->timeout) s->timeout = 30;
  s->port = 0;
  s->lfd = fsLN_rdzv_listen("127.0.0.1", &s->port);
  assert_true(s->lfd >= 0);
  assert_true(s->port > 0);
  int failed = cc_fork_ranks(world, rank_main, s);
  close(s->lfd);
  return failed;
}

static int body_exchange(fsLN_rdzv *rv, void *arg) {
  int me = fsLN_rdzv_rank(rv), world = fsLN_rdzv_world(rv);
  char mine[12], all[4 * 12], blob[40];
  snprintf(mine, sizeof mine, "r%d", me);
  CC_CHECK(fsLN_rdzv_allgather(rv, mine, all, sizeof mine) == 0);
  for (int r = 0; r < world; r++) {
    char want[12];
    snprintf(want, sizeof want, "r%d", r);
    CC_CHECK(strcmp(all + r * 12, want) == 0);
  }
  snprintf(blob, sizeof blob, me == 0 ? "rank zero says hello" : "nobody listens to me");
  CC_CHECK(fsLN_rdzv_broadcast(rv, blob, sizeof blob) == 0);
  CC_CHECK(strcmp(blob, "rank zero says hello") == 0);
  for (int i = 0; i < 5; i++) CC_CHECK(fsLN_rdzv_barrier(rv) == 0);
  return 0;
}

static void test_exchange(void **state) {
  for (int world = 1; world <= 4; world++) assert_int_equal(cc_fork_rdzv(world, body_exchange, NULL), 0);
}

/* Rank 0 opens its own listener, after the others have started retrying. */
static int late_main(int rank, int world, void *arg) {
  setup *s = arg;
  if (rank == 0) usleep(300 * 1000);
  fsLN_rdzv *rv = fsLN_rdzv_open("127.0.0.1", s->port, rank, world, 30, -1);
  if (!rv) {
    fprintf(stderr, "rank %d: %s\n", rank, fsT_error());
    return 1;
  }
  int rc = body_exchange(rv, NULL);
  fsLN_rdzv_close(rv);
  return rc;
}

static void test_rank0_late(void **state) {
  setup s = {.port = cc_free_port()};
  assert_true(s.port > 0);
  assert_int_equal(cc_fork_ranks(3, late_main, &s), 0);
}

static int expect_error(int rank, void *arg) {
  const char *want = arg;
  if (strstr(fsT_error(), want)) return 0;
  fprintf(stderr, "rank %d: wanted \"%s\", got \"%s\"\n", rank, want, fsT_error());
  return 1;
}

/* Only rank 0 comes: it names the ranks it waited for. */
static void test_join_timeout(void **state) {
  int port = 0, lfd = fsLN_rdzv_listen("127.0.0.1", &port);
  assert_true(lfd >= 0);
  assert_null(fsLN_rdzv_open("127.0.0.1", port, 0, 3, 0.3, lfd));
  assert_non_null(strstr(fsT_error(), "waiting for rank(s) 1, 2 to join"));
  /* and nobody listens for rank 1 */
  assert_null(fsLN_rdzv_open("127.0.0.1", port, 1, 2, 0.3, -1));
  assert_non_null(strstr(fsT_error(), "rank 1 cannot reach rank 0 at 127.0.0.1"));
  assert_null(fsLN_rdzv_open("127.0.0.1", port, 2, 2, 1, -1));
  assert_non_null(strstr(fsT_error(), "out of range"));
  assert_null(fsLN_rdzv_open("no-such-host.invalid", port, 1, 2, 1, -1));
  assert_non_null(strstr(fsT_error(), "cannot resolve MASTER_ADDR no-such-host.invalid"));
}

static int rank0_only_fails(int rank, void *arg) {
  return rank == 0 ? expect_error(rank, arg) : 0;
}

static void test_world_mismatch(void **state) {
  setup s = {.world_of = {2, 3}, .on_fail = rank0_only_fails, .arg = "rank 1 joined with WORLD_SIZE=3, rank 0 has 2", .timeout = 5};
  /* rank 1's open fails too, when rank 0 hangs up on it */
  assert_int_equal(run_with(2, &s), 0);
}

/* A rank that dies after joining is reported by name, on every survivor. */
static int body_dies(fsLN_rdzv *rv, void *arg) {
  int me = fsLN_rdzv_rank(rv);
  if (me == 2) _exit(0);
  CC_CHECK(fsLN_rdzv_barrier(rv) < 0);
  CC_CHECK(strstr(fsT_error(), me == 0 ? "rank 2 closed the connection" : "rank 0 closed the connection"));
  return 0;
}

static void test_dead_peer(void **state) { assert_int_equal(cc_fork_rdzv(3, body_dies, NULL), 0); }

static int body_disagree(fsLN_rdzv *rv, void *arg) {
  char b[8] = {0}, all[16];
  int rc = fsLN_rdzv_rank(rv) == 0 ? fsLN_rdzv_broadcast(rv, b, 8) : fsLN_rdzv_allgather(rv, b, all, 4);
  CC_CHECK(rc < 0);
  CC_CHECK(strstr(fsT_error(), fsLN_rdzv_rank(rv) == 0 ? "ranks disagree" : "closed the connection"));
  return 0;
}

static void test_disagree(void **state) { assert_int_equal(cc_fork_rdzv(2, body_disagree, NULL), 0); }

/* Something that is not a rank connects first: rank 0 drops it and goes on. */
static int stranger_main(int rank, int world, void *arg) {
  setup *s = arg;
  if (rank == 1) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    CC_CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    CC_CHECK(write(fd, "GET / HTTP/1.0\r\n\r\n", 18) == 18);
    usleep(100 * 1000);
    close(fd);
  }
  return rank_main(rank, world, arg);
}

static void test_stranger(void **state) {
  setup s = {.body = body_exchange, .timeout = 30};
  s.lfd = fsLN_rdzv_listen("127.0.0.1", &s.port);
  assert_true(s.lfd >= 0);
  assert_int_equal(cc_fork_ranks(2, stranger_main, &s), 0);
  close(s.lfd);
}

/* fsCC_connect: shm over the rendezvous, nothing left in /dev/shm. */
static int body_connect(fsLN_rdzv *rv, void *arg) {
  fsCC_config cfg = {.staging = 4096};
  fsCC_comm *c = fsCC_connect(rv, FSCC_SHM, &cfg);
  CC_CHECK(c);
  CC_CHECK(c->rank == fsLN_rdzv_rank(rv) && c->world == fsLN_rdzv_world(rv));
  int64_t v[3] = {c->rank, 1, -c->rank};
  int rc = fsCC_all_reduce(c, v, 3, FS_I64, FSCC_SUM);
  int64_t n = c->world;
  fsCC_destroy(c);
  CC_CHECK(rc == 0 && v[0] == n * (n - 1) / 2 && v[1] == n && v[2] == -v[0]);
  if (fsLN_rdzv_rank(rv) == 0) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "fabricscript-%ld-", (long)getpid());
    DIR *d = opendir("/dev/shm");
    CC_CHECK(d);
    struct dirent *e;
    while ((e = readdir(d)))
      if (!strncmp(e->d_name, prefix, strlen(prefix))) {
        fprintf(stderr, "left behind: /dev/shm/%s\n", e->d_name);
        rc = 1;
      }
    closedir(d);
  }
  return rc;
}

static void test_connect_shm(void **state) {
  for (int world = 1; world <= 4; world++) assert_int_equal(cc_fork_rdzv(world, body_connect, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exchange),       cmocka_unit_test(test_rank0_late),
      cmocka_unit_test(test_join_timeout),   cmocka_unit_test(test_world_mismatch),
      cmocka_unit_test(test_dead_peer),      cmocka_unit_test(test_disagree),
      cmocka_unit_test(test_stranger),       cmocka_unit_test(test_connect_shm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
