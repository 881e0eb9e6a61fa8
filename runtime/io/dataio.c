/* dataio.c -- shared helpers of the data and checkpoint modules. */
#define _DEFAULT_SOURCE /* madvise */
#include "dataio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char *vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

char *fsIO_errf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

int fsIO_fail(char **err, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    *err = vformat(fmt, ap);
    va_end(ap);
  }
  return -1;
}

ssize_t fsIO_pread_full(int fd, void *buf, size_t n, uint64_t off) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += (size_t)r;
  }
  return (ssize_t)done;
}

ssize_t fsIO_pwrite_full(int fd, const void *buf, size_t n, uint64_t off) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pwrite(fd, (const char *)buf + done, n - done, (off_t)(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    done += (size_t)r;
  }
  return (ssize_t)done;
}

void *fsIO_alloc_big(size_t n) {
  const size_t huge = (size_t)1 << 21;
  void *p;
  if (n < huge) return malloc(n ? n : 1); /* no whole huge page to gain */
  if (posix_memalign(&p, huge, n) != 0) return NULL;
  (void)madvise(p, n, MADV_HUGEPAGE); /* advice only: ignore when unsupported */
  return p;
}

const char *fsIO_file_kind(unsigned mode) {
  return S_ISDIR(mode) ? "is a directory" : S_ISFIFO(mode) ? "is a FIFO" : S_ISSOCK(mode) ? "is a socket"
       : S_ISCHR(mode) || S_ISBLK(mode) ? "is a device" : "is a special file";
}

int fsIO_open_regular(const char *path, uint64_t *size, char **err) {
  /* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fsIO_fail(err, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return fsIO_fail(err, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return fsIO_fail(err, "%s: %s, not a regular file", path, fsIO_file_kind(st.st_mode));
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    int e = errno;
    close(fd);
    return fsIO_fail(err, "%s: cannot open: %s", path, strerror(e));
  }
  if (size) *size = (uint64_t)st.st_size;
  return fd;
}

int fsIO_slurp(const char *path, uint8_t **data, size_t *len, char **err) {
  uint64_t size;
  int fd = fsIO_open_regular(path, &size, err);
  if (fd < 0) return -1;
  size_t n = (size_t)size;
  uint8_t *buf = fsIO_alloc_big(n + 1);
  if (!buf) {
    close(fd);
    return fsIO_fail(err, "%s: out of memory reading %zu bytes", path, n);
  }
  ssize_t got = fsIO_pread_full(fd, buf, n, 0);
  int e = errno;
  close(fd);
  if (got != (ssize_t)n) {
    free(buf);
    return got < 0 ? fsIO_fail(err, "%s: read error: %s", path, strerror(e))
                   : fsIO_fail(err, "%s: file shrank while reading it", path);
  }
  buf[n] = 0;
  *data = buf;
  *len = n;
  return 0;
}

void fsIO_put_le(fsT_buf *b, uint64_t v, int bytes) {
  uint8_t q[8];
  for (int i = 0; i < bytes; i++) q[i] = (uint8_t)(v >> (8 * i));
  fsT_buf_put(b, q, (size_t)bytes);
}

int fsIO_numel(int ndim, const int64_t *shape, size_t elem_size, uint64_t *numel) {
  uint64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return -1;
    if (shape[i] && n > UINT64_MAX / (uint64_t)shape[i]) return -1;
    n *= (uint64_t)shape[i];
  }
  if (elem_size && n > (uint64_t)INT64_MAX / elem_size) return -1;
  *numel = n;
  return 0;
}
