/* svgplot.h -- line charts as a standalone SVG 1.1 document: one panel
 * per series, stacked, each with its frame, grid, ticks with labels at
 * 1-2-5 steps and the series' name as the panel's heading (the legend,
 * outside the plot area, so it never covers the data); the x axis label
 * under the last panel and a title on top. Written by hand so that the
 * metrics plot needs no library; every number in it is finite.
 *
 * The panels share one x range, so a step lines up across them. x ticks:
 * when every x is an integer (training steps), the tick
 * step is a whole number (at least 1), so ticks fall on integer steps and
 * read as integers. Points whose x or y is not finite or beyond +-1e300 are
 * left out (so a range always fits in a double). A series of more than
 * FSSVG_MAX_POINTS points is reduced to the minimum and maximum of each run
 * of consecutive points, which keeps its spikes. */
#ifndef FS_SVGPLOT_H
#define FS_SVGPLOT_H

#include <stddef.h>

#define FSSVG_MAX_POINTS 2000

typedef struct fsSVG_series {
  const char *name; /* the panel's heading; escaped as XML text */
  const double *x, *y;
  size_t n;
} fsSVG_series;

/* The document, malloc'd, its length in *len; NULL only when out of memory.
 * No series: one empty panel. */
char *fsSVG_render(const char *title, const char *xlabel, const fsSVG_series *s, size_t ns, size_t *len);

#endif
