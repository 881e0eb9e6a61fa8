/* lib_init.c -- torch.nn.init's functions (normal_, uniform_, constant_,
 * zeros_, ones_, xavier_*, kaiming_*, trunc_normal_), filling a tensor in
 * place outside autograd and returning it.  Values come from the runtime's
 * counter-based stream keyed by the seed (as rand/randn, lib_torch.c's
 * fsE_draw), so they follow torch's distributions, not its generator's
 * bits; the fan and gain rules are torch's (torch/nn/init.py). */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "eval_int.h"
#include "rng.h"

/* the tensor to fill: a float tensor that has storage */
static fs_tensor *init_target(fs_value *v, const char *fn) {
  fs_tensor *t = fsE_need_tensor(v, fn, "tensor");
  if (!t) return NULL;
  if (t->dtype != FS_F32) {
    fsV_seterr("%s(): only float32 tensors can be initialized here, not %s", fn, fsT_dtype_name(t->dtype));
    return NULL;
  }
  if (!t->data) {
    fsV_seterr("%s(): the tensor is on the meta device; it has no storage to fill", fn);
    return NULL;
  }
  return t;
}

/* torch's _calculate_fan_in_and_fan_out */
static int fans(const fs_tensor *t, double *in, double *out) {
  if (t->rank < 2) {
    fsV_seterr("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
    return -1;
  }
  double receptive = 1;
  for (int i = 2; i < t->rank; i++) receptive *= (double)t->shape[i];
  *in = (double)t->shape[1] * receptive;
  *out = (double)t->shape[0] * receptive;
  return 0;
}

enum { FILL_CONST, FILL_UNIFORM, FILL_NORMAL, FILL_TRUNC };

/* Fills t: host values, then copied to its device. trunc: normal(a0, a1)
 * redrawn until inside [lo, hi]. */
static fs_value *fill(fsE_ctx *E, fs_value *tv, int how, double a0, double a1, double lo, double hi) {
  fs_tensor *t = TENSOR(tv);
  size_t n = (size_t)t->numel;
  float *host = malloc((n ? n : 1) * sizeof *host);
  if (!host) {
    fsV_seterr("out of memory");
    return NULL;
  }
  uint64_t key = fsR_key(E->seed, "torch.nn.init");
  if (how == FILL_CONST) for (size_t i = 0; i < n; i++) host[i] = (float)a0;
  else if (how == FILL_UNIFORM) fsR_uniform_key(host, n, key, (size_t)fsE_draw(E, (int64_t)n), (float)a0, (float)a1);
  else fsR_normal_key(host, n, key, (size_t)fsE_draw(E, (int64_t)n), (float)a0, (float)a1);
  for (size_t i = 0; how == FILL_TRUNC && i < n; i++)
    for (int tries = 0; host[i] < lo || host[i] > hi; tries++) {
      if (tries == 1000) { /* [lo, hi] far in a tail: torch clamps too */
        host[i] = (float)fmin(fmax(host[i], lo), hi);
        break;
      }
      fsR_normal_key(&host[i], 1, key, (size_t)fsE_draw(E, 1), (float)a0, (float)a1);
    }
  int rc = fsB_transfer(t->device, t->data, FS_DEV_CPU, host, n * sizeof *host);
  free(host);
  return rc < 0 ? fsE_rt_fail() : fsV_retain(tv);
}

#define TARGET(fn)                                        \
  if (!init_target(s[0], fn)) return NULL;                \
  fs_tensor *t = TENSOR(s[0]);                            \
  (void)t

NATIVE(init_uniform) { TARGET("uniform_"); return fill(E, s[0], FILL_UNIFORM, fsV_to_double(s[1]), fsV_to_double(s[2]), 0, 0); }
NATIVE(init_normal) { TARGET("normal_"); return fill(E, s[0], FILL_NORMAL, fsV_to_double(s[1]), fsV_to_double(s[2]), 0, 0); }
NATIVE(init_constant) { TARGET("constant_"); return fill(E, s[0], FILL_CONST, fsV_to_double(s[1]), 0, 0, 0); }
NATIVE(init_zeros) { TARGET("zeros_"); return fill(E, s[0], FILL_CONST, 0, 0, 0, 0); }
NATIVE(init_ones) { TARGET("ones_"); return fill(E, s[0], FILL_CONST, 1, 0, 0, 0); }
NATIVE(init_trunc_normal) {
  TARGET("trunc_normal_");
  return fill(E, s[0], FILL_TRUNC, fsV_to_double(s[1]), fsV_to_double(s[2]), fsV_to_double(s[3]), fsV_to_double(s[4]));
}

NATIVE(init_xavier_uniform) {
  TARGET("xavier_uniform_");
  double in, out;
  if (fans(t, &in, &out) < 0) return NULL;
  double bound = fsV_to_double(s[1]) * sqrt(6.0 / (in + out));
  return fill(E, s[0], FILL_UNIFORM, -bound, bound, 0, 0);
}

NATIVE(init_xavier_normal) {
  TARGET("xavier_normal_");
  double in, out;
  if (fans(t, &in, &out) < 0) return NULL;
  return fill(E, s[0], FILL_NORMAL, 0, fsV_to_double(s[1]) * sqrt(2.0 / (in + out)), 0, 0);
}

/* kaiming_*: std = gain(nonlinearity, a) / sqrt(fan of mode) */
static int kaiming_std(fs_tensor *t, fs_value **s, double *std) {
  double in, out, a = fsV_to_double(s[1]), gain;
  const char *mode = s[2]->u.str.s, *nl = s[3]->u.str.s;
  if (strcmp(mode, "fan_in") && strcmp(mode, "fan_out")) {
    fsV_seterr("Mode %s not supported, please use one of fan_in, fan_out", mode);
    return -1;
  }
  if (!strcmp(nl, "leaky_relu")) gain = sqrt(2.0 / (1 + a * a));
  else if (!strcmp(nl, "relu")) gain = sqrt(2.0);
  else if (!strcmp(nl, "tanh")) gain = 5.0 / 3;
  else if (!strcmp(nl, "linear") || !strcmp(nl, "sigmoid") || !strncmp(nl, "conv", 4)) gain = 1;
  else if (!strcmp(nl, "selu")) gain = 3.0 / 4;
  else {
    fsV_seterr("Unsupported nonlinearity %s", nl);
    return -1;
  }
  if (fans(t, &in, &out) < 0) return -1;
  *std = gain / sqrt(mode[4] == 'i' ? in : out);
  return 0;
}

NATIVE(init_kaiming_uniform) {
  TARGET("kaiming_uniform_");
  double std;
  if (kaiming_std(t, s, &std) < 0) return NULL;
  return fill(E, s[0], FILL_UNIFORM, -sqrt(3.0) * std, sqrt(3.0) * std, 0, 0);
}

NATIVE(init_kaiming_normal) {
  TARGET("kaiming_normal_");
  double std;
  if (kaiming_std(t, s, &std) < 0) return NULL;
  return fill(E, s[0], FILL_NORMAL, 0, std, 0, 0);
}

static const fsE_reg init_funcs[] = {
  {"uniform_", init_uniform}, {"normal_", init_normal}, {"constant_", init_constant}, {"zeros_", init_zeros},
  {"ones_", init_ones}, {"trunc_normal_", init_trunc_normal}, {"xavier_uniform_", init_xavier_uniform},
  {"xavier_normal_", init_xavier_normal}, {"kaiming_uniform_", init_kaiming_uniform},
  {"kaiming_normal_", init_kaiming_normal}, {NULL, NULL},
};
const fsE_lib fsE_lib_init = {"init", init_funcs};
