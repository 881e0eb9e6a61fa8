/* rt_testutil.h -- helpers shared by the runtime unit tests. */
#ifndef FS_RT_TESTUTIL_H
#define FS_RT_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "autograd.h"
#include "rng.h"
#include "tensor.h"

/* A cpu f32 tensor of uniform values in [lo, hi), keyed by name. */
static inline fs_tensor *rt_rand(const char *name, float lo, float hi, int rank, const int64_t *shape) {
  fs_tensor *t = fsT_new(FS_F32, FS_DEV_CPU, rank, shape);
  assert_non_null(t);
  fsR_fill_uniform(fsT_f32(t), (size_t)t->numel, 1234, name, 0, lo, hi);
  return t;
}

static inline fs_tensor *rt_ok(fs_tensor *t) {
  if (!t) fail_msg("runtime error: %s", fsT_error());
  return t;
}

#endif
