/* ast.c -- syntax-tree nodes and the source line map. */
#define _DEFAULT_SOURCE /* madvise, MAP_ANONYMOUS */
#include "ast.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Noreturn void fsA_oom(void) {
  fputs("fabricscript: out of memory\n", stderr);
  exit(3);
}

void *fsA_xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) fsA_oom();
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

size_t fsA_utf8_encode(uint32_t cp, char *b) {
  if (cp < 0x80) { b[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    b[0] = (char)(0xC0 | cp >> 6); b[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    b[0] = (char)(0xE0 | cp >> 12); b[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  b[0] = (char)(0xF0 | cp >> 18); b[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  b[2] = (char)(0x80 | (cp >> 6 & 0x3F)); b[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Takes text (len bytes and a NUL after them) and indexes its lines. */
static fs_source *source_own(const char *path, char *text, size_t len, size_t mapped) {
  fs_source *src = fsA_xrealloc(NULL, sizeof *src);
  src->path = strdup(path);
  src->text = text;
  src->len = len;
  src->mapped = mapped;
  src->line_starts = NULL; /* made when first asked for (line_index) */
  src->nlines = 0;
  return src;
}

/* Makes src's line index if it has none yet. The source is read-only to
 * everyone else; the index is a cache of its text, made once. */
static void line_index(const fs_source *csrc) {
  if (csrc->line_starts) return;
  fs_source *src = (fs_source *)csrc;
  size_t cap = 64, n = 0;
  uint32_t *starts = fsA_xrealloc(NULL, cap * sizeof *starts);
  starts[n++] = 0;
  for (const char *p = src->text, *end = src->text + src->len; (p = memchr(p, '\n', (size_t)(end - p))); p++) {
    if (n == cap) {
      cap *= 2;
      starts = fsA_xrealloc(starts, cap * sizeof *starts);
    }
    starts[n++] = (uint32_t)(p - src->text + 1);
  }
  src->line_starts = starts;
  src->nlines = n;
}

size_t fsA_source_nlines(const fs_source *src) {
  line_index(src);
  return src->nlines;
}

fs_source *fsA_source_from_buffer(const char *path, const char *buf, size_t len) {
  char *text = fsA_xrealloc(NULL, len + 1);
  if (len) memcpy(text, buf, len);
  text[len] = '\0';
  return source_own(path, text, len, 0);
}

/* From this size a file may be mapped, not read: its pages are in the page
 * cache already, where reading would copy them into fresh memory (malloc maps
 * a buffer this big anew). The NUL after the text is the zero fill of a
 * partial last page, so a file that ends on a page boundary is read. */
#define SOURCE_MAP_MIN (128u << 10)

static char *source_map(FILE *f, const struct stat *st) {
  long page = sysconf(_SC_PAGESIZE);
  if (!S_ISREG(st->st_mode) || st->st_size < (off_t)SOURCE_MAP_MIN || st->st_size >= (off_t)UINT32_MAX ||
      page <= 0 || st->st_size % page == 0)
    return NULL;
  void *p = mmap(NULL, (size_t)st->st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fileno(f), 0);
  return p == MAP_FAILED ? NULL : p;
}

fs_source *fsA_source_from_file(const char *path, int may_map) {
  int is_stdin = strcmp(path, "-") == 0;
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f) return NULL;
  struct stat st;
  int have_st = fstat(fileno(f), &st) == 0;
  char *map = may_map && have_st && !is_stdin ? source_map(f, &st) : NULL;
  if (map) {
    fclose(f);
    return source_own(path, map, (size_t)st.st_size, (size_t)st.st_size);
  }
  /* Read straight into the text buffer, sized from fstat when it can be. */
  size_t cap = have_st && S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536;
  char *buf = NULL;
  size_t len = 0;
  for (;;) {
    if (len + 1 >= cap || !buf) {
      if (buf) cap *= 2;
      if (cap > UINT32_MAX) { errno = EFBIG; goto fail; }
      buf = fsA_xrealloc(buf, cap);
    }
    size_t n = fread(buf + len, 1, cap - 1 - len, f);
    len += n;
    if (n == 0) break;
  }
  if (ferror(f)) goto fail;
  if (!is_stdin) fclose(f);
  buf[len] = '\0';
  return source_own(is_stdin ? "<stdin>" : path, buf, len, 0);
fail: {
    int e = errno ? errno : EIO;
    if (!is_stdin) fclose(f);
    free(buf);
    errno = e;
    return NULL;
  }
}

void fsA_source_free(fs_source *src) {
  if (!src) return;
  free(src->path);
  if (src->mapped) munmap(src->text, src->mapped);
  else free(src->text);
  free(src->line_starts);
  free(src);
}

void fsA_source_position(const fs_source *src, uint32_t offset,
                         uint32_t *line, uint32_t *column) {
  if (offset > src->len) offset = (uint32_t)src->len;
  line_index(src);
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

/* Blocks of 64 KiB, then 256 KiB, then 2 MiB with transparent huge pages:
 * first touching 4 KiB pages one by one is what a big parse pays for (about
 * four times as much per byte as a huge page here), while a small tree should
 * not pay for clearing a 2 MiB page. */
typedef struct arena_block { struct arena_block *next; size_t cap, mapped; } arena_block;

/* Nothing in a tree or the checker's state is wider than 8 bytes; a 16-byte
 * grain would spend a fifth of a big tree on padding. */
#define ARENA_ALIGN 8u
#define ARENA_HEADER ((sizeof(arena_block) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))
#define ARENA_FIRST (64u << 10)
#define ARENA_HUGE (2u << 20)

/* Huge blocks a freed arena leaves for the next one in this thread: a
 * process that parses many files (check FILE..., the REPL, the corpus
 * bench) pays for clearing their pages once, not per file. */
#define ARENA_SPARE_MAX 8
static _Thread_local arena_block *arena_spare;
static _Thread_local int arena_nspare;

fs_arena *fsA_arena_new(void) {
  fs_arena *a = fsA_xrealloc(NULL, sizeof *a);
  a->next = a->end = NULL;
  a->head = NULL;
  a->next_cap = ARENA_FIRST;
  return a;
}

static void arena_grow(fs_arena *a, size_t need) {
  size_t cap = a->next_cap;
  while (cap < need + ARENA_HEADER) cap *= 2;
  a->next_cap = a->next_cap < ARENA_FIRST * 4 ? a->next_cap * 4 : ARENA_HUGE;
  arena_block *b;
  size_t mapped = 0;
  if (cap == ARENA_HUGE && arena_spare) {
    b = arena_spare;
    arena_spare = b->next;
    arena_nspare--;
    mapped = cap;
  } else if (cap >= ARENA_HUGE) {
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fsA_oom();
    madvise(p, cap, MADV_HUGEPAGE);
    b = p;
    mapped = cap;
  } else {
    b = fsA_xrealloc(NULL, cap);
  }
  b->next = a->head;
  b->cap = cap;
  b->mapped = mapped;
  a->head = b;
  a->next = (char *)b + ARENA_HEADER;
  a->end = (char *)b + cap;
}

void *fsA_alloc_block(fs_arena *a, size_t n) {
  arena_grow(a, n);
  void *p = a->next;
  a->next += n;
  return p;
}

char *fsA_strndup(fs_arena *a, const char *s, size_t n) {
  char *d = fsA_alloc(a, n + 1);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

void fsA_arena_free(fs_arena *a) {
  for (arena_block *b = a->head, *next; b; b = next) {
    next = b->next;
    if (b->mapped == ARENA_HUGE && arena_nspare < ARENA_SPARE_MAX) {
      b->next = arena_spare;
      arena_spare = b;
      arena_nspare++;
    } else if (b->mapped) {
      munmap(b, b->mapped);
    } else {
      free(b);
    }
  }
  free(a);
}

/* A root carries its arena behind it, so other nodes need no field for it. */
typedef struct fs_tree { fs_node root; fs_arena *arena; } fs_tree;

void fsA_reserve(fs_arena *a, fs_node *parent, uint32_t n) {
  uint32_t cap = parent->kids_cap ? 1u << (parent->kids_cap - 1) : 0;
  if (n <= cap) return;
  uint8_t log2 = n <= 1 ? 0 : (uint8_t)(32 - __builtin_clz(n - 1)); /* the least with n <= 1 << log2 */
  fs_node **kids = fsA_alloc(a, ((size_t)1 << log2) * sizeof *kids);
  if (parent->nkids) memcpy(kids, parent->kids, parent->nkids * sizeof *kids);
  parent->kids = kids;
  parent->kids_cap = (uint8_t)(log2 + 1);
}


fs_node *fsA_root(fs_arena *a, const fs_node *n) {
  fs_tree *t = fsA_alloc(a, sizeof *t);
  t->root = *n;
  t->root.root = 1;
  t->arena = a;
  return &t->root;
}

_Static_assert(sizeof(fs_node) <= 48, "fs_node grew: a big tree pays for every byte");

void fsA_free(fs_node *root) {
  if (root && root->root) fsA_arena_free(((fs_tree *)root)->arena);
}

const char *fsA_kind_name(fs_node_kind kind) {
  static const char *const names[FS_N__COUNT] = {
    "name", "int", "float", "str", "fstring", "format field", "True", "False",
    "None", "list", "tuple", "dict", "unary", "binary", "conditional", "call",
    "keyword argument", "attribute", "index", "slice", "block", "expression",
    "assignment", "augmented assignment", "if", "for", "with", "def",
    "parameter", "return", "break", "continue", "pass", "assert", "model",
    "repeat", "residual", "error",
    "bytes", "int", "complex", "Ellipsis", "set", "comparison", "starred expression",
    "named expression", "lambda", "comprehension", "comprehension clause", "yield", "await",
    "class", "annotated assignment", "del", "global", "nonlocal", "raise", "import",
    "from-import", "import alias", "while", "try", "except clause", "match", "case",
    "as-pattern", "type alias",
  };
  return (unsigned)kind < FS_N__COUNT ? names[kind] : "?";
}

int fsA_def_plain(const fs_node *def) {
  if (def->op || (def->nkids > 2 && def->kids[2])) return 0;
  const fs_node *params = def->kids[0];
  for (uint32_t i = 0; i < params->nkids; i++)
    if (params->kids[i]->op != FS_PARAM_PLAIN) return 0;
  return 1;
}

const fs_node *fsA_block_def(const fs_node *block, const char *name) {
  for (uint32_t i = 0; block && i < block->nkids; i++)
    if (block->kids[i]->kind == FS_N_DEF && !strcmp(block->kids[i]->str, name)) return block->kids[i];
  return NULL;
}

const char *fsA_op_text(fs_op op) {
  static const char *const text[] = {
    "", "+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=",
    "in", "not in", "and", "or", "-", "+", "not",
    "@", "<<", ">>", "&", "|", "^", "~", "is", "is not",
  };
  return (unsigned)op < sizeof text / sizeof *text ? text[op] : "?";
}

const char *fsA_run_unsupported(const fs_node *n) {
  switch (n->kind) {
  case FS_N_COMPFOR: case FS_N_FOR: return n->op ? "`async for`" : NULL;
  case FS_N_WITH: return n->op ? "`async with`" : NULL;
  case FS_N_BYTES: return "bytes";
  case FS_N_IMAG: return "a complex number";
  case FS_N_YIELD: return "a generator (`yield`)";
  case FS_N_AWAIT: return "`await`";
  case FS_N_MATCH: return "`match`";
  case FS_N_DEL: return "`del`";
  case FS_N_EXCEPT: return n->op ? "`except*`" : NULL;
  case FS_N_FMT: return n->nkids > 1 && n->kids[1] ? "a format spec with fields" : NULL;
  case FS_N_DEF: return n->op ? "an async def" : n->nkids > 4 && n->kids[4] ? "a generic def" : NULL;
  case FS_N_IMPORTFROM:
    if (!n->str || n->op) return "a relative import";
    for (uint32_t i = 0; i < n->nkids; i++)
      if (!strcmp(n->kids[i]->str, "*")) return "`import *`";
    return NULL;
  case FS_N_CLASS: {
    if ((n->nkids > 2 && n->kids[2]) || (n->nkids > 3 && n->kids[3])) return "a decorated or generic class";
    const fs_node *args = n->kids[0];
    for (uint32_t i = 1; args && i < args->nkids; i++)
      if (args->kids[i]->kind == FS_N_KWARG || args->kids[i]->kind == FS_N_STARRED)
        return "a class's keywords (metaclass=...) or starred bases";
    return args && args->nkids > 2 ? "multiple inheritance" : NULL;
  }
  case FS_N_CALL: /* super(Class, self): the arguments Python 3 infers */
    return n->kids[0] && n->kids[0]->kind == FS_N_NAME && !strcmp(n->kids[0]->str, "super") && n->nkids > 1
               ? "super() with arguments" : NULL;
  default: return NULL;
  }
}
