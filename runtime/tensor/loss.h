/* loss.h -- loss kernels (forward value, backward accumulation), llm.c style. */
#ifndef FS_LOSS_H
#define FS_LOSS_H

#include <stddef.h>
#include <stdint.h>

/* mean_n [logsumexp(logits[n,:]) - logits[n, targets[n]]]
 * logits[N,C], targets[N] already checked to lie in [0, C) */
double fsN_cross_entropy_forward(const float *logits, const int64_t *targets, int64_t N, int64_t C);
/* dlogits[N,C] += dloss * (softmax(logits[n]) - onehot(targets[n])) / N */
void fsN_cross_entropy_backward(float *dlogits, const float *logits, const int64_t *targets,
                                int64_t N, int64_t C, float dloss);
/* mean_i (pred[i] - target[i])^2 over n elements */
double fsN_mse_forward(const float *pred, const float *target, size_t n);
/* dpred += dloss * 2 (pred - target) / n;  dtarget -= the same (each may be NULL) */
void fsN_mse_backward(float *dpred, float *dtarget, const float *pred, const float *target,
                      size_t n, float dloss);

#endif
