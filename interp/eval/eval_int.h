/* eval_impl.h -- the evaluator's state, shared by eval.c and the builtins
 * (builtins.c: the language's functions; builtins_rt.c: modules, tensors,
 * optimizers, data, Fabric over the runtime). Not for other modules. */
#ifndef FS_EVAL_IMPL_H
#define FS_EVAL_IMPL_H

#include "eval.h"
#include "module.h"

typedef struct fsE_define {
  const char *name; size_t nlen; /* NAME of "-D NAME=value" (borrowed) */
  const char *value;
} fsE_define;

struct fsE_ctx {
  const fs_source *src;
  fs_diags *diags;
  const fsE_options *opt;
  FILE *out;
  fs_value *globals, *locals;    /* dicts; locals NULL at top level */
  fs_value *builtins;            /* cache of builtin values by name */
  fsE_define *defines; size_t ndefines;
  const fs_node **stack; size_t depth, cap; /* active def/model calls (no recursion) */
  fs_loc *call_sites;
  bool reported;                 /* a diagnostic for the current failure exists */
  int status;                    /* 1 script error, 2 usage, 3 system */
  fs_value *retval;
  fs_module *building;           /* the sequence a model body appends to, or NULL */
  fs_device device;              /* where new parameters go (`with device(...)`) */
  uint64_t seed;                 /* fabric.seed_everything; 0 until then */
  uint64_t samples;              /* bytes model.generate drew since the seed was set */
  fs_value *fabric;              /* the last Fabric created (loss.backward() rules), or NULL */
  struct fsPG *progress;         /* the progress line a loop over a loader draws, or NULL */
  double last_loss;              /* the last loss fabric.backward saw (the line shows it) */
  bool halt;                     /* stop quietly with halt_status (a launcher's supervisor) */
  int halt_status;
};

/* print's body (slots of print's signature); also Fabric.print. */
fs_value *fsE_print(fsE_ctx *E, fs_value *const *slots);

/* Reports a run-time error at loc (once per failure); returns NULL. */
fs_value *fsE_error(fsE_ctx *E, fs_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The builtin tables (name as in fsSig); each ends with {NULL, NULL}. */
extern const fsE_builtin fsE_core_builtins[];
extern const fsE_builtin fsE_rt_builtins[];

/* Model bodies (builtins_rt.c): a Module value built from a layer statement
 * is appended to E->building under key (NULL: anonymous). */
int fsE_append_layer(fsE_ctx *E, const char *key, fs_value *layer);
/* Runs body into a fresh sequence (Sequential or Residual) and returns it as a
 * Module value; class_name names a model class (NULL: an inner block). */
fs_value *fsE_build_sequence(fsE_ctx *E, const fs_node *body, fsM_kind kind,
                             const char *class_name);
/* repeat N: body -> Module value */
fs_value *fsE_build_repeat(fsE_ctx *E, int64_t n, const fs_node *body);

/* Statement execution for the builders. */
typedef enum fsE_flow { FSE_OK, FSE_BREAK, FSE_CONTINUE, FSE_RETURN, FSE_ERROR } fsE_flow;
fsE_flow fsE_exec_block(fsE_ctx *E, const fs_node *block);

#endif
