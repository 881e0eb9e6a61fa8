/* ast.c -- syntax-tree nodes and the source line map. */
#define _POSIX_C_SOURCE 200809L
#include "ast.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n);
  if (!q && n) { fputs("fabricscript: out of memory\n", stderr); exit(3); }
  return q;
}

size_t fsA_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
  uint32_t v, min;
  size_t len;
  if (s[0] < 0x80) { *cp = s[0]; return 1; }
  if ((s[0] & 0xE0) == 0xC0) { len = 2; v = s[0] & 0x1Fu; min = 0x80; }
  else if ((s[0] & 0xF0) == 0xE0) { len = 3; v = s[0] & 0x0Fu; min = 0x800; }
  else if ((s[0] & 0xF8) == 0xF0) { len = 4; v = s[0] & 0x07u; min = 0x10000; }
  else goto bad;
  if (len > n) goto bad;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) goto bad;
    v = v << 6 | (s[i] & 0x3Fu);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto bad;
  *cp = v;
  return len;
bad:
  *cp = 0xFFFD;
  return 1;
}

fs_source *fsA_source_from_buffer(const char *path, const char *buf, size_t len) {
  fs_source *src = xrealloc(NULL, sizeof *src);
  src->path = strdup(path);
  src->text = xrealloc(NULL, len + 1);
  if (len) memcpy(src->text, buf, len);
  src->text[len] = '\0';
  src->len = len;
  size_t cap = 64;
  src->line_starts = xrealloc(NULL, cap * sizeof *src->line_starts);
  src->nlines = 0;
  src->line_starts[src->nlines++] = 0;
  for (size_t i = 0; i < len; i++) {
    if (buf[i] != '\n') continue;
    if (src->nlines == cap) {
      cap *= 2;
      src->line_starts = xrealloc(src->line_starts, cap * sizeof *src->line_starts);
    }
    src->line_starts[src->nlines++] = (uint32_t)(i + 1);
  }
  return src;
}

fs_source *fsA_source_from_file(const char *path) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 65536;
      if (cap > UINT32_MAX) { errno = EFBIG; goto fail; }
      buf = xrealloc(buf, cap);
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  if (ferror(f)) goto fail;
  if (f != stdin) fclose(f);
  fs_source *src = fsA_source_from_buffer(strcmp(path, "-") == 0 ? "<stdin>" : path, buf, len);
  free(buf);
  return src;
fail: {
    int e = errno ? errno : EIO;
    if (f != stdin) fclose(f);
    free(buf);
    errno = e;
    return NULL;
  }
}

void fsA_source_free(fs_source *src) {
  if (!src) return;
  free(src->path);
  free(src->text);
  free(src->line_starts);
  free(src);
}

void fsA_source_position(const fs_source *src, uint32_t offset,
                         uint32_t *line, uint32_t *column) {
  if (offset > src->len) offset = (uint32_t)src->len;
  size_t lo = 0, hi = src->nlines; /* last line start <= offset */
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (src->line_starts[mid] <= offset) lo = mid; else hi = mid;
  }
  /* Columns count code points; an invalid byte is one column, as drawn. */
  uint32_t col = 1;
  for (size_t i = src->line_starts[lo]; i < offset; col++) {
    uint32_t cp;
    i += fsA_utf8_decode((const unsigned char *)src->text + i, offset - i, &cp);
  }
  *line = (uint32_t)lo + 1;
  *column = col;
}

fs_node *fsA_new(fs_node_kind kind, fs_loc loc) {
  fs_node *n = xrealloc(NULL, sizeof *n);
  memset(n, 0, sizeof *n);
  n->kind = kind;
  n->loc = loc;
  n->name_loc = loc;
  n->depth = 1;
  return n;
}

void fsA_push(fs_node *parent, fs_node *kid) {
  /* Grow by doubling: capacity is the next power of two >= nkids. */
  uint32_t n = parent->nkids;
  if ((n & (n - 1)) == 0)
    parent->kids = xrealloc(parent->kids, (n ? 2 * (size_t)n : 1) * sizeof *parent->kids);
  parent->kids[parent->nkids++] = kid;
  if (kid && kid->depth + 1 > parent->depth) parent->depth = kid->depth + 1;
}

void fsA_free(fs_node *node) {
  /* An explicit stack: freeing must not recurse, whatever the input's shape. */
  fs_node **stack = NULL;
  size_t n = 0, cap = 0;
  if (node) { stack = xrealloc(NULL, 16 * sizeof *stack); cap = 16; stack[n++] = node; }
  while (n) {
    fs_node *x = stack[--n];
    for (uint32_t i = 0; i < x->nkids; i++) {
      if (!x->kids[i]) continue;
      if (n == cap) { cap *= 2; stack = xrealloc(stack, cap * sizeof *stack); }
      stack[n++] = x->kids[i];
    }
    free(x->kids);
    free(x->str);
    free(x);
  }
  free(stack);
}

const char *fsA_kind_name(fs_node_kind kind) {
  static const char *const names[FS_N__COUNT] = {
    "name", "int", "float", "str", "fstring", "format field", "True", "False",
    "None", "list", "tuple", "dict", "unary", "binary", "conditional", "call",
    "keyword argument", "attribute", "index", "slice", "block", "expression",
    "assignment", "augmented assignment", "if", "for", "with", "def",
    "parameter", "return", "break", "continue", "pass", "assert", "model",
    "repeat", "residual", "error",
  };
  return (unsigned)kind < FS_N__COUNT ? names[kind] : "?";
}

const char *fsA_op_text(fs_op op) {
  static const char *const text[] = {
    "", "+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=",
    "in", "not in", "and", "or", "-", "+", "not",
  };
  return (unsigned)op < sizeof text / sizeof *text ? text[op] : "?";
}
