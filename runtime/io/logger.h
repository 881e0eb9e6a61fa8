/* logger.h -- fabric.log / fabric.log_dict as Lightning's CSVLogger with
 * root_dir=<root>, name="": <root>/version_N/metrics.csv, and at close a
 * plot of the losses beside it, metrics.svg.
 *
 * The version directory is created at the first log call; N is one more
 * than the highest existing "version_<digits>" directory in root (0 when
 * none), as Lightning numbers them, and the next one when another run takes
 * it first. The CSV has the column "step" and then every metric name in the
 * order it first appeared; a row per step in the order steps first
 * appeared, the metrics of all calls with the same step merged into it (a
 * name logged twice at a step keeps the last value); a metric a row lacks
 * is an empty cell. Fields are quoted as Python's csv module does and lines
 * end in "\r\n" as its writer's do. A metric named "step" is dropped: the
 * step column wins, as in Lightning.
 *
 * Every flush writes the whole file to a temporary one and renames it over
 * metrics.csv (atomicfile.h), so the file on disk is always complete, with
 * the header of every column so far; flushes happen at the first call, then
 * at the first call at least FSLG_FLUSH_INTERVAL seconds after the last
 * flush, and at close.
 *
 * Errors (a directory that cannot be created, a full disk): the call that
 * meets one returns -1 and one message naming the path; logging is then off
 * for the rest of the run, later calls returning 0 and doing nothing, so
 * the caller reports it once as a warning and training goes on. */
#ifndef FS_LOGGER_H
#define FS_LOGGER_H

#include <stddef.h>
#include <stdint.h>

#include "progress.h"

#define FSLG_FLUSH_INTERVAL 1.0
/* step=None: the number of log calls before this one (0, 1, 2, ...), the
 * count Lightning's CSVLogger uses while it has not flushed */
#define FSLG_STEP_NONE INT64_MIN

typedef struct fsLG fsLG;

typedef struct fsLG_metric {
  const char *name;
  const char *text; /* the CSV cell: Python's str() of the value ("0.25", "3") */
  double value;     /* the same as a number for the plot; NaN: not plotted */
} fsLG_metric;

/* A logger writing under root ("logs" unless the caller chose another);
 * touches nothing until the first log call. NULL only when out of memory. */
fsLG *fsLG_new(const char *root);
/* Tests substitute the clock of the flush throttle. */
void fsLG_set_clock(fsLG *lg, fsPG_clock now);
/* One log_dict call (log(name, value, step) is the call with n = 1).
 * 0, or -1 and *err (malloc'd; the caller frees it) on the error that turns
 * logging off. */
int fsLG_log(fsLG *lg, const fsLG_metric *m, size_t n, int64_t step, char **err);
/* "<root>/version_N" once created and while logging is on, else NULL. */
const char *fsLG_dir(const fsLG *lg);
/* The last flush of metrics.csv and the plot metrics.svg (of the metrics
 * whose name contains "loss", or of all when none does); frees lg, NULL
 * included. 0, or -1 and *err. */
int fsLG_close(fsLG *lg, char **err);

#endif
