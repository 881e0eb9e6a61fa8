/* value.h -- run-time values: Python's data types plus opaque objects.
 *
 * Values are reference counted: every function returning an fs_value *
 * hands the caller one reference (fsV_release gives it back); arguments are
 * borrowed unless a comment says a function takes them. None, True and False
 * are immortal singletons. Everything the language does not build in --
 * functions, model classes, modules, tensors, Fabric, optimizers, data --
 * is an FSV_OBJ whose behaviour is its class (a vtable, Lua/ggml style),
 * filled in by the evaluator and the runtime glue.
 *
 * Errors: a function that can fail returns NULL (or -1) and leaves a
 * Python-worded message in fsV_error() (per thread): "unsupported operand
 * type(s) for +: 'int' and 'str'". The evaluator adds the location. */
#ifndef FS_VALUE_H
#define FS_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ast.h"

typedef enum fs_vtype {
  FSV_NONE, FSV_BOOL, FSV_INT, FSV_FLOAT, FSV_STR,
  FSV_LIST, FSV_TUPLE, FSV_DICT, FSV_RANGE, FSV_OBJ
} fs_vtype;

typedef struct fs_value fs_value;
typedef struct fsV_class fsV_class;
typedef struct fsE_ctx fsE_ctx; /* the evaluator's state (eval.h) */

/* A call's arguments as written: positionals, then keywords by name. */
typedef struct fsV_args {
  fs_value **pos; size_t npos;
  const char *const *kwnames; fs_value **kw; size_t nkw;
  fs_loc loc; /* the call, for diagnostics the callee reports */
} fsV_args;

/* An object's behaviour. Any entry may be NULL: the operation is then a
 * TypeError worded as Python's ("'Fabric' object is not iterable"). */
struct fsV_class {
  const char *name; /* type name in messages and signatures ("Fabric"); its
                       methods and attributes are the sig table's "Name." rows,
                       which the evaluator's libraries implement */
  int (*setattr)(fsE_ctx *E, fs_value *self, const char *name, fs_value *v);
  fs_value *(*call)(fsE_ctx *E, fs_value *self, const fsV_args *a);
  /* iteration: iter makes an iterator value; next gives 1 + *out, 0 at the end, -1 on error */
  fs_value *(*iter)(fsE_ctx *E, fs_value *self);
  int (*next)(fsE_ctx *E, fs_value *self, fs_value **out);
  fs_value *(*enter)(fsE_ctx *E, fs_value *self);   /* `with`: the `as` value */
  int (*exit)(fsE_ctx *E, fs_value *self);
  /* a op b where self is a or (swapped) b; NULL with fsV_error() == "" = not supported */
  fs_value *(*binop)(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b);
  fs_value *(*unop)(fsE_ctx *E, fs_op op, fs_value *self);
  fs_value *(*index)(fsE_ctx *E, fs_value *self, fs_value *key);
  int64_t (*len)(fsE_ctx *E, fs_value *self);       /* -1 on error */
  char *(*repr)(fs_value *self);                   /* malloc'd; NULL: "<Name object>" */
  void (*free)(void *data);
  bool (*truthy)(const fs_value *self);             /* bool(self); NULL: always true */
  /* self[key] = v: the value the subscripted target holds afterwards --
   * self (retained) when written in place, or a new value the evaluator
   * binds to the target in self's place (a tensor written on autograd's
   * tape); NULL + fsV_error on failure */
  fs_value *(*setitem)(fsE_ctx *E, fs_value *self, fs_value *key, fs_value *v);
  /* `self op= b` (Python's __iadd__...): self (retained) after an in-place
   * update, or a new value to bind; NULL with fsV_error() == "" = none, so
   * the evaluator falls back to `self op b` */
  fs_value *(*ibinop)(fsE_ctx *E, fs_op op, fs_value *self, fs_value *b);
};

struct fs_value {
  int refcount;  /* < 0: immortal */
  fs_vtype type;
  union {
    bool b;
    int64_t i;
    double f;
    struct { char *s; size_t len; } str;                 /* NUL-terminated too */
    /* dead_next: while fsV_release dismantles a dead container, the capacity
     * (no longer needed) links it to the next dead one, so freeing any depth
     * takes no stack and no allocation */
    struct { fs_value **items; size_t n; union { size_t cap; fs_value *dead_next; }; } seq; /* list, tuple */
    struct { fs_value **keys, **vals; size_t n; union { size_t cap; fs_value *dead_next; }; } dict; /* insertion order */
    struct { int64_t start, stop, step; } range;
    struct { const fsV_class *cls; void *data; } obj;
  } u;
};

/* constructors (NULL + fsV_error on out of memory) */
fs_value *fsV_none(void);
fs_value *fsV_bool(bool b);
fs_value *fsV_int(int64_t i);
fs_value *fsV_float(double f);
fs_value *fsV_str(const char *s, size_t len);     /* copies */
fs_value *fsV_cstr(const char *s);
fs_value *fsV_str_own(char *s, size_t len);       /* takes s (malloc'd); frees it on failure */
/* Bytes decoded as UTF-8 (a str holds valid UTF-8): each byte that starts no
 * valid sequence becomes U+FFFD, as Python's decode(errors="replace") does
 * for the usual cases (it replaces a truncated sequence as one). */
fs_value *fsV_str_utf8(const unsigned char *s, size_t len);
/* Python counts a str in code points: those of UTF-8 text s[0, n) (the
 * bytes that continue no sequence), and the byte offset of code point k
 * (n when k is past the last). */
size_t fsV_utf8_count(const char *s, size_t n);
size_t fsV_utf8_offset(const char *s, size_t n, size_t k);
fs_value *fsV_list(size_t cap);                   /* empty */
fs_value *fsV_tuple(size_t n);                    /* n NULL slots to fill with fsV_seq_set */
fs_value *fsV_pair(fs_value *a, fs_value *b);     /* (a, b); takes both, NULL if either is */
fs_value *fsV_dict(void);
fs_value *fsV_range(int64_t start, int64_t stop, int64_t step); /* step != 0 */
fs_value *fsV_obj(const fsV_class *cls, void *data); /* takes data (freed via cls->free on failure) */

fs_value *fsV_retain(fs_value *v);
void fsV_release(fs_value *v);                    /* NULL is a no-op; any depth */

/* How deep repr, comparison, hashing and literal parsing go into nested
 * containers before they fail with Python's RecursionError words (Python's
 * default recursion limit). Building and freeing values has no such limit. */
#define FSV_MAX_DEPTH 1000

/* containers */
int fsV_list_append(fs_value *list, fs_value *v); /* takes v; -1 on OOM (v released) */
void fsV_seq_set(fs_value *seq, size_t i, fs_value *v); /* takes v; slot must be NULL */
/* dict: key must be hashable (None, bool, int, float, str, tuple of those) */
int fsV_dict_set(fs_value *d, fs_value *key, fs_value *v); /* borrows key, takes v */
/* borrowed; NULL if absent, or (with fsV_error() set) if the key is too deep to compare */
fs_value *fsV_dict_get(const fs_value *d, const fs_value *key);
fs_value *fsV_dict_getstr(const fs_value *d, const char *key);  /* borrowed */
/* How many ints the range has (always fits: at most 2**64 - 1). */
uint64_t fsV_range_count(const fs_value *r);
/* Its len(): -1 + fsV_error (Python's OverflowError) past INT64_MAX. */
int64_t fsV_range_len(const fs_value *r);
int64_t fsV_range_at(const fs_value *r, int64_t i);

/* Whether target is from itself or an element (at any depth) of it: storing
 * `from` into target would make a reference cycle, which reference counting
 * cannot free, so the evaluator refuses it. */
bool fsV_reaches(const fs_value *from, const fs_value *target);

/* the object's data if v is an object of class cls, else NULL */
void *fsV_objdata(const fs_value *v, const fsV_class *cls);

/* Python semantics */
const char *fsV_type_name(const fs_value *v);    /* "int", "list", "Fabric" */
bool fsV_truthy(const fs_value *v);              /* objects are true */
bool fsV_is_number(const fs_value *v);           /* bool, int, float */
double fsV_to_double(const fs_value *v);          /* of a number */
/* Equality as Python's == on built-in types (1 == 1.0 == True); objects by identity.
 * fsV_equal_checked gives 1 or 0, or -1 with "RecursionError: maximum
 * recursion depth exceeded in comparison" past FSV_MAX_DEPTH levels;
 * fsV_equal counts that as unequal (and leaves the error set). */
int fsV_equal_checked(const fs_value *a, const fs_value *b);
bool fsV_equal(const fs_value *a, const fs_value *b);
/* Arithmetic and comparison on the built-in types: + - * / // % ** == != < <= > >= in, not in.
 * Objects are dispatched to their class's binop. */
fs_value *fsV_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b);
fs_value *fsV_unop(fsE_ctx *E, fs_op op, fs_value *v);   /* - + not */
/* obj[key] with negative indices; dict lookup; objects via their class. */
fs_value *fsV_index(fsE_ctx *E, fs_value *obj, fs_value *key);
/* obj[lo:hi:step]; each bound may be NULL (or None) */
fs_value *fsV_slice(const fs_value *obj, const fs_value *lo, const fs_value *hi,
                    const fs_value *step);
int64_t fsV_len(fsE_ctx *E, fs_value *v);        /* -1 + error if it has none */

/* Python's repr() and str(), malloc'd (NULL + fsV_error() on OOM, or past
 * FSV_MAX_DEPTH levels: "RecursionError: maximum recursion depth exceeded
 * while getting the repr of an object"). */
char *fsV_repr(const fs_value *v);
char *fsV_tostr(const fs_value *v);
/* The shortest repr of a double that reads back to it: "0.1", "1e-05", "inf". */
void fsV_float_repr(double f, char *buf, size_t len);

/* Parses a Python literal: None True False, ints (with _ separators),
 * floats, quoted strings, and tuples or lists of those, with an optional
 * leading sign on numbers. Used for signature defaults, -D values and
 * checkpoint metadata. Nesting past FSV_MAX_DEPTH (the depth repr writes)
 * fails with "too many nested parentheses", as Python's tokenizer says. */
fs_value *fsV_literal(const char *text);
/* A -D value typed by the parameter's default: bool accepts True/False/
 * true/false/1/0, int and float a Python literal of that kind (an int is
 * accepted for a float), str the raw text; other defaults take a literal.
 * Returns 0 and *out, or -1 and *err (malloc'd) for a value that does not
 * parse ("-D lr=abc: expected a float"). */
int fsV_parse_param(const char *text, const fs_value *default_value, fs_value **out, char **err);

/* A growing string; after an allocation failure it only records `oom`
 * (too_deep: a repr went past FSV_MAX_DEPTH, which fsV_buf_take reports). */
typedef struct fsV_buf { char *s; size_t n, cap; bool oom, too_deep; } fsV_buf;
void fsV_buf_put(fsV_buf *b, const char *s, size_t n);
void fsV_buf_puts(fsV_buf *b, const char *s);
void fsV_buf_printf(fsV_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fsV_buf_repr(fsV_buf *b, const fs_value *v);  /* appends repr(v) */
char *fsV_buf_take(fsV_buf *b); /* the NUL-terminated text, or NULL (+ error) after OOM */

void fsV_seterr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *fsV_error(void);
void fsV_clearerr(void);

#endif
