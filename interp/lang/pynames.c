/* pynames.c -- Python's own names and the torch/lightning namespaces as
 * signatures.h's rows (see pynames.h). The namespace table lists, for each
 * module that exports modelled builtins, the row names it exports: one
 * table for every alias a script may use (`nn.Linear`, `torch.nn.Linear`,
 * `from torch.nn import Linear`), since each resolves to the same dotted name. */
#include "pynames.h"

#include <stdlib.h>
#include <string.h>

/* builtins.__dict__ of CPython 3.12 (less the rows signatures.h has), and
 * the names a module gets without an import. */
static const char *const python_builtins[] = { /* sorted bytewise: bsearch */
  "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup",
  "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError",
  "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
  "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning", "EnvironmentError", "Exception",
  "ExceptionGroup", "FileExistsError", "FileNotFoundError", "FloatingPointError", "FutureWarning",
  "GeneratorExit", "IOError", "ImportError", "ImportWarning", "IndentationError", "IndexError",
  "InterruptedError", "IsADirectoryError", "KeyError", "KeyboardInterrupt", "LookupError",
  "MemoryError", "ModuleNotFoundError", "NameError", "NotADirectoryError", "NotImplemented",
  "NotImplementedError", "OSError", "OverflowError", "PendingDeprecationWarning",
  "PermissionError", "ProcessLookupError", "RecursionError", "ReferenceError", "ResourceWarning",
  "RuntimeError", "RuntimeWarning", "StopAsyncIteration", "StopIteration", "SyntaxError",
  "SyntaxWarning", "SystemError", "SystemExit", "TabError", "TimeoutError", "TypeError",
  "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError",
  "UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError", "Warning",
  "ZeroDivisionError", "__build_class__", "__builtins__", "__debug__", "__dict__", "__doc__",
  "__file__", "__import__", "__loader__", "__name__", "__package__", "__spec__", "abs", "aiter",
  "all", "anext", "any", "ascii", "bin", "bool", "breakpoint", "bytearray", "bytes", "callable",
  "classmethod", "compile", "complex", "copyright", "credits", "delattr", "dict", "dir", "divmod",
  "enumerate", "eval", "exec", "exit", "filter", "float", "format", "frozenset", "getattr",
  "globals", "hasattr", "hash", "help", "hex", "id", "input", "int", "isinstance", "issubclass",
  "iter", "len", "license", "list", "locals", "map", "max", "memoryview", "min", "next", "object",
  "oct", "open", "pow", "print", "property", "quit", "range", "repr", "reversed", "round", "set",
  "setattr", "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "type", "vars",
  "zip",
};

static int name_order(const void *key, const void *entry) {
  return strcmp(key, *(const char *const *)entry);
}

/* a scan of the whole table cost a Python check 1.4% of its instructions */
int fsSig_python_builtin(const char *name) {
  return bsearch(name, python_builtins, sizeof python_builtins / sizeof *python_builtins, sizeof *python_builtins,
                 name_order) != NULL;
}

/* Each module and the rows it exports under their own names (space-separated):
 * `rows` whose parameters are the real API's (bound and checked as in a
 * FabricScript script), `loose` whose real API takes more than the row
 * (`nn.Linear(..., device=)`, `torch.zeros(..., generator=)`): a Python
 * script's call makes the object without its arguments being bound;
 * `modules` nn.Module classes without a row whose instances are modules. */
static const struct { const char *module, *rows, *loose, *modules; } namespaces[] = {
  {"torch", "no_grad float32 bfloat16 int64 long Generator float16 half bool float64 double",
   "device tensor zeros ones empty full arange linspace eye rand randn randint zeros_like "
   "ones_like empty_like full_like rand_like randn_like cat stack where exp log sqrt tanh sigmoid "
   "maximum minimum clamp softmax log_softmax matmul bmm sin cos relu tril triu topk multinomial flatten", ""},
  {"torch.nn", "", "Linear Embedding LayerNorm ReLU GELU Tanh Sigmoid SiLU Dropout Flatten "
   "Conv1d Conv2d ConvTranspose2d MultiheadAttention BatchNorm1d BatchNorm2d MaxPool2d AvgPool2d "
   "AdaptiveAvgPool2d Upsample LeakyReLU Softmax Mish GroupNorm RMSNorm Identity Parameter "
   "CrossEntropyLoss NLLLoss MSELoss L1Loss SmoothL1Loss HuberLoss BCELoss BCEWithLogitsLoss "
   "KLDivLoss CosineSimilarity",
   "Sequential ModuleList ModuleDict"},
  {"torch.nn.functional", "", "cross_entropy mse_loss softmax log_softmax sigmoid tanh relu "
   "conv1d conv2d conv_transpose2d max_pool2d avg_pool2d adaptive_avg_pool2d batch_norm "
   "scaled_dot_product_attention interpolate leaky_relu mish group_norm layer_norm rms_norm nll_loss l1_loss "
   "smooth_l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits kl_div "
   "cosine_similarity relu", ""},
  {"torch.nn.init", "", "uniform_ normal_ constant_ zeros_ ones_ trunc_normal_ xavier_uniform_ "
   "xavier_normal_ kaiming_uniform_ kaiming_normal_", ""},
  {"torch.optim", "SGD Adam AdamW RMSprop Adagrad Adadelta", "", ""},
  {"torch.optim.lr_scheduler", "StepLR MultiStepLR ExponentialLR CosineAnnealingLR "
                               "CosineAnnealingWarmRestarts LinearLR ConstantLR LambdaLR "
                               "OneCycleLR SequentialLR ReduceLROnPlateau", "", ""},
  /* issue 15 point 3: torch.utils.data, torchvision (lib_data.c, lib_sampler.c) */
  {"torch.utils.data", "DataLoader TensorDataset Subset ConcatDataset random_split SequentialSampler "
                       "RandomSampler SubsetRandomSampler BatchSampler", "", ""},
  {"torch.utils.data.dataloader", "DataLoader", "", ""},
  {"torch.utils.data.dataset", "TensorDataset Subset ConcatDataset random_split", "", ""},
  {"torch.utils.data.sampler", "SequentialSampler RandomSampler SubsetRandomSampler BatchSampler", "", ""},
  {"torch.utils.data.distributed", "DistributedSampler", "", ""},
  {"torchvision.transforms", "Normalize ToTensor Compose CenterCrop RandomHorizontalFlip",
   "Resize RandomCrop", ""},
  {"torchvision.datasets", "ImageFolder", "", ""},
  {"lightning", "Fabric seed_everything", "", ""},
  {"lightning.fabric", "Fabric seed_everything", "", ""},
  {"lightning.fabric.fabric", "Fabric", "", ""},
  {"lightning.fabric.strategies", "FSDPStrategy DDPStrategy DeepSpeedStrategy ModelParallelStrategy", "", ""},
  {"lightning.fabric.strategies.fsdp", "FSDPStrategy", "", ""},
  {"torch.distributed.fsdp.wrap", "ModuleWrapPolicy transformer_auto_wrap_policy size_based_auto_wrap_policy", "", ""},
  {"lightning.fabric.strategies.ddp", "DDPStrategy", "", ""},
  {"lightning.fabric.strategies.deepspeed", "DeepSpeedStrategy", "", ""},
  {"lightning.fabric.strategies.model_parallel", "ModelParallelStrategy", "", ""},
  /* issue 15 points 4-5: torchmetrics' metrics, Fabric's loggers */
  {"torchmetrics", "Accuracy MeanMetric SumMetric MaxMetric RunningMean MeanSquaredError", "", ""},
  {"torchmetrics.classification", "Accuracy MulticlassAccuracy", "", ""},
  {"torchmetrics.aggregation", "MeanMetric SumMetric MaxMetric RunningMean", "", ""},
  {"torchmetrics.regression", "MeanSquaredError", "", ""},
  {"lightning.fabric.loggers", "CSVLogger TensorBoardLogger", "", ""},
  {"lightning.fabric.loggers.csv_logs", "CSVLogger", "", ""},
  {"lightning.fabric.loggers.tensorboard", "TensorBoardLogger", "", ""},
  /* issue 13 point 5: precision plugins and XLAFSDPStrategy */
  {"lightning.fabric.plugins", "MixedPrecision HalfPrecision DoublePrecision FSDPPrecision DeepSpeedPrecision XLAPrecision BitsandbytesPrecision TransformerEnginePrecision", "", ""},
  {"lightning.fabric.plugins.precision", "MixedPrecision HalfPrecision DoublePrecision FSDPPrecision DeepSpeedPrecision XLAPrecision BitsandbytesPrecision TransformerEnginePrecision", "", ""},
  {"lightning.fabric.plugins.precision.amp", "MixedPrecision", "", ""},
  {"lightning.fabric.plugins.precision.half", "HalfPrecision", "", ""},
  {"lightning.fabric.plugins.precision.double", "DoublePrecision", "", ""},
  {"lightning.fabric.plugins.precision.fsdp", "FSDPPrecision", "", ""},
  {"lightning.fabric.plugins.precision.deepspeed", "DeepSpeedPrecision", "", ""},
  {"lightning.fabric.plugins.precision.xla", "XLAPrecision", "", ""},
  {"lightning.fabric.plugins.precision.bitsandbytes", "BitsandbytesPrecision", "", ""},
  {"lightning.fabric.plugins.precision.transformer_engine", "TransformerEnginePrecision", "", ""},
  {"lightning.fabric.strategies", "XLAFSDPStrategy", "", ""},
  {"lightning.fabric.strategies.xla_fsdp", "XLAFSDPStrategy", "", ""},
  {"lightning.fabric.utilities", "suggested_max_num_workers", "", ""},
  {"lightning.fabric.utilities.data", "suggested_max_num_workers", "", ""},
  /* raisesD: CheckpointIO and ClusterEnvironment plugins */
  {"lightning.fabric.plugins", "TorchCheckpointIO XLACheckpointIO LightningEnvironment TorchElasticEnvironment", "", ""},
  {"lightning.fabric.plugins.io", "TorchCheckpointIO XLACheckpointIO", "", ""},
  {"lightning.fabric.plugins.io.torch_io", "TorchCheckpointIO", "", ""},
  {"lightning.fabric.plugins.io.xla", "XLACheckpointIO", "", ""},
  {"lightning.fabric.plugins.environments", "LightningEnvironment TorchElasticEnvironment", "", ""},
  {"lightning.fabric.plugins.environments.lightning", "LightningEnvironment", "", ""},
  {"lightning.fabric.plugins.environments.torchelastic", "TorchElasticEnvironment", "", ""},
};

/* The members torch and Lightning give the types signatures.h models, beyond
 * its rows: in a Python script they exist, unknown to the checker. Tensor,
 * Module, Optimizer, DataLoader and Dataset: the public and dunder names of dir() of
 * torch 1.13's classes (/usr/bin/python3 -c 'import torch; print(dir(torch.Tensor))')
 * and their instances' attributes, with Fabric's wrappers' (`module`,
 * `mark_forward_method`, `optimizer`, `device`) and the attributes of the
 * layers signatures.h has (`weight`, `in_features` ...); list, dict and str: CPython
 * 3.11's dir(); Fabric: Lightning 2.4's API. */
static const struct { const char *type, *members; } real_members[] = {
  {"Fabric",
   "accelerator strategy device global_rank local_rank node_rank world_size is_global_zero "
   "loggers logger launch setup setup_module setup_optimizers setup_dataloaders backward "
   "clip_gradients autocast to_device print barrier broadcast all_gather all_reduce "
   "no_backward_sync sharded_model init_tensor init_module save load load_raw call log "
   "log_dict seed_everything rank_zero_first run"},
  {"list",
   "append clear copy count extend index insert pop remove reverse sort"},
  {"dict",
   "clear copy fromkeys get items keys pop popitem setdefault update values"},
  {"str",
   "capitalize casefold center count encode endswith expandtabs find format format_map index "
   "isalnum isalpha isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace "
   "istitle isupper join ljust lower lstrip maketrans partition removeprefix removesuffix "
   "replace rfind rindex rjust rpartition rsplit rstrip split splitlines startswith strip "
   "swapcase title translate upper zfill"},
  {"Tensor",
   "H T __abs__ __add__ __and__ __array__ __array_priority__ __array_wrap__ __bool__ __class__ "
   "__complex__ __contains__ __cuda_array_interface__ __deepcopy__ __delattr__ __delitem__ "
   "__dict__ __dir__ __div__ __dlpack__ __dlpack_device__ __doc__ __eq__ __float__ __floordiv__ "
   "__format__ __ge__ __getattribute__ __getitem__ __getstate__ __gt__ __hash__ __iadd__ "
   "__iand__ __idiv__ __ifloordiv__ __ilshift__ __imod__ __imul__ __index__ __init__ "
   "__init_subclass__ __int__ __invert__ __ior__ __ipow__ __irshift__ __isub__ __iter__ "
   "__itruediv__ __ixor__ __le__ __len__ __long__ __lshift__ __lt__ __matmul__ __mod__ "
   "__module__ __mul__ __ne__ __neg__ __new__ __nonzero__ __or__ __pos__ __pow__ __radd__ "
   "__rand__ __rdiv__ __reduce__ __reduce_ex__ __repr__ __reversed__ __rfloordiv__ __rlshift__ "
   "__rmatmul__ __rmod__ __rmul__ __ror__ __rpow__ __rrshift__ __rshift__ __rsub__ __rtruediv__ "
   "__rxor__ __setattr__ __setitem__ __setstate__ __sizeof__ __str__ __sub__ __subclasshook__ "
   "__torch_dispatch__ __torch_function__ __truediv__ __weakref__ __xor__ abs abs_ absolute "
   "absolute_ acos acos_ acosh acosh_ add add_ addbmm addbmm_ addcdiv addcdiv_ addcmul addcmul_ "
   "addmm addmm_ addmv addmv_ addr addr_ adjoint align_as align_to all allclose amax amin "
   "aminmax angle any apply_ arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_ "
   "arctan arctan2 arctan2_ arctan_ arctanh arctanh_ argmax argmin argsort argwhere as_strided "
   "as_strided_ as_strided_scatter as_subclass asin asin_ asinh asinh_ atan atan2 atan2_ atan_ "
   "atanh atanh_ backward baddbmm baddbmm_ bernoulli bernoulli_ bfloat16 bincount bitwise_and "
   "bitwise_and_ bitwise_left_shift bitwise_left_shift_ bitwise_not bitwise_not_ bitwise_or "
   "bitwise_or_ bitwise_right_shift bitwise_right_shift_ bitwise_xor bitwise_xor_ bmm bool "
   "broadcast_to byte cauchy_ ccol_indices cdouble ceil ceil_ cfloat chalf char cholesky "
   "cholesky_inverse cholesky_solve chunk clamp clamp_ clamp_max clamp_max_ clamp_min clamp_min_ "
   "clip clip_ clone coalesce col_indices conj conj_physical conj_physical_ contiguous copy_ "
   "copysign copysign_ corrcoef cos cos_ cosh cosh_ count_nonzero cov cpu cross crow_indices "
   "cuda cummax cummin cumprod cumprod_ cumsum cumsum_ data data_ptr deg2rad deg2rad_ dense_dim "
   "dequantize det detach detach_ device diag diag_embed diagflat diagonal diagonal_scatter diff "
   "digamma digamma_ dim dist div div_ divide divide_ dot double dsplit dtype eig element_size "
   "eq eq_ equal erf erf_ erfc erfc_ erfinv erfinv_ exp exp2 exp2_ exp_ expand expand_as expm1 "
   "expm1_ exponential_ fill_ fill_diagonal_ fix fix_ flatten flip fliplr flipud float "
   "float_power float_power_ floor floor_ floor_divide floor_divide_ fmax fmin fmod fmod_ frac "
   "frac_ frexp gather gcd gcd_ ge ge_ geometric_ geqrf ger get_device grad grad_fn greater "
   "greater_ greater_equal greater_equal_ gt gt_ half hardshrink has_names heaviside heaviside_ "
   "histc histogram hsplit hypot hypot_ i0 i0_ igamma igamma_ igammac igammac_ imag index_add "
   "index_add_ index_copy index_copy_ index_fill index_fill_ index_put index_put_ index_reduce "
   "index_reduce_ index_select indices inner int int_repr inverse ipu is_coalesced is_complex "
   "is_conj is_contiguous is_cpu is_cuda is_distributed is_floating_point is_inference is_ipu "
   "is_leaf is_meta is_mkldnn is_mps is_neg is_nested is_nonzero is_ort is_pinned is_quantized "
   "is_same_size is_set_to is_shared is_signed is_sparse is_sparse_csr is_vulkan is_xpu isclose "
   "isfinite isinf isnan isneginf isposinf isreal istft item kron kthvalue layout lcm lcm_ ldexp "
   "ldexp_ le le_ lerp lerp_ less less_ less_equal less_equal_ lgamma lgamma_ log log10 log10_ "
   "log1p log1p_ log2 log2_ log_ log_normal_ log_softmax logaddexp logaddexp2 logcumsumexp "
   "logdet logical_and logical_and_ logical_not logical_not_ logical_or logical_or_ logical_xor "
   "logical_xor_ logit logit_ logsumexp long lstsq lt lt_ lu lu_solve mH mT map2_ map_ "
   "masked_fill masked_fill_ masked_scatter masked_scatter_ masked_select matmul matrix_exp "
   "matrix_power max maximum mean median min minimum mm mode moveaxis movedim msort mul mul_ "
   "multinomial multiply multiply_ mv mvlgamma mvlgamma_ name names nan_to_num nan_to_num_ "
   "nanmean nanmedian nanquantile nansum narrow narrow_copy ndim ndimension ne ne_ neg neg_ "
   "negative negative_ nelement new new_empty new_empty_strided new_full new_ones new_tensor "
   "new_zeros nextafter nextafter_ nonzero norm normal_ not_equal not_equal_ numel numpy orgqr "
   "ormqr outer output_nr permute pin_memory pinverse polygamma polygamma_ positive pow pow_ "
   "prelu prod put put_ q_per_channel_axis q_per_channel_scales q_per_channel_zero_points "
   "q_scale q_zero_point qr qscheme quantile rad2deg rad2deg_ random_ ravel real reciprocal "
   "reciprocal_ record_stream refine_names register_hook reinforce relu relu_ remainder "
   "remainder_ rename rename_ renorm renorm_ repeat repeat_interleave requires_grad "
   "requires_grad_ reshape reshape_as resize resize_ resize_as resize_as_ resize_as_sparse_ "
   "resolve_conj resolve_neg retain_grad retains_grad roll rot90 round round_ row_indices rsqrt "
   "rsqrt_ scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ select "
   "select_scatter set_ sgn sgn_ shape share_memory_ short sigmoid sigmoid_ sign sign_ signbit "
   "sin sin_ sinc sinc_ sinh sinh_ size slice_scatter slogdet smm softmax solve sort sparse_dim "
   "sparse_mask sparse_resize_ sparse_resize_and_clear_ split split_with_sizes sqrt sqrt_ square "
   "square_ squeeze squeeze_ sspaddmm std stft storage storage_offset storage_type stride sub "
   "sub_ subtract subtract_ sum sum_to_size svd swapaxes swapaxes_ swapdims swapdims_ symeig t "
   "t_ take take_along_dim tan tan_ tanh tanh_ tensor_split tile to to_dense to_mkldnn "
   "to_padded_tensor to_sparse to_sparse_bsc to_sparse_bsr to_sparse_coo to_sparse_csc "
   "to_sparse_csr tolist topk trace transpose transpose_ triangular_solve tril tril_ triu triu_ "
   "true_divide true_divide_ trunc trunc_ type type_as unbind unflatten unfold uniform_ unique "
   "unique_consecutive unsafe_chunk unsafe_split unsafe_split_with_sizes unsqueeze unsqueeze_ "
   "values var vdot view view_as volatile vsplit where xlogy xlogy_ xpu zero_"},
  {"Module",
   "weight bias in_features out_features num_embeddings embedding_dim padding_idx "
   "normalized_shape eps elementwise_affine p inplace approximate start_dim end_dim "
   "T_destination __annotations__ __call__ __class__ __delattr__ __dict__ __dir__ __doc__ __eq__ "
   "__format__ __ge__ __getattr__ __getattribute__ __getstate__ __gt__ __hash__ __init__ "
   "__init_subclass__ __le__ __lt__ __module__ __ne__ __new__ __reduce__ __reduce_ex__ __repr__ "
   "__setattr__ __setstate__ __sizeof__ __str__ __subclasshook__ __weakref__ _buffers "
   "_forward_module _modules _original_module _parameters add_module apply bfloat16 buffers "
   "children cpu cuda double dump_patches eval extra_repr float forward get_buffer "
   "get_extra_state get_parameter get_submodule half ipu load_state_dict mark_forward_method "
   "module modules named_buffers named_children named_modules named_parameters parameters "
   "register_backward_hook register_buffer register_forward_hook register_forward_pre_hook "
   "register_full_backward_hook register_load_state_dict_post_hook register_module "
   "register_parameter requires_grad_ set_extra_state share_memory state_dict to to_empty train "
   "training type xpu zero_grad"},
  {"Optimizer",
   "__class__ __delattr__ __dict__ __dir__ __doc__ __eq__ __format__ __ge__ __getattribute__ "
   "__getstate__ __gt__ __hash__ __init__ __init_subclass__ __le__ __lt__ __module__ __ne__ "
   "__new__ __reduce__ __reduce_ex__ __repr__ __setattr__ __setstate__ __sizeof__ __str__ "
   "__subclasshook__ __weakref__ add_param_group defaults load_state_dict optimizer param_groups "
   "state state_dict step zero_grad"},
  {"DataLoader",
   "__annotations__ __class__ __class_getitem__ __delattr__ __dict__ __dir__ __doc__ __eq__ "
   "__format__ __ge__ __getattribute__ __getstate__ __gt__ __hash__ __init__ __init_subclass__ "
   "__iter__ __le__ __len__ __lt__ __module__ __ne__ __new__ __orig_bases__ __parameters__ "
   "__reduce__ __reduce_ex__ __repr__ __setattr__ __sizeof__ __slots__ __str__ __subclasshook__ "
   "__weakref__ batch_sampler batch_size check_worker_number_rationality collate_fn dataset "
   "device drop_last generator multiprocessing_context num_workers persistent_workers pin_memory "
   "pin_memory_device prefetch_factor sampler timeout worker_init_fn"},
  {"Dataset",
   "__add__ __class__ __class_getitem__ __delattr__ __dict__ __dir__ __doc__ __eq__ __format__ "
   "__ge__ __getattribute__ __getitem__ __getstate__ __gt__ __hash__ __init__ __init_subclass__ "
   "__le__ __lt__ __module__ __ne__ __new__ __orig_bases__ __parameters__ __reduce__ "
   "__reduce_ex__ __repr__ __setattr__ __sizeof__ __slots__ __str__ __subclasshook__ __weakref__ "
   "classes data root target_transform targets train transform"},
  {"list",
   "__add__ __class__ __class_getitem__ __contains__ __delattr__ __delitem__ __dir__ __doc__ "
   "__eq__ __format__ __ge__ __getattribute__ __getitem__ __getstate__ __gt__ __hash__ __iadd__ "
   "__imul__ __init__ __init_subclass__ __iter__ __le__ __len__ __lt__ __mul__ __ne__ __new__ "
   "__reduce__ __reduce_ex__ __repr__ __reversed__ __rmul__ __setattr__ __setitem__ __sizeof__ "
   "__str__ __subclasshook__ append clear copy count extend index insert pop remove reverse sort"},
  {"dict",
   "__class__ __class_getitem__ __contains__ __delattr__ __delitem__ __dir__ __doc__ __eq__ "
   "__format__ __ge__ __getattribute__ __getitem__ __getstate__ __gt__ __hash__ __init__ "
   "__init_subclass__ __ior__ __iter__ __le__ __len__ __lt__ __ne__ __new__ __or__ __reduce__ "
   "__reduce_ex__ __repr__ __reversed__ __ror__ __setattr__ __setitem__ __sizeof__ __str__ "
   "__subclasshook__ clear copy fromkeys get items keys pop popitem setdefault update values"},
  {"str",
   "__add__ __class__ __contains__ __delattr__ __dir__ __doc__ __eq__ __format__ __ge__ "
   "__getattribute__ __getitem__ __getnewargs__ __getstate__ __gt__ __hash__ __init__ "
   "__init_subclass__ __iter__ __le__ __len__ __lt__ __mod__ __mul__ __ne__ __new__ __reduce__ "
   "__reduce_ex__ __repr__ __rmod__ __rmul__ __setattr__ __sizeof__ __str__ __subclasshook__ "
   "capitalize casefold center count encode endswith expandtabs find format format_map index "
   "isalnum isalpha isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace "
   "istitle isupper join ljust lower lstrip maketrans partition removeprefix removesuffix "
   "replace rfind rindex rjust rpartition rsplit rstrip split splitlines startswith strip "
   "swapcase title translate upper zfill"},
};

/* Whether word is one of the space-separated words of list. */
static int has_word(const char *list, const char *word, size_t n) {
  for (const char *p = list; *p;) {
    size_t k = strcspn(p, " ");
    if (k == n && !memcmp(p, word, n)) return 1;
    p += k;
    while (*p == ' ') p++;
  }
  return 0;
}

/* The package a top-level name stands for, or NULL when it is foreign. */
static const char *package_of(const char *dotted, size_t *skip) {
  static const struct { const char *name, *as; } packages[] = {
    {"torch", "torch"}, {"torchvision", "torchvision"}, {"lightning", "lightning"},
    {"lightning_fabric", "lightning.fabric"}, {"pytorch_lightning", "lightning.pytorch"},
    {"torchmetrics", "torchmetrics"},
  };
  size_t n = strcspn(dotted, ".");
  for (size_t i = 0; i < sizeof packages / sizeof *packages; i++)
    if (strlen(packages[i].name) == n && !memcmp(packages[i].name, dotted, n)) {
      *skip = n;
      return packages[i].as;
    }
  return NULL;
}

fsSig_ns fsSig_resolve(const char *dotted, const char **row) {
  size_t skip;
  const char *pkg = package_of(dotted, &skip);
  if (!pkg) return FSSIG_NS_FOREIGN;
  const char *rest = dotted + skip; /* "" or ".nn.Linear" */
  const char *last = strrchr(rest, '.');
  if (!last) return FSSIG_NS_MEMBER;
  if (!strcmp(pkg, "torch") && !strcmp(rest, ".float")) { /* torch.float is float32; Python's float is float64 */
    *row = "float32";
    return FSSIG_NS_ROW;
  }
  size_t plen = strlen(pkg), mlen = (size_t)(last - rest);
  for (size_t i = 0; i < sizeof namespaces / sizeof *namespaces; i++) {
    const char *m = namespaces[i].module;
    if (strncmp(m, pkg, plen) || strncmp(m + plen, rest, mlen) || m[plen + mlen]) continue;
    *row = last + 1;
    if (has_word(namespaces[i].rows, last + 1, strlen(last + 1))) return FSSIG_NS_ROW;
    if (has_word(namespaces[i].loose, last + 1, strlen(last + 1))) return FSSIG_NS_LOOSE;
    if (has_word(namespaces[i].modules, last + 1, strlen(last + 1))) return FSSIG_NS_MODULE;
  }
  return FSSIG_NS_MEMBER;
}

int fsSig_real_member(const char *type, const char *member) {
  /* torch's and Lightning's private names (fabric._precision,
   * model._forward_module) are not in the lists but scripts reach for them:
   * not modelled, not errors; CPython's containers have none */
  if (member[0] == '_' && member[1] != '_' && strcmp(type, "list") && strcmp(type, "dict") && strcmp(type, "str"))
    return 1;
  for (size_t i = 0; i < sizeof real_members / sizeof *real_members; i++)
    if (!strcmp(real_members[i].type, type)) return has_word(real_members[i].members, member, strlen(member));
  return 0;
}

int fsSig_run_importable(const char *dotted) {
  static const char *const own[] = {"math", "time", "typing", "__future__", "functools"};
  size_t skip, n = strcspn(dotted, ".");
  if (package_of(dotted, &skip)) return 1;
  for (size_t i = 0; i < sizeof own / sizeof *own; i++)
    if (strlen(own[i]) == n && !memcmp(own[i], dotted, n)) return 1;
  return 0;
}
