/* grad_scaler.c -- torch.cuda.amp.GradScaler as 16-mixed uses it: the loss
 * scaled before backward, the gradients unscaled (and checked for inf/NaN)
 * once per optimizer and step, a step skipped when they were not finite,
 * and the scale updated after it (torch's _amp_update_scale_).  Under FSDP
 * it is torch's ShardedGradScaler: the same, with the inf check of each
 * rank's shards summed over all ranks, so that every rank skips a step
 * when any rank's shard overflowed.
 *
 * Invariant: an optimizer's `unscaled` and `found_inf` describe the
 * gradients since the scaler's last update; fsO_scaler_update clears them.
 * The other half: interp/eval/lib_fabric.c (fabric.backward scales,
 * clip_gradients unscales) and lib_optim.c (a set-up optimizer's step goes
 * through fsO_scaler_step and fsO_scaler_update, as Fabric's MixedPrecision
 * plugin's optimizer_step). */
#include "optim.h"
#include "backend.h"

#include <math.h>

void fsO_scaler_init(fsO_scaler *s) {
  *s = (fsO_scaler){.scale = 65536.0f, .growth_factor = 2.0f, .backoff_factor = 0.5f,
                    .growth_interval = 2000};
}

void fsO_scaler_shard(fsO_scaler *s, fsO_combine any_rank, void *ud) {
  s->any_rank = any_rank;
  s->ud = ud;
}

/* torch: scaler.unscale_(optimizer) -> _amp_foreach_non_finite_check_and_unscale_
 * with inv_scale = scale.double().reciprocal().float() */
int fsO_scaler_unscale(fsO_scaler *s, fs_optim *o) {
  if (o->unscaled) {
    fsT_seterr("unscale_() has already been called on this optimizer since the last update().");
    return -1;
  }
  float inv = (float)(1.0 / (double)s->scale);
  for (int64_t i = 0; i < o->nparams; i++) {
    fs_tensor *g = o->params[i]->grad;
    if (!g) continue;
    if (g->dtype != FS_F32) { /* torch: "Attempting to unscale FP16 gradients." */
      fsT_seterr("Attempting to unscale FP16 gradients.");
      return -1;
    }
    const fsB_backend *b = fsB_of(g);
    if (!isfinite(b->absmax((size_t)g->numel, fsT_f32(g)))) o->found_inf = true;
    b->scale((size_t)g->numel, inv, fsT_f32(g));
  }
  if (s->any_rank) { /* ShardedGradScaler.unscale_: dist.all_reduce(found_inf) */
    float found = o->found_inf ? 1.0f : 0.0f;
    if (s->any_rank(s->ud, &found, false) < 0) return -1;
    o->found_inf = found >= 1.0f;
  }
  o->unscaled = true;
  return 0;
}

int fsO_scaler_step(fsO_scaler *s, fs_optim *o, bool *stepped) {
  *stepped = false;
  if (!o->unscaled && fsO_scaler_unscale(s, o) < 0) return -1;
  if (o->found_inf) return 0; /* the step is skipped; the scale backs off at update */
  *stepped = true;
  return fsO_step(o);
}

void fsO_scaler_update(fsO_scaler *s, fs_optim *o) {
  if (o->found_inf) {
    s->scale *= s->backoff_factor;
    s->growth_tracker = 0;
  } else if (++s->growth_tracker == s->growth_interval) {
    float grown = s->scale * s->growth_factor;
    if (isfinite(grown)) s->scale = grown;
    s->growth_tracker = 0;
  }
  o->unscaled = o->found_inf = false;
}
