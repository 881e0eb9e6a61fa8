/* test_data_sets.c -- TextDataset and RandomDataset. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "datatest.h"

static void test_text_items(void **state) {
  char *p = dt_path(dt_dir, "t.txt");
  dt_write(p, "hello\xff!", 7);
  fsS_dataset ds;
  char *err = NULL;
  assert_int_equal(fsS_text(&ds, p, 3, &err), 0);
  assert_int_equal(ds.len, 4); /* file size - context */
  assert_int_equal(ds.x.dtype, FS_I64);
  assert_int_equal(ds.x.ndim, 1);
  assert_int_equal(ds.x.shape[0], 3);
  assert_int_equal(ds.y.ndim, 1);
  assert_int_equal(ds.y.shape[0], 3);
  int64_t x[3], y[3];
  fsS_get(&ds, 0, 0, x, y, NULL);
  assert_int_equal(x[0], 'h');
  assert_int_equal(x[2], 'l');
  assert_int_equal(y[0], 'e');
  assert_int_equal(y[2], 'l');
  fsS_get(&ds, 3, 0, x, y, NULL); /* the last item ends at the last byte */
  assert_int_equal(x[0], 'l');
  assert_int_equal(x[2], 0xff);
  assert_int_equal(y[2], '!');
  fsS_free(&ds);
  free(p);
}

static void expect_text_error(const char *path, int64_t context, const char *text) {
  fsS_dataset ds;
  char *err = NULL;
  assert_int_equal(fsS_text(&ds, path, context, &err), -1);
  assert_non_null(err);
  if (!strstr(err, text)) fail_msg("error \"%s\" does not contain \"%s\"", err, text);
  assert_non_null(strstr(err, path));
  assert_null(ds.text);
  free(err);
}

static void test_text_errors(void **state) {
  char *p = dt_path(dt_dir, "short.txt");
  dt_write(p, "abc", 3);
  expect_text_error(p, 3, "3 bytes is too short for context 3 (needs at least 4)");
  expect_text_error(p, 0, "context must be a positive size, not 0");
  free(p);
  p = dt_path(dt_dir, "absent.txt");
  expect_text_error(p, 2, "cannot open: No such file or directory");
  free(p);
  expect_text_error(dt_dir, 2, "not a regular file");
}

static void test_random_is_deterministic(void **state) {
  fsS_dataset a, b, c;
  char *err = NULL;
  int64_t shape[2] = {3, 5};
  assert_int_equal(fsS_random(&a, 100, 2, shape, 7, 42, &err), 0);
  assert_int_equal(fsS_random(&b, 100, 2, shape, 7, 42, &err), 0);
  assert_int_equal(fsS_random(&c, 100, 2, shape, 7, 43, &err), 0);
  assert_int_equal(a.len, 100);
  assert_int_equal(a.x.bytes, 60);
  float xa[15], xb[15], xc[15];
  int64_t ya, yb, yc;
  int differ = 0;
  for (size_t i = 0; i < a.len; i++) {
    fsS_get(&a, i, 0, xa, &ya, NULL);
    fsS_get(&b, i, 0, xb, &yb, NULL);
    fsS_get(&c, i, 0, xc, &yc, NULL);
    assert_memory_equal(xa, xb, sizeof xa);
    assert_int_equal(ya, yb);
    assert_true(ya >= 0 && ya < 7);
    differ += memcmp(xa, xc, sizeof xa) != 0;
  }
  assert_int_equal(differ, 100);
  /* Item order does not matter: item 50 is the same read first or last. */
  fsS_get(&a, 50, 0, xb, &yb, NULL);
  fsS_get(&b, 99, 0, xa, &ya, NULL);
  fsS_get(&b, 50, 0, xa, &ya, NULL);
  assert_memory_equal(xa, xb, sizeof xa);
}

static void test_random_distribution(void **state) {
  fsS_dataset ds;
  char *err = NULL;
  int64_t shape[1] = {100};
  assert_int_equal(fsS_random(&ds, 1000, 1, shape, 4, 7, &err), 0);
  double sum = 0, sq = 0;
  size_t counts[4] = {0};
  float x[100];
  int64_t y;
  for (size_t i = 0; i < ds.len; i++) {
    fsS_get(&ds, i, 0, x, &y, NULL);
    counts[y]++;
    for (int k = 0; k < 100; k++) sum += x[k], sq += (double)x[k] * x[k];
  }
  double mean = sum / 1e5, var = sq / 1e5 - mean * mean;
  assert_true(fabs(mean) < 0.02); /* 1e5 draws of N(0, 1): sd of the mean 0.003 */
  assert_true(fabs(var - 1.0) < 0.03);
  for (int c = 0; c < 4; c++) assert_true(counts[c] > 200 && counts[c] < 300);
}

static void test_random_errors(void **state) {
  fsS_dataset ds;
  char *err = NULL;
  int64_t shape[2] = {3, -1};
  assert_int_equal(fsS_random(&ds, 10, 2, shape, 2, 0, &err), -1);
  assert_string_equal(err, "RandomDataset: invalid item shape [3, ?] (negative or too large)");
  free(err);
  int64_t huge[2] = {1 << 20, 1 << 10};
  assert_int_equal(fsS_random(&ds, 10, 2, huge, 2, 0, &err), -1);
  assert_string_equal(err, "RandomDataset: invalid item shape [1048576, 1024] (negative or too large)");
  free(err);
  assert_int_equal(fsS_random(&ds, 10, 1, shape, 0, 0, &err), -1);
  assert_string_equal(err, "RandomDataset: classes must be >= 1, not 0");
  free(err);
  assert_int_equal(fsS_random(&ds, -1, 1, shape, 2, 0, &err), -1);
  assert_string_equal(err, "RandomDataset: size must be >= 0, not -1");
  free(err);
}

#define T DT_TEST

int main(void) {
  const struct CMUnitTest tests[] = {
    T(test_text_items),
    T(test_text_errors),
    cmocka_unit_test(test_random_is_deterministic),
    cmocka_unit_test(test_random_distribution),
    cmocka_unit_test(test_random_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
