/* logger.c -- the rows kept whole in memory: metrics.csv replaced
 * atomically from them (CSV), records appended to the event file as they
 * come (TensorBoard, tfevents.c), metrics.svg drawn from them at close. */
#define _POSIX_C_SOURCE 200809L
#include "logger.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "atomicfile.h"
#include "dataio.h"
#include "svgplot.h"

/* a directory another run keeps taking first is not worth more tries */
#define VERSION_TRIES 1000

typedef struct cell { size_t col; char *text; double value; } cell;
typedef struct row { int64_t step; cell *cells; size_t n, cap; } row;

struct fsLG {
  char *root, *name;
  char *version;   /* the run's directory name; NULL until chosen */
  fsLG_format format;
  int64_t flush_every;
  char *dir, *csv; /* NULL until the first call (csv: CSV only) */
  fsLG_events *events; /* TensorBoard: the event file, from the first call */
  char **cols;     /* metric names, in order of first appearance */
  size_t ncols, capcols;
  row *rows;       /* in order of first appearance of their step */
  size_t nrows, caprows;
  size_t *slots;   /* open addressing on step: row index + 1, 0 = free */
  size_t nslots;
  int64_t calls;
  double last_flush;
  int dirty, off;
  fsPG_clock now;
};

fsLG *fsLG_new(const fsLG_where *w) {
  fsLG *lg = calloc(1, sizeof *lg);
  if (!lg || !(lg->root = strdup(w->root)) || !(lg->name = strdup(w->name ? w->name : "")) ||
      (w->version && !(lg->version = strdup(w->version)))) {
    if (lg) free(lg->root), free(lg->name);
    free(lg);
    return NULL;
  }
  lg->format = w->format;
  lg->flush_every = w->flush_every;
  lg->last_flush = -INFINITY;
  lg->now = fsPG_monotonic;
  return lg;
}

void fsLG_set_clock(fsLG *lg, fsPG_clock now) { lg->now = now; }

const char *fsLG_dir(const fsLG *lg) { return lg->off ? NULL : lg->dir; }

/* Everything but root: after an error and at close. */
static void drop(fsLG *lg) {
  for (size_t r = 0; r < lg->nrows; r++) {
    for (size_t c = 0; c < lg->rows[r].n; c++) free(lg->rows[r].cells[c].text);
    free(lg->rows[r].cells);
  }
  for (size_t c = 0; c < lg->ncols; c++) free(lg->cols[c]);
  free(lg->rows);
  free(lg->cols);
  free(lg->slots);
  free(lg->dir);
  free(lg->csv);
  fsLG_events_close(lg->events);
  lg->events = NULL;
  lg->rows = NULL;
  lg->cols = NULL;
  lg->slots = NULL;
  lg->dir = lg->csv = NULL;
  lg->nrows = lg->caprows = lg->ncols = lg->capcols = lg->nslots = 0;
}

/* Turns logging off after the error now in *err; returns -1. */
static int fail(fsLG *lg) {
  drop(lg);
  lg->off = 1;
  return -1;
}

/* Grows *p (of *cap elements of size) to hold need; 0 or -1. */
static int reserve(void *p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 8;
  while (n < need) n *= 2;
  void *q = realloc(*(void **)p, n * size);
  if (!q) return -1;
  *(void **)p = q;
  *cap = n;
  return 0;
}

/* --- the version directory --------------------------------------------- */

/* Lightning's reading of a version directory's name: the digits between
 * "version_" and the next '_' (so "version_2_old" is 2); -1 if none. */
static long long version_of(const char *name) {
  if (strncmp(name, "version_", 8) != 0) return -1;
  const char *d = name + 8;
  size_t n = strcspn(d, "_");
  if (n == 0 || n > 18 || strspn(d, "0123456789") < n) return -1;
  return strtoll(d, NULL, 10);
}

/* The directory the versions live in: root, or root/name. */
static char *versions_dir(const fsLG *lg) {
  return lg->name[0] ? fsIO_errf("%s/%s", lg->root, lg->name) : strdup(lg->root);
}

/* One more than the highest version there (0 when none, or no directory yet). */
static long long next_version(const char *base, char **err) {
  DIR *d = opendir(base);
  if (!d && errno == ENOENT) return 0;
  if (!d) return fsIO_fail(err, "%s: cannot list the log directory: %s", base, strerror(errno));
  long long max = -1;
  struct dirent *e;
  struct stat st;
  while ((e = readdir(d)))
    if (version_of(e->d_name) > max && fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode))
      max = version_of(e->d_name);
  closedir(d);
  return max + 1;
}

const char *fsLG_version(fsLG *lg) {
  if (lg->version) return lg->version;
  char *base = versions_dir(lg);
  long long v = base ? next_version(base, NULL) : -1;
  free(base);
  lg->version = fsIO_errf("version_%lld", v < 0 ? 0 : v);
  return lg->version;
}

/* The run's files once its directory exists: metrics.csv's path, or the event file. */
static int open_files(fsLG *lg, char **err) {
  if (lg->format == FSLG_TENSORBOARD) return (lg->events = fsLG_events_open(lg->dir, err)) ? 0 : -1;
  lg->csv = fsIO_errf("%s/metrics.csv", lg->dir);
  return lg->csv ? 0 : fsIO_fail(err, "%s: out of memory", lg->dir);
}

static int open_run(fsLG *lg, char **err) {
  char *base = versions_dir(lg);
  if (!base) return fsIO_fail(err, "%s: out of memory", lg->root);
  int rc = fsK_make_dirs(base, "log", err);
  if (rc == 0 && lg->version) { /* named (or looked up): that directory, made or not */
    lg->dir = fsIO_errf("%s/%s", base, lg->version);
    rc = !lg->dir ? fsIO_fail(err, "%s: out of memory", base) : fsK_make_dirs(lg->dir, "log", err);
    free(base);
    return rc < 0 ? -1 : open_files(lg, err);
  }
  long long v = rc < 0 ? -1 : next_version(base, err);
  for (int tries = 0; v >= 0 && tries < VERSION_TRIES; tries++, v++) {
    char *dir = fsIO_errf("%s/version_%lld", base, v);
    if (!dir) {
      v = fsIO_fail(err, "%s: out of memory", base);
      break;
    }
    if (mkdir(dir, 0777) == 0) {
      free(base);
      lg->dir = dir;
      lg->version = fsIO_errf("version_%lld", v);
      return lg->version ? open_files(lg, err) : fsIO_fail(err, "%s: out of memory", dir);
    }
    int e = errno;
    if (e != EEXIST) fsIO_fail(err, "%s: cannot create the log directory: %s", dir, strerror(e));
    free(dir);
    if (e != EEXIST) v = -1;
  }
  if (v >= 0) fsIO_fail(err, "%s: cannot create a new version_N directory in it", base);
  free(base);
  return -1;
}

/* --- rows and columns ---------------------------------------------------- */

static size_t slot_of(const fsLG *lg, int64_t step) {
  uint64_t h = (uint64_t)step * 0x9e3779b97f4a7c15u;
  size_t i = (size_t)(h ^ h >> 29) & (lg->nslots - 1);
  while (lg->slots[i] && lg->rows[lg->slots[i] - 1].step != step) i = (i + 1) & (lg->nslots - 1);
  return i;
}

/* The row of step, appended when new; NULL when out of memory. */
static row *row_of(fsLG *lg, int64_t step) {
  if (2 * (lg->nrows + 1) > lg->nslots) { /* rehash at half full */
    size_t n = lg->nslots ? lg->nslots * 2 : 64;
    size_t *s = calloc(n, sizeof *s);
    if (!s) return NULL;
    free(lg->slots);
    lg->slots = s;
    lg->nslots = n;
    for (size_t r = 0; r < lg->nrows; r++) lg->slots[slot_of(lg, lg->rows[r].step)] = r + 1;
  }
  size_t i = slot_of(lg, step);
  if (lg->slots[i]) return &lg->rows[lg->slots[i] - 1];
  if (reserve(&lg->rows, &lg->caprows, lg->nrows + 1, sizeof *lg->rows) < 0) return NULL;
  lg->rows[lg->nrows] = (row){.step = step};
  lg->slots[i] = ++lg->nrows;
  return &lg->rows[lg->nrows - 1];
}

/* The column of name, appended when new; -1 when out of memory. */
static long col_of(fsLG *lg, const char *name) {
  for (size_t c = 0; c < lg->ncols; c++)
    if (strcmp(lg->cols[c], name) == 0) return (long)c;
  char *s = strdup(name);
  if (!s || reserve(&lg->cols, &lg->capcols, lg->ncols + 1, sizeof *lg->cols) < 0) {
    free(s);
    return -1;
  }
  lg->cols[lg->ncols] = s;
  return (long)lg->ncols++;
}

static int set_cell(fsLG *lg, row *r, const fsLG_metric *m) {
  long col = col_of(lg, m->name);
  char *text = col < 0 ? NULL : strdup(m->text);
  size_t i = 0;
  while (i < r->n && r->cells[i].col != (size_t)col) i++;
  if (!text || (i == r->n && reserve(&r->cells, &r->cap, r->n + 1, sizeof *r->cells) < 0)) {
    free(text);
    return -1;
  }
  if (i == r->n) r->n++;
  else free(r->cells[i].text);
  r->cells[i] = (cell){(size_t)col, text, m->value};
  return 0;
}

/* --- files --------------------------------------------------------------- */

/* A field as Python's csv.writer (QUOTE_MINIMAL) writes it. */
static void put_field(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static int flush(fsLG *lg, char **err) {
  char *buf = NULL;
  size_t len = 0;
  const char **line = calloc(lg->ncols + 1, sizeof *line);
  FILE *f = line ? open_memstream(&buf, &len) : NULL;
  if (!f) {
    free(line);
    return fsIO_fail(err, "%s: out of memory", lg->csv);
  }
  fputs("step", f);
  for (size_t c = 0; c < lg->ncols; c++) {
    fputc(',', f);
    put_field(f, lg->cols[c]);
  }
  fputs("\r\n", f);
  for (size_t r = 0; r < lg->nrows; r++) {
    const row *w = &lg->rows[r];
    memset(line, 0, lg->ncols * sizeof *line);
    for (size_t i = 0; i < w->n; i++) line[w->cells[i].col] = w->cells[i].text;
    fprintf(f, "%lld", (long long)w->step);
    for (size_t c = 0; c < lg->ncols; c++) {
      fputc(',', f);
      put_field(f, line[c] ? line[c] : "");
    }
    fputs("\r\n", f);
  }
  free(line);
  int bad = ferror(f);
  if ((fclose(f) != 0) | bad) {
    free(buf);
    return fsIO_fail(err, "%s: out of memory", lg->csv);
  }
  int rc = fsK_atomic_write(lg->csv, buf, len, err);
  free(buf);
  lg->dirty = 0;
  lg->last_flush = lg->now();
  return rc;
}

/* Every metric as a series of metrics.svg, one panel each. */
static int plot(fsLG *lg, char **err) {
  fsSVG_series *s = calloc(lg->ncols + 1, sizeof *s);
  double *xy = calloc(2 * lg->ncols * lg->nrows + 1, sizeof *xy);
  char *path = fsIO_errf("%s/metrics.svg", lg->dir);
  char *title = lg->format == FSLG_CSV ? fsIO_errf("%s/metrics.csv", lg->dir) : fsIO_errf("%s", lg->dir);
  size_t len = 0;
  char *svg = NULL;
  if (s && xy && path && title) {
    for (size_t c = 0; c < lg->ncols; c++) {
      double *x = xy + 2 * c * lg->nrows, *y = x + lg->nrows;
      s[c] = (fsSVG_series){.name = lg->cols[c], .x = x, .y = y};
      for (size_t r = 0; r < lg->nrows; r++)
        for (size_t i = 0; i < lg->rows[r].n; i++)
          if (lg->rows[r].cells[i].col == c) {
            x[s[c].n] = (double)lg->rows[r].step;
            y[s[c].n++] = lg->rows[r].cells[i].value;
          }
    }
    svg = fsSVG_render(title, "step", s, lg->ncols, &len);
  }
  int rc = svg ? fsK_atomic_write(path, svg, len, err) : fsIO_fail(err, "%s: out of memory", lg->dir);
  free(svg);
  free(title);
  free(path);
  free(xy);
  free(s);
  return rc;
}

/* --- hparams.yaml ------------------------------------------------------------ */

/* Whether PyYAML writes s unquoted: a plain word that reads back as a string. */
static bool yaml_plain(const char *s) {
  static const char *const words[] = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"};
  if (!*s || strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_") == 0) return false;
  if (s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-")]) return false;
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (strcasecmp(s, words[i]) == 0) return false;
  return true;
}

/* A single-quoted YAML scalar: quotes doubled. */
static void yaml_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

/* A number as PyYAML's representer writes Python's repr of it: "1e-05" is
 * "1.0e-05", infinities and NaN ".inf", "-.inf", ".nan". */
static void yaml_number(FILE *f, const fsLG_hparam *h) {
  const char *t = h->text;
  if (isnan(h->value)) fputs(".nan", f);
  else if (isinf(h->value)) fputs(h->value > 0 ? ".inf" : "-.inf", f);
  else if (strchr(t, 'e') && !strchr(t, '.')) fprintf(f, "%.*s.0%s", (int)(strchr(t, 'e') - t), t, strchr(t, 'e'));
  else fputs(t, f);
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(const fsLG_hparam *const *)a)->name, (*(const fsLG_hparam *const *)b)->name);
}

static int save_hparams(fsLG *lg, const fsLG_hparam *h, size_t n, char **err) {
  char *path = fsIO_errf("%s/hparams.yaml", lg->dir), *buf = NULL;
  size_t len = 0;
  const fsLG_hparam **sorted = calloc(n + 1, sizeof *sorted);
  FILE *f = path && sorted ? open_memstream(&buf, &len) : NULL;
  if (!f) {
    free(sorted);
    free(path);
    return fsIO_fail(err, "%s: out of memory", lg->dir);
  }
  for (size_t i = 0; i < n; i++) sorted[i] = &h[i];
  qsort(sorted, n, sizeof *sorted, by_name);
  for (size_t i = 0; i < n; i++) {
    const fsLG_hparam *p = sorted[i];
    if (yaml_plain(p->name)) fputs(p->name, f);
    else yaml_quoted(f, p->name);
    fputs(": ", f);
    if (p->kind == FSLG_NONE) fputs("null", f);
    else if (p->kind == FSLG_BOOL) fputs(p->value ? "true" : "false", f);
    else if (p->kind == FSLG_NUMBER) yaml_number(f, p);
    else if (yaml_plain(p->text)) fputs(p->text, f);
    else yaml_quoted(f, p->text);
    fputc('\n', f);
  }
  int bad = ferror(f);
  int rc = (fclose(f) != 0) | bad ? fsIO_fail(err, "%s: out of memory", path) : fsK_atomic_write(path, buf, len, err);
  free(buf);
  free(sorted);
  free(path);
  return rc;
}

/* --- the API ------------------------------------------------------------- */

int fsLG_log(fsLG *lg, const fsLG_metric *m, size_t n, int64_t step, char **err) {
  if (lg->off) return 0;
  int64_t given = step;
  /* step=None: CSV counts the calls, as Lightning's CSVLogger; TensorBoard's
   * record has no step, which TensorBoard reads as 0 */
  if (step == FSLG_STEP_NONE) step = lg->format == FSLG_CSV ? lg->calls : 0;
  lg->calls++;
  if (!lg->dir && open_run(lg, err) < 0) return fail(lg);
  row *r = row_of(lg, step);
  for (size_t i = 0; r && i < n; i++)
    if (strcmp(m[i].name, "step") != 0 && set_cell(lg, r, &m[i]) < 0) r = NULL;
  if (!r) {
    fsIO_fail(err, "%s: out of memory", lg->dir);
    return fail(lg);
  }
  if (lg->format == FSLG_TENSORBOARD) /* as torch's add_scalar, one record per metric */
    return fsLG_events_scalars(lg->events, m, n, given, err) < 0 ? fail(lg) : 0;
  lg->dirty = 1;
  bool nth = lg->flush_every > 0 && (step + 1) % lg->flush_every == 0;
  if ((nth || lg->now() - lg->last_flush >= FSLG_FLUSH_INTERVAL) && flush(lg, err) < 0) return fail(lg);
  return 0;
}

int fsLG_flush(fsLG *lg, char **err) {
  if (lg->off || !lg->dirty || lg->format != FSLG_CSV) return 0;
  return flush(lg, err) < 0 ? fail(lg) : 0;
}

int fsLG_hparams(fsLG *lg, const fsLG_hparam *h, size_t n, int64_t step, char **err) {
  if (lg->off) return 0;
  if (!lg->dir && open_run(lg, err) < 0) return fail(lg);
  if (save_hparams(lg, h, n, err) < 0) return fail(lg);
  if (lg->format != FSLG_TENSORBOARD) return 0;
  /* Lightning's default_hp_metric: hp_metric = -1 logged first, the metric the summaries name */
  static const char *const hp[] = {"hp_metric"};
  fsLG_metric metric = {"hp_metric", "-1", -1};
  if (fsLG_log(lg, &metric, 1, step, err) < 0) return -1;
  return fsLG_events_hparams(lg->events, h, n, hp, 1, step, err) < 0 ? fail(lg) : 0;
}

int fsLG_close(fsLG *lg, char **err) {
  if (!lg) return 0;
  int rc = 0;
  if (!lg->off && lg->dir) {
    if (lg->dirty) rc = flush(lg, err);
    if (rc == 0) rc = plot(lg, err);
  }
  drop(lg);
  free(lg->root);
  free(lg->name);
  free(lg->version);
  free(lg);
  return rc;
}
