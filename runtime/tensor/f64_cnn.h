/* f64_cnn.h -- the double path of the convolutional layers and the
 * normalizations (64-true; f64_cnn.c), and the node slots of a geometry.
 *
 * Invariant: the entry points (cnn_grad.c, norm_grad.c) check their inputs
 * with torch's messages and compute the geometry once for either dtype;
 * float64 inputs (every float operand float64: fsG_one_dtype) then come
 * here instead of fsG_low_begin's refusal, and no float64 tensor reaches a
 * float32 kernel.  Shapes and letters are cnn.h's and norm.h's; ins are the
 * entry's inputs in its order (NULL for an absent weight or bias). */
#ifndef FS_F64_CNN_H
#define FS_F64_CNN_H

#include <string.h>
#include "autograd_int.h"
#include "cnn.h"

/* A node keeps its geometry in its integer slots, so backward recomputes
 * windows instead of storing them; two slots stay spare (a pooling mode). */
_Static_assert(sizeof(fsN_conv) <= sizeof(((fsG_node *)0)->iv) - 2 * sizeof(int64_t),
               "a node's integer slots hold a geometry and two flags");
static inline void fsG_geom_save(fsG_node *n, const fsN_conv *g) { memcpy(n->iv, g, sizeof *g); }
static inline void fsG_geom_load(const fsG_node *n, fsN_conv *g) { memcpy(g, n->iv, sizeof *g); }

/* ins: x, W, b; out [N, OC, OH, OW] ([N, OC, OW] for a 1-d x) */
fs_tensor *fsG_conv_f64(const char *op, fs_tensor *const *ins, const fsN_conv *g);
/* ins: x, W, b; g the convolution whose data gradient this is (cnn_grad.c) */
fs_tensor *fsG_conv_transpose2d_f64(fs_tensor *const *ins, const fsN_conv *g);
fs_tensor *fsG_max_pool2d_f64(fs_tensor *x, const fsN_conv *g);
/* mode: cnn.h's FSN_POOL_* */
fs_tensor *fsG_avg_pool_f64(const char *op, fs_tensor *x, const fsN_conv *g, int mode);
/* ins: x, w, b; rm, rv the running statistics (NULL: none), updated in
 * place when training */
fs_tensor *fsG_batch_norm_f64(fs_tensor *const *ins, fs_tensor *rm, fs_tensor *rv, bool training, double momentum,
                              double eps);
/* ins: x, w, b */
fs_tensor *fsG_group_norm_f64(fs_tensor *const *ins, int64_t groups, double eps);
/* ins: x, w, NULL; x seen as [M, D]; nd: the normalized dims */
fs_tensor *fsG_rms_norm_f64(fs_tensor *const *ins, int64_t M, int64_t D, int nd, double eps);

#endif
