/* timeit.c -- `timeit RUNS COMMAND [ARG...]`: the median wall time in ms of
 * RUNS runs of COMMAND (stdout and stderr to /dev/null), timed around
 * posix_spawn + waitpid alone, so no shell or `date` process is counted. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int runs = argc > 2 ? atoi(argv[1]) : 0;
  if (runs < 1) {
    fputs("usage: timeit RUNS COMMAND [ARG...]\n", stderr);
    return 2;
  }
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) ||
      posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) ||
      posix_spawn_file_actions_adddup2(&fa, 1, 2)) {
    perror("timeit");
    return 2;
  }
  double *ms = malloc((size_t)runs * sizeof *ms);
  int rc = ms ? 0 : 2;
  for (int i = 0; i < runs && !rc; i++) {
    struct timespec t0, t1;
    pid_t pid;
    int status;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int e = posix_spawnp(&pid, argv[2], &fa, NULL, argv + 2, environ);
    if (e == 0 && waitpid(pid, &status, 0) != pid) e = -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (e) { fprintf(stderr, "timeit: cannot run %s\n", argv[2]); rc = 2; }
    ms[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  }
  if (!rc) {
    qsort(ms, (size_t)runs, sizeof *ms, cmp);
    printf("%.3f\n", runs % 2 ? ms[runs / 2] : (ms[runs / 2 - 1] + ms[runs / 2]) / 2);
  }
  free(ms);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}
