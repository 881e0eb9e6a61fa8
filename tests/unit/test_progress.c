/* test_progress.c -- the progress line: in place on a terminal, plain lines
 * elsewhere, and its rate and time formats. Time is a fake clock. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "progress.h"

static double now_s;
static double fake_clock(void) { return now_s; }

/* A bar writing into memory, on the fake clock from t = 0. */
typedef struct sink { FILE *f; char *buf; size_t len; fsPG *p; } sink;

static void sink_open(sink *s, int tty, int64_t total, int epochs) {
  s->buf = NULL;
  s->f = open_memstream(&s->buf, &s->len);
  assert_non_null(s->f);
  s->p = fsPG_new(s->f, tty, total, epochs);
  assert_non_null(s->p);
  fsPG_set_clock(s->p, fake_clock);
  now_s = 0;
}

/* Frees the bar; the text it wrote stays in s->buf. */
static void sink_close(sink *s) {
  fsPG_free(s->p);
  assert_int_equal(fclose(s->f), 0);
}

static size_t count(const char *s, char c) {
  size_t n = 0;
  for (; *s; s++) n += *s == c;
  return n;
}

static void test_rate_format(void **state) {
  char b[32];
  fsPG_fmt_rate(b, sizeof b, 412.34);
  assert_string_equal(b, "412.3 it/s");
  fsPG_fmt_rate(b, sizeof b, 1);
  assert_string_equal(b, "1.0 it/s");
  fsPG_fmt_rate(b, sizeof b, 0.4);
  assert_string_equal(b, "2.50 s/it");
  fsPG_fmt_rate(b, sizeof b, 0);
  assert_string_equal(b, "? it/s");
  fsPG_fmt_rate(b, sizeof b, INFINITY);
  assert_string_equal(b, "? it/s");
  fsPG_fmt_rate(b, sizeof b, NAN);
  assert_string_equal(b, "? it/s");
}

static void test_hms_format(void **state) {
  char b[32];
  struct { double s; const char *want; } cases[] = {
      {0, "00:00:00"},       {3, "00:00:03"},           {3.4, "00:00:03"},
      {3.6, "00:00:04"},     {59.5, "00:01:00"},        {3661, "01:01:01"},
      {360000, "100:00:00"}, {-1, "--:--:--"},          {NAN, "--:--:--"},
      {INFINITY, "--:--:--"}, {1e300, "--:--:--"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fsPG_fmt_hms(b, sizeof b, cases[i].s);
    assert_string_equal(b, cases[i].want);
  }
}

static void test_tty_redraws_in_place(void **state) {
  sink s;
  sink_open(&s, 1, 10, 2);
  for (int e = 0; e < 2; e++) {
    now_s = 100.0 * e;
    fsPG_epoch_begin(s.p);
    for (int i = 1; i <= 10; i++) {
      now_s = 100.0 * e + 0.5 * i; /* 2 it/s, redraw interval passed each time */
      fsPG_step(s.p, i, 1.0 / i);
      if (i == 3) { /* a step within the redraw interval draws nothing */
        now_s += 0.01;
        fsPG_step(s.p, i, 1.0 / i);
      }
    }
    fsPG_epoch_end(s.p);
  }
  sink_close(&s);
  assert_int_equal(s.buf[0], '\r');
  assert_non_null(strstr(s.buf, "\repoch 1/2  1/10 [==>                 ]  2.0 it/s  loss 1.0000  ETA 00:00:05\x1b[K"));
  assert_non_null(strstr(s.buf, "\repoch 1/2  10/10 [====================]  2.0 it/s  loss 0.2929  time 00:00:05\x1b[K\n")); /* the epoch's mean loss */
  assert_non_null(strstr(s.buf, "\repoch 2/2  5/10 [==========>         ]  2.0 it/s  loss 0.4567  ETA 00:00:03\x1b[K"));
  /* one line per epoch: 10 redraws + the end each, a newline only at ends */
  assert_int_equal(count(s.buf, '\r'), 22);
  assert_int_equal(count(s.buf, '\n'), 2);
  assert_int_equal(s.buf[s.len - 1], '\n');
  free(s.buf);
}

static void test_plain_lines_without_control_characters(void **state) {
  sink s;
  sink_open(&s, 0, 100, 0);
  fsPG_epoch_begin(s.p);
  for (int i = 1; i <= 100; i++) {
    now_s = 0.25 * i; /* 4 it/s: a line every 40 steps of the default 10 s */
    fsPG_step(s.p, i, 0.25);
  }
  fsPG_epoch_end(s.p);
  sink_close(&s);
  assert_null(strchr(s.buf, '\r'));
  assert_null(strchr(s.buf, '\x1b'));
  assert_string_equal(s.buf, "epoch 1  40/100 [========>           ]  4.0 it/s  loss 0.2500  ETA 00:00:15\n"
                             "epoch 1  80/100 [================>   ]  4.0 it/s  loss 0.2500  ETA 00:00:05\n"
                             "epoch 1  100/100 [====================]  4.0 it/s  loss 0.2500  time 00:00:25\n");
  free(s.buf);
}

/* The loop's epoch and count head the line; a validation pass says so;
 * an unset pass goes back to the bar's own count. */
static void test_pass_names_its_epoch_and_kind(void **state) {
  (void)state;
  sink s;
  sink_open(&s, 0, 2, 0);
  fsPG_set_interval(s.p, INFINITY);
  fsPG_set_pass(s.p, 3, 10, 0);
  fsPG_epoch_begin(s.p);
  now_s = 1;
  fsPG_step(s.p, 2, 0.5);
  fsPG_epoch_end(s.p);
  fsPG_set_pass(s.p, 3, 10, 1);
  fsPG_epoch_begin(s.p);
  now_s = 2;
  fsPG_step(s.p, 2, NAN);
  fsPG_epoch_end(s.p);
  fsPG_epoch_begin(s.p);
  now_s = 3;
  fsPG_step(s.p, 2, NAN);
  fsPG_epoch_end(s.p);
  sink_close(&s);
  assert_string_equal(s.buf, "epoch 3/10  2/2 [====================]  2.0 it/s  loss 0.5000  time 00:00:01\n"
                             "val epoch 3/10  2/2 [====================]  2.0 it/s  time 00:00:01\n"
                             "epoch 4  2/2 [====================]  2.0 it/s  time 00:00:01\n");
  free(s.buf);
}

static void test_plain_interval_is_settable(void **state) {
  sink s;
  sink_open(&s, 0, 0, 3);
  fsPG_set_interval(s.p, 30);
  fsPG_step(s.p, 1, NAN); /* begins epoch 1 */
  for (int i = 2; i <= 65; i++) {
    now_s = i;
    fsPG_step(s.p, i, NAN);
  }
  fsPG_epoch_end(s.p);
  sink_close(&s);
  assert_string_equal(s.buf, "epoch 1/3  30  1.0 it/s\n"
                             "epoch 1/3  60  1.0 it/s\n"
                             "epoch 1/3  65  1.0 it/s  time 00:01:05\n");
  free(s.buf);
}

/* Interval 0: a line after every step, the last one left to the epoch's end. */
static void test_plain_interval_zero_is_every_step(void **state) {
  sink s;
  sink_open(&s, 0, 3, 1);
  fsPG_set_interval(s.p, 0);
  fsPG_epoch_begin(s.p);
  for (int i = 1; i <= 3; i++) {
    now_s = i;
    fsPG_step(s.p, i, NAN);
  }
  fsPG_epoch_end(s.p);
  sink_close(&s);
  assert_int_equal(count(s.buf, '\n'), 3);
  assert_non_null(strstr(s.buf, "epoch 1/1  2/3 "));
  assert_non_null(strstr(s.buf, "epoch 1/1  3/3 [====================]  1.0 it/s  time 00:00:03\n"));
  free(s.buf);
}

static void test_clear_erases_and_next_step_redraws(void **state) {
  sink s;
  sink_open(&s, 1, 4, 1);
  fsPG_step(s.p, 1, 2.5);
  fsPG_clear(s.p);
  size_t cleared = s.len;
  assert_memory_equal(s.buf + cleared - 4, "\r\x1b[K", 4);
  fsPG_step(s.p, 2, 2.0); /* same instant: drawn again all the same */
  assert_true(s.len > cleared);
  fsPG_clear(s.p);
  fsPG_clear(s.p); /* nothing drawn: nothing to erase */
  assert_memory_equal(s.buf + s.len - 4, "\r\x1b[K", 4);
  size_t n = s.len;
  fsPG_clear(s.p);
  assert_int_equal(s.len, n);
  sink_close(&s);
  free(s.buf);
}

static void test_free_ends_an_open_line(void **state) {
  sink s;
  sink_open(&s, 1, 4, 1);
  fsPG_step(s.p, 1, 1e-5);
  sink_close(&s);
  assert_non_null(strstr(s.buf, "loss 1.000e-05"));
  assert_int_equal(count(s.buf, '\n'), 1);
  assert_int_equal(s.buf[s.len - 1], '\n');
  free(s.buf);
}

static void test_monotonic_clock_advances(void **state) {
  double a = fsPG_monotonic(), b = fsPG_monotonic();
  assert_true(a > 0 && b >= a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rate_format),
      cmocka_unit_test(test_hms_format),
      cmocka_unit_test(test_tty_redraws_in_place),
      cmocka_unit_test(test_plain_lines_without_control_characters),
      cmocka_unit_test(test_pass_names_its_epoch_and_kind),
      cmocka_unit_test(test_plain_interval_is_settable),
      cmocka_unit_test(test_plain_interval_zero_is_every_step),
      cmocka_unit_test(test_clear_erases_and_next_step_redraws),
      cmocka_unit_test(test_free_ends_an_open_line),
      cmocka_unit_test(test_monotonic_clock_advances),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
