/* tensor_str.c -- a tensor's repr exactly as torch 1.13 prints it
 * (torch/_tensor_str.py with the default print options: precision 4,
 * threshold 1000, edgeitems 3, linewidth 80): one _Formatter picks integer,
 * fixed or scientific notation and a common width from the values shown,
 * then rows nest with torch's separators and summarization.  Its caller is
 * lib_tensor.c's repr; tests/scripts/lang/tensor_print.fab pins the output
 * against torch's. */
#include "tensor_str.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytebuf.h"

enum { PRECISION = 4, THRESHOLD = 1000, EDGEITEMS = 3, LINEWIDTH = 80 };

static void puts_(fsT_buf *b, const char *s) { fsT_buf_put(b, s, strlen(s)); }

static void spaces(fsT_buf *b, int n) {
  for (int i = 0; i < n; i++) fsT_buf_put(b, " ", 1);
}

/* ---- _Formatter ---- */

typedef struct formatter { bool floating, boolean, int_mode, sci; int width; } formatter;

/* value as torch formats it, unpadded, into buf */
static int format_raw(const formatter *f, double v, char *buf, size_t len) {
  if (f->boolean) return snprintf(buf, len, "%s", v != 0 ? "True" : "False");
  if (!f->floating) return snprintf(buf, len, "%lld", (long long)v);
  if (f->sci) return snprintf(buf, len, "%.*e", PRECISION, v);
  if (f->int_mode) return snprintf(buf, len, isinf(v) || isnan(v) ? "%.0f" : "%.0f.", v);
  return snprintf(buf, len, "%.*f", PRECISION, v);
}

/* _Formatter.__init__ over the values shown (vals[n], as doubles) */
static void formatter_init(formatter *f, fs_dtype dt, const double *vals, size_t n) {
  char tmp[64];
  bool floating = dt != FS_I64 && dt != FS_BOOL;
  *f = (formatter){.floating = floating, .boolean = dt == FS_BOOL, .int_mode = true, .width = 1};
  if (!floating) { /* str(value): an integer, or True/False */
    for (size_t i = 0; i < n; i++) {
      int w = format_raw(f, vals[i], tmp, sizeof tmp);
      if (w > f->width) f->width = w;
    }
    return;
  }
  double mn = INFINITY, mx = 0;
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    double v = vals[i];
    if (!isfinite(v) || v == 0) continue;
    count++;
    mn = fmin(mn, fabs(v));
    mx = fmax(mx, fabs(v));
    if (v != ceil(v)) f->int_mode = false;
  }
  if (count == 0) return;
  f->sci = mx / mn > 1000.0 || mx > 1.0e8 || (!f->int_mode && mn < 1.0e-4);
  for (size_t i = 0; i < n; i++) {
    double v = vals[i];
    if (!isfinite(v) || v == 0) continue;
    int w;
    if (f->sci) w = snprintf(tmp, sizeof tmp, "%.*e", PRECISION, v);
    else if (f->int_mode) w = snprintf(tmp, sizeof tmp, "%.0f", v) + 1;
    else w = snprintf(tmp, sizeof tmp, "%.*f", PRECISION, v);
    if (w > f->width) f->width = w;
  }
}

/* ---- the values shown (get_summarized_data) ---- */

typedef struct dvec { double *v; size_t n, cap; bool oom; } dvec;

static void dpush(dvec *d, double x) {
  if (d->oom) return;
  if (d->n == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 64;
    double *v = realloc(d->v, cap * sizeof *v);
    if (!v) {
      d->oom = true;
      return;
    }
    d->v = v;
    d->cap = cap;
  }
  d->v[d->n++] = x;
}

/* row i of a block of rank dims is shown: all, or the first and last EDGEITEMS */
static bool row_shown(int64_t i, int64_t n, bool summarize) {
  return !summarize || n <= 2 * EDGEITEMS || i < EDGEITEMS || i >= n - EDGEITEMS;
}

static void collect(const fs_tensor *t, int64_t off, int d, bool summarize, dvec *out) {
  if (d == t->rank) {
    dpush(out, fsT_get(t, off));
    return;
  }
  int64_t stride = 1;
  for (int k = d + 1; k < t->rank; k++) stride *= t->shape[k];
  for (int64_t i = 0; i < t->shape[d]; i++)
    if (row_shown(i, t->shape[d], summarize)) collect(t, off + i * stride, d + 1, summarize, out);
}

/* ---- _tensor_str_with_formatter ---- */

static void value_str(fsT_buf *b, const formatter *f, double v) {
  char tmp[64];
  int n = format_raw(f, v, tmp, sizeof tmp);
  spaces(b, f->width - n);
  fsT_buf_put(b, tmp, (size_t)n);
}

static void vector_str(fsT_buf *b, const fs_tensor *t, int64_t off, int indent, bool summarize,
                       const formatter *f) {
  int64_t n = t->shape[t->rank - 1];
  int per_line = (LINEWIDTH - indent) / (f->width + 2);
  if (per_line < 1) per_line = 1;
  bool cut = summarize && n > 2 * EDGEITEMS;
  int64_t items = cut ? 2 * EDGEITEMS + 1 : n; /* the " ..." counts as an item */
  fsT_buf_put(b, "[", 1);
  for (int64_t k = 0; k < items; k++) {
    if (k) {
      if (k % per_line == 0) {
        fsT_buf_put(b, ",\n", 2);
        spaces(b, indent + 1);
      } else fsT_buf_put(b, ", ", 2);
    }
    if (cut && k == EDGEITEMS) puts_(b, " ...");
    else value_str(b, f, fsT_get(t, off + (cut && k > EDGEITEMS ? n - (items - k) : k)));
  }
  fsT_buf_put(b, "]", 1);
}

static void block_str(fsT_buf *b, const fs_tensor *t, int64_t off, int d, int indent, bool summarize,
                      const formatter *f) {
  int dims = t->rank - d;
  if (dims == 0) {
    value_str(b, f, fsT_get(t, off));
    return;
  }
  if (dims == 1) {
    vector_str(b, t, off, indent, summarize, f);
    return;
  }
  int64_t n = t->shape[d], stride = 1;
  for (int k = d + 1; k < t->rank; k++) stride *= t->shape[k];
  bool cut = summarize && n > 2 * EDGEITEMS;
  fsT_buf_put(b, "[", 1);
  bool first = true;
  for (int64_t i = 0; i < n; i++) {
    if (!row_shown(i, n, summarize)) continue;
    if (!first) {
      fsT_buf_put(b, ",", 1);
      for (int k = 0; k < dims - 1; k++) fsT_buf_put(b, "\n", 1);
      spaces(b, indent + 1);
    }
    first = false;
    block_str(b, t, off + i * stride, d + 1, indent + 1, summarize, f);
    if (cut && i == EDGEITEMS - 1) { /* the "..." row */
      fsT_buf_put(b, ",", 1);
      for (int k = 0; k < dims - 1; k++) fsT_buf_put(b, "\n", 1);
      spaces(b, indent + 1);
      puts_(b, "...");
    }
  }
  fsT_buf_put(b, "]", 1);
}

/* ---- _str_intern ---- */

/* tuple(t.shape) as Python prints it: (), (3,), (2, 3) */
static void tuple_str(const fs_tensor *t, char *buf, size_t len) {
  size_t k = (size_t)snprintf(buf, len, "(");
  for (int i = 0; i < t->rank && k < len; i++)
    k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  if (k < len) snprintf(buf + k, len - k, t->rank == 1 ? ",)" : ")");
}

char *fsT_str(const fs_tensor *t, const char *device, const char *grad_fn) {
  fsT_buf b = {0};
  const char *prefix = "tensor(";
  int indent = (int)strlen(prefix);
  char suffix[4][128];
  int ns = 0;
  puts_(&b, prefix);
  if (device) snprintf(suffix[ns++], sizeof suffix[0], "device='%s'", device);
  bool default_dtype = t->dtype == FS_F32 || t->dtype == FS_I64 || t->dtype == FS_BOOL;
  char dims[96];
  tuple_str(t, dims, sizeof dims);
  if (!t->data) { /* meta */
    snprintf(suffix[ns++], sizeof suffix[0], "size=%s", dims);
    if (t->dtype != FS_F32) snprintf(suffix[ns++], sizeof suffix[0], "dtype=torch.%s", fsT_dtype_name(t->dtype));
    puts_(&b, "...");
  } else if (t->numel == 0) {
    if (t->rank != 1) snprintf(suffix[ns++], sizeof suffix[0], "size=%s", dims);
    if (t->dtype != FS_F32) snprintf(suffix[ns++], sizeof suffix[0], "dtype=torch.%s", fsT_dtype_name(t->dtype));
    puts_(&b, "[]");
  } else {
    if (!default_dtype) snprintf(suffix[ns++], sizeof suffix[0], "dtype=torch.%s", fsT_dtype_name(t->dtype));
    bool summarize = t->numel > THRESHOLD;
    dvec shown = {0};
    collect(t, 0, 0, summarize, &shown);
    formatter f;
    formatter_init(&f, t->dtype, shown.v, shown.n);
    b.oom |= shown.oom;
    free(shown.v);
    block_str(&b, t, 0, 0, indent, summarize, &f);
  }
  if (grad_fn) snprintf(suffix[ns++], sizeof suffix[0], "%s", grad_fn);
  /* _add_suffixes */
  const char *nl = b.p ? strrchr((const char *)b.p, '\n') : NULL;
  long last = (long)b.n + 1 - (nl ? (long)(nl - (const char *)b.p) : -1); /* torch's off-by-one kept */
  for (int i = 0; i < ns; i++) {
    size_t sl = strlen(suffix[i]);
    if (last + (long)sl + 2 > LINEWIDTH) {
      fsT_buf_put(&b, ",\n", 2);
      spaces(&b, indent);
      last = indent + (long)sl;
    } else {
      fsT_buf_put(&b, ", ", 2);
      last += (long)sl + 2;
    }
    puts_(&b, suffix[i]);
  }
  fsT_buf_put(&b, ")", 1);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return (char *)b.p;
}
