/* low_table_check.h -- a device's low-precision elementwise kernels
 * (backend.h's fsB_low_kernels, reached through autograd.c's direct low
 * paths) against the cpu's, bit for bit: cuda's own kernels (test_cuda.c,
 * with a device) and emulated cuda's, which run the same element code
 * (low_elem.h) on the host (test_rt_lowemu.c).  FS_DEV_CUDA is whichever
 * the process has.  Include after rt_testutil.h. */
#ifndef FS_LOW_TABLE_CHECK_H
#define FS_LOW_TABLE_CHECK_H

#include <math.h>
#include <string.h>
#include "autograd.h"
#include "backend.h"

/* host's values as a leaf of type dt on dev that requires grad */
static fs_tensor *low_leaf(fs_tensor *host, fs_dtype dt, fs_device dev) {
  fs_tensor *c = fsT_copy(host), *t = c ? fsT_to_dtype(c, dt) : NULL, *d = t ? fsT_to_device(t, dev) : NULL;
  fsT_release(c);
  fsT_release(t);
  if (!d) fail_msg("%s", fsT_error());
  d->requires_grad = true;
  return d;
}

/* t (any device) has ref's dtype and bytes */
static void expect_same(fs_tensor *t, fs_tensor *ref, const char *what, int k) {
  if (!t || !ref) fail_msg("%s %d: a tensor is missing: %s", what, k, fsT_error());
  assert_int_equal(t->dtype, ref->dtype);
  fs_tensor *h = fsT_to_device(t, FS_DEV_CPU);
  assert_non_null(h);
  size_t es = fsT_dtype_size(h->dtype);
  for (int64_t i = 0; i < h->numel; i++)
    if (memcmp((char *)h->data + i * es, (char *)ref->data + i * es, es))
      fail_msg("%s %d: element %lld differs (device %g, cpu %g)", what, k, (long long)i, fsT_get(h, i),
               fsT_get(ref, i));
  fsT_release(h);
}

/* y = op(a, b) (an fsB_binop, or FSB_DIV + 1 + act: act(a)), then
 * sum(y * w) + sum(x * w) for each input x of w's shape that requires
 * grad, backward (so x's gradient is the rounded sum of two rounded
 * contributions, the second added to the first); returns y */
static fs_tensor *low_run(int op, fs_tensor *a, fs_tensor *b, fs_tensor *w) {
  fs_tensor *y = op <= FSB_DIV ? fsG_binary((fsB_binop)op, a, b) : fsG_act((fsN_act)(op - FSB_DIV - 1), a);
  fs_tensor *yw = y ? fsG_binary(FSB_MUL, y, w) : NULL, *loss = yw ? fsG_sum(yw) : NULL;
  fsT_release(yw);
  for (int i = 0; i < (op <= FSB_DIV ? 2 : 1) && loss; i++) {
    fs_tensor *x = i ? b : a, *xw, *sum, *total;
    if (!x->rank || !x->requires_grad) continue;
    xw = fsG_binary(FSB_MUL, x, w), sum = xw ? fsG_sum(xw) : NULL, total = sum ? fsG_binary(FSB_ADD, loss, sum) : NULL;
    fsT_release(xw);
    fsT_release(sum);
    fsT_release(loss);
    loss = total;
  }
  if (!loss || fsG_backward(loss) < 0) fail_msg("%s", fsT_error());
  fsT_release(loss);
  return y;
}

/* The direct low paths on cuda (same-shaped and scalar arithmetic,
 * ReLU, GELU, GELU tanh, tanh, bfloat16 and float16) against the cpu's
 * (its direct paths, or the widened one: the same arithmetic), forward and
 * the inputs' gradients, bit for bit: each is the float32 op on widened
 * values rounded once (the activations' through fsN_act_low_table).  A
 * float32 0-dim side that requires grad sums its gradient in another order
 * on the device: 1e-6 rel. */
static void test_low_elementwise(void **state) {
  enum { N = 4099 };
  static const int64_t n1[1] = {N};
  fs_tensor *ha = rt_rand("la", -3, 3, 1, n1), *hb = rt_rand("lb", 0.25f, 2, 1, n1);
  fs_tensor *hw = rt_rand("lw", -1, 1, 1, n1), *hs = fsT_scalar(0.375f);
  assert_non_null(hs);
  fsT_f32(ha)[0] = -0.0f, fsT_f32(ha)[1] = 0.0f; /* ReLU's edge */
  static const fs_dtype types[2] = {FS_BF16, FS_F16};
  int k = 0;
  for (int t = 0; t < 2; t++)
    for (int op = FSB_ADD; op <= FSB_DIV + 1 + FSN_TANH; op++)
      /* sides: 0 both low, 1 b float32, 2 a float32, 3 b a float32 scalar,
       * 4 a a float32 scalar, 5 b a float32 scalar that requires grad */
      for (int sides = 0; sides < (op <= FSB_DIV ? 6 : 1); sides++, k++) {
        fs_tensor *y[2], *a[2], *b[2], *w[2];
        for (int d = 0; d < 2; d++) {
          fs_device dev = d ? FS_DEV_CUDA : FS_DEV_CPU;
          bool scalar_a = sides == 4, scalar_b = sides == 3 || sides == 5;
          a[d] = low_leaf(scalar_a ? hs : ha, scalar_a || sides == 2 ? FS_F32 : types[t], dev);
          b[d] = low_leaf(scalar_b ? hs : hb, scalar_b || sides == 1 ? FS_F32 : types[t], dev);
          a[d]->requires_grad = !scalar_a;
          b[d]->requires_grad = !scalar_b || sides == 5;
          w[d] = low_leaf(hw, FS_F32, dev);
          w[d]->requires_grad = false;
          y[d] = low_run(op, a[d], b[d], w[d]);
        }
        expect_same(y[1], y[0], "low forward", k);
        if (a[0]->grad) expect_same(a[1]->grad, a[0]->grad, "low grad a", k);
        if (op <= FSB_DIV && sides != 3 && sides != 5) expect_same(b[1]->grad, b[0]->grad, "low grad b", k);
        if (sides == 5) {
          fs_tensor *g = fsT_to_device(b[1]->grad, FS_DEV_CPU);
          assert_non_null(g);
          double ref = fsT_get(b[0]->grad, 0);
          assert_true(fabs(fsT_get(g, 0) - ref) <= 1e-6 * fabs(ref));
          fsT_release(g);
        }
        for (int d = 0; d < 2; d++) {
          fsT_release(y[d]);
          fsT_release(a[d]);
          fsT_release(b[d]);
          fsT_release(w[d]);
        }
      }
  fsT_release(ha);
  fsT_release(hb);
  fsT_release(hw);
  fsT_release(hs);
}

#endif
