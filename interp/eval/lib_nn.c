/* lib_nn.c -- Module values: layers, model bodies (`model`, `repeat`,
 * `residual`) built into runtime/model/module.h trees, and the methods of a
 * module (parameters, state_dict, generate ...).  A module's Fabric state
 * (fsF_model) lives beside it, so fabric.h's rules see what the checker sees. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <string.h>

#include "autograd.h"
#include "eval_int.h"
#include "rng.h"
#include "sample.h"

/* ---- modules -------------------------------------------------------------- */



static void modv_free(void *p) {
  modv *mv = p;
  /* FABRICSCRIPT_FSDP_STATS: the runtime's own count of what FSDP gathered,
   * to hold against `plan`'s gathered unit (tests/dist/equivalence.sh) */
  if (mv->sh && getenv("FABRICSCRIPT_FSDP_STATS"))
    fprintf(stderr, "fsdp: rank %d: %d units, at most %lld bytes gathered\n", mv->sh->rank, mv->sh->nunits,
            (long long)mv->sh->gathered_peak);
  fsSH_free(mv->sh);
  fsM_release(mv->m);
  free(mv->cls);
  free(mv);
}

bool fsE_has_meta(fs_module *m) {
  fsM_param *ps;
  int64_t n = fsM_parameters(m, &ps);
  bool meta = false;
  for (int64_t i = 0; i < n; i++) meta |= ps[i].t->device == FS_DEV_META;
  if (n >= 0) fsM_params_free(ps, n);
  return meta;
}

/* A Module value for m (taken). Built outside a model body, it is complete:
 * it gets its initial values now unless parameters go to the meta device. */
fs_value *fsE_module_new(fsE_ctx *E, fs_module *m, const char *cls) {
  if (!m) return fsE_rt_fail();
  modv *mv = calloc(1, sizeof *mv);
  if (!mv || !(mv->cls = strdup(cls))) {
    free(mv);
    fsM_release(m);
    fsV_seterr("out of memory");
    return NULL;
  }
  mv->m = m;
  mv->dev = E->device == FS_DEV_META ? FS_DEV_CPU : E->device;
  mv->st = (fsF_model){.class_name = mv->cls, .is_module = 1, .meta = true};
  return fsV_obj(&fsE_module_class, mv);
}

/* Inside a model body or a script Module's __init__ the module is a part:
 * the root initializes it once every name is known. */
int fsE_module_built(fsE_ctx *E, fs_value *v) {
  modv *mv = v->u.obj.data;
  if (!E->building && !E->module_init && E->device != FS_DEV_META && !E->opt->plan &&
      fsM_materialize(mv->m, E->device, E->seed) < 0)
    return fsE_rt_fail(), -1;
  /* under init_module() of a *-true precision: parameters of its type */
  if (!E->building && !E->module_init && !E->opt->plan && E->default_float != FS_F32 &&
      fsM_to_dtype(mv->m, E->default_float) < 0)
    return fsE_rt_fail(), -1;
  /* plan: everything stays on meta; the rules see where it would be */
  mv->st.meta = E->opt->plan ? E->device == FS_DEV_META : fsE_has_meta(mv->m);
  return 0;
}

static fs_value *module_value(fsE_ctx *E, fs_module *m, const char *cls) {
  fs_value *v = fsE_module_new(E, m, cls);
  if (v && fsE_module_built(E, v) < 0) {
    fsV_release(v);
    return NULL;
  }
  return v;
}

int fsE_append_layer(fsE_ctx *E, const char *key, fs_value *layer) {
  modv *mv = fsV_objdata(layer, &fsE_module_class);
  if (!mv) return 0;
  if (mv->m->refcount > 1) {
    fsV_seterr("this %s is already part of a model; create a new one for each use", mv->cls);
    return -1;
  }
  if (fsM_append(E->building, key, fsM_retain(mv->m)) < 0) {
    fsE_rt_fail();
    return -1;
  }
  return 1;
}

static fs_module *build_raw(fsE_ctx *E, const fs_node *body, fsM_kind kind) {
  fs_module *seq = kind == FSM_RESIDUAL ? fsM_residual() : fsM_sequential(), *saved = E->building;
  if (!seq) {
    fsE_rt_fail();
    return NULL;
  }
  E->building = seq;
  fsE_flow fl = fsE_exec_block(E, body);
  E->building = saved;
  if (fl == FSE_ERROR || fl == FSE_RETURN) {
    if (fl == FSE_RETURN) {
      fsV_release(E->retval);
      E->retval = NULL;
      fsV_seterr("'return' is not allowed in a model body");
    }
    fsM_release(seq);
    return NULL;
  }
  return seq;
}

fs_value *fsE_build_sequence(fsE_ctx *E, const fs_node *body, fsM_kind kind, const char *cls) {
  fs_module *m = build_raw(E, body, kind);
  fs_value *fwd = m && cls && E->locals && fsA_block_def(body, "forward") ? fsV_dict_getstr(E->locals, "forward") : NULL;
  if (fwd) return fsE_model_with_forward(E, m, cls, fwd);
  return m ? module_value(E, m, cls ? cls : fsM_kind_name(kind)) : NULL;
}

fs_value *fsE_build_repeat(fsE_ctx *E, int64_t n, const fs_node *body) {
  fs_module *b = build_raw(E, body, FSM_SEQUENTIAL);
  return b ? module_value(E, fsM_repeat(n, b), "Repeat") : NULL;
}

NATIVE(l_linear) { return module_value(E, fsM_linear(fsE_ival(s[0]), fsE_ival(s[1]), fsV_truthy(s[2])), "Linear"); }
NATIVE(l_embedding) { return module_value(E, fsM_embedding(fsE_ival(s[0]), fsE_ival(s[1])), "Embedding"); }
NATIVE(l_posemb) { return module_value(E, fsM_posemb(fsE_ival(s[0]), fsE_ival(s[1])), "PositionalEmbedding"); }
NATIVE(l_layernorm) { return module_value(E, fsM_layernorm(fsE_ival(s[0]), fsV_to_double(s[1])), "LayerNorm"); }
NATIVE(l_relu) { return module_value(E, fsM_activation(FSM_RELU), "ReLU"); }
NATIVE(l_tanh) { return module_value(E, fsM_activation(FSM_TANH), "Tanh"); }
NATIVE(l_sigmoid) { return module_value(E, fsM_activation(FSM_SIGMOID), "Sigmoid"); }
NATIVE(l_silu) { return module_value(E, fsM_activation(FSM_SILU), "SiLU"); }
NATIVE(l_dropout) { return module_value(E, fsM_dropout(fsV_to_double(s[0])), "Dropout"); }
NATIVE(l_attention) {
  return module_value(E, fsM_attention(fsE_ival(s[0]), fsE_ival(s[1]), fsV_truthy(s[2])), "CausalSelfAttention");
}

NATIVE(l_gelu) {
  const char *ap = s[0]->u.str.s;
  if (strcmp(ap, "none") && strcmp(ap, "tanh")) {
    fsV_seterr("GELU(): approximate must be 'none' or 'tanh', not '%s'", ap);
    return NULL;
  }
  return module_value(E, fsM_gelu(ap[0] == 't'), "GELU");
}

NATIVE(l_flatten) {
  if (fsE_ival(s[0]) != 1 || fsE_ival(s[1]) != -1) {
    fsV_seterr("Flatten(): only start_dim=1, end_dim=-1 is supported");
    return NULL;
  }
  return module_value(E, fsM_activation(FSM_FLATTEN), "Flatten");
}

/* ---- convolutional layers (issue 14 point 4) ---- */

/* Conv1d/Conv2d(in_channels, out_channels, kernel_size, stride, padding,
 * dilation, groups, bias, padding_mode) */
static fs_value *nn_conv(fsE_ctx *E, int nd, fs_value **s) {
  const char *cls = nd == 1 ? "Conv1d" : "Conv2d";
  int64_t k[2], st[2], pad[2], dil[2];
  if (fsE_size_arg(s[2], cls, "kernel_size", nd, k) < 0 || fsE_size_arg(s[3], cls, "stride", nd, st) < 0 ||
      fsE_size_arg(s[5], cls, "dilation", nd, dil) < 0 || fsE_conv_padding(s[4], cls, nd, k, st, dil, pad) < 0)
    return NULL;
  if (strcmp(s[8]->u.str.s, "zeros")) {
    fsV_seterr("%s(): padding_mode '%s' is not supported (only 'zeros')", cls, s[8]->u.str.s);
    return NULL;
  }
  return module_value(E, fsM_conv(nd, fsE_ival(s[0]), fsE_ival(s[1]), k, st, pad, dil, fsE_ival(s[6]),
                                  fsV_truthy(s[7])), cls);
}

NATIVE(nn_conv1d) { return nn_conv(E, 1, s); }

/* ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding,
 * output_padding, groups, bias, dilation, padding_mode) */
NATIVE(nn_conv_transpose2d) {
  const char *cls = "ConvTranspose2d";
  int64_t k[2], st[2], pad[2], op[2], dil[2];
  if (fsE_size_arg(s[2], cls, "kernel_size", 2, k) < 0 || fsE_size_arg(s[3], cls, "stride", 2, st) < 0 ||
      fsE_size_arg(s[4], cls, "padding", 2, pad) < 0 || fsE_size_arg(s[5], cls, "output_padding", 2, op) < 0 ||
      fsE_size_arg(s[8], cls, "dilation", 2, dil) < 0)
    return NULL;
  if (strcmp(s[9]->u.str.s, "zeros")) {
    fsV_seterr("%s(): padding_mode '%s' is not supported (only 'zeros')", cls, s[9]->u.str.s);
    return NULL;
  }
  return module_value(E, fsM_conv_transpose2d(fsE_ival(s[0]), fsE_ival(s[1]), k, st, pad, op, dil, fsE_ival(s[6]),
                                              fsV_truthy(s[7])), cls);
}
NATIVE(nn_conv2d) { return nn_conv(E, 2, s); }

/* BatchNorm1d/2d(num_features, eps, momentum, affine, track_running_stats) */
static fs_value *nn_batchnorm(fsE_ctx *E, int nd, fs_value **s) {
  double momentum = s[2]->type == FSV_NONE ? NAN : fsV_to_double(s[2]);
  return module_value(E, fsM_batchnorm(nd, fsE_ival(s[0]), fsV_to_double(s[1]), momentum, fsV_truthy(s[3]),
                                       fsV_truthy(s[4])), nd == 1 ? "BatchNorm1d" : "BatchNorm2d");
}

NATIVE(nn_batchnorm1d) { return nn_batchnorm(E, 1, s); }
NATIVE(nn_batchnorm2d) { return nn_batchnorm(E, 2, s); }

/* kernel_size, stride (None: the kernel), padding of a pooling layer */
static int pool_sizes(fs_value **s, const char *cls, int64_t *k, int64_t *st, int64_t *p) {
  if (fsE_size_arg(s[0], cls, "kernel_size", 2, k) < 0 || fsE_size_arg(s[2], cls, "padding", 2, p) < 0)
    return -1;
  if (s[1]->type == FSV_NONE) {
    memcpy(st, k, 2 * sizeof *k);
    return 0;
  }
  return fsE_size_arg(s[1], cls, "stride", 2, st);
}

/* MaxPool2d(kernel_size, stride, padding, dilation, return_indices, ceil_mode) */
NATIVE(nn_maxpool2d) {
  int64_t k[2], st[2], p[2], d[2];
  if (pool_sizes(s, "MaxPool2d", k, st, p) < 0 || fsE_size_arg(s[3], "MaxPool2d", "dilation", 2, d) < 0)
    return NULL;
  if (fsV_truthy(s[4])) {
    fsV_seterr("MaxPool2d(): return_indices=True is not supported");
    return NULL;
  }
  return module_value(E, fsM_pool2d(FSM_MAXPOOL2D, k, st, p, d, fsV_truthy(s[5]), false), "MaxPool2d");
}

/* AvgPool2d(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) */
NATIVE(nn_avgpool2d) {
  static const int64_t one[2] = {1, 1};
  int64_t k[2], st[2], p[2];
  if (pool_sizes(s, "AvgPool2d", k, st, p) < 0) return NULL;
  if (s[5]->type != FSV_NONE) {
    fsV_seterr("AvgPool2d(): divisor_override is not supported");
    return NULL;
  }
  return module_value(E, fsM_pool2d(FSM_AVGPOOL2D, k, st, p, one, fsV_truthy(s[3]), fsV_truthy(s[4])),
                      "AvgPool2d");
}

NATIVE(nn_adaptive_avgpool2d) {
  int64_t size[2];
  if (fsE_adaptive_size(s[0], "AdaptiveAvgPool2d", size) < 0) return NULL;
  return module_value(E, fsM_adaptive_avg_pool2d(size), "AdaptiveAvgPool2d");
}

/* MultiheadAttention(embed_dim, num_heads, dropout, bias, add_bias_kv,
 * add_zero_attn, kdim, vdim, batch_first) */
NATIVE(nn_mha) {
  if (fsV_truthy(s[4]) || fsV_truthy(s[5]) || (s[6]->type != FSV_NONE && fsE_ival(s[6]) != fsE_ival(s[0])) ||
      (s[7]->type != FSV_NONE && fsE_ival(s[7]) != fsE_ival(s[0]))) {
    fsV_seterr("MultiheadAttention(): add_bias_kv, add_zero_attn and kdim/vdim other than embed_dim are not supported");
    return NULL;
  }
  return module_value(E, fsM_mha(fsE_ival(s[0]), fsE_ival(s[1]), fsV_to_double(s[2]), fsV_truthy(s[3]),
                                 fsV_truthy(s[8])), "MultiheadAttention");
}

/* mha(query, key, value, key_padding_mask=None, need_weights=True,
 * attn_mask=None, average_attn_weights=True): (output, weights or None) */
static fs_value *mha_call(modv *mv, const fsV_args *a) {
  static const char *const names[] = {"query", "key", "value", "key_padding_mask", "need_weights", "attn_mask",
                                      "average_attn_weights"};
  fs_value *arg[7] = {NULL};
  if (a->npos > 7) {
    fsV_seterr("MultiheadAttention.forward() takes at most 7 arguments (%zu given)", a->npos);
    return NULL;
  }
  for (size_t i = 0; i < a->npos; i++) arg[i] = a->pos[i];
  for (size_t i = 0; i < a->nkw; i++) {
    size_t j = 0;
    while (j < 7 && strcmp(names[j], a->kwnames[i])) j++;
    if (j == 7 || arg[j]) {
      fsV_seterr(j == 7 ? "MultiheadAttention.forward() got an unexpected keyword argument '%s'"
                        : "MultiheadAttention.forward() got multiple values for argument '%s'", a->kwnames[i]);
      return NULL;
    }
    arg[j] = a->kw[i];
  }
  fs_tensor *t[3], *masks[2] = {NULL, NULL};
  for (int i = 0; i < 3; i++)
    if (!arg[i] || !(t[i] = fsE_need_tensor(arg[i], "MultiheadAttention.forward", names[i]))) {
      if (!arg[i]) fsV_seterr("MultiheadAttention.forward() missing required argument '%s'", names[i]);
      return NULL;
    }
  for (int i = 0; i < 2; i++) {
    fs_value *m = arg[i ? 5 : 3];
    if (m && m->type != FSV_NONE && !(masks[i] = fsE_need_tensor(m, "MultiheadAttention.forward", names[i ? 5 : 3])))
      return NULL;
  }
  bool need = !arg[4] || fsV_truthy(arg[4]), average = !arg[6] || fsV_truthy(arg[6]);
  fs_tensor *w = NULL;
  fs_value *out = fsE_tensor_value(fsM_mha_forward(mv->m, t[0], t[1], t[2], masks[0], masks[1], average,
                                                    need ? &w : NULL));
  if (!out) return NULL;
  fs_value *wv = w ? fsE_tensor_value(w) : fsV_none();
  if (!wv) {
    fsV_release(out);
    return NULL;
  }
  return fsV_pair(out, wv);
}

/* ---- activations and normalization (issue 14 point 4) ---- */

/* inplace=True would write through to the input: values here are never
 * shared that way, so it is refused rather than silently copied */
static bool not_inplace(const fs_value *v, const char *cls) {
  if (!fsV_truthy(v)) return true;
  fsV_seterr("%s(): inplace=True is not supported", cls);
  return false;
}

NATIVE(nn_leaky_relu) {
  return not_inplace(s[1], "LeakyReLU") ? module_value(E, fsM_leaky_relu(fsV_to_double(s[0])), "LeakyReLU") : NULL;
}
NATIVE(nn_softmax) {
  return module_value(E, fsM_softmax(s[0]->type == FSV_NONE ? 0 : fsE_ival(s[0]), s[0]->type == FSV_NONE), "Softmax");
}
NATIVE(nn_mish) { return not_inplace(s[0], "Mish") ? module_value(E, fsM_mish(), "Mish") : NULL; }

/* GroupNorm(num_groups, num_channels, eps, affine) */
NATIVE(nn_groupnorm) {
  return module_value(E, fsM_groupnorm(fsE_ival(s[0]), fsE_ival(s[1]), fsV_to_double(s[2]), fsV_truthy(s[3])),
                      "GroupNorm");
}

/* RMSNorm(normalized_shape, eps, elementwise_affine): an int or up to 2 dims */
NATIVE(nn_rmsnorm) {
  int64_t shape[2];
  int nd = s[0]->type == FSV_INT ? 1 : (int)s[0]->u.seq.n;
  if (nd < 1 || nd > 2 || fsE_size_arg(s[0], "RMSNorm", "normalized_shape", nd, shape) < 0) {
    if (nd < 1 || nd > 2) fsV_seterr("RMSNorm(): normalized_shape of 1 or 2 dims is supported");
    return NULL;
  }
  double eps = s[1]->type == FSV_NONE ? NAN : fsV_to_double(s[1]);
  return module_value(E, fsM_rmsnorm(nd, shape, eps, fsV_truthy(s[2])), "RMSNorm");
}

/* Upsample(size, scale_factor, mode, align_corners, recompute_scale_factor) */
NATIVE(nn_upsample) {
  int64_t size[2] = {0, 0};
  double scale[2] = {0, 0};
  int nsize = 0, nscale = 0;
  if (strcmp(s[2]->u.str.s, "nearest") || s[3]->type != FSV_NONE || fsV_truthy(s[4])) {
    fsV_seterr("Upsample(): only mode='nearest' without align_corners or recompute_scale_factor is supported");
    return NULL;
  }
  if (s[0]->type != FSV_NONE) {
    nsize = s[0]->type == FSV_INT ? 1 : (int)s[0]->u.seq.n;
    if (nsize < 1 || nsize > 2 || fsE_size_arg(s[0], "Upsample", "size", nsize, size) < 0) {
      if (nsize < 1 || nsize > 2) fsV_seterr("Upsample(): size must be an int or a tuple of 1 or 2 ints");
      return NULL;
    }
  }
  if (s[1]->type != FSV_NONE) {
    bool seq = s[1]->type == FSV_LIST || s[1]->type == FSV_TUPLE;
    nscale = seq ? (int)s[1]->u.seq.n : 1;
    for (int i = 0; i < nscale && i < 2; i++) {
      const fs_value *v = seq ? s[1]->u.seq.items[i] : s[1];
      if (v->type != FSV_INT && v->type != FSV_FLOAT) nscale = 3;
      else scale[i] = fsV_to_double(v);
    }
  }
  return module_value(E, fsM_upsample(nsize, size, nscale, scale), "Upsample");
}

static char *module_repr(fs_value *v) {
  modv *mv = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "%s(%lld parameters%s)", mv->cls, (long long)fsM_num_parameters(mv->m),
                 fsE_has_meta(mv->m) && !mv->sh ? ", on meta" : "");
  return fsV_buf_take(&b);
}


static fs_value *module_call(fsE_ctx *E, fs_value *v, const fsV_args *a);

/* A unit of a script class's FSDP root, called from the class's forward:
 * gathered around the call, its output behind the tape hook that gathers it
 * again for the backward (fsdp.h). */
static fs_value *unit_call(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  modv *mv = v->u.obj.data;
  fsSH_model *sh = mv->m->shard;
  int k = mv->m->shard_unit;
  if (fsSH_enter(sh, k) < 0) return fsE_rt_fail();
  mv->m->shard = NULL; /* the call itself runs as any module's */
  fs_value *r = module_call(E, v, a);
  mv->m->shard = sh;
  fs_tensor *t = r ? fsE_as_tensor(r) : NULL;
  if (r && !t)
    fsV_seterr("FSDP: %s.forward() returned %s, where a wrapped unit must return one Tensor", mv->cls,
               fsV_type_name(r));
  fs_tensor *hooked = fsSH_leave(sh, k, t); /* releases the unit in any case */
  fsV_release(r);
  if (!t) return NULL;
  return hooked ? fsE_tensor_value(hooked) : fsE_rt_fail();
}

static fs_value *module_run(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  modv *mv = v->u.obj.data;
  if (E->opt->plan && (mv->m->kind == FSM_MHA || mv->m->kind == FSM_CUSTOM))
    return fsE_plan_done(E, NULL); /* its input gives no feature shape to plan activations from */
  if (mv->m->shard && !E->opt->plan) return unit_call(E, v, a);
  if (mv->m->kind == FSM_MHA && !mv->sh) return mha_call(mv, a);
  if (mv->m->kind == FSM_CUSTOM && mv->sh && fsSH_begin(mv->sh) < 0) return fsE_rt_fail();
  if (mv->m->kind == FSM_CUSTOM) return fsE_custom_call(E, v, a);
  if (a->npos != 1 || a->nkw) {
    fsV_seterr("%s.forward() takes exactly one tensor argument", mv->cls);
    return NULL;
  }
  fs_tensor *x = fsE_need_tensor(a->pos[0], "forward", "input");
  if (E->opt->plan) return x ? fsE_plan_done(E, x) : NULL; /* its shape gives the activations */
  return x ? fsE_tensor_value(mv->sh ? fsSH_forward(mv->sh, x) : fsM_forward(mv->m, x)) : NULL;
}

/* A set-up module runs under the Fabric's precision (lib_precision.c). */
static fs_value *module_call(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  modv *mv = v->u.obj.data;
  return mv->st.wrapped && !E->opt->plan ? fsE_precision_forward(E, v, a, module_run) : module_run(E, v, a);
}

/* One entry of parameters() (the tensor) or named_parameters() ((name, tensor)). */
static fs_value *param_item(const char *name, fs_tensor *t, bool named) {
  fs_value *tv = fsE_tensor_value(fsT_retain(t));
  return tv && named ? fsV_pair(fsV_cstr(name), tv) : tv;
}

/* FSDP's parameters(): the units' flat shards, "<unit>._flat_param" as torch's FlatParameter */
static fs_value *flat_params(fsSH_model *sh, bool named) {
  fs_value *l = fsV_list(0);
  for (int k = 0; l && k < sh->nunits; k++) {
    char name[64];
    snprintf(name, sizeof name, "%d._flat_param", k);
    fs_value *item = param_item(name, sh->units[k].flat, named);
    if (!item || fsV_list_append(l, item) < 0) {
      fsV_release(l);
      l = NULL;
    }
  }
  return l;
}

/* parameters() / named_parameters(); state: the state dict's entries (a
 * tied parameter under each of its names, and the buffers) */
static fs_value *params_list(modv *mv, bool named, bool state) {
  if (mv->sh) return flat_params(mv->sh, named);
  fsM_param *ps;
  int64_t n = state ? fsM_state(mv->m, &ps) : fsM_parameters(mv->m, &ps);
  if (n < 0) return fsE_rt_fail();
  fs_value *l = fsV_list((size_t)n);
  for (int64_t i = 0; l && i < n; i++) {
    fs_value *item = param_item(ps[i].name, ps[i].t, named);
    if (!item) {
      fsV_release(l);
      l = NULL;
    } else {
      fsV_list_append(l, item);
    }
  }
  fsM_params_free(ps, n);
  return l;
}

/* state_dict(): name -> parameter (the tensors themselves, as torch's are views) */
static fs_value *state_dict(modv *mv) {
  fs_value *l = params_list(mv, true, true), *d = l ? fsV_dict() : NULL;
  for (size_t i = 0; d && i < l->u.seq.n; i++) {
    fs_value *p = l->u.seq.items[i];
    if (fsV_dict_set(d, p->u.seq.items[0], fsV_retain(p->u.seq.items[1])) < 0) {
      fsV_release(d);
      d = NULL;
    }
  }
  fsV_release(l);
  return d;
}

/* load_state_dict(sd, strict): copies matching tensors into the parameters
 * (giving meta ones storage); strict: torch's missing/unexpected-key error.
 * Every check comes before the first copy: an error changes nothing. */
static fs_value *load_state_dict(modv *mv, fs_value *sd, bool strict) {
  fsM_param *ps;
  int64_t n = fsM_state(mv->m, &ps);
  if (n < 0) return fsE_rt_fail();
  fsV_buf missing = {0}, unexpected = {0};
  fs_value *r = NULL;
  for (int64_t i = 0; i < n; i++) {
    fs_value *v = fsV_dict_getstr(sd, ps[i].name);
    fs_tensor *src = v ? fsE_as_tensor(v) : NULL, *dst = ps[i].t;
    if (!src) {
      fsV_buf_printf(&missing, "%s\"%s\"", missing.n ? ", " : "", ps[i].name);
      continue;
    }
    if (!fsT_same_shape(src, dst) || !src->data) {
      char a[64], b[64];
      fsV_seterr("size mismatch for %s: copying a param with shape %s from checkpoint, the shape in "
                 "current model is %s.", ps[i].name, fsT_shape_str(src, a, sizeof a), fsT_shape_str(dst, b, sizeof b));
      goto done;
    }
  }
  for (size_t k = 0; k < sd->u.dict.n; k++) {
    const fs_value *key = sd->u.dict.keys[k];
    bool known = false;
    for (int64_t i = 0; i < n && !known; i++)
      known = key->type == FSV_STR && strcmp(key->u.str.s, ps[i].name) == 0;
    if (!known) {
      char *t = fsV_tostr(key);
      fsV_buf_printf(&unexpected, "%s\"%s\"", unexpected.n ? ", " : "", t ? t : "?");
      free(t);
    }
  }
  if (strict && (missing.n || unexpected.n)) {
    fsV_seterr("Error(s) in loading state_dict for %s: %s%s%s%s%s", mv->cls,
               missing.n ? "Missing key(s) in state_dict: " : "", missing.n ? missing.s : "",
               missing.n && unexpected.n ? ". " : "", unexpected.n ? "Unexpected key(s) in state_dict: " : "",
               unexpected.n ? unexpected.s : "");
    goto done;
  }
  for (int64_t i = 0; i < n; i++) {
    fs_value *v = fsV_dict_getstr(sd, ps[i].name);
    fs_tensor *src = v ? fsE_as_tensor(v) : NULL, *dst = ps[i].t;
    fs_tensor *conv = src ? fsT_to_dtype(src, dst->dtype) : NULL;
    if (src && (!conv || (!dst->data && fsT_alloc_storage(dst, src->device) < 0) ||
                fsB_transfer(dst->device, dst->data, conv->device, conv->data, fsT_nbytes(dst)) < 0)) {
      fsT_release(conv);
      fsE_rt_fail();
      goto done;
    }
    fsT_release(conv);
  }
  mv->st.meta = fsE_has_meta(mv->m);
  r = fsV_none();
done:
  free(missing.s);
  free(unexpected.s);
  fsM_params_free(ps, n);
  return r;
}

/* The model's forward on tokens made on the host, moved to its device. */
static fs_tensor *lm_forward(void *ud, fs_tensor *idx) {
  modv *mv = ud;
  fs_tensor *x = fsT_to_device(idx, mv->dev), *y = NULL;
  if (x) y = mv->sh ? fsSH_forward(mv->sh, x) : fsM_forward(mv->m, x);
  fsT_release(x);
  return y;
}

/* model.generate(prompt, max_new_tokens, temperature, top_k): slots in
 * signatures.c order. Every rank runs it and draws the same bytes. */
static fs_value *generate(fsE_ctx *E, modv *mv, fs_value **s) {
  if (E->opt->plan) return fsE_plan_done(E, NULL); /* a forward, as model(x) */
  fsSM_opts o = {(const unsigned char *)s[0]->u.str.s, s[0]->u.str.len, fsE_ival(s[1]), fsV_to_double(s[2]),
                 s[3]->type == FSV_NONE ? FSSM_ALL : fsE_ival(s[3])};
  char err[160];
  int64_t context;
  unsigned char *text;
  if (fsSM_check_opts(&o, err, sizeof err) < 0) {
    fsV_seterr("%s", err);
    return NULL;
  }
  if (mv->m->kind == FSM_CUSTOM) { /* its forward's arguments and crop length are the script's */
    fsV_seterr("generate(): %s is a script's Module class: write the sampling loop (topk, multinomial; "
               "examples/llama.fab); generate() runs declared byte-level models", mv->cls);
    return NULL;
  }
  if (fsSM_byte_lm(mv->m, &context) < 0 ||
      fsSM_generate(lm_forward, mv, context, &o, fsR_key(E->seed, "generate"), &E->samples, &text) < 0)
    return fsE_rt_fail();
  fs_value *r = fsV_str_utf8(text, o.n + (size_t)o.max_new);
  free(text);
  return r;
}

/* ---- containers: Sequential, ModuleList, Identity ------------------------ */

static bool is_container(const fs_module *m) {
  return m->kind == FSM_SEQUENTIAL || m->kind == FSM_MODULELIST || m->kind == FSM_MODULEDICT;
}

/* A script Module's own parameters and buffers are leaves of the runtime's
 * tree, not modules: children() and modules() do not list them. */
static bool is_holder(const fs_module *m) { return m->kind == FSM_PARAM || m->kind == FSM_BUFFER; }

/* A Module value for m, a part of a tree (another value onto the same module). */
fs_value *fsE_module_part(fsE_ctx *E, fs_module *m) {
  fs_value *v = fsE_module_new(E, fsM_retain(m), m->kind == FSM_CUSTOM ? m->custom->class_name : fsM_kind_name(m->kind));
  if (v) ((modv *)v->u.obj.data)->st.meta = fsE_has_meta(m);
  return v;
}

/* Appends module value v to container c, anonymous (keyed by its index),
 * or under key (a ModuleDict's, replacing a module of that key). */
static int container_add(fs_module *c, const char *key, const fs_value *v) {
  modv *mv = fsV_objdata(v, &fsE_module_class);
  if (!mv) {
    fsV_seterr("%s is not a Module subclass", fsV_type_name(v));
    return -1;
  }
  if (mv->m->refcount > 1) {
    fsV_seterr("this %s is already part of a model; create a new one for each use", mv->cls);
    return -1;
  }
  int rc = key ? fsM_set_child(c, key, fsM_retain(mv->m)) : fsM_append(c, NULL, fsM_retain(mv->m));
  return rc < 0 ? (fsE_rt_fail(), -1) : 0;
}

/* ModuleDict(modules): a dict, or an iterable of (key, module) pairs, in order */
static int moduledict_add(fs_module *c, const fs_value *items) {
  bool dict = items->type == FSV_DICT;
  size_t n = dict ? items->u.dict.n : items->u.seq.n;
  for (size_t i = 0; i < n; i++) {
    const fs_value *pair = dict ? NULL : items->u.seq.items[i];
    if (pair && ((pair->type != FSV_TUPLE && pair->type != FSV_LIST) || pair->u.seq.n != 2)) {
      fsV_seterr("ModuleDict update sequence element #%zu should be an iterable of length 2", i);
      return -1;
    }
    const fs_value *k = dict ? items->u.dict.keys[i] : pair->u.seq.items[0];
    const fs_value *v = dict ? items->u.dict.vals[i] : pair->u.seq.items[1];
    if (k->type != FSV_STR) {
      fsV_seterr("module name should be a string. Got %s", fsV_type_name(k));
      return -1;
    }
    if (!*k->u.str.s || strchr(k->u.str.s, '.')) {
      fsV_seterr(*k->u.str.s ? "KeyError: 'module name can\\'t contain \".\", got: %s'"
                             : "KeyError: 'module name can\\'t be empty string \"\"%s'",
                 k->u.str.s);
      return -1;
    }
    if (container_add(c, k->u.str.s, v) < 0) return -1;
  }
  return 0;
}

static fs_value *container_of(fsE_ctx *E, fsM_kind kind, const fs_value *items) {
  fs_module *c = fsM_container(kind);
  if (!c) return fsE_rt_fail();
  if (kind == FSM_MODULEDICT && items && items->type != FSV_NONE && moduledict_add(c, items) < 0) {
    fsM_release(c);
    return NULL;
  }
  for (size_t i = 0; kind != FSM_MODULEDICT && items && items->type != FSV_NONE && i < items->u.seq.n; i++)
    if (container_add(c, NULL, items->u.seq.items[i]) < 0) {
      fsM_release(c);
      return NULL;
    }
  return module_value(E, c, fsM_kind_name(kind));
}

/* Parameter(data, requires_grad): a leaf copy of data (torch shares its
 * storage); assigned to a script Module's attribute, it is its parameter. */
NATIVE(l_parameter) {
  fs_tensor *t = fsE_need_tensor(s[0], "Parameter", "data");
  if (!t) return NULL;
  if (t->dtype == FS_I64 && fsV_truthy(s[1])) {
    fsV_seterr("Only Tensors of floating point and complex dtype can require gradients");
    return NULL;
  }
  fs_tensor *p = fsT_copy(t);
  if (p) p->requires_grad = fsV_truthy(s[1]);
  return fsE_tensor_value(p);
}

NATIVE(l_sequential) { return container_of(E, FSM_SEQUENTIAL, s[0]); }
NATIVE(l_modulelist) { return container_of(E, FSM_MODULELIST, s[0]); }
NATIVE(l_moduledict) { return container_of(E, FSM_MODULEDICT, s[0]); }
NATIVE(l_identity) { return container_of(E, FSM_IDENTITY, NULL); } /* torch's Identity ignores its arguments */

NATIVE(module_append) {
  modv *mv = self->u.obj.data;
  if (!is_container(mv->m) || mv->m->kind == FSM_MODULEDICT) {
    fsV_seterr("'%s' object has no attribute 'append'", mv->cls);
    return NULL;
  }
  return container_add(mv->m, NULL, s[0]) < 0 ? NULL : fsV_retain(self);
}

static int64_t module_len(fsE_ctx *E, fs_value *self) {
  (void)E;
  modv *mv = self->u.obj.data;
  if (is_container(mv->m)) return mv->m->nkids;
  fsV_seterr("object of type '%s' has no len()", mv->cls);
  return -1;
}

static fs_value *module_index(fsE_ctx *E, fs_value *self, fs_value *key) {
  modv *mv = self->u.obj.data;
  int64_t n = mv->m->nkids, i = key->type == FSV_INT ? key->u.i : 0;
  if (!is_container(mv->m)) {
    fsV_seterr("'%s' object is not subscriptable", mv->cls);
    return NULL;
  }
  if (mv->m->kind == FSM_MODULEDICT) {
    for (int k = 0; key->type == FSV_STR && k < n; k++)
      if (strcmp(mv->m->kids[k]->key, key->u.str.s) == 0) return fsE_module_part(E, mv->m->kids[k]);
    char *t = fsV_repr(key);
    fsV_seterr("KeyError: %s", t ? t : "?");
    free(t);
    return NULL;
  }
  if (key->type != FSV_INT) {
    fsV_seterr("%s indices must be integers, not %s", mv->cls, fsV_type_name(key));
    return NULL;
  }
  if (i < -n || i >= n) {
    fsV_seterr("index %lld is out of range", (long long)i);
    return NULL;
  }
  return fsE_module_part(E, mv->m->kids[i < 0 ? i + n : i]);
}

/* iter(container): an iterator over a list of its children's values */
typedef struct kids_iter { fs_value *items; size_t i; } kids_iter;
static void kids_iter_free(void *p) {
  fsV_release(((kids_iter *)p)->items);
  free(p);
}
static int kids_iter_next(fsE_ctx *E, fs_value *self, fs_value **out) {
  (void)E;
  kids_iter *it = self->u.obj.data;
  if (it->i == it->items->u.seq.n) return 0;
  *out = fsV_retain(it->items->u.seq.items[it->i++]);
  return 1;
}
static const fsV_class kids_iter_class = {.name = "iterator", .next = kids_iter_next, .free = kids_iter_free};

static fs_value *module_iter(fsE_ctx *E, fs_value *self) {
  modv *mv = self->u.obj.data;
  if (!is_container(mv->m)) {
    fsV_seterr("'%s' object is not iterable", mv->cls);
    return NULL;
  }
  kids_iter *it = calloc(1, sizeof *it);
  if (!it || !(it->items = fsV_list((size_t)mv->m->nkids))) {
    free(it);
    fsV_seterr("out of memory");
    return NULL;
  }
  for (int i = 0; i < mv->m->nkids; i++) { /* a ModuleDict iterates over its keys */
    fs_value *v = mv->m->kind == FSM_MODULEDICT ? fsV_cstr(mv->m->kids[i]->key) : fsE_module_part(E, mv->m->kids[i]);
    if (!v) {
      kids_iter_free(it);
      return NULL;
    }
    fsV_list_append(it->items, v); /* capacity reserved */
  }
  return fsV_obj(&kids_iter_class, it);
}

/* The modules of self's tree as torch lists them: self first ("" its name),
 * then each child's tree, pre-order (all: every depth; else the children
 * only); named: (name, module) pairs. */
static int tree_list(fsE_ctx *E, fs_value *self, fs_module *m, const char *prefix, bool all, bool named,
                     fs_value *out) {
  for (int i = 0; i < m->nkids; i++) {
    fs_module *k = m->kids[i];
    if (is_holder(k)) continue;
    char *name = malloc(strlen(prefix) + strlen(k->key) + 2);
    if (!name) return fsV_seterr("out of memory"), -1;
    sprintf(name, "%s%s%s", prefix, *prefix ? "." : "", k->key);
    fs_value *v = fsE_module_part(E, k);
    if (v && named) v = fsV_pair(fsV_cstr(name), v);
    int rc = v ? fsV_list_append(out, v) : -1;
    if (rc == 0 && all) rc = tree_list(E, self, k, name, all, named, out);
    free(name);
    if (rc < 0) return -1;
  }
  return 0;
}

static fs_value *modules_of(fsE_ctx *E, fs_value *self, bool all, bool named) {
  fs_value *out = fsV_list(0), *me = NULL;
  if (out && all) { /* self leads modules() and named_modules() */
    me = named ? fsV_pair(fsV_cstr(""), fsV_retain(self)) : fsV_retain(self);
    if (!me || fsV_list_append(out, me) < 0) {
      fsV_release(out);
      return NULL;
    }
  }
  if (out && tree_list(E, self, ((modv *)self->u.obj.data)->m, "", all, named, out) < 0) {
    fsV_release(out);
    return NULL;
  }
  return out;
}

int fsE_moduledict_getattr(fsE_ctx *E, fs_value *obj, const char *name, fs_value **out) {
  modv *mv = fsV_objdata(obj, &fsE_module_class);
  if (!mv || mv->m->kind != FSM_MODULEDICT) return 0;
  for (int k = 0; k < mv->m->nkids; k++)
    if (strcmp(mv->m->kids[k]->key, name) == 0) return (*out = fsE_module_part(E, mv->m->kids[k])) ? 1 : -1;
  fsV_seterr("'%s' object has no attribute '%s'", mv->cls, name);
  return -1;
}

/* ModuleDict's keys(), values(), items(): lists in insertion order */
static fs_value *dict_view(fsE_ctx *E, fs_value *self, int what, const char *name) {
  fs_module *m = ((modv *)self->u.obj.data)->m;
  if (m->kind != FSM_MODULEDICT) {
    fsV_seterr("'%s' object has no attribute '%s'", ((modv *)self->u.obj.data)->cls, name);
    return NULL;
  }
  fs_value *l = fsV_list((size_t)m->nkids);
  for (int i = 0; l && i < m->nkids; i++) {
    fs_value *k = what != 1 ? fsV_cstr(m->kids[i]->key) : NULL, *v = what ? fsE_module_part(E, m->kids[i]) : NULL;
    fs_value *item = what == 0 ? k : what == 1 ? v : k && v ? fsV_pair(k, v) : NULL;
    if (what == 2 && !item) fsV_release(k), fsV_release(v);
    if (!item || fsV_list_append(l, item) < 0) {
      fsV_release(l);
      l = NULL;
    }
  }
  return l;
}
NATIVE(module_keys) { return dict_view(E, self, 0, "keys"); }
NATIVE(module_values) { return dict_view(E, self, 1, "values"); }
NATIVE(module_items) { return dict_view(E, self, 2, "items"); }

/* `key in module_dict`; anything else falls back to the generic operators */
static fs_value *module_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b) {
  (void)E;
  modv *mv = fsV_objdata(b, &fsE_module_class);
  if ((op != FS_OP_IN && op != FS_OP_NOT_IN) || !mv || mv->m->kind != FSM_MODULEDICT) return NULL;
  bool found = false;
  for (int i = 0; a->type == FSV_STR && i < mv->m->nkids && !found; i++) found = strcmp(mv->m->kids[i]->key, a->u.str.s) == 0;
  return fsV_bool(found == (op == FS_OP_IN));
}

NATIVE(module_children) { return modules_of(E, self, false, false); }
NATIVE(module_named_children) { return modules_of(E, self, false, true); }
NATIVE(module_modules) { return modules_of(E, self, true, false); }
NATIVE(module_named_modules) { return modules_of(E, self, true, true); }

/* apply(fn): fn on every child's tree, then on self (torch's order) */
NATIVE(module_apply) {
  fs_value *kids = modules_of(E, self, false, false);
  if (!kids) return NULL;
  for (size_t i = 0; i < kids->u.seq.n; i++) {
    fs_value *r = fsE_call_method(E, kids->u.seq.items[i], "apply", &(fsV_args){&s[0], 1, NULL, NULL, 0, a->loc});
    if (!r) {
      fsV_release(kids);
      return NULL;
    }
    fsV_release(r);
  }
  fsV_release(kids);
  fs_value *r = fsE_call(E, s[0], &(fsV_args){&self, 1, NULL, NULL, 0, a->loc});
  if (!r) return NULL;
  fsV_release(r);
  return fsV_retain(self);
}

/* ---- methods and attributes (rows of the sig table's "Module." entries) ---- */

#define MODV(self) ((modv *)(self)->u.obj.data)

NATIVE(module_forward) { return module_call(E, self, a); }
NATIVE(module_parameters) { return params_list(MODV(self), false, false); }
NATIVE(module_named_parameters) { return params_list(MODV(self), true, false); }
NATIVE(module_num_parameters) { return fsV_int(fsM_num_parameters(MODV(self)->m)); }

NATIVE(module_train) {
  fsM_train(MODV(self)->m, fsV_truthy(s[0]));
  return fsV_retain(self);
}

NATIVE(module_eval) {
  fsM_train(MODV(self)->m, false);
  return fsV_retain(self);
}

NATIVE(module_to_empty) {
  modv *mv = MODV(self);
  ctxv *d = fsV_objdata(s[0], &fsE_ctx_class);
  if (!d || d->kind != 0) {
    fsV_seterr("to_empty(): device must be a device(...), not %s", fsV_type_name(s[0]));
    return NULL;
  }
  if (fsM_to_empty(mv->m, d->dev) < 0) return fsE_rt_fail();
  mv->st.meta = fsE_has_meta(mv->m);
  mv->st.generation++;
  return fsV_retain(self);
}

NATIVE(module_reset_parameters) {
  if (E->opt->plan) return fsV_none(); /* plan: the parameters stay on meta, nothing to initialize */
  modv *mv = MODV(self);
  int rc = mv->sh ? fsSH_reset_parameters(mv->sh, E->seed) : fsM_reset_parameters(mv->m, E->seed);
  return rc < 0 ? fsE_rt_fail() : fsV_none();
}

NATIVE(module_zero_grad) {
  fsM_param *ps;
  int64_t n = fsM_parameters(MODV(self)->m, &ps);
  if (n < 0) return fsE_rt_fail();
  for (int64_t i = 0; i < n; i++) {
    fsT_release(ps[i].t->grad);
    ps[i].t->grad = NULL;
  }
  fsM_params_free(ps, n);
  return fsV_none();
}

NATIVE(module_generate) { return generate(E, MODV(self), s); }

/* requires_grad_(requires_grad): every parameter (an FSDP model's flat shards) */
NATIVE(module_requires_grad_) {
  modv *mv = MODV(self);
  bool on = fsV_truthy(s[0]);
  for (int k = 0; mv->sh && k < mv->sh->nunits; k++) mv->sh->units[k].flat->requires_grad = on;
  fsM_param *ps;
  int64_t n = fsM_parameters(mv->m, &ps);
  if (n < 0) return fsE_rt_fail();
  for (int64_t i = 0; i < n; i++) ps[i].t->requires_grad = on;
  fsM_params_free(ps, n);
  return fsV_retain(self);
}

/* module.to(device), cpu(), cuda(): parameters and buffers move in place */
static fs_value *module_move(fs_value *self, fs_device dev) {
  modv *mv = MODV(self);
  if (mv->sh) {
    fsV_seterr("%s: an FSDP-wrapped module's shards are placed by setup; it cannot be moved", mv->cls);
    return NULL;
  }
  if (dev == FS_DEV_META) {
    fsV_seterr("%s.to(\"meta\") is not supported: build it under device(\"meta\") instead", mv->cls);
    return NULL;
  }
  if (fsM_to_device(mv->m, dev) < 0) return fsE_rt_fail();
  mv->dev = dev;
  return fsV_retain(self);
}

/* to(device, dtype), to(dtype), to(dtype=), to(memory_format=): the dtype
 * converts its floating parameters and buffers, then the device moves them;
 * non_blocking and memory_format change no values (tensors here are
 * contiguous). */
NATIVE(module_to) {
  (void)E;
  const fs_value *dev = s[0], *dtv = s[1];
  fs_dtype dt;
  if (fsE_is_dtype(dev, &dt)) dtv = dev, dev = NULL; /* module.to(torch.float64) */
  if (dtv->type != FSV_NONE) {
    if (!fsE_is_dtype(dtv, &dt)) {
      fsV_seterr("%s.to(): dtype must be a torch dtype, got %s", MODV(self)->cls, fsV_type_name(dtv));
      return NULL;
    }
    if (fsM_to_dtype(MODV(self)->m, dt) < 0) return fsE_rt_fail();
  }
  if (!dev || dev->type == FSV_NONE) return fsV_retain(self);
  ctxv *c = fsV_objdata(dev, &fsE_ctx_class);
  if (c && c->kind == 0) return module_move(self, c->dev);
  for (int d = 0; dev->type == FSV_STR && d < FS_DEV__COUNT; d++) {
    size_t l = strlen(fsT_device_name((fs_device)d));
    if (strncmp(dev->u.str.s, fsT_device_name((fs_device)d), l) == 0 && (!dev->u.str.s[l] || dev->u.str.s[l] == ':'))
      return module_move(self, (fs_device)d);
  }
  fsV_seterr("%s.to(): expected a device (device(...), \"cpu\", \"cuda\") or a dtype, got %s", MODV(self)->cls,
             dev->type == FSV_STR ? dev->u.str.s : fsV_type_name(dev));
  return NULL;
}
/* module.float() / double() / bfloat16() / half(): module.to(dtype) */
static fs_value *module_as(fs_value *self, fs_dtype dt) {
  if (fsM_to_dtype(MODV(self)->m, dt) < 0) return fsE_rt_fail();
  return fsV_retain(self);
}
NATIVE(module_float) { return (void)E, (void)s, (void)a, module_as(self, FS_F32); }
NATIVE(module_double) { return (void)E, (void)s, (void)a, module_as(self, FS_F64); }
NATIVE(module_bfloat16) { return (void)E, (void)s, (void)a, module_as(self, FS_BF16); }
NATIVE(module_half) { return (void)E, (void)s, (void)a, module_as(self, FS_F16); }
NATIVE(module_cpu) { return (void)E, (void)s, (void)a, module_move(self, FS_DEV_CPU); }
NATIVE(module_cuda) { return (void)E, (void)s, (void)a, module_move(self, FS_DEV_CUDA); }

/* buffers() / named_buffers(): persistent or not, in state-dict order */
static fs_value *buffers_list(modv *mv, bool named) {
  fsM_param *ps;
  int64_t n = fsM_buffers(mv->m, &ps);
  if (n < 0) return fsE_rt_fail();
  fs_value *l = fsV_list((size_t)n);
  for (int64_t i = 0; l && i < n; i++) {
    fs_value *item = param_item(ps[i].name, ps[i].t, named);
    if (!item || fsV_list_append(l, item) < 0) {
      fsV_release(l);
      l = NULL;
    }
  }
  fsM_params_free(ps, n);
  return l;
}
NATIVE(module_buffers) { return buffers_list(MODV(self), false); }
NATIVE(module_named_buffers) { return buffers_list(MODV(self), true); }

/* The FSDP wrapper's parameters are flat shards: no per-parameter state dict. */
static bool unsharded(const modv *mv, const char *name) {
  if (mv->sh) fsV_seterr(FSF_FSDP_STATE_DICT_UNSUPPORTED, name);
  return !mv->sh;
}

NATIVE(module_state_dict) { return unsharded(MODV(self), "state_dict") ? state_dict(MODV(self)) : NULL; }

NATIVE(module_load_state_dict) {
  return unsharded(MODV(self), "load_state_dict") ? load_state_dict(MODV(self), s[0], fsV_truthy(s[1])) : NULL;
}

NATIVE(module_training) { return fsV_bool(MODV(self)->m->training); }

/* layer.weight, layer.bias: the parameter itself (torch's are views of it) */
static fs_value *layer_param(fs_value *self, const char *name) {
  modv *mv = MODV(self);
  int i = mv->sh ? -1 : fsM_param_index(mv->m, name);
  if (i < 0) {
    fsV_seterr("'%s' object has no attribute '%s'", mv->cls, name);
    return NULL;
  }
  if (i >= mv->m->nparams) return fsV_none(); /* Linear(..., bias=False).bias */
  return fsE_tensor_value(fsT_retain(mv->m->params[i]));
}
NATIVE(module_weight) { return layer_param(self, "weight"); }
NATIVE(module_bias) { return layer_param(self, "bias"); }

/* self.name = v: a script Module's attribute; the runtime's modules have none */
static int module_setattr(fsE_ctx *E, fs_value *self, const char *name, fs_value *v) {
  fs_module *m = MODV(self)->m;
  if (m->kind == FSM_CUSTOM) return fsE_custom_setattr(E, self, name, v);
  int i = fsM_param_index(m, name);
  fs_tensor *t = fsE_as_tensor(v);
  if (i >= m->nparams) {
    fsV_seterr("%s has no parameter '%s' to tie", MODV(self)->cls, name);
    return -1;
  }
  if (i >= 0 && !MODV(self)->sh) { /* layer.weight = other.weight: one parameter in both */
    if (!t) {
      fsV_seterr("cannot assign '%s' as parameter '%s' (torch.nn.Parameter or None expected)", fsV_type_name(v), name);
      return -1;
    }
    return fsM_tie_param(m, i, t) < 0 ? (fsE_rt_fail(), -1) : 0;
  }
  fsV_seterr("'%s' object attribute '%s' cannot be set", MODV(self)->cls, name);
  return -1;
}

const fsV_class fsE_module_class = {
  .name = "Module", .call = module_call, .setattr = module_setattr,
  .iter = module_iter, .index = module_index, .len = module_len, .binop = module_binop,
  .repr = module_repr, .free = modv_free,
};

static const fsE_reg nn_funcs[] = {
  {"Linear", l_linear}, {"Embedding", l_embedding}, {"PositionalEmbedding", l_posemb},
  {"LayerNorm", l_layernorm}, {"ReLU", l_relu}, {"GELU", l_gelu}, {"Tanh", l_tanh},
  {"Sigmoid", l_sigmoid}, {"SiLU", l_silu}, {"Dropout", l_dropout}, {"Flatten", l_flatten},
  {"CausalSelfAttention", l_attention},
  {"Conv1d", nn_conv1d}, {"Conv2d", nn_conv2d}, {"MultiheadAttention", nn_mha}, {"ConvTranspose2d", nn_conv_transpose2d}, {"BatchNorm1d", nn_batchnorm1d},
  {"BatchNorm2d", nn_batchnorm2d}, {"MaxPool2d", nn_maxpool2d}, {"AvgPool2d", nn_avgpool2d},
  {"AdaptiveAvgPool2d", nn_adaptive_avgpool2d}, {"LeakyReLU", nn_leaky_relu}, {"Softmax", nn_softmax},
  {"Mish", nn_mish}, {"Upsample", nn_upsample}, {"GroupNorm", nn_groupnorm}, {"RMSNorm", nn_rmsnorm},
  {"Module.forward", module_forward}, {"Module.parameters", module_parameters},
  {"Module.named_parameters", module_named_parameters}, {"Module.num_parameters", module_num_parameters},
  {"Module.train", module_train}, {"Module.eval", module_eval}, {"Module.to_empty", module_to_empty},
  {"Module.reset_parameters", module_reset_parameters}, {"Module.zero_grad", module_zero_grad},
  {"Module.state_dict", module_state_dict}, {"Module.load_state_dict", module_load_state_dict},
  {"Module.generate", module_generate}, {"Module.training", module_training},
  {"Parameter", l_parameter}, {"Sequential", l_sequential}, {"ModuleList", l_modulelist}, {"Identity", l_identity},
  {"Module.append", module_append}, {"Module.weight", module_weight}, {"Module.bias", module_bias}, {"Module.children", module_children},
  {"Module.named_children", module_named_children}, {"Module.modules", module_modules},
  {"Module.named_modules", module_named_modules}, {"Module.apply", module_apply},
  {"ModuleDict", l_moduledict}, {"Module.keys", module_keys}, {"Module.values", module_values},
  {"Module.items", module_items}, {"Module.requires_grad_", module_requires_grad_}, {"Module.to", module_to},
  {"Module.cpu", module_cpu}, {"Module.float", module_float}, {"Module.double", module_double},
  {"Module.bfloat16", module_bfloat16}, {"Module.half", module_half}, {"Module.cuda", module_cuda}, {"Module.buffers", module_buffers},
  {"Module.named_buffers", module_named_buffers},
  {NULL, NULL},
};
const fsE_lib fsE_lib_nn = {"nn", nn_funcs};
