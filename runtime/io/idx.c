/* idx.c -- IDX reader: one header check, one read into one buffer. */
#define _POSIX_C_SOURCE 200809L
#include "idx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "dataio.h"

/* gzread takes an unsigned and returns an int: read in chunks below INT_MAX. */
#define CHUNK (1u << 30)

/* Reads up to n bytes; returns the count read (short = end of data), or -1
 * with *zmsg set to zlib's description of corrupt data. */
static int64_t read_all(gzFile f, uint8_t *buf, size_t n, const char **zmsg) {
  size_t done = 0;
  while (done < n) {
    size_t want = n - done < CHUNK ? n - done : CHUNK;
    int r = gzread(f, buf + done, (unsigned)want);
    int code = Z_OK;
    const char *m = gzerror(f, &code);
    /* A cut-off gzip stream reads short and flags Z_BUF_ERROR: that is
     * truncation, which the caller reports with the byte count. */
    if (r < 0 || (code != Z_OK && code != Z_BUF_ERROR)) {
      *zmsg = code == Z_ERRNO ? strerror(errno) : m;
      return -1;
    }
    done += (size_t)r;
    if ((size_t)r < want) break;
  }
  return (int64_t)done;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

#define FAIL(...) do { detail = fsIO_errf(__VA_ARGS__); goto fail; } while (0)

int fsI_read(const char *path, int ndim, const char *what, fsI_array *out, char **err) {
  memset(out, 0, sizeof *out);
  uint64_t size; /* the file's */
  int fd = fsIO_open_regular(path, &size, err);
  if (fd < 0) return -1;
  gzFile f = gzdopen(fd, "rb"); /* owns fd from here */
  if (!f) {
    close(fd);
    return fsIO_fail(err, "%s: cannot open: out of memory", path);
  }
  gzbuffer(f, 1u << 18);

  char *detail = NULL;
  uint8_t *buf = NULL;
  const char *zmsg = NULL;
  uint8_t hdr[16];
  size_t hlen = 4 + 4 * (size_t)ndim;
  int64_t got = read_all(f, hdr, hlen, &zmsg);
  if (got < 0) FAIL("corrupt gzip data: %s", zmsg);
  if (got < 4) FAIL("truncated: %lld bytes, too short for an IDX header", (long long)got);
  uint32_t magic = be32(hdr), want = 0x800u | (uint32_t)ndim;
  if (magic != want)
    FAIL("not an IDX %s file: magic 0x%08x, expected 0x%08x%s", what, magic, want,
         !hdr[0] && !hdr[1] && hdr[2] != 0x08 && hdr[3] == ndim
             ? " (only unsigned-byte data, type 0x08, is supported)" : "");
  if ((size_t)got < hlen)
    FAIL("truncated: header of %lld bytes, expected %zu", (long long)got, hlen);

  out->ndim = ndim;
  uint64_t item = 1;
  for (int i = 0; i < ndim; i++) {
    out->dims[i] = be32(hdr + 4 + 4 * i);
    if (i == 0) continue;
    if (out->dims[i] == 0) FAIL("dimension %d of the %s data is 0", i, what);
    item *= out->dims[i]; /* at most two uint32 factors: no overflow */
  }
  if (out->dims[0] && item > (SIZE_MAX / 2) / out->dims[0])
    FAIL("dimensions too large: %u items of %llu bytes", out->dims[0], (unsigned long long)item);
  out->item = (size_t)item;
  size_t total = (size_t)item * out->dims[0];

  /* Bound the data by what the file can hold before allocating what its
   * header claims: a plain file its size, gzip deflate's 1032:1 at most. */
  if (total > (gzdirect(f) ? size - hlen : size * 1032 + 1024)) {
    uint8_t scratch[1 << 14];
    int64_t r;
    got = 0;
    while ((r = read_all(f, scratch, sizeof scratch, &zmsg)) > 0) got += r;
    if (r < 0) FAIL("corrupt gzip data: %s", zmsg);
    FAIL("truncated: expected %zu bytes of %s data, found %lld", total, what, (long long)got);
  }

  /* One spare byte detects trailing data without a second read. */
  buf = fsIO_alloc_big(total + 1);
  if (!buf) FAIL("out of memory for %zu bytes of %s data", total, what);
  got = read_all(f, buf, total + 1, &zmsg);
  if (got < 0) FAIL("corrupt gzip data: %s", zmsg);
  if ((size_t)got < total)
    FAIL("truncated: expected %zu bytes of %s data, found %lld", total, what, (long long)got);
  if ((size_t)got > total)
    FAIL("trailing data: expected %zu bytes of %s data, found more", total, what);
  gzclose(f);
  out->data = buf;
  return 0;

fail:
  fsIO_fail(err, "%s: %s", path, detail ? detail : "out of memory");
  free(detail);
  free(buf);
  gzclose(f);
  memset(out, 0, sizeof *out);
  return -1;
}

void fsI_free(fsI_array *a) {
  free(a->data);
  memset(a, 0, sizeof *a);
}
