/* svgplot.c -- line charts as SVG text, one panel per series, written
 * into a memory stream. */
#define _POSIX_C_SOURCE 200809L
#include "svgplot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* the canvas: a title band, then panels of PANEL_H each (a heading band
 * of HEAD_H over a plot area), then the x axis label */
#define W 800
#define TITLE_H 44.0
#define PANEL_H 230.0
#define HEAD_H 26.0
#define TICKS_H 24.0 /* under each plot area: the x tick labels */
#define XLABEL_H 30.0
#define X0 80.0
#define X1 (W - 20.0)
#define LIMIT 1e300
#define MAX_TICKS 40

static const char *const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define NCOLOURS (sizeof colours / sizeof colours[0])

typedef struct range { double lo, hi; } range;

static int usable(double x, double y) {
  return isfinite(x) && isfinite(y) && fabs(x) <= LIMIT && fabs(y) <= LIMIT;
}

/* Text as XML character data: the five specials escaped, and what XML or
 * UTF-8 does not allow (control characters, broken sequences) as '?'. */
static void put_text(FILE *f, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    int n = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : (*p & 0xf8) == 0xf0 ? 4 : 0;
    for (int i = 1; i < n; i++)
      if ((p[i] & 0xc0) != 0x80) n = 0;
    if (n > 1) {
      fwrite(p, 1, (size_t)n, f);
      p += n;
      continue;
    }
    switch (*p) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&apos;", f); break;
    default: fputc(n == 1 && (*p >= 0x20 || *p == '\t') ? *p : '?', f);
    }
    p++;
  }
}

/* Pads a range by frac of its width on each side; one without points is
 * [0, 1] and a single value v is v +- |v| / 10 (+- 1 about zero). */
static range pad(range r, double frac) {
  if (r.lo > r.hi) return (range){0, 1};
  double d = r.hi - r.lo;
  if (d == 0) {
    d = fabs(r.lo) > 1e-300 ? fabs(r.lo) / 10 : 1;
    frac = 1;
  }
  return (range){r.lo - d * frac, r.hi + d * frac};
}

static double map(range r, double v, double a, double b) {
  return a + (v - r.lo) / (r.hi - r.lo) * (b - a);
}

/* A 1, 2 or 5 times a power of ten giving about six ticks over r; at
 * least 1 when whole (the axis holds integers only). */
static double tick_step(range r, int whole) {
  double raw = (r.hi - r.lo) / 6;
  double mag = pow(10, floor(log10(raw)));
  double f = raw / mag;
  double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  return whole && step < 1 ? 1 : step;
}

/* One panel's plot area: [X0, X1] x [y0, y1]. */
typedef struct area { double y0, y1; } area;

/* Grid lines, tick marks and labels of one axis (horizontal when xaxis). */
static void axis(FILE *f, range r, int xaxis, int whole, area A) {
  double Y0 = A.y0, Y1 = A.y1;
  double step = tick_step(r, whole);
  double first = ceil(r.lo / step) * step;
  for (int i = 0; i < MAX_TICKS; i++) {
    double t = first + i * step;
    if (t > r.hi) break;
    if (fabs(t) < step * 1e-9) t = 0; /* not -1.1e-17 */
    if (xaxis) {
      double x = map(r, t, X0, X1);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", x, Y0, x, Y1);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", x, Y1, x, Y1 + 5);
      fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.6g</text>\n", x, Y1 + 20, t);
    } else {
      double y = map(r, t, Y1, Y0);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", X0, y, X1, y);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", X0 - 5, y, X0, y);
      fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.6g</text>\n", X0 - 8, y + 4, t);
    }
  }
}

/* The points of one series, each run of `bucket` usable points reduced to
 * its lowest and highest, in their order. */
static void point(FILE *f, const fsSVG_series *s, size_t i, range xr, range yr, area A) {
  fprintf(f, "%.1f,%.1f ", map(xr, s->x[i], X0, X1), map(yr, s->y[i], A.y1, A.y0));
}

static void points(FILE *f, const fsSVG_series *s, size_t bucket, range xr, range yr, area A) {
  size_t in = 0, lo = 0, hi = 0;
  for (size_t i = 0; i <= s->n; i++) {
    if (i < s->n && !usable(s->x[i], s->y[i])) continue;
    if (i == s->n ? in > 0 : in == bucket) { /* a full run, or the last one */
      point(f, s, lo < hi ? lo : hi, xr, yr, A);
      if (lo != hi) point(f, s, lo < hi ? hi : lo, xr, yr, A);
      in = 0;
    }
    if (i == s->n) break;
    if (in == 0 || s->y[i] < s->y[lo]) lo = i;
    if (in == 0 || s->y[i] > s->y[hi]) hi = i;
    in++;
  }
}

static void series(FILE *f, const fsSVG_series *s, const char *colour, range xr, range yr, area A) {
  size_t n = 0, only = 0;
  for (size_t i = 0; i < s->n; i++)
    if (usable(s->x[i], s->y[i])) {
      n++;
      only = i;
    }
  if (n == 1) { /* a polyline of one point draws nothing */
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
            map(xr, s->x[only], X0, X1), map(yr, s->y[only], A.y1, A.y0), colour);
  } else if (n > 1) {
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colour);
    points(f, s, (n + FSSVG_MAX_POINTS / 2 - 1) / (FSSVG_MAX_POINTS / 2), xr, yr, A);
    fputs("\"/>\n", f);
  }
}

/* One panel: its heading (the series' name and colour, above the plot
 * area), axes over the series' own ranges, the frame and the line. */
static void panel(FILE *f, const fsSVG_series *s, size_t k, double top, range xr, int whole) {
  range yr = {INFINITY, -INFINITY};
  for (size_t i = 0; s && i < s->n; i++)
    if (usable(s->x[i], s->y[i])) {
      yr.lo = fmin(yr.lo, s->y[i]);
      yr.hi = fmax(yr.hi, s->y[i]);
    }
  yr = pad(yr, 0.05);
  area A = {top + HEAD_H, top + PANEL_H - TICKS_H};
  const char *colour = colours[k % NCOLOURS];
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
          X0, top + HEAD_H - 10, X0 + 24, top + HEAD_H - 10, colour);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">", X0 + 30, top + HEAD_H - 6);
  put_text(f, s ? s->name : "no metrics logged");
  fputs("</text>\n", f);
  axis(f, xr, 1, whole, A);
  axis(f, yr, 0, 0, A);
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#000\"/>\n",
          X0, A.y0, X1 - X0, A.y1 - A.y0);
  if (s) series(f, s, colour, xr, yr, A);
}

char *fsSVG_render(const char *title, const char *xlabel, const fsSVG_series *s, size_t ns, size_t *len) {
  size_t panels = ns ? ns : 1;
  double H = TITLE_H + PANEL_H * (double)panels + XLABEL_H;
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f) return NULL;
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%.0f\" "
             "viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
             "<rect width=\"%d\" height=\"%.0f\" fill=\"#fff\"/>\n",
          W, H, W, H, W, H);
  fprintf(f, "<text x=\"%.1f\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">", W / 2.0);
  put_text(f, title);
  fputs("</text>\n", f);
  /* one x range for every panel, so a step lines up across metrics */
  range xr = {INFINITY, -INFINITY};
  int whole = 1;
  for (size_t k = 0; k < ns; k++)
    for (size_t i = 0; i < s[k].n; i++)
      if (usable(s[k].x[i], s[k].y[i])) {
        xr.lo = fmin(xr.lo, s[k].x[i]);
        xr.hi = fmax(xr.hi, s[k].x[i]);
        whole &= s[k].x[i] == floor(s[k].x[i]);
      }
  xr = pad(xr, 0);
  for (size_t k = 0; k < panels; k++) panel(f, ns ? &s[k] : NULL, k, TITLE_H + PANEL_H * (double)k, xr, whole);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (X0 + X1) / 2, H - 10);
  put_text(f, xlabel);
  fputs("</text>\n</svg>\n", f);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    free(buf);
    return NULL;
  }
  return buf;
}
