/* test_plan.c -- the memory plan's estimator (interp/eval/plan.h).
 *
 * The activation walk is held to the runtime itself: a real forward with
 * grad on a GPT-shaped model and on an MLP records a tape, and the bytes
 * of every distinct storage the tape keeps (node inputs, saved buffers, the
 * output; parameters aside) must equal plan_act.c's `saved` exactly.  Then
 * the per-rank formulas (precision sizes, FSDP shards, the gathered unit),
 * --gpu-memory's parsing, and the fit with its smallest change. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "autograd.h"
#include "autograd_int.h"
#include "plan.h"

/* ---- the tape's bytes ---- */

typedef struct seen {
  const void *p[4096];
  int n;
  uint64_t bytes;
} seen;

static void count(seen *s, const fs_tensor *t) {
  if (!t || (!t->node && t->requires_grad)) return; /* a parameter */
  const fs_tensor *st = t;
  while (st->base) st = st->base; /* a view: its base's storage */
  for (int i = 0; i < s->n; i++)
    if (s->p[i] == st) return;
  assert_true(s->n < 4096);
  s->p[s->n++] = st;
  s->bytes += fsT_nbytes(st);
}

static void walk_tape(seen *s, const fs_tensor *t) {
  count(s, t);
  if (!t->node) return;
  for (int i = 0; i < 2; i++) count(s, t->node->saved[i]);
  for (int i = 0; i < 3; i++)
    if (t->node->in[i]) walk_tape(s, t->node->in[i]);
}

static const fsPL_sizes f32 = {4, 4, 4, 4, 4, false};

static fs_module *append(fs_module *seq, const char *key, fs_module *m) {
  assert_non_null(m);
  assert_int_equal(fsM_append(seq, key, m), 0);
  return seq;
}

/* Embedding, PositionalEmbedding, 2 blocks of (residual: LayerNorm,
 * attention; residual: LayerNorm, Linear, GELU, Linear), LayerNorm, head. */
static fs_module *gpt(int64_t vocab, int64_t context, int64_t dim, int64_t heads) {
  fs_module *root = fsM_sequential(), *block = fsM_sequential(), *a = fsM_residual(), *f = fsM_residual();
  append(a, NULL, fsM_layernorm(dim, 1e-5));
  append(a, NULL, fsM_attention(dim, heads, true));
  append(f, NULL, fsM_layernorm(dim, 1e-5));
  append(f, NULL, fsM_linear(dim, 4 * dim, true));
  append(f, NULL, fsM_gelu(false));
  append(f, NULL, fsM_linear(4 * dim, dim, true));
  append(block, NULL, a);
  append(block, NULL, f);
  append(root, "wte", fsM_embedding(vocab, dim));
  append(root, "wpe", fsM_posemb(context, dim));
  append(root, "h", fsM_repeat(2, block));
  append(root, "ln_f", fsM_layernorm(dim, 1e-5));
  append(root, "lm_head", fsM_linear(dim, vocab, false));
  return root;
}

/* Flatten, Linear, ReLU, Dropout, Linear, Tanh, Linear */
static fs_module *mlp(void) {
  fs_module *root = fsM_sequential();
  append(root, NULL, fsM_activation(FSM_FLATTEN));
  append(root, "fc1", fsM_linear(12, 16, true));
  append(root, NULL, fsM_activation(FSM_RELU));
  append(root, NULL, fsM_dropout(0.25));
  append(root, "fc2", fsM_linear(16, 16, true));
  append(root, NULL, fsM_activation(FSM_TANH));
  append(root, "fc3", fsM_linear(16, 5, false));
  return root;
}

/* The tape of m(x) keeps exactly what the walk says. */
static void same_as_tape(fs_module *m, fs_tensor *x) {
  assert_int_equal(fsM_materialize(m, FS_DEV_CPU, 3), 0);
  fs_tensor *y = fsM_forward(m, x);
  assert_non_null(y);
  seen *s = calloc(1, sizeof *s);
  assert_non_null(s);
  walk_tape(s, y);
  fsPL_acts a;
  char err[160];
  assert_int_equal(fsPL_activations(m, x->rank, x->shape, (int)fsT_dtype_size(x->dtype), &f32, &a, err, sizeof err), 0);
  assert_int_equal(a.saved, s->bytes);
  assert_true(a.transient >= 2 * fsT_nbytes(y)); /* at least the output and its gradient */
  free(s);
  fsG_detach(y);
  fsT_release(y);
}

static void test_gpt_tape(void **state) {
  (void)state;
  fs_module *m = gpt(11, 6, 8, 2);
  int64_t shape[2] = {3, 5};
  fs_tensor *x = fsT_zeros(FS_I64, FS_DEV_CPU, 2, shape);
  assert_non_null(x);
  for (int i = 0; i < 15; i++) ((int64_t *)x->data)[i] = i % 11;
  same_as_tape(m, x);
  fsT_release(x);
  fsM_release(m);
}

static void test_mlp_tape(void **state) {
  (void)state;
  fs_module *m = mlp();
  int64_t shape[3] = {4, 3, 4};
  fs_tensor *x = fsT_zeros(FS_F32, FS_DEV_CPU, 3, shape);
  assert_non_null(x);
  same_as_tape(m, x);
  fsM_train(m, false); /* Dropout in eval mode makes nothing */
  fsPL_acts train, eval;
  char err[160];
  fsM_train(m, true);
  assert_int_equal(fsPL_activations(m, 3, shape, 4, &f32, &train, err, sizeof err), 0);
  fsM_train(m, false);
  assert_int_equal(fsPL_activations(m, 3, shape, 4, &f32, &eval, err, sizeof err), 0);
  assert_int_equal(train.saved - eval.saved, 4 * 16 * 4);
  same_as_tape(m, x);
  fsT_release(x);
  fsM_release(m);
}

/* By hand: Linear(4, 8), ReLU, Linear(8, 2) on [3, 4]. */
static void test_mlp_by_hand(void **state) {
  (void)state;
  fs_module *m = fsM_sequential();
  append(m, NULL, fsM_linear(4, 8, true));
  append(m, NULL, fsM_activation(FSM_RELU));
  append(m, NULL, fsM_linear(8, 2, true));
  int64_t in[2] = {3, 4};
  fsPL_acts a;
  char err[160];
  assert_int_equal(fsPL_activations(m, 2, in, 4, &f32, &a, err, sizeof err), 0);
  assert_int_equal(a.saved, 48 + 96 + 96 + 24);   /* batch, linear, relu, linear */
  /* gradients alive at once, per size (blocks are reused by exact size
   * only): relu's output and input gradients (2 x 96), the loss's and the
   * output's (2 x 24); the batch has none */
  assert_int_equal(a.transient, 2 * 96 + 2 * 24);
  /* checkpointing: the units' outputs (both linears) and the ReLU's, plus one unit recomputed */
  assert_int_equal(a.ckpt_saved, 48 + 96 + 96 + 24);
  assert_int_equal(a.ckpt_unit, 96);
  /* bf16-mixed: the linears write bf16, and keep a bf16 copy of a float32 input */
  fsPL_sizes mixed;
  assert_int_equal(fsPL_precision_sizes("bf16-mixed", &mixed), 0);
  assert_int_equal(fsPL_activations(m, 2, in, 4, &mixed, &a, err, sizeof err), 0);
  assert_int_equal(a.saved, 48 + (24 + 48) + 48 + 12);
  /* a shape that does not fit: PyTorch's words */
  int64_t bad[2] = {3, 5};
  assert_int_equal(fsPL_activations(m, 2, bad, 4, &f32, &a, err, sizeof err), -1);
  assert_non_null(strstr(err, "mat1 and mat2 shapes cannot be multiplied"));
  fsM_release(m);
}

/* ---- the convolutional layers ---- */

static const int64_t one2[2] = {1, 1}, zero2[2] = {0, 0}, two2[2] = {2, 2}, three2[2] = {3, 3};

static fs_module *conv2d(int64_t in, int64_t out, const int64_t *k, const int64_t *pad) {
  return fsM_conv(2, in, out, k, one2, pad, one2, 1, true);
}

static fs_module *pool(fsM_kind kind, const int64_t *k) { return fsM_pool2d(kind, k, k, zero2, one2, false, false); }

/* Every layer kind of issue 14 but MultiheadAttention (no layer of a body):
 * [2, 2, 6, 6] -> Conv2d(2, 4, 3, padding=1), BatchNorm2d, LeakyReLU,
 * MaxPool2d(2), GroupNorm(2, 4), Mish, Upsample(scale 2), AvgPool2d(2),
 * ConvTranspose2d(4, 3, 2, stride=2), AdaptiveAvgPool2d(2), Softmax(1),
 * Flatten, RMSNorm(12), Identity, Linear(12, 5). */
static fs_module *cnn2d(void) {
  fs_module *root = fsM_sequential();
  double scale = 2;
  append(root, NULL, conv2d(2, 4, three2, one2));
  append(root, NULL, fsM_batchnorm(2, 4, 1e-5, 0.1, true, true));
  append(root, NULL, fsM_leaky_relu(0.1));
  append(root, NULL, pool(FSM_MAXPOOL2D, two2));
  append(root, NULL, fsM_groupnorm(2, 4, 1e-5, true));
  append(root, NULL, fsM_mish());
  append(root, NULL, fsM_upsample(0, NULL, 1, &scale));
  append(root, NULL, pool(FSM_AVGPOOL2D, two2));
  append(root, NULL, fsM_conv_transpose2d(4, 3, two2, two2, zero2, zero2, one2, 1, true));
  append(root, NULL, fsM_adaptive_avg_pool2d(two2));
  append(root, NULL, fsM_softmax(1, false));
  append(root, NULL, fsM_activation(FSM_FLATTEN));
  int64_t twelve = 12;
  append(root, NULL, fsM_rmsnorm(1, &twelve, 1e-6, true));
  append(root, NULL, fsM_container(FSM_IDENTITY));
  append(root, NULL, fsM_linear(12, 5, true));
  return root;
}

/* [2, 2, 8] -> Conv1d(2, 3, 3), BatchNorm1d(3), ReLU, Upsample(size=10) */
static fs_module *cnn1d(void) {
  fs_module *root = fsM_sequential();
  int64_t k = 3, s = 1, p = 0, d = 1, ten = 10;
  append(root, NULL, fsM_conv(1, 2, 3, &k, &s, &p, &d, 1, true));
  append(root, NULL, fsM_batchnorm(1, 3, 1e-5, 0.1, true, true));
  append(root, NULL, fsM_activation(FSM_RELU));
  append(root, NULL, fsM_upsample(1, &ten, 0, NULL));
  return root;
}

static void test_cnn_tape(void **state) {
  (void)state;
  int64_t shape2[4] = {2, 2, 6, 6}, shape1[3] = {2, 2, 8};
  fs_module *m = cnn2d();
  fs_tensor *x = fsT_zeros(FS_F32, FS_DEV_CPU, 4, shape2);
  assert_non_null(x);
  for (int64_t i = 0; i < x->numel; i++) fsT_f32(x)[i] = (float)(i % 7) - 3;
  same_as_tape(m, x);
  fsT_release(x);
  fsM_release(m);
  m = cnn1d();
  x = fsT_zeros(FS_F32, FS_DEV_CPU, 3, shape1);
  assert_non_null(x);
  for (int64_t i = 0; i < x->numel; i++) fsT_f32(x)[i] = (float)(i % 5);
  same_as_tape(m, x);
  fsT_release(x);
  fsM_release(m);
}

/* By hand: [2, 3, 8, 8] -> Conv2d(3, 4, 3, padding=1), BatchNorm2d(4),
 * ReLU, MaxPool2d(2), Flatten, Linear(64, 10). */
static void test_cnn_by_hand(void **state) {
  (void)state;
  fs_module *m = fsM_sequential();
  append(m, NULL, conv2d(3, 4, three2, one2));
  append(m, NULL, fsM_batchnorm(2, 4, 1e-5, 0.1, true, true));
  append(m, NULL, fsM_activation(FSM_RELU));
  append(m, NULL, pool(FSM_MAXPOOL2D, two2));
  append(m, NULL, fsM_activation(FSM_FLATTEN));
  append(m, NULL, fsM_linear(64, 10, true));
  int64_t in[4] = {2, 3, 8, 8};
  fsPL_acts a;
  char err[160];
  assert_int_equal(fsPL_activations(m, 4, in, 4, &f32, &a, err, sizeof err), 0);
  /* batch 384 floats; conv [2,4,8,8]; batchnorm the same + mean and 1/std of
   * 4 channels; relu; maxpool [2,4,4,4] + its int64 argmax; linear [2,10] */
  assert_int_equal(a.saved, 1536 + 2048 + (2048 + 32) + 2048 + (512 + 1024) + 80);
  /* gradients alive at once, per size: two of [2,4,8,8] (batchnorm's and
   * relu's backward), one of [2,4,4,4] (maxpool's), two of [2,10] (the
   * loss's); the batch has none.  Then cnn.c's scratch in the conv's
   * backward: K = 3*3*3 = 27 rows, P = 64 columns an image, 2^18 / (27*64)
   * > 2 images a chunk, so both: columns 27*2*64 floats, gathered gradient
   * 4*2*64 floats (one thread's); 2 images are 2 slices, so one partial
   * weight gradient of 4*27 floats */
  assert_int_equal(a.transient, 2 * 2048 + 512 + 2 * 80 + 4 * (27 * 2 * 64 + 4 * 2 * 64 + 4 * 27));
  /* bf16-mixed: the conv writes bf16 and keeps a bf16 copy of its float32
   * input; batchnorm, relu and maxpool keep the input's type; the linear's
   * input is bf16 already: no copy */
  fsPL_sizes mixed;
  assert_int_equal(fsPL_precision_sizes("bf16-mixed", &mixed), 0);
  assert_int_equal(fsPL_activations(m, 4, in, 4, &mixed, &a, err, sizeof err), 0);
  assert_int_equal(a.saved, 1536 + (1024 + 768) + (1024 + 32) + 1024 + (256 + 1024) + 40);
  assert_int_equal(a.transient, 2 * 1024 + 256 + 2 * 40 + 4 * (27 * 2 * 64 + 4 * 2 * 64 + 4 * 27)); /* the scratch is float32 */
  int64_t bad[4] = {2, 5, 8, 8};
  assert_int_equal(fsPL_activations(m, 4, bad, 4, &f32, &a, err, sizeof err), -1);
  assert_non_null(strstr(err, "expected input[2, 5, 8, 8] to have 3 channels, but got 5 channels instead"));
  fsM_release(m);

  /* [1, 4, 3, 3] -> ConvTranspose2d(4, 2, 2, stride=2) -> [1, 2, 6, 6]: the
   * gradient of a convolution of [1,2,6,6] by a 2x2 kernel of stride 2 to 4
   * channels, so K = 2*2*2 = 8 rows and P = 3*3 columns; backward first
   * computes the input's gradient aside (36 floats) with a forward's columns
   * (8*9 floats), then the weight's with one image's columns (8*9) */
  m = fsM_sequential();
  append(m, NULL, fsM_conv_transpose2d(4, 2, two2, two2, zero2, zero2, one2, 1, true));
  int64_t tin[4] = {1, 4, 3, 3};
  assert_int_equal(fsPL_activations(m, 4, tin, 4, &f32, &a, err, sizeof err), 0);
  assert_int_equal(a.saved, 144 + 288);
  assert_int_equal(a.transient, 2 * 288 + (144 + 4 * 72)); /* the loss's gradients, the scratch */
  fsM_release(m);

  /* [2, 2, 8] -> Conv1d(2, 3, 3) [2,3,6], BatchNorm1d(3), ReLU,
   * Upsample(size=10) [2,3,10] with its 10 int64 source indices */
  m = cnn1d();
  int64_t lin[3] = {2, 2, 8};
  assert_int_equal(fsPL_activations(m, 3, lin, 4, &f32, &a, err, sizeof err), 0);
  assert_int_equal(a.saved, 128 + 144 + (144 + 24) + 144 + (240 + 80));
  /* two gradients of [2,3,6], two of [2,3,10]; the conv's scratch: K = 2*3
   * = 6 rows, P = 6 columns, both images: 6*2*6 + 3*2*6 floats, and the
   * second slice's partial weight gradient, 3*6 floats */
  assert_int_equal(a.transient, 2 * 144 + 2 * 240 + 4 * (72 + 36 + 18));
  fsM_release(m);
}

/* By hand: [2, 4, 4, 4] -> GroupNorm(2, 4), Mish, LeakyReLU, AvgPool2d(2),
 * Upsample(size=(3, 5)), AdaptiveAvgPool2d((1, None)), Softmax(3),
 * RMSNorm((1, 5)). */
static void test_norms_by_hand(void **state) {
  (void)state;
  fs_module *m = fsM_sequential();
  int64_t size[2] = {3, 5}, adaptive[2] = {1, -1}, rms[2] = {1, 5};
  append(m, NULL, fsM_groupnorm(2, 4, 1e-5, true));
  append(m, NULL, fsM_mish());
  append(m, NULL, fsM_leaky_relu(0.01));
  append(m, NULL, pool(FSM_AVGPOOL2D, two2));
  append(m, NULL, fsM_upsample(2, size, 0, NULL));
  append(m, NULL, fsM_adaptive_avg_pool2d(adaptive));
  append(m, NULL, fsM_softmax(3, false));
  append(m, NULL, fsM_rmsnorm(2, rms, 1e-6, true));
  int64_t in[4] = {2, 4, 4, 4};
  fsPL_acts a;
  char err[160];
  assert_int_equal(fsPL_activations(m, 4, in, 4, &f32, &a, err, sizeof err), 0);
  assert_int_equal(a.saved, 512                       /* the batch, 128 floats */
                            + 512 + 2 * 4 * 2 * 2     /* groupnorm: mean and 1/std per (image, group) */
                            + 512 + 512               /* mish, leaky_relu */
                            + 128                     /* avgpool [2,4,2,2] */
                            + 192 + 24 + 480 + 40     /* upsample: [2,4,3,2], 3 indices, [2,4,3,5], 5 */
                            + 160 + 160               /* adaptive [2,4,1,5], softmax */
                            + 160 + 4 * 8);           /* rmsnorm: 1/rms of 8 rows of 5 */
  /* gradients from groupnorm's output on (it has parameters): two of the
   * input's size, one of each pooled and upsampled size, two of [2,4,1,5] */
  assert_int_equal(a.transient, 2 * 512 + 128 + 192 + 480 + 2 * 160);
  fsM_release(m);
}

/* ---- per rank ---- */

static fsPL_input input(fs_module *m, const char *precision, int world, bool sharded) {
  return (fsPL_input){.strategy = sharded ? "FSDPStrategy" : "DDPStrategy", .accelerator = "cuda",
                      .precision = precision, .world = world, .devices = world, .num_nodes = 1,
                      .sharded = sharded, .model = m, .model_class = "MLP", .optimizer = "Adam", .states = 2};
}

static void test_rank_bytes(void **state) {
  (void)state;
  fs_module *m = fsM_sequential(); /* units of 40 and 18 elements */
  append(m, NULL, fsM_linear(4, 8, true));
  append(m, NULL, fsM_activation(FSM_RELU));
  append(m, NULL, fsM_linear(8, 2, true));
  fsPL_rank b;
  fsPL_input in = input(m, "32-true", 1, false);
  assert_int_equal(fsPL_rank_bytes(&in, 0, &b), 0);
  assert_int_equal(b.params, 4 * 58);
  assert_int_equal(b.grads, 4 * 58);
  assert_int_equal(b.optim, 8 * 58);
  assert_int_equal(b.gathered, 0);
  assert_false(b.acts_known);
  assert_int_equal(b.total, 16 * 58);
  in = input(m, "bf16-true", 1, false);
  assert_int_equal(fsPL_rank_bytes(&in, 0, &b), 0);
  assert_int_equal(b.total, 8 * 58); /* issue 16: Adam's states in bf16 too */
  in = input(m, "bf16-mixed", 1, false);
  assert_int_equal(fsPL_rank_bytes(&in, 0, &b), 0);
  assert_int_equal(b.params, 6 * 58); /* float32 weights + autocast's bf16 copies */
  /* FSDP x3: shards of 14 and 6 elements; the gathered unit 3 * 14 */
  in = input(m, "32-true", 3, true);
  assert_int_equal(fsPL_rank_bytes(&in, 2, &b), 0);
  assert_int_equal(b.params, 4 * 20);
  assert_int_equal(b.optim, 8 * 20);
  assert_int_equal(b.gathered, 8 * 3 * 14);
  in = input(m, "bf16-mixed", 3, true);
  assert_int_equal(fsPL_rank_bytes(&in, 0, &b), 0);
  assert_int_equal(b.gathered, 4 * 3 * 14); /* gathered in bf16, gradients reduced in bf16 */
  in = input(m, "64-true", 1, false);
  in.in_rank = 2, in.in_shape[0] = 3, in.in_shape[1] = 4, in.in_bytes = 8;
  assert_int_equal(fsPL_rank_bytes(&in, 0, &b), 0);
  assert_true(b.acts_known);
  assert_int_equal(b.acts, (96 + 192 + 192 + 48) + (2 * 192 + 2 * 48)); /* 8-byte elements: saved, then transient */
  assert_int_equal(b.total, 32 * 58 + b.acts);
  in.precision = "fp7";
  assert_int_equal(fsPL_rank_bytes(&in, 0, &b), -1);
  fsM_release(m);
}

static void test_gpu_memory(void **state) {
  (void)state;
  fsPL_options o = {0};
  assert_int_equal(fsPL_parse_gpu_memory("H100", &o), 0);
  assert_int_equal(o.gpu_bytes, 80ull << 30);
  assert_string_equal(o.gpu_name, "H100");
  assert_int_equal(fsPL_parse_gpu_memory("a100-40gb", &o), 0);
  assert_int_equal(o.gpu_bytes, 40ull << 30);
  assert_string_equal(o.gpu_name, "A100-40GB");
  assert_int_equal(fsPL_parse_gpu_memory("H200", &o), 0);
  assert_int_equal(o.gpu_bytes, 141ull << 30);
  assert_int_equal(fsPL_parse_gpu_memory("80GiB", &o), 0);
  assert_int_equal(o.gpu_bytes, 80ull << 30);
  assert_string_equal(o.gpu_name, "");
  assert_int_equal(fsPL_parse_gpu_memory("40GB", &o), 0);
  assert_int_equal(o.gpu_bytes, 40000000000ull);
  assert_int_equal(fsPL_parse_gpu_memory("1.5G", &o), 0);
  assert_int_equal(o.gpu_bytes, 3ull << 29);
  assert_int_equal(fsPL_parse_gpu_memory("4096", &o), 0);
  assert_int_equal(o.gpu_bytes, 4096);
  assert_int_equal(fsPL_parse_gpu_memory("80XB", &o), -1);
  assert_int_equal(fsPL_parse_gpu_memory("GiB", &o), -1);
  assert_int_equal(fsPL_parse_gpu_memory("-3GiB", &o), -1);
  assert_int_equal(fsPL_parse_gpu_memory("H1000", &o), -1);
}

static char *print_plan(const fsPL_input *in, const fsPL_options *o) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  assert_non_null(f);
  assert_int_equal(fsPL_print(f, in, o), 0);
  fclose(f);
  return buf;
}

/* DDP x2 of a GPT does not fit; FSDP on the same ranks is the smallest
 * change when it is enough, then activation checkpointing, then more nodes. */
static void test_fit(void **state) {
  (void)state;
  fs_module *m = gpt(256, 64, 64, 4);
  fsPL_input in = input(m, "32-true", 2, false);
  in.in_rank = 2, in.in_shape[0] = 8, in.in_shape[1] = 64, in.in_bytes = 8;
  in.in_source = "a test";
  fsPL_rank ddp, fsdp;
  assert_int_equal(fsPL_rank_bytes(&in, 0, &ddp), 0);
  fsPL_input sh = in;
  sh.sharded = true;
  assert_int_equal(fsPL_rank_bytes(&sh, 0, &fsdp), 0);
  assert_true(fsdp.total < ddp.total);
  assert_true(fsdp.total_ckpt < fsdp.total);
  fsPL_options o = {.gpu_bytes = ddp.total};
  char *t = print_plan(&in, &o);
  assert_non_null(strstr(t, "fits in "));
  assert_null(strstr(t, "does not fit"));
  assert_non_null(strstr(t, "\n0-1 ")); /* one line for both ranks */
  assert_non_null(strstr(t, "\nall "));
  free(t);
  o.gpu_bytes = (ddp.total + fsdp.total) / 2;
  t = print_plan(&in, &o);
  assert_non_null(strstr(t, "does not fit in "));
  assert_non_null(strstr(t, "smallest change that fits: strategy=\"fsdp\" instead of \"DDPStrategy\" on the same 2 ranks"));
  free(t);
  o.gpu_bytes = (fsdp.total_ckpt + fsdp.total) / 2;
  t = print_plan(&in, &o);
  assert_non_null(strstr(t, "smallest change that fits: FSDP with activation checkpointing"));
  free(t);
  /* batch 1 still fits nowhere near 1 KiB: nothing fits */
  o.gpu_bytes = 1024;
  t = print_plan(&in, &o);
  assert_non_null(strstr(t, "no change tried fits"));
  free(t);
  /* JSON: one layout, the totals over ranks, the change */
  o = (fsPL_options){.format = FSPL_JSON, .gpu_bytes = (ddp.total + fsdp.total) / 2};
  t = print_plan(&in, &o);
  char want[160];
  snprintf(want, sizeof want, "\"layouts\": [{\"first_rank\": 0, \"last_rank\": 1, \"parameters\": %llu,",
           (unsigned long long)ddp.params);
  assert_non_null(strstr(t, want));
  snprintf(want, sizeof want, "\"all_ranks\": {\"parameters\": %llu,", 2 * (unsigned long long)ddp.params);
  assert_non_null(strstr(t, want));
  assert_non_null(strstr(t, "\"fits\": false, \"change\": {\"kind\": \"fsdp\""));
  free(t);
  fsM_release(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_gpt_tape),   cmocka_unit_test(test_mlp_tape), cmocka_unit_test(test_mlp_by_hand),
    cmocka_unit_test(test_cnn_tape),   cmocka_unit_test(test_cnn_by_hand), cmocka_unit_test(test_norms_by_hand),
    cmocka_unit_test(test_rank_bytes), cmocka_unit_test(test_gpu_memory), cmocka_unit_test(test_fit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
