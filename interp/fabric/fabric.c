/* fabric.c -- Fabric's object states and API validations (Lightning's
 * fabric.py and its strategies' checks), the issue lists they report into,
 * and the Python reprs their messages quote.  Message texts are Fabric's,
 * byte for byte, typos and double spaces included (tests/unit/test_fabric.c
 * pins them).  Fabric(...)'s resolution is connector.c's. */
#include "config.h"
#include "fabric_int.h"
#include "value.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
/* ---- text ------------------------------------------------------------- */

/* Text is built in value.c's growing string; out of memory ends the process. */
char *fsF_buf_take(fsV_buf *b) {
  char *s = fsV_buf_take(b);
  if (!s) fsA_oom();
  return s;
}

/* ---- issues ------------------------------------------------------------ */

void fsF_issues_init(fsF_issues *iss) { memset(iss, 0, sizeof *iss); }

void fsF_issues_clear(fsF_issues *iss) {
  for (size_t i = 0; i < iss->n; i++) free(iss->items[i].message);
  iss->n = 0;
}

void fsF_issues_free(fsF_issues *iss) {
  fsF_issues_clear(iss);
  free(iss->items);
  fsF_issues_init(iss);
}

const fsF_issue *fsF_error(const fsF_issues *iss) {
  if (iss->n && iss->items[iss->n - 1].severity == FS_SEV_ERROR) return &iss->items[iss->n - 1];
  return NULL;
}

static void vadd(fsF_issues *iss, fs_severity sev, const char *rule, const char *help,
                 const char *fmt, va_list ap) {
  if (iss->n == iss->cap) {
    iss->cap = iss->cap ? iss->cap * 2 : 4;
    iss->items = fsA_xrealloc(iss->items, iss->cap * sizeof *iss->items);
  }
  va_list cp;
  va_copy(cp, ap);
  int k = vsnprintf(NULL, 0, fmt, cp);
  va_end(cp);
  char *msg = fsA_xrealloc(NULL, (size_t)(k < 0 ? 0 : k) + 1);
  vsnprintf(msg, (size_t)(k < 0 ? 0 : k) + 1, fmt, ap);
  iss->items[iss->n++] = (fsF_issue){.rule = rule, .severity = sev, .message = msg, .help = help};
}

int fsF_at(fsF_issues *iss, const char *arg, int arg_index, int rc) {
  if (iss->n) {
    iss->items[iss->n - 1].arg = arg;
    iss->items[iss->n - 1].arg_index = arg_index;
  }
  return rc;
}

/* Adds an error and returns -1, so a check reads `return fsF_fail(...)`. */
int fsF_fail(fsF_issues *iss, const char *rule, const char *help, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vadd(iss, FS_SEV_ERROR, rule, help, fmt, ap);
  va_end(ap);
  return -1;
}

void fsF_warn(fsF_issues *iss, const char *rule, const char *help, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vadd(iss, FS_SEV_WARNING, rule, help, fmt, ap);
  va_end(ap);
}

/* ---- Python reprs ------------------------------------------------------ */

/* Python's reprs are value.c's, so they read the same in every message. */
static void sb_repr_str(fsV_buf *b, const char *s) {
  fs_value v = {.refcount = -1, .type = FSV_STR, .u.str = {(char *)s, strlen(s)}};
  fsV_buf_repr(b, &v);
}

char *fsF_repr_str(const char *s) {
  fsV_buf b = {0};
  sb_repr_str(&b, s);
  return fsF_buf_take(&b);
}

const char *const fsF_strategy_module[FSF_CLS__COUNT] = {
  [FSF_SINGLE] = "single_device", [FSF_DP] = "dp", [FSF_DDP] = "ddp",
  [FSF_FSDP] = "fsdp", [FSF_DEEPSPEED] = "deepspeed", [FSF_MP] = "model_parallel",
  [FSF_XLA] = "xla", [FSF_SINGLE_XLA] = "single_xla", [FSF_XLA_FSDP] = "xla_fsdp",
};

static void sb_repr_value(fsV_buf *b, const fsF_value *v, int as_str) {
  switch (v->kind) {
  case FSF_UNSET: case FSF_NONE: fsV_buf_printf(b, "None"); break;
  case FSF_BOOL: fsV_buf_printf(b, v->i ? "True" : "False"); break;
  case FSF_INT: fsV_buf_printf(b, "%lld", (long long)v->i); break;
  case FSF_FLOAT: { char f[40]; fsV_float_repr(v->f, f, sizeof f); fsV_buf_puts(b, f); break; }
  case FSF_STR: if (as_str) fsV_buf_printf(b, "%s", v->s); else sb_repr_str(b, v->s); break;
  case FSF_INTLIST:
    fsV_buf_printf(b, "[");
    for (size_t i = 0; i < v->nints; i++) fsV_buf_printf(b, "%s%lld", i ? ", " : "", (long long)v->ints[i]);
    fsV_buf_printf(b, "]");
    break;
  case FSF_STRATEGY:
    /* A fixed address: real Fabric prints the object's, which varies. */
    fsV_buf_printf(b, "<lightning.fabric.strategies.%s.%s object at 0x7f0000000000>",
           fsF_strategy_module[v->strategy.cls], fsF_cls_name(v->strategy.cls));
    break;
  case FSF_LIST: case FSF_OTHER: fsV_buf_printf(b, "%s", v->s ? v->s : "<object>"); break;
  }
}

char *fsF_value_repr(const fsF_value *v) {
  fsV_buf b = {0};
  sb_repr_value(&b, v, 0);
  return fsF_buf_take(&b);
}

char *fsF_value_str(const fsF_value *v) {
  fsV_buf b = {0};
  sb_repr_value(&b, v, 1);
  return fsF_buf_take(&b);
}

/* ---- object states ------------------------------------------------------ */

void fsF_fabric_init(fsF_fabric *f, const fsF_config *cfg) {
  f->cfg = cfg;
  f->launched = cfg->under_cli;
  f->models_setup = 0;
}

fsF_optim fsF_optim_over(const fsF_fabric *f, const fsF_model *m) {
  fsF_optim o = {0};
  o.meta_params = m->meta;
  o.fsdp_flat = m->wrapped && m->fsdp_root;
  o.xla_sharded = m->wrapped && f->cfg->cls == FSF_XLA_FSDP;
  return o;
}

fsF_init fsF_init_module_effect(const fsF_config *cfg, int empty_init) {
  if (cfg->cls == FSF_DEEPSPEED && cfg->zero_stage == 3) return FSF_INIT_PARTITIONED;
  if (empty_init <= 0) return FSF_INIT_NORMAL;
  return cfg->cls == FSF_FSDP || cfg->cls == FSF_MP ? FSF_INIT_META : FSF_INIT_EMPTY;
}

/* Strategies whose setup materializes meta parameters instead of `.to()`. */
static int materializes(fsF_cls c) { return c == FSF_FSDP || c == FSF_MP || c == FSF_XLA_FSDP; }

void fsF_setup_done(fsF_fabric *f, fsF_model *m) {
  fsF_cls c = f->cfg->cls;
  f->models_setup++;
  m->wrapped = 1;
  m->fsdp_root = c == FSF_FSDP && !m->has_fsdp_submodules;
  if (m->meta && materializes(c) && !(c == FSF_FSDP && m->has_fsdp_submodules)) {
    m->meta = 0;
    m->generation++;
  }
}

void fsF_setup_optim_done(fsF_optim *o) { o->wrapped = 1; }

/* ---- validations -------------------------------------------------------- */

static const char *const H_R16 = "call `fabric.launch()` right after creating the Fabric object";

static int launched(const fsF_fabric *f, fsF_issues *iss) {
  if (f->cfg->launch_required && !f->launched)
    return fsF_fail(iss, "R16", H_R16,
                "To use Fabric with more than one device, you must call `.launch()` or use the CLI: `fabric run --help`.");
  return 0;
}

/* Moving the module to the device; FSDP, mp and xla_fsdp materialize instead. */
static int move_to_device(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  if (m->devices_apart) /* fabric.py:1144 */
    fsF_warn(iss, "W4", "move the whole model to one device before setup, or keep the placement with `move_to_device=False`",
             "The model passed to `Fabric.setup()` has %lld parameters on different devices (for example '%s' on %s and '%s' on %s). Since `move_to_device=True`, all parameters will be moved to the new device. If this is not desired, set `Fabric.setup(..., move_to_device=False)`.",
             (long long)m->devices_apart, m->apart_name, m->apart_device, m->first_name, m->first_device);
  if (m->meta && !materializes(f->cfg->cls))
    return fsF_fail(iss, "meta-move", "create the model without `device(\"meta\")`, or call `model.to_empty(device=...)` and `model.reset_parameters()` (or load a checkpoint) before setup",
                "Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() instead of torch.nn.Module.to() when moving module from meta to a different device.");
  return 0;
}

static void wrap_warnings(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  if (c->cls == FSF_FSDP) {
    if (m->has_fsdp_submodules && m->meta)
      fsF_warn(iss, "W1", NULL, "The model is already wrapped in `FSDP` but there are still parameters on the meta device.");
    if (m->has_fsdp_submodules && c->auto_wrap_policy)
      fsF_warn(iss, "W2", NULL, "A FSDP `auto_wrap_policy` is set, but the model is already wrapped. The policy will be ignored.");
  }
  if (c->cls == FSF_MP && m->meta && m->no_reset)
    fsF_warn(iss, "W3", "define `reset_parameters()` in those modules",
         "Parameter initialization incomplete. The following modules have parameters or buffers with uninitialized memory because they don't define a `reset_parameters()` method for re-initialization: %s",
         m->no_reset);
}

/* W10: emitted whenever FSDP builds its mixed-precision config. */
static void fsdp_true_half(const fsF_fabric *f, fsF_issues *iss) {
  fsF_prec p = f->cfg->precision;
  if (f->cfg->cls == FSF_FSDP && (p == FSF_P16_TRUE || p == FSF_PBF16_TRUE))
    fsF_warn(iss, "W10", "informational: the shards stay float32 and compute runs in the lower precision; "
         "for float32 weights with bfloat16 autocast, use `precision=\"bf16-mixed\"`",
         "FSDP with `%s` enables computation in lower precision. FSDP will always retain a full-precision copy of the model parameters for sharding.",
         fsF_prec_name(p));
}

static const char *const H_SEPARATE =
    "set up the model first (`model = fabric.setup_module(model)`), then create the optimizer and call `optimizer = fabric.setup_optimizers(optimizer)`";

static const char *const H_OPTIMIZER_OBJECT = "pass the optimizer object: `torch.optim.Adam(model.parameters())`";

/* R76: Fabric asks each optimizer, in order, whether it references meta
 * parameters (utilities/init.py); a value that is no optimizer raises there,
 * unless a meta one before it already made R36/R37 fire. */
static int foreign_optimizer(const fsF_optim *const *opts, size_t nopts, fsF_issues *iss) {
  for (size_t i = 0; i < nopts && !opts[i]->meta_params; i++)
    if (opts[i]->foreign)
      return fsF_fail(iss, "R76", H_OPTIMIZER_OBJECT,
                      "Expected `torch.nn.Module` or `torch.optim.Optimizer`, got: %s", opts[i]->foreign);
  return 0;
}

/* R129: a value that is no optimizer gets past a joint setup outside FSDP
 * and DeepSpeed, until Fabric wraps it: _FabricOptimizer.__init__
 * (wrappers.py:67) sets `self.__class__ = type("Fabric" + name, (self.__class__,
 * optimizer.__class__), {})`, which Python refuses for a class that cannot be
 * subclassed, or for one whose instances are laid out otherwise than a plain
 * object's. A class this table does not list (a script's object, a module)
 * passes there, as in Python. Under XLAStrategy `_move_model_to_device` reads
 * `optimizer.param_groups` first. */
static int unwrappable_optimizer(const fsF_fabric *f, const fsF_optim *const *opts, size_t nopts,
                                 int before_move, fsF_issues *iss) {
  static const char *const no_base[] = {"NoneType", "bool", "range", "function", "builtin_function_or_method",
                                        "method", "slice", "ellipsis"};
  static const char *const other_layout[] = {"int", "float", "str", "list", "tuple", "dict", "set", "type",
                                             "Tensor"};
  fsF_cls cls = f->cfg->cls;
  if (cls == FSF_FSDP || cls == FSF_DEEPSPEED || cls == FSF_XLA_FSDP || before_move != (cls == FSF_XLA))
    return 0;
  for (size_t i = 0; i < nopts; i++) {
    const char *t = opts[i]->foreign;
    if (!t) continue;
    if (cls == FSF_XLA)
      return fsF_at(iss, "optimizers", (int)i, fsF_fail(iss, "R129", H_OPTIMIZER_OBJECT,
                    "'%s' object has no attribute 'param_groups'", t));
    for (size_t k = 0; k < sizeof no_base / sizeof *no_base; k++)
      if (!strcmp(t, no_base[k]))
        return fsF_at(iss, "optimizers", (int)i, fsF_fail(iss, "R129", H_OPTIMIZER_OBJECT,
                      "type '%s' is not an acceptable base type", t));
    for (size_t k = 0; k < sizeof other_layout / sizeof *other_layout; k++)
      if (!strcmp(t, other_layout[k]))
        return fsF_at(iss, "optimizers", (int)i, fsF_fail(iss, "R129", H_OPTIMIZER_OBJECT,
                      "__class__ assignment: 'Fabric%s' object layout differs from '_FabricOptimizer'", t));
  }
  return 0;
}

int fsF_check_setup(const fsF_fabric *f, const fsF_model *m,
                    const fsF_optim *const *opts, size_t nopts, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  if (launched(f, iss)) return -1;
  if (m->wrapped)
    return fsF_at(iss, "module", 0, fsF_fail(iss, "R22", "use the model returned by the first setup; do not set it up again",
                "A model should be passed only once to the `setup` method."));
  int meta_opt = 0, first_meta = -1;
  for (size_t i = 0; i < nopts; i++) {
    if (opts[i]->wrapped)
      return fsF_at(iss, "optimizers", (int)i, fsF_fail(iss, "R23", "pass the raw optimizer only once",
                  "An optimizer should be passed only once to the `setup` method."));
    meta_opt |= opts[i]->meta_params;
    if (opts[i]->meta_params && first_meta < 0) first_meta = (int)i;
  }
  if (c->cls == FSF_FSDP && foreign_optimizer(opts, nopts, iss)) return -1;
  if (c->cls == FSF_FSDP && meta_opt)
    return fsF_at(iss, "optimizers", first_meta, fsF_fail(iss, "R36", H_SEPARATE,
                "The optimizer has references to the model's meta-device parameters. Materializing them is is currently not supported unless you to set up the model and optimizer(s) separately. Create and set up the model first through `model = fabric.setup_module(model)`. Then create the optimizer and set it up: `optimizer = fabric.setup_optimizers(optimizer)`."));
  if (fsF_plugin_convert_module(f, m, iss) || move_to_device(f, m, iss) ||
      unwrappable_optimizer(f, opts, nopts, 1, iss))
    return -1;
  if (c->cls == FSF_DEEPSPEED && nopts >= 2)
    return fsF_at(iss, "optimizers", 1, fsF_fail(iss, "R31", "set up one model with one optimizer per `setup` call",
                "Currently only one optimizer is supported with DeepSpeed. Got %zu optimizers instead.", nopts));
  if (c->cls == FSF_FSDP && !c->use_orig_params && nopts)
    return fsF_at(iss, "optimizers", 0, fsF_fail(iss, "R32", H_SEPARATE,
                "You set `FSDPStrategy(use_orig_params=False)` but this is not supported when setting the model and optimizer up jointly. Either set it to `True` or set the objects up in this order: Create the model, call `setup_module`, create the optimizer, call `setup_optimizer`."));
  if (c->cls == FSF_XLA_FSDP && nopts)
    return fsF_at(iss, "optimizers", 0, fsF_fail(iss, "R34", H_SEPARATE,
                "The `XLAFSDPStrategy` does not support the joint setup of module and optimizer(s). Please do it in this order: Create the model, call `setup_module`, create the optimizer, call `setup_optimizer`."));
  if (fsF_xla_fsdp_setup(f, iss)) return -1;
  wrap_warnings(f, m, iss);
  fsdp_true_half(f, iss);
  if (c->cls == FSF_MP && meta_opt)
    fsF_warn(iss, "meta-optimizer", H_SEPARATE,
         "the optimizer references the model's meta-device parameters; `ModelParallelStrategy` materializes the model into new parameters at setup and the optimizer keeps the old meta ones, so it will update nothing (Fabric raises no error here)");
  return unwrappable_optimizer(f, opts, nopts, 0, iss);
}

int fsF_check_setup_module(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  if (launched(f, iss)) return -1;
  if (m->wrapped)
    return fsF_at(iss, "module", 0, fsF_fail(iss, "R24", "use the model returned by the first `setup_module`",
                "A model should be passed only once to the `setup_module` method."));
  if (fsF_plugin_convert_module(f, m, iss) || move_to_device(f, m, iss)) return -1;
  if (fsF_xla_fsdp_setup(f, iss)) return -1;
  wrap_warnings(f, m, iss);
  fsdp_true_half(f, iss);
  return 0;
}

int fsF_check_setup_optimizers(const fsF_fabric *f, const fsF_optim *const *opts,
                               size_t nopts, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  if (launched(f, iss)) return -1;
  if (!c->setup_optimizers_allowed)
    return fsF_fail(iss, "R25", "set up the model and optimizer together: `model, optimizer = fabric.setup(model, optimizer)`",
                "The `%s` requires the model and optimizer(s) to be set up jointly through `.setup(model, optimizer, ...)`.",
                fsF_cls_name(c->cls));
  if (!nopts)
    return fsF_at(iss, FSF_ARG_PARENS, 0, fsF_fail(iss, "R26", "pass the optimizer: `fabric.setup_optimizers(optimizer)`",
                "`setup_optimizers` requires at least one optimizer as input."));
  for (size_t i = 0; i < nopts; i++)
    if (opts[i]->wrapped)
      return fsF_at(iss, "optimizers", (int)i, fsF_fail(iss, "R27", "keep the optimizer returned by the first setup",
                  "An optimizer should be passed only once to the `setup_optimizers` method."));
  if (foreign_optimizer(opts, nopts, iss)) return -1;
  for (size_t i = 0; i < nopts; i++)
    if (opts[i]->meta_params)
      return fsF_at(iss, "optimizers", (int)i, fsF_fail(iss, "R37", "create the optimizer from `model.parameters()` after `model = fabric.setup_module(model)`",
                  "The optimizer has references to the model's meta-device parameters. Materializing them is is currently not supported. Create the optimizer after setting up the model, then call `fabric.setup_optimizers(optimizer)`."));
  for (size_t i = 0; i < nopts; i++) {
    if (c->cls == FSF_FSDP && !c->use_orig_params && !opts[i]->fsdp_flat)
      return fsF_at(iss, "optimizers", (int)i, fsF_fail(iss, "R33", "create the optimizer after `model = fabric.setup_module(model)`, from the returned model's parameters",
                  "The optimizer does not seem to reference any FSDP parameters. HINT: Make sure to create the optimizer after setting up the model."));
    if (c->cls == FSF_XLA_FSDP && !opts[i]->xla_sharded)
      return fsF_at(iss, "optimizers", (int)i, fsF_fail(iss, "R35", "create the optimizer after `model = fabric.setup_module(model)`, from the returned model's parameters",
                  "The optimizer does not seem to reference any XLAFSDP parameters. HINT: Make sure to create the optimizer after setting up the model."));
  }
  return 0;
}

int fsF_check_setup_dataloaders(const fsF_fabric *f, const fsF_loader *const *dls,
                                size_t n, fsF_issues *iss) {
  if (launched(f, iss)) return -1;
  if (!n)
    return fsF_at(iss, FSF_ARG_PARENS, 0, fsF_fail(iss, "R28", "pass the loader: `fabric.setup_dataloaders(loader)`",
                "`setup_dataloaders` requires at least one dataloader as input."));
  for (size_t i = 0; i < n; i++)
    if (dls[i]->wrapped)
      return fsF_at(iss, "dataloaders", (int)i, fsF_fail(iss, "R29", "set each dataloader up once",
                  "A dataloader should be passed only once to the `setup_dataloaders` method."));
  for (size_t i = 0; i < n; i++)
    if (!dls[i]->is_dataloader)
      return fsF_at(iss, "dataloaders", (int)i, fsF_fail(iss, "R30", "wrap it first: `DataLoader(dataset, batch_size=...)`",
                  "Only PyTorch DataLoader are currently supported in `setup_dataloaders`."));
  return 0;
}

int fsF_check_backward(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  if (m && !m->wrapped)
    return fsF_fail(iss, "R41", "pass the model returned by `fabric.setup`",
                "'%s' object has no attribute '_forward_module'", m->class_name);
  if (f->cfg->cls == FSF_DEEPSPEED && !m) {
    if (f->models_setup == 0)
      return fsF_fail(iss, "R39", "set up the model first: `model, optimizer = fabric.setup(model, optimizer)`",
                  "No models were set up for backward. Did you forget to call `fabric.setup()`?");
    if (f->models_setup > 1)
      return fsF_fail(iss, "R40", "name the model: `fabric.backward(loss, model=model)`",
                  "When using multiple models + deepspeed, please provide the model used to perform the optimization: `self.backward(loss, model=model)`");
  }
  return 0;
}

int fsF_check_tensor_backward(const fsF_fabric *f, fsF_issues *iss) {
  if (f->cfg->fabric_backward_required)
    return fsF_fail(iss, "R42", "call `fabric.backward(loss)` instead",
                "The current strategy and precision selection requires you to call `fabric.backward(loss)` instead of `loss.backward()`.");
  return 0;
}

int fsF_check_clip_gradients(const fsF_fabric *f, const fsF_model *m,
                             int has_clip_val, int has_max_norm, fsF_issues *iss) {
  static const char *const H_R45 = "remove the call and set `gradient_clipping` in the DeepSpeed config";
  static const char *const R45 = "DeepSpeed handles gradient clipping automatically within the optimizer. Make sure to set the `gradient_clipping` value in your Config.";
  fsF_cls c = f->cfg->cls;
  if (has_clip_val && has_max_norm)
    return fsF_at(iss, "max_norm", 0, fsF_fail(iss, "R43", "pass only one of `clip_val` and `max_norm`",
                "Only one of `clip_val` or `max_norm` can be set as this specifies the underlying clipping algorithm!"));
  if (has_clip_val) {
    if (c == FSF_DEEPSPEED) return fsF_fail(iss, "R45", H_R45, "%s", R45);
    if (c == FSF_XLA_FSDP)
      return fsF_fail(iss, "R46", "clip by norm instead: `max_norm=1.0`",
                  "XLA's FSDP strategy does not support to clip gradients by value. Consider clipping by norm instead or choose another strategy!");
    return 0;
  }
  if (has_max_norm) {
    if (c == FSF_DEEPSPEED) return fsF_fail(iss, "R45", H_R45, "%s", R45);
    if (c == FSF_FSDP && !(m->wrapped && m->fsdp_root))
      return fsF_fail(iss, "R47", "pass the model returned by `fabric.setup`",
                  "Gradient clipping with FSDP is only possible if the module passed to `%s.clip_gradients_norm` is wrapped in `FullyShardedDataParallel`. Got: %s.",
                  fsF_cls_name(c), m->class_name);
    return 0;
  }
  return fsF_at(iss, FSF_ARG_PARENS, 0, fsF_fail(iss, "R44", "pass `max_norm=` (or `clip_val=`)",
              "You have to specify either `clip_val` or `max_norm` to do gradient clipping!"));
}

int fsF_check_no_backward_sync(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  if (!m->wrapped)
    return fsF_fail(iss, "R48", "pass the model returned by `fabric.setup`",
                "You need to set up the model first before you can call `fabric.no_backward_sync()`: `model = fabric.setup(model, ...)`");
  if (f->cfg->no_backward_sync == FSF_NBS_WARN)
    fsF_warn(iss, "W5", "remove `fabric.no_backward_sync(...)`",
         "The `%s` does not support skipping the gradient synchronization. Remove `.no_backward_sync()` from your code or choose a different strategy.",
         fsF_cls_name(f->cfg->cls));
  return 0;
}

int fsF_check_runnable(const fsF_config *cfg, fsF_issues *iss) {
  static const char help[] = "the check understands it, but this runtime does not run it yet";
  if (fsF_check_precision_runs(cfg, iss) < 0) return -1; /* R70: a precision this runtime does not run */
  /* the ranks are processes forked at launch() that each continue the
   * script (popen's model); spawn and fork run only launch's function in
   * them and the rest of the script once, in the parent */
  if (cfg->launcher == FSF_LAUNCH_SPAWN)
    return fsF_fail(iss, "unsupported", help,
                    "the \"spawn\" start method (strategy=\"ddp_spawn\") is not supported at run time yet; "
                    "strategy=\"ddp\" runs the same ranks with the \"popen\" start method");
  if (cfg->launcher == FSF_LAUNCH_FORK)
    return fsF_fail(iss, "unsupported", help,
                    "the \"fork\" start method (strategy=\"ddp_fork\" or \"ddp_notebook\") is not supported "
                    "at run time yet; strategy=\"ddp\" runs the same ranks with the \"popen\" start method");
  bool multi = (cfg->cls == FSF_DDP || cfg->cls == FSF_FSDP) && cfg->launcher == FSF_LAUNCH_POPEN;
  if ((cfg->cls != FSF_SINGLE && !multi) || !(cfg->accel == FSF_CPU || cfg->accel == FSF_CUDA))
    return fsF_fail(iss, "unsupported", help,
                    "this build runs the single-device, DDP (popen) and FSDP strategies, on cpu or cuda; "
                    "the script resolves to %s on %s (`fabricscript check` checks it)",
                    fsF_cls_name(cfg->cls), fsF_accel_name(cfg->accel));
  if (cfg->strategy_precision) /* raisesD: the precision comes from Fabric(precision=) here */
    return fsF_fail(iss, "unsupported", "pass the precision by name: `Fabric(precision=...)`",
                    "a strategy's own `precision=` plugin is not supported at run time yet; "
                    "Fabric(precision=...) runs the precision by name");
  if (cfg->parallel_devices) /* raisesD: the ranks come from devices= here */
    return fsF_fail(iss, "unsupported", "pass `devices=` to Fabric instead",
                    "a strategy's `parallel_devices=` is not supported at run time yet; "
                    "Fabric(devices=N) runs N ranks on the accelerator");
#ifndef FS_HAVE_GLOO
  if (cfg->accel == FSF_CPU && cfg->num_nodes > 1)
    return fsF_fail(iss, "unsupported", "install libgloo-dev and g++ and rebuild, or run on one node",
                    "accelerator=\"cpu\" with num_nodes=%d runs its ranks over Gloo, which this build "
                    "lacks (configure found no libgloo-dev)", cfg->num_nodes);
#endif
  return 0;
}

/* R94 (deepspeed.py, _validate_device_index_selection at setup_environment):
 * DeepSpeed takes a rank's GPU from its local rank, so the devices must be
 * the first ones, in order. */
static int deepspeed_device_ids(const fsF_config *c, fsF_issues *iss) {
  int in_order = 1;
  for (int i = 0; i < c->devices; i++) in_order &= c->device_ids[i] == i;
  if (in_order) return 0;
  fsV_buf ids = {0}, env = {0};
  for (int i = 0; i < c->devices; i++) {
    fsV_buf_printf(&ids, "%s%d", i ? ", " : "", c->device_ids[i]);
    fsV_buf_printf(&env, "%s%d", i ? "," : "", c->device_ids[i]);
  }
  char *is = fsF_buf_take(&ids), *es = fsF_buf_take(&env);
  fsF_fail(iss, "R94", "select the GPUs with CUDA_VISIBLE_DEVICES and pass `devices=N`",
           "The selected device indices [%s] don't match the local rank values of processes. If you need to select GPUs at a specific index, set the `CUDA_VISIBLE_DEVICES` environment variable instead. For example: `CUDA_VISIBLE_DEVICES=%s`.",
           is, es);
  free(is);
  free(es);
  return -1;
}

int fsF_check_launch(fsF_fabric *f, fsF_fn kind, const char *str_of,
                     const char *fn_name, int fn_nparams, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  if (c->under_cli)
    return fsF_fail(iss, "R20", "remove `fabric.launch()`: the CLI already created the processes",
                "This script was launched through the CLI, and processes have already been created. Calling  `.launch()` again is not allowed.");
  if (kind == FSF_FN_NOT_CALLABLE)
    return fsF_at(iss, "function", 0, fsF_fail(iss, "R18", "pass the function itself: `.launch(train)`",
                "`Fabric.launch(...)` needs to be a callable, but got %s. HINT: do `.launch(your_fn)` instead of `.launch(your_fn())`",
                str_of));
  /* A fixed address: Fabric prints the function object's, which varies. */
  if (kind == FSF_FN_CALLABLE && fn_nparams == 0)
    return fsF_fail(iss, "R19", "give the function a parameter: `def train(fabric):`",
                "`Fabric.launch(function=<function %s at 0x7f0000000000>)` needs to take at least one argument. The launcher will pass in the `Fabric` object so you can use it inside the function.",
                fn_name);
  if (kind == FSF_FN_NONE && c->launch_needs_fn)
    return fsF_fail(iss, "R17", "put the training code in `def train(fabric):` and call `fabric.launch(train)`",
                "To spawn processes with the `%s` strategy, `.launch()` needs to be called with a function that contains the code to launch in processes.",
                fsF_cls_name(c->cls));
  f->launched = 1;
  if (c->cls == FSF_DEEPSPEED && c->accel != FSF_CUDA)
    return fsF_fail(iss, "R21", "use `accelerator=\"cuda\"` with DeepSpeed",
                "The DeepSpeed strategy is only supported on CUDA GPUs but `%s` is used.", fsF_accel_classes[c->accel]);
  if (c->cls == FSF_DEEPSPEED && deepspeed_device_ids(c, iss)) return -1;
  if (c->cls == FSF_MP && (int64_t)c->mp_dp_size * c->mp_tp_size != c->world_size)
    return fsF_fail(iss, "R98", "make data_parallel_size x tensor_parallel_size equal num_nodes x devices (or leave both \"auto\")",
                    "The sizes `data_parallel_size=%d` and `tensor_parallel_size=%d` multiplied should equal the world size (%d).",
                    c->mp_dp_size, c->mp_tp_size, c->world_size);
  if ((c->cls == FSF_XLA || c->cls == FSF_XLA_FSDP) && c->devices == 1)
    return fsF_fail(iss, "R67", "use all devices, or `Fabric(accelerator=\"tpu\", devices=1)`",
                "The %s does not support running on a single device with the PjRT runtime. Try using all devices or the `SingleDeviceXLAStrategy` strategy",
                fsF_cls_name(c->cls));
  return 0;
}

int fsF_check_init_module(const fsF_fabric *f, int empty_init, fsF_issues *iss) {
  if (launched(f, iss)) return -1;
  if (f->cfg->cls == FSF_DEEPSPEED && f->cfg->zero_stage == 3 && empty_init == 0)
    return fsF_fail(iss, "R38", "use `fabric.init_module()` (or `empty_init=True`)",
                "`empty_init=False` is not a valid choice with `DeepSpeedStrategy` when ZeRO stage 3 is enabled.");
  if (fsF_plugin_init_module(f, iss)) return -1;
  fsdp_true_half(f, iss);
  return 0;
}

int fsF_check_collective(const fsF_fabric *f, fsF_issues *iss) { return launched(f, iss); }

/* raisesD: fabric.py's sharded_model(): the deprecation first, then the launch. */
int fsF_check_sharded_model(const fsF_fabric *f, fsF_issues *iss) {
  fsF_warn(iss, "W6", "use `fabric.init_module()`",
           "`Fabric.sharded_model()` is deprecated in favor of `Fabric.init_module()`.");
  return launched(f, iss);
}

int fsF_check_device(const fsF_fabric *f, fsF_issues *iss) {
  if ((f->cfg->cls == FSF_XLA || f->cfg->cls == FSF_XLA_FSDP) && !f->launched)
    return fsF_fail(iss, "R66", "use the device inside the function passed to `fabric.launch(fn)`",
                "Accessing the XLA device before processes have spawned is not allowed.");
  return 0;
}

/* Set-up models in a checkpoint state that the strategy shards. */
static int count_sharded(const fsF_fabric *f, const fsF_entry *st, size_t n) {
  int k = 0;
  for (size_t i = 0; i < n; i++) {
    const fsF_model *m = st[i].kind == FSF_S_MODEL ? st[i].model : NULL;
    if (!m) continue;
    if (f->cfg->cls == FSF_FSDP) k += (m->wrapped && m->fsdp_root) || m->has_fsdp_submodules;
    else k += m->wrapped;
  }
  return k;
}


/* fabric_int.h: one strategy's "no model" / "several models" in a checkpoint state */
int fsF_state_models(int k, int saving, const char *none_id, const char *none_help, const char *kind,
                     const char *many_id, const char *many_fmt, fsF_issues *iss) {
  const char *verb = saving ? "save" : "load";
  if (k == 0)
    return fsF_fail(iss, none_id, none_help,
                "Could not find a %s model in the provided checkpoint state. Please provide the model as part of the state like so: `%s_checkpoint(..., state={'model': model, ...})`. Make sure you set up the model (and optimizers if any) through the strategy before %s the checkpoint.",
                kind, verb, saving ? "saving" : "loading");
  if (k > 1) return fsF_fail(iss, many_id, FSF_H_ONE, many_fmt, saving ? "Saving" : "Loading", verb, verb);
  return 0;
}

/* R61/R62/R65 for save (saving=1) and load. */
static int sharded_state(const fsF_fabric *f, const fsF_entry *st, size_t n, int saving,
                         fsF_issues *iss) {
  fsF_cls c = f->cfg->cls;
  if (c == FSF_FSDP)
    return fsF_state_models(count_sharded(f, st, n), saving, "R61", FSF_H_STATE, "FSDP", "R65",
                "Found multiple FSDP models in the given state. %s checkpoints with FSDP is currently limited to a single model per checkpoint. To %s multiple models, call the %s method for each model separately with a different path.",
                iss);
  if (c == FSF_DEEPSPEED)
    return fsF_state_models(count_sharded(f, st, n), saving, "R62", FSF_H_STATE, "DeepSpeed", "R65", saving
                ? "Found multiple DeepSpeed engine modules in the given state. Saving checkpoints with DeepSpeed is currently limited to a single model per checkpoint. To save multiple models, call the save method for each model separately with a different path."
                : "Found multiple DeepSpeed engine modules in the given state. Saving and loading checkpoints with DeepSpeed is currently limited to a single model per checkpoint. To load multiple model states, call the load method for each model checkpoint separately.",
                iss);
  return 0;
}

static void sb_key_set(fsV_buf *b, const char *const *keys, size_t n) {
  if (!n) { fsV_buf_printf(b, "set()"); return; }
  fsV_buf_printf(b, "{");
  for (size_t i = 0; i < n; i++) { if (i) fsV_buf_printf(b, ", "); sb_repr_str(b, keys[i]); }
  fsV_buf_printf(b, "}");
}

/* R96, R104 (model_parallel.py, _save_checkpoint/_load_checkpoint): the
 * state must hold one model whose parameters parallelize_fn distributed
 * (DTensors: fsF_model.dtensor_params). */
static int distributed_model(const fsF_entry *st, size_t n, int saving, fsF_issues *iss) {
  int k = 0;
  for (size_t i = 0; i < n; i++) k += st[i].kind == FSF_S_MODEL && st[i].model->dtensor_params;
  return fsF_state_models(k, saving, "R96", "put the set-up model in the state, and make `parallelize_fn` distribute its parameters (fully_shard, parallelize_module: not in FabricScript yet)",
                          "distributed", "R104",
                          "Found multiple distributed models in the given state. %s distributed checkpoints is currently limited to a single model per checkpoint. To %s multiple models, call the %s method for each model separately with a different path.",
                          iss);
}

int fsF_check_save(const fsF_fabric *f, const fsF_entry *st, size_t n,
                   const fsF_filter *flt, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  int has_filter = flt && flt->kind != FSF_UNSET && flt->kind != FSF_NONE;
  if (has_filter) {
    if (flt->kind != FSF_LIST)
      return fsF_at(iss, "filter", 0, fsF_fail(iss, "R55", "pass a dict of callables: `filter={\"model\": keep}`",
                  "Filter should be a dictionary, given %s", flt->repr));
    const char **missing = fsA_xrealloc(NULL, (flt->n + 1) * sizeof *missing);
    const char **keys = fsA_xrealloc(NULL, (n + 1) * sizeof *keys);
    size_t nm = 0;
    for (size_t i = 0; i < n; i++) keys[i] = st[i].key;
    for (size_t i = 0; i < flt->n; i++) {
      size_t j = 0;
      while (j < n && strcmp(st[j].key, flt->keys[i])) j++;
      if (j == n) missing[nm++] = flt->keys[i];
    }
    int rc = 0;
    if (nm) {
      fsV_buf a = {0}, b = {0};
      sb_key_set(&a, missing, nm);
      sb_key_set(&b, keys, n);
      char *miss = fsF_buf_take(&a), *have = fsF_buf_take(&b);
      rc = fsF_at(iss, "filter", 0, fsF_fail(iss, "R56", "filter only keys of the state", "The filter keys %s are not present in the state keys %s.",
                miss, have));
      free(miss); free(have);
    }
    free(missing); free(keys);
    if (rc) return rc;
    for (size_t i = 0; i < flt->n; i++) {
      if (flt->callable[i]) continue;
      char *k = fsF_repr_str(flt->keys[i]);
      fsF_at(iss, "filter", 0, fsF_fail(iss, "R57", "map each key to a function `(key, value) -> bool`",
           "Expected `fabric.save(filter=...)` for key %s to be a callable, given %s", k, flt->vrepr[i]));
      free(k);
      return -1;
    }
  }
  if (c->cls == FSF_DEEPSPEED) {
    if (has_filter)
      return fsF_fail(iss, "R58", "drop `filter=` under DeepSpeed",
                  "`DeepSpeedStrategy.save_checkpoint(..., filter=...)` is not supported because `DeepSpeedStrategy` manages the state serialization internally.");
    if (sharded_state(f, st, n, 1, iss)) return -1;
    static const char *const internal[] = {
      "module", "buffer_names", "optimizer", "param_shapes", "lr_scheduler",
      "sparse_tensor_module_names", "skipped_steps", "global_steps", "global_samples",
      "dp_world_size", "mp_world_size", "ds_config", "ds_version"};
    fsV_buf b = {0};
    for (size_t i = 0; i < n; i++) {
      if ((st[i].kind == FSF_S_MODEL && st[i].model->wrapped) ||
          (st[i].kind == FSF_S_OPTIM && st[i].optim->wrapped)) continue;
      for (size_t j = 0; j < sizeof internal / sizeof internal[0]; j++)
        if (!strcmp(st[i].key, internal[j])) fsV_buf_printf(&b, "%s%s", b.n ? ", " : "", st[i].key);
    }
    int collide = b.n > 0;
    char *keys = fsF_buf_take(&b);
    if (collide)
      fsF_warn(iss, "W13", "rename those keys",
           "Your state has keys that collide with DeepSpeed's internal engine state. This could result in your values being overwritten by DeepSpeed. Consider changing the name of these keys to something else: %s",
           keys);
    free(keys);
  }
  if (c->cls == FSF_FSDP) {
    if (has_filter && c->state_dict_sharded)
      return fsF_fail(iss, "R59", "use `FSDPStrategy(state_dict_type=\"full\")` or drop `filter=`",
                  "FSDP doesn't support loading sharded filtered checkpoints, so saving them is disabled.");
    if (sharded_state(f, st, n, 1, iss)) return -1;
    if (c->state_dict_unknown[0])
      return fsF_fail(iss, "R90", "use `FSDPStrategy(state_dict_type=\"sharded\")` (the default) or `\"full\"`",
                      "Unknown state_dict_type: %s", c->state_dict_unknown);
  }
  if (fsF_xla_fsdp_save(f, st, n, iss)) return -1;
  if (c->cls == FSF_MP && has_filter && c->save_distributed)
    return fsF_fail(iss, "R60", "use `ModelParallelStrategy(..., save_distributed_checkpoint=False)` or drop `filter=`",
                "ModelParallelStrategy doesn't support loading distributed filtered checkpoints, so saving them is disabled.");
  if (c->cls == FSF_MP && distributed_model(st, n, 1, iss)) return -1;
  return launched(f, iss);
}

int fsF_check_load(const fsF_fabric *f, const fsF_entry *st, size_t n,
                   int state_is_none, fsF_issues *iss) {
  fsF_cls c = f->cfg->cls;
  if ((c == FSF_FSDP || c == FSF_DEEPSPEED || c == FSF_MP) && (state_is_none || !n))
    return fsF_fail(iss, "R63", "pass the objects to restore: `fabric.load(path, {\"model\": model, \"optimizer\": optimizer})`",
                "Got %s.load_checkpoint(..., state=%s) but a state with at least  a model instance to reload is required. Pass it in like so: %s.load_checkpoint(..., state={'model': model, ...})",
                fsF_cls_name(c), state_is_none ? "None" : "{}", fsF_cls_name(c));
  if (fsF_xla_fsdp_load(f, st, n, state_is_none, iss)) return -1;
  if (sharded_state(f, st, n, 0, iss)) return -1;
  if (c == FSF_MP && distributed_model(st, n, 0, iss)) return -1;
  return launched(f, iss);
}

int fsF_check_load_raw(const fsF_fabric *f, int obj_is_optimizer, fsF_issues *iss) {
  if (fsF_xla_fsdp_load_raw(f, iss)) return -1;
  if (f->cfg->cls == FSF_FSDP && obj_is_optimizer)
    return fsF_fail(iss, "R64", "save and load the optimizer together with the model through `fabric.save`/`fabric.load`",
                "Loading a single optimizer object from a checkpoint is not supported yet with the FSDP strategy.");
  if (f->cfg->cls == FSF_MP && obj_is_optimizer)
    return fsF_fail(iss, "R97", "save and load the optimizer together with the model through `fabric.save`/`fabric.load`",
                "Loading a single optimizer object from a checkpoint is not supported yet with ModelParallelStrategy.");
  return 0;
}

/* R50 (wrappers.py:219): a method of the original module reached through
 * the _FabricModule, other than forward, the LightningModule step methods
 * and those marked with mark_forward_method, runs with a forward hook on
 * every module of the original; a module called during it raises once the
 * method returns. Only where the strategy wrapped the module in another
 * (DP, DDP, FSDP, DeepSpeed, XLAFSDP): elsewhere the two are one module and
 * nothing is tracked. The caller knows that a module was called. */
int fsF_check_outside_call(const fsF_fabric *f, const char *class_name, const char *method, fsF_issues *iss) {
  static const char *const steps[] = {"forward", "training_step", "validation_step", "test_step", "predict_step"};
  fsF_cls c = f->cfg->cls;
  if (c != FSF_DP && c != FSF_DDP && c != FSF_FSDP && c != FSF_DEEPSPEED && c != FSF_XLA_FSDP) return 0;
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
    if (!strcmp(method, steps[i])) return 0;
  return fsF_fail(iss, "R50", "call the model itself (its forward), or mark the method after setup: `model.mark_forward_method(\"NAME\")`",
                  "You are calling the method `%s.%s()` from outside the model. To avoid issues with the currently selected strategy, explicitly mark it as a forward method with `fabric_model.mark_forward_method('%s')` after `fabric.setup()`.",
                  class_name, method, method);
}

int fsF_check_mark_forward_method(const fsF_model *m, fsF_vkind x_kind,
                                  const char *name, const char *type_name,
                                  int has_method, fsF_issues *iss) {
  static const char *const H = "mark a method of the set-up model by name: `model.mark_forward_method(\"generate\")`";
  if (!m->wrapped)
    return fsF_fail(iss, "R53", "call it on the model returned by `fabric.setup`",
                "'%s' object has no attribute 'mark_forward_method'", m->class_name);
  if (x_kind != FSF_STR)
    return fsF_fail(iss, "R51", H, "Expected a method or a string, but got: %s", type_name);
  if (!strcmp(name, "forward"))
    return fsF_fail(iss, "R52", "remove the call: `forward` is always a forward method",
                "You cannot mark the forward method itself as a forward method.");
  if (!has_method)
    return fsF_fail(iss, "R53", H,
                "You marked '%s' as a forward method, but `%s.%s` does not exist or is not a method.",
                name, m->class_name, name);
  return 0;
}

int fsF_check_seed(int64_t seed, fsF_issues *iss) {
  if (seed >= 0 && seed <= 4294967295LL) return 0;
  return fsF_fail(iss, "R75", "pick a seed from 0 to 4294967295",
                  "%lld is not in bounds, numpy accepts from 0 to 4294967295", (long long)seed);
}

/* raisesD: utilities/data.py's suggested_max_num_workers (R89). */
int fsF_check_max_num_workers(int64_t local_world_size, fsF_issues *iss) {
  if (local_world_size >= 1) return 0;
  return fsF_fail(iss, "R89", "pass the number of processes on this machine: `fabric.world_size // num_nodes`, at least 1",
                  "`local_world_size` should be >= 1, got %lld.", (long long)local_world_size);
}

int fsF_check_distributed_sampler(const fsF_fabric *f, const fsF_loader *l, fsF_issues *iss) {
  fsF_cls c = f->cfg->cls; /* the strategies without distributed_sampler_kwargs */
  if (c == FSF_SINGLE || c == FSF_SINGLE_XLA || c == FSF_DP || !l->foreign_batch_sampler) return 0;
  return fsF_fail(iss, "R77", "use `BatchSampler(sampler, batch_size, drop_last)`, or `fabric.setup_dataloaders(loader, use_distributed_sampler=False)` and shard the batches yourself",
                  " Lightning can't inject a (distributed) sampler into your batch sampler, because it doesn't subclass PyTorch's `BatchSampler`. To mitigate this, either follow the API of `BatchSampler` or set`.setup_dataloaders(..., use_distributed_sampler=False)`. If you choose the latter, you will be responsible for handling the distributed sampling within your batch sampler.");
}

/* ---- strategies/: the strategy objects' own checks (R90-R109, W20-W24) ---- */

int fsF_check_fsdp_ctor(const fsF_fsdp_ctor *a, fsF_issues *iss) {
  if (a->activation_checkpointing && a->activation_checkpointing_policy)
    return fsF_fail(iss, "R91", "drop `activation_checkpointing=` and keep `activation_checkpointing_policy=`",
                    "You cannot set both `activation_checkpointing` and `activation_checkpointing_policy`. Use the latter.");
  if (a->activation_checkpointing && a->ac_str && a->ac_set_str)
    fsF_warn(iss, "W20", "pass the layer classes as a set: `activation_checkpointing_policy={Block}`",
             "`FSDPStrategy(activation_checkpointing=%s)` is deprecated, use `FSDPStrategy(activation_checkpointing_policy=%s)` instead.",
             a->ac_str, a->ac_set_str);
  /* Fabric's text has no space after the first sentence */
  if (a->process_group && a->device_mesh)
    return fsF_fail(iss, "R92", "pass either `process_group=` or `device_mesh=`",
                    "The arguments `FSDPStrategy(process_group=..., device_mesh=...)` are mutually exclusive.Pass only one of them.");
  /* ShardingStrategy[name.upper()]: HYBRID_SHARD and _HYBRID_SHARD_ZERO2 are the hybrid ones */
  const char *name = a->sharding_strategy;
  int hybrid = name && (!strcasecmp(name, "HYBRID_SHARD") || !strcasecmp(name, "_HYBRID_SHARD_ZERO2"));
  if (hybrid && !a->auto_wrap_policy && !a->process_group && !a->device_mesh)
    return fsF_fail(iss, "R93", "pass `auto_wrap_policy={Block}` (the layer classes that become FSDP units) or `device_mesh=(replicas, shards)`",
                    "The hybrid sharding strategy requires you to pass at least one of the parameters: `auto_wrap_policy`, `process_group` tuple, or `device_mesh`.");
  return 0;
}

int fsF_check_deepspeed_config(const char *path, int is_file, fsF_issues *iss) {
  if (is_file) return 0;
  return fsF_fail(iss, "R95", "pass the path of an existing JSON file (relative to the directory the script runs in), or a dict",
                  "You passed in a path to a DeepSpeed config but the path does not exist: %s", path);
}

int fsF_check_all_reduce(const fsF_fabric *f, const char *reduce_op, fsF_issues *iss) {
  if (fsF_check_collective(f, iss)) return -1;
  /* the data becomes tensors on the device (R66 before launch), then xla.py's all_reduce */
  if (fsF_check_device(f, iss)) return -1;
  fsF_cls cls = f->cfg->cls; /* xla.py and xla_fsdp.py refuse the same ops, each in its own name */
  if ((cls != FSF_XLA && cls != FSF_XLA_FSDP) || !reduce_op || !strcasecmp(reduce_op, "sum") ||
      !strcasecmp(reduce_op, "mean") || !strcasecmp(reduce_op, "avg"))
    return 0;
  return fsF_fail(iss, cls == FSF_XLA ? "R100" : "R110",
                  cls == FSF_XLA ? "use `reduce_op=\"sum\"` or `\"mean\"` under XLA"
                                 : "use `reduce_op=\"sum\"`, `\"mean\"` or `\"avg\"` under XLAFSDPStrategy",
                  "Currently, the %s only supports `sum`, `mean`, `avg` for the reduce operation, got: %s",
                  cls == FSF_XLA ? "XLAStrategy" : "XLAFSDPStrategy", reduce_op);
}

int fsF_check_checkpoint_io(fsF_cls cls, fsF_issues *iss) {
  if (cls == FSF_FSDP || cls == FSF_MP)
    return fsF_fail(iss, "R107", "save and load through `fabric.save`/`fabric.load`: the strategy writes its checkpoints itself",
                    "The `%s` does not use the `CheckpointIO` plugin interface.", fsF_cls_name(cls));
  return fsF_fail(iss, "unsupported", "save and load through `fabric.save`/`fabric.load`",
                  "`strategy.checkpoint_io` is a CheckpointIO object, which this runtime does not have");
}

int fsF_check_set_strategy_attr(fsF_cls cls, const char *name, int is_none, const char *value_str,
                                fsF_issues *iss) {
  int io = !strcmp(name, "checkpoint_io");
  if (io && (cls == FSF_FSDP || cls == FSF_MP))
    return fsF_fail(iss, "R109", "drop the assignment: the strategy writes its checkpoints itself",
                    "The `%s` does not support setting a `CheckpointIO` plugin.", fsF_cls_name(cls));
  if (io && (cls == FSF_XLA || cls == FSF_SINGLE_XLA) && !is_none) {
    if (!value_str) return 0;
    return fsF_fail(iss, "R87", "drop the assignment (XLA's strategies bring their XLACheckpointIO)",
                    "The XLA strategy can only work with the `XLACheckpointIO` plugin, found %s", value_str);
  }
  return fsF_fail(iss, "unsupported", "configure the strategy through its constructor's arguments",
                  "setting `strategy.%s` is not supported at run time", name);
}

int fsF_check_device_mesh(fsF_cls cls, int launched, fsF_issues *iss) {
  if (cls != FSF_MP)
    return fsF_fail(iss, "attr", "only ModelParallelStrategy has a device mesh", "'%s' object has no attribute 'device_mesh'",
                    fsF_cls_name(cls));
  if (launched) return 0;
  return fsF_fail(iss, "R108", "read `strategy.device_mesh` after `fabric.launch()`",
                  "Accessing the device mesh before processes have initialized is not allowed.");
}

void fsF_warn_shared_params(const fsF_param_site *s, size_t n, fsF_issues *iss) {
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < i && s[j].param != s[i].param) j++;
    if (j < i) continue; /* its group was judged at its first site */
    /* {unit: path for path in group}: the units in the order first met */
    fsV_buf paths = {0}, units = {0};
    size_t npaths = 0, nunits = 0;
    for (size_t k = i; k < n; k++) {
      if (s[k].param != s[i].param) continue;
      fsV_buf_printf(&paths, "%s`%s`", npaths++ ? ", " : "", s[k].path);
      size_t u = i;
      while (u < k && (s[u].param != s[i].param || strcmp(s[u].unit, s[k].unit))) u++;
      if (u == k) fsV_buf_printf(&units, "%s`%s`", nunits++ ? ", " : "", *s[k].unit ? s[k].unit : "<root>");
    }
    char *ps = fsV_buf_take(&paths), *us = fsV_buf_take(&units);
    if (nunits > 1 && ps && us)
      fsF_warn(iss, "W21", "tie parameters within one FSDP unit: take the class wrapping one of them out of `auto_wrap_policy`, or the tied layers into one unit",
               "The model has shared parameters (%s) that will be placed in separate FSDP units (%s) by the "
               "`auto_wrap_policy`. This will lead to errors during forward/backward due to tensor size mismatches "
               "(e.g., tied embeddings in transformer models). Consider removing the module type that wraps the "
               "shared parameter from your `auto_wrap_policy`.",
               ps, us);
    free(ps);
    free(us);
  }
}

int fsF_check_parallelized(const char *type_name, fsF_issues *iss) {
  return fsF_fail(iss, "R102", "end `parallelize_fn` with `return model`",
                  "The `parallelize_fn` must return a `nn.Module` instance, but got: %s", type_name);
}

int fsF_check_spawn_guard(const fsF_config *cfg, int guarded, fsF_issues *iss) {
  if (cfg->launcher != FSF_LAUNCH_SPAWN || guarded) return 0;
  /* dedent()'s text: it starts and ends with a newline */
  return fsF_fail(iss, "R103", "put the script's top-level code in `def main():` and call it under `if __name__ == \"__main__\":`",
                  "\nLaunching multiple processes with the 'spawn' start method requires that your script guards the main\n"
                  "function with an `if __name__ == \"__main__\"` clause. For example:\n\n"
                  "def main():\n    # Put your code here\n    ...\n\n"
                  "if __name__ == \"__main__\":\n    main()\n\n"
                  "Alternatively, you can run with `strategy=\"ddp\"` to avoid this error.\n");
}
