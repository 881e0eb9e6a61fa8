/* logger.h -- the loggers of Lightning Fabric: CSVLogger and
 * TensorBoardLogger (lightning.fabric.loggers), and fabric.log's default
 * (a CSV logger with root "logs", name ""). Files under
 * <root>/<name>/<version>: metrics.csv (CSV) or an event file
 * events.out.tfevents.<time>.<host>.<pid>.0 (TensorBoard), hparams.yaml
 * once hyper-parameters are logged, and at close a plot of every metric,
 * metrics.svg. Its other half: tfevents.c writes the TensorBoard records.
 *
 * The version directory is created at the first log call; unless the
 * caller names it, it is version_N with N one more than the highest
 * existing "version_<digits>" directory (0 when none), as Lightning numbers
 * them, and the next one when another run takes it first. The CSV has the
 * column "step" and then every metric name in the order it first appeared;
 * a row per step in the order steps first appeared, the metrics of all
 * calls with the same step merged into it (a name logged twice at a step
 * keeps the last value); a metric a row lacks is an empty cell. Fields are
 * quoted as Python's csv module does and lines end in "\r\n" as its
 * writer's do. A metric named "step" is dropped: the step column wins, as
 * in Lightning.
 *
 * Every flush writes the whole CSV to a temporary file and renames it over
 * metrics.csv (atomicfile.h), so the file on disk is always complete, with
 * the header of every column so far; flushes happen at the first call, at
 * every step s with (s + 1) % flush_every == 0 (flush_logs_every_n_steps),
 * at the first call at least FSLG_FLUSH_INTERVAL seconds after the last
 * flush, and at close. TensorBoard records are appended as they come (one
 * write each: a killed run leaves whole records, at worst a cut last one,
 * which TensorBoard's reader skips).
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

typedef enum fsLG_format { FSLG_CSV, FSLG_TENSORBOARD } fsLG_format;

typedef struct fsLG_where {
  const char *root;    /* root_dir */
  const char *name;    /* "" or NULL: the versions directly under root */
  const char *version; /* the run's directory name ("version_3", "run-a"); NULL: the next version_N */
  fsLG_format format;
  int64_t flush_every; /* CSV: flush_logs_every_n_steps (0: by time alone) */
} fsLG_where;

typedef struct fsLG_metric {
  const char *name;
  const char *text; /* the CSV cell: Python's str() of the value ("0.25", "3") */
  double value;     /* the same as a number for the plot; NaN: not plotted */
} fsLG_metric;

/* A logger writing where w says (copied); touches nothing until the first
 * log call. NULL only when out of memory. */
fsLG *fsLG_new(const fsLG_where *w);
/* Tests substitute the clock of the flush throttle. */
void fsLG_set_clock(fsLG *lg, fsPG_clock now);
/* One log_dict call (log(name, value, step) is the call with n = 1).
 * 0, or -1 and *err (malloc'd; the caller frees it) on the error that turns
 * logging off. */
int fsLG_log(fsLG *lg, const fsLG_metric *m, size_t n, int64_t step, char **err);
/* metrics.csv as it is now (CSV; event records are written as they come):
 * Lightning's save(). 0, or -1 and *err as fsLG_log. */
int fsLG_flush(fsLG *lg, char **err);
/* "<root>/<name>/<version>" once created and while logging is on, else NULL. */
const char *fsLG_dir(const fsLG *lg);
/* The run's directory name ("version_3"), choosing the next version_N (by
 * the directories there now) when the caller named none and no log call
 * has yet: Lightning's `version`, read before anything is written. NULL
 * only when out of memory. */
const char *fsLG_version(fsLG *lg);

/* One hyper-parameter of log_hyperparams: a number, a string, a bool or None. */
typedef enum fsLG_kind { FSLG_NUMBER, FSLG_STRING, FSLG_BOOL, FSLG_NONE } fsLG_kind;
typedef struct fsLG_hparam {
  const char *name;
  fsLG_kind kind;
  const char *text; /* number: Python's str() ("0.001", "1e-05", "3"); string: itself */
  double value;     /* number and bool */
} fsLG_hparam;
/* hparams.yaml in the run's directory (keys sorted, values as PyYAML's
 * dump writes them), and for TensorBoard the hparams plugin's summaries as
 * torch's SummaryWriter writes them for Lightning (hp_metric -1 first, then
 * the experiment, session start and session end infos), at step (or none). */
int fsLG_hparams(fsLG *lg, const fsLG_hparam *h, size_t n, int64_t step, char **err);
/* The last flush of metrics.csv and the plot metrics.svg (one panel per
 * metric); frees lg, NULL included. 0, or -1 and *err. */
int fsLG_close(fsLG *lg, char **err);

/* ---- tfevents.c: TensorBoard's event files -------------------------------
 * A record is the little-endian uint64 length of data, the masked CRC-32C
 * of those 8 bytes, data, the masked CRC-32C of data; data is an Event
 * protocol buffer (wall_time 1, step 2, file_version 3, summary 5). */
typedef struct fsLG_events fsLG_events;
/* Creates dir/events.out.tfevents.<time>.<host>.<pid>.0 and writes the
 * first record, file_version "brain.Event:2". NULL + *err. */
fsLG_events *fsLG_events_open(const char *dir, char **err);
/* One Event per metric: Summary.Value {tag, simple_value} at step
 * (FSLG_STEP_NONE: no step field, as torch's add_scalar with step=None). */
int fsLG_events_scalars(fsLG_events *ev, const fsLG_metric *m, size_t n, int64_t step, char **err);
/* The hparams plugin's three summaries (experiment, session start info,
 * session end info) for h and the metric names; 0 or -1 + *err. */
int fsLG_events_hparams(fsLG_events *ev, const fsLG_hparam *h, size_t n, const char *const *metrics,
                        size_t nmetrics, int64_t step, char **err);
const char *fsLG_events_path(const fsLG_events *ev);
void fsLG_events_close(fsLG_events *ev);
/* CRC-32C (Castagnoli) and TensorBoard's mask of it. */
uint32_t fsLG_crc32c(const void *data, size_t n);
uint32_t fsLG_masked_crc(const void *data, size_t n);

#endif
