/* nn_cuda.cu -- cuda layer kernels (nn.h has the shapes and conventions):
 * fsN_cuda, the float instantiation of nn_cuda_typed.cuh's kernels (linear,
 * embeddings, layer norm, activations, dropout, attention, cross entropy;
 * the double one is 64-true's, f64_cuda.cu), and the kernel float32 has
 * alone: the mse loss. */
#include "nn_cuda_typed.cuh"

/* --- mse loss (double where the cpu uses double) ------------------------ */

struct load_sqdiff {
  const float *p, *t;
  __device__ double operator()(size_t i) const {
    double d = (double)p[i] - t[i];
    return d * d;
  }
};

// mean_i (pred[i] - target[i])^2
static double mse_forward(const float *pred, const float *target, size_t n) {
  double s;
  if (!n) return NAN;
  return fscu_reduce(n, load_sqdiff{pred, target}, fscu_add{}, 0.0, &s, "mse_forward") ? NAN
                                                                                       : s / (double)n;
}

__global__ void mse_bwd_k(float *dpred, float *dtarget, const float *pred, const float *target,
                          size_t n, float scale) {
  FSCU_FOR(i, n) {
    float g = scale * (pred[i] - target[i]);
    if (dpred) dpred[i] += g;
    if (dtarget) dtarget[i] -= g;
  }
}

// dpred += dloss 2 (pred - target) / n;  dtarget -= the same
static void mse_backward(float *dpred, float *dtarget, const float *pred, const float *target,
                         size_t n, float dloss) {
  if (n)
    mse_bwd_k<<<fscu_blocks(n), FSCU_THREADS>>>(dpred, dtarget, pred, target, n,
                                                2.0f * dloss / (float)n);
}

extern "C" const fsN_kernels fsN_cuda = {
  linear_forward<float>, linear_backward<float>,
  embedding_forward<float>, embedding_backward<float>,
  posemb_forward<float>, posemb_backward<float>,
  layernorm_forward<float>, layernorm_backward<float>,
  act_forward<float>, act_backward<float>,
  dropout_forward<float>, dropout_backward<float>,
  attention_forward<float>, attention_backward<float>,
  cross_entropy_forward<float>, cross_entropy_backward<float>,
  mse_forward, mse_backward,
};
