/* lib_strategy.c -- strategy objects (FSDPStrategy, DDPStrategy,
 * DeepSpeedStrategy): what Fabric(strategy=...) resolves, validated by
 * fabric.h's rules as Fabric validates the strategy's constructor. */
#include <string.h>

#include "eval_int.h"

/* ---- strategy objects: what Fabric(strategy=...) resolves ----------------------- */


static void strategy_free(void *p) { free(p); }

static char *strategy_repr(fs_value *v) {
  fsF_strategy_obj *so = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<%s>", fsF_cls_name(so->cls));
  return fsV_buf_take(&b);
}

const fsV_class fsE_strategy_class = {
  .name = "Strategy", .repr = strategy_repr, .free = strategy_free,
};

static fs_value *strategy_value(fsF_strategy_obj so) {
  fsF_strategy_obj *p = malloc(sizeof *p);
  if (!p) {
    fsV_seterr("out of memory");
    return NULL;
  }
  *p = so;
  return fsV_obj(&fsE_strategy_class, p);
}

static const fsF_strategy_obj no_kwargs = {.use_orig_params = -1, .state_dict_full = -1, .cpu_offload = -1,
                                           .auto_wrap_policy = -1, .stage = -1, .save_distributed = -1};

fs_value *fsE_strategy_value(fsF_cls cls) {
  fsF_strategy_obj so = no_kwargs;
  so.cls = cls;
  return strategy_value(so);
}

const char *fsE_strategy_class_name(const fs_value *v) {
  const fsF_strategy_obj *so = fsV_objdata(v, &fsE_strategy_class);
  return so ? fsF_cls_name(so->cls) : NULL;
}

/* raisesA: the strategy's `accelerator=` (a **kwargs entry of the class
 * `cls`'s signature) as fsF_strategy_obj.accelerator encodes it (R73). */
static int kw_accelerator(const char *cls, fs_value *const *s) {
  static const char *const names[] = {"cpu", "cuda", "mps", "tpu", "gpu"};
  const fsSig *sig = fsSig_find(cls);
  for (size_t i = 0; sig && i < sig->nparams; i++) {
    if (!(sig->params[i].flags & FSSIG_VARKW) || s[i]->type != FSV_DICT) continue;
    const fs_value *x = fsV_dict_getstr(s[i], "accelerator");
    if (!x || !fsV_truthy(x)) return 0;
    for (int j = 0; x->type == FSV_STR && j < 5; j++)
      if (!strcmp(x->u.str.s, names[j])) return j + 1;
    return FSF_STRATEGY_ACCEL_OTHER;
  }
  return 0;
}

/* slots: FSDPStrategy's parameters in signatures.c order */
NATIVE(s_fsdp) {
  fsF_strategy_obj so = no_kwargs;
  so.cls = FSF_FSDP;
  so.auto_wrap_policy = s[0]->type != FSV_NONE;
  so.cpu_offload = fsV_truthy(s[2]);
  so.state_dict_full = strcmp(s[5]->u.str.s, "full") == 0;
  if (!so.state_dict_full && strcmp(s[5]->u.str.s, "sharded") != 0) {
    fsV_seterr("FSDPStrategy(): state_dict_type must be 'full' or 'sharded', not '%s'", s[5]->u.str.s);
    return NULL;
  }
  so.use_orig_params = fsV_truthy(s[6]);
  so.accelerator = kw_accelerator("FSDPStrategy", s);
  return strategy_value(so);
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
  so.accelerator = kw_accelerator("DDPStrategy", s);
  return strategy_value(so);
}

NATIVE(s_deepspeed) {
  fsF_strategy_obj so = no_kwargs;
  so.cls = FSF_DEEPSPEED;
  so.stage = (int)fsE_ival(s[1]);
  so.cpu_offload = fsV_truthy(s[2]) || fsV_truthy(s[3]);
  so.accelerator = kw_accelerator("DeepSpeedStrategy", s);
  return strategy_value(so);
}

static const fsE_reg strategy_funcs[] = {
  {"FSDPStrategy", s_fsdp}, {"DDPStrategy", s_ddp}, {"DeepSpeedStrategy", s_deepspeed},
  {NULL, NULL},
};
const fsE_lib fsE_lib_strategy = {"strategy", strategy_funcs};
