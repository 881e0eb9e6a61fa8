/* eval_int.h -- the evaluator's private header: its state, the calling
 * convention of builtins, the libraries' registration, and the runtime values
 * the libraries share (a module is made by lib_nn.c, set up by lib_fabric.c
 * and saved by lib_ckpt.c).  Only eval/ includes it. */
#ifndef FS_EVAL_INT_H
#define FS_EVAL_INT_H

#include <stdlib.h>

#include "eval.h"
#include "fabric.h"
#include "fsdp.h"
#include "launch.h"
#include "loader.h"
#include "logger.h"
#include "module.h"
#include "optim.h"

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
  uint64_t drawn, drawn_seed;    /* elements rand/randn/randint drew since seed drawn_seed was set */
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

/* ---- builtins: the calling convention and the libraries ------------------ */

/* A builtin's implementation. slots[i] holds parameter i of sig (defaults
 * filled in; *args as a tuple, **kwargs as a dict), borrowed. self is the
 * receiver of a method, else NULL. NULL + fsV_seterr on failure. */
typedef fs_value *(*fsE_native)(fsE_ctx *E, fs_value *self, fs_value **slots, const fsV_args *a);

/* Binds a's arguments to sig's parameters into slots (new references,
 * sig->nparams of them); -1 + fsV_error on a mismatch. */
int fsE_bind(fsE_ctx *E, const fsSig *sig, const fsV_args *a, fs_value **slots);
void fsE_unbind(const fsSig *sig, fs_value **slots);

fs_value *fsE_call(fsE_ctx *E, fs_value *callee, const fsV_args *a);
fs_value *fsE_call_method(fsE_ctx *E, fs_value *self, const char *name, const fsV_args *a);
/* A bound builtin method value (for `f = obj.method`). */
fs_value *fsE_method_value(fsE_ctx *E, fs_value *self, const char *name);

/* Iteration over any iterable value. */
typedef struct fsE_iter { fs_value *src, *it; int64_t i; } fsE_iter;
int fsE_iter_begin(fsE_ctx *E, fs_value *v, fsE_iter *it); /* -1 + error: not iterable */
int fsE_iter_next(fsE_ctx *E, fsE_iter *it, fs_value **out); /* 1 item, 0 end, -1 error */
void fsE_iter_end(fsE_iter *it);

FILE *fsE_out(fsE_ctx *E);

#define NATIVE(f) static fs_value *f(fsE_ctx *E, fs_value *self, fs_value **s, const fsV_args *a)

/* A library registers its builtins as Lua's luaL_Reg: one row per builtin,
 * named as its fsSig row ("print", "Fabric", "Fabric.setup"), ending in
 * {NULL, NULL}.  libs.c lists the libraries a run opens. */
typedef struct fsE_reg { const char *name; fsE_native fn; } fsE_reg;
typedef struct fsE_lib { const char *name; const fsE_reg *funcs; } fsE_lib;
extern const fsE_lib fsE_lib_core, fsE_lib_tensor, fsE_lib_ctx, fsE_lib_nn, fsE_lib_optim,
    fsE_lib_data, fsE_lib_strategy, fsE_lib_fabric, fsE_lib_ckpt, fsE_lib_torch, fsE_lib_shape,
    fsE_lib_arith, fsE_lib_functional;
/* The implementation of sig's builtin, or NULL when no library has one. */
fsE_native fsE_native_of(const fsSig *sig);
const fsE_lib *const *fsE_libs(size_t *n); /* the list, for tests */

/* Model bodies (lib_nn.c): a Module value built from a layer statement
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


/* ---- runtime values the libraries share ------------------------------------ */

static inline fs_value *fsE_rt_fail(void) { /* the runtime's last error as the failure */
  fsV_seterr("%s", fsT_error()[0] ? fsT_error() : "runtime error");
  return NULL;
}
static inline fs_value *fsE_err_own(char *err) { /* takes err; NULL: out of memory */
  fsV_seterr("%s", err ? err : "out of memory");
  free(err);
  return NULL;
}
static inline int64_t fsE_ival(const fs_value *v) { return v->type == FSV_INT ? v->u.i : v->u.b; }

/* lib_functional.c: size arguments of the convolutional layers.  An int or
 * a tuple of nd ints into out; -1 + "fn(): argument 'what' must be ...". */
int fsE_size_arg(const fs_value *v, const char *fn, const char *what, int nd, int64_t *out);
/* padding: sizes, 'valid' or 'same' (stride 1, symmetric only) */
int fsE_conv_padding(const fs_value *v, const char *fn, int nd, const int64_t *kernel,
                     const int64_t *stride, const int64_t *dil, int64_t *pad);
/* an adaptive pool's output size: int, or a pair whose None keeps a dim (-1) */
int fsE_adaptive_size(const fs_value *v, const char *fn, int64_t *size);

/* interpolate's size, scale_factor, mode, align_corners,
 * recompute_scale_factor slots (from s[0]) for input x: the output size and
 * the scale factors (NaN unless given) per spatial dim; -1 + torch's message */
int fsE_interp_args(fs_value **s, const fs_tensor *x, int64_t *size, double *scale);

/* lib_torch.c: n elements of the script's random stream (keyed by the seed
 * of fabric.seed_everything): the offset of the first, the counter advanced */
uint64_t fsE_draw(fsE_ctx *E, int64_t n);

/* lib_tensor.c */
extern const fsV_class fsE_tensor_class;
fs_value *fsE_tensor_value(fs_tensor *t); /* takes t; NULL t: the runtime's error */
fs_tensor *fsE_as_tensor(const fs_value *v); /* NULL unless a Tensor */
fs_tensor *fsE_need_tensor(const fs_value *v, const char *fn, const char *arg);
fs_value *fsE_item_value(const fs_tensor *t);
#define TENSOR(self) ((fs_tensor *)(self)->u.obj.data) /* a Tensor value's tensor */

/* lib_torch.c, lib_shape.c: helpers of the tensor API's libraries */
/* A size given as *args: (2, 3), ((2, 3),) or ([2, 3],) -> dims; -1 on a bad one. */
int fsE_dims_of(const fs_value *args, int64_t *dims, int *rank, const char *fn);
/* A cpu tensor of dt filled with v. */
fs_tensor *fsE_filled(fs_dtype dt, int rank, const int64_t *dims, double v);
/* A dim argument (int) -> *d; -1 with torch's error otherwise. */
int fsE_dim_arg(const fs_value *v, int *d);

/* lib_ctx.c: kind 0 device, 1 no_grad, 2 init_module, 3 no_backward_sync */
typedef struct ctxv {
  int kind;          /* 0 device, 1 no_grad, 2 init_module, 3 nothing to do (no_backward_sync on one rank) */
  fs_device dev, saved_dev;
  int index;         /* kind 0 on cuda: the GPU's index, or -1 when none was named */
  bool saved_grad;
  bool *flag;        /* kind 3: set while inside (the Fabric's no_sync), or NULL */
  fs_value *owner;   /* held: the object flag lives in */
} ctxv;
extern const fsV_class fsE_ctx_class;
fs_value *fsE_make_ctx(int kind, fs_device dev);

/* lib_nn.c */
typedef struct modv {
  fs_module *m;
  char *cls;      /* "Linear", "MLP" */
  fsF_model st;   /* what Fabric's rules see */
  fsSH_model *sh; /* set up under FSDP: the shards, or NULL */
  fs_device dev;  /* where it was built or set up (meta parameters aside) */
} modv;
extern const fsV_class fsE_module_class;
bool fsE_has_meta(fs_module *m);

/* lib_optim.c */
typedef struct optv {
  fs_optim *o;
  const char *cls;
  fsF_optim st;
} optv;
extern const fsV_class fsE_optim_class;

/* lib_data.c */
typedef struct loaderv {
  fsDL_loader L;
  fs_value *dataset; /* held: the loader borrows its fsS_dataset */
  uint64_t epoch;
  fsF_loader st;
  fsPG *pg;              /* the progress line (rank 0), made at the first pass */
  fsPG **active;         /* &E->progress while a pass draws, else NULL */
  int64_t done;          /* batches finished in this pass */
  fs_device dev;         /* where its batches go: the Fabric's device once set up */
} loaderv;
extern const fsV_class fsE_loader_class;

/* lib_strategy.c */
extern const fsV_class fsE_strategy_class;

/* lib_fabric.c */
typedef struct fabv {
  fsF_config cfg;
  fsF_fabric f;
  fsLN_env env;      /* rank, world, local rank (0 of 1 on a single device) */
  fsCC_comm *comm;   /* DDP and FSDP after launch(): shm, or NCCL on GPUs */
  fs_device dev;     /* where set-up modules and batches live: cpu or cuda */
  fs_value *synced;  /* list of the modules set up under DDP (gradients all-reduced) */
  bool no_sync;      /* inside no_backward_sync */
  fsLG *lg;          /* fabric.log's CSV logger, made at the first call */
  fs_value *planned; /* plan mode: the module set up last */
  fs_diags *diags;   /* for the logger's warnings (the run outlives the value) */
} fabv;
extern const fsV_class fsE_fabric_class;
fsF_fabric *fsE_current_fabric(fsE_ctx *E); /* the last Fabric made, or NULL */
int fsE_current_rank(fsE_ctx *E);
int fsE_cuda_index(fsE_ctx *E);             /* the process's GPU: its local rank */
fs_value *fsE_comm_fail(void);
/* Reports fabric.h's issues of a call (warnings, then the error); rc as given. */
int fsE_fabric_issues(fsE_ctx *E, const fsV_args *a, fsF_issues *iss, int rc);
/* plan mode: prints the plan once the model (and optimizer ov) is set up */
fs_value *fsE_plan_done(fsE_ctx *E, const optv *ov);
fsSH_model *fsE_sharded_of(fabv *fv, const fs_optim *o); /* the FSDP model o steps, or NULL */


#endif
