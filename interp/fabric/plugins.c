/* plugins.c -- Fabric's precision plugin objects (the constructors of
 * src/lightning/fabric/plugins/precision/) and XLAFSDPStrategy's own rules
 * (strategies/xla_fsdp.py): the checks each makes, in its order, with its
 * messages byte for byte. Invariant: nothing here knows the checker or the
 * runtime; both build the arguments (interp/check/api_plugins.c,
 * interp/eval/lib_plugins.c) and report what these return. fabric.c's
 * validations call the XLAFSDP hooks at the point Fabric's strategy runs
 * them. Rule ids R110-R129, W25-W29 (docs/rules.md). */
#include <stdlib.h>
#include <string.h>

#include "fabric_int.h"

/* ---- precision plugins --------------------------------------------------- */

static const char *const plugin_names[FSF_PL__COUNT] = {
  [FSF_PL_NONE] = "Precision", [FSF_PL_MIXED] = "MixedPrecision", [FSF_PL_HALF] = "HalfPrecision",
  [FSF_PL_DOUBLE] = "DoublePrecision", [FSF_PL_FSDP] = "FSDPPrecision",
  [FSF_PL_DEEPSPEED] = "DeepSpeedPrecision", [FSF_PL_XLA] = "XLAPrecision",
  [FSF_PL_BNB] = "BitsandbytesPrecision", [FSF_PL_TE] = "TransformerEnginePrecision",
  [FSF_PL_TORCH_IO] = "TorchCheckpointIO", [FSF_PL_XLA_IO] = "XLACheckpointIO",
  [FSF_PL_LIGHTNING_ENV] = "LightningEnvironment", [FSF_PL_TORCHELASTIC_ENV] = "TorchElasticEnvironment",
};

fsF_ptype fsF_plugin_type(fsF_plugin k) {
  return k == FSF_PL_TORCH_IO || k == FSF_PL_XLA_IO ? FSF_PT_CHECKPOINT_IO
       : k == FSF_PL_LIGHTNING_ENV || k == FSF_PL_TORCHELASTIC_ENV ? FSF_PT_CLUSTER_ENV : FSF_PT_PRECISION;
}

const char *fsF_plugin_name(fsF_plugin k) { return plugin_names[k]; }

fsF_plugin fsF_plugin_of(const char *class_name) {
  for (int k = FSF_PL_NONE + 1; k < FSF_PL__COUNT; k++)
    if (!strcmp(plugin_names[k], class_name)) return (fsF_plugin)k;
  return FSF_PL_NONE;
}

static const char *const H_XLA = "use a non-XLA strategy and accelerator, or pass --assume=xla";
static const char *const XLA_MISSING =
    "Requirement 'torch_xla>=1.13' not met. HINT: Try running `pip install -U 'torch_xla>=1.13'`";

/* `precision` in the plugin's _PRECISION_INPUT (a Literal of these names). */
static int one_of(const char *precision_str, const char *const *names) {
  for (; precision_str && *names; names++)
    if (!strcmp(precision_str, *names)) return 1;
  return 0;
}

int fsF_check_plugin_new(const fsF_plugin_args *p, const fsF_machine *m, fsF_issues *iss) {
  static const char *const sharded[] = {"32-true", "16-true", "bf16-true", "16-mixed", "bf16-mixed", NULL};
  static const char *const xla[] = {"32-true", "16-true", "bf16-true", NULL};
  static const char *const mixed[] = {"16-mixed", "bf16-mixed", NULL};
  static const char *const H_R117 = "pass one of the precisions the plugin lists";
  switch (p->kind) {
  case FSF_PL_MIXED:
    if (!one_of(p->precision_str, mixed))
      return fsF_fail(iss, "R115", "use `MixedPrecision(precision=\"16-mixed\" or \"bf16-mixed\", device=...)`",
                      "Passed `MixedPrecision(precision=%s)`. Precision must be '16-mixed' or 'bf16-mixed'.",
                      p->precision);
    if (p->scaler && !strcmp(p->precision_str, "bf16-mixed"))
      return fsF_fail(iss, "R116", "drop `scaler=`: bf16 needs no gradient scaling",
                      "`precision='bf16-mixed'` does not use a scaler, found %s.", p->scaler);
    return 0;
  case FSF_PL_FSDP:
    if (!one_of(p->precision_str, sharded))
      return fsF_fail(iss, "R117", H_R117,
                      "`precision=%s)` is not supported in FSDP. `precision` must be one of: ('32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed').",
                      p->precision);
    /* Fabric compares the class attribute (still "32-true" at this point),
     * not the argument: any scaler is refused, even with 16-mixed */
    if (p->scaler)
      return fsF_fail(iss, "R116", "drop `scaler=`: FSDPPrecision makes its own ShardedGradScaler for 16-mixed",
                      "`precision=%s` does not use a scaler, found %s.", p->precision, p->scaler);
    return 0;
  case FSF_PL_DEEPSPEED:
    if (!one_of(p->precision_str, sharded))
      return fsF_fail(iss, "R117", H_R117,
                      "`precision=%s)` is not supported in DeepSpeed. `precision` must be one of: ('32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed').",
                      p->precision);
    return 0;
  case FSF_PL_XLA:
    if (!m->xla) return fsF_fail(iss, "R14", H_XLA, "%s", XLA_MISSING);
    if (!one_of(p->precision_str, xla))
      return fsF_fail(iss, "R117", H_R117,
                      "`precision=%s)` is not supported in XLA. `precision` must be one of: ('32-true', '16-true', 'bf16-true').",
                      p->precision);
    return 0;
  case FSF_PL_BNB:
    if (!m->bitsandbytes)
      return fsF_fail(iss, "env", "install bitsandbytes (check with --assume=bitsandbytes) or drop the plugin",
                      "Requirement 'bitsandbytes' not met. HINT: Try running `pip install -U 'bitsandbytes'`");
    /* dtype=None is float16 for the int8 modes */
    if (p->mode && !strncmp(p->mode, "int8", 4) && p->dtype && strcmp(p->dtype, "torch.float16")) {
      char *mode = fsF_repr_str(p->mode);
      fsF_fail(iss, "R118", "use `dtype=torch.float16` with the int8 modes",
               "%s only works with `dtype=torch.float16`, but you chose `%s`", mode ? mode : p->mode, p->dtype);
      free(mode);
      return -1;
    }
    return 0;
  case FSF_PL_XLA_IO: /* io/xla_plugin.py: its constructor needs torch_xla */
    return m->xla ? 0 : fsF_fail(iss, "R14", H_XLA, "%s", XLA_MISSING);
  case FSF_PL_TE:
    if (!m->transformer_engine)
      return fsF_fail(iss, "env", "install transformer_engine (check with --assume=transformer-engine) or pick another precision",
                      "Requirement 'transformer_engine>=0.11.0' not met. HINT: Try running `pip install -U 'transformer_engine>=0.11.0'`");
    return 0;
  default:
    return 0;
  }
}

int fsF_plugin_honoured(fsF_plugin k) {
  return k == FSF_PL_NONE || k == FSF_PL_TORCH_IO || k == FSF_PL_LIGHTNING_ENV;
}

int fsF_check_plugin_runs(fsF_plugin k, fsF_issues *iss) {
  if (fsF_plugin_honoured(k)) return 0;
  if (fsF_plugin_type(k) != FSF_PT_PRECISION)
    return fsF_fail(iss, "unsupported", "the check understands it, but this runtime does not run it yet",
                    "the %s plugin is not supported at run time yet; this runtime saves with "
                    "TorchCheckpointIO's format and starts its ranks as LightningEnvironment does",
                    fsF_plugin_name(k));
  return fsF_fail(iss, "unsupported", "the check understands it, but this runtime does not run it yet",
                  "precision plugin objects (Fabric(plugins=%s(...))) are not supported at run time yet; "
                  "pass the precision by name: Fabric(precision=...)", fsF_plugin_name(k));
}

int fsF_check_clip_unscaling(const fsF_fabric *f, const fsF_optim *o, fsF_issues *iss) {
  fsF_cls c = f->cfg->cls;
  /* MixedPrecision and FSDPPrecision hold a scaler for 16-mixed (on CPU it
   * became bf16-mixed, W8); the other strategies' plugins have none */
  int scaler = f->cfg->precision == FSF_P16_MIXED &&
               (c == FSF_SINGLE || c == FSF_DP || c == FSF_DDP || c == FSF_FSDP);
  if (!scaler || !o->handles_unscaling) return 0;
  return fsF_fail(iss, "R126", "make the optimizer without `fused=True`, or use `precision=\"bf16-mixed\"`",
                  "Gradient clipping is not implemented for optimizers handling the unscaling.");
}

/* Layer classes that are one module without a Linear inside (torch's
 * MultiheadAttention holds one, a container or a script's class may). */
static int linear_free_layer(const char *cls) {
  static const char *const leaves[] = {
    "Conv1d", "Conv2d", "ConvTranspose2d", "Embedding", "LayerNorm", "RMSNorm", "GroupNorm",
    "BatchNorm1d", "BatchNorm2d", "ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "LeakyReLU", "Mish",
    "Softmax", "Dropout", "Flatten", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Upsample", NULL,
  };
  for (const char *const *l = leaves; cls && *l; l++)
    if (!strcmp(cls, *l)) return 1;
  return 0;
}

int fsF_plugin_convert_module(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  if (f->cfg->plugin != FSF_PL_BNB || !m->is_module || !linear_free_layer(m->class_name)) return 0;
  return fsF_fail(iss, "R119", "quantize a model with Linear layers, or drop the plugin",
                  "You are using the bitsandbytes precision plugin, but your model has no Linear layers. This plugin won't work for your model.");
}

int fsF_plugin_init_module(const fsF_fabric *f, fsF_issues *iss) {
  if (f->cfg->plugin != FSF_PL_BNB || !f->cfg->bnb_ignore_modules) return 0;
  return fsF_fail(iss, "R120", "create the model outside `fabric.init_module()`, or drop `ignore_modules`",
                  "Instantiating your model under the `init_module` context manager is not supported when used with `BitsandbytesPrecision(..., ignore_modules=%s)` as this may initialize the layers on-device, defeating the purpose of quantization. You can remove `ignore_modules` or remove the `init_module` context manager.",
                  f->cfg->bnb_ignore_modules);
}

int fsF_te_converts(const fsF_config *cfg) {
  return cfg->precision == FSF_PTE || cfg->precision == FSF_PTE16;
}

void fsF_te_layer(const char *name, int64_t in, int64_t out, fsF_issues *iss) {
  if (in % 8 == 0 && out % 16 == 0) return;
  char *r = fsF_repr_str(name);
  fsF_warn(iss, "W26", "pad the layer's features: in_features to a multiple of 8, out_features to a multiple of 16",
           "Support for FP8 in the linear layers with this plugin is currently limited to tensors with shapes where the dimensions are divisible by 8 and 16 respectively. The layer %s does not fit this criteria. You might want to add padding to your inputs.",
           r ? r : name);
  free(r);
}

/* raisesD: fsdp.py's precision setter (R84), from FSDPStrategy(precision=)
 * and from the connector, which hands the strategy Fabric's plugin. */
int fsF_check_fsdp_precision(const char *found, fsF_issues *iss) {
  if (!found) return 0;
  return fsF_fail(iss, "R84", "pass `FSDPPrecision(...)`, or give the precision to Fabric: `Fabric(precision=\"bf16-mixed\")`",
                  "The FSDP strategy can only work with the `FSDPPrecision` plugin, found %s", found);
}

/* ---- XLAFSDPStrategy ------------------------------------------------------ */

char *fsF_plugin_str(fsF_plugin k) {
  static const char *const modules[FSF_PL__COUNT] = {
    [FSF_PL_NONE] = "precision.precision", [FSF_PL_MIXED] = "precision.amp", [FSF_PL_HALF] = "precision.half",
    [FSF_PL_DOUBLE] = "precision.double", [FSF_PL_FSDP] = "precision.fsdp",
    [FSF_PL_DEEPSPEED] = "precision.deepspeed", [FSF_PL_XLA] = "precision.xla",
    [FSF_PL_BNB] = "precision.bitsandbytes", [FSF_PL_TE] = "precision.transformer_engine",
    [FSF_PL_TORCH_IO] = "io.torch_io", [FSF_PL_XLA_IO] = "io.xla",
    [FSF_PL_LIGHTNING_ENV] = "environments.lightning", [FSF_PL_TORCHELASTIC_ENV] = "environments.torchelastic",
  };
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<lightning.fabric.plugins.%s.%s object at 0x7f0000000000>", modules[k], plugin_names[k]);
  return fsF_buf_take(&b);
}

int fsF_check_xla_fsdp_new(const fsF_machine *m, const char *precision_str, fsF_issues *iss) {
  if (!m->xla) return fsF_fail(iss, "R14", H_XLA, "%s", XLA_MISSING);
  if (precision_str)
    return fsF_fail(iss, "R127", "pass `XLAPrecision(...)`, or give the precision to Fabric: `Fabric(precision=\"bf16-true\")`",
                    "The XLA FSDP strategy can only work with the `XLAPrecision` plugin, found %s", precision_str);
  return 0;
}

int fsF_xla_state_dict(const char *t) {
  return !strcmp(t, "sharded") ? FSF_XSD_SHARDED : !strcmp(t, "full") ? FSF_XSD_FULL : FSF_XSD_OTHER;
}

/* _activation_checkpointing_kwargs(), from setup_module's _parse_fsdp_kwargs(). */
int fsF_xla_fsdp_setup(const fsF_fabric *f, fsF_issues *iss) {
  const fsF_xla_fsdp_opts *x = &f->cfg->xla_fsdp;
  if (f->cfg->cls != FSF_XLA_FSDP || !x->policy) return 0;
  if (x->wrapper_callable)
    return fsF_fail(iss, "R121", "pass only one of `auto_wrapper_callable` and `activation_checkpointing_policy`",
                    "You cannot set both `auto_wrapper_callable` and `activation_checkpointing_policy`. Choose one");
  if (x->policy == 2 && x->policy_str)
    return fsF_fail(iss, "R122", "pass a set of layer classes: `activation_checkpointing_policy={Block}`",
                    "`activation_checkpointing_policy` must be a set, found %s. You can try defining and passing `auto_wrapper_callable` instead.",
                    x->policy_str);
  return 0;
}

/* The XLAFSDP-wrapped modules of a state: the set-up models. */
static int xla_modules(const fsF_entry *st, size_t n) {
  int k = 0;
  for (size_t i = 0; i < n; i++) k += st[i].kind == FSF_S_MODEL && st[i].model->wrapped;
  return k;
}


/* R111, R112: save (saving = 1) and load of a sharded checkpoint. */
static int one_module(const fsF_entry *st, size_t n, int saving, fsF_issues *iss) {
  return fsF_state_models(xla_modules(st, n), saving, "R111", FSF_H_STATE, "XLAFSDP", "R112",
                          "Found multiple XLAFSDP modules in the given state. %s checkpoints with FSDP is currently limited to a single model per checkpoint. To %s multiple models, call the %s method for each model separately with a different path.",
                          iss);
}

int fsF_xla_fsdp_save(const fsF_fabric *f, const fsF_entry *st, size_t n, fsF_issues *iss) {
  return f->cfg->cls == FSF_XLA_FSDP ? one_module(st, n, 1, iss) : 0;
}

/* str(Path(path) / "checkpoint"): pathlib drops empty and "." parts. */
static char *checkpoint_prefix(const char *path) {
  fsV_buf b = {0};
  if (path[0] == '/') fsV_buf_puts(&b, "/");
  for (const char *p = path; *p;) {
    size_t k = strcspn(p, "/");
    if (k && !(k == 1 && p[0] == '.')) fsV_buf_printf(&b, "%s%.*s", b.n && b.s[b.n - 1] != '/' ? "/" : "", (int)k, p);
    p += k;
    if (*p) p++;
  }
  fsV_buf_printf(&b, "%scheckpoint", b.n && b.s[b.n - 1] != '/' ? "/" : "");
  return fsF_buf_take(&b);
}

int fsF_xla_fsdp_save_full(const fsF_fabric *f, const char *path, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  if (c->cls != FSF_XLA_FSDP || c->xla_fsdp.state_dict != FSF_XSD_FULL || c->num_nodes <= 1 || !path) return 0;
  char *prefix = checkpoint_prefix(path);
  char *r = prefix ? fsF_repr_str(prefix) : NULL;
  int rc = fsF_fail(iss, "R128", "use `XLAFSDPStrategy(state_dict_type=\"sharded\")` on several hosts",
                    "Multihost setups do not have a shared filesystem, so the checkpoint shards cannot be consolidated into a single checkpoint after saving them. Please switch to `XLAFSDPStrategy(state_dict_type='sharded')`. TIP: You can consolidate them manually by getting them together into a single directory and running `python -m torch_xla.distributed.fsdp.consolidate_sharded_ckpts --ckpt_prefix %s --ckpt_suffix '_rank-*-of-*.pth' --save_path 'path/to/consolidated.ckpt'`.",
                    r ? r : "'checkpoint'");
  free(prefix);
  free(r);
  return rc;
}

int fsF_xla_fsdp_load(const fsF_fabric *f, const fsF_entry *st, size_t n, int state_is_none,
                      fsF_issues *iss) {
  const fsF_xla_fsdp_opts *x = &f->cfg->xla_fsdp;
  if (f->cfg->cls != FSF_XLA_FSDP) return 0;
  if (state_is_none || !n)
    return fsF_fail(iss, "R113", "pass the objects to restore: `fabric.load(path, {\"model\": model, \"optimizer\": optimizer})`",
                    "Got `XLAFSDPStrategy.load_checkpoint(..., state=%s)` but a state with at least  a model instance to reload is required. Pass it in like so: `FSDPStrategy.load_checkpoint(..., state={'model': model, ...})`",
                    state_is_none ? "None" : "{}");
  /* (Fabric checks first that the checkpoint files exist: a run's fact) */
  if (x->state_dict == FSF_XSD_SHARDED) return one_module(st, n, 0, iss);
  if (x->state_dict == FSF_XSD_FULL) {
    int modules = xla_modules(st, n);
    /* every key that is not an XLAFSDP module, an optimizer included */
    if ((size_t)modules < n)
      fsF_warn(iss, "W25", "load the optimizer and other state from a sharded checkpoint",
               "Loading a full checkpoint will only load the full model. The optimizer and any additional metadata are not included.");
    if (modules)
      return fsF_fail(iss, "R123", "load the full checkpoint into the raw model, before `fabric.setup`",
                      "Found a XLAFSDP model in the provided checkpoint state. Please provide the model without any XLAFSDP wrapper.");
    size_t i = 0;
    while (i < n && strcmp(st[i].key, "model")) i++;
    if (i == n || st[i].kind != FSF_S_MODEL)
      return fsF_fail(iss, "R124", "pass the raw model under the key 'model': `{\"model\": model}`",
                      "XLAFSDP only supports a single model instance with 'model' as the key.");
    return 0;
  }
  return fsF_fail(iss, "R125", "use `state_dict_type=\"sharded\"` or `\"full\"`",
                  "Unknown state_dict_type: %s", x->state_dict_text ? x->state_dict_text : "?");
}

int fsF_xla_fsdp_load_raw(const fsF_fabric *f, fsF_issues *iss) {
  if (f->cfg->cls != FSF_XLA_FSDP) return 0;
  return fsF_fail(iss, "R114", "save and load the model and optimizer together through `fabric.save`/`fabric.load`",
                  "Loading a single module or optimizer object from a checkpoint is not supported yet with the XLAFSDP strategy.");
}
