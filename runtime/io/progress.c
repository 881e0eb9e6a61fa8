/* progress.c -- a tqdm-like line per epoch: in place on a terminal, plain
 * periodic lines elsewhere. */
#define _POSIX_C_SOURCE 200809L
#include "progress.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#define BAR_WIDTH 20
#define LINE_MAX_LEN 256

struct fsPG {
  FILE *out;
  int tty;
  int64_t total;
  int epochs;
  fsPG_clock now;
  int epoch;        /* 1-based number of the current (or last) epoch */
  int shown_epochs; /* the current epoch's count (0: unknown) */
  int validation;   /* the current pass validates */
  int next_epoch, next_epochs, next_validation; /* set_pass: for the next begin */
  int in_epoch;
  int open;         /* tty: a line is drawn and not yet ended */
  double start;     /* when the epoch began */
  double last_draw; /* when the last line was drawn */
  double interval;  /* plain: seconds between lines */
  int64_t done;
  double loss;      /* the mean of the epoch's losses so far (NaN: none) */
  double loss_sum, last_loss; /* last_loss: step loss_step's, counted in loss_sum */
  int64_t nloss, loss_step;
};

double fsPG_monotonic(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

fsPG *fsPG_new(FILE *out, int is_tty, int64_t total, int epochs) {
  fsPG *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->out = out;
  p->tty = is_tty;
  p->total = total > 0 ? total : 0;
  p->epochs = epochs > 0 ? epochs : 0;
  p->now = fsPG_monotonic;
  p->interval = FSPG_PLAIN_INTERVAL;
  p->loss = NAN;
  return p;
}

void fsPG_set_clock(fsPG *p, fsPG_clock now) { p->now = now; }

void fsPG_set_interval(fsPG *p, double seconds) { p->interval = seconds; }

void fsPG_fmt_rate(char *buf, size_t len, double r) {
  if (!(r > 0) || !isfinite(r)) snprintf(buf, len, "? it/s");
  else if (r >= 1) snprintf(buf, len, "%.1f it/s", r);
  else snprintf(buf, len, "%.2f s/it", 1 / r);
}

void fsPG_fmt_hms(char *buf, size_t len, double sec) {
  if (!(sec >= 0) || sec >= 3.6e10) {
    snprintf(buf, len, "--:--:--");
    return;
  }
  long long s = llround(sec);
  snprintf(buf, len, "%02lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
}

/* Appends to buf[len] at *n; the text is cut at the end of buf. */
static void put(char *buf, size_t len, size_t *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *n, len - *n, fmt, ap);
  va_end(ap);
  if (k > 0) *n = *n + (size_t)k < len ? *n + (size_t)k : len - 1;
}

/* Four decimals in the usual range of a loss, else three significant
 * digits with an exponent, so tiny and huge values stay readable. */
static void fmt_loss(char *buf, size_t len, double v) {
  double a = fabs(v);
  snprintf(buf, len, a == 0 || (a >= 1e-3 && a < 1e5) ? "%.4f" : "%.3e", v);
}

static void render(const fsPG *p, int final, char *buf, size_t len) {
  size_t n = 0;
  char t[32];
  double elapsed = p->now() - p->start;
  double rate = (double)p->done / elapsed;
  buf[0] = '\0';
  put(buf, len, &n, p->shown_epochs ? "%sepoch %d/%d" : "%sepoch %d", p->validation ? "val " : "", p->epoch,
      p->shown_epochs);
  put(buf, len, &n, p->total ? "  %lld/%lld" : "  %lld", (long long)p->done, (long long)p->total);
  if (p->total) {
    int fill = p->done >= p->total ? BAR_WIDTH : (int)(p->done * BAR_WIDTH / p->total);
    char bar[BAR_WIDTH + 1];
    memset(bar, ' ', BAR_WIDTH);
    memset(bar, '=', (size_t)fill);
    if (fill < BAR_WIDTH) bar[fill] = '>';
    bar[BAR_WIDTH] = '\0';
    put(buf, len, &n, " [%s]", bar);
  }
  fsPG_fmt_rate(t, sizeof t, rate);
  put(buf, len, &n, "  %s", t);
  if (!isnan(p->loss)) {
    fmt_loss(t, sizeof t, p->loss);
    put(buf, len, &n, "  loss %s", t);
  }
  if (final) {
    fsPG_fmt_hms(t, sizeof t, elapsed);
    put(buf, len, &n, "  time %s", t);
  } else if (p->total) {
    int64_t left = p->done < p->total ? p->total - p->done : 0;
    fsPG_fmt_hms(t, sizeof t, rate > 0 && isfinite(rate) ? (double)left / rate : NAN);
    put(buf, len, &n, "  ETA %s", t);
  }
}

/* A line wider than the terminal would wrap, and "\r" would then return
 * to its last row only: cut it to the width when there is one. */
static void fit_terminal(const fsPG *p, char *line) {
  struct winsize ws;
  if (ioctl(fileno(p->out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && strlen(line) >= ws.ws_col)
    line[ws.ws_col - 1] = '\0';
}

static void draw(fsPG *p, int final) {
  char line[LINE_MAX_LEN];
  render(p, final, line, sizeof line);
  if (p->tty) {
    fit_terminal(p, line);
    fprintf(p->out, "\r%s\x1b[K%s", line, final ? "\n" : "");
    p->open = !final;
  } else {
    fprintf(p->out, "%s\n", line);
  }
  fflush(p->out);
  p->last_draw = p->now();
}

void fsPG_set_pass(fsPG *p, int epoch, int epochs, int validation) {
  p->next_epoch = epoch > 0 ? epoch : 0;
  p->next_epochs = epochs > 0 ? epochs : 0;
  p->next_validation = validation;
}

void fsPG_epoch_begin(fsPG *p) {
  if (p->in_epoch) fsPG_epoch_end(p);
  p->epoch = p->next_epoch ? p->next_epoch : p->epoch + 1;
  p->shown_epochs = p->next_epoch ? p->next_epochs : p->epochs;
  p->validation = p->next_validation;
  p->next_epoch = p->next_epochs = p->next_validation = 0;
  p->in_epoch = 1;
  p->done = 0;
  p->loss = NAN;
  p->loss_sum = 0;
  p->nloss = p->loss_step = 0;
  p->start = p->now();
  /* in place the first step shows at once; a log gets its first line
   * one interval into the epoch */
  p->last_draw = p->tty ? -INFINITY : p->start;
}

void fsPG_step(fsPG *p, int64_t done, double loss) {
  if (!p->in_epoch) fsPG_epoch_begin(p);
  p->done = done;
  if (!isnan(loss)) { /* the epoch's mean, as Lightning's bar shows an epoch-level loss */
    if (p->nloss && done == p->loss_step) p->loss_sum -= p->last_loss, p->nloss--; /* the step again */
    p->loss_sum += loss;
    p->last_loss = loss;
    p->loss_step = done;
    p->loss = p->loss_sum / (double)++p->nloss;
  }
  /* a log's last step is left to the end of the epoch's line */
  if (p->now() - p->last_draw >= (p->tty ? FSPG_TTY_INTERVAL : p->interval) &&
      (p->tty || !p->total || done < p->total))
    draw(p, 0);
}

void fsPG_epoch_end(fsPG *p) {
  if (!p->in_epoch) return;
  draw(p, 1);
  p->in_epoch = 0;
}

void fsPG_clear(fsPG *p) {
  if (!p->open) return;
  fputs("\r\x1b[K", p->out);
  fflush(p->out);
  p->open = 0;
  p->last_draw = -INFINITY;
}

void fsPG_free(fsPG *p) {
  if (!p) return;
  if (p->open) fputc('\n', p->out);
  free(p);
}
