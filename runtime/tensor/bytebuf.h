/* bytebuf.h -- a byte buffer that grows as it is appended to and remembers
 * running out of memory, so that a writer (tensor_str.c's repr, the
 * pickler, the tfevents protocol buffers) appends without checking each call
 * and tests oom once at the end.
 *
 * Invariant: {0} is empty; once anything was appended, p holds n bytes and a
 * NUL after them (not counted in n), so a buffer of text is a C string.  p
 * is malloc'd and the owner frees it.  It lives at the tensor layer so that
 * runtime/tensor and runtime/io (which may include runtime/tensor, not the
 * other way round) share one; its other half is bytebuf.c. */
#ifndef FS_BYTEBUF_H
#define FS_BYTEBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fsT_buf {
  uint8_t *p;
  size_t n, cap;
  bool oom;
} fsT_buf;

/* Appends s[0..n); after a failed growth (oom) appends nothing more. */
void fsT_buf_put(fsT_buf *b, const void *s, size_t n);

#endif
