/* diff.c -- the `diff -u` line diff that `fabricscript fix` prints: Myers'
 * O(ND) algorithm in linear space (divide and conquer on the middle snake),
 * then hunks with three lines of context. */
#include "diag.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CONTEXT 3

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) { fputs("fabricscript: out of memory\n", stderr); exit(3); }
  return q;
}

/* A line with its terminator, so that a last line without one differs from
 * the same text with one (as diff's "No newline at end of file" says). */
typedef struct dline { const char *s; size_t len; uint64_t hash; } dline;

typedef struct dfile { dline *lines; size_t n; char *changed; } dfile;

static void split_lines(dfile *f, const char *text, size_t len) {
  size_t cap = 16;
  f->lines = xrealloc(NULL, cap * sizeof *f->lines);
  f->n = 0;
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && text[j] != '\n') j++;
    if (j < len) j++;
    if (f->n == cap) f->lines = xrealloc(f->lines, (cap *= 2) * sizeof *f->lines);
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t k = i; k < j; k++) h = (h ^ (unsigned char)text[k]) * 1099511628211u;
    f->lines[f->n++] = (dline){ text + i, j - i, h };
    i = j;
  }
  f->changed = memset(xrealloc(NULL, f->n + 1), 0, f->n + 1);
}

typedef struct differ {
  const dline *a, *b;
  char *da, *db;   /* changed flags: deleted from a, inserted in b */
  long *vf, *vb;   /* forward and backward furthest x per diagonal */
} differ;

static int eq(const dline *x, const dline *y) {
  return x->hash == y->hash && x->len == y->len && memcmp(x->s, y->s, x->len) == 0;
}

/* Finds a point (*x, *y) on an optimal edit path of a[a0,a1) against
 * b[b0,b1) where the forward and backward searches meet (as in Neil
 * Fraser's diff-match-patch bisect). Both ranges are non-empty and differ
 * at both ends. Returns 0 if they never meet, which cannot happen for such
 * ranges; the caller treats it as "all changed" rather than trusting that. */
static int middle_snake(differ *df, long a0, long a1, long b0, long b1, long *x, long *y) {
  long n = a1 - a0, m = b1 - b0, delta = n - m, maxd = (n + m + 1) / 2, off = maxd;
  long *vf = df->vf, *vb = df->vb;
  long fstart = 0, fend = 0, bstart = 0, bend = 0; /* diagonals that left the grid */
  int odd = delta & 1;
  for (long i = 0; i < 2 * maxd + 2; i++) vf[i] = vb[i] = -1;
  vf[off + 1] = vb[off + 1] = 0;
  for (long d = 0; d < maxd; d++) {
    for (long k = -d + fstart; k <= d - fend; k += 2) {
      long xf = (k == -d || (k != d && vf[off + k - 1] < vf[off + k + 1]))
                    ? vf[off + k + 1] : vf[off + k - 1] + 1;
      long yf = xf - k;
      while (xf < n && yf < m && eq(&df->a[a0 + xf], &df->b[b0 + yf])) xf++, yf++;
      vf[off + k] = xf;
      if (xf > n) fend += 2;
      else if (yf > m) fstart += 2;
      else if (odd) {
        long kb = off + delta - k; /* the same diagonal seen from the end */
        if (kb >= 0 && kb < 2 * maxd && vb[kb] != -1 && xf >= n - vb[kb]) {
          *x = a0 + xf; *y = b0 + yf;
          return 1;
        }
      }
    }
    for (long k = -d + bstart; k <= d - bend; k += 2) {
      long xb = (k == -d || (k != d && vb[off + k - 1] < vb[off + k + 1]))
                    ? vb[off + k + 1] : vb[off + k - 1] + 1;
      long yb = xb - k;
      while (xb < n && yb < m && eq(&df->a[a1 - xb - 1], &df->b[b1 - yb - 1])) xb++, yb++;
      vb[off + k] = xb;
      if (xb > n) bend += 2;
      else if (yb > m) bstart += 2;
      else if (!odd) {
        long kf = off + delta - k;
        if (kf >= 0 && kf < 2 * maxd && vf[kf] != -1 && vf[kf] >= n - xb) {
          *x = a0 + vf[kf]; *y = b0 + vf[kf] - (kf - off);
          return 1;
        }
      }
    }
  }
  return 0;
}

static void compare(differ *df, long a0, long a1, long b0, long b1) {
  while (a0 < a1 && b0 < b1 && eq(&df->a[a0], &df->b[b0])) a0++, b0++;
  while (a0 < a1 && b0 < b1 && eq(&df->a[a1 - 1], &df->b[b1 - 1])) a1--, b1--;
  long x, y;
  if (a0 == a1 || b0 == b1 || !middle_snake(df, a0, a1, b0, b1, &x, &y) ||
      (x == a0 && y == b0) || (x == a1 && y == b1)) {
    memset(df->da + a0, 1, (size_t)(a1 - a0));
    memset(df->db + b0, 1, (size_t)(b1 - b0));
    return;
  }
  compare(df, a0, x, b0, y);
  compare(df, x, a1, y, b1);
}

static void put_line(FILE *out, char mark, const dline *l) {
  fputc(mark, out);
  fwrite(l->s, 1, l->len, out);
  if (l->len == 0 || l->s[l->len - 1] != '\n') fputs("\n\\ No newline at end of file\n", out);
}

/* diff -u's range: "start,count", "start" alone for one line, and for an
 * empty range the line before it. */
static void put_range(FILE *out, size_t first, size_t count) {
  if (count == 1) fprintf(out, "%zu", first + 1);
  else fprintf(out, "%zu,%zu", count ? first + 1 : first, count);
}

/* One hunk: from a[i], b[j] until both reach ai_end, bj_end. */
static void put_hunk(FILE *out, const dfile *a, const dfile *b, size_t i, size_t j,
                     size_t ai_end, size_t bj_end) {
  fputs("@@ -", out);
  put_range(out, i, ai_end - i);
  fputs(" +", out);
  put_range(out, j, bj_end - j);
  fputs(" @@\n", out);
  while (i < ai_end || j < bj_end) {
    if (i < ai_end && a->changed[i]) put_line(out, '-', &a->lines[i++]);
    else if (j < bj_end && b->changed[j]) put_line(out, '+', &b->lines[j++]);
    else put_line(out, ' ', &a->lines[i++]), j++;
  }
}

void fsD_print_unified_diff(FILE *out, const char *path, const char *old, size_t old_len,
                            const char *new_, size_t new_len) {
  dfile a, b;
  split_lines(&a, old, old_len);
  split_lines(&b, new_, new_len);
  size_t vlen = a.n + b.n + 4; /* 2 * maxd + 2 for the largest range */
  differ df = { a.lines, b.lines, a.changed, b.changed,
                xrealloc(NULL, vlen * sizeof(long)), xrealloc(NULL, vlen * sizeof(long)) };
  compare(&df, 0, (long)a.n, 0, (long)b.n);
  free(df.vf);
  free(df.vb);
  /* Walk both files in step; a hunk runs from CONTEXT lines before a change
   * to CONTEXT lines after the last change that is within 2 * CONTEXT
   * unchanged lines of the one before. */
  size_t i = 0, j = 0;
  int header = 0;
  while (i < a.n || j < b.n) {
    if (!(i < a.n && a.changed[i]) && !(j < b.n && b.changed[j])) { i++, j++; continue; }
    size_t back = i < CONTEXT ? i : CONTEXT, hi = i - back, hj = j - back;
    size_t ei = i, ej = j; /* just past the last change of the hunk */
    for (;;) {
      while ((ei < a.n && a.changed[ei]) || (ej < b.n && b.changed[ej])) {
        if (ei < a.n && a.changed[ei]) ei++;
        else ej++;
      }
      size_t gap = 0;
      while (ei + gap < a.n && !a.changed[ei + gap] && ej + gap < b.n && !b.changed[ej + gap])
        gap++;
      int more = (ei + gap < a.n && a.changed[ei + gap]) || (ej + gap < b.n && b.changed[ej + gap]);
      if (!more || gap > 2 * CONTEXT) {
        size_t after = gap < CONTEXT ? gap : CONTEXT;
        if (!header) fprintf(out, "--- a/%s\n+++ b/%s\n", path, path);
        header = 1;
        put_hunk(out, &a, &b, hi, hj, ei + after, ej + after);
        i = ei + gap;
        j = ej + gap;
        break;
      }
      ei += gap;
      ej += gap;
    }
  }
  free(a.lines); free(a.changed);
  free(b.lines); free(b.changed);
}
