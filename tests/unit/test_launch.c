/* test_launch.c -- the launcher: forked ranks that do collectives over shm,
 * their environment and prefixed output, a failing or aborting rank (the
 * others stopped, no process left), and joining an outside launcher. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cctest.h"
#include "launch.h"

static const char *const launch_vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                          "NODE_RANK", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                                          "SLURM_NTASKS", "SLURM_PROCID", "SLURM_JOB_NAME",
                                          "SLURM_JOB_ID", "SLURM_LOCALID", "SLURM_NODEID",
                                          "SLURM_NTASKS_PER_NODE"};

static int clear_env(void **state) {
  for (size_t i = 0; i < sizeof launch_vars / sizeof *launch_vars; i++) unsetenv(launch_vars[i]);
  return 0;
}

/* fd 1 and 2 of the test go to files while `fn` launches; the texts come back. */
typedef struct captured {
  char out[8192], err[8192];
} captured;

static int redirect(int fd, char *path) {
  int saved = dup(fd), f = mkstemp(path);
  assert_true(saved >= 0 && f >= 0);
  fflush(NULL);
  dup2(f, fd);
  close(f);
  return saved;
}

static void restore(int fd, int saved, const char *path, char *text, size_t len) {
  fflush(NULL);
  dup2(saved, fd);
  close(saved);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(text, 1, len - 1, f);
  text[n] = 0;
  fclose(f);
  unlink(path);
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  assert_non_null(d);
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

typedef int (*rank_body)(fsLN_env *env);

/* Launch `devices` ranks running body; returns the supervisor's status. */
static int launch(int devices, rank_body body, captured *cap) {
  char po[] = "/tmp/fslaunch-out-XXXXXX", pe[] = "/tmp/fslaunch-err-XXXXXX";
  int fds = open_fds(), so = redirect(1, po), se = redirect(2, pe);
  fsLN_env env;
  int status = -1;
  fsLN_role role = fsLN_launch(devices, 1, &env, &status);
  if (role == FSLN_RANK) {
    int rc = body(&env);
    fflush(NULL);
    exit(rc);
  }
  restore(1, so, po, cap->out, sizeof cap->out);
  restore(2, se, pe, cap->err, sizeof cap->err);
  assert_int_equal(role, FSLN_SUPERVISOR);
  assert_int_equal(open_fds(), fds); /* the pipes and the rendezvous socket are closed */
  /* every rank was reaped: the test process has no child left */
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
  return status;
}

static int env_is(const char *name, int want) {
  const char *v = getenv(name);
  return v && atoi(v) == want;
}

static int body_collectives(fsLN_env *env) {
  CC_CHECK(env->spawned);
  CC_CHECK(env_is("RANK", env->rank) && env_is("WORLD_SIZE", env->world_size));
  CC_CHECK(env_is("LOCAL_RANK", env->rank) && env_is("LOCAL_WORLD_SIZE", env->world_size));
  CC_CHECK(env_is("NODE_RANK", 0) && env_is("MASTER_PORT", env->master_port));
  CC_CHECK(!strcmp(getenv("MASTER_ADDR"), "127.0.0.1"));
  fsCC_config cfg = {.timeout = 30, .staging = 1024};
  fsCC_comm *c = fsLN_connect(env, FSCC_SHM, &cfg);
  if (!c) fprintf(stderr, "%s\n", fsT_error());
  CC_CHECK(c);
  float v[600];
  for (int i = 0; i < 600; i++) v[i] = (float)(env->rank + i);
  int rc = fsCC_all_reduce(c, v, 600, FS_F32, FSCC_SUM);
  int64_t mine = 100 + env->rank, all[4];
  rc = rc || fsCC_all_gather(c, &mine, all, 1, FS_I64);
  fsCC_destroy(c);
  CC_CHECK(rc == 0);
  int n = env->world_size;
  for (int i = 0; i < 600; i++) CC_CHECK(v[i] == (float)(n * (n - 1) / 2 + n * i));
  for (int r = 0; r < n; r++) CC_CHECK(all[r] == 100 + r);
  printf("rank %d of %d: sum %g\n", env->rank, n, (double)v[0]);
  fprintf(stderr, "note from %d\n", env->rank);
  printf("no newline at the end from %d", env->rank);
  return 0;
}

static void test_collectives(void **state) {
  for (int n = 2; n <= 4; n++) {
    captured cap;
    assert_int_equal(launch(n, body_collectives, &cap), 0);
    char line[128];
    int sum = n * (n - 1) / 2;
    snprintf(line, sizeof line, "rank 0 of %d: sum %d\n", n, sum);
    assert_non_null(strstr(cap.out, line));
    assert_null(strstr(cap.out, "[rank 0]")); /* rank 0 as is */
    for (int r = 1; r < n; r++) {
      snprintf(line, sizeof line, "[rank %d] rank %d of %d: sum %d\n", r, r, n, sum);
      assert_non_null(strstr(cap.out, line));
      snprintf(line, sizeof line, "[rank %d] no newline at the end from %d\n", r, r);
      assert_non_null(strstr(cap.out, line));
      snprintf(line, sizeof line, "[rank %d] note from %d\n", r, r);
      assert_non_null(strstr(cap.err, line));
    }
    assert_non_null(strstr(cap.err, "note from 0\n"));
  }
}

/* Under fsLN_json_stderr a rank's stderr is JSON lines: its own JSON passes
 * as it is, anything else becomes a note with its rank, quotes and control
 * characters escaped; stdout keeps the prefix. */
static int body_json(fsLN_env *env) {
  fprintf(stderr, "{\"rank\":%d}\n", env->rank);
  fprintf(stderr, "raw \"%d\"\tline\n", env->rank);
  printf("out %d\n", env->rank);
  return 0;
}

static void test_json_stderr(void **state) {
  fsLN_json_stderr(true);
  captured cap;
  int rc = launch(2, body_json, &cap);
  fsLN_json_stderr(false);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(cap.err, "{\"rank\":1}\n"));
  assert_null(strstr(cap.err, "[rank 1]"));
  assert_non_null(strstr(cap.err,
      "{\"version\":1,\"file\":null,\"line\":null,\"column\":null,\"column_utf16\":null,\"end\":null,"
      "\"severity\":\"note\",\"rule\":\"output\",\"message\":\"raw \\\"1\\\"\\u0009line\","
      "\"notes\":[],\"help\":null,\"fix\":[],\"rank\":1}\n"));
  assert_non_null(strstr(cap.out, "[rank 1] out 1\n"));
  (void)state;
}

/* Rank 1 aborts while the others wait in a collective (rank 2 also ignores
 * SIGTERM: it gets SIGKILL); the launcher reports rank 1 and status 3. */
static int body_abort(fsLN_env *env) {
  fsCC_config cfg = {.timeout = 600, .staging = 1024};
  fsCC_comm *c = fsLN_connect(env, FSCC_SHM, &cfg);
  CC_CHECK(c);
  if (env->rank == 1) abort();
  if (env->rank == 2) signal(SIGTERM, SIG_IGN);
  if (env->rank == 0) { /* as if killed between creating a segment and unlinking it */
    char name[64];
    snprintf(name, sizeof name, "/fabricscript-%ld-%ld", (long)getpid(), (long)getppid());
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    CC_CHECK(fd >= 0);
    close(fd);
  }
  for (;;) pause();
}

/* Segments named "fabricscript-*-<this process>" in /dev/shm. */
static int swept_segments_left(void) {
  DIR *d = opendir("/dev/shm");
  char tail[32];
  int n = 0, tl = snprintf(tail, sizeof tail, "-%ld", (long)getpid());
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));) {
    size_t l = strlen(e->d_name);
    n += !strncmp(e->d_name, "fabricscript-", 13) && l > (size_t)tl &&
         !strcmp(e->d_name + l - (size_t)tl, tail);
  }
  closedir(d);
  return n;
}

static void test_abort(void **state) {
  captured cap;
  assert_int_equal(launch(3, body_abort, &cap), 3);
  assert_non_null(strstr(fsT_error(), "rank 1 (pid"));
  assert_non_null(strstr(fsT_error(), "killed by signal 6"));
  assert_non_null(strstr(fsT_error(), "the other ranks were stopped"));
  assert_int_equal(swept_segments_left(), 0); /* rank 0's segment was swept */
}

/* Rank 1 ends with a script error while the others wait to be stopped. */
static int body_exit(fsLN_env *env) {
  if (env->rank == 1) return 1;
  for (;;) pause();
}

static void test_script_error(void **state) {
  captured cap;
  assert_int_equal(launch(2, body_exit, &cap), 1);
  assert_non_null(strstr(fsT_error(), "rank 1 (pid"));
  assert_non_null(strstr(fsT_error(), "exited with status 1"));
}

/* Rank 0 reports its peer's death (status 1) before the peer, killed by a
 * signal, has been reaped: the summary names the killed rank, not the one
 * that only reported it (it named rank 0 whenever rank 0 was reaped first). */
static int body_reports_death(fsLN_env *env) {
  if (env->rank == 0) return 1;
  usleep(100 * 1000); /* reaped a pass or more after rank 0 */
  raise(SIGKILL);
  return 0;
}

static void test_killed_rank_named(void **state) {
  captured cap;
  assert_int_equal(launch(2, body_reports_death, &cap), 3);
  assert_non_null(strstr(fsT_error(), "rank 1 (pid"));
  assert_non_null(strstr(fsT_error(), "killed by signal 9"));
}

/* A single device: no fork, this process is rank 0. */
static void test_single(void **state) {
  fsLN_env env;
  int status = -1;
  assert_int_equal(fsLN_launch(1, 1, &env, &status), FSLN_RANK);
  assert_int_equal(env.rank, 0);
  assert_int_equal(env.world_size, 1);
  assert_false(env.spawned);
  fsCC_config cfg = {0};
  fsCC_comm *c = fsLN_connect(&env, FSCC_SHM, &cfg);
  assert_non_null(c);
  float v = 2;
  assert_int_equal(fsCC_all_reduce(c, &v, 1, FS_F32, FSCC_MEAN), 0);
  assert_true(v == 2);
  fsCC_destroy(c);
  assert_int_equal(fsLN_launch(0, 1, &env, &status), FSLN_ERROR);
  assert_non_null(strstr(fsT_error(), "devices=0 is outside 1..64"));
}

/* Processes started by someone else (as torchrun would) join, no fork. */
static int joined_rank(int rank, int world, void *arg) {
  char v[16];
  snprintf(v, sizeof v, "%d", rank);
  setenv("RANK", v, 1);
  setenv("LOCAL_RANK", v, 1);
  snprintf(v, sizeof v, "%d", world);
  setenv("WORLD_SIZE", v, 1);
  setenv("LOCAL_WORLD_SIZE", v, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(v, sizeof v, "%d", *(int *)arg);
  setenv("MASTER_PORT", v, 1);
  fsLN_env env;
  int status;
  CC_CHECK(fsLN_launch(world, 1, &env, &status) == FSLN_RANK);
  CC_CHECK(!env.spawned && env.rank == rank && env.world_size == world && env.node_rank == 0);
  fsCC_config cfg = {.timeout = 30};
  fsCC_comm *c = fsLN_connect(&env, FSCC_SHM, &cfg);
  CC_CHECK(c);
  uint16_t b = fsT_f32_to_bf16(rank ? 0.0f : 1.5f);
  int rc = fsCC_broadcast(c, &b, 1, FS_BF16, 0);
  fsCC_destroy(c);
  CC_CHECK(rc == 0 && fsT_bf16_to_f32(b) == 1.5f);
  return 0;
}

static void test_join(void **state) {
  int port = cc_free_port();
  assert_int_equal(cc_fork_ranks(3, joined_rank, &port), 0);
}

static void expect_detect_error(const char *want) {
  fsLN_env env;
  int status;
  assert_int_equal(fsLN_launch(2, 1, &env, &status), FSLN_ERROR);
  if (!strstr(fsT_error(), want)) fail_msg("wanted \"%s\", got \"%s\"", want, fsT_error());
}

/* One node of several, started as Lightning's default environment starts
 * each (no outside launcher): NODE_RANK (else GROUP_RANK), MASTER_ADDR
 * (default 127.0.0.1), MASTER_PORT required. */
static void test_node_env(void **state) {
  fsLN_env env;
  assert_int_equal(fsLN_node_env(2, 1, &env), 0); /* one node: loopback, the kernel's port */
  assert_int_equal(env.world_size, 2);
  assert_int_equal(env.master_port, 0);
  assert_int_equal(fsLN_node_env(2, 3, &env), -1);
  assert_non_null(strstr(fsT_error(), "num_nodes=3: start this script on every node with the same MASTER_PORT"));
  setenv("MASTER_PORT", "29501", 1);
  setenv("GROUP_RANK", "2", 1);
  assert_int_equal(fsLN_node_env(2, 3, &env), 0);
  assert_int_equal(env.node_rank, 2);
  assert_int_equal(env.world_size, 6);
  assert_int_equal(env.local_world_size, 2);
  assert_string_equal(env.master_addr, "127.0.0.1");
  setenv("NODE_RANK", "3", 1); /* NODE_RANK wins over GROUP_RANK */
  assert_int_equal(fsLN_node_env(2, 3, &env), -1);
  assert_non_null(strstr(fsT_error(), "NODE_RANK=3 is outside 0..2"));
  setenv("NODE_RANK", "1", 1);
  setenv("MASTER_ADDR", "10.0.0.7", 1);
  assert_int_equal(fsLN_node_env(2, 3, &env), 0);
  assert_int_equal(env.node_rank, 1);
  assert_string_equal(env.master_addr, "10.0.0.7");
  assert_int_equal(fsLN_node_env(40, 2, &env), -1);
  assert_non_null(strstr(fsT_error(), "num_nodes=2 x devices=40 is outside 1..64 ranks"));
}

static void test_bad_environment(void **state) {
  setenv("RANK", "one", 1);
  setenv("WORLD_SIZE", "2", 1);
  expect_detect_error("RANK=one is not an integer");
  setenv("RANK", "2", 1);
  expect_detect_error("RANK=2 is outside 0..1");
  setenv("RANK", "1", 1);
  expect_detect_error("MASTER_PORT=0 is outside 1..65535");
  setenv("MASTER_PORT", "29500", 1);
  setenv("LOCAL_WORLD_SIZE", "1", 1);
  setenv("LOCAL_RANK", "0", 1);
  expect_detect_error("a run over several nodes needs MASTER_ADDR");
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  expect_detect_error("started 1 process(es) on this node (LOCAL_WORLD_SIZE) but the script asks for devices=2");
  fsLN_env env;
  assert_int_equal(fsLN_detect(&env), 1);
  assert_int_equal(env.local_world_size, 1);
  fsCC_config cfg = {0};
  assert_null(fsLN_connect(&env, FSCC_SHM, &cfg));
  assert_non_null(strstr(fsT_error(), "shm transport joins the ranks of one host, but this run spans 2 nodes"));
  clear_env(state);
  /* an allocation's shell is not a rank; srun's tasks are */
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_JOB_NAME", "bash", 1);
  assert_int_equal(fsLN_detect(&env), 0);
  setenv("SLURM_JOB_NAME", "train", 1);
  setenv("MASTER_PORT", "29400", 1);
  assert_int_equal(fsLN_detect(&env), 1);
  assert_int_equal(env.rank, 1);
  assert_int_equal(env.world_size, 2);
  assert_int_equal(env.master_port, 29400);
  assert_string_equal(env.master_addr, "127.0.0.1");
}

int main(void) {
  clear_env(NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_collectives, clear_env),
      cmocka_unit_test_teardown(test_json_stderr, clear_env),
      cmocka_unit_test_teardown(test_abort, clear_env),
      cmocka_unit_test_teardown(test_script_error, clear_env),
      cmocka_unit_test_teardown(test_killed_rank_named, clear_env),
      cmocka_unit_test_teardown(test_single, clear_env),
      cmocka_unit_test_teardown(test_join, clear_env),
      cmocka_unit_test_teardown(test_bad_environment, clear_env),
      cmocka_unit_test_teardown(test_node_env, clear_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
