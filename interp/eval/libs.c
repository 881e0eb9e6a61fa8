/* libs.c -- the libraries a run opens (Lua's linit.c) and the index from a
 * builtin's signature to its implementation.
 * Every row names an fsSig entry; the index is dense over the sig table, so
 * binding a builtin is one array read (tests/unit/test_signatures.c checks
 * that no row is registered twice or names a builtin that does not exist). */
#include <stdlib.h>
#include <string.h>

#include "eval_int.h"

static const fsE_lib *const libs[] = {
  &fsE_lib_core, &fsE_lib_tensor, &fsE_lib_ctx, &fsE_lib_nn, &fsE_lib_optim,
  &fsE_lib_data, &fsE_lib_strategy, &fsE_lib_fabric, &fsE_lib_ckpt,
  &fsE_lib_torch, &fsE_lib_shape, &fsE_lib_arith,
  &fsE_lib_sched, &fsE_lib_math, &fsE_lib_functional, &fsE_lib_init, &fsE_lib_classes, &fsE_lib_sampler, &fsE_lib_files,
  &fsE_lib_metrics, &fsE_lib_loggers,
  &fsE_lib_index,
  &fsE_lib_precision,
  &fsE_lib_plugins,
};

/* Sig index -> implementation, filled on first use (a run is one thread). */
static fsE_native *index_of;

static int build_index(void) {
  size_t n;
  const fsSig *all = fsSig_all(&n);
  fsE_native *ix = calloc(n, sizeof *ix);
  if (!ix) return -1;
  for (size_t l = 0; l < sizeof libs / sizeof libs[0]; l++)
    for (const fsE_reg *r = libs[l]->funcs; r->name; r++) {
      const char *dot = strchr(r->name, '.');
      char type[32];
      const fsSig *sig = NULL;
      if (!dot) sig = fsSig_find(r->name);
      else if ((size_t)(dot - r->name) < sizeof type) {
        memcpy(type, r->name, (size_t)(dot - r->name));
        type[dot - r->name] = '\0';
        sig = fsSig_member(type, dot + 1);
      }
      if (sig) ix[sig - all] = r->fn;
    }
  index_of = ix;
  return 0;
}

fsE_native fsE_native_of(const fsSig *sig) {
  size_t n;
  const fsSig *all = fsSig_all(&n);
  if (!index_of && build_index() < 0) return NULL;
  return sig >= all && sig < all + n ? index_of[sig - all] : NULL;
}

const fsE_lib *const *fsE_libs(size_t *n) {
  *n = sizeof libs / sizeof libs[0];
  return libs;
}
