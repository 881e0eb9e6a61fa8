/* lib_precision.c -- the Fabric's precision at run time: what a set-up
 * module's forward does around the model (Fabric's _FabricModule.forward:
 * the plugin's convert_input, forward_context, convert_output),
 * fabric.autocast() and fabric.init_tensor(), and the types init_module()
 * and setup() give parameters.
 *
 * Rule: the resolved precision (fsF_config.precision, after Fabric's alias
 * conversion and its CPU fallback, interp/fabric/connector.c) decides
 * everything here, so `check`, `plan` and a run read one value.
 *   *-mixed: float32 parameters; forwards under autocast of the low type
 *            (runtime/tensor/precision.c), outputs converted to float32;
 *   *-true:  parameters, gradients and optimizer states in the low type
 *            (HalfPrecision: module.to(dtype)), float inputs converted to it,
 *            outputs to float32; init_module/init_tensor/autocast make float
 *            tensors of the low type (torch's default dtype).  Under FSDP
 *            the shards stay float32 (W10) and the forward's matrix
 *            products compute in the low type (autocast of it).
 * The ops' side is runtime/tensor/precision.c; the optimizers' is
 * runtime/model/optim.c. */
#include "autograd.h"
#include "eval_int.h"

fs_dtype fsE_precision_param_dtype(const fsF_config *cfg) {
  return cfg->precision == FSF_PBF16_TRUE ? FS_BF16 : cfg->precision == FSF_P16_TRUE ? FS_F16
       : cfg->precision == FSF_P64 ? FS_F64 : FS_F32;
}

static fs_dtype autocast_dtype(const fsF_config *cfg) {
  return cfg->precision == FSF_PBF16_MIXED ? FS_BF16 : cfg->precision == FSF_P16_MIXED ? FS_F16 : FS_F32;
}

void fsE_precision_ctx(ctxv *c, const fsF_config *cfg, bool forward) {
  c->precision = true;
  c->dtype = fsE_precision_param_dtype(cfg);
  c->autocast = forward ? autocast_dtype(cfg) : fsG_autocast();
}

/* Float tensors of a value (a tensor, or a list/tuple of them) converted to
 * dt, on the tape; anything else as it is (apply_to_collection). */
static fs_value *convert(fs_value *v, fs_dtype dt) {
  fs_tensor *t = fsE_as_tensor(v);
  if (t) return fsT_is_floating(t->dtype) ? fsE_tensor_value(fsG_cast(t, dt)) : fsV_retain(v);
  if (v->type != FSV_TUPLE) return fsV_retain(v);
  fs_value *out = fsV_tuple(v->u.seq.n);
  for (size_t i = 0; out && i < v->u.seq.n; i++) {
    fs_value *e = convert(v->u.seq.items[i], dt);
    if (!e) {
      fsV_release(out);
      return NULL;
    }
    fsV_seq_set(out, i, e);
  }
  return out;
}

fs_value *fsE_precision_forward(fsE_ctx *E, fs_value *module, const fsV_args *a, fsE_call_fn call) {
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fsE_fabric_class) : NULL;
  if (!fv || fv->cfg.precision == FSF_P32) return call(E, module, a);
  fs_dtype in = fsE_precision_param_dtype(&fv->cfg);
  fs_value **pos = calloc(a->npos ? a->npos : 1, sizeof *pos);
  if (!pos) {
    fsV_seterr("out of memory");
    return NULL;
  }
  fs_value *r = NULL;
  bool ok = true;
  for (size_t i = 0; ok && i < a->npos; i++) ok = (pos[i] = in == FS_F32 ? fsV_retain(a->pos[i]) : convert(a->pos[i], in)) != NULL;
  if (ok) {
    fsV_args b = *a;
    b.pos = pos;
    fs_dtype ac = fv->cfg.cls == FSF_FSDP && fsT_is_low(in) ? in : autocast_dtype(&fv->cfg);
    fs_dtype old_autocast = fsG_set_autocast(ac);
    fs_dtype old_default = E->default_float;
    E->default_float = in;
    fs_value *y = call(E, module, &b);
    E->default_float = old_default;
    fsG_set_autocast(old_autocast);
    r = y ? convert(y, FS_F32) : NULL;
    fsV_release(y);
  }
  for (size_t i = 0; i < a->npos; i++) fsV_release(pos[i]);
  free(pos);
  return r;
}

/* fabric.autocast(): the plugin's forward_context; fabric.init_tensor(): its
 * tensor_init_context (the default dtype under *-true, nothing else). */
static fs_value *precision_ctx(fs_value *self, bool forward) {
  fs_value *v = fsE_make_ctx(4, FS_DEV_CPU);
  if (v) fsE_precision_ctx(v->u.obj.data, &((fabv *)self->u.obj.data)->cfg, forward);
  return v;
}

NATIVE(fabric_autocast) { return precision_ctx(self, true); }
NATIVE(fabric_init_tensor) { return precision_ctx(self, false); }

static const fsE_reg precision_funcs[] = {
  {"Fabric.autocast", fabric_autocast}, {"Fabric.init_tensor", fabric_init_tensor},
  {NULL, NULL},
};
const fsE_lib fsE_lib_precision = {"precision", precision_funcs};
