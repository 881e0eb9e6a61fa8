/* signatures.h -- the one table of every builtin callable and attribute.
 * The checker (arity, unknown keywords, literal types) and the evaluator
 * (argument binding) both read it, so a signature cannot drift between
 * check time and run time. Names follow Python: functions "print", classes
 * "Fabric", methods and attributes "Type.member" with receiver types
 * Fabric, Module, Optimizer, Tensor, DataLoader, Dataset, list, dict, str. */
#ifndef FS_SIGNATURES_H
#define FS_SIGNATURES_H

#include <stddef.h>
#include <stdio.h>

#include "ast.h"

/* Literal types a parameter accepts (bit mask); FSSIG_T_ANY = unchecked. */
enum {
  FSSIG_T_NONE = 1u << 0, FSSIG_T_BOOL = 1u << 1, FSSIG_T_INT = 1u << 2,
  FSSIG_T_FLOAT = 1u << 3, FSSIG_T_STR = 1u << 4, FSSIG_T_LIST = 1u << 5,
  FSSIG_T_TUPLE = 1u << 6, FSSIG_T_DICT = 1u << 7,
  FSSIG_T_FUNC = 1u << 8,  /* a def function */
  FSSIG_T_OBJ = 1u << 9,   /* a runtime object, model class or range */
  FSSIG_T_NUM = FSSIG_T_INT | FSSIG_T_FLOAT,
  FSSIG_T_SEQ = FSSIG_T_LIST | FSSIG_T_TUPLE,
  FSSIG_T_ANY = 0x3ffu
};

/* Parameter flags. */
enum {
  FSSIG_VARARGS = 1u << 0, /* *args: collects the extra positionals */
  FSSIG_VARKW = 1u << 1,   /* **kwargs: collects unknown keywords */
  FSSIG_KWONLY = 1u << 2,  /* after * : keyword only */
  FSSIG_POSONLY = 1u << 3  /* before / : positional only */
};

typedef struct fsSig_param {
  const char *name;
  unsigned types;  /* FSSIG_T_* mask */
  const char *def; /* default as a Python literal ("None", "1e-3", "(0.9, 0.999)");
                      NULL: required. Signatures built for a `def` use "" for
                      "has a default expression". */
  unsigned flags;  /* FSSIG_VARARGS ... */
} fsSig_param;

typedef enum fsSig_kind {
  FSSIG_FUNC,   /* builtin function */
  FSSIG_CLASS,  /* builtin class: Fabric, SGD, DataLoader, strategies, data sets */
  FSSIG_LAYER,  /* layer class, valid in a model body */
  FSSIG_MODULE, /* a module value ("math"): its implementation makes the value
                   the name is bound to; its members are "math.cos" rows */
  FSSIG_METHOD, /* "Type.method" */
  FSSIG_ATTR    /* "Type.attr" property; params unused */
} fsSig_kind;

enum { FSSIG_SETTABLE = 1u << 0, /* ATTR: `obj.attr = v` allowed */
       FSSIG_CONTEXT = 1u << 1,  /* the call returns a `with` context manager */
       FSSIG_CONST = 1u << 2     /* FUNC: a named constant (float32); the name is
                                    its value, made by the native with no arguments */ };

typedef struct fsSig {
  const char *name;        /* "print", "Fabric", "Fabric.setup", "Optimizer.lr" */
  fsSig_kind kind;
  const fsSig_param *params;
  size_t nparams;
  const char *returns;     /* result type name: "None", "int", "Module", "Tensor",
                              "tuple", ... "any" when it depends on the arguments */
  unsigned flags;          /* FSSIG_SETTABLE, FSSIG_CONTEXT */
} fsSig;

/* A builtin function, class or module by name, NULL if there is none. */
const fsSig *fsSig_find(const char *name);
/* A method or attribute of a receiver type ("Fabric", "setup"), NULL if none. */
const fsSig *fsSig_member(const char *type, const char *member);
/* The whole table (for completion and exhaustive checks). */
const fsSig *fsSig_all(size_t *n);

/* Maps a call's arguments onto the signature's parameters. The call has npos
 * positional arguments and nkw keyword arguments named kw[0..nkw-1]. On
 * success pos_slot[i] / kw_slot[j] is the index of the parameter receiving
 * positional i / keyword j (the *args / **kwargs parameter for extras) and
 * 0 is returned. On a mismatch *err is a malloc'd Python-worded message
 * ("SGD() missing required argument 'lr'") and -1 is returned; -2 if out of
 * memory. Parameters reached by no argument take their default. */
int fsSig_bind(const fsSig *sig, size_t npos, const char *const *kw, size_t nkw,
               int *pos_slot, int *kw_slot, char **err);

/* Writes the signature as Python shows it: `zeros(*size, dtype=None) -> Tensor`,
 * `Tensor.shape -> tuple` for an attribute or constant; `/` and `*` mark
 * positional-only and keyword-only parameters. */
void fsSig_format(const fsSig *sig, FILE *out);
/* The row's one line of documentation (sigdoc.c), NULL if it has none. */
const char *fsSig_doc(const char *name);
/* The i-th documented name in sorted order, NULL past the end (for the test
 * that every line names a row). */
const char *fsSig_doc_name(size_t i);

/* The index of parameter `name`, or -1. */
int fsSig_param_index(const fsSig *sig, const char *name);

/* Where a diagnostic about one argument of `call` (bound to sig) points:
 * the argument given for parameter `param` -- its index-th value when param
 * is *args, `name=value` when passed by keyword -- or with param "()" the
 * call's parentheses. The whole call when the argument is not there or a
 * `*xs`/`**kw` in the call hides which value is which. The checker and the
 * run both call it, so both put the caret in the same place. */
fs_loc fsSig_arg_loc(const fsSig *sig, const fs_node *call, const char *param, int index);

#endif
