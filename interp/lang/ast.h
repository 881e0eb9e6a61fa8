/* ast.h -- the syntax tree: one generic node, kinds documented below.
 * Locations are byte offsets into the source text; fs_source maps them to
 * 1-based line and code-point column for diagnostics. */
#ifndef FS_AST_H
#define FS_AST_H

#include <stddef.h>
#include <stdint.h>

/* Out of memory ends the process with status 3 and a message; these never
 * return NULL, so callers need no failure path for small allocations. */
_Noreturn void fsA_oom(void);
void *fsA_xrealloc(void *p, size_t n);

typedef struct fs_loc {
  uint32_t start, end; /* [start, end) byte offsets */
} fs_loc;

/* A loaded script: the text (NUL-terminated copy) and its line index. */
typedef struct fs_source {
  char *path;           /* as given on the command line, or "<stdin>" */
  char *text;           /* len bytes plus a terminating NUL */
  size_t len;
  size_t mapped;        /* text is a read-only mapping of the file, this long; 0: malloc'd */
  /* The line index: the byte offset of each line start, nlines of them.
   * Made by the first fsA_source_position or fsA_source_nlines (a check
   * that reports nothing never needs it: a 100,000-line file's index cost
   * 1% of its check), so read these only after one of those. */
  uint32_t *line_starts;
  size_t nlines;
} fs_source;

fs_source *fsA_source_from_buffer(const char *path, const char *buf, size_t len);
/* NULL + errno on I/O error. may_map: a file of 128 KiB or more may be
 * mapped, not read, for a caller done with the text before the file is
 * likely to change (a file truncated meanwhile raises SIGBUS); a run, which
 * can last for hours, passes 0. */
fs_source *fsA_source_from_file(const char *path, int may_map);
void fsA_source_free(fs_source *src);
/* Decodes one code point of s[0..n) (n >= 1): its length in bytes, with
 * *cp = U+FFFD and length 1 for an invalid or truncated sequence. */
size_t fsA_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Writes code point cp (<= 0x10FFFF) as 1 to 4 bytes at b; returns how many. */
size_t fsA_utf8_encode(uint32_t cp, char *b);
/* 1-based line and code-point column of a byte offset (an invalid byte is
 * one column). */
void fsA_source_position(const fs_source *src, uint32_t offset,
                         uint32_t *line, uint32_t *column);
/* How many lines src has (a last line without a newline counts; an empty
 * text is one line): the line index's length, which this makes. */
size_t fsA_source_nlines(const fs_source *src);

typedef enum fs_node_kind {
  /* expressions */
  FS_N_NAME,    /* str */
  FS_N_INT,     /* ival */
  FS_N_FLOAT,   /* fval */
  FS_N_STR,     /* str (decoded), slen bytes */
  FS_N_FSTR,    /* kids: FS_N_STR literal pieces and FS_N_FMT fields in order */
  FS_N_FMT,     /* kids[0] expression; str = format spec after ':' or NULL; op = conversion
                 * 'r', 's', 'a' or 0; kids[1] FS_N_FSTR when the spec has fields of its own */
  FS_N_TRUE, FS_N_FALSE, FS_N_NONE,
  FS_N_LIST,    /* kids: elements (FS_N_STARRED among them in Python's form) */
  FS_N_TUPLE,   /* kids: elements (also bare `a, b` targets and values) */
  FS_N_DICT,    /* kids: key0, value0, key1, value1, ...; `**m` is the pair (STARRED m, NULL) */
  FS_N_UNARY,   /* op (FS_OP_NEG, FS_OP_POS, FS_OP_NOT), kids[0] */
  FS_N_BINARY,  /* op, kids[0] op kids[1]; also and/or, comparisons, in */
  FS_N_COND,    /* kids[0] cond, kids[1] then-value, kids[2] else-value */
  FS_N_CALL,    /* kids[0] callee, kids[1..] args: expressions, then FS_N_KWARG; Python's forms
                 * add FS_N_STARRED (`*a`, `**k`) and a lone FS_N_COMP generator */
  FS_N_KWARG,   /* str = keyword, kids[0] value; name_loc = keyword span */
  FS_N_ATTR,    /* kids[0] object, str = attribute; name_loc = attribute span */
  FS_N_INDEX,   /* kids[0] object, kids[1] index (may be FS_N_SLICE) */
  FS_N_SLICE,   /* kids[0..2] lower, upper, step; each may be NULL */
  /* statements */
  FS_N_BLOCK,   /* kids: statements */
  FS_N_EXPR,    /* kids[0] */
  FS_N_ASSIGN,  /* kids[0] target (NAME, TUPLE, LIST, ATTR, INDEX), kids[1] value;
                 * `a = b = v`: kids[2..] the further targets, assigned after kids[0] */
  FS_N_AUGASSIGN, /* op, kids[0] target, kids[1] value */
  FS_N_IF,      /* kids[0] cond, kids[1] BLOCK, kids[2] else BLOCK (an elif is a BLOCK holding one IF) or NULL */
  FS_N_FOR,     /* kids[0] target, kids[1] iterable, kids[2] BLOCK; kids[3] else BLOCK when
                 * there is one; op 1 `async for` */
  FS_N_WITH,    /* kids[0] context expr, kids[1] target or NULL, kids[2] BLOCK; op 1 `async with`.
                 * Several items nest: `with a, b:` is WITH a holding WITH b */
  FS_N_DEF,     /* str name, name_loc; kids[0] BLOCK of FS_N_PARAM, kids[1] BLOCK; Python's
                 * forms add kids[2] decorators BLOCK or NULL, kids[3] return annotation or
                 * NULL, kids[4] type parameters BLOCK or NULL; op 1 `async def` */
  FS_N_PARAM,   /* str name, kids[0] default or NULL; kids[1] annotation (type parameter: bound)
                 * when there is one; op fs_param_kind */
  FS_N_RETURN,  /* kids[0] value or NULL */
  FS_N_BREAK, FS_N_CONTINUE, FS_N_PASS,
  FS_N_ASSERT,  /* kids[0] cond, kids[1] message or NULL */
  FS_N_MODEL,   /* str name, name_loc; kids[0] BLOCK of FS_N_PARAM, kids[1] BLOCK of layer stmts */
  /* layer statements inside a model body: FS_N_EXPR (anonymous layer call),
   * FS_N_ASSIGN (NAME = layer call), FS_N_REPEAT, FS_N_RESIDUAL, FS_N_PASS */
  FS_N_REPEAT,  /* str name or NULL (`h = repeat n:`), kids[0] count, kids[1] BLOCK */
  FS_N_RESIDUAL,/* str name or NULL, kids[0] BLOCK */
  FS_N_ERROR,   /* placeholder after a syntax error (recovery) */
  /* Python's other constructs. The checker treats what it does not model as
   * unknown; the evaluator reports them as not supported at run time yet.
   * Forms of the kinds above that they do not model carry extra kids or op
   * (documented there), which both sides test before assuming the plain form. */
  FS_N_BYTES,   /* str (decoded bytes), slen */
  FS_N_BIGINT,  /* str = the literal's digits (an int beyond 64 bits) */
  FS_N_IMAG,    /* fval = the imaginary part */
  FS_N_ELLIPSIS,
  FS_N_SET,     /* kids: elements */
  FS_N_COMPARE, /* a chain `a < b <= c`: kids operands; str holds the fs_op of each link, slen links */
  FS_N_STARRED, /* op 1 `*kids[0]`, op 2 `**kids[0]` (call arguments, displays, targets) */
  FS_N_NAMEDEXPR, /* kids[0] NAME target, kids[1] value (`:=`) */
  FS_N_LAMBDA,  /* kids[0] BLOCK of FS_N_PARAM, kids[1] body expression */
  FS_N_COMP,    /* op fs_comp; kids[0] element (dict: key), kids[1] dict value or NULL, kids[2..]
                 * FS_N_COMPFOR; ival 1: a call's unparenthesised generator argument */
  FS_N_COMPFOR, /* op 1 async; kids[0] target, kids[1] iterable, kids[2..] `if` conditions */
  FS_N_YIELD,   /* op 1 `yield from`; kids[0] value or NULL */
  FS_N_AWAIT,   /* kids[0] */
  FS_N_CLASS,   /* str name, name_loc; kids[0] CALL of bases and keywords (kids[0] NULL), kids[1] BLOCK,
                 * kids[2] decorators BLOCK or NULL, kids[3] type parameters BLOCK or NULL */
  FS_N_ANNASSIGN, /* kids[0] target, kids[1] annotation, kids[2] value or NULL */
  FS_N_DEL,     /* kids: targets */
  FS_N_GLOBAL, FS_N_NONLOCAL, /* kids: NAME */
  FS_N_RAISE,   /* kids[0] exception or NULL, kids[1] cause (`from`) or NULL */
  FS_N_IMPORT,  /* kids: FS_N_ALIAS (str dotted module) */
  FS_N_IMPORTFROM, /* str dotted module or NULL (`from . import x`), op = leading dots;
                    * kids: FS_N_ALIAS (str name, "*" for `import *`) */
  FS_N_ALIAS,   /* str name, kids[0] NAME of `as` or NULL */
  FS_N_WHILE,   /* kids[0] cond, kids[1] BLOCK, kids[2] else BLOCK or NULL */
  FS_N_TRY,     /* kids[0] BLOCK, kids[1] else BLOCK or NULL, kids[2] finally BLOCK or NULL, kids[3..] FS_N_EXCEPT */
  FS_N_EXCEPT,  /* op 1 `except*`; kids[0] type or NULL, kids[1] BLOCK, kids[2] NAME of `as` or NULL */
  FS_N_MATCH,   /* kids[0] subject, kids[1..] FS_N_CASE */
  FS_N_CASE,    /* kids[0] pattern, kids[1] guard or NULL, kids[2] BLOCK. Patterns are expression
                 * nodes: NAME capture (`_` the wildcard), ATTR value, literals, LIST/TUPLE sequence,
                 * DICT mapping (`**rest` as STARRED, NULL), CALL class pattern (KWARG keywords),
                 * STARRED `*rest`, BINARY FS_OP_BITOR alternatives, FS_N_MATCHAS */
  FS_N_MATCHAS, /* kids[0] pattern, kids[1] NAME (`pattern as name`) */
  FS_N_TYPEALIAS, /* kids[0] NAME, kids[1] type parameters BLOCK or NULL, kids[2] value */
  FS_N__COUNT
} fs_node_kind;

typedef enum fs_op {
  FS_OP_NONE,
  FS_OP_ADD, FS_OP_SUB, FS_OP_MUL, FS_OP_DIV, FS_OP_FDIV, FS_OP_MOD, FS_OP_POW,
  FS_OP_EQ, FS_OP_NE, FS_OP_LT, FS_OP_LE, FS_OP_GT, FS_OP_GE,
  FS_OP_IN, FS_OP_NOT_IN, FS_OP_AND, FS_OP_OR,
  FS_OP_NEG, FS_OP_POS, FS_OP_NOT,
  FS_OP_MATMUL, FS_OP_LSHIFT, FS_OP_RSHIFT, FS_OP_BITAND, FS_OP_BITOR, FS_OP_BITXOR,
  FS_OP_INVERT, FS_OP_IS, FS_OP_IS_NOT
} fs_op;

/* FS_N_PARAM's op: how an argument reaches it. */
typedef enum fs_param_kind {
  FS_PARAM_PLAIN,     /* positional or keyword */
  FS_PARAM_POSONLY,   /* before `/` */
  FS_PARAM_KWONLY,    /* after `*` or `*args` */
  FS_PARAM_VARARGS,   /* `*args` */
  FS_PARAM_VARKW,     /* `**kwargs` */
} fs_param_kind;

/* FS_N_COMP's op. */
typedef enum fs_comp { FS_COMP_LIST, FS_COMP_SET, FS_COMP_DICT, FS_COMP_GEN } fs_comp;

/* Every node, kid array and string of a tree lives in one arena, freed with
 * the tree: a parse makes millions of small objects and frees them at once.
 * The checker keeps its values and big tables in one too. */
typedef struct fs_arena fs_arena;
fs_arena *fsA_arena_new(void);
void fsA_arena_free(fs_arena *a);
/* The free part of the current block is [next, end) (ast.c owns the blocks):
 * fsA_alloc's common case is inline, since a parse allocates for every
 * node, kid array and name, a tenth of its instructions when it was a call. */
struct fs_arena { char *next, *end; struct arena_block *head; size_t next_cap; };
void *fsA_alloc_block(fs_arena *a, size_t n); /* n from a new block */
static inline void *fsA_alloc(fs_arena *a, size_t n) {         /* 8-aligned (ast.c's ARENA_ALIGN) */
  n = n ? (n + 7) & ~(size_t)7 : 8;
  if ((size_t)(a->end - a->next) < n) return fsA_alloc_block(a, n);
  void *p = a->next;
  a->next += n;
  return p;
}
char *fsA_strndup(fs_arena *a, const char *s, size_t n);      /* NUL-terminated copy */

typedef struct fs_node fs_node;
struct fs_node {          /* 48 bytes: a big script makes millions */
  uint8_t kind;           /* fs_node_kind */
  uint8_t op;             /* fs_op */
  uint8_t kids_cap;       /* the kid array holds 1 << (kids_cap - 1); 0: none yet */
  uint8_t root;           /* 1 on a tree's root, which holds the tree's arena */
  uint32_t depth;         /* 1 + deepest kid; the parser bounds it (FS_MAX_DEPTH) */
  fs_loc loc;             /* whole construct */
  union {                 /* no kind has both a number and a name span */
    int64_t ival;         /* INT; the body offset of a raw f-string */
    double fval;          /* FLOAT */
    fs_loc name_loc;      /* DEF/MODEL/KWARG/ATTR name, REPEAT/RESIDUAL target */
  };
  char *str;              /* NUL-terminated, in the tree's arena */
  uint32_t slen;          /* byte length of str (strings may hold any byte but NUL) */
  uint32_t nkids;
  fs_node **kids;         /* in the arena; entries may be NULL where documented */
};

/* Every tree walker may recurse this deep and no deeper. Python's own
 * recursion limit: a flat `a0 + a1 + ... + a998` is a left-leaning tree that
 * deep, and CPython compiles it; nesting brackets stops at 200 first
 * (FS_MAX_BRACKETS, CPython's "too many nested parentheses"). */
#define FS_MAX_DEPTH 1000

/* Makes room for n kids at once (a node whose arity is known). */
void fsA_reserve(fs_arena *a, fs_node *parent, uint32_t n);
/* A node and an appended kid (kid may be NULL): inline, as fsA_alloc. */
static inline fs_node *fsA_new(fs_arena *a, fs_node_kind kind, fs_loc loc) {
  fs_node *n = fsA_alloc(a, sizeof *n);
  *n = (fs_node){.kind = (uint8_t)kind, .loc = loc, .depth = 1};
  return n;
}
/* A node with room for n >= 1 kids, node and kid array in one allocation
 * (the parser's nodes of known arity: a call to fsA_reserve each cost a
 * tenth of building the tree). */
static inline fs_node *fsA_new_kids(fs_arena *a, fs_node_kind kind, fs_loc loc, uint32_t n) {
  uint8_t log2 = n <= 1 ? 0 : (uint8_t)(32 - __builtin_clz(n - 1)); /* the least with n <= 1 << log2 */
  fs_node *x = fsA_alloc(a, sizeof *x + ((size_t)1 << log2) * sizeof(fs_node *));
  *x = (fs_node){.kind = (uint8_t)kind, .loc = loc, .depth = 1, .kids_cap = (uint8_t)(log2 + 1),
                 .kids = (fs_node **)(x + 1)};
  return x;
}
static inline void fsA_push(fs_arena *a, fs_node *parent, fs_node *kid) {
  uint32_t cap = parent->kids_cap ? 1u << (parent->kids_cap - 1) : 0;
  if (parent->nkids == cap) fsA_reserve(a, parent, cap ? 2 * cap : 1);
  parent->kids[parent->nkids++] = kid;
  if (kid && kid->depth + 1 > parent->depth) parent->depth = kid->depth + 1;
}
/* Makes a copy of n, allocated in a, the root of a tree that owns a:
 * fsA_free(root) frees the whole arena. */
fs_node *fsA_root(fs_arena *a, const fs_node *n);
/* Frees a whole tree, given its root; any other node goes with its tree, so
 * freeing it alone does nothing. */
void fsA_free(fs_node *root);
const char *fsA_kind_name(fs_node_kind kind);
/* What of Python the evaluator does not run yet, as a phrase for "... is not
 * supported at run time yet" ("a set", "`async for`", "del"), or NULL when
 * the node's own form runs (its children are asked separately). The
 * evaluator refuses exactly these, and the checker reports them in a script
 * that will run (rule `unsupported`), so check and run agree. */
const char *fsA_run_unsupported(const fs_node *n);
/* Whether a def is one the checker and the evaluator model: no decorators,
 * not async, every parameter positional-or-keyword (annotations, a return
 * annotation and type parameters change nothing they see). */
int fsA_def_plain(const fs_node *def);
/* The `def name` statement directly in block (a model body's forward), or NULL. */
const fs_node *fsA_block_def(const fs_node *block, const char *name);
const char *fsA_op_text(fs_op op);              /* "+", "not in", ... */

#endif
