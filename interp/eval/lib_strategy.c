/* lib_strategy.c -- strategy objects (FSDPStrategy, DDPStrategy,
 * DeepSpeedStrategy, ModelParallelStrategy): what Fabric(strategy=...) resolves, validated by
 * fabric.h's rules as Fabric validates the strategy's constructor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval_int.h"

/* ---- strategy objects: what Fabric(strategy=...) resolves ----------------------- */


/* The object: Fabric's fields first (lib_fabric.c reads them as an
 * fsF_strategy_obj), then FSDPStrategy's auto_wrap_policy classes. */
typedef struct strategy_data {
  fsF_strategy_obj so;
  fs_value *wrap_policy; /* fsE_wrap_policy_of's value, or NULL */
} strategy_data;

static void strategy_free(void *p) {
  fsV_release(((strategy_data *)p)->wrap_policy);
  free(p);
}

static char *strategy_repr(fs_value *v) {
  fsF_strategy_obj *so = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<%s>", fsF_cls_name(so->cls));
  return fsV_buf_take(&b);
}

/* `strategy.NAME = value`: R109 (FSDP's and ModelParallel's checkpoint_io), else `unsupported`. */
static int strategy_setattr(fsE_ctx *E, fs_value *self, const char *name, fs_value *v) {
  char *str = fsV_tostr(v);
  if (!str) return -1;
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsV_args at = {.loc = E->attr_loc}; /* an attribute has no call */
  int rc = fsE_fabric_issues(E, &at, &iss, fsF_check_set_strategy_attr(((const strategy_data *)self->u.obj.data)->so.cls,
                                                                        name, v->type == FSV_NONE, str, &iss));
  free(str);
  return rc;
}

const fsV_class fsE_strategy_class = {
  .name = "Strategy", .repr = strategy_repr, .free = strategy_free, .setattr = strategy_setattr,
};

/* The object with its texts in one allocation (strategy_free frees both). */
static fs_value *strategy_value(fsF_strategy_obj so, fs_value *wrap_policy) {
  size_t extra = so.state_dict_unknown ? strlen(so.state_dict_unknown) + 1 : 0;
  strategy_data *p = malloc(sizeof *p + extra);
  if (!p) {
    fsV_release(wrap_policy);
    fsV_seterr("out of memory");
    return NULL;
  }
  *p = (strategy_data){so, wrap_policy};
  if (extra) p->so.state_dict_unknown = memcpy(p + 1, so.state_dict_unknown, extra);
  return fsV_obj(&fsE_strategy_class, p);
}

fs_value *fsE_strategy_wrap_policy(const fs_value *v) {
  const strategy_data *p = fsV_objdata(v, &fsE_strategy_class);
  return p ? p->wrap_policy : NULL;
}

static const fsF_strategy_obj no_kwargs = {.use_orig_params = -1, .state_dict_full = -1, .cpu_offload = -1,
                                           .auto_wrap_policy = -1, .stage = -1, .save_distributed = -1};

fs_value *fsE_strategy_value(fsF_cls cls) {
  fsF_strategy_obj so = no_kwargs;
  so.cls = cls;
  return strategy_value(so, NULL);
}

const char *fsE_strategy_class_name(const fs_value *v) {
  const fsF_strategy_obj *so = fsV_objdata(v, &fsE_strategy_class);
  return so ? fsF_cls_name(so->cls) : NULL;
}

/* raisesA: the strategy's `accelerator=` (a **kwargs entry of the class
 * `cls`'s signature) as fsF_strategy_obj.accelerator encodes it (R73);
 * raisesD: its `precision=`, `checkpoint_io=`, `cluster_environment=`
 * (R81, R85, R86) and parallel_devices' first device type
 * (R82, R83), as the checker reads them (api_fabric.c). */
static int kw_accelerator(const char *cls, fs_value *const *s, fsF_strategy_obj *so) {
  static const char *const names[] = {"cpu", "cuda", "mps", "tpu", "gpu"};
  const fsSig *sig = fsSig_find(cls);
  for (size_t i = 0; sig && i < sig->nparams; i++) {
    if (!(sig->params[i].flags & FSSIG_VARKW) || s[i]->type != FSV_DICT) continue;
    const fs_value *p = fsV_dict_getstr(s[i], "precision");
    so->precision = p && fsV_truthy(p);
    const fs_value *io = fsV_dict_getstr(s[i], "checkpoint_io"), *env = fsV_dict_getstr(s[i], "cluster_environment");
    so->checkpoint_io = io && fsV_truthy(io);
    so->cluster_environment = env && fsV_truthy(env);
    const fs_value *d = fsV_dict_getstr(s[i], "parallel_devices");
    const ctxv *dev = d && (d->type == FSV_LIST || d->type == FSV_TUPLE) && d->u.seq.n
                          ? fsV_objdata(d->u.seq.items[0], &fsE_ctx_class) : NULL;
    if (d && fsV_truthy(d))
      so->parallel_devices = !dev || dev->kind != 0 ? FSF_PD_OTHER
                           : dev->dev == FS_DEV_CPU ? FSF_PD_CPU : dev->dev == FS_DEV_CUDA ? FSF_PD_CUDA : FSF_PD_OTHER;
    const fs_value *x = fsV_dict_getstr(s[i], "accelerator");
    if (!x || !fsV_truthy(x)) return 0;
    for (int j = 0; x->type == FSV_STR && j < 5; j++)
      if (!strcmp(x->u.str.s, names[j])) return j + 1;
    return FSF_STRATEGY_ACCEL_OTHER;
  }
  return 0;
}

/* str(activation_checkpointing) and str(set(classes)) for W20 (a script
 * class or a list of them; the set in the list's order, as the check prints
 * it: Python orders classes in a set by address). Builtin layers print as
 * builtins here, not as torch's classes: then no text (*str NULL), as in
 * the check. -1: out of memory. */
static int checkpointing_strs(const fs_value *v, char **str, char **set) {
  int list = v->type == FSV_LIST;
  size_t n = list ? v->u.seq.n : 1;
  fs_value *const *items = list ? v->u.seq.items : (fs_value *const *)&v;
  for (size_t i = 0; i < n; i++)
    if (strcmp(fsV_type_name(items[i]), "type")) return 0; /* not a script class */
  fsV_buf t = {0};
  fsV_buf_puts(&t, n ? "{" : "set()");
  for (size_t i = 0; i < n; i++) {
    int dup = 0;
    for (size_t j = 0; j < i; j++) dup |= items[j] == items[i];
    if (dup) continue;
    char *k = fsV_tostr(items[i]);
    fsV_buf_printf(&t, "%s%s", i ? ", " : "", k ? k : "");
    free(k);
  }
  fsV_buf_puts(&t, n ? "}" : "");
  *str = fsV_tostr(v);
  *set = fsV_buf_take(&t);
  return *str && *set ? 0 : -1;
}

/* slots: FSDPStrategy's parameters in signatures.c order; **kwargs last.
 * The constructor's checks are fabric.h's (fsF_check_fsdp_ctor), as `check`
 * runs them; an unknown state_dict_type is refused at save (R90). */
NATIVE(s_fsdp) {
  fsF_strategy_obj so = no_kwargs;
  /* raisesD: the precision setter runs first (R84) */
  char *found = fsE_fsdp_precision_found(fsV_dict_getstr(s[7], "precision"));
  if (found) {
    fsF_issues pi;
    fsF_issues_init(&pi);
    int prc = fsE_fabric_issues(E, a, &pi, fsF_check_fsdp_precision(found, &pi));
    free(found);
    if (prc < 0) return NULL;
  }
  so.cls = FSF_FSDP;
  so.auto_wrap_policy = s[0]->type != FSV_NONE;
  so.cpu_offload = fsV_truthy(s[2]);
  so.state_dict_full = strcmp(s[5]->u.str.s, "full") == 0;
  if (!so.state_dict_full && strcmp(s[5]->u.str.s, "sharded") != 0) so.state_dict_unknown = s[5]->u.str.s;
  so.use_orig_params = fsV_truthy(s[6]);
  const fs_value *ac = fsV_dict_getstr(s[7], "activation_checkpointing");
  const fs_value *pg = fsV_dict_getstr(s[7], "process_group"), *dm = fsV_dict_getstr(s[7], "device_mesh");
  fsF_fsdp_ctor f = {
    .activation_checkpointing = ac && ac->type != FSV_NONE,
    .activation_checkpointing_policy = s[1]->type != FSV_NONE,
    .auto_wrap_policy = so.auto_wrap_policy,
    .process_group = pg && pg->type != FSV_NONE,
    .device_mesh = dm && dm->type != FSV_NONE,
    .sharding_strategy = s[4]->u.str.s,
  };
  char *str = NULL, *set = NULL;
  if (f.activation_checkpointing && checkpointing_strs(ac, &str, &set) < 0) {
    free(str);
    free(set);
    fsV_seterr("out of memory");
    return NULL;
  }
  so.accelerator = kw_accelerator("FSDPStrategy", s, &so);
  f.ac_str = str;
  f.ac_set_str = set;
  fsF_issues iss;
  fsF_issues_init(&iss);
  int rc = fsE_fabric_issues(E, a, &iss, fsF_check_fsdp_ctor(&f, &iss));
  free(str);
  free(set);
  if (rc < 0) return NULL;
  fs_value *classes = NULL;
  if (so.auto_wrap_policy && !(classes = fsE_wrap_policy_of(E, s[0]))) return NULL;
  return strategy_value(so, classes);
}

NATIVE(s_ddp) {
  fsF_strategy_obj so = no_kwargs;
  const char *m = s[3]->u.str.s;
  so.cls = FSF_DDP;
  so.start_method = strcmp(m, "spawn") == 0 ? FSF_START_SPAWN : strcmp(m, "fork") == 0 ? FSF_START_FORK : FSF_START_POPEN;
  if (strcmp(m, "popen") && strcmp(m, "spawn") && strcmp(m, "fork")) {
    fsV_seterr("DDPStrategy(): start_method must be 'popen', 'spawn' or 'fork', not '%s'", m);
    return NULL;
  }
  so.accelerator = kw_accelerator("DDPStrategy", s, &so);
  return strategy_value(so, NULL);
}

NATIVE(s_deepspeed) {
  fsF_strategy_obj so = no_kwargs;
  so.cls = FSF_DEEPSPEED;
  so.stage = (int)fsE_ival(s[1]);
  so.cpu_offload = fsV_truthy(s[2]) || fsV_truthy(s[3]);
  so.accelerator = kw_accelerator("DeepSpeedStrategy", s, &so);
  return strategy_value(so, NULL);
}

/* ---- torch.distributed.fsdp.wrap: the policies (docs/distributed.md) ---- */

static void policy_free(void *p) { fsV_release(p); }

/* ModuleWrapPolicy(module_classes): its data is the classes' list */
static const fsV_class module_wrap_policy_class = {.name = "ModuleWrapPolicy", .free = policy_free};

fs_value *fsE_module_wrap_policy_classes(const fs_value *v) { return fsV_objdata(v, &module_wrap_policy_class); }

NATIVE(module_wrap_policy) {
  (void)self, (void)a;
  fs_value *classes = fsE_module_classes(E, s[0], "ModuleWrapPolicy()");
  return classes ? fsV_obj(&module_wrap_policy_class, classes) : NULL;
}

/* transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls):
 * look everywhere; wrap the named classes' modules */
NATIVE(transformer_auto_wrap_policy) {
  (void)self, (void)a;
  modv *mv = fsV_objdata(s[0], &fsE_module_class);
  if (!mv) return fsV_seterr("transformer_auto_wrap_policy(): module must be a Module, not %s", fsV_type_name(s[0])), NULL;
  if (fsV_truthy(s[1])) return fsV_bool(true);
  fs_value *classes = fsE_module_classes(E, s[3], "transformer_auto_wrap_policy()");
  int r = classes ? fsE_module_is_one_of(mv->m, classes) : -1;
  fsV_release(classes);
  return r < 0 ? NULL : fsV_bool(r);
}

/* size_based_auto_wrap_policy(module, recurse, nonwrapped_numel, min_num_params=1e8,
 * force_leaf_modules=None, exclude_wrap_modules=None): torch's defaults keep
 * MultiheadAttention a leaf and never wrap a ModuleList or ModuleDict */
NATIVE(size_based_auto_wrap_policy) {
  (void)self, (void)a;
  modv *mv = fsV_objdata(s[0], &fsE_module_class);
  if (!mv) return fsV_seterr("size_based_auto_wrap_policy(): module must be a Module, not %s", fsV_type_name(s[0])), NULL;
  bool recurse = fsV_truthy(s[1]), big = fsE_ival(s[2]) >= fsE_ival(s[3]);
  fs_value *given = s[recurse ? 4 : 5], *classes = NULL;
  if (given->type != FSV_NONE && !(classes = fsE_module_classes(E, given, "size_based_auto_wrap_policy()")))
    return NULL;
  fsM_kind k = mv->m->kind;
  int skip = classes ? fsE_module_is_one_of(mv->m, classes)
                     : recurse ? k == FSM_MHA : k == FSM_MODULELIST || k == FSM_MODULEDICT;
  fsV_release(classes);
  return skip < 0 ? NULL : fsV_bool(big && !skip);
}

/* slots: parallelize_fn, data_parallel_size, tensor_parallel_size,
 * save_distributed_checkpoint, process_group_backend, timeout. The object
 * resolves (Fabric(strategy=...)); the runtime does not run it (rule
 * `unsupported`, fsF_check_runnable). */
NATIVE(s_model_parallel) {
  fsF_strategy_obj so = no_kwargs;
  so.cls = FSF_MP;
  if ((so.dp_given = s[1]->type == FSV_INT)) so.dp_size = (int)s[1]->u.i;
  if ((so.tp_given = s[2]->type == FSV_INT)) so.tp_size = (int)s[2]->u.i;
  so.save_distributed = fsV_truthy(s[3]);
  return strategy_value(so, NULL);
}

/* strategy.checkpoint_io (R107 for FSDP and ModelParallel; no CheckpointIO
 * objects here) and strategy.device_mesh (R108: a ModelParallelStrategy
 * object is never launched here, the runtime refusing it in Fabric). */
NATIVE(strategy_checkpoint_io) {
  const strategy_data *p = fsV_objdata(self, &fsE_strategy_class);
  if (!p) return fsV_seterr("'%s' object has no attribute '%s'", fsV_type_name(self), "checkpoint_io"), NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsV_args at = {.loc = E->attr_loc}; /* an attribute native has no call */
  fsE_fabric_issues(E, &at, &iss, fsF_check_checkpoint_io(p->so.cls, &iss));
  return NULL;
}

NATIVE(strategy_device_mesh) {
  const strategy_data *p = fsV_objdata(self, &fsE_strategy_class);
  if (!p) return fsV_seterr("'%s' object has no attribute '%s'", fsV_type_name(self), "device_mesh"), NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  fsV_args at = {.loc = E->attr_loc};
  fsE_fabric_issues(E, &at, &iss, fsF_check_device_mesh(p->so.cls, 0, &iss));
  return NULL;
}

static const fsE_reg strategy_funcs[] = {
  {"FSDPStrategy", s_fsdp}, {"DDPStrategy", s_ddp}, {"DeepSpeedStrategy", s_deepspeed},
  {"ModuleWrapPolicy", module_wrap_policy}, {"transformer_auto_wrap_policy", transformer_auto_wrap_policy},
  {"size_based_auto_wrap_policy", size_based_auto_wrap_policy},
  {"Strategy.checkpoint_io", strategy_checkpoint_io}, {"Strategy.device_mesh", strategy_device_mesh},
  {"ModelParallelStrategy", s_model_parallel},
  {NULL, NULL},
};
const fsE_lib fsE_lib_strategy = {"strategy", strategy_funcs};
