/* parse_corpus.c -- `parse_corpus < PATHS`: parses each file named on
 * standard input (one path a line) with fabricscript's parser alone and
 * prints `ok PATH` or `error PATH:LINE: MESSAGE` (its first syntax error by
 * position) and `lines PATH: LINE...` (the lines of all its errors) for
 * each, then `lines N files N seconds S cpu C` where S is the
 * wall time spent in fsP_parse alone (no reading, no checking) and C the
 * CPU time of the same (what a loaded machine does not inflate). scripts/parse-corpus
 * compares the verdicts with CPython's; this is its measuring half. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ast.h"
#include "diag.h"
#include "lex.h"

static double now(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
  char *path = NULL;
  size_t cap = 0;
  ssize_t n;
  size_t lines = 0, files = 0;
  double seconds = 0, cpu = 0;
  while ((n = getline(&path, &cap, stdin)) > 0) {
    if (path[n - 1] == '\n') path[--n] = '\0';
    if (n == 0) continue;
    fs_source *src = fsA_source_from_file(path, 0);
    if (!src) {
      printf("unreadable %s\n", path);
      continue;
    }
    fs_diags diags;
    fsD_init(&diags);
    int nerrors = 0;
    double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    fs_node *ast = fsP_parse(src, &diags, &nerrors);
    cpu += now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    seconds += now(CLOCK_MONOTONIC) - t0;
    lines += fsA_source_nlines(src) - (src->len && src->text[src->len - 1] == '\n');
    files++;
    if (nerrors == 0) {
      printf("ok %s\n", path);
    } else {
      fsD_sort(&diags);
      const fs_diag *first = NULL;
      for (size_t i = 0; i < diags.n && !first; i++)
        if (diags.items[i].severity == FS_SEV_ERROR) first = &diags.items[i];
      uint32_t line = 0, col = 0;
      if (first && first->src) fsA_source_position(src, first->loc.start, &line, &col);
      printf("error %s:%u: %s\nlines %s:", path, line, first ? first->message : "?", path);
      for (size_t i = 0; i < diags.n; i++)
        if (diags.items[i].severity == FS_SEV_ERROR) {
          fsA_source_position(src, diags.items[i].loc.start, &line, &col);
          printf(" %u", line);
        }
      putchar('\n');
    }
    fsA_free(ast);
    fsD_free(&diags);
    fsA_source_free(src);
  }
  free(path);
  printf("lines %zu files %zu seconds %.6f cpu %.6f\n", lines, files, seconds, cpu);
  return 0;
}
