/* fabric.h -- Lightning Fabric's semantics in one place: resolving
 * `Fabric(...)` against a machine model, the state of every object Fabric
 * hands out, and one validation per API, in Fabric's order of checks and with
 * Fabric's exact messages (docs/rules.md). The checker calls it with
 * abstract states built from the script's literals, the runtime with the
 * states of real objects, so a rule cannot drift between the two. Nothing here
 * allocates tensors, touches files or starts processes. */
#ifndef FS_FABRIC_H
#define FS_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "diag.h"

/* ---- issues: what a validation reports --------------------------------- */

typedef struct fsF_issue {
  const char *rule;   /* "R36", "W9", ... (static) */
  fs_severity severity;
  char *message;      /* Fabric's text, placeholders filled (owned) */
  const char *help;   /* the fix, in words (static); may be NULL */
  /* Where the caret goes (fsSig_arg_loc): the argument of the method's
   * parameter `arg` (its arg_index-th value for *args), FSF_ARG_PARENS for
   * the call's parentheses (a required argument is missing), or with arg
   * NULL the whole call. Both the checker and the run read it. */
  const char *arg;
  int arg_index;
} fsF_issue;
#define FSF_ARG_PARENS "()"

typedef struct fsF_issues {
  fsF_issue *items; size_t n, cap;
} fsF_issues;

void fsF_issues_init(fsF_issues *iss);
void fsF_issues_free(fsF_issues *iss);
void fsF_issues_clear(fsF_issues *iss);
/* The error a failed validation ended with (the last issue), or NULL. */
const fsF_issue *fsF_error(const fsF_issues *iss);
/* Points the last issue at an argument (see fsF_issue.arg); returns rc, so
 * a check reads `return fsF_at(iss, "module", 0, fsF_fail(...))`. */
int fsF_at(fsF_issues *iss, const char *arg, int arg_index, int rc);

/* ---- values: what a `Fabric(...)` argument can be ----------------------- */

typedef enum fsF_vkind {
  FSF_UNSET,     /* not passed: Fabric's default */
  FSF_NONE, FSF_BOOL, FSF_INT, FSF_FLOAT, FSF_STR,
  FSF_INTLIST,   /* list or tuple of ints (devices=[0, 1]) */
  FSF_LIST,      /* list or tuple with a non-int element */
  FSF_STRATEGY,  /* a strategy object: FSDPStrategy(...), ... */
  FSF_OTHER      /* anything else */
} fsF_vkind;

typedef enum fsF_cls {
  FSF_SINGLE, FSF_DP, FSF_DDP, FSF_FSDP, FSF_DEEPSPEED, FSF_MP,
  FSF_XLA, FSF_SINGLE_XLA, FSF_XLA_FSDP, FSF_CLS__COUNT
} fsF_cls;

/* Start method of a DDP strategy: popen re-runs the script per rank. */
typedef enum fsF_start { FSF_START_POPEN, FSF_START_SPAWN, FSF_START_FORK } fsF_start;

/* XLAFSDPStrategy's arguments (plugins.c); all zero: Fabric's defaults. */
enum { FSF_XSD_SHARDED, FSF_XSD_FULL, FSF_XSD_OTHER };
typedef struct fsF_xla_fsdp_opts {
  int state_dict;            /* FSF_XSD_*: state_dict_type= */
  const char *state_dict_text; /* FSF_XSD_OTHER: its text (static or the checker's arena) */
  int wrapper_callable;      /* auto_wrapper_callable= given */
  int policy;                /* activation_checkpointing_policy: 0 None/empty, 1 a set, 2 other */
  const char *policy_str;    /* 2: str() of it, NULL when not known */
} fsF_xla_fsdp_opts;

/* The rule-relevant keyword arguments of a strategy object; -1 = not given. */
/* raisesD: the device type of a strategy's parallel_devices[0]: none given
 * (or not known), torch.device("cpu"), "cuda"/"cuda:N", any other. */
typedef enum fsF_pdev { FSF_PD_NONE, FSF_PD_CPU, FSF_PD_CUDA, FSF_PD_OTHER } fsF_pdev;

typedef struct fsF_strategy_obj {
  fsF_cls cls;               /* FSDP, DDP, DEEPSPEED or MP */
  int use_orig_params;       /* FSDPStrategy */
  int state_dict_full;       /* FSDPStrategy(state_dict_type="full") */
  int cpu_offload;           /* FSDPStrategy */
  int auto_wrap_policy;      /* FSDPStrategy: a policy was given */
  int stage;                 /* DeepSpeedStrategy(stage=) */
  fsF_start start_method;    /* DDPStrategy(start_method=) */
  int save_distributed;      /* ModelParallelStrategy(save_distributed_checkpoint=) */
  /* The strategy's own `accelerator=` (R73): 0 not given or None; 1..5 the
   * name "cpu", "cuda", "mps", "tpu", "gpu"; FSF_STRATEGY_ACCEL_OTHER any
   * other value (Fabric takes an Accelerator object there) */
  int accelerator;
  /* FSDPStrategy(state_dict_type=) when neither "full" nor "sharded" (R90
   * at save, where fsdp.py raises it), else NULL; borrowed from the object's
   * owner (the config keeps a copy) */
  const char *state_dict_unknown;
  /* ModelParallelStrategy(data_parallel_size=, tensor_parallel_size=):
   * the sizes when given as ints (*_given), else "auto" */
  int dp_size, tp_size, dp_given, tp_given;
  fsF_xla_fsdp_opts xla_fsdp; /* XLAFSDPStrategy */
  /* raisesD: the strategy's own `precision=` is given (R81), and the type of
   * its `parallel_devices=[...]`'s first device (R82, R83) */
  int precision;
  fsF_pdev parallel_devices;
  int checkpoint_io, cluster_environment; /* raisesD: given and not None (R85, R86) */
} fsF_strategy_obj;
#define FSF_STRATEGY_ACCEL_OTHER 99

typedef struct fsF_value {
  fsF_vkind kind;
  int64_t i;                 /* INT, BOOL */
  double f;                  /* FLOAT */
  const char *s;             /* STR text; LIST/OTHER: Python repr (borrowed) */
  const char *tname;         /* LIST: type of the first non-int element; OTHER: type name */
  const int64_t *ints;       /* INTLIST (borrowed) */
  size_t nints;
  bool tuple;                /* INTLIST, LIST: a tuple, not a list */
  fsF_strategy_obj strategy; /* STRATEGY */
} fsF_value;

/* Python's repr() / str() of a value; the result is malloc'ed. */
char *fsF_value_repr(const fsF_value *v);
char *fsF_value_str(const fsF_value *v);
/* Python's repr() of a string. */
char *fsF_repr_str(const char *s);

/* ---- the machine and the command line ---------------------------------- */

#define FSF_MAX_GPUS 64

typedef struct fsF_machine {
  int cuda_gpus;          /* visible CUDA devices, 0..FSF_MAX_GPUS */
  int mps, xla, deepspeed, transformer_engine; /* available? */
  int bitsandbytes;       /* available? (--assume=bitsandbytes) */
  int tpus;               /* XLA devices when xla is available */
  int has_fork;           /* the platform can fork (Linux: yes) */
  int under_cli;          /* LT_CLI_USED=1: processes already created */
  int interactive;        /* a notebook: never, for a script */
} fsF_machine;

/* This machine, found cheaply: /proc/driver/nvidia/gpus entries filtered by
 * CUDA_VISIBLE_DEVICES (CUDA is never initialised), LT_CLI_USED. */
void fsF_machine_detect(fsF_machine *m);

/* `fabric run`'s options; NULL where not given. Strings are borrowed. */
typedef struct fsF_overrides {
  const char *accelerator, *strategy, *devices, *num_nodes, *precision;
} fsF_overrides;

/* Parses one command-line argument of ours: --accelerator= --strategy=
 * --devices= --num-nodes= --precision= (the value may also be the next
 * argument), --gpus=N (check as if N GPUs were visible) and
 * --assume=deepspeed,xla,mps,transformer-engine,bitsandbytes,cli,no-fork (check as if the
 * machine had them). Returns the arguments consumed (1 or 2), 0 when the
 * argument is not ours, -1 on a bad value (with *err set to a static text). */
int fsF_parse_arg(fsF_overrides *o, fsF_machine *m, const char *arg,
                  const char *next, const char **err);

/* ---- the resolved configuration ---------------------------------------- */

typedef enum fsF_accel { FSF_CPU, FSF_CUDA, FSF_MPS, FSF_TPU } fsF_accel;

typedef enum fsF_prec {
  FSF_P32, FSF_P16_TRUE, FSF_PBF16_TRUE, FSF_P16_MIXED, FSF_PBF16_MIXED,
  FSF_P64, FSF_PTE, FSF_PTE16
} fsF_prec;

typedef enum fsF_launcher {
  FSF_LAUNCH_NONE, FSF_LAUNCH_POPEN, FSF_LAUNCH_SPAWN, FSF_LAUNCH_FORK, FSF_LAUNCH_XLA
} fsF_launcher;

typedef enum fsF_nbs { FSF_NBS_NOOP, FSF_NBS_SKIP, FSF_NBS_WARN } fsF_nbs;

typedef struct fsF_config {
  fsF_cls cls;
  const char *strategy_name;   /* registry name after fallbacks ("ddp", "fsdp", ...) or "auto" */
  fsF_accel accel;
  fsF_prec precision;          /* after alias conversion and the CPU fallback (W8) */
  fsF_launcher launcher;
  int devices;                 /* devices per node */
  int device_ids[FSF_MAX_GPUS];/* CUDA ids (first `devices`), else 0..devices-1 */
  int num_nodes, world_size;
  /* traits (as Fabric's connector.py derives them) */
  int launch_required;         /* R16 */
  int launch_needs_fn;         /* R17 */
  int setup_optimizers_allowed;/* else R25 */
  int fabric_backward_required;/* R42: loss.backward() is an error */
  fsF_nbs no_backward_sync;
  int use_orig_params;         /* fsdp */
  int state_dict_sharded;      /* fsdp: "sharded" (default) or "full" */
  int cpu_offload;             /* fsdp_cpu_offload, ZeRO offload */
  int auto_wrap_policy;        /* fsdp */
  int zero_stage;              /* deepspeed: 1, 2 or 3; else 0 */
  int save_distributed;        /* mp */
  char state_dict_unknown[64]; /* fsdp: an unknown state_dict_type (R90), else ""; cut at 63 bytes */
  int mp_dp_size, mp_tp_size;  /* mp: the device mesh's sizes ("auto": num_nodes, devices) */
  int under_cli;               /* launched from the start (machine) */
  fsF_xla_fsdp_opts xla_fsdp;  /* xla_fsdp: the strategy object's arguments */
  int plugin;                  /* Fabric(plugins=...): a precision plugin object's fsF_plugin, else 0 */
  int parallel_devices;        /* raisesD: the strategy object's parallel_devices= were given */
  int strategy_precision;      /* raisesD: the strategy object's own precision= was given */
  const char *bnb_ignore_modules; /* BitsandbytesPrecision: repr() of a non-empty ignore_modules, or NULL */
} fsF_config;

/* raisesD: the three plugin types Fabric's connector sorts `plugins=` into. */
typedef enum fsF_ptype { FSF_PT_PRECISION, FSF_PT_CHECKPOINT_IO, FSF_PT_CLUSTER_ENV, FSF_PT__COUNT } fsF_ptype;

/* The arguments of `Fabric(...)`; FSF_UNSET where the script passed none. */
typedef struct fsF_args {
  fsF_value accelerator, strategy, devices, num_nodes, precision;
  /* The first plugin Fabric's connector looks at (R72): `plugins=` itself
   * when not iterable, else its first item (a string's first character);
   * FSF_UNSET for None, an empty value, or one not known. */
  fsF_value plugin;
  /* raisesD: the plugin objects among `plugins=` (R78-R87): how many of
   * each type, 1 + the position of each type's first one (0: none; Fabric
   * names duplicated types in that order), and the last Precision's and
   * CheckpointIO's fsF_plugin (Fabric keeps the last). */
  int plugin_count[FSF_PT__COUNT];
  int plugin_first[FSF_PT__COUNT];
  int precision_plugin, checkpoint_io;
} fsF_args;

/* Resolves as Fabric's connector does (connector.py, then fabric.py's checks). Returns 0
 * with *cfg filled (warnings W7, W8, W9 in iss), or -1 with the first error
 * last in iss. */
int fsF_resolve(const fsF_args *a, const fsF_overrides *o, const fsF_machine *m,
                fsF_config *cfg, fsF_issues *iss);

/* Pre-flight: the machine the script declares (CUDA GPUs for
 * accelerator cuda/gpu or an FSDP strategy, as many as `devices` asks;
 * DeepSpeed, XLA, MPS, Transformer Engine for the strategies, accelerators
 * and precisions that need them), the command line's overrides applied.
 * *d is `here` with what it lacks added. Returns 0 when `here` lacks
 * nothing, else 1 with *note set to the one pre-flight note's text
 * (malloc'd): "checked for 4 CUDA GPUs as the script declares; this machine
 * has none (--here checks for this machine)". */
int fsF_declared_machine(const fsF_args *a, const fsF_overrides *o, const fsF_machine *here,
                         fsF_machine *d, char **note);

/* "Did you mean": the registered name closest to value for param
 * ("strategy", "accelerator" or "precision"), or NULL. */
const char *fsF_suggest_name(const char *param, const char *value);

const char *fsF_cls_name(fsF_cls c);      /* "FSDPStrategy", ... */
const char *fsF_prec_name(fsF_prec p);    /* "bf16-mixed", ... */
/* R70: why this runtime cannot run cfg's precision (a static text saying
 * what to use instead), or NULL when it runs it (issue 16).  Not Fabric's
 * rule, so not part of resolution (`plan` predicts torch's layout for any
 * precision): `check` reports it through fsF_check_precision_runs (-1 and
 * the error in iss), where a run would refuse it. */
const char *fsF_precision_unsupported(const fsF_config *cfg);
int fsF_check_precision_runs(const fsF_config *cfg, fsF_issues *iss);
const char *fsF_accel_name(fsF_accel a);  /* "cuda", ... */

/* ---- object states ------------------------------------------------------ */

typedef struct fsF_fabric {
  const fsF_config *cfg;
  int launched;       /* a launch() call happened (or under the CLI) */
  int models_setup;   /* completed setup/setup_module calls (R39, R40) */
} fsF_fabric;

void fsF_fabric_init(fsF_fabric *f, const fsF_config *cfg);

typedef struct fsF_model {
  const char *class_name;  /* "Linear", "MLP", ... */
  int is_module;           /* an nn.Module at all (else class_name is the type) */
  int wrapped;             /* a _FabricModule (returned by setup) */
  int meta;                /* has parameters on the meta device */
  int fsdp_root;           /* wrapped under fsdp with the root in FSDP */
  int has_fsdp_submodules; /* contains FSDP-wrapped submodules (W1/W2) */
  const char *no_reset;    /* mp: classes lacking reset_parameters(), or NULL */
  /* mp: parallelize_fn turned parameters into DTensors. FabricScript has no
   * fully_shard/parallelize_module, so no .fab model has them: every mp
   * save and load of a state finds no distributed model (R96). In a .py
   * script the checker counts every set-up model as distributed. */
  int dtensor_params;
  unsigned generation;     /* bumped when materialization replaces the parameters */
  /* W4, filled by a setup with move_to_device=True (else 0): how many
   * parameters, in named_parameters() order, are not on the first one's
   * device; the first such and the first parameter, name and device as
   * torch prints them ("cuda:0") */
  int64_t devices_apart;
  const char *apart_name, *apart_device, *first_name, *first_device;
} fsF_model;

typedef struct fsF_optim {
  int wrapped;       /* a _FabricOptimizer */
  int meta_params;   /* references meta-device Parameters */
  int fsdp_flat;     /* references FSDP-flattened parameters */
  int xla_sharded;   /* references XLA-FSDP sharded parameters */
  const char *foreign; /* not an optimizer at all: its type name (R76); NULL for one */
  int handles_unscaling; /* torch's _step_supports_amp_scaling: made with fused=True (R126) */
} fsF_optim;

typedef struct fsF_loader {
  int wrapped;        /* a _FabricDataLoader */
  int is_dataloader;  /* a DataLoader at all */
  /* batch_sampler= is neither a torch BatchSampler nor an object with
   * `batch_size` and `drop_last` Fabric could re-instantiate (R77,
   * utilities/data.py:228), or it is one whose re-instantiation clashed
   * ("__init__() got multiple values", data.py:220: the same text) */
  int foreign_batch_sampler;
} fsF_loader;

/* The state of an optimizer built now over `model`'s parameters. */
fsF_optim fsF_optim_over(const fsF_fabric *f, const fsF_model *m);

/* What `init_module(empty_init=...)` does to parameters created in it. */
typedef enum fsF_init { FSF_INIT_NORMAL, FSF_INIT_META, FSF_INIT_EMPTY, FSF_INIT_PARTITIONED } fsF_init;
/* empty_init: -1 None/unset, 0 False, 1 truthy */
fsF_init fsF_init_module_effect(const fsF_config *cfg, int empty_init);

/* ---- validations: 0 = passes (warnings may be added), -1 = error -------- */
/* Each runs the checks of its API in Fabric's order and, on success, does not
 * change the states: fsF_setup_done applies what a successful setup does. */

int fsF_check_setup(const fsF_fabric *f, const fsF_model *m,
                    const fsF_optim *const *opts, size_t nopts, fsF_issues *iss);
int fsF_check_setup_module(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss);
int fsF_check_setup_optimizers(const fsF_fabric *f, const fsF_optim *const *opts,
                               size_t nopts, fsF_issues *iss);
int fsF_check_setup_dataloaders(const fsF_fabric *f, const fsF_loader *const *dls,
                                size_t n, fsF_issues *iss);
/* After a successful setup/setup_module: the model becomes a _FabricModule
 * (materialized where the strategy does so) and the fabric counts it. */
void fsF_setup_done(fsF_fabric *f, fsF_model *m);
/* After a successful setup/setup_optimizers of an optimizer. */
void fsF_setup_optim_done(fsF_optim *o);

/* backward(loss, model=m): m NULL when not given. */
int fsF_check_backward(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss);
/* loss.backward() on a tensor computed by a set-up model (R42). */
int fsF_check_tensor_backward(const fsF_fabric *f, fsF_issues *iss);
int fsF_check_clip_gradients(const fsF_fabric *f, const fsF_model *m,
                             int has_clip_val, int has_max_norm, fsF_issues *iss);
int fsF_check_no_backward_sync(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss);

typedef enum fsF_fn { FSF_FN_NONE, FSF_FN_NOT_CALLABLE, FSF_FN_CALLABLE } fsF_fn;
/* launch(fn): kind of fn; str_of = str(fn) when not callable; fn_name and
 * fn_nparams when callable. On success the fabric is launched. */
/* Rule `unsupported` at Fabric(...): what this runtime cannot run of a
 * resolved configuration (a strategy, accelerator, precision or start
 * method), in the words both the check of a script that will run and the
 * run itself use. 0 when it runs it, else -1 with the error in iss. */
int fsF_check_runnable(const fsF_config *cfg, fsF_issues *iss);
/* The same for state_dict()/load_state_dict() (%s) of a module set up with
 * FSDP: its parameters are flat shards at run time. */
#define FSF_FSDP_STATE_DICT_UNSUPPORTED \
  "%s() of an FSDP-wrapped module is not supported at run time yet; use fabric.save / fabric.load"
int fsF_check_launch(fsF_fabric *f, fsF_fn kind, const char *str_of,
                     const char *fn_name, int fn_nparams, fsF_issues *iss);
/* raisesD: Fabric.sharded_model(): W6, then R16 (its context does nothing
 * a script can see: enable_wrap affects only explicit wrap() calls). */
int fsF_check_sharded_model(const fsF_fabric *f, fsF_issues *iss);
int fsF_check_init_module(const fsF_fabric *f, int empty_init, fsF_issues *iss);
/* barrier, broadcast, all_gather, all_reduce */
int fsF_check_collective(const fsF_fabric *f, fsF_issues *iss);
/* fabric.device, fabric.to_device(...): reading the root device (R66). */
int fsF_check_device(const fsF_fabric *f, fsF_issues *iss);

/* A checkpoint state entry. */
typedef enum fsF_skind { FSF_S_MODEL, FSF_S_OPTIM, FSF_S_OTHER } fsF_skind;
typedef struct fsF_entry {
  const char *key;
  fsF_skind kind;
  const fsF_model *model;    /* FSF_S_MODEL */
  const fsF_optim *optim;    /* FSF_S_OPTIM */
} fsF_entry;

/* save(path, state, filter=...): filter_kind as fsF_vkind of the filter
 * (FSF_UNSET/FSF_NONE: no filter; FSF_OTHER with filter_repr: not a dict;
 * a dict is FSF_LIST with filter_keys and filter_callable[i] per key,
 * filter_vrepr[i] the repr of a non-callable value). */
typedef struct fsF_filter {
  fsF_vkind kind;            /* FSF_UNSET (no filter), FSF_OTHER (not a dict), FSF_LIST (a dict) */
  const char *repr;          /* FSF_OTHER */
  const char *const *keys;   /* FSF_LIST */
  const int *callable;
  const char *const *vrepr;
  size_t n;
} fsF_filter;

int fsF_check_save(const fsF_fabric *f, const fsF_entry *state, size_t n,
                   const fsF_filter *filter, fsF_issues *iss);
/* load(path, state): state NULL for None (or omitted), n == 0 for {} */
int fsF_check_load(const fsF_fabric *f, const fsF_entry *state, size_t n,
                   int state_is_none, fsF_issues *iss);
int fsF_check_load_raw(const fsF_fabric *f, int obj_is_optimizer, fsF_issues *iss);

/* fm.mark_forward_method(x): x_kind FSF_STR with name, else its type name in
 * type_name; has_method: the original module has a method `name`. */
int fsF_check_mark_forward_method(const fsF_model *m, fsF_vkind x_kind,
                                  const char *name, const char *type_name,
                                  int has_method, fsF_issues *iss);

/* setup_dataloaders(..., use_distributed_sampler=True), after its checks
 * passed: R77 where the strategy injects a distributed sampler into a loader
 * whose batch sampler cannot take one (utilities/data.py). */
int fsF_check_distributed_sampler(const fsF_fabric *f, const fsF_loader *l, fsF_issues *iss);
/* R50: `model.method(...)` of a set-up model, the method the script class's
 * own, when it calls a module of the model (wrappers.py:219). */
int fsF_check_outside_call(const fsF_fabric *f, const char *class_name, const char *method, fsF_issues *iss);

/* seed_everything(seed) (utilities/seed.py): R75, numpy's bounds. */
int fsF_check_seed(int64_t seed, fsF_issues *iss);
/* raisesD: suggested_max_num_workers(local_world_size) (R89). */
int fsF_check_max_num_workers(int64_t local_world_size, fsF_issues *iss);
/* ---- strategies/: the strategy objects' own checks (R90-R109, W20-W24) ---- */

/* FSDPStrategy(...)'s arguments that its constructor validates (fsdp.py's
 * __init__, _activation_checkpointing_kwargs, _init_sharding_strategy). */
typedef struct fsF_fsdp_ctor {
  int activation_checkpointing;        /* given and not None */
  const char *ac_str, *ac_set_str;     /* str() of it and of set(classes); NULL: not known (no W20) */
  int activation_checkpointing_policy; /* given and not None */
  int auto_wrap_policy, process_group, device_mesh; /* given and not None */
  const char *sharding_strategy;       /* the name given; NULL: not a string */
} fsF_fsdp_ctor;
/* R91, W20, R92, R93 in the constructor's order. */
int fsF_check_fsdp_ctor(const fsF_fsdp_ctor *a, fsF_issues *iss);
/* DeepSpeedStrategy(config="path") reads the file when created (R95):
 * is_file says whether it is a file on the machine the script runs on
 * (the caller looks; nothing here touches files). */
int fsF_check_deepspeed_config(const char *path, int is_file, fsF_issues *iss);
/* fabric.all_reduce(data, reduce_op=...): a collective (R16), then
 * XLAStrategy's (R100) and XLAFSDPStrategy's (R110) reduce operations;
 * reduce_op NULL when not known. */
/* launch(fn) under the spawn start method (R103): each child imports the
 * script again (as __mp_main__) and must not reach launch() there;
 * guarded: the call runs inside `if __name__ == "__main__":`. */
int fsF_check_spawn_guard(const fsF_config *cfg, int guarded, fsF_issues *iss);
/* ModelParallelStrategy.setup_module: what parallelize_fn returned, when
 * it is not a module: its Python type name (R102). */
int fsF_check_parallelized(const char *type_name, fsF_issues *iss);
int fsF_check_all_reduce(const fsF_fabric *f, const char *reduce_op, fsF_issues *iss);
/* strategy.checkpoint_io: FSDPStrategy's and ModelParallelStrategy's
 * getters refuse (R107); another strategy's is a CheckpointIO object, which
 * FabricScript does not have (`unsupported`). */
int fsF_check_checkpoint_io(fsF_cls cls, fsF_issues *iss);
/* `strategy.NAME = value`: FSDPStrategy's and ModelParallelStrategy's
 * checkpoint_io setters refuse (R109), XLAStrategy's and
 * SingleDeviceXLAStrategy's a value that is not an XLACheckpointIO (R87,
 * as when the connector hands a plugin over:
 * value_str is str(value), NULL when not known, and nothing is said then);
 * any other assignment to a strategy's attribute is `unsupported` here. */
int fsF_check_set_strategy_attr(fsF_cls cls, const char *name, int is_none, const char *value_str,
                                fsF_issues *iss);
/* strategy.device_mesh: ModelParallelStrategy's before its processes are
 * initialized (R108; launched: 1 after launch(), 0 not, -1 not known:
 * nothing reported); another strategy has no such attribute (`attr`). */
int fsF_check_device_mesh(fsF_cls cls, int launched, fsF_issues *iss);
/* One parameter of a module tree as fsdp.py's
 * _warn_if_shared_params_across_fsdp_units lists them: each module of
 * named_modules() once (preorder), its own parameters in registration
 * order; a tied parameter once under each module holding it. */
typedef struct fsF_param_site {
  const void *param; /* its identity: the sites of tied parameters share it */
  const char *path;  /* "emb.wte.weight" */
  const char *unit;  /* the nearest module above it that the policy wraps ("" the root's unit) */
} fsF_param_site;
/* setup/setup_module under FSDPStrategy with a ModuleWrapPolicy (a set of
 * classes): W21 for each parameter listed under paths in different units. */
void fsF_warn_shared_params(const fsF_param_site *s, size_t n, fsF_issues *iss);
/* ---- precision plugins and XLAFSDPStrategy (plugins.c) ------------------ */
/* the constructors of plugins/precision/ (one file per plugin) and strategies/xla_fsdp.py's rules. */

typedef enum fsF_plugin {
  FSF_PL_NONE, FSF_PL_MIXED, FSF_PL_HALF, FSF_PL_DOUBLE, FSF_PL_FSDP, FSF_PL_DEEPSPEED,
  FSF_PL_XLA, FSF_PL_BNB, FSF_PL_TE,
  /* raisesD: the CheckpointIO and ClusterEnvironment plugins a script can make */
  FSF_PL_TORCH_IO, FSF_PL_XLA_IO, FSF_PL_LIGHTNING_ENV, FSF_PL_TORCHELASTIC_ENV, FSF_PL__COUNT
} fsF_plugin;
/* Which of Fabric's plugin types k is. */
fsF_ptype fsF_plugin_type(fsF_plugin k);

/* A precision plugin's constructor arguments; NULL where not given (or not
 * known). Strings are borrowed. */
typedef struct fsF_plugin_args {
  fsF_plugin kind;
  const char *precision;      /* repr() of precision= ('16-mixed', 16, None) */
  const char *precision_str;  /* its text when it is a str, else NULL */
  const char *scaler;         /* str() of a scaler that is not None */
  const char *mode;           /* BitsandbytesPrecision(mode=): its text */
  const char *dtype;          /* str() of dtype= ("torch.bfloat16") when not None */
} fsF_plugin_args;

const char *fsF_plugin_name(fsF_plugin k);    /* "MixedPrecision", ... */
/* The plugin class a name denotes, FSF_PL_NONE for any other name. */
fsF_plugin fsF_plugin_of(const char *class_name);
/* The plugin's constructor, in its order of checks (R115-R119, R14, env). */
int fsF_check_plugin_new(const fsF_plugin_args *p, const fsF_machine *m, fsF_issues *iss);
/* `unsupported`: Fabric(plugins=...) with a plugin this runtime does not
 * honour (a precision plugin, XLACheckpointIO, TorchElasticEnvironment) in a
 * run; TorchCheckpointIO and LightningEnvironment are its defaults. */
int fsF_check_plugin_runs(fsF_plugin k, fsF_issues *iss);
/* Whether a run honours plugin k (the runtime's defaults). */
int fsF_plugin_honoured(fsF_plugin k);

/* raisesD R84: FSDPStrategy's precision, str() of it when it is not an
 * FSDPPrecision (NULL: FSDPPrecision or None, nothing to report). */
int fsF_check_fsdp_precision(const char *found, fsF_issues *iss);
/* str() of a plugin object: "<lightning.fabric.plugins.precision.amp.MixedPrecision
 * object at 0x7f0000000000>" (the fixed address, as R19); malloc'ed. */
char *fsF_plugin_str(fsF_plugin k);
/* XLAFSDPStrategy(...)'s constructor: torch_xla installed (R14), then its
 * precision setter (R127): precision_str is str() of a precision= that is
 * neither None nor an XLAPrecision, else NULL. */
int fsF_check_xla_fsdp_new(const fsF_machine *m, const char *precision_str, fsF_issues *iss);
/* XLAFSDPStrategy(state_dict_type=...): FSF_XSD_SHARDED, FSF_XSD_FULL or FSF_XSD_OTHER. */
int fsF_xla_state_dict(const char *state_dict_type);
/* The activation-checkpointing arguments, checked when the module is set
 * up (R121, R122), from fsF_check_setup and fsF_check_setup_module. */
int fsF_xla_fsdp_setup(const fsF_fabric *f, fsF_issues *iss);
/* The XLAFSDP parts of save/load/load_raw, called by fsF_check_save,
 * fsF_check_load and fsF_check_load_raw (R111-R114, R123-R125, W25). */
int fsF_xla_fsdp_save(const fsF_fabric *f, const fsF_entry *st, size_t n, fsF_issues *iss);
int fsF_xla_fsdp_load(const fsF_fabric *f, const fsF_entry *st, size_t n, int state_is_none,
                      fsF_issues *iss);
int fsF_xla_fsdp_load_raw(const fsF_fabric *f, fsF_issues *iss);
/* After fsF_check_save passed: a full checkpoint across hosts (R128);
 * path: the save's path, NULL when not known. */
int fsF_xla_fsdp_save_full(const fsF_fabric *f, const char *path, fsF_issues *iss);
/* clip_gradients(module, optimizer, ...) after fsF_check_clip_gradients
 * passed: the precision plugin unscales the gradients first, and its
 * gradient scaler (16-mixed) refuses an optimizer that unscales itself (R126). */
int fsF_check_clip_unscaling(const fsF_fabric *f, const fsF_optim *o, fsF_issues *iss);
/* The plugin's convert_module() at setup/setup_module (R119) and its
 * module_init_context() at init_module (R120). */
int fsF_plugin_convert_module(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss);
int fsF_plugin_init_module(const fsF_fabric *f, fsF_issues *iss);
/* Transformer Engine's convert_module at setup: a child Linear `name` of
 * in x out features that FP8 cannot take stays as it is (W26). 1 when cfg
 * converts layers (precision="transformer-engine"/"-float16"). */
int fsF_te_converts(const fsF_config *cfg);
void fsF_te_layer(const char *name, int64_t in, int64_t out, fsF_issues *iss);

#endif
