/* test_logger.c -- metrics.csv as Lightning's CSVLogger writes it, its
 * atomic flushes, the version directories and metrics.svg. Each test works
 * in its own temporary directory, on a fake clock. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "dataio.h"
#include "logger.h"
#include "svgplot.h"

static double now_s;
static double fake_clock(void) { return now_s; }

/* --- scratch directories and files ------------------------------------- */

static char *path_of(const char *dir, const char *name) {
  char *p = fsIO_errf("%s/%s", dir, name);
  assert_non_null(p);
  return p;
}

static int setup(void **state) {
  const char *tmp = getenv("TMPDIR");
  char *dir = fsIO_errf("%s/fslg.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(dir);
  assert_non_null(mkdtemp(dir));
  *state = dir;
  now_s = 0;
  return 0;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f) { return remove(p); }

static int teardown(void **state) {
  nftw(*state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(*state);
  return 0;
}

/* The whole file, malloc'd; NULL when it does not exist. */
static char *slurp(const char *path) {
  uint8_t *data;
  size_t len;
  char *err = NULL;
  if (fsIO_slurp(path, &data, &len, &err) < 0) {
    free(err);
    return NULL;
  }
  return (char *)data;
}

static void assert_file(const char *dir, const char *name, const char *want) {
  char *p = path_of(dir, name);
  char *s = slurp(p);
  assert_non_null(s);
  assert_string_equal(s, want);
  free(s);
  free(p);
}

static fsLG *new_logger(const char *root) {
  fsLG *lg = fsLG_new(&(fsLG_where){.root = root, .format = FSLG_CSV});
  assert_non_null(lg);
  fsLG_set_clock(lg, fake_clock);
  return lg;
}

/* log(name, value, step) with the value's text as %.17g gives it */
static int log1(fsLG *lg, const char *name, double v, int64_t step) {
  char text[32];
  snprintf(text, sizeof text, "%.17g", v);
  fsLG_metric m = {name, text, v};
  char *err = NULL;
  int rc = fsLG_log(lg, &m, 1, step, &err);
  if (rc < 0) fail_msg("%s", err);
  return rc;
}

static void close_ok(fsLG *lg) {
  char *err = NULL;
  if (fsLG_close(lg, &err) < 0) fail_msg("%s", err);
}

/* --- version directories --------------------------------------------------- */

static void test_versions_follow_the_highest_existing(void **state) {
  char *root = path_of(*state, "a/b/logs"); /* missing parents are made */
  fsLG *lg = new_logger(root);
  close_ok(lg); /* no log call: nothing is created */
  struct stat st;
  char *a = path_of(*state, "a");
  assert_int_not_equal(stat(a, &st), 0);
  free(a);

  const char *want[] = {"version_0", "version_1", "version_6", "version_10"};
  for (int i = 0; i < 4; i++) {
    if (i == 2) { /* only directories named version_<digits> count */
      char *p = path_of(root, "version_5");
      assert_int_equal(mkdir(p, 0777), 0);
      free(p);
      p = path_of(root, "version_x");
      assert_int_equal(mkdir(p, 0777), 0);
      free(p);
      p = path_of(root, "version_8");
      FILE *f = fopen(p, "w");
      assert_non_null(f);
      fclose(f);
      free(p);
    }
    if (i == 3) { /* Lightning reads "version_9_old" as version 9 */
      char *p = path_of(root, "version_9_old");
      assert_int_equal(mkdir(p, 0777), 0);
      free(p);
    }
    lg = new_logger(root);
    assert_null(fsLG_dir(lg));
    log1(lg, "loss", 1.5, 0);
    char *dir = path_of(root, want[i]);
    assert_string_equal(fsLG_dir(lg), dir);
    free(dir);
    close_ok(lg);
  }
  free(root);
}

/* --- the CSV ------------------------------------------------------------- */

static void test_same_step_merges_into_one_row(void **state) {
  char *root = path_of(*state, "logs");
  fsLG *lg = new_logger(root);
  fsLG_metric two[] = {{"loss", "0.5", 0.5}, {"acc", "0.75", 0.75}};
  char *err = NULL;
  assert_int_equal(fsLG_log(lg, two, 2, 0, &err), 0);
  log1(lg, "loss", 0.25, 1);
  log1(lg, "lr", 0.125, 0);   /* back to step 0: its row */
  log1(lg, "acc", 1, 1);
  log1(lg, "acc", 0.5, 1);    /* twice at a step: the last value */
  log1(lg, "step", 99, 2);    /* the step column wins */
  char *dir = strdup(fsLG_dir(lg));
  close_ok(lg);
  assert_file(dir, "metrics.csv", "step,loss,acc,lr\r\n0,0.5,0.75,0.125\r\n1,0.25,0.5,\r\n2,,,\r\n");
  free(dir);
  free(root);
}

static void test_new_metric_rewrites_the_header(void **state) {
  char *root = path_of(*state, "logs");
  fsLG *lg = new_logger(root);
  log1(lg, "loss", 0.5, 0); /* the first call flushes */
  assert_file(fsLG_dir(lg), "metrics.csv", "step,loss\r\n0,0.5\r\n");
  now_s = 2;
  log1(lg, "val_acc", 0.875, 1);
  assert_file(fsLG_dir(lg), "metrics.csv", "step,loss,val_acc\r\n0,0.5,\r\n1,,0.875\r\n");
  close_ok(lg);
  free(root);
}

static void test_flushes_at_most_once_a_second(void **state) {
  char *root = path_of(*state, "logs");
  fsLG *lg = new_logger(root);
  log1(lg, "loss", 4, 0);
  now_s = 0.5;
  log1(lg, "loss", 3, 1); /* in memory only */
  assert_file(fsLG_dir(lg), "metrics.csv", "step,loss\r\n0,4\r\n");
  now_s = 1.0;
  log1(lg, "loss", 2, 2);
  assert_file(fsLG_dir(lg), "metrics.csv", "step,loss\r\n0,4\r\n1,3\r\n2,2\r\n");
  now_s = 1.5;
  log1(lg, "loss", 1, 3);
  char *dir = strdup(fsLG_dir(lg));
  close_ok(lg); /* close flushes the rest */
  assert_file(dir, "metrics.csv", "step,loss\r\n0,4\r\n1,3\r\n2,2\r\n3,1\r\n");
  free(dir);
  free(root);
}

static void test_step_none_counts_log_calls(void **state) {
  char *root = path_of(*state, "logs");
  fsLG *lg = new_logger(root);
  for (int i = 0; i < 3; i++) log1(lg, "loss", i, FSLG_STEP_NONE);
  log1(lg, "acc", 7, 10);
  log1(lg, "loss", 9, FSLG_STEP_NONE); /* the fifth call: step 4 */
  log1(lg, "neg", -1, -5);             /* a negative step is a step */
  char *dir = strdup(fsLG_dir(lg));
  close_ok(lg);
  assert_file(dir, "metrics.csv",
              "step,loss,acc,neg\r\n0,0,,\r\n1,1,,\r\n2,2,,\r\n10,,7,\r\n4,9,,\r\n-5,,,-1\r\n");
  free(dir);
  free(root);
}

/* Splits one CSV record at *p (csv module quoting) into cells[]; moves *p
 * past its "\r\n". Returns the number of cells. */
static int csv_record(char **p, char cells[][64], int max) {
  int n = 0;
  char *s = *p;
  for (;;) {
    assert_true(n < max);
    size_t k = 0;
    if (*s == '"') {
      for (s++; !(*s == '"' && s[1] != '"'); s++) {
        assert_true(*s != '\0' && k < 63);
        if (*s == '"') s++;
        cells[n][k++] = *s;
      }
      s++;
    } else {
      while (*s != ',' && *s != '\r') cells[n][k++] = *s++;
    }
    cells[n++][k] = '\0';
    if (*s == ',') {
      s++;
      continue;
    }
    assert_memory_equal(s, "\r\n", 2);
    *p = s + 2;
    return n;
  }
}

static void test_csv_parses_back_to_the_values(void **state) {
  char *root = path_of(*state, "logs");
  fsLG *lg = new_logger(root);
  const char *names[3] = {"loss", "val,\"loss\"", "lr"};
  double v[100][3];
  for (int i = 0; i < 100; i++)
    for (int c = 0; c < 3; c++) {
      v[i][c] = (c == 2 ? -1.0 : 1.0) * pow(10.0, (i % 40) - 20) / (3.0 + c + i);
      now_s = i + c / 4.0; /* flushes along the way */
      log1(lg, names[c], v[i][c], i);
    }
  char *dir = strdup(fsLG_dir(lg));
  close_ok(lg);
  char *path = path_of(dir, "metrics.csv");
  char *csv = slurp(path);
  assert_non_null(csv);
  char cells[4][64];
  char *p = csv;
  assert_int_equal(csv_record(&p, cells, 4), 4);
  assert_string_equal(cells[0], "step");
  for (int c = 0; c < 3; c++) assert_string_equal(cells[c + 1], names[c]);
  for (int i = 0; i < 100; i++) {
    assert_int_equal(csv_record(&p, cells, 4), 4);
    assert_int_equal(atoi(cells[0]), i);
    for (int c = 0; c < 3; c++) assert_true(strtod(cells[c + 1], NULL) == v[i][c]);
  }
  assert_int_equal(*p, '\0');
  free(csv);
  free(path);
  free(dir);
  free(root);
}

static void test_atomic_flushes_leave_no_temporary_files(void **state) {
  char *root = path_of(*state, "logs");
  fsLG *lg = new_logger(root);
  for (int i = 0; i < 20; i++) {
    now_s = 2.0 * i;
    log1(lg, i % 5 ? "loss" : "acc", 1.0 / (i + 1), i);
  }
  char *dir = strdup(fsLG_dir(lg));
  close_ok(lg);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    assert_true(strcmp(e->d_name, "metrics.csv") == 0 || strcmp(e->d_name, "metrics.svg") == 0);
    n++;
  }
  closedir(d);
  assert_int_equal(n, 2);
  free(dir);
  free(root);
}

/* --- errors -------------------------------------------------------------- */

static void test_directory_error_turns_logging_off(void **state) {
  char *file = path_of(*state, "plain");
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fclose(f);
  char *root = path_of(file, "logs");
  fsLG *lg = new_logger(root);
  fsLG_metric m = {"loss", "1.0", 1.0};
  char *err = NULL;
  assert_int_equal(fsLG_log(lg, &m, 1, 0, &err), -1);
  assert_non_null(err);
  assert_non_null(strstr(err, file));
  assert_non_null(strstr(err, "cannot create the log directory"));
  free(err);
  err = NULL;
  assert_int_equal(fsLG_log(lg, &m, 1, 1, &err), 0); /* reported once */
  assert_null(err);
  assert_null(fsLG_dir(lg));
  assert_int_equal(fsLG_close(lg, &err), 0);
  free(root);
  free(file);
}

static void test_write_error_turns_logging_off(void **state) {
  char *root = path_of(*state, "logs");
  fsLG *lg = new_logger(root);
  log1(lg, "loss", 1, 0);
  char *csv = path_of(fsLG_dir(lg), "metrics.csv");
  assert_int_equal(unlink(csv), 0);
  assert_int_equal(rmdir(fsLG_dir(lg)), 0); /* the run's directory vanished */
  now_s = 5;
  fsLG_metric m = {"loss", "0.5", 0.5};
  char *err = NULL;
  assert_int_equal(fsLG_log(lg, &m, 1, 1, &err), -1);
  assert_non_null(strstr(err, csv));
  free(err);
  err = NULL;
  assert_int_equal(fsLG_log(lg, &m, 1, 2, &err), 0);
  assert_int_equal(fsLG_close(lg, &err), 0);
  assert_null(err);
  free(csv);
  free(root);
}

/* --- the plot ------------------------------------------------------------ */

/* Text between tags that starts like a number (a tick label) is one. */
static void assert_finite_text(const char *s, const char *end) {
  if (s == end || !strchr("+-.0123456789", *s)) return;
  char *stop;
  double v = strtod(s, &stop);
  assert_ptr_equal(stop, end);
  assert_true(isfinite(v));
}

/* Minimal well-formedness: tags balance, attribute values are quoted, no
 * number in a tag is nan or inf, nor any number between tags. */
static void assert_well_formed(const char *svg) {
  assert_int_equal(strncmp(svg, "<?xml ", 6), 0);
  const char *p = strstr(svg, "?>") + 2;
  char stack[16][32];
  int depth = 0, roots = 0;
  while ((p = strchr(p, '<'))) {
    const char *end = strchr(p, '>');
    assert_non_null(end);
    for (const char *q = p + 1; q < end; q++) {
      assert_true(*q != '<');
      assert_true(strncmp(q, "nan", 3) != 0 && strncmp(q, "inf", 3) != 0);
    }
    const char *next = strchr(end, '<');
    if (next) assert_finite_text(end + 1, next);
    if (p[1] == '/') {
      assert_true(depth > 0);
      depth--;
      size_t n = strlen(stack[depth]);
      assert_memory_equal(p + 2, stack[depth], n);
      assert_int_equal(p[2 + n], '>');
    } else if (end[-1] != '/') {
      assert_true(depth < 16);
      size_t n = strcspn(p + 1, " >");
      assert_true(n < 32);
      memcpy(stack[depth], p + 1, n);
      stack[depth++][n] = '\0';
      roots += depth == 1;
    }
    size_t quotes = 0;
    for (const char *q = p; q < end; q++) quotes += *q == '"';
    assert_int_equal(quotes % 2, 0);
    p = end + 1;
  }
  assert_int_equal(depth, 0);
  assert_int_equal(roots, 1);
}

static size_t occurrences(const char *s, const char *what) {
  size_t n = 0;
  for (; (s = strstr(s, what)); s++) n++;
  return n;
}

static void test_close_plots_every_metric_in_its_panel(void **state) {
  char *root = path_of(*state, "logs");
  fsLG *lg = new_logger(root);
  for (int i = 0; i < 50; i++) {
    log1(lg, "train_loss", exp(-i / 10.0), i);
    log1(lg, "acc", i / 50.0, i); /* not a loss: a panel too */
    if (i % 10 == 0) log1(lg, "val <loss> & more", exp(-i / 12.0), i);
  }
  log1(lg, "train_loss", NAN, 50); /* not plotted */
  log1(lg, "train_loss", INFINITY, 51);
  log1(lg, "one loss", 0.5, 52); /* a single point: a dot */
  char *dir = strdup(fsLG_dir(lg));
  close_ok(lg);
  char *p = path_of(dir, "metrics.svg");
  char *svg = slurp(p);
  assert_non_null(svg);
  assert_well_formed(svg);
  assert_int_equal(occurrences(svg, "<polyline"), 3);
  assert_int_equal(occurrences(svg, "<circle"), 1);
  assert_int_equal(occurrences(svg, "<rect x="), 4); /* a frame per metric */
  assert_non_null(strstr(svg, ">train_loss</text>"));
  assert_non_null(strstr(svg, ">val &lt;loss&gt; &amp; more</text>"));
  assert_non_null(strstr(svg, ">acc</text>"));
  free(svg);
  free(p);
  free(dir);
  free(root);
}

static void test_plot_without_losses_shows_every_metric(void **state) {
  char *root = path_of(*state, "logs");
  fsLG *lg = new_logger(root);
  for (int i = 0; i < 5; i++) {
    log1(lg, "acc", i / 5.0, i);
    log1(lg, "lr", 0.1, i); /* a flat line */
  }
  char *dir = strdup(fsLG_dir(lg));
  close_ok(lg);
  char *p = path_of(dir, "metrics.svg");
  char *svg = slurp(p);
  assert_non_null(svg);
  assert_well_formed(svg);
  assert_int_equal(occurrences(svg, "<polyline"), 2);
  free(svg);
  free(p);
  free(dir);
  free(root);
}

static void test_long_series_keeps_its_spike(void **state) {
  enum { N = 10000 };
  double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  assert_true(x && y);
  for (int i = 0; i < N; i++) {
    x[i] = i;
    y[i] = i == 5001 ? 100 : 1;
  }
  fsSVG_series s = {"loss", x, y, N};
  size_t len;
  char *svg = fsSVG_render("t", "step", &s, 1, &len);
  assert_non_null(svg);
  assert_int_equal(strlen(svg), len);
  assert_well_formed(svg);
  const char *pts = strstr(svg, "points=\"");
  assert_non_null(pts);
  pts += 8;
  size_t n = 0;
  double top = INFINITY;
  while (*pts != '"') {
    char *e;
    strtod(pts, &e);
    assert_int_equal(*e, ',');
    top = fmin(top, strtod(e + 1, &e));
    assert_int_equal(*e, ' ');
    pts = e + 1;
    n++;
  }
  assert_true(n > 100 && n <= FSSVG_MAX_POINTS);
  assert_true(top < 80); /* the spike reaches the top of the plot area (y 70) */
  free(svg);
  free(x);
  free(y);
}

/* Four integer steps: ticks at 0, 1, 2, 3 only, not at 0.5 steps. */
static void test_integer_steps_tick_on_integers(void **state) {
  (void)state;
  double x[] = {0, 1, 2, 3}, y[] = {100, 200, 300, 400};
  fsSVG_series s = {"loss", x, y, 4};
  size_t len;
  char *svg = fsSVG_render("t", "step", &s, 1, &len);
  assert_non_null(svg);
  assert_null(strstr(svg, ">0.5</text>"));
  assert_null(strstr(svg, ">2.5</text>"));
  for (int i = 0; i < 4; i++) {
    char label[32];
    snprintf(label, sizeof label, "text-anchor=\"middle\">%d</text>", i);
    assert_non_null(strstr(svg, label));
  }
  free(svg);
}

/* CRC-32C's check value (RFC 3720, B.4) and TensorBoard's mask of a known CRC. */
static void test_crc32c_check_value(void **state) {
  (void)state;
  assert_int_equal(fsLG_crc32c("123456789", 9), 0xe3069283u);
  assert_int_equal(fsLG_crc32c("", 0), 0);
  uint32_t c = 0xe3069283u;
  assert_int_equal(fsLG_masked_crc("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

static void test_empty_plot_is_well_formed(void **state) {
  size_t len;
  char *svg = fsSVG_render("no data", "step", NULL, 0, &len);
  assert_non_null(svg);
  assert_well_formed(svg);
  free(svg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_versions_follow_the_highest_existing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_same_step_merges_into_one_row, setup, teardown),
      cmocka_unit_test_setup_teardown(test_new_metric_rewrites_the_header, setup, teardown),
      cmocka_unit_test_setup_teardown(test_flushes_at_most_once_a_second, setup, teardown),
      cmocka_unit_test_setup_teardown(test_step_none_counts_log_calls, setup, teardown),
      cmocka_unit_test_setup_teardown(test_csv_parses_back_to_the_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_atomic_flushes_leave_no_temporary_files, setup, teardown),
      cmocka_unit_test_setup_teardown(test_directory_error_turns_logging_off, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_error_turns_logging_off, setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_plots_every_metric_in_its_panel, setup, teardown),
      cmocka_unit_test(test_integer_steps_tick_on_integers),
      cmocka_unit_test_setup_teardown(test_plot_without_losses_shows_every_metric, setup, teardown),
      cmocka_unit_test(test_long_series_keeps_its_spike),
      cmocka_unit_test(test_empty_plot_is_well_formed),
      cmocka_unit_test(test_crc32c_check_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
