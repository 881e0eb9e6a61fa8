/* parity_driver.c -- trains a model with fabricscript's runtime and writes
 * everything PyTorch needs to replay the run: the configuration, the initial
 * parameters, the batches, the losses and the final parameters.
 *   parity_driver mlp|gpt sgd|adam|adamw OUTDIR [32-true|bf16-mixed|bf16-true]
 * parity.py rebuilds the same model in torch 1.13 and compares.  The
 * precision does what Fabric's plugin does: bf16-mixed runs the forward
 * under autocast, bf16-true converts the model (module.to) and float inputs
 * to bfloat16; both hand the loss float32 logits (convert_output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "autograd.h"
#include "module.h"
#include "optim.h"
#include "rng.h"

enum { STEPS = 50, SEED = 1 };

/* MLP: Flatten, Linear(64, 32), ReLU, Linear(32, 32), ReLU, Linear(32, 10) on
 * [16, 1, 8, 8] inputs; GPT: vocab 256, context 16, dim 32, 2 heads, 2 layers
 * on [4, 16] token batches. */
#define MLP_B 16
#define MLP_IN 64
#define MLP_H 32
#define GPT_B 4
#define GPT_T 16
#define GPT_V 256
#define GPT_D 32

static void die(const char *what) {
  fprintf(stderr, "parity_driver: %s: %s\n", what, fsT_error());
  exit(1);
}

static fs_module *need(fs_module *m) {
  if (!m) die("building the model");
  return m;
}

static void add(fs_module *seq, const char *key, fs_module *child) {
  if (fsM_append(seq, key, need(child))) die("building the model");
}

static fs_module *build_mlp(void) {
  fs_module *m = need(fsM_sequential());
  add(m, NULL, fsM_activation(FSM_FLATTEN));
  add(m, "fc1", fsM_linear(MLP_IN, MLP_H, true));
  add(m, NULL, fsM_activation(FSM_RELU));
  add(m, "fc2", fsM_linear(MLP_H, MLP_H, true));
  add(m, NULL, fsM_activation(FSM_RELU));
  add(m, "fc3", fsM_linear(MLP_H, 10, true));
  return m;
}

static fs_module *build_gpt(void) {
  fs_module *block = need(fsM_sequential()), *r1 = need(fsM_residual()), *r2 = need(fsM_residual());
  add(r1, NULL, fsM_layernorm(GPT_D, 1e-5));
  add(r1, NULL, fsM_attention(GPT_D, 2, true));
  add(r2, NULL, fsM_layernorm(GPT_D, 1e-5));
  add(r2, NULL, fsM_linear(GPT_D, 4 * GPT_D, true));
  add(r2, NULL, fsM_gelu(false));
  add(r2, NULL, fsM_linear(4 * GPT_D, GPT_D, true));
  add(block, NULL, r1);
  add(block, NULL, r2);
  fs_module *body = need(fsM_sequential());
  add(body, NULL, block);
  fs_module *m = need(fsM_sequential());
  add(m, "wte", fsM_embedding(GPT_V, GPT_D));
  add(m, "wpe", fsM_posemb(GPT_T, GPT_D));
  add(m, "h", fsM_repeat(2, body));
  add(m, "ln_f", fsM_layernorm(GPT_D, 1e-5));
  add(m, "lm_head", fsM_linear(GPT_D, GPT_V, false));
  return m;
}

/* Batch `step`: inputs and targets from the counter rng. */
static void make_batch(bool gpt, int step, fs_tensor **x, fs_tensor **y) {
  uint64_t key = fsR_subkey(fsR_key(SEED, "batch"), (uint64_t)step);
  if (gpt) {
    int64_t s[2] = {GPT_B, GPT_T};
    *x = fsT_new(FS_I64, FS_DEV_CPU, 2, s);
    *y = fsT_new(FS_I64, FS_DEV_CPU, 2, s);
    if (!*x || !*y) die("batch");
    /* a learnable pattern: y is x shifted, x a noisy ramp */
    for (int64_t i = 0; i < GPT_B * GPT_T; i++) {
      int64_t v = (int64_t)(fsR_bits(key, (uint64_t)i) % 8) + 3 * (i % GPT_T);
      fsT_i64(*x)[i] = v % GPT_V;
      fsT_i64(*y)[i] = (v + 1) % GPT_V;
    }
  } else {
    int64_t xs[4] = {MLP_B, 1, 8, 8}, ys[1] = {MLP_B};
    *x = fsT_new(FS_F32, FS_DEV_CPU, 4, xs);
    *y = fsT_new(FS_I64, FS_DEV_CPU, 1, ys);
    if (!*x || !*y) die("batch");
    fsR_uniform_key(fsT_f32(*x), MLP_B * MLP_IN, key, 0, 0.0f, 1.0f);
    for (int n = 0; n < MLP_B; n++) { /* label: which tenth of the row sum */
      float s = 0;
      for (int i = 0; i < MLP_IN; i++) s += fsT_f32(*x)[n * MLP_IN + i];
      int64_t c = (int64_t)((s - 22.0f) / 2.0f);
      fsT_i64(*y)[n] = c < 0 ? 0 : c > 9 ? 9 : c;
    }
  }
}

static FILE *open_out(const char *dir, const char *name, const char *mode) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, mode);
  if (!f) {
    perror(path);
    exit(1);
  }
  return f;
}

/* float32 values, whatever the parameters' type */
static void write_params(FILE *f, const fsM_param *ps, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    fs_tensor *c = fsT_to_dtype(ps[i].t, FS_F32);
    if (!c || fwrite(c->data, sizeof(float), (size_t)c->numel, f) != (size_t)c->numel)
      die("writing parameters");
    fsT_release(c);
  }
}

static void write_tensor(FILE *f, const fs_tensor *t) {
  if (fwrite(t->data, fsT_dtype_size(t->dtype), (size_t)t->numel, f) != (size_t)t->numel)
    die("writing a batch");
}

int main(int argc, char **argv) {
  const char *prec = argc == 5 ? argv[4] : "32-true";
  if ((argc != 4 && argc != 5) || (strcmp(argv[1], "mlp") && strcmp(argv[1], "gpt")) ||
      (strcmp(argv[2], "sgd") && strcmp(argv[2], "adam") && strcmp(argv[2], "adamw")) ||
      (strcmp(prec, "32-true") && strcmp(prec, "bf16-mixed") && strcmp(prec, "bf16-true"))) {
    fprintf(stderr, "usage: parity_driver mlp|gpt sgd|adam|adamw OUTDIR [32-true|bf16-mixed|bf16-true]\n");
    return 2;
  }
  bool mixed = !strcmp(prec, "bf16-mixed"), half = !strcmp(prec, "bf16-true");
  bool gpt = !strcmp(argv[1], "gpt");
  const char *dir = argv[3];
  fs_module *model = gpt ? build_gpt() : build_mlp();
  if (fsM_materialize(model, FS_DEV_CPU, SEED)) die("materialize");
  fsM_param *ps;
  int64_t np = fsM_parameters(model, &ps);
  if (np < 0) die("parameters");

  FILE *cfg = open_out(dir, "config.txt", "w");
  fprintf(cfg, "model %s\nopt %s\nsteps %d\nprecision %s\n", argv[1], argv[2], STEPS, prec);
  for (int64_t i = 0; i < np; i++) {
    fprintf(cfg, "param %s", ps[i].name);
    for (int d = 0; d < ps[i].t->rank; d++) fprintf(cfg, " %lld", (long long)ps[i].t->shape[d]);
    fprintf(cfg, "\n");
  }
  fclose(cfg);
  FILE *f = open_out(dir, "init.bin", "wb");
  write_params(f, ps, np);
  fclose(f);
  if (half && fsM_to_dtype(model, FS_BF16)) die("module.to(bfloat16)");

  fs_tensor **params = malloc((size_t)np * sizeof *params);
  if (!params) die("out of memory");
  for (int64_t i = 0; i < np; i++) params[i] = ps[i].t;
  fsO_kind kind = !strcmp(argv[2], "sgd") ? FSO_SGD : !strcmp(argv[2], "adam") ? FSO_ADAM : FSO_ADAMW;
  fsO_hyper h = fsO_defaults(kind);
  if (kind == FSO_SGD) h.lr = 0.05, h.momentum = 0.9;
  else if (kind == FSO_ADAMW) h.weight_decay = 0.1;
  fs_optim *opt = fsO_new(kind, params, np, &h);
  if (!opt) die("optimizer");

  FILE *batches = open_out(dir, "batches.bin", "wb"), *losses = open_out(dir, "losses.txt", "w");
  for (int step = 0; step < STEPS; step++) {
    fs_tensor *x, *y;
    make_batch(gpt, step, &x, &y);
    write_tensor(batches, x);
    write_tensor(batches, y);
    if (step == STEPS / 2) opt->groups[0].h.lr *= 0.5; /* lr is settable between steps */
    fsO_zero_grad(opt);
    fs_tensor *in = half && x->dtype == FS_F32 ? fsG_cast(x, FS_BF16) : fsT_retain(x);
    fs_dtype old = fsG_set_autocast(mixed ? FS_BF16 : FS_F32);
    fs_tensor *out = in ? fsM_forward(model, in) : NULL;
    fsG_set_autocast(old);
    fs_tensor *logits = out ? fsG_cast(out, FS_F32) : NULL;
    fs_tensor *loss = logits ? fsG_cross_entropy(logits, y) : NULL;
    fsT_release(in);
    fsT_release(out);
    if (!loss || fsG_backward(loss)) die("training step");
    double total;
    if (!strcmp(argv[2], "adamw") && fsO_clip_grad_norm(params, np, 1.0, 2.0, &total)) die("clip");
    if (fsO_step(opt)) die("optimizer step");
    fprintf(losses, "%.9g\n", fsT_f32(loss)[0]);
    fsT_release(loss);
    fsT_release(logits);
    fsT_release(x);
    fsT_release(y);
  }
  fclose(batches);
  fclose(losses);
  f = open_out(dir, "final.bin", "wb");
  write_params(f, ps, np);
  fclose(f);
  fsO_release(opt);
  free(params);
  fsM_params_free(ps, np);
  fsM_release(model);
  return 0;
}
