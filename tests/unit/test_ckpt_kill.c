/* test_ckpt_kill.c -- a save killed with SIGKILL leaves the previous
 * checkpoint intact. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "datatest.h"
#include "safetensors.h"

#define NUMEL (4u << 20) /* 16 MiB of f32 per checkpoint */

static float *buf;

static int setup(void **state) {
  dt_setup(state);
  buf = malloc(NUMEL * sizeof *buf);
  return buf ? 0 : -1;
}

static int teardown(void **state) {
  free(buf);
  return dt_teardown(state);
}

static const int64_t shape[2] = {NUMEL / 1024, 1024};

/* Every element of version v is v + i / NUMEL: a mixed-up file shows. */
static void fill(uint64_t v) {
  for (size_t i = 0; i < NUMEL; i++) buf[i] = (float)v + (float)i / NUMEL;
}

static int save_version(const char *path, uint64_t v, char **err) {
  char vs[32];
  snprintf(vs, sizeof vs, "%llu", (unsigned long long)v);
  fsK_entry e[1] = {{"weight", FS_F32, 2, shape, buf}};
  fsK_meta m[1] = {{"version", vs}};
  fill(v);
  return fsK_save(path, e, 1, m, 1, err);
}

/* The checkpoint opens and holds one whole version; returns it. */
static uint64_t verify(const char *path) {
  fsK_file f;
  char *err = NULL;
  if (fsK_open(&f, path, &err) != 0) fail_msg("%s", err);
  const char *vs = fsK_meta_get(&f, "version");
  assert_non_null(vs);
  uint64_t v = strtoull(vs, NULL, 10);
  const fsK_info *t = fsK_find(&f, "weight");
  assert_non_null(t);
  float *got = malloc(NUMEL * sizeof *got);
  assert_int_equal(fsK_read(&f, t, 0, NUMEL, FS_F32, got, &err), 0);
  fill(v);
  assert_memory_equal(got, buf, NUMEL * sizeof *got);
  free(got);
  fsK_close(&f);
  return v;
}

static int temp_files(void) {
  DIR *d = opendir(dt_dir);
  struct dirent *e;
  int n = 0;
  while (d && (e = readdir(d))) n += strstr(e->d_name, ".tmp.") != NULL;
  if (d) closedir(d);
  return n;
}

static void kill_child(pid_t pid) {
  int status;
  assert_int_equal(kill(pid, SIGKILL), 0);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* Killed after writing half of the new data: the old file is untouched. */
static void test_kill_mid_write(void **state) {
  char *p = dt_path(dt_dir, "ckpt.safetensors"), *err = NULL;
  assert_int_equal(save_version(p, 1, &err), 0);
  int ready[2], hold[2];
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(hold), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    fsK_writer w;
    fsK_entry e[1] = {{"weight", FS_F32, 2, shape, NULL}};
    fill(2);
    if (fsK_create(&w, p, e, 1, NULL, 0, NULL) != 0 ||
        fsK_write(&w, "weight", 0, NUMEL / 2, buf, NULL) != 0)
      _exit(1);
    char c = 'w';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    (void)read(hold[0], &c, 1); /* blocks: the parent never writes */
    _exit(1);
  }
  char c;
  assert_int_equal(read(ready[0], &c, 1), 1);
  assert_int_equal(temp_files(), 1);
  kill_child(pid);
  assert_int_equal(verify(p), 1);
  for (int i = 0; i < 2; i++) close(ready[i]), close(hold[i]);
  free(p);
}

/* Killed somewhere in a loop of whole saves: the file is always one
 * complete version. */
static void test_kill_during_saves(void **state) {
  char *p = dt_path(dt_dir, "loop.safetensors"), *err = NULL;
  assert_int_equal(save_version(p, 1, &err), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    for (uint64_t v = 2;; v++)
      if (save_version(p, v, NULL) != 0) _exit(1);
  }
  /* Wait (bounded) until a save is in flight, i.e. a temp file exists. */
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 20000 && temp_files() == 0; i++) nanosleep(&ms, NULL);
  kill_child(pid);
  uint64_t v = verify(p);
  assert_true(v >= 1);
  free(p);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
    T(test_kill_mid_write),
    T(test_kill_during_saves),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
