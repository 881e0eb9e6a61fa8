/* plan.c -- per-rank memory plan (see plan.h). */
#include "plan.h"

#include <stdlib.h>
#include "comm.h"
#include "fsdp.h"

int fsPL_rank_bytes(const fsPL_input *in, fsPL_rank *out) {
  uint64_t n = (uint64_t)fsM_num_parameters(in->model), largest = 0;
  if (in->sharded) {
    int64_t *sz;
    int nu = fsSH_unit_sizes(in->model, &sz);
    if (nu < 0) return -1;
    n = 0;
    for (int u = 0; u < nu; u++) {
      uint64_t shard = fsCC_shard((size_t)sz[u], in->world);
      n += shard;
      if (shard > largest) largest = shard;
    }
    free(sz);
  }
  out->params = (uint64_t)in->param_bytes * n;
  out->grads = 4 * n;
  out->optim = in->optimizer ? 4 * (uint64_t)in->states * n : 0;
  out->gathered = (uint64_t)(in->param_bytes + 4) * largest * (uint64_t)in->world;
  out->total = out->params + out->grads + out->optim + out->gathered;
  return 0;
}

static void human(char *buf, size_t n, uint64_t bytes) {
  static const char *const unit[] = {"B", "KiB", "MiB"}; /* MiB at most: one unit to compare */
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 2) v /= 1024, u++;
  if (u) snprintf(buf, n, "%.1f %s", v, unit[u]);
  else snprintf(buf, n, "%llu B", (unsigned long long)bytes);
}

int fsPL_print(FILE *out, const fsPL_input *in) {
  fprintf(out, "plan: %s on %s, %d rank%s, precision %s, %s with %lld parameters, optimizer %s\n",
          in->strategy, in->accelerator, in->world, in->world == 1 ? "" : "s", in->precision,
          in->model_class, (long long)fsM_num_parameters(in->model), in->optimizer ? in->optimizer : "none");
  fprintf(out, "%-6s %14s %14s %14s %14s %14s\n", "rank", "parameters", "gradients", "optimizer",
          "gathered unit", "total");
  fsPL_rank b;
  if (fsPL_rank_bytes(in, &b) < 0) return -1;
  for (int r = 0; r < in->world; r++) { /* shards are padded to one size: every rank holds the same */
    char c[5][32];
    human(c[0], 32, b.params);
    human(c[1], 32, b.grads);
    human(c[2], 32, b.optim);
    human(c[3], 32, b.gathered);
    human(c[4], 32, b.total);
    fprintf(out, "%-6d %14s %14s %14s %14s %14s\n", r, c[0], c[1], c[2], c[3], c[4]);
  }
  return 0;
}
