/* module.h -- the module tree: torch.nn.Sequential semantics and naming.
 *
 * Building and initializing are separate steps.  Builders make modules whose
 * parameters are meta tensors (shape and dtype, no storage): building a 7B
 * model costs a few kilobytes.  A parameter's initial values depend only on
 * (seed, its full state-dict name, element index) -- see rng.h -- so the
 * caller materializes the ROOT once the whole tree is assembled (names are
 * known only then): directly after building for a normal model, or at
 * fabric.setup for one created on the meta device.  Both give bitwise the
 * same values.
 *
 * State-dict keys (docs/runtime.md has the full scheme):
 *   - a child of a Sequential (a model body) is keyed by its name if it was
 *     assigned (`fc1 = Linear(..)` -> `fc1.`) else by its index among all
 *     children of that sequence (`0.`, `2.`);
 *   - a Residual is a Sequential child like any other; its body's layers are
 *     keyed by their index in the body: residual at index 0 whose body is
 *     (LayerNorm, CausalSelfAttention) gives `0.0.weight`, `0.1.c_attn.weight`;
 *   - Repeat(N, body) holds N deep copies keyed `0.` .. `N-1.`, so a named
 *     repeat gives `h.0.` .. and an anonymous one at index 2 gives `2.0.` ..;
 *     a body that is a Sequential of one anonymous layer is that layer
 *     (`h.0.ln.weight`, not `h.0.0.ln.weight`);
 *   - leaves: Linear `weight` [out,in], `bias` [out]; Embedding `weight`
 *     [num,dim]; PositionalEmbedding `weight` [context,dim]; LayerNorm
 *     `weight`, `bias` [dim]; CausalSelfAttention has child Linears `c_attn`
 *     (dim -> 3*dim) and `c_proj` (dim -> dim);
 *   - Conv1d/Conv2d `weight` [out, in/groups, kernel...], `bias` [out];
 *     BatchNorm1d/2d `weight`, `bias` [features] (affine) and the BUFFERS
 *     `running_mean`, `running_var` [features] (f32) and
 *     `num_batches_tracked` (0-d int64) when track_running_stats;
 *     GroupNorm `weight`, `bias` [channels]; RMSNorm `weight` [normalized_shape];
 *     ConvTranspose2d `weight` [in, out/groups, kH, kW], `bias` [out];
 *     MultiheadAttention `in_proj_weight` [3E, E], `in_proj_bias` [3E] and the
 *     child Linear `out_proj` (E -> E).
 *
 * Buffers (torch's register_buffer): tensors a module keeps and updates in
 * its forward without gradients.  They are not parameters: fsM_parameters
 * (and so optimizers, gradient clipping, DDP's gradient reduction and FSDP's
 * flat shards) never sees them; fsM_state lists parameters and buffers in
 * torch's state_dict order (per module: its parameters, then its buffers),
 * which is what state_dict() and checkpoints save.  They materialize, move
 * and reset with the parameters (running_mean 0, running_var 1,
 * num_batches_tracked 0); under FSDP every rank holds them whole
 * (fsM_materialize_buffers), as torch's FSDP does not shard buffers.
 *
 * Ownership: modules are reference counted like tensors; a parent owns one
 * reference to each child; fsM_append takes over the caller's reference. */
#ifndef FS_MODULE_H
#define FS_MODULE_H

#include "tensor.h"

typedef enum fsM_kind {
  FSM_SEQUENTIAL, FSM_RESIDUAL, FSM_REPEAT,
  FSM_LINEAR, FSM_EMBEDDING, FSM_POSEMB, FSM_LAYERNORM,
  FSM_RELU, FSM_GELU, FSM_TANH, FSM_SIGMOID, FSM_SILU,
  FSM_DROPOUT, FSM_FLATTEN, FSM_ATTENTION,
  FSM_CONV1D, FSM_CONV2D, FSM_BATCHNORM1D, FSM_BATCHNORM2D,
  FSM_MAXPOOL2D, FSM_AVGPOOL2D, FSM_ADAPTIVEAVGPOOL2D,
  FSM_LEAKYRELU, FSM_SOFTMAX, FSM_MISH, FSM_GROUPNORM, FSM_RMSNORM, FSM_UPSAMPLE,
  FSM_CONVTRANSPOSE2D, FSM_MHA,
  FSM_CUSTOM,   /* a script's own class: its forward is a callback (fsM_custom) */
  FSM_MODULELIST, /* nn.ModuleList: children keyed 0, 1, ...; no forward of its own */
  FSM_IDENTITY, /* nn.Identity */
  FSM_PARAM,    /* a script Module's own parameter: a leaf holding one tensor, named by its key alone */
  FSM_MODULEDICT, /* nn.ModuleDict: children keyed by the script's strings; no forward of its own */
  FSM_BUFFER,   /* a script Module's register_buffer: a leaf holding buffers[0], named by its key alone */
  FSM__COUNT
} fsM_kind;

#define FSM_MAX_PARAMS 2
#define FSM_MAX_BUFFERS 3

typedef struct fs_module fs_module;

/* A module whose forward the runtime does not know: a script's
 * `class M(nn.Module)`, whose forward the evaluator interprets.  The runtime
 * must not include the interpreter, so the module holds this hook: the
 * evaluator embeds it first in a struct of its own (its class, the
 * instance's attributes) and casts back in the callbacks.  The module owns
 * the hook: fsM_release calls release once the module dies.  Its children
 * (kids) are the modules the script assigned as attributes, keyed by the
 * attribute's name, so naming, parameters, init, train/eval and
 * checkpoints treat it as any other parent. */
typedef struct fsM_custom fsM_custom;
struct fsM_custom {
  const char *class_name;                                   /* "Net" (owned by the hook) */
  fs_tensor *(*forward)(fsM_custom *c, fs_module *m, fs_tensor *x); /* NULL + fsT_error */
  void (*release)(fsM_custom *c);
};

struct fs_module {
  int refcount;
  fsM_kind kind;
  char *key;                 /* key in the parent ("fc1", "0"); NULL at the root */
  bool named;                /* key was given by the script, not an index */
  fs_module **kids; int nkids, capkids;
  fs_tensor *params[FSM_MAX_PARAMS]; int nparams;  /* own parameters only */
  int64_t in, out;           /* Linear in/out; Embedding num/dim; LayerNorm dim;
                                PosEmb context/dim; Attention dim/heads; Repeat n */
  double p;                  /* LayerNorm eps; Dropout p */
  bool bias;                 /* Linear, Attention */
  bool tanh_approx;          /* GELU(approximate="tanh") */
  bool zero_bias_init;       /* Linear: bias starts at 0 (MultiheadAttention's out_proj) */
  bool batch_first;          /* MultiheadAttention */
  bool training;             /* train()/eval(); modules start in training mode */
  uint64_t calls;            /* Dropout: forward calls so far (mask counter) */
  uint64_t seed;             /* Dropout: rng key of (seed, its full name), set by
                                fsM_materialize; masks use (key, calls) */
  /* Conv and pooling windows, [H, W] (1-d layers use index 1 only);
   * Conv in/out are in/out, BatchNorm's features are in */
  int64_t kernel[2], stride[2], pad[2], dil[2], groups, output_pad[2];
  bool ceil_mode, count_include_pad;
  double momentum;           /* BatchNorm; NaN = None (a cumulative average) */
  int64_t normalized[2]; int nnormalized; /* RMSNorm's normalized_shape */
  /* Upsample: size (n values: 1 = one for every spatial dim) or, n == 0,
   * scale factors (n_scale values, 1 = one for every dim) */
  int64_t up_size[2]; double up_scale[2]; int up_n, up_nscale;
  fs_tensor *buffers[FSM_MAX_BUFFERS]; int nbuffers; /* see "Buffers" above */
  fsM_custom *custom;        /* FSM_CUSTOM: the forward hook (owned) */
  bool transient;            /* FSM_BUFFER: register_buffer(persistent=False), not in the state dict */
  /* FSDP: the sharded model this module is a unit of (borrowed; set and
   * cleared by runtime/dist/fsdp.c) and its unit index; NULL otherwise.
   * A caller that runs the module itself (the evaluator, for a unit inside a
   * script class's forward) brackets the run with fsSH_enter/fsSH_leave. */
  struct fsSH_model *shard; int shard_unit;
};

/* Builders (NULL + fsT_error on a bad argument such as Linear(0, 3)). */
fs_module *fsM_sequential(void);
fs_module *fsM_residual(void);              /* children appended like a sequence */
fs_module *fsM_repeat(int64_t n, fs_module *body); /* takes body; deep copies */
fs_module *fsM_linear(int64_t in, int64_t out, bool bias);
fs_module *fsM_embedding(int64_t num, int64_t dim);
fs_module *fsM_posemb(int64_t context, int64_t dim);
fs_module *fsM_layernorm(int64_t dim, double eps);
fs_module *fsM_activation(fsM_kind kind);   /* RELU, TANH, SIGMOID, SILU, FLATTEN */
fs_module *fsM_gelu(bool tanh_approx);
fs_module *fsM_dropout(double p);           /* 0 <= p <= 1 */
fs_module *fsM_attention(int64_t dim, int64_t heads, bool bias); /* dim % heads == 0 */
/* Conv1d (nd 1) / Conv2d (nd 2): kernel, stride, pad, dil hold nd values */
fs_module *fsM_conv(int nd, int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                    const int64_t *pad, const int64_t *dil, int64_t groups, bool bias);
/* ConvTranspose2d: arrays of 2 ([H, W]) */
fs_module *fsM_conv_transpose2d(int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                                const int64_t *pad, const int64_t *output_pad, const int64_t *dil,
                                int64_t groups, bool bias);
/* MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first); it
 * takes (query, key, value): fsM_mha_forward, not fsM_forward */
fs_module *fsM_mha(int64_t embed, int64_t heads, double dropout, bool bias, bool batch_first);
/* *weights: NULL when not wanted; masks as fsG_multihead_attention's */
fs_tensor *fsM_mha_forward(fs_module *m, fs_tensor *q, fs_tensor *k, fs_tensor *v, fs_tensor *key_padding_mask,
                           fs_tensor *attn_mask, bool average, fs_tensor **weights);
/* BatchNorm1d (nd 1) / BatchNorm2d (nd 2); momentum NaN = None */
fs_module *fsM_batchnorm(int nd, int64_t features, double eps, double momentum, bool affine,
                         bool track_running_stats);
/* MaxPool2d / AvgPool2d (kind); stride defaults to the kernel at the caller */
fs_module *fsM_pool2d(fsM_kind kind, const int64_t *kernel, const int64_t *stride, const int64_t *pad,
                      const int64_t *dil, bool ceil_mode, bool count_include_pad);
/* AdaptiveAvgPool2d; a size < 0 keeps that input dim (torch's None) */
fs_module *fsM_adaptive_avg_pool2d(const int64_t *size);
fs_module *fsM_leaky_relu(double negative_slope);
fs_module *fsM_softmax(int64_t dim, bool dim_none); /* dim None: torch's legacy choice */
fs_module *fsM_mish(void);
/* Upsample(mode='nearest'): nsize sizes (1: every spatial dim) or, nsize
 * 0, nscale scale factors */
fs_module *fsM_upsample(int nsize, const int64_t *size, int nscale, const double *scale);
fs_module *fsM_groupnorm(int64_t groups, int64_t channels, double eps, bool affine);
/* normalized_shape of nd (1 or 2) dims; eps NaN = None */
fs_module *fsM_rmsnorm(int nd, const int64_t *shape, double eps, bool affine);
fs_module *fsM_custom_new(fsM_custom *hook); /* takes hook (released on failure) */
fs_module *fsM_container(fsM_kind kind);    /* an empty SEQUENTIAL, MODULELIST, MODULEDICT or IDENTITY */
/* A holder of parameter t (retained) for fsM_set_child: the parent's own
 * parameter `key` (state-dict name "<parent>.key"), listed before the
 * parent's modules as torch lists _parameters before _modules.  Its values
 * are the script's: materializing and reset_parameters leave them. */
fs_module *fsM_param_holder(fs_tensor *t);
/* A holder of buffer t (retained) for fsM_set_child: the parent's buffer
 * `key` (register_buffer), listed after its parameters and before its
 * modules, as torch lists _buffers; transient: persistent=False, so not in
 * the state dict.  Its values are the script's (as fsM_param_holder's). */
fs_module *fsM_buffer_holder(fs_tensor *t, bool transient);
/* The index of a built-in layer's parameter by its name ("weight", "bias"),
 * or -1; an index >= nparams: the layer has no such parameter this time
 * (Linear(..., bias=False)'s bias). */
int fsM_param_index(const fs_module *m, const char *name);
/* Ties parameter i of m to t (retained; same shape and dtype): weight
 * tying, `lm_head.weight = wte.weight`.  -1 + fsT_error. */
int fsM_tie_param(fs_module *m, int i, fs_tensor *t);
/* Sets child under key in a custom module: replaces a child of that name,
 * else appends.  Takes the caller's reference to child; -1 + fsT_error. */
int fsM_set_child(fs_module *m, const char *key, fs_module *child);
/* Removes m's child under key, if any (a buffer set to None). */
void fsM_remove_child(fs_module *m, const char *key);
/* Appends child to a Sequential or Residual; key NULL means anonymous (keyed
 * by its index).  Takes the caller's reference to child.  -1 on a duplicate
 * name (fsT_error "duplicate layer name 'fc1'"); child is released then. */
int fsM_append(fs_module *seq, const char *key, fs_module *child);
fs_module *fsM_clone(const fs_module *m);   /* deep copy (values too) */
fs_module *fsM_retain(fs_module *m);
void fsM_release(fs_module *m);

const char *fsM_kind_name(fsM_kind kind);   /* "Linear", "Sequential", ... */

/* Parameters in state-dict order (PyTorch's parameters() order); a tensor
 * held twice (a tied parameter) is listed once, under its first name. */
typedef struct fsM_param {
  char *name;          /* full state-dict key, "h.0.0.1.c_attn.weight" */
  fs_tensor *t;        /* borrowed from the module */
  fs_module *owner;    /* the leaf that owns it */
  int index;           /* index in owner->params */
} fsM_param;
/* *out gets a malloc'd array (free with fsM_params_free); returns the count,
 * or -1 on out of memory. */
int64_t fsM_parameters(fs_module *m, fsM_param **out);
void fsM_params_free(fsM_param *ps, int64_t n);
int64_t fsM_num_parameters(const fs_module *m);  /* total elements */
/* The state dict's entries in torch's order: parameters (a tied one under
 * each of its names, as torch's state_dict keeps both keys) and buffers
 * (index >= nparams is buffer index - nparams); as fsM_parameters. */
int64_t fsM_state(fs_module *m, fsM_param **out);
/* Every buffer (persistent or not) in state-dict order: torch's buffers(). */
int64_t fsM_buffers(fs_module *m, fsM_param **out);
/* Gives every buffer still on meta storage on dev with its initial values
 * (FSDP's setup: parameters come as shards, buffers whole). */
int fsM_materialize_buffers(fs_module *m, fs_device dev);

/* Static shape inference: out = shape of m(x) for x of shape in.  A dim of -1
 * is unknown (e.g. the batch) and propagates.  On a mismatch returns -1,
 * points *bad at the offending leaf and writes PyTorch's message to err, e.g.
 * "mat1 and mat2 shapes cannot be multiplied (?x256 and 128x10)". */
int fsM_out_shape(const fs_module *m, int in_rank, const int64_t *in,
                  int *out_rank, int64_t *out, const fs_module **bad,
                  char *err, size_t errlen);

void fsM_train(fs_module *m, bool training);     /* recursive, as torch */

/* Gives every meta parameter storage on dev and initializes it by running
 * each module's own reset_parameters.  Parameters already holding storage
 * are left as they are.  -1 + fsT_error on failure. */
int fsM_materialize(fs_module *m, fs_device dev, uint64_t seed);
/* to_empty: storage on dev, values uninitialized; existing values are lost. */
int fsM_to_empty(fs_module *m, fs_device dev);
/* Moves every materialized parameter to dev (meta ones stay meta). */
int fsM_to_device(fs_module *m, fs_device dev);
/* module.to(dtype): every float parameter and buffer holding data
 * converted in place (meta ones stay float32 until materialized; setup
 * converts them then).  -1 + fsT_error. */
int fsM_to_dtype(fs_module *m, fs_dtype dt);
/* Re-runs every module's reset_parameters (parameters must have storage). */
int fsM_reset_parameters(fs_module *m, uint64_t seed);
/* One parameter's initial values [offset, offset + n) into dst, floats on
 * device dev: the per-module reset_parameters rule (Linear U(-1/sqrt(in),
 * 1/sqrt(in)), Embedding and PositionalEmbedding N(0,1), LayerNorm weight 1
 * bias 0), keyed by the full state-dict name.  This is what an FSDP rank
 * calls for its shard.  -1 + fsT_error when dev has no backend. */
int fsM_init_param(const fs_module *owner, int index, const char *name, uint64_t seed,
                   fs_device dev, float *dst, size_t offset, size_t n);

/* model(x): runs the forward pass, recording on the autograd tape unless
 * fsG_no_grad is on.  Returns a new reference, or NULL + fsT_error (shape
 * mismatch, parameters still on meta, ...). */
fs_tensor *fsM_forward(fs_module *m, fs_tensor *x);

#endif
