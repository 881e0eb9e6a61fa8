/* optim_driver.c -- steps every optimizer of optim.h, with each option, over
 * two parameter groups and writes what torch needs to replay it step for
 * step: the initial parameters, every step's gradients and every step's
 * parameters afterwards.  optim_parity.py replays them in torch 1.13.
 *   optim_driver OUTDIR    (writes OUTDIR/NAME.bin for each case)
 * Parameters: p0 [37] in group 0, p1 [1000] in group 1 (lr halved, its own
 * weight_decay); 20 steps; p1 has no gradient at step 5 (torch skips it);
 * every group's lr is halved before step 10, as a scheduler would.  Layout
 * of NAME.bin (float32): p0, p1, then per step: has_grad1, g0, g1, p0, p1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "optim.h"
#include "rng.h"

enum { N0 = 37, N1 = 1000, STEPS = 20 };

static void die(const char *what) {
  fprintf(stderr, "optim_driver: %s: %s\n", what, fsT_error());
  exit(1);
}

static fs_tensor *filled(int64_t n, uint64_t key, float std) {
  fs_tensor *t = fsT_new(FS_F32, FS_DEV_CPU, 1, &n);
  if (!t) die("tensor");
  fsR_normal_key(fsT_f32(t), (size_t)n, key, 0, 0.0f, std);
  return t;
}

static void put(FILE *f, const fs_tensor *t) {
  if (fwrite(t->data, sizeof(float), (size_t)t->numel, f) != (size_t)t->numel) die("write");
}

/* one case: kind with h for group 0; group 1 halves lr and takes wd1 */
static void run(const char *dir, const char *name, fsO_kind kind, fsO_hyper h, double wd1) {
  uint64_t key = fsR_key(7, name);
  fs_tensor *p[2] = {filled(N0, fsR_subkey(key, 0), 1.0f), filled(N1, fsR_subkey(key, 1), 1.0f)};
  fs_optim *o = fsO_new(kind, &p[0], 1, &h);
  if (!o) die(name);
  h.lr *= 0.5, h.weight_decay = wd1;
  if (fsO_add_group(o, &p[1], 1, &h) < 0) die(name);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.bin", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) die(path);
  put(f, p[0]);
  put(f, p[1]);
  for (int step = 0; step < STEPS; step++) {
    fsO_zero_grad(o);
    for (int k = 0; k < 2; k++)
      if (k == 0 || step != 5) p[k]->grad = filled(p[k]->numel, fsR_subkey(key, 100 + 2 * (uint64_t)step + k), 0.1f);
    if (step == 10)
      for (int64_t g = 0; g < o->ngroups; g++) o->groups[g].h.lr *= 0.5;
    float has1 = p[1]->grad ? 1.0f : 0.0f;
    if (fwrite(&has1, sizeof has1, 1, f) != 1) die("write");
    put(f, p[0]->grad);
    if (p[1]->grad) put(f, p[1]->grad);
    if (fsO_step(o) < 0) die(name);
    put(f, p[0]);
    put(f, p[1]);
  }
  if (fclose(f)) die(path);
  fsO_release(o);
  fsT_release(p[0]);
  fsT_release(p[1]);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: optim_driver OUTDIR\n");
    return 2;
  }
  const char *d = argv[1];
  fsO_hyper h = fsO_defaults(FSO_SGD);
  h.lr = 0.1;
  run(d, "sgd", FSO_SGD, h, 0);
  h.momentum = 0.9, h.dampening = 0.1, h.weight_decay = 1e-2;
  run(d, "sgd_momentum", FSO_SGD, h, 0.1);
  h.dampening = 0, h.nesterov = true;
  run(d, "sgd_nesterov", FSO_SGD, h, 0);
  h.nesterov = false, h.maximize = true;
  run(d, "sgd_maximize", FSO_SGD, h, 0);
  h = fsO_defaults(FSO_ADAM);
  run(d, "adam", FSO_ADAM, h, 0);
  h.weight_decay = 1e-2, h.amsgrad = true, h.beta1 = 0.8, h.eps = 1e-6;
  run(d, "adam_amsgrad", FSO_ADAM, h, 0.1);
  h = fsO_defaults(FSO_ADAMW);
  h.weight_decay = 0.1;
  run(d, "adamw", FSO_ADAMW, h, 0);
  h.amsgrad = true, h.maximize = true;
  run(d, "adamw_amsgrad_maximize", FSO_ADAMW, h, 0.01);
  h = fsO_defaults(FSO_RMSPROP);
  run(d, "rmsprop", FSO_RMSPROP, h, 0);
  h.momentum = 0.9, h.centered = true, h.weight_decay = 1e-2, h.alpha = 0.9;
  run(d, "rmsprop_centered_momentum", FSO_RMSPROP, h, 0);
  h = fsO_defaults(FSO_ADAGRAD);
  h.lr = 0.1;
  run(d, "adagrad", FSO_ADAGRAD, h, 0);
  h.lr_decay = 1e-2, h.weight_decay = 1e-2, h.initial_accumulator_value = 0.1, h.maximize = true;
  run(d, "adagrad_decay", FSO_ADAGRAD, h, 0);
  h = fsO_defaults(FSO_ADADELTA);
  run(d, "adadelta", FSO_ADADELTA, h, 0);
  h.rho = 0.8, h.eps = 1e-4, h.weight_decay = 1e-2, h.maximize = true;
  run(d, "adadelta_decay_maximize", FSO_ADADELTA, h, 0);
  return 0;
}
