/* signatures.c -- the builtin signature table and the argument binder. */
#include "signatures.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Short names for the masks, local to this table. */
#define ANY FSSIG_T_ANY
#define INT FSSIG_T_INT
#define NUM FSSIG_T_NUM
#define BOOL FSSIG_T_BOOL
#define STR FSSIG_T_STR
#define DICT FSSIG_T_DICT
#define SEQ FSSIG_T_SEQ
#define OBJ FSSIG_T_OBJ
#define NUMB (FSSIG_T_NUM | FSSIG_T_BOOL)
#define OPTNUM (FSSIG_T_NUM | FSSIG_T_NONE)
#define OPTBOOL (FSSIG_T_BOOL | FSSIG_T_NONE)

#define P(n, t, d) {n, t, d, 0}
#define PT(n, t, d, f) {n, t, d, f}
#define KW(n, t, d) {n, t, d, FSSIG_KWONLY}
#define PO(n, t, d) {n, t, d, FSSIG_POSONLY}
#define VARARGS(n) {n, FSSIG_T_ANY, NULL, FSSIG_VARARGS}
#define VARKW(n) {n, FSSIG_T_ANY, NULL, FSSIG_VARKW}

#define PARAMS(id, ...) static const fsSig_param id[] = {__VA_ARGS__};

/* functions */
PARAMS(p_print, VARARGS("args"), KW("sep", STR, "' '"), KW("end", STR, "'\\n'"), KW("file", ANY, "None"),
       KW("flush", BOOL, "False"))
PARAMS(p_param, P("name", STR, NULL), P("default", ANY, NULL))
PARAMS(p_range, PO("start", INT, NULL), PO("stop", INT, "None"), PO("step", INT, "None"))
PARAMS(p_obj, PO("obj", ANY, NULL))
PARAMS(p_minmax, VARARGS("args"))
PARAMS(p_int, PT("x", FSSIG_T_NUM | FSSIG_T_BOOL | FSSIG_T_STR, "0", FSSIG_POSONLY))
PARAMS(p_float, PT("x", FSSIG_T_NUM | FSSIG_T_BOOL | FSSIG_T_STR, "0.0", FSSIG_POSONLY))
PARAMS(p_str, PO("object", ANY, "''"))
PARAMS(p_bool, PO("x", ANY, "False"))
PARAMS(p_iter, PO("iterable", ANY, "()"))
PARAMS(p_dict, PO("iterable", ANY, "None"), VARKW("kwargs"))
PARAMS(p_ord, PO("c", STR, NULL))
PARAMS(p_chr, PO("i", INT, NULL))
PARAMS(p_enumerate, P("iterable", ANY, NULL), P("start", INT, "0"))
PARAMS(p_zip, VARARGS("iterables"))
PARAMS(p_sum, PO("iterable", ANY, NULL), P("start", ANY, "0"))
PARAMS(p_round, P("number", NUMB, NULL), P("ndigits", FSSIG_T_INT | FSSIG_T_NONE, "None"))
PARAMS(p_sorted, PO("iterable", ANY, NULL), KW("key", ANY, "None"), KW("reverse", BOOL, "False"))
PARAMS(p_device, PO("type", STR, NULL))

/* classes */
PARAMS(p_fabric, P("accelerator", ANY, "'auto'"), P("strategy", ANY, "'auto'"),
       PT("devices", ANY, "'auto'", 0), /* Fabric parses it: its messages */
       PT("num_nodes", ANY, "1", 0), /* int(num_nodes): 2.7 is 2, None is int()'s error */
       PT("precision", FSSIG_T_INT | FSSIG_T_STR | FSSIG_T_NONE, "None", 0),
       P("plugins", ANY, "None"), P("callbacks", ANY, "None"), P("loggers", ANY, "None"))
PARAMS(p_fsdp, KW("auto_wrap_policy", ANY, "None"), KW("activation_checkpointing_policy", ANY, "None"),
       KW("cpu_offload", ANY, "None"), KW("mixed_precision", ANY, "None"),
       KW("sharding_strategy", STR, "'FULL_SHARD'"), KW("state_dict_type", STR, "'sharded'"),
       KW("use_orig_params", BOOL, "True"), VARKW("kwargs"))
/* torch.distributed.fsdp.wrap's policies (lib_strategy.c), functools.partial (lib_math.c) */
PARAMS(p_partial, PO("func", ANY, NULL), VARARGS("args"), VARKW("keywords"))
PARAMS(p_module_wrap_policy, P("module_classes", ANY, NULL))
PARAMS(p_transformer_policy, P("module", OBJ, NULL), P("recurse", BOOL, NULL), P("nonwrapped_numel", INT, NULL),
       P("transformer_layer_cls", ANY, NULL))
PARAMS(p_size_policy, P("module", OBJ, NULL), P("recurse", BOOL, NULL), P("nonwrapped_numel", INT, NULL),
       P("min_num_params", INT, "100000000"), P("force_leaf_modules", ANY, "None"),
       P("exclude_wrap_modules", ANY, "None"))
PARAMS(p_ddp, KW("find_unused_parameters", BOOL, "False"), KW("static_graph", BOOL, "False"),
       KW("process_group_backend", FSSIG_T_STR | FSSIG_T_NONE, "None"),
       KW("start_method", STR, "'popen'"), VARKW("kwargs"))
PARAMS(p_deepspeed, KW("zero_optimization", BOOL, "True"), KW("stage", INT, "2"),
       KW("offload_optimizer", BOOL, "False"), KW("offload_parameters", BOOL, "False"),
       KW("config", ANY, "None"), VARKW("kwargs"))
/* precision plugins and XLAFSDPStrategy (issue 13 point 5; lib_plugins.c, api_plugins.c) */
PARAMS(p_pl_mixed, P("precision", ANY, NULL), P("device", STR, NULL), P("scaler", ANY, "None"))
PARAMS(p_pl_half, P("precision", ANY, "'16-true'"))
PARAMS(p_pl_fsdp, P("precision", ANY, NULL), P("scaler", ANY, "None"))
PARAMS(p_pl_one, P("precision", ANY, NULL))
PARAMS(p_pl_bnb, P("mode", STR, NULL), P("dtype", ANY, "None"), P("ignore_modules", ANY, "None"))
PARAMS(p_pl_te, KW("weights_dtype", ANY, NULL), KW("recipe", ANY, "None"), KW("replace_layers", ANY, "None"),
       KW("fallback_compute_dtype", ANY, "None"))
PARAMS(p_max_workers, P("local_world_size", INT, NULL)) /* raisesD */
PARAMS(p_xla_io, VARARGS("args"), VARKW("kwargs")) /* raisesD: XLACheckpointIO(*args, **kwargs) */
PARAMS(p_xla_fsdp, P("accelerator", ANY, "None"), P("parallel_devices", ANY, "None"),
       P("checkpoint_io", ANY, "None"), P("precision", ANY, "None"), P("auto_wrap_policy", ANY, "None"),
       P("activation_checkpointing_policy", ANY, "None"), P("state_dict_type", STR, "'sharded'"),
       P("sequential_save", BOOL, "False"), VARKW("kwargs"))
PARAMS(p_sgd, P("params", ANY, NULL), P("lr", NUM, NULL), P("momentum", NUM, "0"),
       P("dampening", NUM, "0"), P("weight_decay", NUM, "0"), P("nesterov", BOOL, "False"),
       KW("maximize", BOOL, "False"), KW("foreach", OPTBOOL, "None"), KW("fused", OPTBOOL, "None"))
PARAMS(p_adam, P("params", ANY, NULL), P("lr", NUM, "0.001"), P("betas", SEQ, "(0.9, 0.999)"),
       P("eps", NUM, "1e-08"), P("weight_decay", NUM, "0"), P("amsgrad", BOOL, "False"),
       KW("foreach", OPTBOOL, "None"), KW("maximize", BOOL, "False"), KW("fused", OPTBOOL, "None"))
PARAMS(p_adamw, P("params", ANY, NULL), P("lr", NUM, "0.001"), P("betas", SEQ, "(0.9, 0.999)"),
       P("eps", NUM, "1e-08"), P("weight_decay", NUM, "0.01"), P("amsgrad", BOOL, "False"),
       KW("maximize", BOOL, "False"), KW("foreach", OPTBOOL, "None"), KW("fused", OPTBOOL, "None"))
PARAMS(p_fashion, P("train", BOOL, "True"), PT("root", FSSIG_T_STR | FSSIG_T_NONE, "None", 0))
PARAMS(p_mnist, P("root", STR, NULL), P("train", BOOL, "True"))
PARAMS(p_textds, P("path", STR, NULL), P("context", INT, NULL))
PARAMS(p_randomds, P("n", INT, NULL), PT("shape", FSSIG_T_INT | FSSIG_T_SEQ, NULL, 0),
       P("classes", INT, "10"), P("seed", INT, "0"))
/* issue 15 point 3: DataLoader's options in torch 1.13's order, data sets, samplers (lib_data.c, lib_sampler.c) */
#define OPTINT (FSSIG_T_INT | FSSIG_T_NONE)
PARAMS(p_loader, P("dataset", ANY, NULL), PT("batch_size", OPTINT, "1", 0), PT("shuffle", OPTBOOL, "None", 0),
       P("sampler", ANY, "None"), P("batch_sampler", ANY, "None"), P("num_workers", INT, "0"),
       P("collate_fn", ANY, "None"), P("pin_memory", BOOL, "False"), P("drop_last", BOOL, "False"),
       P("timeout", NUM, "0"), P("worker_init_fn", ANY, "None"), P("multiprocessing_context", ANY, "None"),
       P("generator", ANY, "None"), KW("prefetch_factor", OPTINT, "2"), KW("persistent_workers", BOOL, "False"),
       KW("pin_memory_device", STR, "''"))
PARAMS(p_tensords, VARARGS("tensors"))
PARAMS(p_subset, P("dataset", ANY, NULL), P("indices", SEQ, NULL))
PARAMS(p_concatds, P("datasets", ANY, NULL))
PARAMS(p_random_split, P("dataset", ANY, NULL), P("lengths", SEQ, NULL), P("generator", ANY, "None"))
PARAMS(p_generator, P("device", ANY, "'cpu'"))
PARAMS(p_manual_seed, P("seed", INT, NULL))
PARAMS(p_seqsampler, P("data_source", ANY, NULL))
PARAMS(p_randsampler, P("data_source", ANY, NULL), P("replacement", BOOL, "False"),
       PT("num_samples", OPTINT, "None", 0), P("generator", ANY, "None"))
PARAMS(p_subsetrand, P("indices", ANY, NULL), P("generator", ANY, "None"))
PARAMS(p_batchsampler, P("sampler", ANY, NULL), P("batch_size", INT, NULL), P("drop_last", BOOL, NULL))
PARAMS(p_distsampler, P("dataset", ANY, NULL), PT("num_replicas", OPTINT, "None", 0),
       PT("rank", OPTINT, "None", 0), P("shuffle", BOOL, "True"), P("seed", INT, "0"), P("drop_last", BOOL, "False"))
PARAMS(p_set_epoch, P("epoch", INT, NULL))
PARAMS(p_imagefolder, P("root", STR, NULL), P("transform", ANY, "None"), P("target_transform", ANY, "None"),
       P("loader", ANY, "None"), P("is_valid_file", ANY, "None"))
PARAMS(p_tf_size, P("size", ANY, NULL))
PARAMS(p_numpyds, P("x", STR, NULL), P("y", STR, NULL))
PARAMS(p_tokends, P("path", STR, NULL), P("block_size", INT, NULL), P("dtype", STR, "'uint16'"), P("samples", INT, "0"))
PARAMS(p_csvds, P("path", STR, NULL), P("target", INT, "-1"))
PARAMS(p_load_numpy, P("file", STR, NULL))
PARAMS(p_tf_resize, P("size", ANY, NULL), P("interpolation", ANY, "None"), P("max_size", ANY, "None"),
       P("antialias", ANY, "None"))
PARAMS(p_tf_random_crop, P("size", ANY, NULL), P("padding", ANY, "None"))
PARAMS(p_tf_hflip, P("p", NUM, "0.5"))
PARAMS(p_tf_normalize, P("mean", SEQ, NULL), P("std", SEQ, NULL), P("inplace", BOOL, "False"))
PARAMS(p_tf_compose, P("transforms", SEQ, NULL))
/* issue 13 point 5 (strategies/): ModelParallelStrategy, as Fabric 2.6 takes it (lib_strategy.c) */
PARAMS(p_model_parallel, P("parallelize_fn", ANY, NULL),
       P("data_parallel_size", FSSIG_T_INT | FSSIG_T_STR, "'auto'"),
       P("tensor_parallel_size", FSSIG_T_INT | FSSIG_T_STR, "'auto'"),
       P("save_distributed_checkpoint", BOOL, "True"),
       P("process_group_backend", FSSIG_T_STR | FSSIG_T_NONE, "None"), P("timeout", ANY, "None"))

/* layers */
PARAMS(p_linear, P("in_features", INT, NULL), P("out_features", INT, NULL), P("bias", BOOL, "True"))
PARAMS(p_embedding, P("num_embeddings", INT, NULL), P("embedding_dim", INT, NULL))
PARAMS(p_posemb, P("context", INT, NULL), P("dim", INT, NULL))
PARAMS(p_layernorm, P("normalized_shape", INT, NULL), P("eps", NUM, "1e-05"))
PARAMS(p_gelu, P("approximate", STR, "'none'"))
PARAMS(p_dropout, P("p", NUM, "0.5"))
PARAMS(p_flatten, P("start_dim", INT, "1"), P("end_dim", INT, "-1"))
PARAMS(p_attention, P("dim", INT, NULL), P("heads", INT, NULL), P("bias", BOOL, "True"))
/* issue 14, point 3: containers of modules */
PARAMS(p_container_args, VARARGS("args"))
PARAMS(p_modulelist, P("modules", SEQ | FSSIG_T_NONE, "None"))
PARAMS(p_module_append, P("module", OBJ, NULL))
PARAMS(p_module_apply, P("fn", FSSIG_T_FUNC | OBJ, NULL))
PARAMS(p_parameter, P("data", OBJ, NULL), P("requires_grad", BOOL, "True"))
PARAMS(p_isinstance, PO("obj", ANY, NULL), PO("class_or_tuple", ANY, NULL))
/* issue 14, point 3: ModuleDict, buffers, module-wide switches */
PARAMS(p_moduledict, P("modules", DICT | SEQ | FSSIG_T_NONE, "None"))
PARAMS(p_register_buffer, P("name", STR, NULL), P("tensor", ANY, NULL), P("persistent", BOOL, "True"))
PARAMS(p_module_requires_grad, P("requires_grad", BOOL, "True"))
/* Module.to(device=None, dtype=None, non_blocking=False), to(dtype), to(tensor),
 * to(memory_format=...): torch's overloads through one row */
PARAMS(p_module_to, P("device", ANY, "None"), P("dtype", ANY, "None"), P("non_blocking", BOOL, "False"),
       KW("memory_format", ANY, "None"))
/* torch.nn.init */
PARAMS(p_init_uniform, P("tensor", OBJ, NULL), P("a", NUM, "0.0"), P("b", NUM, "1.0"))
PARAMS(p_init_normal, P("tensor", OBJ, NULL), P("mean", NUM, "0.0"), P("std", NUM, "1.0"))
PARAMS(p_init_constant, P("tensor", OBJ, NULL), P("val", NUM, NULL))
PARAMS(p_init_tensor, P("tensor", OBJ, NULL))
PARAMS(p_init_trunc, P("tensor", OBJ, NULL), P("mean", NUM, "0.0"), P("std", NUM, "1.0"), P("a", NUM, "-2.0"),
       P("b", NUM, "2.0"))
PARAMS(p_init_xavier, P("tensor", OBJ, NULL), P("gain", NUM, "1.0"))
PARAMS(p_init_kaiming, P("tensor", OBJ, NULL), P("a", NUM, "0"), P("mode", STR, "'fan_in'"),
       P("nonlinearity", STR, "'leaky_relu'"))

/* convolutional layers and their F. forms (issue 14 point 4; lib_nn.c, lib_functional.c) */
#define SIZE2 (FSSIG_T_INT | FSSIG_T_SEQ)
#define OPTSIZE2 (FSSIG_T_INT | FSSIG_T_SEQ | FSSIG_T_NONE)
#define CONV_OPTS P("stride", SIZE2, "1"), P("padding", SIZE2 | FSSIG_T_STR, "0"), \
                  P("dilation", SIZE2, "1"), P("groups", INT, "1")
PARAMS(p_conv, P("in_channels", INT, NULL), P("out_channels", INT, NULL), P("kernel_size", SIZE2, NULL),
       CONV_OPTS, P("bias", BOOL, "True"), P("padding_mode", STR, "'zeros'"))
PARAMS(p_conv_t, P("in_channels", INT, NULL), P("out_channels", INT, NULL), P("kernel_size", SIZE2, NULL),
       P("stride", SIZE2, "1"), P("padding", SIZE2, "0"), P("output_padding", SIZE2, "0"), P("groups", INT, "1"),
       P("bias", BOOL, "True"), P("dilation", SIZE2, "1"), P("padding_mode", STR, "'zeros'"))
PARAMS(p_f_conv_t, P("input", OBJ, NULL), P("weight", OBJ, NULL), P("bias", ANY, "None"), P("stride", SIZE2, "1"),
       P("padding", SIZE2, "0"), P("output_padding", SIZE2, "0"), P("groups", INT, "1"), P("dilation", SIZE2, "1"))
PARAMS(p_mha, P("embed_dim", INT, NULL), P("num_heads", INT, NULL), P("dropout", NUM, "0.0"), P("bias", BOOL, "True"),
       P("add_bias_kv", BOOL, "False"), P("add_zero_attn", BOOL, "False"), P("kdim", ANY, "None"),
       P("vdim", ANY, "None"), P("batch_first", BOOL, "False"))
PARAMS(p_batchnorm, P("num_features", INT, NULL), P("eps", NUM, "1e-05"), P("momentum", OPTNUM, "0.1"),
       P("affine", BOOL, "True"), P("track_running_stats", BOOL, "True"))
PARAMS(p_maxpool, P("kernel_size", SIZE2, NULL), P("stride", OPTSIZE2, "None"), P("padding", SIZE2, "0"),
       P("dilation", SIZE2, "1"), P("return_indices", BOOL, "False"), P("ceil_mode", BOOL, "False"))
PARAMS(p_avgpool, P("kernel_size", SIZE2, NULL), P("stride", OPTSIZE2, "None"), P("padding", SIZE2, "0"),
       P("ceil_mode", BOOL, "False"), P("count_include_pad", BOOL, "True"),
       PT("divisor_override", FSSIG_T_INT | FSSIG_T_NONE, "None", 0))
PARAMS(p_adaptive, P("output_size", OPTSIZE2, NULL))
PARAMS(p_f_conv, P("input", OBJ, NULL), P("weight", OBJ, NULL), P("bias", ANY, "None"), CONV_OPTS)
PARAMS(p_f_maxpool, P("input", OBJ, NULL), P("kernel_size", SIZE2, NULL), P("stride", OPTSIZE2, "None"),
       P("padding", SIZE2, "0"), P("dilation", SIZE2, "1"), P("ceil_mode", BOOL, "False"),
       P("return_indices", BOOL, "False"))
PARAMS(p_f_avgpool, P("input", OBJ, NULL), P("kernel_size", SIZE2, NULL), P("stride", OPTSIZE2, "None"),
       P("padding", SIZE2, "0"), P("ceil_mode", BOOL, "False"), P("count_include_pad", BOOL, "True"),
       PT("divisor_override", FSSIG_T_INT | FSSIG_T_NONE, "None", 0))
PARAMS(p_f_adaptive, P("input", OBJ, NULL), P("output_size", OPTSIZE2, NULL))
PARAMS(p_f_batchnorm, P("input", OBJ, NULL), P("running_mean", ANY, NULL), P("running_var", ANY, NULL),
       P("weight", ANY, "None"), P("bias", ANY, "None"), P("training", BOOL, "False"),
       P("momentum", NUM, "0.1"), P("eps", NUM, "1e-05"))

/* activations and normalization layers (issue 14 point 4; lib_nn.c, lib_functional.c) */
PARAMS(p_leaky, P("negative_slope", NUM, "0.01"), P("inplace", BOOL, "False"))
PARAMS(p_softmax_layer, PT("dim", FSSIG_T_INT | FSSIG_T_NONE, "None", 0))
PARAMS(p_inplace, P("inplace", BOOL, "False"))
PARAMS(p_groupnorm, P("num_groups", INT, NULL), P("num_channels", INT, NULL), P("eps", NUM, "1e-05"),
       P("affine", BOOL, "True"))
PARAMS(p_rmsnorm, P("normalized_shape", SIZE2, NULL), P("eps", OPTNUM, "None"),
       P("elementwise_affine", BOOL, "True"))
PARAMS(p_f_sdpa, P("query", OBJ, NULL), P("key", OBJ, NULL), P("value", OBJ, NULL), P("attn_mask", ANY, "None"),
       P("dropout_p", NUM, "0.0"), P("is_causal", BOOL, "False"))
#define INTERP_OPTS PT("size", FSSIG_T_INT | FSSIG_T_SEQ | FSSIG_T_NONE, "None", 0), \
                    PT("scale_factor", FSSIG_T_NUM | FSSIG_T_SEQ | FSSIG_T_NONE, "None", 0), \
                    P("mode", STR, "'nearest'"), P("align_corners", ANY, "None"), P("recompute_scale_factor", ANY, "None")
PARAMS(p_f_interpolate, P("input", OBJ, NULL), INTERP_OPTS, P("antialias", BOOL, "False"))
PARAMS(p_upsample, INTERP_OPTS)
PARAMS(p_f_leaky, P("input", OBJ, NULL), P("negative_slope", NUM, "0.01"), P("inplace", BOOL, "False"))
PARAMS(p_f_mish, P("input", OBJ, NULL), P("inplace", BOOL, "False"))
PARAMS(p_f_groupnorm, P("input", OBJ, NULL), P("num_groups", INT, NULL), P("weight", ANY, "None"),
       P("bias", ANY, "None"), P("eps", NUM, "1e-05"))
PARAMS(p_f_layernorm, P("input", OBJ, NULL), P("normalized_shape", SIZE2, NULL), P("weight", ANY, "None"),
       P("bias", ANY, "None"), P("eps", NUM, "1e-05"))
PARAMS(p_f_rmsnorm, P("input", OBJ, NULL), P("normalized_shape", SIZE2, NULL), P("weight", ANY, "None"),
       P("eps", OPTNUM, "None"))

/* losses (issue 14 point 5; lib_functional.c): a function's parameters are
 * (input, target) and then its module form's, in the same order, so that
 * `CrossEntropyLoss(...)(input, target)` is `cross_entropy(input, target, ...)` */
#define LOSS_IO P("input", OBJ, NULL), P("target", OBJ, NULL)
#define LEGACY P("size_average", ANY, "None"), P("reduce", ANY, "None")
#define REDUCTION P("reduction", STR, "'mean'")
#define CE_OPTS P("weight", ANY, "None"), P("size_average", ANY, "None"), P("ignore_index", INT, "-100"), \
                P("reduce", ANY, "None"), REDUCTION
#define LS P("label_smoothing", NUM, "0.0")
#define BCE_OPTS P("weight", ANY, "None"), LEGACY, REDUCTION
#define PW P("pos_weight", ANY, "None")
PARAMS(p_loss_ce, LOSS_IO, CE_OPTS, LS)
PARAMS(p_loss_nll, LOSS_IO, CE_OPTS)
PARAMS(p_loss_plain, LOSS_IO, LEGACY, REDUCTION)
PARAMS(p_loss_smooth_l1, LOSS_IO, LEGACY, REDUCTION, P("beta", NUM, "1.0"))
PARAMS(p_loss_huber, LOSS_IO, REDUCTION, P("delta", NUM, "1.0"))
PARAMS(p_loss_bce, LOSS_IO, BCE_OPTS)
PARAMS(p_loss_bce_logits, LOSS_IO, BCE_OPTS, PW)
PARAMS(p_loss_kl, LOSS_IO, LEGACY, REDUCTION, P("log_target", BOOL, "False"))
PARAMS(p_cosine, P("x1", OBJ, NULL), P("x2", OBJ, NULL), P("dim", INT, "1"), P("eps", NUM, "1e-08"))
PARAMS(p_cls_ce, CE_OPTS, LS)
PARAMS(p_cls_nll, CE_OPTS)
PARAMS(p_cls_plain, LEGACY, REDUCTION)
PARAMS(p_cls_smooth_l1, LEGACY, REDUCTION, P("beta", NUM, "1.0"))
PARAMS(p_cls_huber, REDUCTION, P("delta", NUM, "1.0"))
PARAMS(p_cls_bce, BCE_OPTS)
PARAMS(p_cls_bce_logits, BCE_OPTS, PW)
PARAMS(p_cls_kl, LEGACY, REDUCTION, P("log_target", BOOL, "False"))
PARAMS(p_cls_cosine, P("dim", INT, "1"), P("eps", NUM, "1e-08"))

/* Fabric methods */
PARAMS(p_launch, P("function", ANY, "None"), VARARGS("args"), VARKW("kwargs"))
PARAMS(p_mark_forward_method, PO("method", ANY, NULL))
PARAMS(p_seed, PT("seed", FSSIG_T_INT | FSSIG_T_NONE, "None", 0),
       PT("workers", FSSIG_T_BOOL | FSSIG_T_NONE, "None", 0))
PARAMS(p_init_module, PT("empty_init", FSSIG_T_BOOL | FSSIG_T_NONE, "None", 0))
PARAMS(p_setup, P("module", OBJ, NULL), VARARGS("optimizers"), KW("move_to_device", BOOL, "True"))
PARAMS(p_setup_module, P("module", OBJ, NULL), P("move_to_device", BOOL, "True"))
PARAMS(p_setup_optimizers, VARARGS("optimizers"))
PARAMS(p_setup_loaders, VARARGS("dataloaders"), KW("use_distributed_sampler", BOOL, "True"),
       KW("move_to_device", BOOL, "True"))
PARAMS(p_backward, P("tensor", OBJ, NULL), VARARGS("args"), KW("model", ANY, "None"), VARKW("kwargs"))
PARAMS(p_clip, P("module", OBJ, NULL), P("optimizer", OBJ, NULL), P("clip_val", OPTNUM, "None"),
       P("max_norm", OPTNUM, "None"), P("norm_type", NUM, "2.0"), P("error_if_nonfinite", BOOL, "True"))
PARAMS(p_save, P("path", STR, NULL), P("state", DICT, NULL), P("filter", ANY, "None"))
PARAMS(p_load, P("path", STR, NULL), PT("state", FSSIG_T_DICT | FSSIG_T_NONE, "None", 0),
       P("strict", BOOL, "True"))
PARAMS(p_load_raw, P("path", STR, NULL), P("obj", OBJ, NULL), P("strict", BOOL, "True"))
PARAMS(p_barrier, PT("name", FSSIG_T_STR | FSSIG_T_NONE, "None", 0))
PARAMS(p_all_reduce, P("data", ANY, NULL), P("group", ANY, "None"), P("reduce_op", STR, "'mean'"))
PARAMS(p_all_gather, P("data", ANY, NULL), P("group", ANY, "None"), P("sync_grads", BOOL, "False"))
PARAMS(p_broadcast, P("obj", ANY, NULL), P("src", INT, "0"))
PARAMS(p_log, P("name", STR, NULL), P("value", ANY, NULL), PT("step", FSSIG_T_INT | FSSIG_T_NONE, "None", 0))
PARAMS(p_log_dict, P("metrics", DICT, NULL), PT("step", FSSIG_T_INT | FSSIG_T_NONE, "None", 0))
PARAMS(p_no_sync, P("module", OBJ, NULL), P("enabled", BOOL, "True"))
PARAMS(p_to_device, P("obj", ANY, NULL))

/* Module, Optimizer, Tensor, container methods */
PARAMS(p_forward, VARARGS("args"))
PARAMS(p_recurse, P("recurse", BOOL, "True"))
PARAMS(p_named, P("prefix", STR, "''"), P("recurse", BOOL, "True"))
PARAMS(p_train, P("mode", BOOL, "True"))
PARAMS(p_generate, P("prompt", STR, NULL), P("max_new_tokens", INT, NULL), P("temperature", NUM, "1.0"),
       PT("top_k", FSSIG_T_INT | FSSIG_T_NONE, "None", 0))
PARAMS(p_to_empty, KW("device", ANY, NULL))
PARAMS(p_set_to_none, P("set_to_none", BOOL, "True"))
PARAMS(p_step, P("closure", ANY, "None"))
PARAMS(p_load_sd, P("state_dict", DICT, NULL), P("strict", BOOL, "True"))
PARAMS(p_dim, PT("dim", FSSIG_T_INT | FSSIG_T_NONE, "None", 0), P("keepdim", BOOL, "False"))
PARAMS(p_size, PT("dim", FSSIG_T_INT | FSSIG_T_NONE, "None", 0))
PARAMS(p_append, PO("object", ANY, NULL))
PARAMS(p_get, PO("key", ANY, NULL), PO("default", ANY, "None"))
PARAMS(p_join, PO("iterable", ANY, NULL))
PARAMS(p_split, P("sep", FSSIG_T_STR | FSSIG_T_NONE, "None"), P("maxsplit", INT, "-1"))
PARAMS(p_affix, PO("affix", ANY, NULL))
PARAMS(p_find, PO("sub", STR, NULL), PO("start", FSSIG_T_INT | FSSIG_T_NONE, "None"),
       PO("end", FSSIG_T_INT | FSSIG_T_NONE, "None"))

/* the torch-like tensor API (issue 14; lib_torch.c) */
#define TKW KW("dtype", ANY, "None"), KW("device", ANY, "None"), KW("requires_grad", BOOL, "False")
PARAMS(p_t_sized, VARARGS("size"), TKW)
PARAMS(p_t_full, P("size", SEQ, NULL), P("fill_value", NUMB, NULL), TKW)
PARAMS(p_t_tensor, P("data", ANY, NULL), TKW)
PARAMS(p_t_arange, P("start", NUM, NULL), P("end", OPTNUM, "None"), P("step", NUM, "1"), TKW)
PARAMS(p_t_linspace, P("start", NUM, NULL), P("end", NUM, NULL), P("steps", INT, NULL), TKW)
PARAMS(p_t_eye, P("n", INT, NULL), PT("m", FSSIG_T_INT | FSSIG_T_NONE, "None", 0), TKW)
PARAMS(p_t_randint, P("low", INT, NULL), P("high", ANY, NULL), P("size", ANY, "None"),
       KW("dtype", ANY, "None"), KW("device", ANY, "None"), KW("generator", ANY, "None"))
PARAMS(p_t_like, P("input", OBJ, NULL), TKW)
PARAMS(p_t_full_like, P("input", OBJ, NULL), P("fill_value", NUMB, NULL), TKW)
PARAMS(p_t_cat, P("tensors", SEQ, NULL), P("dim", INT, "0"))
PARAMS(p_t_where, P("condition", OBJ, NULL), P("input", ANY, NULL), P("other", ANY, NULL))
PARAMS(p_t_input, P("input", OBJ, NULL))
PARAMS(p_t_binary, P("input", OBJ, NULL), P("other", ANY, NULL))
PARAMS(p_t_clamp_fn, P("input", OBJ, NULL), P("min", OPTNUM, "None"), P("max", OPTNUM, "None"))
PARAMS(p_t_softmax_fn, P("input", OBJ, NULL), P("dim", INT, NULL))
PARAMS(p_t_shape, VARARGS("shape"))
PARAMS(p_t_dims, VARARGS("dims"))
PARAMS(p_t_sizes, VARARGS("sizes"))
PARAMS(p_t_transpose, P("dim0", INT, NULL), P("dim1", INT, NULL))
PARAMS(p_t_dim, P("dim", INT, NULL))
PARAMS(p_t_squeeze, PT("dim", FSSIG_T_INT | FSSIG_T_NONE, "None", 0))
PARAMS(p_t_flatten, P("start_dim", INT, "0"), P("end_dim", INT, "-1"))
PARAMS(p_t_flatten_fn, P("input", OBJ, NULL), P("start_dim", INT, "0"), P("end_dim", INT, "-1"))
PARAMS(p_f_relu, P("input", OBJ, NULL), P("inplace", BOOL, "False"))
PARAMS(p_t_split, P("split_size_or_sections", ANY, NULL), P("dim", INT, "0"))
PARAMS(p_t_chunk, P("chunks", INT, NULL), P("dim", INT, "0"))
PARAMS(p_t_other, P("other", ANY, NULL))
PARAMS(p_t_exponent, P("exponent", ANY, NULL))
PARAMS(p_t_clamp, P("min", OPTNUM, "None"), P("max", OPTNUM, "None"))
PARAMS(p_t_masked_fill, P("mask", OBJ, NULL), P("value", ANY, NULL))
PARAMS(p_t_fill_, P("value", ANY, NULL))
PARAMS(p_t_diagonal, P("diagonal", INT, "0"))
PARAMS(p_t_triangle_fn, P("input", OBJ, NULL), P("diagonal", INT, "0"))
PARAMS(p_t_maxmin, P("dim", ANY, "None"), P("keepdim", BOOL, "False"))
PARAMS(p_t_var, PT("dim", FSSIG_T_INT | FSSIG_T_NONE, "None", 0), P("unbiased", BOOL, "True"),
       P("keepdim", BOOL, "False"), PT("correction", FSSIG_T_INT | FSSIG_T_NONE, "None", FSSIG_KWONLY))
PARAMS(p_t_norm, P("p", NUM, "2"), PT("dim", FSSIG_T_INT | FSSIG_T_NONE, "None", 0), P("keepdim", BOOL, "False"))
PARAMS(p_t_dimkeep, P("dim", INT, NULL), P("keepdim", BOOL, "False"))
PARAMS(p_t_to, P("device", ANY, "None"), P("dtype", ANY, "None"), P("non_blocking", BOOL, "False"),
       P("copy", BOOL, "False"), KW("memory_format", ANY, "None"))
PARAMS(p_t_requires_grad, P("requires_grad", BOOL, "True"))
/* tensor indexing and selection (issue 14 points 1-2; lib_index.c) */
PARAMS(p_t_topk, P("k", INT, NULL), P("dim", INT, "-1"), P("largest", BOOL, "True"), P("sorted", BOOL, "True"))
PARAMS(p_t_topk_fn, P("input", OBJ, NULL), P("k", INT, NULL), P("dim", INT, "-1"), P("largest", BOOL, "True"),
       P("sorted", BOOL, "True"))
PARAMS(p_t_multinomial, P("num_samples", INT, NULL), P("replacement", BOOL, "False"))
PARAMS(p_t_multinomial_fn, P("input", OBJ, NULL), P("num_samples", INT, NULL), P("replacement", BOOL, "False"))
/* optimizers, LR schedulers, math and time (issue 15): torch 1.13's and
 * Python's parameter names and defaults */
PARAMS(p_rmsprop, P("params", ANY, NULL), P("lr", NUM, "0.01"), P("alpha", NUM, "0.99"), P("eps", NUM, "1e-08"),
       P("weight_decay", NUM, "0"), P("momentum", NUM, "0"), P("centered", BOOL, "False"),
       P("foreach", OPTBOOL, "None"), P("maximize", BOOL, "False"))
PARAMS(p_adagrad, P("params", ANY, NULL), P("lr", NUM, "0.01"), P("lr_decay", NUM, "0"),
       P("weight_decay", NUM, "0"), P("initial_accumulator_value", NUM, "0"), P("eps", NUM, "1e-10"),
       P("foreach", OPTBOOL, "None"), KW("maximize", BOOL, "False"), KW("fused", OPTBOOL, "None"))
PARAMS(p_adadelta, P("params", ANY, NULL), P("lr", NUM, "1.0"), P("rho", NUM, "0.9"), P("eps", NUM, "1e-06"),
       P("weight_decay", NUM, "0"), P("foreach", OPTBOOL, "None"), KW("maximize", BOOL, "False"))
PARAMS(p_param_group, P("param_group", DICT, NULL))
PARAMS(p_state_dict, P("state_dict", DICT, NULL))
#define SCHED_TAIL P("last_epoch", INT, "-1"), P("verbose", BOOL, "False")
PARAMS(p_steplr, P("optimizer", OBJ, NULL), P("step_size", INT, NULL), P("gamma", NUM, "0.1"), SCHED_TAIL)
PARAMS(p_multisteplr, P("optimizer", OBJ, NULL), P("milestones", SEQ, NULL), P("gamma", NUM, "0.1"), SCHED_TAIL)
PARAMS(p_explr, P("optimizer", OBJ, NULL), P("gamma", NUM, NULL), SCHED_TAIL)
PARAMS(p_cosinelr, P("optimizer", OBJ, NULL), P("T_max", INT, NULL), P("eta_min", NUM, "0"), SCHED_TAIL)
PARAMS(p_warmrestarts, P("optimizer", OBJ, NULL), P("T_0", INT, NULL), P("T_mult", INT, "1"),
       P("eta_min", NUM, "0"), SCHED_TAIL)
PARAMS(p_linearlr, P("optimizer", OBJ, NULL), P("start_factor", NUM, "0.3333333333333333"),
       P("end_factor", NUM, "1.0"), P("total_iters", INT, "5"), SCHED_TAIL)
PARAMS(p_constantlr, P("optimizer", OBJ, NULL), P("factor", NUM, "0.3333333333333333"),
       P("total_iters", INT, "5"), SCHED_TAIL)
PARAMS(p_lambdalr, P("optimizer", OBJ, NULL), P("lr_lambda", ANY, NULL), SCHED_TAIL)
PARAMS(p_onecycle, P("optimizer", OBJ, NULL), P("max_lr", NUM | SEQ, NULL),
       P("total_steps", FSSIG_T_INT | FSSIG_T_NONE, "None"), P("epochs", FSSIG_T_INT | FSSIG_T_NONE, "None"),
       P("steps_per_epoch", FSSIG_T_INT | FSSIG_T_NONE, "None"), P("pct_start", NUM, "0.3"),
       P("anneal_strategy", STR, "'cos'"), P("cycle_momentum", BOOL, "True"), P("base_momentum", NUM, "0.85"),
       P("max_momentum", NUM, "0.95"), P("div_factor", NUM, "25.0"), P("final_div_factor", NUM, "10000.0"),
       P("three_phase", BOOL, "False"), SCHED_TAIL)
PARAMS(p_sequentiallr, P("optimizer", OBJ, NULL), P("schedulers", SEQ, NULL), P("milestones", SEQ, NULL),
       SCHED_TAIL)
PARAMS(p_plateau, P("optimizer", OBJ, NULL), P("mode", STR, "'min'"), P("factor", NUM, "0.1"),
       P("patience", INT, "10"), P("threshold", NUM, "0.0001"), P("threshold_mode", STR, "'rel'"),
       P("cooldown", INT, "0"), P("min_lr", NUM | SEQ, "0"), P("eps", NUM, "1e-08"), P("verbose", BOOL, "False"))
PARAMS(p_sched_step, P("epoch", OPTNUM, "None"))
PARAMS(p_plateau_step, P("metrics", ANY, NULL), P("epoch", OPTNUM, "None"))
PARAMS(p_math_x, PO("x", NUMB, NULL))
PARAMS(p_math_log, PO("x", NUMB, NULL), PO("base", NUMB | FSSIG_T_NONE, "None"))
PARAMS(p_math_pow, PO("x", NUMB, NULL), PO("y", NUMB, NULL))
PARAMS(p_sleep, PO("secs", NUMB, NULL))
/* torchmetrics' metrics (issue 15 point 4; lib_metrics.c): torchmetrics 1.x's parameters */
#define OPTINT (FSSIG_T_INT | FSSIG_T_NONE)
#define OPTSTR (FSSIG_T_STR | FSSIG_T_NONE)
PARAMS(p_accuracy, P("task", STR, NULL), P("threshold", NUM, "0.5"), P("num_classes", OPTINT, "None"),
       P("num_labels", OPTINT, "None"), P("average", OPTSTR, "'micro'"), P("multidim_average", STR, "'global'"),
       P("top_k", OPTINT, "1"), P("ignore_index", OPTINT, "None"), P("validate_args", BOOL, "True"),
       VARKW("kwargs"))
PARAMS(p_mc_accuracy, P("num_classes", INT, NULL), P("top_k", INT, "1"), P("average", OPTSTR, "'macro'"),
       P("multidim_average", STR, "'global'"), P("ignore_index", OPTINT, "None"), P("validate_args", BOOL, "True"),
       VARKW("kwargs"))
PARAMS(p_aggregation, P("nan_strategy", STR | NUM, "'warn'"), VARKW("kwargs"))
PARAMS(p_running_mean, P("window", INT, "5"), P("nan_strategy", STR | NUM, "'warn'"), VARKW("kwargs"))
PARAMS(p_mse, P("squared", BOOL, "True"), P("num_outputs", INT, "1"), VARKW("kwargs"))
PARAMS(p_metric_update, VARARGS("args"), VARKW("kwargs"))
PARAMS(p_metric_to, PO("device", ANY, NULL))
/* lightning.fabric.loggers (issue 15 point 5; lib_loggers.c) and Fabric's loop API (point 6; lib_fabric.c) */
PARAMS(p_csvlogger, P("root_dir", STR, NULL), P("name", OPTSTR, "'lightning_logs'"), P("version", ANY, "None"),
       P("prefix", STR, "''"), P("flush_logs_every_n_steps", INT, "100"))
PARAMS(p_tblogger, P("root_dir", STR, NULL), P("name", OPTSTR, "'lightning_logs'"), P("version", ANY, "None"),
       P("default_hp_metric", BOOL, "True"), P("prefix", STR, "''"), P("sub_dir", ANY, "None"), VARKW("kwargs"))
PARAMS(p_log_metrics, P("metrics", DICT, NULL), PT("step", OPTINT, "None", 0))
PARAMS(p_log_hparams, P("params", DICT, NULL), P("metrics", ANY, "None"), PT("step", OPTINT, "None", 0))
PARAMS(p_finalize, P("status", STR, NULL))
PARAMS(p_rank_zero_first, P("local", BOOL, "False"))
PARAMS(p_call, P("hook_name", STR, NULL), VARARGS("args"), VARKW("kwargs"))

#define N(a) a, sizeof a / sizeof a[0]
#define FN(name, p, ret) {name, FSSIG_FUNC, N(p), ret, 0}
#define FN0(name, ret, fl) {name, FSSIG_FUNC, NULL, 0, ret, fl}
#define CLS(name, p, ret) {name, FSSIG_CLASS, N(p), ret, 0}
#define LAYER(name, p) {name, FSSIG_LAYER, N(p), "Module", 0}
#define LAYER0(name) {name, FSSIG_LAYER, NULL, 0, "Module", 0}
#define M(name, p, ret) {name, FSSIG_METHOD, N(p), ret, 0}
#define M0(name, ret) {name, FSSIG_METHOD, NULL, 0, ret, 0}
#define ATTR(name, ret, fl) {name, FSSIG_ATTR, NULL, 0, ret, fl}
#define MODULE(name) {name, FSSIG_MODULE, NULL, 0, name, 0}

static const fsSig table[] = {
  FN("print", p_print, "None"),
  FN("param", p_param, "any"),
  FN("range", p_range, "range"),
  FN("len", p_obj, "int"),
  FN("min", p_minmax, "any"),
  FN("max", p_minmax, "any"),
  FN("abs", p_obj, "any"),
  FN("int", p_int, "int"),
  FN("float", p_float, "float"),
  FN("str", p_str, "str"),
  FN("repr", p_obj, "str"),
  FN("bool", p_bool, "bool"),
  FN("list", p_iter, "list"),
  FN("tuple", p_iter, "tuple"),
  FN("set", p_iter, "set"),
  FN("dict", p_dict, "dict"),
  FN("enumerate", p_enumerate, "list"),
  FN("zip", p_zip, "list"),
  FN("sum", p_sum, "any"),
  FN("round", p_round, "any"),
  FN("sorted", p_sorted, "list"),
  /* code points (examples/llama.fab's prompt and sample) */
  FN("ord", p_ord, "int"),
  FN("chr", p_chr, "str"),
  FN("device", p_device, "device"),
  FN0("no_grad", "context", FSSIG_CONTEXT),
  FN("cross_entropy", p_loss_ce, "Tensor"),
  FN("mse_loss", p_loss_plain, "Tensor"),
  /* the torch-like tensor API (issue 14; lib_torch.c) */
  FN0("float32", "dtype", FSSIG_CONST),
  FN0("bfloat16", "dtype", FSSIG_CONST),
  FN0("int64", "dtype", FSSIG_CONST),
  FN0("long", "dtype", FSSIG_CONST),
  /* float16 (16-true; issue 16) */
  FN0("float16", "dtype", FSSIG_CONST),
  FN0("half", "dtype", FSSIG_CONST),
  /* float64 (64-true; issue 16 point 1) */
  FN0("float64", "dtype", FSSIG_CONST),
  FN0("double", "dtype", FSSIG_CONST),
  FN("tensor", p_t_tensor, "Tensor"),
  FN("zeros", p_t_sized, "Tensor"),
  FN("ones", p_t_sized, "Tensor"),
  FN("empty", p_t_sized, "Tensor"),
  FN("full", p_t_full, "Tensor"),
  FN("arange", p_t_arange, "Tensor"),
  FN("linspace", p_t_linspace, "Tensor"),
  FN("eye", p_t_eye, "Tensor"),
  FN("rand", p_t_sized, "Tensor"),
  FN("randn", p_t_sized, "Tensor"),
  FN("randint", p_t_randint, "Tensor"),
  FN("zeros_like", p_t_like, "Tensor"),
  FN("ones_like", p_t_like, "Tensor"),
  FN("empty_like", p_t_like, "Tensor"),
  FN("full_like", p_t_full_like, "Tensor"),
  FN("rand_like", p_t_like, "Tensor"),
  FN("randn_like", p_t_like, "Tensor"),
  FN("cat", p_t_cat, "Tensor"),
  FN("stack", p_t_cat, "Tensor"),
  FN("where", p_t_where, "Tensor"),
  FN("exp", p_t_input, "Tensor"),
  FN("log", p_t_input, "Tensor"),
  FN("sqrt", p_t_input, "Tensor"),
  FN("tanh", p_t_input, "Tensor"),
  FN("sigmoid", p_t_input, "Tensor"),
  FN("maximum", p_t_binary, "Tensor"),
  FN("minimum", p_t_binary, "Tensor"),
  FN("clamp", p_t_clamp_fn, "Tensor"),
  FN("softmax", p_t_softmax_fn, "Tensor"),
  FN("log_softmax", p_t_softmax_fn, "Tensor"),
  FN("matmul", p_t_binary, "Tensor"),
  FN("bmm", p_t_binary, "Tensor"),
  /* function forms the real-script ports call (ports2: torch.sin, torch.triu; relu and seed_everything are below) */
  FN("sin", p_t_input, "Tensor"),
  FN("cos", p_t_input, "Tensor"),
  FN("tril", p_t_triangle_fn, "Tensor"),
  FN("triu", p_t_triangle_fn, "Tensor"),
  /* tensor indexing and selection (issue 14 points 1-2; lib_index.c, lib_ctx.c) */
  FN("topk", p_t_topk_fn, "tuple"),
  FN("multinomial", p_t_multinomial_fn, "Tensor"),
  FN0("inference_mode", "context", FSSIG_CONTEXT),
  /* torch.nn.functional's convolutional layers (issue 14 point 4; lib_functional.c) */
  FN("conv1d", p_f_conv, "Tensor"),
  FN("conv2d", p_f_conv, "Tensor"),
  FN("conv_transpose2d", p_f_conv_t, "Tensor"),
  FN("max_pool2d", p_f_maxpool, "Tensor"),
  FN("avg_pool2d", p_f_avgpool, "Tensor"),
  FN("adaptive_avg_pool2d", p_f_adaptive, "Tensor"),
  FN("batch_norm", p_f_batchnorm, "Tensor"),
  FN("scaled_dot_product_attention", p_f_sdpa, "Tensor"),
  FN("interpolate", p_f_interpolate, "Tensor"),
  FN("leaky_relu", p_f_leaky, "Tensor"),
  FN("mish", p_f_mish, "Tensor"),
  FN("group_norm", p_f_groupnorm, "Tensor"),
  FN("layer_norm", p_f_layernorm, "Tensor"),
  FN("rms_norm", p_f_rmsnorm, "Tensor"),
  /* torch.nn.functional's losses (issue 14 point 5; lib_functional.c) */
  FN("nll_loss", p_loss_nll, "Tensor"),
  FN("l1_loss", p_loss_plain, "Tensor"),
  FN("smooth_l1_loss", p_loss_smooth_l1, "Tensor"),
  FN("huber_loss", p_loss_huber, "Tensor"),
  FN("binary_cross_entropy", p_loss_bce, "Tensor"),
  FN("binary_cross_entropy_with_logits", p_loss_bce_logits, "Tensor"),
  FN("kl_div", p_loss_kl, "Tensor"),
  FN("cosine_similarity", p_cosine, "Tensor"),
  /* what Lightning's example scripts call beyond the rows above (issue 15 point 8's ports;
   * lib_functional.c, lib_shape.c, lib_fabric.c) */
  FN("relu", p_f_relu, "Tensor"),
  FN("flatten", p_t_flatten_fn, "Tensor"),
  FN("seed_everything", p_seed, "int"),

  CLS("Fabric", p_fabric, "Fabric"),
  CLS("FSDPStrategy", p_fsdp, "Strategy"),
  CLS("ModuleWrapPolicy", p_module_wrap_policy, "ModuleWrapPolicy"),
  FN("transformer_auto_wrap_policy", p_transformer_policy, "bool"),
  FN("size_based_auto_wrap_policy", p_size_policy, "bool"),
  CLS("DDPStrategy", p_ddp, "Strategy"),
  CLS("DeepSpeedStrategy", p_deepspeed, "Strategy"),
  /* issue 13 point 5: precision plugins and XLAFSDPStrategy */
  CLS("MixedPrecision", p_pl_mixed, "Precision"),
  CLS("HalfPrecision", p_pl_half, "Precision"),
  {"DoublePrecision", FSSIG_CLASS, NULL, 0, "Precision", 0},
  CLS("FSDPPrecision", p_pl_fsdp, "Precision"),
  CLS("DeepSpeedPrecision", p_pl_one, "Precision"),
  CLS("XLAPrecision", p_pl_one, "Precision"),
  CLS("BitsandbytesPrecision", p_pl_bnb, "Precision"),
  CLS("TransformerEnginePrecision", p_pl_te, "Precision"),
  CLS("XLAFSDPStrategy", p_xla_fsdp, "Strategy"),
  FN("suggested_max_num_workers", p_max_workers, "int"), /* raisesD: lib_data.c, api_core.c */
  /* raisesD: CheckpointIO and ClusterEnvironment plugins (lib_plugins.c, api_plugins.c) */
  {"TorchCheckpointIO", FSSIG_CLASS, NULL, 0, "CheckpointIO", 0},
  CLS("XLACheckpointIO", p_xla_io, "CheckpointIO"),
  {"LightningEnvironment", FSSIG_CLASS, NULL, 0, "ClusterEnvironment", 0},
  {"TorchElasticEnvironment", FSSIG_CLASS, NULL, 0, "ClusterEnvironment", 0},
  CLS("SGD", p_sgd, "Optimizer"),
  CLS("Adam", p_adam, "Optimizer"),
  CLS("AdamW", p_adamw, "Optimizer"),
  CLS("FashionMNIST", p_fashion, "Dataset"),
  CLS("MNIST", p_mnist, "Dataset"),
  CLS("TextDataset", p_textds, "Dataset"),
  CLS("RandomDataset", p_randomds, "Dataset"),
  CLS("DataLoader", p_loader, "DataLoader"),
  /* issue 15: optimizers and LR schedulers */
  CLS("RMSprop", p_rmsprop, "Optimizer"),
  CLS("Adagrad", p_adagrad, "Optimizer"),
  CLS("Adadelta", p_adadelta, "Optimizer"), /* issue 15 point 8: the image-classifier and k-fold examples' */
  CLS("StepLR", p_steplr, "LRScheduler"),
  CLS("MultiStepLR", p_multisteplr, "LRScheduler"),
  CLS("ExponentialLR", p_explr, "LRScheduler"),
  CLS("CosineAnnealingLR", p_cosinelr, "LRScheduler"),
  CLS("CosineAnnealingWarmRestarts", p_warmrestarts, "LRScheduler"),
  CLS("LinearLR", p_linearlr, "LRScheduler"),
  CLS("ConstantLR", p_constantlr, "LRScheduler"),
  CLS("LambdaLR", p_lambdalr, "LRScheduler"),
  CLS("OneCycleLR", p_onecycle, "LRScheduler"),
  CLS("SequentialLR", p_sequentiallr, "LRScheduler"),
  CLS("ReduceLROnPlateau", p_plateau, "ReduceLROnPlateau"),
  MODULE("math"),
  MODULE("time"),
  MODULE("functools"),
  /* the losses' module forms (issue 14 point 5; lib_functional.c) */
  CLS("CrossEntropyLoss", p_cls_ce, "Loss"),
  CLS("NLLLoss", p_cls_nll, "Loss"),
  CLS("MSELoss", p_cls_plain, "Loss"),
  CLS("L1Loss", p_cls_plain, "Loss"),
  CLS("SmoothL1Loss", p_cls_smooth_l1, "Loss"),
  CLS("HuberLoss", p_cls_huber, "Loss"),
  CLS("BCELoss", p_cls_bce, "Loss"),
  CLS("BCEWithLogitsLoss", p_cls_bce_logits, "Loss"),
  CLS("KLDivLoss", p_cls_kl, "Loss"),
  CLS("CosineSimilarity", p_cls_cosine, "Loss"),
  /* torchmetrics (issue 15 point 4; lib_metrics.c) */
  CLS("Accuracy", p_accuracy, "Metric"),
  CLS("MulticlassAccuracy", p_mc_accuracy, "Metric"),
  CLS("MeanMetric", p_aggregation, "Metric"),
  CLS("SumMetric", p_aggregation, "Metric"),
  CLS("MaxMetric", p_aggregation, "Metric"),
  CLS("RunningMean", p_running_mean, "Metric"),
  CLS("MeanSquaredError", p_mse, "Metric"),
  /* lightning.fabric.loggers (issue 15 point 5; lib_loggers.c) */
  CLS("CSVLogger", p_csvlogger, "Logger"),
  CLS("TensorBoardLogger", p_tblogger, "Logger"),
  /* issue 15 point 3: torch.utils.data (lib_data.c, lib_sampler.c) */
  CLS("TensorDataset", p_tensords, "TensorDataset"),
  CLS("Subset", p_subset, "Subset"),
  CLS("ConcatDataset", p_concatds, "ConcatDataset"),
  FN("random_split", p_random_split, "list"),
  CLS("Generator", p_generator, "Generator"),
  CLS("SequentialSampler", p_seqsampler, "SequentialSampler"),
  CLS("RandomSampler", p_randsampler, "RandomSampler"),
  CLS("SubsetRandomSampler", p_subsetrand, "SubsetRandomSampler"),
  CLS("BatchSampler", p_batchsampler, "BatchSampler"),
  CLS("DistributedSampler", p_distsampler, "DistributedSampler"),
  CLS("ImageFolder", p_imagefolder, "Dataset"),
  CLS("NumpyDataset", p_numpyds, "Dataset"),
  CLS("TokenDataset", p_tokends, "Dataset"),
  CLS("CSVDataset", p_csvds, "Dataset"),
  FN("load_numpy", p_load_numpy, "any"),
  CLS("Resize", p_tf_resize, "Transform"),
  CLS("CenterCrop", p_tf_size, "Transform"),
  CLS("RandomCrop", p_tf_random_crop, "Transform"),
  CLS("RandomHorizontalFlip", p_tf_hflip, "Transform"),
  {"ToTensor", FSSIG_CLASS, NULL, 0, "Transform", 0},
  CLS("Normalize", p_tf_normalize, "Transform"),
  CLS("Compose", p_tf_compose, "Transform"),
  /* issue 13 point 5 (strategies/): checked; not run by this runtime (lib_strategy.c) */
  CLS("ModelParallelStrategy", p_model_parallel, "Strategy"),

  LAYER("Linear", p_linear),
  LAYER("Embedding", p_embedding),
  LAYER("PositionalEmbedding", p_posemb),
  LAYER("LayerNorm", p_layernorm),
  LAYER0("ReLU"),
  LAYER("GELU", p_gelu),
  LAYER0("Tanh"),
  LAYER0("Sigmoid"),
  LAYER0("SiLU"),
  LAYER("Dropout", p_dropout),
  LAYER("Flatten", p_flatten),
  LAYER("CausalSelfAttention", p_attention),
  /* convolutional layers (issue 14 point 4; lib_nn.c) */
  LAYER("Conv1d", p_conv),
  LAYER("Conv2d", p_conv),
  LAYER("ConvTranspose2d", p_conv_t),
  LAYER("MultiheadAttention", p_mha),
  LAYER("BatchNorm1d", p_batchnorm),
  LAYER("BatchNorm2d", p_batchnorm),
  LAYER("MaxPool2d", p_maxpool),
  LAYER("AvgPool2d", p_avgpool),
  LAYER("AdaptiveAvgPool2d", p_adaptive),
  LAYER("Upsample", p_upsample),
  LAYER("LeakyReLU", p_leaky),
  LAYER("Softmax", p_softmax_layer),
  LAYER("Mish", p_inplace),
  LAYER("GroupNorm", p_groupnorm),
  LAYER("RMSNorm", p_rmsnorm),

  M("Fabric.launch", p_launch, "any"),
  M("Fabric.seed_everything", p_seed, "int"),
  {"Fabric.init_module", FSSIG_METHOD, N(p_init_module), "context", FSSIG_CONTEXT},
  M("Fabric.setup", p_setup, "any"),
  M("Fabric.setup_module", p_setup_module, "Module"),
  M("Fabric.setup_optimizers", p_setup_optimizers, "any"),
  M("Fabric.setup_dataloaders", p_setup_loaders, "any"),
  M("Fabric.backward", p_backward, "None"),
  M("Fabric.clip_gradients", p_clip, "Tensor"),
  M("Fabric.save", p_save, "None"),
  M("Fabric.load", p_load, "dict"),
  M("Fabric.load_raw", p_load_raw, "None"),
  M("Fabric.barrier", p_barrier, "None"),
  M("Fabric.all_reduce", p_all_reduce, "any"),
  M("Fabric.all_gather", p_all_gather, "any"),
  M("Fabric.broadcast", p_broadcast, "any"),
  M("Fabric.print", p_print, "None"),
  M("Fabric.log", p_log, "None"),
  M("Fabric.log_dict", p_log_dict, "None"),
  {"Fabric.no_backward_sync", FSSIG_METHOD, N(p_no_sync), "context", FSSIG_CONTEXT},
  M("Fabric.to_device", p_to_device, "any"),
  ATTR("Fabric.global_rank", "int", 0),
  ATTR("Fabric.local_rank", "int", 0),
  ATTR("Fabric.node_rank", "int", 0),
  ATTR("Fabric.world_size", "int", 0),
  ATTR("Fabric.device", "device", 0),
  ATTR("Fabric.is_global_zero", "bool", 0),
  /* issue 15 points 5-6: loggers and the loop API (lib_fabric.c) */
  ATTR("Fabric.logger", "Logger", 0),
  ATTR("Fabric.loggers", "list", 0),
  ATTR("Fabric.strategy", "Strategy", 0),
  {"Fabric.rank_zero_first", FSSIG_METHOD, N(p_rank_zero_first), "context", FSSIG_CONTEXT},
  M("Fabric.call", p_call, "None"),
  /* the precision's contexts (issue 16; lib_precision.c) */
  {"Fabric.autocast", FSSIG_METHOD, NULL, 0, "context", FSSIG_CONTEXT},
  {"Fabric.init_tensor", FSSIG_METHOD, NULL, 0, "context", FSSIG_CONTEXT},
  /* raisesD: the deprecated sharded_model() (W6; lib_fabric.c) */
  {"Fabric.sharded_model", FSSIG_METHOD, NULL, 0, "context", FSSIG_CONTEXT},
  /* issue 13 point 5 (strategies/): the strategy attributes Fabric refuses (lib_strategy.c) */
  ATTR("Strategy.checkpoint_io", "any", 0),
  ATTR("Strategy.device_mesh", "any", 0),

  M("Module.forward", p_forward, "Tensor"),
  M("Module.parameters", p_recurse, "list"),
  M("Module.named_parameters", p_named, "list"),
  M0("Module.num_parameters", "int"),
  M("Module.train", p_train, "Module"),
  M0("Module.eval", "Module"),
  M("Module.to_empty", p_to_empty, "Module"),
  M0("Module.reset_parameters", "None"),
  M("Module.zero_grad", p_set_to_none, "None"),
  M0("Module.state_dict", "dict"),
  M("Module.load_state_dict", p_load_sd, "None"),
  M("Module.generate", p_generate, "str"),
  ATTR("Module.training", "bool", 0),
  ATTR("Module.__class__", "any", 0), /* issue 15 point 8: m.__class__.__name__ (classes.c) */
  /* issue 14, point 3: containers of modules */
  LAYER("Sequential", p_container_args),
  LAYER("ModuleList", p_modulelist),
  LAYER("Identity", p_container_args),
  FN("Parameter", p_parameter, "Tensor"),
  FN("isinstance", p_isinstance, "bool"),
  FN("uniform_", p_init_uniform, "Tensor"),
  FN("normal_", p_init_normal, "Tensor"),
  FN("constant_", p_init_constant, "Tensor"),
  FN("zeros_", p_init_tensor, "Tensor"),
  FN("ones_", p_init_tensor, "Tensor"),
  FN("trunc_normal_", p_init_trunc, "Tensor"),
  FN("xavier_uniform_", p_init_xavier, "Tensor"),
  FN("xavier_normal_", p_init_xavier, "Tensor"),
  FN("kaiming_uniform_", p_init_kaiming, "Tensor"),
  FN("kaiming_normal_", p_init_kaiming, "Tensor"),
  ATTR("Module.weight", "Tensor", FSSIG_SETTABLE),
  ATTR("Module.bias", "Tensor", FSSIG_SETTABLE),
  M("Module.append", p_module_append, "Module"),
  M0("Module.children", "list"),
  M0("Module.named_children", "list"),
  M0("Module.modules", "list"),
  M0("Module.named_modules", "list"),
  M("Module.apply", p_module_apply, "Module"),
  LAYER("ModuleDict", p_moduledict),
  M0("Module.keys", "list"),
  M0("Module.values", "list"),
  M0("Module.items", "list"),
  M("Module.register_buffer", p_register_buffer, "None"),
  M0("Module.buffers", "list"),
  M0("Module.named_buffers", "list"),
  M("Module.requires_grad_", p_module_requires_grad, "Module"),
  M("Module.to", p_module_to, "Module"),
  M0("Module.cpu", "Module"),
  M0("Module.cuda", "Module"),
  M0("Module.float", "Module"),
  M0("Module.double", "Module"),
  M0("Module.bfloat16", "Module"),
  M0("Module.half", "Module"),
  /* raisesA: Fabric's _FabricModule */
  M("Module.mark_forward_method", p_mark_forward_method, "None"),

  M("Optimizer.step", p_step, "None"),
  M("Optimizer.zero_grad", p_set_to_none, "None"),
  ATTR("Optimizer.lr", "float", FSSIG_SETTABLE),
  /* issue 15 */
  ATTR("Optimizer.param_groups", "list", 0),
  ATTR("Optimizer.defaults", "dict", 0),
  M("Optimizer.add_param_group", p_param_group, "None"),
  M0("Optimizer.state_dict", "dict"),
  M("Optimizer.load_state_dict", p_state_dict, "None"),
  M("LRScheduler.step", p_sched_step, "None"),
  M0("LRScheduler.get_last_lr", "list"),
  M0("LRScheduler.state_dict", "dict"),
  M("LRScheduler.load_state_dict", p_state_dict, "None"),
  ATTR("LRScheduler.last_epoch", "int", 0),
  ATTR("LRScheduler.base_lrs", "list", 0),
  ATTR("LRScheduler.optimizer", "Optimizer", 0),
  M("ReduceLROnPlateau.step", p_plateau_step, "None"),
  M0("ReduceLROnPlateau.get_last_lr", "list"),
  M0("ReduceLROnPlateau.state_dict", "dict"),
  M("ReduceLROnPlateau.load_state_dict", p_state_dict, "None"),
  ATTR("ReduceLROnPlateau.last_epoch", "int", 0),
  ATTR("ReduceLROnPlateau.optimizer", "Optimizer", 0),
  M("math.cos", p_math_x, "float"),
  M("math.sin", p_math_x, "float"),
  M("math.tan", p_math_x, "float"),
  M("math.exp", p_math_x, "float"),
  M("math.log", p_math_log, "float"),
  M("math.log2", p_math_x, "float"),
  M("math.sqrt", p_math_x, "float"),
  M("math.pow", p_math_pow, "float"),
  M("math.ceil", p_math_x, "int"),
  M("math.floor", p_math_x, "int"),
  M("math.isfinite", p_math_x, "bool"),
  M("math.isinf", p_math_x, "bool"),
  M("math.isnan", p_math_x, "bool"),
  ATTR("math.pi", "float", 0),
  ATTR("math.e", "float", 0),
  ATTR("math.tau", "float", 0),
  ATTR("math.inf", "float", 0),
  ATTR("math.nan", "float", 0),
  M0("time.time", "float"),
  M0("time.perf_counter", "float"),
  M0("time.monotonic", "float"),
  M("time.sleep", p_sleep, "None"),
  M("functools.partial", p_partial, "functools.partial"),
  /* torchmetrics (issue 15 point 4; lib_metrics.c) */
  M("Metric.update", p_metric_update, "None"),
  M0("Metric.compute", "Tensor"),
  M0("Metric.reset", "None"),
  M("Metric.to", p_metric_to, "Metric"),
  ATTR("Metric.device", "device", 0),
  /* lightning.fabric.loggers (issue 15 point 5; lib_loggers.c) */
  M("Logger.log_metrics", p_log_metrics, "None"),
  M("Logger.log_hyperparams", p_log_hparams, "None"),
  M0("Logger.save", "None"),
  M("Logger.finalize", p_finalize, "None"),
  ATTR("Logger.name", "str", 0),
  ATTR("Logger.version", "any", 0),
  ATTR("Logger.root_dir", "str", 0),
  ATTR("Logger.log_dir", "str", 0),

  M0("Tensor.item", "any"),
  M("Tensor.argmax", p_dim, "Tensor"),
  M("Tensor.sum", p_dim, "Tensor"),
  M("Tensor.mean", p_dim, "Tensor"),
  M0("Tensor.float", "Tensor"),
  M0("Tensor.double", "Tensor"),
  M0("Tensor.bfloat16", "Tensor"),
  M0("Tensor.half", "Tensor"),
  M0("Tensor.backward", "None"),
  M("Tensor.size", p_size, "any"),
  M0("Tensor.numel", "int"),
  M0("Tensor.detach", "Tensor"),
  M0("Tensor.tolist", "any"),
  ATTR("Tensor.shape", "tuple", 0),
  ATTR("Tensor.device", "device", 0),
  ATTR("Tensor.dtype", "dtype", 0),
  ATTR("Tensor.requires_grad", "bool", 0),
  ATTR("Tensor.grad", "any", 0),
  ATTR("Tensor.data", "Tensor", 0), /* issue 15 point 8: nn.init.normal_(m.weight.data, ...) */
  /* the torch-like tensor API (issue 14; lib_torch.c) */
  M("Tensor.view", p_t_shape, "Tensor"),
  M("Tensor.reshape", p_t_shape, "Tensor"),
  M0("Tensor.contiguous", "Tensor"),
  M("Tensor.permute", p_t_dims, "Tensor"),
  M("Tensor.transpose", p_t_transpose, "Tensor"),
  ATTR("Tensor.T", "Tensor", 0),
  ATTR("Tensor.mT", "Tensor", 0),
  M("Tensor.unsqueeze", p_t_dim, "Tensor"),
  M("Tensor.squeeze", p_t_squeeze, "Tensor"),
  M("Tensor.flatten", p_t_flatten, "Tensor"),
  M("Tensor.expand", p_t_sizes, "Tensor"),
  M("Tensor.repeat", p_t_sizes, "Tensor"),
  M("Tensor.split", p_t_split, "tuple"),
  M("Tensor.chunk", p_t_chunk, "tuple"),
  M0("Tensor.exp", "Tensor"),
  M0("Tensor.log", "Tensor"),
  M0("Tensor.sqrt", "Tensor"),
  M0("Tensor.rsqrt", "Tensor"),
  M0("Tensor.abs", "Tensor"),
  M0("Tensor.sin", "Tensor"),
  M0("Tensor.cos", "Tensor"),
  M0("Tensor.tanh", "Tensor"),
  M0("Tensor.sigmoid", "Tensor"),
  M0("Tensor.relu", "Tensor"),
  M("Tensor.pow", p_t_exponent, "Tensor"),
  M("Tensor.clamp", p_t_clamp, "Tensor"),
  M("Tensor.maximum", p_t_other, "Tensor"),
  M("Tensor.minimum", p_t_other, "Tensor"),
  M("Tensor.masked_fill", p_t_masked_fill, "Tensor"),
  M("Tensor.fill_", p_t_fill_, "Tensor"), /* issue 15 point 8: the DCGAN's label.fill_(fake_label) */
  M("Tensor.tril", p_t_diagonal, "Tensor"),
  M("Tensor.triu", p_t_diagonal, "Tensor"),
  M("Tensor.max", p_t_maxmin, "any"),
  M("Tensor.min", p_t_maxmin, "any"),
  M("Tensor.argmin", p_dim, "Tensor"),
  M("Tensor.var", p_t_var, "Tensor"),
  M("Tensor.std", p_t_var, "Tensor"),
  M("Tensor.norm", p_t_norm, "Tensor"),
  M("Tensor.logsumexp", p_t_dimkeep, "Tensor"),
  M("Tensor.cumsum", p_t_dim, "Tensor"),
  M("Tensor.softmax", p_t_dim, "Tensor"),
  M("Tensor.log_softmax", p_t_dim, "Tensor"),
  M("Tensor.matmul", p_t_other, "Tensor"),
  M("Tensor.bmm", p_t_other, "Tensor"),
  M0("Tensor.long", "Tensor"),
  M0("Tensor.int", "Tensor"),
  M("Tensor.to", p_t_to, "Tensor"),
  M0("Tensor.cpu", "Tensor"),
  M0("Tensor.cuda", "Tensor"),
  M0("Tensor.clone", "Tensor"),
  M("Tensor.requires_grad_", p_t_requires_grad, "Tensor"),
  M0("Tensor.dim", "int"),
  ATTR("Tensor.ndim", "int", 0),
  /* tensor indexing and selection (issue 14 points 1-2; lib_index.c) */
  M("Tensor.topk", p_t_topk, "tuple"),
  M("Tensor.multinomial", p_t_multinomial, "Tensor"),
  M0("Tensor.bool", "Tensor"),

  /* issue 15 point 3: torch.utils.data's members */
  ATTR("TensorDataset.tensors", "tuple", 0),
  ATTR("Subset.dataset", "any", 0),
  ATTR("Subset.indices", "list", 0),
  ATTR("ConcatDataset.datasets", "list", 0),
  ATTR("ConcatDataset.cumulative_sizes", "list", 0),
  ATTR("DataLoader.dataset", "any", 0),
  ATTR("DataLoader.batch_size", "any", 0),
  ATTR("DataLoader.drop_last", "bool", 0),
  ATTR("DataLoader.num_workers", "int", 0),
  ATTR("DataLoader.batch_sampler", "any", 0),
  ATTR("DataLoader.generator", "any", 0),
  M("Generator.manual_seed", p_manual_seed, "Generator"),
  M0("Generator.initial_seed", "int"),
  M("DistributedSampler.set_epoch", p_set_epoch, "None"),
  ATTR("Dataset.classes", "list", 0),
  ATTR("Dataset.targets", "list", 0),

  M("list.append", p_append, "None"),
  M0("dict.items", "list"),
  M0("dict.keys", "list"),
  M0("dict.values", "list"),
  M("dict.get", p_get, "any"),
  M("str.join", p_join, "str"),
  M("str.split", p_split, "list"),
  M("str.find", p_find, "int"), /* issue 15 point 8: weights_init's classname.find("Conv") */
  M0("str.upper", "str"),
  M0("str.lower", "str"),
  /* the ports' named_parameters() filters (ports2; lib_core.c) */
  M("str.startswith", p_affix, "bool"),
  M("str.endswith", p_affix, "bool"),
};

const fsSig *fsSig_all(size_t *n) {
  *n = sizeof table / sizeof table[0];
  return table;
}

const fsSig *fsSig_find(const char *name) {
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (table[i].kind < FSSIG_METHOD && strcmp(table[i].name, name) == 0)
      return &table[i];
  return NULL;
}

const fsSig *fsSig_member(const char *type, const char *member) {
  size_t tl = strlen(type);
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    const char *s = table[i].name;
    if (table[i].kind >= FSSIG_METHOD && strncmp(s, type, tl) == 0 && s[tl] == '.' &&
        strcmp(s + tl + 1, member) == 0)
      return &table[i];
  }
  return NULL;
}

void fsSig_format(const fsSig *sig, FILE *out) {
  fputs(sig->name, out);
  if (sig->kind != FSSIG_ATTR && !(sig->flags & FSSIG_CONST) && sig->kind != FSSIG_MODULE) {
    fputc('(', out);
    int starred = 0; /* a `*` or `*args` already opened the keyword-only part */
    for (size_t i = 0; i < sig->nparams; i++) {
      const fsSig_param *p = &sig->params[i];
      if (i) fputs(", ", out);
      if ((p->flags & FSSIG_KWONLY) && !starred) fputs("*, ", out), starred = 1;
      if (p->flags & FSSIG_VARARGS) fputc('*', out), starred = 1;
      if (p->flags & FSSIG_VARKW) fputs("**", out);
      fputs(p->name, out);
      if (p->def && *p->def) fprintf(out, "=%s", p->def);
      if ((p->flags & FSSIG_POSONLY) && (i + 1 == sig->nparams || !(sig->params[i + 1].flags & FSSIG_POSONLY)))
        fputs(", /", out);
    }
    fputc(')', out);
  }
  if (sig->kind != FSSIG_MODULE && sig->returns) fprintf(out, " -> %s", sig->returns);
}

int fsSig_param_index(const fsSig *sig, const char *name) {
  for (size_t i = 0; i < sig->nparams; i++)
    if (!(sig->params[i].flags & (FSSIG_VARARGS | FSSIG_VARKW)) &&
        strcmp(sig->params[i].name, name) == 0)
      return (int)i;
  return -1;
}

static int fail(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char **err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  *err = malloc((size_t)n + 1);
  if (!*err) return -2;
  va_start(ap, fmt);
  vsnprintf(*err, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return -1;
}

int fsSig_bind(const fsSig *sig, size_t npos, const char *const *kw, size_t nkw,
               int *pos_slot, int *kw_slot, char **err) {
  *err = NULL;
  int varargs = -1, varkw = -1;
  size_t maxpos = 0, reqpos = 0; /* positional-capable parameters before * */
  for (size_t i = 0; i < sig->nparams; i++) {
    unsigned f = sig->params[i].flags;
    if (f & FSSIG_VARARGS) varargs = (int)i;
    else if (f & FSSIG_VARKW) varkw = (int)i;
    else if (!(f & FSSIG_KWONLY) && varargs < 0) {
      maxpos++;
      if (!sig->params[i].def) reqpos = maxpos;
    }
  }
  if (npos > maxpos && varargs < 0) {
    if (maxpos == 0)
      return fail(err, "%s() takes no positional arguments (%zu given)", sig->name, npos);
    return fail(err, "%s() takes %s%zu positional argument%s (%zu given)", sig->name,
                reqpos < maxpos ? "at most " : "", maxpos, maxpos == 1 ? "" : "s", npos);
  }
  /* filled[i]: parameter i already has a value */
  unsigned char filled[64] = {0};
  if (sig->nparams > sizeof filled) return fail(err, "%s() has more than %zu parameters", sig->name, sizeof filled);
  for (size_t i = 0; i < npos; i++) {
    int slot = i < maxpos ? (int)i : varargs;
    pos_slot[i] = slot;
    filled[slot] = 1;
  }
  for (size_t j = 0; j < nkw; j++) {
    for (size_t k = 0; k < j; k++)
      if (strcmp(kw[k], kw[j]) == 0)
        return fail(err, "%s() got multiple values for keyword argument '%s'", sig->name, kw[j]);
    int slot = fsSig_param_index(sig, kw[j]);
    if (slot >= 0 && (sig->params[slot].flags & FSSIG_POSONLY)) {
      if (varkw < 0)
        return fail(err, "%s() got some positional-only arguments passed as keyword arguments: '%s'",
                    sig->name, kw[j]);
      slot = -1;
    }
    if (slot < 0) {
      if (varkw < 0)
        return fail(err, "%s() got an unexpected keyword argument '%s'", sig->name, kw[j]);
      slot = varkw;
    } else if (filled[slot]) {
      return fail(err, "%s() got multiple values for argument '%s'", sig->name, kw[j]);
    }
    kw_slot[j] = slot;
    if (slot != varkw) filled[slot] = 1;
  }
  for (size_t i = 0; i < sig->nparams; i++) {
    const fsSig_param *p = &sig->params[i];
    if (!filled[i] && !p->def && !(p->flags & (FSSIG_VARARGS | FSSIG_VARKW)))
      return fail(err, "%s() missing required argument '%s'", sig->name, p->name);
  }
  return 0;
}


/* ---- the caret on one argument ------------------------------------------ */

fs_loc fsSig_arg_loc(const fsSig *sig, const fs_node *call, const char *param, int index) {
  if (!call || call->kind != FS_N_CALL || !call->kids[0] || !param) return call ? call->loc : (fs_loc){0, 0};
  if (!strcmp(param, "()")) return (fs_loc){call->kids[0]->loc.end, call->loc.end};
  int p = -1; /* fsSig_param_index leaves *args out: a keyword cannot name it */
  for (size_t i = 0; sig && i < sig->nparams && p < 0; i++)
    if (!strcmp(sig->params[i].name, param)) p = (int)i;
  if (p < 0) return call->loc;
  int varargs = (sig->params[p].flags & FSSIG_VARARGS) != 0;
  int pos = 0; /* positionals bind in order; *args takes the rest */
  for (uint32_t i = 1; i < call->nkids; i++) {
    const fs_node *k = call->kids[i];
    if (k->kind == FS_N_STARRED) return call->loc;
    if (k->kind == FS_N_KWARG) {
      if (k->str && !strcmp(k->str, param)) return k->loc;
      continue;
    }
    if (varargs ? pos >= p && pos - p == index : pos == p) return k->loc;
    pos++;
  }
  return call->loc;
}
