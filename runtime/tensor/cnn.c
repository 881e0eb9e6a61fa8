/* cnn.c -- cpu kernels of the convolutional layers (cnn.h gives the shapes
 * and conventions): cnn_typed.h's bodies instantiated for float, under the
 * fsN_ names themselves (f64_cnn_kernels.c instantiates them for double),
 * and the geometry helpers both types share. */
#include "cnn.h"

#include "cnn_typed.h"

size_t fsN_conv2d_scratch(const fsN_conv *g, bool backward) {
  conv_job j = {0};
  job_size(&j, g, backward ? backward_slices(g, true) : forward_parts(g), backward, backward);
  return (size_t)(j.ncol + j.ny) + j.partial_bytes / sizeof(float); /* one worker's columns */
}

static void windows_1d(int64_t in, int64_t outn, int64_t k, int64_t s, int64_t p, int mode,
                       int64_t *st, int64_t *en, int64_t *div) {
  for (int64_t o = 0; o < outn; o++) {
    if (mode == FSN_POOL_ADAPTIVE) {
      st[o] = o * in / outn;
      en[o] = ((o + 1) * in + outn - 1) / outn;
      div[o] = en[o] - st[o];
      continue;
    }
    int64_t a = o * s - p, e = a + k < in + p ? a + k : in + p, pool = e - a;
    st[o] = a < 0 ? 0 : a;
    en[o] = e > in ? in : e;
    div[o] = mode == FSN_POOL_INCL ? pool : en[o] - st[o];
  }
}

int fsN_avgwin_make(fsN_avgwin *w, int64_t **mem, const fsN_conv *g, int mode) {
  int64_t *m = *mem = malloc((size_t)(3 * (g->OH + g->OW)) * sizeof *m);
  if (!m) {
    fsT_seterr("out of memory");
    return -1;
  }
  *w = (fsN_avgwin){.H = g->H, .W = g->W, .OH = g->OH, .OW = g->OW, .hs = m, .he = m + g->OH,
                    .hdiv = m + 2 * g->OH, .ws = m + 3 * g->OH, .we = m + 3 * g->OH + g->OW,
                    .wdiv = m + 3 * g->OH + 2 * g->OW};
  windows_1d(g->H, g->OH, g->KH, g->sh, g->ph, mode, m, m + g->OH, m + 2 * g->OH);
  windows_1d(g->W, g->OW, g->KW, g->sw, g->pw, mode, m + 3 * g->OH, m + 3 * g->OH + g->OW,
             m + 3 * g->OH + 2 * g->OW);
  return 0;
}
