/* check_int.h -- the checker's abstract machine, shared by its files:
 * check.c (values, state, statements, expressions), paths.c (arguments,
 * fabric.h states, per-path combinations), api_core.c / api_nn.c /
 * api_fabric.c (what builtins and methods do to the state) and shape.c
 * (model declarations).
 *
 * State is variables (slots) and objects; both live in growing tables whose
 * entries are never reused, so an `if` can be analysed branch by branch with
 * an undo trail: each write records the old value while a mark is active,
 * the branch's changes are captured and undone, and the joins of the changed
 * entries are written back. Cost follows the writes, not the state size. */
#ifndef FS_CHECK_INT_H
#define FS_CHECK_INT_H

#include <stdint.h>
#include "check.h"
#include "signatures.h"
#include "value.h"

/* A fact that may differ per path: MB_F may be false, MB_T may be true;
 * why names the branch that made it true on some paths only (0: none). */
#define MB_F 1
#define MB_T 2
typedef struct mbit { uint8_t m; uint32_t why; } mbit;

typedef enum cvk {
  CV_UNDEF,   /* unbound name */
  CV_UNKNOWN, /* not known statically */
  CV_CONST,   /* p: fs_value (None, bool, int, float, str, range) */
  CV_OBJ,     /* id: object */
  CV_SEQ,     /* p: n items; sub SEQ_TUPLE for a tuple, SEQ_UNSIZED (below) */
  CV_DICT,    /* p: n keys then n values; sub SEQ_UNSIZED (below) */
  CV_TENSOR,  /* id: fabric object + 1 when computed by a set-up model, else 0 */
  CV_FUNC,    /* p: FS_N_DEF */
  CV_CLASS,   /* sub CLS_SIG: p fsSig; sub CLS_MODEL: p FS_N_MODEL; sub CLS_NS: p the dotted
               * name (arena) of a torch/lightning module or member not modelled;
               * sub CLS_PY: p pyclass, a Python `class` statement */
  CV_PHI      /* p: n alternatives (one per path); id: reason */
} cvk;

enum { CLS_SIG, CLS_MODEL, CLS_NS, CLS_PY };

/* CV_SEQ/CV_DICT sub bits. An unsized container is one whose length is not
 * known (grown in a loop, a comprehension's result, a dict's values()): its
 * n items (a dict's n pairs) are what its elements may be, not its elements;
 * indexing it gives their join, never "index out of range". */
enum { SEQ_TUPLE = 1, SEQ_UNSIZED = 2 };
#define RANKED 1   /* CV_PHI sub: alternative i is the value on rank i (C.rank_n) */
#define MAXRANKS 8

/* A Python class: its name, its statement (NULL for torch's containers,
 * nn.Sequential ...), its Python-class bases, whether it is an nn.Module
 * (its instances are model objects). */
typedef struct pyclass {
  const char *name;
  const fs_node *node;
  const struct pyclass *bases[4];
  uint8_t nbases, module;
} pyclass;

#define MAXALT 8 /* alternatives a value keeps over paths; more is CV_UNKNOWN */
#define SMALL_INTS 1024

/* Child i of n, or NULL where the parser left it out. */
static inline const fs_node *fsC_kid(const fs_node *n, uint32_t i) { return i < n->nkids ? n->kids[i] : NULL; }

typedef struct cv {
  uint8_t k, sub;
  uint32_t n, id;
  const void *p;
} cv;

typedef enum obk {
  OB_FABRIC, OB_MODEL, OB_OPTIM, OB_LOADER, OB_DATASET, OB_PARAMS, OB_STRATEGY, OB_CTX,
  OB_INSTANCE, /* an instance of a Python class that is not an nn.Module (pycls) */
  OB_PARAM,    /* one parameter (a Tensor) taken from an OB_PARAMS: its provenance fields */
  OB_PLUGIN    /* a precision plugin object (api_plugins.c): cobj.plugin */
} obk;

enum { CTX_OTHER, CTX_INIT, CTX_META, CTX_DEVICE }; /* OB_CTX kinds */
enum { WHY_INIT = 1, WHY_DEVICE, WHY_TO_EMPTY };     /* how a model became meta/uninitialized */

/* Fields grouped by size, the narrow ones first: every object, every undo-trail
 * entry and every recorded change holds one, and a big script makes tens of
 * thousands (at 320 bytes, with the strategy's fields inline and padding
 * between the bytes, the objects alone faulted in 5 MiB). */
typedef struct cobj {
  uint8_t kind;
  uint8_t wrapped;      /* model/optimizer/loader returned by a setup */
  uint8_t ctx, effect;  /* OB_CTX: CTX_*, fsF_init; OB_PARAMS: 1 for named_parameters();
                           OB_LOADER: 1 for a batch_sampler Fabric cannot rebuild (R77) */
  mbit meta, empty;     /* model (raw): parameters on meta; uninitialized memory */
  mbit launched;        /* fabric */
  uint16_t setups_lo, setups_hi; /* fabric: completed setup calls, over paths */
  int32_t cfg;          /* fabric: index in the configs, -1 when not known */
  uint32_t inner;       /* wrapper: the raw object */
  uint32_t fabric;      /* wrapper, ctx: its fabric */
  uint32_t model;       /* params, optimizer: the model the parameters came from */
  mbit pmeta;           /* params, optimizer: references meta parameters */
  uint8_t fsdp_flat, xla_sharded, fsdp_root, why_kind;
  uint8_t plugin;       /* OB_PLUGIN: its fsF_plugin */
  uint8_t fused;        /* optimizer (raw): made with fused=True */
  uint8_t placed;       /* model (raw): fsF_pdev its own parameters were moved to (FSF_PD_NONE: where
                           made, cpu or meta; FSF_PD_OTHER: not known) (placement.c, W4) */
  uint8_t many;         /* an item of an unsized container (a comprehension's, a list grown in a loop):
                           it stands for several objects, so a setup of it is never "again" */
  fs_loc loc;           /* the call that created it */
  fs_loc why_loc;       /* model: what made it meta/uninitialized; optimizer: its params */
  fs_loc first_setup;   /* model (raw): the setup call that first wrapped it (end 0: none yet); a run
                           cannot set the raw model up again (`unsupported`, api_fabric.c) */
  uint32_t link;        /* fabric: its strategy object + 1; strategy: the fabric it came from (fabric.strategy) + 1; else 0 */
  const char *cls;      /* model class name */
  const pyclass *pycls; /* model, instance: the Python class it is an instance of, or NULL */
  const fs_node *stmt;  /* the statement that created it */
  /* OB_STRATEGY: its keyword arguments, in the checker's arena, written once
   * where the object is made (fsC_new_strategy and the like), never after,
   * so copies of the object share it; NULL for any other kind */
  const fsF_strategy_obj *strat;
  /* strategy, fabric: ModelParallelStrategy's parallelize_fn (a def), called at setup (R102) */
  const fs_node *parallelize_fn;
  const char *plugin_text; /* OB_PLUGIN BitsandbytesPrecision: repr() of a non-empty ignore_modules (arena) */
  cv wrap_classes;      /* strategy, fabric: FSDPStrategy's ModuleWrapPolicy classes (CV_SEQ of CV_CLASS), or CV_UNDEF (W21) */
  cv callbacks;         /* fabric: Fabric(callbacks=...) when no other code can reach that list (a list
                           display written in the call, or one object), else CV_UNDEF (fabric.call) */
} cobj;

typedef struct reason { fs_loc loc; uint8_t loop, side; } reason;

typedef struct name_map { struct nm_ent *e; size_t n, cap; } name_map;

typedef struct trail_ent { uint8_t type; uint32_t idx; union { cv v; cobj o; } old; } trail_ent;

typedef struct frame {
  name_map locals;
  const fs_node *fn;
  cv ret; int has_ret;
  int closure;          /* a def defined inside another: its free names are the enclosing def's */
} frame;

typedef struct C {
  const fs_source *src;
  const fs_node *root;  /* the script's module block */
  const fsC_options *o;
  fs_diags *d;
  int nerrors;
  cv *slots; size_t nslots, capslots;
  cobj *objs; size_t nobjs, capobjs;
  fsF_config *cfgs; size_t ncfgs, capcfgs;
  reason *reasons; size_t nreasons, capreasons;
  trail_ent *trail; size_t ntrail, captrail;
  int marks;            /* active trail marks */
  uint32_t *stamp_s, *pos_s, *stamp_o, *pos_o; size_t capstamp_s, capstamp_o;
  uint32_t epoch;
  name_map globals;
  frame *frames[32]; int nframes;
  uint32_t ctxs[64]; int nctx;
  int main_guarded;     /* inside `if __name__ == "__main__":` (a spawn child skips it: R103) */
  int dead;             /* the rest of the block is unreachable (return/break/continue) */
  fs_arena *arena;      /* values, tables: freed at the end of the check */
  fs_value **consts; size_t nconsts, capconsts;
  fs_value *small_ints[SMALL_INTS]; /* fsC_int's, made on first use */
  name_map seen;         /* reported "rule@start:end" */
  unsigned char *define_used;
  struct defrec { const fs_node *def; int called, nested; } *defs; size_t ndefs, capdefs;
  uint32_t *defidx; size_t capdefidx; /* def node -> 1 + index in defs (check.c's def_slot) */
  struct fsC_feat *feats; size_t capfeats; /* layer objects' feature sizes, by object id (shape.c) */
  name_map sigs;         /* signature lookups ("Type.member", ".name"), cached */
  struct reason_slot *reason_ids; size_t nreason_ids, capreason_ids; /* (start, end, loop, side) -> its
                           reason (check.c's new_reason): one per branch, however often analysed */
  name_map free_names;   /* a name no scope binds -> what it is (check.c's free_name), cached */
  struct fsC_row *rows;  /* per signatures.c row, what the checker asked about it (fsC_row) */
  const fsSig *sig_rows; size_t nsig_rows; /* the table those rows are of (fsSig_all) */
  /* small maps of left frames, by capacity (16 << i), for the next frames (check.c's map_grow) */
  struct nm_ent *spare[8][8]; uint8_t nspare[8];
  /* change arrays of finished ifs and loops, for the next (check.c's chg_take) */
  struct chg *spare_chg[8]; size_t spare_chg_cap[8]; int nspare_chg;
  name_map ns_vals;      /* dotted torch/lightning names -> cv * (arena): ns_attr's, cached */
  struct ns_memo *ns_memo; size_t nns_memo, capns_memo; /* (namespace text, member name) -> ns_vals' cv */
  const fs_node *stmt;  /* the statement being analysed */
  int uncalled;         /* analysing a def no path calls: only its own errors count */
  const struct cargs *issue_call; /* the Fabric call being validated, while it is: an
                                     issue about one of its arguments points there */
  int python;           /* a .py script: torch's and Lightning's real API applies (pynames.h) */
  int star_import;      /* a `from m import *` ran: an unbound name may come from m */
  /* the budget: deadline in processor time (CLOCK_PROCESS_CPUTIME_ID ns), bytes the analysis
   * may still take (arena, tables, computed values); once either is spent,
   * `spent` is set and no statement is analysed any more */
  uint64_t deadline_ns;
  uint64_t cpu_read_ns, wall_read_ns; /* the processor and wall clocks at the last reading (budget_spent) */
  size_t bytes_left;
  unsigned ticks;       /* statements since the clock was last read */
  size_t launch_diag;   /* 1 + the index in d of the missing launch() error (R16), 0: none yet */
  /* ranks (check.c "rank-dependent values"): a value read from
   * fabric.global_rank and the like is a CV_PHI with sub RANKED, one
   * alternative per rank; rank_n alternatives (fixed at the first read: the
   * world size up to MAXRANKS, else 2 with rank_open: the last stands for
   * every rank but 0); rank_mask: the alternatives (ranks) the current path
   * is taken by; rank_why: the condition that last split them */
  uint32_t rank_n, rank_mask;
  int rank_open;
  fs_loc rank_why;
  int spent;
} C;

static inline int fsC_unsized(const cv *v) {
  return (v->k == CV_SEQ || v->k == CV_DICT) && (v->sub & SEQ_UNSIZED);
}

/* A call's arguments after binding to its signature. */
typedef struct cargs {
  const fs_node *call;
  const fsSig *sig;
  const cv *pos; size_t npos;
  const char *const *kw; const cv *kwv; size_t nkw;
  const int *pos_slot, *kw_slot;
} cargs;

/* What the checker learnt about one signatures.c row, asked once per check:
 * py_builtin 0 not asked, 1 not a Python builtin, 2 one (check.c); api 0 not
 * asked, 1 no model in api_core.c's builtin_rows, else 2 + its index there;
 * layer 0 not asked, else which of shape.c's feature-size rules it follows. */
struct fsC_row { uint8_t py_builtin, api, layer; };

/* check.c */
/* sig's facts, or NULL for a signature not in the table (a def's, made at its call). */
struct fsC_row *fsC_row(C *c, const fsSig *sig);
void *fsC_alloc(C *c, size_t n);            /* arena memory, freed with the checker (budgeted) */
/* A call's argument arrays and binding slots: on the stack for the usual
 * few, in the arena past that (a big script's calls would otherwise leave
 * megabytes of fresh pages behind). They live while the call is analysed;
 * pos[-1] is free, for a method's self. */
enum { FEW_ARGS = 6, FEW_PARAMS = 8 };
typedef struct fsC_argbuf {
  cv few_pos[FEW_ARGS + 1], few_kwv[FEW_ARGS];
  const char *few_kw[FEW_ARGS];
  int few_ps[FEW_ARGS], few_ks[FEW_ARGS];
  cv *pos, *kwv; const char **kw; int *ps, *ks;
} fsC_argbuf;
void fsC_argbuf_alloc(C *c, fsC_argbuf *b, size_t npos, size_t nkw); /* fsC_argbuf_init's arena case */
static inline void fsC_argbuf_init(C *c, fsC_argbuf *b, size_t npos, size_t nkw) {
  if (npos >= FEW_ARGS || nkw >= FEW_ARGS) { fsC_argbuf_alloc(c, b, npos, nkw); return; }
  b->pos = b->few_pos + 1;
  b->kwv = b->few_kwv;
  b->kw = b->few_kw;
  b->ps = b->few_ps;
  b->ks = b->few_ks;
}
char *fsC_text(C *c, fs_loc loc);           /* the source text of loc (arena) */
cv fsC_const(C *c, fs_value *v);            /* takes v */
cv fsC_int(C *c, int64_t i);                /* an int living in the arena */
cv fsC_eval(C *c, const fs_node *n);        /* an expression's value (reports its errors) */
cv fsC_attr(C *c, const cv *obj, const char *name); /* obj.name set by its class's code, or unknown */
cv fsC_obj(uint32_t id);
cv fsC_unknown(void);
/* What iterating v yields, as one value (the join of its elements; a
 * parameter of a parameters() collection): unknown where not known. */
cv fsC_elements(C *c, const cv *v);
/* An unsized list (tuple) whose elements may be any of items[0..n). */
cv fsC_unsized_seq(C *c, const cv *items, size_t n, int tuple);
uint32_t fsC_new_obj(C *c, obk kind, fs_loc loc);
cobj *fsC_o(C *c, uint32_t id);             /* read */
cobj *fsC_ow(C *c, uint32_t id);            /* write: logged on the trail */
const fsF_config *fsC_cfg(C *c, uint32_t fabric);
int fsC_is(const cv *v, obk kind, C *c);    /* a (non-phi) object of that kind */
const char *fsC_type_name(C *c, const cv *v);
/* Adds a diagnostic once per (rule, location); NULL when already reported. */
fs_diag *fsC_report(C *c, fs_severity sev, const char *rule, fs_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void fsC_note_why(C *c, fs_diag *g, uint32_t why);
/* 1 the first time (key, loc) is asked: a fix-it is attached once. */
int fsC_first(C *c, const char *key, fs_loc loc);
void fsC_setvar(C *c, const char *name, cv v);
void fsC_rebind(C *c, const char *name, cv v); /* where name is bound: a container changed in place */
/* Enters a frame for a def or model body, its parameters bound to the
 * arguments (defaults evaluated where none is given; with no call and no
 * arguments, a declaration: defaults or unknown). -1 after reporting. */
int fsC_enter(C *c, frame *f, const fs_node *fn, const fs_node *call, const cv *pos, size_t npos,
              const char *const *kw, const cv *kwv, size_t nkw);
void fsC_leave(C *c, frame *f);
/* A def analysed at this call (call NULL: not called anywhere). */
cv fsC_call_def(C *c, const fs_node *def, const fs_node *call, const cv *pos, size_t npos,
                const char *const *kw, const cv *kwv, size_t nkw);
/* Binds a call's arguments to sig (arity, keywords); reports a mismatch. */
int fsC_bind(C *c, const fsSig *sig, const fs_node *call, int *pos_slot, int *kw_slot);

/* ---- paths.c: arguments, fabric.h states, per-path combinations ---------- */

/* The argument bound to parameter pname, or NULL; *node gets its expression. */
const cv *fsC_arg(const cargs *a, const char *pname, const fs_node **node);
/* The positional arguments collected by *args (after the named ones). */
size_t fsC_varargs(const cargs *a, const cv **out, const fs_node **nodes, size_t max);
static inline const fs_value *fsC_cval(const cv *v) { return v && v->k == CV_CONST ? v->p : NULL; }
static inline int fsC_is_none(const cv *v) {
  const fs_value *x = fsC_cval(v);
  return !v || (x && x->type == FSV_NONE);
}

/* One combination of per-path choices being tried (keyed by the value). */
typedef struct pick { const void *key; uint8_t val, n; uint32_t why; int run; } pick;
typedef struct paths { pick p[16]; int np, run; } paths;
/* v on the current combination (a phi resolved to one alternative). */
const cv *fsC_alt(paths *e, const cv *v);
cobj *fsC_model_obj(C *c, const cv *v, uint32_t *raw);
/* fabric.h states of objects on the current combination; 0: not known. */
int fsC_model_state(C *c, paths *e, const cv *v, fsF_model *m);
int fsC_optim_state(C *c, paths *e, const cv *v, fsF_optim *o);
int fsC_fabric_state(C *c, paths *e, uint32_t id, fsF_fabric *f);
/* Reports what fabric.c said: the first path's warnings, the first error. */
/* One of them, at loc. */
fs_diag *fsC_report_issue(C *c, const fsF_issue *s, fs_loc loc);
fs_diag *fsC_report_issues(C *c, const fsF_issues *iss, fs_loc loc, int warnings);
/* Rule `unsupported` over the whole tree of a script that will run (runnable.c). */
void fsC_runnable(C *c, const fs_node *root);
/* The whole lines of s (with its comment), from line start to past the newline. */
fs_loc fsC_lines_of(C *c, fs_loc s);
/* `fabric = Fabric(...)`: the statement that named a fabric, or NULL. */
const fs_node *fsC_fabric_stmt(C *c, uint32_t fid);
/* A validation over one combination of paths: <0 error, 0 fine, >0 unknown. */
typedef int (*fsC_rule_fn)(C *c, paths *e, const void *ud, fsF_issues *iss);
/* Tries the combinations; returns the error's diagnostic (NULL if none or
 * already reported), with *e left on the failing path. */
fs_diag *fsC_validate(C *c, uint32_t fid, fs_loc loc, fsC_rule_fn f, const void *ud, paths *e);

/* ---- query.c: an editor's question (c->o->query, not NULL) ------------------ */
/* The value of the expression or assigned name at loc: kept when loc is
 * the span asked about. */
void fsC_query_seen(C *c, fs_loc loc, const cv *v);

/* ---- api_*.c: what builtins and methods do to the abstract state ---------- */

/* api_core.c: obj.method(...) and builtin calls, routed by table to their
 * model.  Returns 1 and *out when handled (0: the sig row's return type). */
int fsC_api_method(C *c, const cargs *a, const cv *recv, cv *out);
int fsC_api_builtin(C *c, const cargs *a, cv *out);
typedef struct fsC_reg { const char *name; int (*fn)(C *c, const cargs *a, cv *out); } fsC_reg;
/* A `with` context object: device, init_module (effect), no_grad ... */
cv fsC_new_ctx(C *c, int kind, int effect, uint32_t fabric, fs_loc loc);

/* api_nn.c */
/* A new model object created now (under the active contexts). */
cv fsC_new_model(C *c, const char *cls, fs_loc loc);
/* model(x): the forward call. */
cv fsC_forward(C *c, const cv *model, fs_loc loc);
/* Each model a value may be on some path (raw objects). */
size_t fsC_raw_models(C *c, const cv *v, uint32_t *out, size_t max);
int fsC_api_optimizer(C *c, const cargs *a, cv *out);
int fsC_module_method(C *c, const cargs *a, const cv *recv, const char *m, cv *out);

/* api_fabric.c */
cv fsC_new_fabric(C *c, const cargs *a);
cv fsC_new_strategy(C *c, const cargs *a);
int fsC_fabric_method(C *c, const cargs *a, uint32_t fid, const char *m, cv *out);
/* raisesA: model.mark_forward_method(x) (R51-R53); 1 with *out. */
int fsC_mark_forward_method(C *c, const cargs *a, const cv *recv, cv *out);
/* The def of method name in class k or its Python bases, or NULL. */
const fs_node *fsC_py_method(const pyclass *k, const char *name);
/* api_plugins.c: the precision plugin classes and XLAFSDPStrategy */
int fsC_api_plugin(C *c, const cargs *a, cv *out);
int fsC_api_xla_fsdp(C *c, const cargs *a, cv *out);
/* Fabric(plugins=...) of a .fab that will run: `unsupported` for a precision plugin. */
void fsC_plugins_run(C *c, const cargs *a);
/* setup(model) passed under Transformer Engine: W26 at each child Linear (a script's class). */
void fsC_te_layers(C *c, uint32_t fabric, const cv *model);
/* fabric.strategy: a strategy object of the fabric's strategy class (linked to it). */
cv fsC_fabric_strategy(C *c, uint32_t fabric);
/* strategy.checkpoint_io (R107) and strategy.device_mesh (R108) of a strategy object; n the FS_N_ATTR. */
void fsC_strategy_attr(C *c, uint32_t strategy, const fs_node *n);
/* `strategy.NAME = v` (R109, R87); t the FS_N_ATTR target. */
void fsC_strategy_set_attr(C *c, uint32_t strategy, const fs_node *t, const cv *v);
/* A Python class's own __init__ (a def), or NULL. */
const fs_node *fsC_init_of(const pyclass *k);
/* setup(model) passed under FSDPStrategy with a ModuleWrapPolicy: W21 for
 * a parameter that __init__ ties across the policy's units. */
void fsC_fsdp_shared_params(C *c, uint32_t fabric, const fs_node *call, const cv *model);
/* Fabric(plugins=...): the precision plugin object's facts in the resolved cfg. */
void fsC_plugins_config(C *c, const cargs *a, fsF_config *cfg);
/* raisesD: the Precision plugin objects among Fabric(plugins=...) into fa (R78-R80). */
void fsC_plugins_args(C *c, const cargs *a, fsF_args *fa);
/* raisesD: torch.device(type)'s type as fsF_pdev (FSF_PD_NONE: not a known str). */
fsF_pdev fsC_device_type(const fs_value *t);
/* placement.c: module id and the children its class's __init__ shows moved
 * to `where` (materialize: to_empty or setup, which also leave the meta
 * device); W4's facts of the raw model's tree into m (0 when not certain). */
void fsC_place(C *c, uint32_t id, fsF_pdev where, int materialize);
/* R50: `model.name(...)` of a set-up model, def the script class's method. */
void fsC_outside_call(C *c, const fs_node *call, const cv *recv, const char *name, const fs_node *def);
void fsC_devices_apart(C *c, uint32_t raw, fsF_model *m);
/* Reading `fabric.device` (R66 under XLA before the processes exist). */
void fsC_fabric_device(C *c, uint32_t fid, fs_loc loc);

/* shape.c: the feature sizes through a model declaration instantiated
 * with these argument values. */
void fsC_shape_model(C *c, const fs_node *decl, const fs_node *call, const cv *pos, size_t npos,
                     const char *const *kw, const cv *kwv, size_t nkw);
void fsC_declare_model(C *c, const fs_node *decl);

/* A layer object's feature sizes: in -1 when any, out -2 when its input's,
 * -1 when not known; loc the call that made it (0 length: none recorded). */
typedef struct fsC_feat { int64_t in, out; fs_loc loc; } fsC_feat;
/* A layer object made by a call of layer row sig (`nn.Linear(784, 128)`),
 * its sizes recorded where the arguments give them. */
cv fsC_new_layer(C *c, const fsSig *sig, const fs_node *call, const cv *pos, size_t npos,
                 const char *const *kw, const cv *kwv, size_t nkw);
/* nn.Sequential(*layers) made as object id: the sizes flow from layer to layer. */
void fsC_sequential(C *c, uint32_t id, const fs_node *call, const cv *pos, size_t npos);
/* A class's forward followed through the layers self holds. */
void fsC_forward_shapes(C *c, const cv *self, const fs_node *forward);

#endif
