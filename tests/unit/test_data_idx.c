/* test_data_idx.c -- IDX reader and the MNIST-format data sets. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "datatest.h"
#include "idx.h"

/* 3 images of 2x4 bytes: byte k of image i is 10 * i + k. */
static void images(uint8_t *px, unsigned count) {
  for (unsigned i = 0; i < count; i++)
    for (unsigned k = 0; k < 8; k++) px[i * 8 + k] = (uint8_t)(10 * i + k);
}

/* Reads path as 3-D images and returns the error (NULL on success). */
static char *read_err(const char *path, int ndim) {
  fsI_array a;
  char *err = NULL;
  int rc = fsI_read(path, ndim, ndim == 3 ? "image" : "label", &a, &err);
  assert_int_equal(rc != 0, err != NULL);
  assert_null(a.data);
  return err;
}

static void expect_error(const char *path, int ndim, const char *text) {
  char *err = read_err(path, ndim);
  assert_non_null(err);
  assert_non_null(strstr(err, path));
  if (!strstr(err, text)) fail_msg("error \"%s\" does not contain \"%s\"", err, text);
  free(err);
}

static void test_reads_plain_and_gzip(void **state) {
  uint8_t px[24];
  images(px, 3);
  for (int gz = 0; gz < 2; gz++) {
    char *p = dt_path(dt_dir, gz ? "img.gz" : "img");
    dt_write_idx(p, gz, 3, (unsigned[]){3, 2, 4}, px, sizeof px);
    fsI_array a;
    char *err = NULL;
    assert_int_equal(fsI_read(p, 3, "image", &a, &err), 0);
    assert_null(err);
    assert_int_equal(a.ndim, 3);
    assert_int_equal(a.dims[0], 3);
    assert_int_equal(a.dims[1], 2);
    assert_int_equal(a.dims[2], 4);
    assert_int_equal(a.item, 8);
    assert_memory_equal(a.data, px, sizeof px);
    fsI_free(&a);
    assert_null(a.data);
    free(p);
  }
}

static void test_truncated_data_reports_counts(void **state) {
  uint8_t px[24];
  images(px, 3);
  for (int gz = 0; gz < 2; gz++) {
    char *p = dt_path(dt_dir, gz ? "short.gz" : "short");
    dt_write_idx(p, gz, 3, (unsigned[]){3, 2, 4}, px, 10);
    expect_error(p, 3, "truncated: expected 24 bytes of image data, found 10");
    free(p);
  }
}

static void test_truncated_gzip_stream(void **state) {
  uint8_t px[4096];
  for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7919 >> 3);
  char *p = dt_path(dt_dir, "cut.gz");
  dt_write_idx(p, 1, 3, (unsigned[]){64, 8, 8}, px, sizeof px);
  long full = dt_size(p);
  assert_int_equal(truncate(p, full / 2), 0);
  expect_error(p, 3, "truncated: expected 4096 bytes of image data, found ");
  free(p);
}

static void test_trailing_data(void **state) {
  uint8_t px[25] = {0};
  images(px, 3);
  char *p = dt_path(dt_dir, "long");
  dt_write_idx(p, 0, 3, (unsigned[]){3, 2, 4}, px, sizeof px);
  expect_error(p, 3, "trailing data: expected 24 bytes of image data, found more");
  free(p);
}

static void test_bad_header(void **state) {
  char *p = dt_path(dt_dir, "bad");
  uint8_t labels[3] = {1, 2, 3};
  dt_write_idx(p, 0, 1, (unsigned[]){3}, labels, 3);
  expect_error(p, 3, "not an IDX image file: magic 0x00000801, expected 0x00000803");
  dt_write(p, "\x00\x00\x0d\x03", 4); /* float data */
  expect_error(p, 3, "only unsigned-byte data, type 0x08, is supported");
  dt_write(p, "\x00\x00", 2);
  expect_error(p, 3, "truncated: 2 bytes, too short for an IDX header");
  dt_write(p, "", 0);
  expect_error(p, 1, "truncated: 0 bytes");
  dt_write(p, "\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00", 10);
  expect_error(p, 3, "truncated: header of 10 bytes, expected 16");
  dt_write_idx(p, 0, 3, (unsigned[]){1, 0, 4}, NULL, 0);
  expect_error(p, 3, "dimension 1 of the image data is 0");
  free(p);
}

static void test_corrupt_gzip(void **state) {
  uint8_t px[4096];
  for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 31);
  char *p = dt_path(dt_dir, "corrupt.gz");
  dt_write_idx(p, 1, 3, (unsigned[]){64, 8, 8}, px, sizeof px);
  long n = dt_size(p);
  uint8_t *raw = malloc((size_t)n);
  FILE *f = fopen(p, "rb");
  assert_int_equal(fread(raw, 1, (size_t)n, f), n);
  fclose(f);
  for (long i = 12; i < n - 8; i++) raw[i] ^= 0x5a; /* keep the gzip header */
  dt_write(p, raw, (size_t)n);
  free(raw);
  char *err = read_err(p, 3);
  assert_non_null(err);
  assert_non_null(strstr(err, p));
  free(err);
  free(p);
}

static void test_missing_file(void **state) {
  char *p = dt_path(dt_dir, "nope.gz");
  expect_error(p, 3, "cannot open: No such file or directory");
  free(p);
  expect_error(dt_dir, 3, "not a regular file");
}

/* A header claiming far more than the file holds is reported without
 * allocating what it claims. */
static void test_header_claims_too_much(void **state) {
  uint8_t px[24];
  images(px, 3);
  for (int gz = 0; gz < 2; gz++) {
    char *p = dt_path(dt_dir, gz ? "huge.gz" : "huge");
    dt_write_idx(p, gz, 3, (unsigned[]){4000000000u, 4000, 4000}, px, sizeof px);
    expect_error(p, 3, "truncated: expected 64000000000000000 bytes of image data, found 24");
    dt_write_idx(p, gz, 3, (unsigned[]){400000000u, 100, 100}, px, sizeof px);
    expect_error(p, 3, "truncated: expected 4000000000000 bytes of image data, found 24");
    free(p);
  }
}

/* Random byte changes and cuts: each read succeeds or names the file. */
static void test_mutated_files(void **state) {
  uint8_t px[24];
  images(px, 3);
  char *p = dt_path(dt_dir, "orig"), *q = dt_path(dt_dir, "mut");
  dt_write_idx(p, 0, 3, (unsigned[]){3, 2, 4}, px, sizeof px);
  uint8_t raw[40], mut[40];
  FILE *f = fopen(p, "rb");
  assert_int_equal(fread(raw, 1, sizeof raw, f), 40);
  fclose(f);
  uint64_t r = 99;
  for (int iter = 0; iter < 2000; iter++) {
    memcpy(mut, raw, sizeof raw);
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    mut[(r >> 33) % 16] = (uint8_t)(r >> 17); /* the header */
    size_t len = iter % 2 ? sizeof mut : (size_t)(r >> 50) % sizeof mut;
    (iter % 4 < 2 ? dt_write : dt_write_gz)(q, mut, len);
    fsI_array a;
    char *err = NULL;
    if (fsI_read(q, 3, "image", &a, &err) == 0) {
      assert_int_equal((size_t)a.dims[0] * a.item, len - 16);
      fsI_free(&a);
    } else {
      assert_non_null(strstr(err, q));
      free(err);
    }
  }
  free(p);
  free(q);
}

/* A root with train (3 items) and t10k (2 items) splits. */
static void write_split(const char *root, const char *split, int gz, unsigned count,
                        unsigned nlabels, const uint8_t *labels) {
  uint8_t px[24];
  images(px, count);
  char name[64];
  snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", split, gz ? ".gz" : "");
  char *p = dt_path(root, name);
  dt_write_idx(p, gz, 3, (unsigned[]){count, 2, 4}, px, count * 8);
  free(p);
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", split, gz ? ".gz" : "");
  p = dt_path(root, name);
  dt_write_idx(p, gz, 1, &nlabels, labels, nlabels);
  free(p);
}

static void test_mnist_items(void **state) {
  write_split(dt_dir, "train", 1, 3, 3, (uint8_t[]){7, 0, 9});
  write_split(dt_dir, "t10k", 0, 2, 2, (uint8_t[]){4, 5});
  fsS_dataset ds;
  char *err = NULL;
  assert_int_equal(fsS_mnist(&ds, dt_dir, true, &err), 0);
  assert_int_equal(ds.len, 3);
  assert_int_equal(ds.x.dtype, FS_F32);
  assert_int_equal(ds.x.ndim, 3);
  assert_int_equal(ds.x.shape[0], 1);
  assert_int_equal(ds.x.shape[1], 2);
  assert_int_equal(ds.x.shape[2], 4);
  assert_int_equal(ds.x.bytes, 32);
  assert_int_equal(ds.y.dtype, FS_I64);
  assert_int_equal(ds.y.ndim, 0);
  float x[8];
  int64_t y;
  fsS_get(&ds, 2, 0, x, &y, NULL);
  assert_int_equal(y, 9);
  for (int k = 0; k < 8; k++) assert_true(x[k] == (float)(20 + k) / 255.0f);
  fsS_free(&ds);
  assert_int_equal(fsS_mnist(&ds, dt_dir, false, &err), 0);
  assert_int_equal(ds.len, 2);
  fsS_get(&ds, 1, 0, x, &y, NULL);
  assert_int_equal(y, 5);
  assert_true(x[7] == 17.0f / 255.0f);
  fsS_free(&ds);
}

static void expect_mnist_error(const char *text) {
  fsS_dataset ds;
  char *err = NULL;
  assert_int_equal(fsS_mnist(&ds, dt_dir, true, &err), -1);
  assert_non_null(err);
  if (!strstr(err, text)) fail_msg("error \"%s\" does not contain \"%s\"", err, text);
  free(err);
  assert_null(ds.images.data);
  assert_null(ds.labels.data);
}

static void test_mnist_errors(void **state) {
  expect_mnist_error("/train-images-idx3-ubyte.gz: cannot open: No such file or directory");
  write_split(dt_dir, "train", 0, 3, 2, (uint8_t[]){1, 2});
  expect_mnist_error("train-labels-idx1-ubyte: 2 labels for the 3 images of");
  write_split(dt_dir, "train", 0, 3, 3, (uint8_t[]){1, 12, 2});
  expect_mnist_error("train-labels-idx1-ubyte: label 12 of item 1 is not a class in 0..9");
}

/* The installed data set, when the package is there. */
static void test_fashion_mnist_installed(void **state) {
  struct stat st;
  if (stat(FSS_FASHION_MNIST_ROOT "/train-images-idx3-ubyte.gz", &st) != 0) skip();
  fsS_dataset ds;
  char *err = NULL;
  assert_int_equal(fsS_mnist(&ds, FSS_FASHION_MNIST_ROOT, false, &err), 0);
  assert_int_equal(ds.len, 10000);
  assert_int_equal(ds.x.shape[1], 28);
  assert_int_equal(ds.x.shape[2], 28);
  float x[784];
  int64_t y, counts[10] = {0}, first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
  double sum = 0; /* of the raw bytes, as Python's gzip module reads them */
  for (size_t i = 0; i < ds.len; i++) {
    fsS_get(&ds, i, 0, x, &y, NULL);
    counts[y]++;
    if (i < 10) assert_int_equal(y, first[i]);
    for (int k = 0; k < 784; k++) sum += x[k] * 255.0f;
  }
  for (int c = 0; c < 10; c++) assert_int_equal(counts[c], 1000); /* balanced test split */
  assert_true(sum > 573469082 - 0.5 && sum < 573469082 + 0.5);
  fsS_free(&ds);
  assert_int_equal(fsS_mnist(&ds, FSS_FASHION_MNIST_ROOT, true, &err), 0);
  assert_int_equal(ds.len, 60000);
  fsS_free(&ds);
}

#define T DT_TEST

int main(void) {
  const struct CMUnitTest tests[] = {
    T(test_reads_plain_and_gzip),
    T(test_truncated_data_reports_counts),
    T(test_truncated_gzip_stream),
    T(test_trailing_data),
    T(test_bad_header),
    T(test_corrupt_gzip),
    T(test_missing_file),
    T(test_header_claims_too_much),
    T(test_mutated_files),
    T(test_mnist_items),
    T(test_mnist_errors),
    T(test_fashion_mnist_installed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
