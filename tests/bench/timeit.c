/* timeit.c -- `timeit [-c] RUNS COMMAND [ARG...]`: the median wall time in
 * ms of RUNS runs of COMMAND (stdout and stderr to /dev/null), timed around
 * posix_spawn + wait4 alone, so no shell or `date` process is counted. With
 * -c, also the median CPU time (user + system) of the same runs: a wall
 * median set beside a CPU figure from other runs on a VM whose speed moves
 * from minute to minute reads as waiting that was not there. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  int with_cpu = argc > 1 && !strcmp(argv[1], "-c");
  argc -= with_cpu;
  argv += with_cpu;
  int runs = argc > 2 ? atoi(argv[1]) : 0;
  if (runs < 1) {
    fputs("usage: timeit [-c] RUNS COMMAND [ARG...]\n", stderr);
    return 2;
  }
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) ||
      posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) ||
      posix_spawn_file_actions_adddup2(&fa, 1, 2)) {
    perror("timeit");
    return 2;
  }
  double *ms = malloc((size_t)runs * sizeof *ms), *cpu = malloc((size_t)runs * sizeof *cpu);
  int rc = ms && cpu ? 0 : 2;
  for (int i = 0; i < runs && !rc; i++) {
    struct timespec t0, t1;
    pid_t pid;
    int status;
    struct rusage ru;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int e = posix_spawnp(&pid, argv[2], &fa, NULL, argv + 2, environ);
    if (e == 0 && wait4(pid, &status, 0, &ru) != pid) e = -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (e) { fprintf(stderr, "timeit: cannot run %s\n", argv[2]); rc = 2; }
    ms[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (!e)
      cpu[i] = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  }
  if (!rc) {
    printf("%.3f", median(ms, runs));
    if (with_cpu) printf(" %.3f", median(cpu, runs));
    putchar('\n');
  }
  free(ms);
  free(cpu);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}
