/* bytebuf.c -- the growing byte buffer of bytebuf.h: capacity doubles from
 * 64 bytes, one byte beyond n always holds a NUL. */
#include "bytebuf.h"

#include <stdlib.h>
#include <string.h>

void fsT_buf_put(fsT_buf *b, const void *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
