/* test_ckpt_safetensors.c -- safetensors layout, round trips, validation,
 * matching, sliced multi-writer files. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "datatest.h"
#include "safetensors.h"

/* A small state dict: w f32 [2, 3], b bf16 [3], step i64 [] and an empty
 * f32 [0, 4]. */
static float w[6] = {1.5f, -2.0f, 0.25f, 3.0f, -0.0f, 1e-3f};
static uint16_t b[3] = {0x3f80, 0xc000, 0x3e80}; /* 1, -2, 0.25 */
static int64_t step = 1234567890123;
static const int64_t w_shape[2] = {2, 3}, b_shape[1] = {3}, e_shape[2] = {0, 4};

static const fsK_entry entries[] = {
  {"w", FS_F32, 2, w_shape, w},
  {"b", FS_BF16, 1, b_shape, b},
  {"step", FS_I64, 0, NULL, &step},
  {"empty", FS_F32, 2, e_shape, NULL},
};
static const fsK_meta meta[] = {{"format", "pt"}, {"epoch", "3"}};

static char *save_sample(const char *name) {
  char *p = dt_path(dt_dir, name), *err = NULL;
  if (fsK_save(p, entries, 4, meta, 2, &err) != 0) fail_msg("save: %s", err);
  return p;
}

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  rewind(f);
  uint8_t *buf = malloc(*n + 1);
  assert_int_equal(fread(buf, 1, *n, f), *n);
  fclose(f);
  return buf;
}

static void test_layout_matches_reference_writer(void **state) {
  char *p = save_sample("a.safetensors");
  size_t n;
  uint8_t *raw = slurp(p, &n);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | raw[i];
  assert_int_equal((8 + hlen) % 8, 0);
  assert_int_equal(n, 8 + hlen + 8 + 24 + 6); /* i64, f32 (w, empty), bf16 */
  char *hdr = strndup((char *)raw + 8, hlen);
  const char *want =
      "{\"__metadata__\":{\"format\":\"pt\",\"epoch\":\"3\"},"
      "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
      "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[8,8]},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[32,38]}}";
  assert_memory_equal(hdr, want, strlen(want));
  for (size_t i = strlen(want); i < hlen; i++) assert_int_equal(hdr[i], ' ');
  assert_memory_equal(raw + 8 + hlen, &step, 8);
  assert_memory_equal(raw + 8 + hlen + 8, w, 24);
  assert_memory_equal(raw + 8 + hlen + 32, b, 6);
  free(hdr);
  free(raw);
  free(p);
}

static void test_round_trip(void **state) {
  char *p = save_sample("rt.safetensors"), *err = NULL;
  fsK_file f;
  assert_int_equal(fsK_open(&f, p, &err), 0);
  assert_int_equal(f.n, 4);
  assert_string_equal(fsK_meta_get(&f, "epoch"), "3");
  assert_null(fsK_meta_get(&f, "nope"));
  assert_null(fsK_find(&f, "nope"));
  const fsK_info *t = fsK_find(&f, "w");
  assert_non_null(t);
  assert_int_equal(t->dtype, FS_F32);
  assert_int_equal(t->ndim, 2);
  assert_int_equal(t->shape[1], 3);
  assert_int_equal(t->numel, 6);
  float got[6];
  assert_int_equal(fsK_read(&f, t, 0, 6, FS_F32, got, &err), 0);
  assert_memory_equal(got, w, sizeof w);
  /* A byte range of one tensor: elements 2..4 (an FSDP shard). */
  float part[3] = {0};
  assert_int_equal(fsK_read(&f, t, 2, 3, FS_F32, part, &err), 0);
  assert_memory_equal(part, w + 2, sizeof part);
  assert_int_equal(fsK_read(&f, t, 4, 3, FS_F32, part, &err), -1);
  assert_non_null(strstr(err, "elements [4, 7) are outside tensor \"w\" of 6"));
  free(err);
  int64_t s;
  assert_int_equal(fsK_read(&f, fsK_find(&f, "step"), 0, 1, FS_I64, &s, &err), 0);
  assert_int_equal(s, step);
  uint16_t bb[3];
  assert_int_equal(fsK_read(&f, fsK_find(&f, "b"), 0, 3, FS_BF16, bb, &err), 0);
  assert_memory_equal(bb, b, sizeof b);
  assert_int_equal(fsK_find(&f, "empty")->numel, 0);
  fsK_close(&f);
  free(p);
}

static void test_dtype_conversion(void **state) {
  char *p = save_sample("cv.safetensors"), *err = NULL;
  fsK_file f;
  assert_int_equal(fsK_open(&f, p, &err), 0);
  float fb[3];
  assert_int_equal(fsK_read(&f, fsK_find(&f, "b"), 0, 3, FS_F32, fb, &err), 0);
  assert_true(fb[0] == 1.0f && fb[1] == -2.0f && fb[2] == 0.25f);
  uint16_t wb[6];
  assert_int_equal(fsK_read(&f, fsK_find(&f, "w"), 0, 6, FS_BF16, wb, &err), 0);
  assert_int_equal(wb[0], 0x3fc0); /* 1.5 */
  assert_int_equal(wb[1], 0xc000);
  assert_int_equal(wb[4], 0x8000); /* -0.0 keeps its sign */
  assert_int_equal(wb[5], 0x3a83); /* 1e-3 = 0x3a83126f rounds down */
  int64_t wi[6];
  assert_int_equal(fsK_read(&f, fsK_find(&f, "w"), 0, 6, FS_I64, wi, &err), 0);
  assert_int_equal(wi[0], 1); /* truncation toward zero */
  assert_int_equal(wi[1], -2);
  fsK_close(&f);
  free(p);
}

static void test_no_temp_file_left(void **state) {
  char *p = save_sample("clean.safetensors");
  free(save_sample("clean.safetensors")); /* overwrite in place */
  DIR *d = opendir(dt_dir);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') {
      assert_string_equal(e->d_name, "clean.safetensors");
      files++;
    }
  closedir(d);
  assert_int_equal(files, 1);
  free(p);
}

static void test_save_rejects_bad_entries(void **state) {
  char *p = dt_path(dt_dir, "bad.safetensors"), *err = NULL;
  const int64_t neg[1] = {-1};
  fsK_entry dup[2] = {{"x", FS_F32, 1, b_shape, w}, {"x", FS_BF16, 1, b_shape, b}};
  assert_int_equal(fsK_save(p, dup, 2, NULL, 0, &err), -1);
  assert_non_null(strstr(err, "two tensors named \"x\""));
  free(err);
  fsK_entry bad[1] = {{"x", FS_F32, 1, neg, w}};
  assert_int_equal(fsK_save(p, bad, 1, NULL, 0, &err), -1);
  assert_non_null(strstr(err, "tensor \"x\" has an invalid shape [?]"));
  free(err);
  const int64_t giant[1] = {(int64_t)1 << 60};
  fsK_entry two[2] = {{"g1", FS_F32, 1, giant, NULL}, {"g2", FS_F32, 1, giant, NULL}};
  assert_int_equal(fsK_save(p, two, 2, NULL, 0, &err), -1);
  assert_non_null(strstr(err, "the tensors are too large for one file"));
  free(err);
  fsK_entry reserved[1] = {{"__metadata__", FS_F32, 1, b_shape, w}};
  assert_int_equal(fsK_save(p, reserved, 1, NULL, 0, &err), -1);
  assert_non_null(strstr(err, "cannot save a tensor named \"__metadata__\""));
  free(err);
  fsK_entry utf[1] = {{"\xff", FS_F32, 1, b_shape, w}};
  assert_int_equal(fsK_save(p, utf, 1, NULL, 0, &err), -1);
  assert_non_null(strstr(err, "must be UTF-8"));
  free(err);
  assert_int_equal(dt_size(p), -1);
  char *missing_dir = dt_path(dt_dir, "no/such/dt_dir.safetensors");
  assert_int_equal(fsK_save(missing_dir, entries, 4, NULL, 0, &err), -1);
  assert_non_null(strstr(err, "cannot create a temporary file next to it"));
  free(err);
  free(missing_dir);
  free(p);
}

/* Writes the 8-byte length and header text, then data_len bytes of data. */
static void write_raw(const char *path, const char *header, size_t data_len) {
  size_t h = strlen(header);
  uint8_t *buf = calloc(8 + h + data_len + 1, 1);
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(buf + 8, header, h);
  dt_write(path, buf, 8 + h + data_len);
  free(buf);
}

static void expect_open_error(const char *path, const char *text) {
  fsK_file f;
  char *err = NULL;
  assert_int_equal(fsK_open(&f, path, &err), -1);
  assert_non_null(err);
  assert_non_null(strstr(err, path));
  if (!strstr(err, text)) fail_msg("error \"%s\" does not contain \"%s\"", err, text);
  assert_null(f.t);
  free(err);
}

static void test_corrupt_headers(void **state) {
  char *p = dt_path(dt_dir, "c.safetensors");
  const char *one = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  write_raw(p, one, 8);
  fsK_file f;
  char *err = NULL;
  assert_int_equal(fsK_open(&f, p, &err), 0); /* the control is valid */
  fsK_close(&f);
  write_raw(p, one, 4);
  expect_open_error(p, "truncated: the header describes 8 bytes of tensor data, the file holds 4");
  write_raw(p, one, 12);
  expect_open_error(p, "corrupt: 4 bytes after the last tensor's data");
  write_raw(p, "{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  expect_open_error(p, "tensor \"a\" has dtype I32; supported are F32, F64, BF16, F16, I64 and BOOL");
  write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
  expect_open_error(p, "tensor \"a\" (F32 [3]) needs 12 bytes but its data_offsets span 8");
  write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 6);
  expect_open_error(p, "tensor \"b\" starts at byte 2 of the data, expected 4 (overlap)");
  write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
  expect_open_error(p, "tensor \"a\" starts at byte 4 of the data, expected 0 (gap)");
  write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8);
  expect_open_error(p, "tensor \"a\" has invalid data_offsets");
  write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0);
  expect_open_error(p, "tensor \"a\" has an invalid shape");
  write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4);
  expect_open_error(p, "tensor \"a\" needs dtype, shape and data_offsets");
  write_raw(p, "{\"a\":1,", 0);
  expect_open_error(p, "corrupt header: invalid JSON");
  write_raw(p, "{\"a\":{},\"a\":{}}", 0);
  expect_open_error(p, "corrupt header: invalid JSON");
  write_raw(p, "[1, 2]  ", 0);
  expect_open_error(p, "not a safetensors file: the header is not a JSON object");
  write_raw(p, "{\"__metadata__\":{\"k\":1}}", 0);
  expect_open_error(p, "__metadata__ value of \"k\" is not a string");
  dt_write(p, "\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10);
  expect_open_error(p, "header length 9223372036854775807 is over the limit");
  dt_write(p, "\x40\x00\x00\x00\x00\x00\x00\x00{}", 10);
  expect_open_error(p, "truncated: header length 64 but only 2 bytes follow");
  dt_write(p, "\x01\x00", 2);
  expect_open_error(p, "truncated: 2 bytes, too short for a safetensors header");
  free(p);
  p = dt_path(dt_dir, "absent.safetensors");
  expect_open_error(p, "cannot open: No such file or directory");
  free(p);
}

/* Every proper prefix of a valid file is rejected (and nothing crashes). */
static void test_every_truncation_fails(void **state) {
  char *p = save_sample("full.safetensors"), *q = dt_path(dt_dir, "cut.safetensors");
  size_t n;
  uint8_t *raw = slurp(p, &n);
  for (size_t len = 0; len < n; len++) {
    dt_write(q, raw, len);
    fsK_file f;
    char *err = NULL;
    if (fsK_open(&f, q, &err) == 0) fail_msg("a %zu-byte prefix of %zu opened", len, n);
    assert_non_null(strstr(err, q));
    free(err);
  }
  free(raw);
  free(p);
  free(q);
}

/* Random byte changes in the header: each file opens (and then reads
 * fully) or is rejected with a message; nothing crashes. */
static void test_mutated_headers(void **state) {
  char *p = save_sample("orig.safetensors"), *q = dt_path(dt_dir, "mut.safetensors");
  size_t n;
  uint8_t *raw = slurp(p, &n), *mut = malloc(n);
  size_t hdr_end = 8 + (size_t)raw[0] + ((size_t)raw[1] << 8);
  uint64_t r = 12345;
  int opened = 0;
  for (int iter = 0; iter < 3000; iter++) {
    memcpy(mut, raw, n);
    for (int k = 0; k < 1 + iter % 3; k++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      mut[(r >> 33) % hdr_end] = (uint8_t)(r >> 17);
    }
    dt_write(q, mut, n);
    fsK_file f;
    char *err = NULL;
    if (fsK_open(&f, q, &err) != 0) {
      assert_non_null(strstr(err, q));
      free(err);
      continue;
    }
    opened++;
    for (size_t i = 0; i < f.n; i++) {
      float *dst = malloc(f.t[i].numel * sizeof(float) + 1);
      assert_int_equal(fsK_read(&f, &f.t[i], 0, f.t[i].numel, FS_F32, dst, &err), 0);
      free(dst);
    }
    fsK_close(&f);
  }
  assert_true(opened > 0); /* e.g. changed metadata text still opens */
  free(raw);
  free(mut);
  free(p);
  free(q);
}

static void test_match_and_load(void **state) {
  char *p = save_sample("m.safetensors"), *err = NULL, *report = NULL;
  fsK_file f;
  assert_int_equal(fsK_open(&f, p, &err), 0);
  const int64_t w_wrong[2] = {3, 2};
  /* w with the wrong shape, b wanted as f32, "bias" missing; step and empty
   * are unexpected. */
  fsK_entry want[3] = {{"w", FS_F32, 2, w_wrong, NULL}, {"b", FS_F32, 1, b_shape, NULL},
                       {"bias", FS_F32, 1, b_shape, NULL}};
  void *bufs[3];
  assert_int_equal(fsK_load(&f, want, 3, NULL, true, bufs, &report, &err), -1);
  char expect[512];
  snprintf(expect, sizeof expect,
           "%s: missing key(s): \"bias\"; unexpected key(s): \"empty\", \"step\"; size mismatch "
           "for \"w\": shape [2, 3] in the checkpoint, [3, 2] expected", p);
  assert_string_equal(err, expect);
  free(err);
  for (int i = 0; i < 3; i++) assert_null(bufs[i]);
  /* strict=False: b loads, the rest is reported. */
  assert_int_equal(fsK_load(&f, want, 3, NULL, false, bufs, &report, &err), 0);
  assert_string_equal(report, expect);
  free(report);
  assert_null(bufs[0]);
  assert_null(bufs[2]);
  assert_non_null(bufs[1]);
  assert_true(((float *)bufs[1])[1] == -2.0f);
  free(bufs[1]);
  /* A prefix limits what counts as unexpected. */
  fsK_entry all[2] = {{"w", FS_F32, 2, w_shape, NULL}, {"b", FS_BF16, 1, b_shape, NULL}};
  assert_int_equal(fsK_load(&f, all, 2, "w", true, bufs, &report, &err), 0);
  assert_null(report);
  assert_memory_equal(bufs[0], w, sizeof w);
  assert_memory_equal(bufs[1], b, sizeof b);
  free(bufs[0]);
  free(bufs[1]);
  fsK_close(&f);
  free(p);
}

/* Two writers (the owner and an attached one) fill halves of each tensor. */
static void test_sliced_writers(void **state) {
  char *p = dt_path(dt_dir, "sharded.safetensors"), *err = NULL;
  float big[1000];
  int64_t idx[10];
  for (int i = 0; i < 1000; i++) big[i] = (float)i * 0.5f;
  for (int i = 0; i < 10; i++) idx[i] = -i;
  const int64_t s_big[2] = {10, 100}, s_idx[1] = {10};
  fsK_entry es[2] = {{"layer.weight", FS_F32, 2, s_big, NULL}, {"pos", FS_I64, 1, s_idx, NULL}};
  fsK_meta m[1] = {{"world_size", "2"}};
  fsK_writer owner, other;
  assert_int_equal(fsK_create(&owner, p, es, 2, m, 1, &err), 0);
  assert_int_equal(dt_size(p), -1); /* nothing at the target until commit */
  assert_int_equal(fsK_attach(&other, fsK_tmp_path(&owner), &err), 0);
  assert_int_equal(fsK_write(&owner, "layer.weight", 0, 500, big, &err), 0);
  assert_int_equal(fsK_write(&other, "layer.weight", 500, 500, big + 500, &err), 0);
  assert_int_equal(fsK_write(&other, "pos", 5, 5, idx + 5, &err), 0);
  assert_int_equal(fsK_write(&owner, "pos", 0, 5, idx, &err), 0);
  assert_int_equal(fsK_write(&other, "pos", 8, 5, idx, &err), -1);
  assert_non_null(strstr(err, "elements [8, 13) are outside tensor \"pos\" of 10"));
  free(err);
  assert_int_equal(fsK_write(&other, "nope", 0, 1, idx, &err), -1);
  assert_non_null(strstr(err, "no tensor \"nope\" in this checkpoint"));
  free(err);
  assert_int_equal(fsK_commit(&other, &err), 0);
  assert_int_equal(fsK_commit(&owner, &err), 0);
  fsK_file f;
  assert_int_equal(fsK_open(&f, p, &err), 0);
  float got[1000];
  int64_t gi[10];
  assert_int_equal(fsK_read(&f, fsK_find(&f, "layer.weight"), 0, 1000, FS_F32, got, &err), 0);
  assert_memory_equal(got, big, sizeof big);
  assert_int_equal(fsK_read(&f, fsK_find(&f, "pos"), 0, 10, FS_I64, gi, &err), 0);
  assert_memory_equal(gi, idx, sizeof idx);
  assert_string_equal(fsK_meta_get(&f, "world_size"), "2");
  fsK_close(&f);
  free(p);
}

/* The same protocol across processes: a forked "rank 1" attaches and
 * writes its half while the owner writes the other. */
static void test_sliced_writers_two_processes(void **state) {
  char *p = dt_path(dt_dir, "ranks.safetensors"), *err = NULL;
  enum { N = 1 << 16 };
  float *full = malloc(N * sizeof *full), *got = malloc(N * sizeof *got);
  for (int i = 0; i < N; i++) full[i] = (float)i - 7.25f;
  const int64_t s[1] = {N};
  fsK_entry es[1] = {{"flat", FS_F32, 1, s, NULL}};
  fsK_writer owner;
  assert_int_equal(fsK_create(&owner, p, es, 1, NULL, 0, &err), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    fsK_writer child;
    _exit(fsK_attach(&child, fsK_tmp_path(&owner), NULL) != 0 ||
          fsK_write(&child, "flat", N / 2, N / 2, full + N / 2, NULL) != 0 || fsK_commit(&child, NULL) != 0);
  }
  assert_int_equal(fsK_write(&owner, "flat", 0, N / 2, full, &err), 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid); /* the barrier */
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(fsK_commit(&owner, &err), 0);
  fsK_file f;
  assert_int_equal(fsK_open(&f, p, &err), 0);
  assert_int_equal(fsK_read(&f, fsK_find(&f, "flat"), 0, N, FS_F32, got, &err), 0);
  assert_memory_equal(got, full, N * sizeof *got);
  fsK_close(&f);
  free(full);
  free(got);
  free(p);
}

static void test_abort_removes_temp(void **state) {
  char *p = dt_path(dt_dir, "ab.safetensors"), *err = NULL;
  fsK_writer wr;
  assert_int_equal(fsK_create(&wr, p, entries, 4, NULL, 0, &err), 0);
  char *tmp = strdup(fsK_tmp_path(&wr));
  assert_true(dt_size(tmp) > 0);
  fsK_abort(&wr);
  assert_int_equal(dt_size(tmp), -1);
  assert_int_equal(dt_size(p), -1);
  free(tmp);
  free(p);
}

#define T DT_TEST

int main(void) {
  const struct CMUnitTest tests[] = {
    T(test_layout_matches_reference_writer),
    T(test_round_trip),
    T(test_dtype_conversion),
    T(test_no_temp_file_left),
    T(test_save_rejects_bad_entries),
    T(test_corrupt_headers),
    T(test_every_truncation_fails),
    T(test_mutated_headers),
    T(test_match_and_load),
    T(test_sliced_writers),
    T(test_sliced_writers_two_processes),
    T(test_abort_removes_temp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
