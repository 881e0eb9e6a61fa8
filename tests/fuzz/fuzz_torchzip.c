/* fuzz_torchzip.c -- libFuzzer harness of the torch checkpoint reader: any
 * bytes, as a data.pkl (fsQ_load) and as a whole file (fsH_open, then every
 * tensor read), must end in a value or an error, never in a crash, a hang,
 * a leak or a read outside the file. Seeds: tests/fuzz/seeds-torchzip/. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "torchckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every tensor reachable from v (a value may be reached twice). */
static void read_all(const fsH_file *f, const fsQ_value *v, int depth) {
  if (depth > FSQ_MAX_DEPTH) abort(); /* fsQ_load promised less */
  if (v->kind == FSQ_TENSOR) {
    size_t n = v->u.t.numel < 4096 ? (size_t)v->u.t.numel : 4096;
    float *buf = malloc(n * sizeof *buf + 1);
    char *err = NULL;
    if (buf && fsH_read(f, v, 0, n, FS_F32, buf, &err) < 0) free(err);
    free(buf);
  } else if (v->kind == FSQ_TUPLE || v->kind == FSQ_LIST) {
    for (size_t i = 0; i < v->u.seq.n; i++) read_all(f, v->u.seq.v[i], depth + 1);
  } else if (v->kind == FSQ_DICT) {
    for (size_t i = 0; i < v->u.dict.n; i++) read_all(f, v->u.dict.v[i], depth + 1);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_torchzip.%ld.pt", (long)getpid());
  fsQ_doc *d;
  char *err = NULL;
  if (fsQ_load(data, size, &d, &err) == 0) fsQ_free(d);
  else free(err);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, data, size) != (ssize_t)size) abort();
  close(fd);
  fsH_file f;
  err = NULL;
  if (fsH_open(&f, path, &err) == 0) {
    read_all(&f, f.doc->root, 0);
    fsH_close(&f);
  } else {
    free(err);
  }
  return 0;
}
