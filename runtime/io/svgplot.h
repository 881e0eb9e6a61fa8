/* svgplot.h -- a line chart as a standalone SVG 1.1 document: frame, grid,
 * ticks with labels at 1-2-5 steps, axis labels, title, one polyline per
 * series in its own colour, and a legend. Written by hand so that the
 * metrics plot needs no library; every number in it is finite.
 *
 * Points whose x or y is not finite or beyond +-1e300 are left out (so a
 * range always fits in a double). A series of more than FSSVG_MAX_POINTS
 * points is reduced to the minimum and maximum of each run of consecutive
 * points, which keeps its spikes. */
#ifndef FS_SVGPLOT_H
#define FS_SVGPLOT_H

#include <stddef.h>

#define FSSVG_MAX_POINTS 2000

typedef struct fsSVG_series {
  const char *name; /* the legend entry; escaped as XML text */
  const double *x, *y;
  size_t n;
} fsSVG_series;

/* The document, malloc'd, its length in *len; NULL only when out of memory. */
char *fsSVG_render(const char *title, const char *xlabel, const char *ylabel,
                   const fsSVG_series *s, size_t ns, size_t *len);

#endif
