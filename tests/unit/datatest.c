/* datatest.c -- helpers of the data and checkpoint unit tests. */
#define _POSIX_C_SOURCE 200809L
#include "datatest.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

char *dt_dir;

int dt_setup(void **state) {
  dt_dir = dt_mkdtemp();
  return 0;
}

int dt_teardown(void **state) {
  dt_rmdir(dt_dir);
  dt_dir = NULL;
  return 0;
}

char *dt_mkdtemp(void) {
  const char *base = getenv("TMPDIR");
  char *dir = malloc(strlen(base ? base : "/tmp") + 32);
  assert_non_null(dir);
  sprintf(dir, "%s/fstest-XXXXXX", base ? base : "/tmp");
  assert_non_null(mkdtemp(dir));
  return dir;
}

void dt_rmdir(char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      char *p = dt_path(dir, e->d_name);
      unlink(p);
      free(p);
    }
  closedir(d);
  assert_int_equal(rmdir(dir), 0);
  free(dir);
}

char *dt_path(const char *dir, const char *name) {
  char *p = malloc(strlen(dir) + strlen(name) + 2);
  assert_non_null(p);
  sprintf(p, "%s/%s", dir, name);
  return p;
}

void dt_write(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

void dt_write_gz(const char *path, const void *data, size_t n) {
  gzFile f = gzopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(gzwrite(f, data, (unsigned)n), (int)n);
  assert_int_equal(gzclose(f), Z_OK);
}

void dt_write_idx(const char *path, int gz, int ndim, const unsigned *dims, const void *data,
                  size_t n) {
  size_t h = 4 + 4 * (size_t)ndim;
  uint8_t *buf = malloc(h + n + 1);
  assert_non_null(buf);
  buf[0] = buf[1] = 0;
  buf[2] = 0x08;
  buf[3] = (uint8_t)ndim;
  for (int i = 0; i < ndim; i++)
    for (int b = 0; b < 4; b++) buf[4 + 4 * i + b] = (uint8_t)(dims[i] >> (24 - 8 * b));
  if (n) memcpy(buf + h, data, n);
  (gz ? dt_write_gz : dt_write)(path, buf, h + n);
  free(buf);
}

long dt_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}
