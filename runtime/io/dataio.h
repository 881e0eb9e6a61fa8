/* dataio.h -- what the data and checkpoint modules share: malloc'd error
 * strings, I/O loops that finish short reads and writes, whole-file reads,
 * large buffers, little-endian appends to a byte buffer (bytebuf.h), element
 * counts.
 *
 * Error convention of idx/dataset/loader/safetensors: a function that can
 * fail returns -1 (or NULL) and stores in *err one malloc'd message that
 * names the file and what is wrong; the caller frees it. Nothing the failed
 * call took is left allocated. */
#ifndef FS_DATAIO_H
#define FS_DATAIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "bytebuf.h"

/* A malloc'd printf-formatted string; NULL only when out of memory. */
char *fsIO_errf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Stores fsIO_errf(...) in *err when err is not NULL; returns -1. */
int fsIO_fail(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* pread/pwrite until n bytes moved, retrying EINTR. Returns the bytes moved
 * (less than n only at end of file for reads) or -1 with errno set. */
ssize_t fsIO_pread_full(int fd, void *buf, size_t n, uint64_t off);
ssize_t fsIO_pwrite_full(int fd, const void *buf, size_t n, uint64_t off);

/* malloc for large buffers filled once (decompressed data sets, files):
 * from 2 MiB up, aligned to and advised as huge pages, since first-touch faults
 * dominate filling fresh memory here (47 MB of images: 0.2 s -> 0.01 s).
 * Release with free(). NULL when out of memory. */
void *fsIO_alloc_big(size_t n);

/* Opens path read-only if it is a regular file (following symlinks), else
 * fails naming what it is ("is a directory", "is a FIFO", "is a device"):
 * opened without blocking, so a FIFO with no writer cannot hang the reader.
 * The descriptor and, unless size is NULL, the file's size in *size (from
 * the same fstat: readers of a whole file need not stat again), or -1 + *err. */
int fsIO_open_regular(const char *path, uint64_t *size, char **err);
/* What a file of this st_mode is, for "PATH: <kind>, not a regular file". */
const char *fsIO_file_kind(unsigned mode);

/* Reads a whole regular file into a malloc'd buffer (plus a NUL that *len
 * does not count). -1 + *err on failure. */
int fsIO_slurp(const char *path, uint8_t **data, size_t *len, char **err);

/* v's low `bytes` bytes (at most 8), least significant first. */
void fsIO_put_le(fsT_buf *b, uint64_t v, int bytes);

/* Product of shape[0..ndim) into *numel; -1 on a negative dim or overflow
 * of elem_size * numel bytes (elem_size 1 checks the count alone). */
int fsIO_numel(int ndim, const int64_t *shape, size_t elem_size, uint64_t *numel);

#endif
