/* sample.h -- text from a byte-level language model: nanoGPT's generate().
 *
 * A byte-level model's first layer is Embedding(256, dim) and it maps token
 * ids [1, T] to logits [1, T, 256]. Each new byte is drawn from
 * softmax(logits[-1] / temperature), restricted to the top_k largest logits
 * (ties with the k-th kept, as torch.topk's threshold keeps them), with the
 * running text cropped to its last `context` bytes (the model's first
 * PositionalEmbedding size; no crop without one). Draws are counter-based
 * (rng.h): draw i uses element i of a stream key, so the same key and
 * counter give the same text on every run and every rank. */
#ifndef FS_SAMPLE_H
#define FS_SAMPLE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "module.h"

#define FSSM_VOCAB 256
#define FSSM_ALL INT64_MAX /* top_k=None: every token stays */

typedef struct fsSM_opts {
  const unsigned char *prompt; size_t n; /* the text to continue, n >= 1 */
  int64_t max_new;                       /* bytes to draw, >= 0 */
  double temperature;                    /* > 0 and finite */
  int64_t top_k;                         /* >= 1 (above the vocabulary: all) */
} fsSM_opts;

/* 0 when o is valid, else -1 with the reason in err ("generate(): ...");
 * the checker asks it of literal arguments, the run of every call. Inline:
 * the checker links no runtime. */
static inline int fsSM_check_opts(const fsSM_opts *o, char *err, size_t len) {
  if (!o->n) snprintf(err, len, "generate(): prompt must not be empty (the model continues its last byte)");
  else if (o->max_new < 0) snprintf(err, len, "generate(): max_new_tokens must be >= 0, not %lld", (long long)o->max_new);
  else if (!(o->temperature > 0) || !isfinite(o->temperature))
    snprintf(err, len, "generate(): temperature must be > 0 and finite, not %g", o->temperature);
  else if (o->top_k < 1) snprintf(err, len, "generate(): top_k must be >= 1 or None, not %lld", (long long)o->top_k);
  else return 0;
  return -1;
}

/* 0 when m is a byte-level model (*context: its crop length, 0 for none),
 * else -1 + fsT_error naming what is wrong. Looks at the structure only. */
int fsSM_byte_lm(const fs_module *m, int64_t *context);

/* The token drawn from logits[FSSM_VOCAB] with u in [0, 1): the first whose
 * cumulative probability exceeds u. -1 + fsT_error on a non-finite logit. */
int fsSM_pick(const float *logits, double temperature, int64_t top_k, double u);

/* model(idx [1, T] int64 on cpu) -> logits [1, T, FSSM_VOCAB], a new reference. */
typedef fs_tensor *(*fsSM_forward)(void *ud, fs_tensor *idx);

/* Runs the sampling loop with autograd off: *out gets the prompt followed
 * by o->max_new drawn bytes (malloc'd, o->n + o->max_new of them). Draw j
 * of this call uses stream element *counter + j of key; *counter advances
 * past them. -1 + fsT_error (the forward's, or out of memory). */
int fsSM_generate(fsSM_forward fwd, void *ud, int64_t context, const fsSM_opts *o, uint64_t key,
                  uint64_t *counter, unsigned char **out);

#endif
