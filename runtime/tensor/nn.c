/* nn.c -- cpu layer kernels (see nn.h for shapes and conventions); those
 * float64 shares are written once, over the element type, in nn_typed.h. */
#include "nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "blas.h"
#include "loss.h"
#include "rng.h"
#include "tensor.h"
#include "vmath.h"

/* linear, embeddings, layer norm, activations, attention: one text with
 * f64.c's float64 kernels */
#include "nn_typed.h"

/* p == 1 drops everything (torch returns zeros, not nan). */
static float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

void fsN_dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t key) {
  float s = dropout_scale(p);
  for (size_t i = 0; i < n; i++) out[i] = fsR_u01(key, i) >= p ? inp[i] * s : 0.0f;
}

void fsN_dropout_backward(float *dinp, const float *dout, size_t n, float p, uint64_t key) {
  float s = dropout_scale(p);
  for (size_t i = 0; i < n; i++)
    if (fsR_u01(key, i) >= p) dinp[i] += dout[i] * s;
}

const fsN_kernels fsN_cpu = {
  fsN_linear_forward, fsN_linear_backward,
  fsN_embedding_forward, fsN_embedding_backward,
  fsN_posemb_forward, fsN_posemb_backward,
  fsN_layernorm_forward, fsN_layernorm_backward,
  fsN_act_forward, fsN_act_backward,
  fsN_dropout_forward, fsN_dropout_backward,
  fsN_attention_forward, fsN_attention_backward,
  fsN_cross_entropy_forward, fsN_cross_entropy_backward,
  fsN_mse_forward, fsN_mse_backward,
};
