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
#include "safetensors.h"
#include "torchckpt.h"

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
  fs_value *frame;               /* the running call's locals (or a comprehension's scope
                                    within it): what a def or lambda made here closes over */
  fs_value *const *envs; size_t nenvs; /* the running function's enclosing calls' locals */
  fs_value *decls;               /* the running call's `global`/`nonlocal` names (dict), or NULL */
  fs_value *builtins;            /* cache of builtin values by name */
  fsE_define *defines; size_t ndefines;
  const fs_node **stack; size_t depth, cap; /* active def/model calls (no recursion) */
  fs_loc *call_sites;
  const fs_node *call;           /* the written call being made (its natives' fsV_args.loc is
                                    its loc): a diagnostic about one argument points there */
  fs_loc attr_loc;               /* the attribute being read (`obj.NAME`): where an attribute native reports */
  bool reported;                 /* a diagnostic for the current failure exists */
  int status;                    /* 1 script error, 2 usage, 3 system */
  fs_value *retval;
  fs_module *building;           /* the sequence a model body appends to, or NULL */
  fs_device device;              /* where new parameters go (`with device(...)`) */
  fs_dtype default_float;        /* torch's default dtype: float32, or the -true precision's under init_module */
  uint64_t seed;                 /* fabric.seed_everything; 0 until then */
  uint64_t samples;              /* bytes model.generate drew since the seed was set */
  uint64_t drawn;                /* elements rand/randn/randint drew since the seed was set */
  fs_value *fabric;              /* the last Fabric created (loss.backward() rules), or NULL */
  struct fsPG *progress;         /* the progress line a loop over a loader draws, or NULL */
  int64_t loop_round, loop_rounds; /* the innermost running `for ... in range(n)`: its round (0-based) and n;
                                 * rounds 0 outside one (a loader's progress line names its epoch) */
  double last_loss;              /* the last loss fabric.backward saw (the line shows it) */
  bool halt;                     /* stop quietly with halt_status (a launcher's supervisor) */
  int halt_status;
  int module_init;               /* __init__s of script Module classes running: layers wait to be initialized */
  fs_value *method_owner, *method_self; /* the running method's class and self (super()), borrowed */
  int try_depth;                 /* try bodies running: an error waits in `pending` for their handlers */
  struct fsE_exc { char *type, *text, *msg; fs_loc loc; } pending; /* the error a try may catch */
  const char *raise_type;        /* set by raise for the fsE_error it makes: the exception's class */
  struct fsE_exc *handling;      /* the error an except block is handling (a bare raise), or NULL */
};

/* print's body (slots of print's signature); also Fabric.print. */
fs_value *fsE_print(fsE_ctx *E, fs_value *const *slots, const fsV_args *a);

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
fs_value *fsE_getattr(fsE_ctx *E, fs_value *obj, const char *name); /* obj.name; NULL + fsV_error */
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
extern const fsE_lib fsE_lib_sched, fsE_lib_math; /* LR schedulers; math and time */
extern const fsE_lib fsE_lib_init; /* torch.nn.init */
extern const fsE_lib fsE_lib_metrics; /* torchmetrics */
extern const fsE_lib fsE_lib_loggers; /* lightning.fabric.loggers */
extern const fsE_lib fsE_lib_sampler; /* torch.Generator, samplers, random_split */
extern const fsE_lib fsE_lib_files;   /* NumPy, token, CSV and image files; transforms */
extern const fsE_lib fsE_lib_plugins; /* precision plugins, XLAFSDPStrategy (lib_plugins.c) */
/* Fabric(plugins=...): `unsupported` for a precision plugin (reported; rc < 0). */
int fsE_check_plugins(fsE_ctx *E, const fsV_args *a, const fs_value *plugins);
/* raisesD: the Precision plugin objects among Fabric(plugins=...) into fa (R78-R80). */
void fsE_plugins_args(const fs_value *plugins, fsF_args *fa);
/* raisesD: whether v is a plugin object (Precision, CheckpointIO, ClusterEnvironment). */
int fsE_is_plugin(const fs_value *v);
/* raisesD R84: str() of FSDPStrategy's precision= when it is not an FSDPPrecision (or None); malloc'd. */
char *fsE_fsdp_precision_found(const fs_value *v);
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

/* The builtin value of a sig row's name ("zeros", "math", "math.cos"), or
 * of a class the evaluator makes ("Module"); NULL with fsV_error() set, or
 * empty when there is no such builtin. New reference. */
fs_value *fsE_builtin(fsE_ctx *E, const char *name);

/* Sets (sets.c): the set of a list's or tuple's elements (NULL +
 * fsV_error when one is unhashable); whether v is a set. */
fs_value *fsE_set_of(const fs_value *seq);
bool fsE_is_set(const fs_value *v);

/* Statement execution for the builders. */
typedef enum fsE_flow { FSE_OK, FSE_BREAK, FSE_CONTINUE, FSE_RETURN, FSE_ERROR } fsE_flow;
fsE_flow fsE_exec_block(fsE_ctx *E, const fs_node *block);

/* Imports (imports.c): `import` and `from ... import` statements, and the
 * attributes of the module values they bind (0: obj is not a module; 1 and
 * *out; -1 with fsV_error()). */
fsE_flow fsE_exec_import(fsE_ctx *E, const fs_node *s);
int fsE_module_getattr(fsE_ctx *E, fs_value *obj, const char *name, fs_value **out);



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

/* lib_index.c: subscripts -- a slice node's value and Ellipsis (for an
 * object's subscript), and the Tensor class's index/setitem/ibinop */
fs_value *fsE_slice_value(fsE_ctx *E, const fs_node *n);
fs_value *fsE_ellipsis_value(void);
fs_value *fsE_tensor_getitem(fsE_ctx *E, fs_value *v, fs_value *key);
fs_value *fsE_tensor_setitem(fsE_ctx *E, fs_value *self, fs_value *key, fs_value *v);
fs_value *fsE_tensor_ibinop(fsE_ctx *E, fs_op op, fs_value *self, fs_value *b);
extern const fsE_lib fsE_lib_index;

/* lib_torch.c, lib_shape.c: helpers of the tensor API's libraries */
/* A size given as *args: (2, 3), ((2, 3),) or ([2, 3],) -> dims; -1 on a bad one. */
int fsE_dims_of(const fs_value *args, int64_t *dims, int *rank, const char *fn);
/* A cpu tensor of dt filled with v. */
fs_tensor *fsE_filled(fs_dtype dt, int rank, const int64_t *dims, double v);
/* Whether v is a dtype value (torch.float64, ...): *dt gets it (lib_torch.c). */
bool fsE_is_dtype(const fs_value *v, fs_dtype *dt);
/* The offset of n elements drawn from the seed's random stream (rand, randn, nn.init). */
uint64_t fsE_draw(fsE_ctx *E, int64_t n);
/* A dim argument (int) -> *d; -1 with torch's error otherwise. */
int fsE_dim_arg(const fs_value *v, int *d);

/* lib_ctx.c: kind 0 device, 1 no_grad, 2 init_module, 3 no_backward_sync */
typedef struct ctxv {
  int kind;          /* 0 device, 1 no_grad, 2 init_module, 3 nothing to do (no_backward_sync on one rank),
                        4 the precision's part only (fabric.autocast, init_tensor) */
  fs_device dev, saved_dev;
  int index;         /* kind 0 on cuda: the GPU's index, or -1 when none was named */
  bool saved_grad;
  bool *flag;        /* kind 3: set while inside (the Fabric's no_sync), or NULL */
  fs_value *owner;   /* held: the object flag lives in */
  /* the precision's part (kinds 2 and 4): default dtype and autocast inside */
  bool precision;
  fs_dtype dtype, autocast, saved_dtype, saved_autocast;
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

/* A Module value for a module a script class's constructor makes (taken):
 * it is not initialized until fsE_module_built, once its __init__ has
 * assigned its layers (their names are known only then). */
fs_value *fsE_module_new(fsE_ctx *E, fs_module *m, const char *cls);
int fsE_module_built(fsE_ctx *E, fs_value *v); /* -1 + fsV_error */
/* md.name of a ModuleDict, asked when no method or attribute row has the
 * name: its module under key `name` (torch's Module.__getattr__ finds
 * registered children): 1 and *out, 0 when obj is no ModuleDict, -1 +
 * fsV_error (torch's AttributeError when no key is `name`). */
int fsE_moduledict_getattr(fsE_ctx *E, fs_value *obj, const char *name, fs_value **out);

/* classes.c: the script's own classes (docs/classes.md) */
fsE_flow fsE_exec_class(fsE_ctx *E, const fs_node *s);
/* The builtins `Module` and `super`, or NULL (no error) for another name. */
fs_value *fsE_class_builtin(fsE_ctx *E, const char *name);
/* obj.name of a script class's instance, class or super(): 1 and *out, 0
 * when obj has no such attribute of its own (the sig table's rows come
 * next), -1 + fsV_error. */
int fsE_instance_getattr(fsE_ctx *E, fs_value *obj, const char *name, fs_value **out);
/* obj.__class__ of a script class's plain instance (a module's is the sig row
 * Module.__class__), and cls.__name__ of a script class or a builtin class
 * (what weights_init-style code reads: m.__class__.__name__): 1 and *out, 0
 * when obj has neither, -1 + fsV_error. */
int fsE_type_getattr(fsE_ctx *E, fs_value *obj, const char *name, fs_value **out);
/* A script Module instance: its forward called, an attribute set. */
fs_value *fsE_custom_call(fsE_ctx *E, fs_value *self, const fsV_args *a);
/* FSDP's auto_wrap_policy (docs/distributed.md, "How the units are chosen"):
 * fsE_wrap_policy_of gives a set/list/tuple's or a ModuleWrapPolicy's
 * classes as a new list, a callable policy retained, else NULL + fsV_error;
 * fsE_wrap_policy_wraps is fsSH_policy.wraps with an fsE_policy_ud. */
typedef struct fsE_policy_ud { fsE_ctx *E; fs_value *policy; } fsE_policy_ud;
fs_value *fsE_wrap_policy_of(fsE_ctx *E, fs_value *v);
int fsE_wrap_policy_wraps(fs_module *m, bool recurse, int64_t nonwrapped_numel, void *ud);
/* The classes of an iterable (a new list; what: the caller, for the error),
 * and whether module m is an instance of one of them. */
fs_value *fsE_module_classes(fsE_ctx *E, fs_value *v, const char *what);
int fsE_module_is_one_of(const fs_module *m, const fs_value *classes);
/* A Module value onto m, a part of a tree (children() gives such values). */
fs_value *fsE_module_part(fsE_ctx *E, fs_module *m);
int fsE_custom_setattr(fsE_ctx *E, fs_value *self, const char *name, fs_value *v);
/* A model block whose body defines `forward` (the function value fwd): a
 * script Module named name whose children are seq's layers under their
 * keys (taken: seq is released), its named layers its attributes. */
fs_value *fsE_model_with_forward(fsE_ctx *E, fs_module *seq, const char *name, fs_value *fwd);
fs_value *fsE_eval(fsE_ctx *E, const fs_node *n); /* eval.c: an expression's value */
int fsE_set_name(fsE_ctx *E, const char *name, fs_value *v); /* eval.c: name = v in the scope; -1 + fsV_error */
const fsSig *fsE_native_sig(const fs_value *v); /* eval.c: the sig row of a builtin function value, or NULL */
const fsSig *fsE_func_sig(const fs_value *v);     /* eval.c: a def function's parameters, or NULL */
const fsSig *fsE_callable_sig(const fs_value *v); /* classes.c: the parameters of a function, builtin or
                                                   * bound method (self first), or NULL */
extern const fsE_lib fsE_lib_classes; /* classes.c: isinstance */

/* except.c: try/except/else/finally and raise (docs/classes.md) */
fsE_flow fsE_exec_try(fsE_ctx *E, const fs_node *s);
fsE_flow fsE_exec_raise(fsE_ctx *E, const fs_node *s);
/* The error a try body stopped with becomes pending (its words, a class
 * named from them); NULL, as fsE_error returns. */
void fsE_hold_error(fsE_ctx *E, fs_loc loc, const char *msg);
/* The exit status an uncaught error gives: 3 (a system failure) for
 * MemoryError and a full disk, 130 for KeyboardInterrupt (128 + SIGINT, as a
 * shell reports Ctrl-C), else 1. */
int fsE_error_status(const char *msg);
void fsE_exc_clear(struct fsE_exc *x);
/* callee(*a) as a for loop runs an iterator's __next__: 1 and *out, 0 when
 * it raised StopIteration (caught: the loop ends), -1 when it failed
 * otherwise (reported, or held for an enclosing try as any error). */
int fsE_call_until_stop(fsE_ctx *E, fs_value *callee, const fsV_args *a, fs_value **out);

/* lib_optim.c */
typedef struct optv {
  fs_optim *o;
  const char *cls;
  fsF_optim st;
  fs_value *groups;   /* list of dicts: torch's param_groups, where the hyper-parameters live */
  fs_value *defaults; /* dict: the constructor's hyper-parameters (add_param_group's defaults) */
} optv;
extern const fsV_class fsE_optim_class;
/* Reads the group dicts' hyper-parameters into the runtime's groups (before
 * a step, a save); -1 + fsV_error when a script broke a group. */
int fsE_optim_sync(optv *ov);
/* Parameter i's state_dict entry: 1 and *out, 0 when it has none yet, -1. */
int fsE_optim_param_state(const fs_optim *o, int64_t i, fs_value **out);
/* A load of a saved state into an optimizer, staged so that a failure leaves
 * the optimizer exactly as it was: the saved groups go into copies of the
 * live group dicts, the saved state into new steps and buffers (torch
 * replaces the whole state: a parameter the saved state lacks starts
 * fresh); _check validates all of it (hyper-parameters, a step for every
 * stated parameter, the buffers its group's options need), _apply installs
 * it and cannot fail, _abort drops it. Every function but _apply and _abort
 * returns -1 + fsV_error; i is the runtime's parameter index. */
enum { FSE_STATED = 1, FSE_STEPPED = 2 };
typedef struct fsE_optim_load {
  optv *ov;
  int64_t *steps;      /* per parameter */
  unsigned char *stated; /* per parameter: FSE_STATED when the saved state has an
                          * entry for it, FSE_STEPPED when that has a step */
  fs_tensor **bufs;    /* 3 per parameter (fsO_state_name's order); NULL: none */
  fs_value **groups;   /* per group: the live dict's copy with the saved values */
  fsO_hyper *hyper;    /* per group, read by _check */
} fsE_optim_load;
int fsE_optim_load_begin(fsE_optim_load *L, optv *ov);
/* Saved param_groups (a list, or a dict keyed "0", "1", ...) after torch's
 * checks: the number of groups, then each one's size (size, or the live
 * group's when size < 0). */
int fsE_optim_load_groups(fsE_optim_load *L, const fs_value *groups, int64_t size);
/* A saved state entry of parameter i: "step" (a non-negative integer: int,
 * integral float or one-element tensor) or a buffer (a tensor of the
 * parameter's shape, copied); other keys are ignored, as torch never uses them. */
int fsE_optim_load_entry(fsE_optim_load *L, int64_t i, const char *name, const fs_value *v);
int fsE_optim_load_step(fsE_optim_load *L, int64_t i, const fs_value *v);
/* The staged buffer `name` of parameter i (zeros like it until filled), for
 * a reader that fills it in place (FSDP's slices). NULL + fsV_error. */
fs_tensor *fsE_optim_load_slot(fsE_optim_load *L, int64_t i, const char *name);
int fsE_optim_load_check(fsE_optim_load *L);
void fsE_optim_load_apply(fsE_optim_load *L);
void fsE_optim_load_abort(fsE_optim_load *L);
/* Group 0's "params" = the runtime's parameters again (FSDP swapped them). */
int fsE_optim_params_swapped(optv *ov);

/* lib_data.c */
typedef struct loaderv {
  fsDL_loader L;
  fs_value *dataset; /* held: the loader borrows its fsS_dataset */
  fs_value *sampler, *batch_sampler, *collate_fn, *generator; /* held, or NULL */
  bool native;           /* the runtime stacks the batches (a runtime data set, default collate) */
  bool auto_batch;       /* batch_size is not None */
  size_t *map, nmap;     /* native through Subsets: the data set's index -> the runtime's */
  int64_t batch_size;    /* -1: None */
  int num_workers, prefetch;   /* persistent_workers, pin_memory: accepted, nothing to do */
  uint64_t epoch;
  fsF_loader st;
  fsPG *pg;              /* the progress line (rank 0), made at the first pass */
  fsPG **active;         /* &E->progress while a pass draws, else NULL */
  int64_t done;          /* batches finished in this pass */
  fs_device dev;         /* where its batches go: the Fabric's device once set up */
} loaderv;
extern const fsV_class fsE_loader_class;
/* A runtime data set as a value (takes *ds's contents), or the error of its
 * constructor (rc < 0: err taken); the runtime data set of a value, or NULL. */
fs_value *fsE_dataset_made(fsS_dataset *ds, int rc, char *err);
fsS_dataset *fsE_dataset_of(const fs_value *v);
/* Subset(dataset, indices) */
fs_value *fsE_subset(fsE_ctx *E, fs_value *dataset, fs_value *indices);
/* What setup_dataloaders does on `world` ranks: Fabric's DistributedSampler
 * (or DistributedSamplerWrapper) in place of the loader's sampler, a script's
 * batch sampler rebuilt around one. -1 + fsV_error; -2 when that rebuild
 * clashed (Fabric's R77 text, for the caller to report). */
int fsE_loader_distribute(fsE_ctx *E, loaderv *lv, int rank, int world, uint64_t seed);

/* lib_sampler.c: torch.Generator and the samplers */
typedef struct genv { fsDL_mt mt; } genv;
extern const fsV_class fsE_generator_class;
/* v is one of our samplers; kind: 0 Sequential, 1 Random, 2 SubsetRandom,
 * 3 Batch, 4 Distributed, -1 any. */
bool fsE_is_sampler(const fs_value *v, int kind);
/* One pass of sampler v (ours, or any iterable of ints < n): *out malloc'd. */
int fsE_sampler_list(fsE_ctx *E, fs_value *v, size_t n, size_t **out, size_t *m);
/* One pass of a batch sampler: the indices and the cumulative batch ends. */
int fsE_batch_list(fsE_ctx *E, fs_value *v, size_t n, size_t **out, size_t *m, size_t **ends, size_t *nb);
/* A BatchSampler of ours: its sampler (borrowed), batch_size, drop_last. */
bool fsE_batch_sampler_parts(const fs_value *v, fs_value **sampler, int64_t *batch_size, bool *drop_last);

/* lib_sched.c: for checkpoints, whether v is an LR scheduler, its
 * state_dict and its load_state_dict */
bool fsE_is_sched(const fs_value *v);
fs_value *fsE_sched_state(const fs_value *v);
int fsE_sched_load(const fs_value *v, const fs_value *sd);

/* lib_strategy.c */
extern const fsV_class fsE_strategy_class;
fs_value *fsE_strategy_value(fsF_cls cls); /* fabric.strategy: a strategy object of the resolved class */
/* The Lightning class name of a strategy value ("DDPStrategy"), or NULL when v is none. */
const char *fsE_strategy_class_name(const fs_value *v);
fs_value *fsE_strategy_wrap_policy(const fs_value *v);
fs_value *fsE_module_wrap_policy_classes(const fs_value *v); /* a ModuleWrapPolicy's classes (borrowed), or NULL */ /* FSDPStrategy's policy classes (borrowed), or NULL */

/* lib_loggers.c: Fabric's loggers; fabric.log / log_dict and Logger.log_metrics:
 * names[i] = values[i] (numbers or one-element tensors) to *lg (NULL or none:
 * skipped) and to every Logger of loggers (a list, or NULL); file errors are
 * warnings. -1 + fsV_error on a value that is not a scalar. */
extern const fsV_class fsE_logger_class;
int fsE_log_metrics(fsE_ctx *E, fsLG *const *lg, const fs_value *loggers, fs_value *const *names,
                    fs_value *const *values, size_t n, const fs_value *step);
/* Closes lg (NULL: nothing) and says in a note where its files went, or warns of its error. */
void fsE_logger_close(fs_diags *diags, fsLG *lg, fsLG_format format);

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
  fs_value *planned_optim; /* plan mode: the first optimizer set up, or NULL */
  fs_diags *diags;   /* for the logger's warnings (the run outlives the value) */
  fs_value *loggers;   /* Fabric(loggers=...) as a list, or NULL for None (fabric.log's default CSV, lg) */
  fs_value *callbacks; /* Fabric(callbacks=...) as a list (empty for None) */
  fs_value *wrap_policy; /* FSDPStrategy(auto_wrap_policy=...) as fsE_wrap_policy_of gives it, or NULL */
  char *last_checkpoint; /* the path fabric.save wrote last, or NULL */
  int64_t checkpoints;   /* how many saves */
  bool scaling;          /* 16-mixed: MixedPrecision's GradScaler (FSDPPrecision's ShardedGradScaler), scaler */
  fsO_scaler scaler;
} fabv;
extern const fsV_class fsE_fabric_class;
fsF_fabric *fsE_current_fabric(fsE_ctx *E); /* the last Fabric made, or NULL */
int fsE_current_rank(fsE_ctx *E);
int fsE_cuda_index(fsE_ctx *E);             /* the process's GPU: its local rank */
fs_value *fsE_comm_fail(void);
/* Reports fabric.h's issues of a call (warnings, then the error); rc as given. */
int fsE_fabric_issues(fsE_ctx *E, const fsV_args *a, fsF_issues *iss, int rc);
/* plan mode: prints the plan of the model set up last (x: the input of its
 * first call, or NULL) and stops the run; fsE_plan_end: at the end of a
 * script that never used its model (0, or 1 after a diagnostic) */
fs_value *fsE_plan_done(fsE_ctx *E, const fs_tensor *x);
int fsE_plan_end(fsE_ctx *E);
fsSH_model *fsE_sharded_of(fabv *fv, const fs_optim *o); /* the FSDP model o steps, or NULL */
/* fabric.save wrote path: at the run's end a note names the last one. -1 + error on OOM. */
int fsE_checkpoint_saved(fabv *fv, const char *path);
/* Fabric's move_data_to_device: v's tensors (in nested lists, tuples and
 * dicts) and modules on dev; a new reference, or NULL + fsV_error.  What
 * fabric.to_device returns and what a set-up data loader's batches become. */
fs_value *fsE_to_device(fs_value *v, fs_device dev);



/* ---- lib_ckpt.c (what a checkpoint holds, save/load) and ckpt_format.c
 * (the two file formats behind one table) ---------------------------------- */

/* An FSDP rank's part of tensor t (made with NULL data): elements [first, first + count) from src. */
typedef struct ck_slice { const fsQ_value *t; uint64_t first, count; const void *src; } ck_slice;

typedef struct ckpt {
  fsQ_doc *doc;                        /* doc->root: the checkpoint, a dict */
  const fs_value **plain; size_t np, capp; /* per root entry: the plain value, NULL for a state dict */
  ck_slice *sl; size_t ns, caps;
  char **owned; size_t nowned, capowned; /* names, texts and host copies to free */
  fs_value **held; size_t nheld, capheld; /* state dicts made for the save, whose tensors doc points into */
  /* safetensors' view of doc (ck_flatten): each tensor under its dotted name, with its value */
  fsK_entry *t; const fsQ_value **tq; size_t nt, capt, captq;
  fsK_meta *m; size_t nm, capm;
} ckpt;
/* v (n of *cap elements of size elem used) with room for one more: v itself,
 * or v moved to a doubled block; NULL on OOM (v still valid). */
void *fsE_ck_room(void *v, size_t n, size_t *cap, size_t elem);
/* s (malloc'd, may be NULL) owned by c from now on; NULL on OOM (s freed). */
void *fsE_ck_own(ckpt *c, void *s);
char *fsE_ck_fmt(ckpt *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef union ck_writer { fsK_writer k; fsH_writer h; } ck_writer;

/* A checkpoint file as a load sees it. k: safetensors' file, or for a torch
 * file an index of its tensors by dotted name (fd -1; fsK_find and fsK_match
 * read only path, t and n). */
typedef struct ck_file {
  const struct ck_format *fmt;
  fsK_file k;
  fsH_file h;
  const fsQ_value **qt; /* torch: the tensor of k.t[i] */
} ck_file;

typedef struct ck_format {
  /* writing: create writes every tensor that has data; -1 + *err */
  int (*create)(ck_writer *w, const char *path, ckpt *c, char **err);
  int (*attach)(ck_writer *w, const char *tmp_path, ckpt *c, char **err);
  const char *(*tmp_path)(const ck_writer *w);
  int (*write)(ck_writer *w, const ckpt *c, const fsQ_value *t, uint64_t first, uint64_t count, const void *src,
               char **err);
  int (*commit)(ck_writer *w, char **err);
  void (*abort)(ck_writer *w);
  /* reading */
  int (*open)(ck_file *f, const char *path, char **err);
  void (*close)(ck_file *f);
  int (*read)(const ck_file *f, const fsK_info *t, uint64_t first, uint64_t count, fs_dtype dt, void *dst,
              char **err);
  /* The value at path[0..n) (a new reference): 1 and *out, 0 when absent, -1 + fsV_error. */
  int (*get)(const ck_file *f, const char *const *path, int n, fs_value **out);
  /* The name of top-level entry i (NULL: not a plain entry); i < nkeys. */
  size_t (*nkeys)(const ck_file *f);
  const char *(*key)(const ck_file *f, size_t i);
} ck_format;
/* safetensors' view of c's tree: each tensor under its dotted name (c->t),
 * every other value as metadata (c->m); -1 + fsV_error. */
int fsE_ck_flatten(ckpt *c);
const ck_format *fsE_ck_format_of(const char *path); /* by the path's extension */
int fsE_ck_open(ck_file *f, const char *path);       /* -1 + fsV_error */

/* ---- lib_precision.c: the Fabric's precision at run time (issue 16) ---- */
extern const fsE_lib fsE_lib_precision;
/* The type parameters have under cfg's precision: the low type of *-true, else float32. */
fs_dtype fsE_precision_param_dtype(const fsF_config *cfg);
/* c (an init_module or precision context) sets the precision's default
 * dtype inside; with forward, autocast as a forward does (fabric.autocast). */
void fsE_precision_ctx(ctxv *c, const fsF_config *cfg, bool forward);
/* A set-up module's forward: call(E, module, a) with the precision's input
 * conversion, autocast and default dtype, its float outputs made float32. */
typedef fs_value *(*fsE_call_fn)(fsE_ctx *E, fs_value *self, const fsV_args *a);
fs_value *fsE_precision_forward(fsE_ctx *E, fs_value *module, const fsV_args *a, fsE_call_fn call);

#endif
