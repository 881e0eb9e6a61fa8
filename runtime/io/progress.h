/* progress.h -- the progress display of a training loop over a data loader.
 *
 * On a terminal: one line rewritten in place ("\r", the line, ESC[K),
 *   epoch 1/2  234/469 [=========>          ]  412.3 it/s  loss 0.4312  ETA 00:00:03
 * ("val epoch 1/2" for a validation pass)
 * redrawn at most every FSPG_TTY_INTERVAL seconds and always at the end of
 * the epoch, which ends it with a newline ("time hh:mm:ss" replaces the ETA
 * there). Elsewhere (a log file, a pipe): the same text as plain lines, one
 * each time the interval (FSPG_PLAIN_INTERVAL seconds unless set) passed
 * since the epoch began or since the last line, plus one at the end of the
 * epoch; no control characters.
 *
 * The caller decides where it draws: is_tty from isatty(fileno(out)), and
 * in a distributed run only global rank 0 creates one (every rank drawing
 * on a shared terminal would interleave). Unknown sizes are 0: total steps
 * per epoch 0 drops "/total", the bar and the ETA; epochs 0 drops "/epochs".
 * Nothing here fails once created: write errors on out are out's to report. */
#ifndef FS_PROGRESS_H
#define FS_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FSPG_TTY_INTERVAL 0.1
#define FSPG_PLAIN_INTERVAL 10.0

/* Seconds on some monotonic clock; the bar's throttle and the logger's
 * flush throttle read one, tests substitute their own. */
typedef double (*fsPG_clock)(void);
double fsPG_monotonic(void); /* CLOCK_MONOTONIC */

typedef struct fsPG fsPG;

/* NULL only when out of memory. Reads fsPG_monotonic until set_clock. */
fsPG *fsPG_new(FILE *out, int is_tty, int64_t total, int epochs);
void fsPG_set_clock(fsPG *p, fsPG_clock now);
/* The plain lines' interval in seconds (0: every step; INFINITY: only the
 * ends of epochs); a terminal's redraws keep FSPG_TTY_INTERVAL. */
void fsPG_set_interval(fsPG *p, double seconds);
/* Epochs count from 1 on each begin; a step outside an epoch begins one. */
void fsPG_epoch_begin(fsPG *p);
/* What the next epoch_begin heads its line with: epoch of epochs (the
 * caller's loop knows them: `for epoch in range(10)` gives 3 of 10 in its
 * third round; 0 keeps the bar's own count and the count it was made
 * with), and "val epoch" for a validation pass. */
void fsPG_set_pass(fsPG *p, int epoch, int epochs, int validation);
/* done: the steps finished in this epoch, this one included (1 after the
 * first batch); loss: this step's loss, NaN for none. The line shows the
 * mean of the epoch's losses so far (the last batch's alone swings: it read
 * as divergence while accuracy rose), so the epoch's line shows its mean. */
void fsPG_step(fsPG *p, int64_t done, double loss);
/* Draws the final line of the epoch; a no-op outside one. */
void fsPG_epoch_end(fsPG *p);
/* Erases a line drawn in place so that other output (a print in the loop)
 * starts on a clean line; the next step draws it again. */
void fsPG_clear(fsPG *p);
/* Ends a line left open in place (an epoch cut short) with a newline. */
void fsPG_free(fsPG *p);

/* "412.3 it/s", "2.50 s/it" below one step a second, "? it/s" when not
 * positive and finite. */
void fsPG_fmt_rate(char *buf, size_t len, double steps_per_s);
/* Seconds rounded to the nearest one as "hh:mm:ss" (hours widen past 99),
 * "--:--:--" when negative, not finite or beyond ten million hours. */
void fsPG_fmt_hms(char *buf, size_t len, double seconds);

#endif
