/* atomicfile.c -- temp file + fsync + rename + fsync(dir). */
#define _POSIX_C_SOURCE 200809L
#include "atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataio.h"

/* A name taken by another live writer (or left by a dead one) is skipped. */
#define MAX_TRIES 1000

int fsK_atomic_open(fsK_atomic *a, const char *path, char **err) {
  a->path = strdup(path);
  a->tmp = NULL;
  a->fd = -1;
  if (!a->path) return fsIO_fail(err, "%s: out of memory", path);
  for (int n = 0; n < MAX_TRIES && a->fd < 0; n++) {
    free(a->tmp);
    a->tmp = fsIO_errf("%s.tmp.%ld.%d", path, (long)getpid(), n);
    if (!a->tmp) break;
    a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (a->fd < 0 && errno != EEXIST) break;
  }
  if (a->fd >= 0) return 0;
  int e = errno;
  fsIO_fail(err, "%s: cannot create a temporary file next to it: %s", path,
            a->tmp ? strerror(e) : "out of memory");
  free(a->tmp);
  free(a->path);
  a->tmp = a->path = NULL;
  return -1;
}

/* The directory part of path ("." when there is none). */
static int fsync_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return -1;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free(dir);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

static void release(fsK_atomic *a) {
  free(a->tmp);
  free(a->path);
  a->tmp = a->path = NULL;
  a->fd = -1;
}

int fsK_atomic_commit(fsK_atomic *a, char **err) {
  const char *step = NULL;
  int e = 0;
  if (fsync(a->fd) != 0) step = "fsync", e = errno;
  if (close(a->fd) != 0 && !step) step = "close", e = errno;
  a->fd = -1;
  if (!step && rename(a->tmp, a->path) != 0) step = "rename", e = errno;
  if (step) unlink(a->tmp);
  /* After the rename a failing directory fsync leaves the new file in place,
   * but not durable: still an error. */
  else if (fsync_dir(a->path) != 0) step = "syncing the directory", e = errno;
  if (step) fsIO_fail(err, "%s: cannot save: %s failed: %s", a->path, step, strerror(e));
  release(a);
  return step ? -1 : 0;
}

void fsK_atomic_abort(fsK_atomic *a) {
  if (!a->tmp) return;
  if (a->fd >= 0) close(a->fd);
  unlink(a->tmp);
  release(a);
}
