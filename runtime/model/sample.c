/* sample.c -- the sampling loop of a byte-level language model. */
#include "sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "rng.h"

#define LM_NEEDS "generate() needs a byte-level language model"

/* The first PositionalEmbedding's context, depth first; 0 when none. */
static int64_t context_of(const fs_module *m) {
  if (m->kind == FSM_POSEMB) return m->in;
  for (int i = 0; i < m->nkids; i++) {
    int64_t c = context_of(m->kids[i]);
    if (c) return c;
  }
  return 0;
}

int fsSM_byte_lm(const fs_module *m, int64_t *context) {
  const fs_module *first = m;
  while ((first->kind == FSM_SEQUENTIAL || first->kind == FSM_REPEAT) && first->nkids) first = first->kids[0];
  if (first->kind != FSM_EMBEDDING) {
    fsT_seterr(LM_NEEDS ", whose first layer is Embedding(256, dim); this one's is %s", fsM_kind_name(first->kind));
    return -1;
  }
  if (first->in != FSSM_VOCAB) {
    fsT_seterr(LM_NEEDS ", whose first layer is Embedding(256, dim); this one's is Embedding(%lld, %lld)",
               (long long)first->in, (long long)first->out);
    return -1;
  }
  *context = context_of(m);
  int64_t in[2] = {1, *context ? *context : 1}, out[FS_MAX_RANK];
  int rank;
  const fs_module *bad;
  char why[256], a[96], b[96];
  fsT_dims_str(2, in, a, sizeof a);
  if (fsM_out_shape(m, 2, in, &rank, out, &bad, why, sizeof why) < 0) {
    fsT_seterr("generate(): the model cannot take tokens %s: %s", a, why);
    return -1;
  }
  if (rank != 3 || out[0] != 1 || out[1] != in[1] || out[2] != FSSM_VOCAB) {
    fsT_seterr(LM_NEEDS ", which maps tokens [1, T] to logits [1, T, 256]; this one maps %s to %s", a,
               fsT_dims_str(rank, out, b, sizeof b));
    return -1;
  }
  return 0;
}

static int descending(const void *x, const void *y) {
  float a = *(const float *)x, b = *(const float *)y;
  return (a < b) - (a > b);
}

int fsSM_pick(const float *logits, double temperature, int64_t top_k, double u) {
  float top[FSSM_VOCAB]; /* [V] sorted, largest first */
  double p[FSSM_VOCAB], sum = 0;
  for (int i = 0; i < FSSM_VOCAB; i++)
    if (!isfinite(logits[i])) {
      fsT_seterr("generate(): the model's logit for byte %d is %g", i, (double)logits[i]);
      return -1;
    }
  memcpy(top, logits, sizeof top);
  qsort(top, FSSM_VOCAB, sizeof *top, descending);
  float cut = top[(top_k < FSSM_VOCAB ? top_k : FSSM_VOCAB) - 1];
  /* softmax((l - max) / temperature): the largest term is 1, none overflows */
  for (int i = 0; i < FSSM_VOCAB; i++) {
    p[i] = logits[i] >= cut ? exp(((double)logits[i] - top[0]) / temperature) : 0;
    sum += p[i];
  }
  double r = u * sum;
  int last = 0;
  for (int i = 0; i < FSSM_VOCAB; i++) {
    if (p[i] == 0) continue;
    last = i;
    if ((r -= p[i]) < 0) return i;
  }
  return last; /* r ran past the end by rounding */
}

/* The byte drawn from the last row of logits [1, T, V] with stream bits. */
static int next_token(const fs_tensor *logits, int64_t T, const fsSM_opts *o, uint64_t bits) {
  if (logits->rank != 3 || logits->shape[0] != 1 || logits->shape[1] != T || logits->shape[2] != FSSM_VOCAB ||
      !logits->data) {
    char s[96];
    fsT_seterr(LM_NEEDS ", which maps tokens [1, T] to logits [1, T, 256]; this one gave %s",
               fsT_shape_str(logits, s, sizeof s));
    return -1;
  }
  fs_tensor *h = fsT_to_device((fs_tensor *)logits, FS_DEV_CPU); /* read on the host */
  if (!h) return -1;
  float row[FSSM_VOCAB]; /* [V] logits of the byte after position T-1 */
  for (int v = 0; v < FSSM_VOCAB; v++) row[v] = (float)fsT_get(h, (T - 1) * FSSM_VOCAB + v);
  fsT_release(h);
  return fsSM_pick(row, o->temperature, o->top_k, (double)(bits >> 11) * 0x1p-53);
}

int fsSM_generate(fsSM_forward fwd, void *ud, int64_t context, const fsSM_opts *o, uint64_t key,
                  uint64_t *counter, unsigned char **out) {
  size_t len = o->n;
  unsigned char *text = malloc(o->n + (size_t)o->max_new);
  if (!text) {
    fsT_seterr("generate(): out of memory for %lld bytes", (long long)o->max_new);
    return -1;
  }
  memcpy(text, o->prompt, o->n);
  bool grad = fsG_set_grad_enabled(false); /* nothing to backpropagate: no tape */
  int tok = 0;
  for (int64_t j = 0; tok >= 0 && j < o->max_new; j++) {
    int64_t T = context && (int64_t)len > context ? context : (int64_t)len;
    fs_tensor *idx = fsT_new(FS_I64, FS_DEV_CPU, 2, (int64_t[]){1, T}); /* [1, T]: the last T bytes */
    fs_tensor *logits = NULL;                                          /* [1, T, V] */
    if (idx) {
      for (int64_t t = 0; t < T; t++) fsT_i64(idx)[t] = text[len - (size_t)T + (size_t)t];
      logits = fwd(ud, idx);
    }
    tok = logits ? next_token(logits, T, o, fsR_bits(key, *counter + (uint64_t)j)) : -1;
    if (tok >= 0) text[len++] = (unsigned char)tok;
    fsT_release(logits);
    fsT_release(idx);
  }
  fsG_set_grad_enabled(grad);
  *counter += (uint64_t)o->max_new;
  if (tok < 0) {
    free(text);
    return -1;
  }
  *out = text;
  return 0;
}
