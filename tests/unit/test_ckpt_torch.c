/* test_ckpt_torch.c -- PyTorch's checkpoint format (runtime/io/torchckpt.h):
 * round trips, the multi-writer protocol, and files that must be refused,
 * each with its exact error. Files torch itself writes: tests/parity. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datatest.h"
#include "torchckpt.h"

static const float w[6] = {1.5f, -2.0f, 0.25f, 3.0f, -0.0f, 1e-3f};
static const uint16_t bf[3] = {0x3f80, 0xc000, 0x3e80}; /* 1, -2, 0.25 */
static const int64_t ids[2] = {-7, INT64_C(1) << 50};

/* {"model": OrderedDict(w: f32 [2, 3], b: bf16 [3]), "ids": i64 [2],
 *  "step": 5, "lr": 0.5, "name": "run", "flags": [True, None, (1, 2)]} */
static fsQ_value *sample(fsQ_doc *d, bool with_data) {
  int64_t s23[2] = {2, 3}, s3[1] = {3}, s2[1] = {2};
  fsQ_value *root = fsQ_container(d, FSQ_DICT), *model = fsQ_ordered_dict(d);
  fsQ_value *flags = fsQ_container(d, FSQ_LIST), *pair = fsQ_container(d, FSQ_TUPLE);
  assert_int_equal(fsQ_set(root, fsQ_str(d, "model"), model), 0);
  fsQ_set(model, fsQ_str(d, "w"), fsQ_tensor_new(d, FS_F32, 2, s23, with_data ? w : NULL));
  fsQ_set(model, fsQ_str(d, "b"), fsQ_tensor_new(d, FS_BF16, 1, s3, with_data ? bf : NULL));
  fsQ_set(root, fsQ_str(d, "ids"), fsQ_tensor_new(d, FS_I64, 1, s2, with_data ? ids : NULL));
  fsQ_set(root, fsQ_str(d, "step"), fsQ_int(d, 5));
  fsQ_set(root, fsQ_str(d, "lr"), fsQ_float(d, 0.5));
  fsQ_set(root, fsQ_str(d, "name"), fsQ_str(d, "run"));
  fsQ_set(root, fsQ_str(d, "flags"), flags);
  fsQ_push(flags, fsQ_bool(d, true));
  fsQ_push(flags, fsQ_none(d));
  fsQ_push(flags, pair);
  fsQ_push(pair, fsQ_int(d, 1));
  fsQ_push(pair, fsQ_int(d, 2));
  return root;
}

static void check_sample(const fsH_file *f) {
  const fsQ_value *root = f->doc->root, *model = fsQ_get(root, "model");
  assert_non_null(model);
  assert_true(model->ordered);
  assert_int_equal(model->u.dict.n, 2);
  const fsQ_value *tw = fsQ_get(model, "w"), *tb = fsQ_get(model, "b"), *ti = fsQ_get(root, "ids");
  assert_int_equal(tw->kind, FSQ_TENSOR);
  assert_int_equal(tw->u.t.ndim, 2);
  assert_int_equal(tw->u.t.shape[1], 3);
  float got[6];
  char *err = NULL;
  assert_int_equal(fsH_read(f, tw, 0, 6, FS_F32, got, &err), 0);
  assert_memory_equal(got, w, sizeof w);
  assert_int_equal(fsH_read(f, tb, 1, 2, FS_F32, got, &err), 0); /* a slice, converted */
  assert_true(got[0] == -2.0f && got[1] == 0.25f);
  int64_t gi[2];
  assert_int_equal(fsH_read(f, ti, 0, 2, FS_I64, gi, &err), 0);
  assert_memory_equal(gi, ids, sizeof ids);
  assert_int_equal(fsQ_get(root, "step")->u.i, 5);
  assert_true(fsQ_get(root, "lr")->u.f == 0.5);
  assert_string_equal(fsQ_get(root, "name")->u.str.s, "run");
  const fsQ_value *flags = fsQ_get(root, "flags");
  assert_int_equal(flags->kind, FSQ_LIST);
  assert_int_equal(flags->u.seq.v[2]->kind, FSQ_TUPLE);
  assert_int_equal(flags->u.seq.v[2]->u.seq.v[1]->u.i, 2);
}

static void test_format_by_extension(void **state) {
  assert_true(fsH_is_torch_path("a.pt") && fsH_is_torch_path("dir/m.pth") && fsH_is_torch_path("last.ckpt"));
  assert_false(fsH_is_torch_path("a.safetensors") || fsH_is_torch_path("a.pt.safetensors"));
  assert_false(fsH_is_torch_path("ckpt") || fsH_is_torch_path("dir/.pt") || fsH_is_torch_path("a.PT"));
}

static void test_round_trip(void **state) {
  fsQ_doc *d = fsQ_new();
  char *p = dt_path(dt_dir, "a.pt"), *err = NULL;
  if (fsH_save(p, sample(d, true), &err) != 0) fail_msg("save: %s", err);
  fsQ_free(d);
  fsH_file f;
  if (fsH_open(&f, p, &err) != 0) fail_msg("open: %s", err);
  check_sample(&f);
  assert_int_equal(fsH_read(&f, fsQ_get(f.doc->root, "ids"), 1, 2, FS_I64, NULL, &err), -1);
  char want[600];
  snprintf(want, sizeof want, "%s: elements [1, 3) are outside a tensor of 2", p);
  assert_string_equal(err, want);
  free(err);
  fsH_close(&f);
  free(p);
}

/* Two writers of one file, as FSDP ranks: the owner creates it, the other
 * attaches and writes half of every tensor. */
static void test_sliced_writers(void **state) {
  fsQ_doc *d = fsQ_new(), *d2 = fsQ_new(), *other = fsQ_new();
  fsQ_value *root = sample(d, false), *root2 = sample(d2, false), *diff = sample(other, false);
  fsQ_set(diff, fsQ_str(other, "extra"), fsQ_int(other, 1));
  char *p = dt_path(dt_dir, "s.ckpt"), *err = NULL;
  fsH_writer owner, rank1, bad;
  if (fsH_create(&owner, p, root, &err) != 0) fail_msg("create: %s", err);
  if (fsH_attach(&rank1, fsH_tmp_path(&owner), root2, &err) != 0) fail_msg("attach: %s", err);
  assert_int_equal(fsH_attach(&bad, fsH_tmp_path(&owner), diff, &err), -1);
  assert_non_null(strstr(err, "the owner laid out") ? err : strstr(err, "holds other values"));
  free(err);
  err = NULL;
  const fsQ_value *model = fsQ_get(root, "model"), *model2 = fsQ_get(root2, "model");
  assert_int_equal(fsH_write(&owner, fsQ_get(model, "w"), 0, 3, w, &err), 0);
  assert_int_equal(fsH_write(&rank1, fsQ_get(model2, "w"), 3, 3, w + 3, &err), 0);
  assert_int_equal(fsH_write(&owner, fsQ_get(model, "b"), 0, 3, bf, &err), 0);
  assert_int_equal(fsH_write(&rank1, fsQ_get(root2, "ids"), 0, 2, ids, &err), 0);
  assert_int_equal(fsH_write(&rank1, fsQ_get(root2, "ids"), 1, 2, ids, &err), -1);
  free(err);
  err = NULL;
  assert_int_equal(fsH_commit(&rank1, &err), 0);
  assert_int_equal(access(p, F_OK), -1); /* nothing in place before the owner commits */
  if (fsH_commit(&owner, &err) != 0) fail_msg("commit: %s", err);
  fsH_file f;
  if (fsH_open(&f, p, &err) != 0) fail_msg("open: %s", err);
  check_sample(&f);
  fsH_close(&f);
  fsQ_free(d);
  fsQ_free(d2);
  fsQ_free(other);
  free(p);
}

/* ---- hostile files: a pickle of our own in a valid archive ---- */

typedef struct pk { uint8_t b[8192]; size_t n; } pk;

static void raw(pk *k, const void *s, size_t n) {
  assert_true(k->n + n <= sizeof k->b);
  memcpy(k->b + k->n, s, n);
  k->n += n;
}
static void op(pk *k, const char *ops) { raw(k, ops, strlen(ops)); }
static void str(pk *k, const char *s) {
  uint32_t n = (uint32_t)strlen(s);
  uint8_t h[5] = {'X', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
  raw(k, h, 5);
  raw(k, s, n);
}
static void int1(pk *k, uint8_t v) { raw(k, (uint8_t[]){'K', v}, 2); }

/* _rebuild_tensor_v2(storage '0' of numel elements of cls, offset, (size,), (1,), False, OrderedDict()) */
static void tensor(pk *k, const char *cls, uint8_t numel, uint8_t offset, uint8_t size) {
  op(k, "ctorch._utils\n_rebuild_tensor_v2\n((");
  str(k, "storage");
  op(k, "c");
  op(k, cls);
  str(k, "0");
  str(k, "cpu");
  int1(k, numel);
  op(k, "tQ");
  int1(k, offset);
  int1(k, size);
  op(k, "\x85");
  int1(k, 1);
  op(k, "\x85\x89" "ccollections\nOrderedDict\n)RtR");
}

/* An archive x/{data.pkl, data/0 (storage bytes), version} at dt_dir/name. */
static char *archive(const char *name, const pk *k, size_t storage_bytes) {
  char *p = dt_path(dt_dir, name), *err = NULL;
  const char *names[] = {"x/data.pkl", "x/data/0", "x/version"};
  uint64_t sizes[] = {k->n, storage_bytes, 2};
  uint8_t zeros[256] = {0};
  fsZ_writer z;
  assert_true(storage_bytes <= sizeof zeros);
  if (fsZ_create(&z, p, names, sizes, 3, &err) != 0 || fsZ_write(&z, 0, 0, k->b, k->n, &err) != 0 ||
      fsZ_write(&z, 1, 0, zeros, storage_bytes, &err) != 0 || fsZ_write(&z, 2, 0, "3\n", 2, &err) != 0 ||
      fsZ_commit(&z, &err) != 0)
    fail_msg("archive: %s", err);
  return p;
}

/* fsH_open(path) fails with "<path>: <what>". */
static void refused(char *path, const char *what) {
  fsH_file f;
  char *err = NULL, want[1024];
  assert_int_equal(fsH_open(&f, path, &err), -1);
  snprintf(want, sizeof want, "%s: %s", path, what);
  assert_string_equal(err, want);
  free(err);
  free(path);
}

static char *pickle_n(const char *name, const char *ops, size_t n) {
  pk k = {.n = 0};
  op(&k, "\x80\x02");
  raw(&k, ops, n);
  return archive(name, &k, 0);
}
/* Protocol 2, then the opcodes of a string literal (NULs included). */
#define pickle(name, lit) pickle_n(name, lit, sizeof lit - 1)

static void test_refuses_unknown_global(void **state) {
  refused(pickle("g.pt", "cos\nsystem\n(X\x02\0\0\0lstR."),
          "data.pkl: unsupported global os.system (only what torch.load(weights_only=True) accepts is loaded) at byte 2");
  refused(pickle("g2.pt", "cbuiltins\neval\n."),
          "data.pkl: unsupported global builtins.eval (only what torch.load(weights_only=True) accepts is loaded) at byte 2");
}

static void test_refuses_reduce_of_what_is_not_a_value(void **state) {
  refused(pickle("r1.pt", "ctorch\nTensor\n)R."),
          "data.pkl: torch.Tensor is not supported (the runtime has dense tensors, containers and numbers only) at byte 17");
  refused(pickle("r2.pt", "]])R."), "data.pkl: REDUCE of a list: only allowed globals can be called at byte 5");
  refused(pickle("r3.pt", "ctorch._utils\n_rebuild_sparse_tensor\n)R."),
          "data.pkl: torch._utils._rebuild_sparse_tensor is not supported (the runtime has dense tensors, containers "
          "and numbers only) at byte 40");
  refused(pickle("r4.pt", "ccollections\nOrderedDict\n)\x81."),
          "data.pkl: trying to instantiate unsupported class collections.OrderedDict at byte 28");
  refused(pickle("r5.pt", "ctorch\nfloat32\n."), "data.pkl: torch.float32 as a value is not supported at byte 17");
}

static void test_refuses_opcodes_torch_refuses(void **state) {
  refused(pickle("i.pt", "(ios\nsystem\n."), "data.pkl: unsupported opcode INST (0x69) at byte 3");
  refused(pickle("o.pt", "(]o."), "data.pkl: unsupported opcode OBJ (0x6f) at byte 4");
  refused(pickle("s.pt", "X\2\0\0\0os\x93."), "data.pkl: unsupported opcode STACK_GLOBAL (0x93) at byte 9");
  refused(pickle("d.pt", "N2."), "data.pkl: unsupported opcode DUP (0x32) at byte 3");
}

static void test_refuses_build_of_other_types(void **state) {
  refused(pickle("b1.pt", "]}b."), "data.pkl: can only build Tensor, parameter or dict objects, but got list at byte 4");
  refused(pickle("b2.pt", "}}b."), "data.pkl: can only build Tensor, parameter or dict objects, but got dict at byte 4");
  /* an OrderedDict with a dict state (a state dict's _metadata): its items stay */
  pk k = {.n = 0};
  op(&k, "\x80\x02" "ccollections\nOrderedDict\n)R(");
  str(&k, "a");
  int1(&k, 1);
  op(&k, "u}(");
  str(&k, "_metadata");
  op(&k, "}ub.");
  char *p = archive("b3.pt", &k, 0), *err = NULL;
  fsH_file f;
  if (fsH_open(&f, p, &err) != 0) fail_msg("open: %s", err);
  assert_true(f.doc->root->ordered);
  assert_int_equal(fsQ_get(f.doc->root, "a")->u.i, 1);
  assert_int_equal(f.doc->root->u.dict.n, 1);
  fsH_close(&f);
  free(p);
}

static void test_refuses_absurd_sizes(void **state) {
  refused(pickle("u.pt", "X\xff\xff\xff\xff" "abc."), "data.pkl: the pickle ends inside BINUNICODE at byte 2");
  refused(pickle("m.pt", "Nr\xf0\xff\xff\xff."), "data.pkl: memo key 4294967280 is larger than the pickle at byte 3");
  refused(pickle("h.pt", "h\x05."), "data.pkl: memo key 5 is not defined at byte 2");
  refused(pickle("l.pt", "\x8a\x09\1\2\3\4\5\6\7\x08\x09."), "data.pkl: an int does not fit in 64 bits at byte 2");
  pk k = {.n = 0};
  op(&k, "\x80\x02");
  tensor(&k, "torch\nFloatStorage\n", 4, 0, 10); /* 10 elements of a 4-element storage */
  op(&k, ".");
  refused(archive("t1.pt", &k, 16),
          "data.pkl: a tensor of 1 dimensions reaches past the end of storage '0' (4 elements) at byte 124");
  k.n = 0;
  op(&k, "\x80\x02");
  tensor(&k, "torch\nFloatStorage\n", 4, 2, 3); /* offset 2 + 3 elements */
  op(&k, ".");
  refused(archive("t2.pt", &k, 16),
          "data.pkl: a tensor of 1 dimensions reaches past the end of storage '0' (4 elements) at byte 124");
  k.n = 0;
  op(&k, "\x80\x02");
  tensor(&k, "torch\nFloatStorage\n", 4, 0, 4);
  op(&k, ".");
  refused(archive("t3.pt", &k, 12), "storage '0' holds 12 bytes, not the 16 of 4 float32 elements");
  k.n = 0;
  op(&k, "\x80\x02");
  tensor(&k, "torch\nIntStorage\n", 4, 0, 4);
  op(&k, ".");
  refused(archive("t4.pt", &k, 16),
          "data.pkl: a tensor of dtype int32 (torch.IntStorage): the runtime has float32, float64, bfloat16, float16 and int64 at byte 84");
}

static void test_refuses_cycles_and_depth(void **state) {
  refused(pickle("c.pt", "]q\1h\1a."), "data.pkl: the value contains itself at byte 8");
  char ops[2400];
  size_t n = 0;
  for (int i = 0; i < 1100; i++) ops[n++] = ']';
  for (int i = 0; i < 1099; i++) ops[n++] = 'a';
  ops[n++] = '.';
  refused(pickle_n("deep.pt", ops, n), "data.pkl: the value is nested deeper than 1024 at byte 2201");
  refused(pickle("k.pt", "}(]Nu."), "data.pkl: a dict key must be a str, a number, None or a tuple of them, not list at byte 7");
  refused(pickle("p.pt", "\x80\x02."), "data.pkl: STOP needs 1 value on the stack at byte 4");
  refused(pickle("e.pt", "N"), "data.pkl: the pickle ends without STOP at byte 3");
}

/* Python's dict: a repeated key keeps its first place and takes the last value. */
static void test_duplicate_keys(void **state) {
  pk k = {.n = 0};
  op(&k, "\x80\x02}(");
  str(&k, "a");
  int1(&k, 1);
  str(&k, "b");
  int1(&k, 2);
  str(&k, "a");
  int1(&k, 3);
  op(&k, "K\x01K\x04\x88K\x05u."); /* 1 -> 4, True -> 5: True == 1 */
  char *p = archive("dup.pt", &k, 0), *err = NULL;
  fsH_file f;
  if (fsH_open(&f, p, &err) != 0) fail_msg("open: %s", err);
  const fsQ_value *r = f.doc->root;
  assert_int_equal(r->u.dict.n, 3);
  assert_string_equal(r->u.dict.k[0]->u.str.s, "a");
  assert_int_equal(r->u.dict.v[0]->u.i, 3);
  assert_int_equal(fsQ_get_int(r, 1)->u.i, 5);
  fsH_close(&f);
  free(p);
}

/* ---- damaged archives ---- */

static char *saved(const char *name) {
  fsQ_doc *d = fsQ_new();
  char *p = dt_path(dt_dir, name), *err = NULL;
  if (fsH_save(p, sample(d, true), &err) != 0) fail_msg("save: %s", err);
  fsQ_free(d);
  return p;
}

static void test_truncated_and_corrupt_zip(void **state) {
  char *p = saved("t.pt");
  long n = dt_size(p);
  assert_int_equal(truncate(p, n / 2), 0);
  refused(p, "not a valid torch checkpoint (zip): no end of central directory");
  p = saved("t2.pt");
  assert_int_equal(truncate(p, 10), 0);
  refused(p, "not a valid torch checkpoint (zip): the file is too short");
  p = saved("crc.pt");
  fsZ_archive z;
  char *err = NULL;
  assert_int_equal(fsZ_open(&z, p, &err), 0);
  uint64_t at = fsZ_find(&z, "crc/data/0")->data + 1;
  fsZ_close(&z);
  FILE *f = fopen(p, "r+b");
  fseek(f, (long)at, SEEK_SET);
  fputc(0x55, f);
  fclose(f);
  refused(p, "member crc/data/0 fails its CRC-32 check (the file is corrupt)");
  p = saved("cd.pt");
  assert_int_equal(fsZ_open(&z, p, &err), 0);
  at = fsZ_find(&z, "cd/version")->header;
  fsZ_close(&z);
  f = fopen(p, "r+b");
  fseek(f, (long)at, SEEK_SET);
  fputc('Q', f); /* the local header's signature */
  fclose(f);
  refused(p, "not a valid torch checkpoint (zip): member cd/version has no local header");
  pk k = {.n = 0};
  op(&k, "\x80\x02");
  tensor(&k, "torch\nFloatStorage\n", 4, 0, 4);
  op(&k, ".");
  p = dt_path(dt_dir, "nodata.pt");
  const char *names[] = {"x/data.pkl", "x/version"};
  uint64_t sizes[] = {k.n, 2};
  fsZ_writer zw;
  if (fsZ_create(&zw, p, names, sizes, 2, &err) != 0 || fsZ_write(&zw, 0, 0, k.b, k.n, &err) != 0 ||
      fsZ_write(&zw, 1, 0, "3\n", 2, &err) != 0 || fsZ_commit(&zw, &err) != 0)
    fail_msg("archive: %s", err);
  refused(p, "storage '0' has no data/0 member");
  p = dt_path(dt_dir, "plain.pt");
  dt_write(p, "not a zip at all, just text that is long enough", 48);
  refused(p, "not a valid torch checkpoint (zip): no end of central directory");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    DT_TEST(test_format_by_extension),
    DT_TEST(test_round_trip),
    DT_TEST(test_sliced_writers),
    DT_TEST(test_refuses_unknown_global),
    DT_TEST(test_refuses_reduce_of_what_is_not_a_value),
    DT_TEST(test_refuses_opcodes_torch_refuses),
    DT_TEST(test_refuses_build_of_other_types),
    DT_TEST(test_refuses_absurd_sizes),
    DT_TEST(test_refuses_cycles_and_depth),
    DT_TEST(test_duplicate_keys),
    DT_TEST(test_truncated_and_corrupt_zip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
