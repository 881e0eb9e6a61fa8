/* test_diag.c -- diagnostic rendering (text, colour, JSON), positions,
 * sorting, fix application and the unified diff. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "diag.h"

static fs_source *src_of(const char *text) {
  return fsA_source_from_buffer("t.fab", text, strlen(text));
}

/* The byte span of the first occurrence of needle in src. */
static fs_loc span(const fs_source *src, const char *needle) {
  const char *p = strstr(src->text, needle);
  assert_non_null(p);
  uint32_t s = (uint32_t)(p - src->text);
  return (fs_loc){ s, s + (uint32_t)strlen(needle) };
}

/* Renders every diagnostic of d and returns the malloc'd output. */
static char *render(const fs_diags *d, fs_diag_format format, int color) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  fs_render_opts o = { format, color, NULL };
  fsD_render_all(f, d, &o);
  fclose(f);
  return buf;
}

static void expect_text(const fs_diags *d, const char *want) {
  char *got = render(d, FS_DIAG_TEXT, 0);
  assert_string_equal(got, want);
  free(got);
}

static void test_spec_example(void **st) {
  (void)st;
  fs_source *src = src_of(
      "fabric = Fabric(strategy=\"fsdp\")\n"
      "model Net():\n"
      "    Linear(4, 4)\n"
      "\n"
      "fabric.launch()\n"
      "with fabric.init_module(empty_init=True):\n"
      "    model = Net()\n"
      "optimizer = Adam(model.parameters())\n"
      "model, optimizer = fabric.setup(model, optimizer)\n");
  fs_diags d;
  fsD_init(&d);
  fs_diag *g = fsD_add(&d, FS_SEV_ERROR, "R36", src, span(src, "fabric.setup(model, optimizer)"),
      "The optimizer has references to the model's meta-device parameters. Materializing them "
      "is is currently not supported unless you to set up the model and optimizer(s) separately. "
      "Create and set up the model first through `model = fabric.setup_module(model)`. Then "
      "create the optimizer and set it up: `optimizer = fabric.setup_optimizers(optimizer)`.");
  fsD_note(g, src, span(src, "Adam("), "`optimizer` was created over `model.parameters()` while "
           "they were on the meta device");
  fsD_note(g, src, span(src, "fabric.init_module"), "parameters are on the meta device because "
           "`model` was created under `fabric.init_module(empty_init=True)` with strategy \"%s\"",
           "fsdp");
  fsD_help(g, "set up the model first, then create the optimizer:\n"
              "    model = fabric.setup_module(model)\n"
              "    optimizer = fabric.setup_optimizers(Adam(model.parameters()))");
  expect_text(&d,
      "t.fab:9:20: error[R36]: The optimizer has references to the model's meta-device parameters. "
      "Materializing them is is currently not supported unless you to set up the model and "
      "optimizer(s) separately. Create and set up the model first through `model = "
      "fabric.setup_module(model)`. Then create the optimizer and set it up: `optimizer = "
      "fabric.setup_optimizers(optimizer)`.\n"
      "    9 | model, optimizer = fabric.setup(model, optimizer)\n"
      "      |                    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
      "t.fab:8:13: note: `optimizer` was created over `model.parameters()` while they were on "
      "the meta device\n"
      "    8 | optimizer = Adam(model.parameters())\n"
      "      |             ^~~~~\n"
      "t.fab:6:6: note: parameters are on the meta device because `model` was created under "
      "`fabric.init_module(empty_init=True)` with strategy \"fsdp\"\n"
      "    6 | with fabric.init_module(empty_init=True):\n"
      "      |      ^~~~~~~~~~~~~~~~~~\n"
      "help: set up the model first, then create the optimizer:\n"
      "    model = fabric.setup_module(model)\n"
      "    optimizer = fabric.setup_optimizers(Adam(model.parameters()))\n");
  assert_int_equal(d.nerrors, 1);
  assert_true(fsD_has_errors(&d));
  fsD_free(&d);
  fsA_source_free(src);
}

static void test_color(void **st) {
  (void)st;
  fs_source *src = src_of("x = y\n");
  fs_diags d;
  fsD_init(&d);
  fs_diag *g = fsD_add(&d, FS_SEV_WARNING, "W1", src, span(src, "y"), "unused");
  fsD_note(g, src, span(src, "x"), "here");
  fsD_help(g, "drop it");
  char *got = render(&d, FS_DIAG_TEXT, 1);
  assert_string_equal(got,
      "\33[01m\33[Kt.fab:1:5:\33[m\33[K \33[01;35m\33[Kwarning[W1]: \33[m\33[Kunused\n"
      "    1 | x = y\n"
      "      |     \33[01;32m\33[K^\33[m\33[K\n"
      "\33[01m\33[Kt.fab:1:1:\33[m\33[K \33[01;36m\33[Knote: \33[m\33[Khere\n"
      "    1 | x = y\n"
      "      | \33[01;32m\33[K^\33[m\33[K\n"
      "\33[01m\33[Khelp:\33[m\33[K drop it\n");
  free(got);
  fsD_free(&d);
  fs_diag *e = fsD_add(&d, FS_SEV_ERROR, "io", NULL, (fs_loc){ 0, 0 }, "gone");
  (void)e;
  got = render(&d, FS_DIAG_TEXT, 1);
  assert_string_equal(got, "fabricscript: \33[01;31m\33[Kerror[io]: \33[m\33[Kgone\n");
  free(got);
  fsD_free(&d);
  fsA_source_free(src);
}

static void test_no_location(void **st) {
  (void)st;
  fs_diags d;
  fsD_init(&d);
  fsD_add(&d, FS_SEV_ERROR, "io", NULL, (fs_loc){ 0, 0 }, "%s: %s", "a.fab", "No such file");
  expect_text(&d, "fabricscript: error[io]: a.fab: No such file\n");
  char *j = render(&d, FS_DIAG_JSON, 0);
  assert_string_equal(j, "{\"version\":1,\"file\":null,\"line\":null,\"column\":null,\"column_utf16\":null,\"end\":null,"
                         "\"severity\":\"error\",\"rule\":\"io\",\"message\":\"a.fab: No such "
                         "file\",\"notes\":[],\"help\":null,\"fix\":[]}\n");
  free(j);
  fsD_free(&d);
}

/* The gutter grows with the line number; the caret line follows it. */
static void test_gutter(void **st) {
  (void)st;
  size_t n = 123456;
  char *text = malloc(n + 8);
  memset(text, '\n', n - 1);
  strcpy(text + n - 1, "ab\n");
  fs_source *src = fsA_source_from_buffer("t.fab", text, strlen(text));
  free(text);
  fs_diags d;
  fsD_init(&d);
  fsD_add(&d, FS_SEV_ERROR, "x", src, span(src, "b"), "m");
  expect_text(&d, "t.fab:123456:2: error[x]: m\n"
                  "123456 | ab\n"
                  "       |  ^\n");
  fsD_free(&d);
  fsA_source_free(src);
}

static void test_tabs(void **st) {
  (void)st;
  fs_source *src = src_of("x\t= 1\t+ yy\n");
  fs_diags d;
  fsD_init(&d);
  fsD_add(&d, FS_SEV_ERROR, "x", src, span(src, "1\t+ yy"), "m");
  /* columns count the tab as one; the excerpt expands it to the stop */
  expect_text(&d, "t.fab:1:5: error[x]: m\n"
                  "    1 | x       = 1     + yy\n"
                  "      |           ^~~~~~~~~~\n");
  fsD_free(&d);
  fsA_source_free(src);
}

static void test_utf8_columns(void **st) {
  (void)st;
  fs_source *src = src_of("s = \"h\xc3\xa9\xc3\xa9\" + \xe5\x90\x8d + x\n");
  uint32_t line, col;
  fsD_position(src, span(src, "x").start, &line, &col);
  assert_int_equal(line, 1);
  assert_int_equal(col, 17);
  fs_diags d;
  fsD_init(&d);
  fsD_add(&d, FS_SEV_ERROR, "x", src, span(src, "\xe5\x90\x8d + x"), "m");
  /* the wide character takes two cells in the caret line */
  expect_text(&d, "t.fab:1:13: error[x]: m\n"
                  "    1 | s = \"h\xc3\xa9\xc3\xa9\" + \xe5\x90\x8d + x\n"
                  "      |             ^~~~~~\n");
  fsD_free(&d);
  fsA_source_free(src);
}

/* Invalid bytes are one column each and shown as U+FFFD, never raw; so are
 * control characters, in the source line and in messages. */
static void test_invalid_bytes(void **st) {
  (void)st;
  fs_source *src = src_of("a\xff\xe2\x82 = b\33[2J\n");
  uint32_t line, col;
  fsD_position(src, span(src, "b").start, &line, &col);
  assert_int_equal(col, 8);
  fs_diags d;
  fsD_init(&d);
  fsD_add(&d, FS_SEV_ERROR, "x", src, span(src, "b"), "bad \33]0;title\7 %s", "\xc0\xaf");
  expect_text(&d, "t.fab:1:8: error[x]: bad \xef\xbf\xbd]0;title\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\n"
                  "    1 | a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd = b\xef\xbf\xbd[2J\n"
                  "      |        ^\n");
  char *j = render(&d, FS_DIAG_JSON, 0);
  json_t *o = json_loads(j, 0, NULL);
  assert_non_null(o); /* valid UTF-8, so jansson accepts it */
  assert_string_equal(json_string_value(json_object_get(o, "message")),
                      "bad \xef\xbf\xbd]0;title\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd");
  json_decref(o);
  free(j);
  fsD_free(&d);
  fsA_source_free(src);
}

/* A span across lines is underlined to the end of its first line; an empty
 * one, or one at the end of a line, is a lone caret. */
static void test_span_shapes(void **st) {
  (void)st;
  fs_source *src = src_of("f(a,\r\n  b)\nend");
  fs_diags d;
  fsD_init(&d);
  fsD_add(&d, FS_SEV_ERROR, "x", src, span(src, "(a,\r\n  b)"), "multi");
  fsD_add(&d, FS_SEV_ERROR, "x", src, (fs_loc){ 4, 4 }, "at end of line");
  fsD_add(&d, FS_SEV_ERROR, "x", src, (fs_loc){ 15, 15 }, "at end of file");
  fsD_add(&d, FS_SEV_ERROR, "x", src, (fs_loc){ 999, 1000 }, "past the end");
  expect_text(&d, "t.fab:1:2: error[x]: multi\n"
                  "    1 | f(a,\n"
                  "      |  ^~~\n"
                  "t.fab:1:5: error[x]: at end of line\n"
                  "    1 | f(a,\n"
                  "      |     ^\n"
                  "t.fab:3:4: error[x]: at end of file\n"
                  "    3 | end\n"
                  "      |    ^\n"
                  "t.fab:3:4: error[x]: past the end\n"
                  "    3 | end\n"
                  "      |    ^\n");
  fsD_free(&d);
  fsA_source_free(src);
}

static void test_json(void **st) {
  (void)st;
  fs_source *src = src_of("a = 1\nb = a +\n");
  fs_source *other = fsA_source_from_buffer("o.fab", "zz\n", 3);
  fs_diags d;
  fsD_init(&d);
  fs_diag *g = fsD_add(&d, FS_SEV_WARNING, "W4", src, span(src, "a +"), "say \"%d\"\n", 2);
  fsD_note(g, other, span(other, "zz"), "there");
  fsD_help(g, "h");
  fsD_edit(g, span(src, " +"), "");
  fsD_edit(g, (fs_loc){ 0, 0 }, "# \xff\n");
  char *j = render(&d, FS_DIAG_JSON, 0);
  assert_string_equal(j,
      "{\"version\":1,\"file\":\"t.fab\",\"line\":2,\"column\":5,\"column_utf16\":5,"
      "\"end\":{\"line\":2,\"column\":8,\"column_utf16\":8},"
      "\"severity\":\"warning\",\"rule\":\"W4\",\"message\":\"say \\\"2\\\"\\n\","
      "\"notes\":[{\"file\":\"o.fab\",\"line\":1,\"column\":1,\"column_utf16\":1,"
      "\"end\":{\"line\":1,\"column\":3,\"column_utf16\":3},"
      "\"message\":\"there\"}],\"help\":\"h\","
      "\"fix\":[{\"line\":2,\"column\":6,\"column_utf16\":6,\"end\":{\"line\":2,\"column\":8,\"column_utf16\":8},"
      "\"text\":\"\"},{\"line\":1,\"column\":1,\"column_utf16\":1,"
      "\"end\":{\"line\":1,\"column\":1,\"column_utf16\":1},\"text\":\"# \xef\xbf\xbd\\n\"}]}\n");
  free(j);
  assert_int_equal(d.nwarnings, 1);
  assert_false(fsD_has_errors(&d));
  fsD_free(&d);
  fsA_source_free(src);
  fsA_source_free(other);
}

static void test_sort(void **st) {
  (void)st;
  fs_source *a = src_of("0123456789\n"), *b = fsA_source_from_buffer("b.fab", "xy\n", 3);
  fs_diags d;
  fsD_init(&d);
  fsD_add(&d, FS_SEV_ERROR, "r", a, (fs_loc){ 5, 6 }, "a5");
  fsD_add(&d, FS_SEV_ERROR, "r", b, (fs_loc){ 1, 2 }, "b1");
  fsD_add(&d, FS_SEV_WARNING, "r", a, (fs_loc){ 2, 3 }, "a2");
  fsD_add(&d, FS_SEV_ERROR, "r", a, (fs_loc){ 5, 5 }, "a5 second");
  fsD_add(&d, FS_SEV_ERROR, "r", b, (fs_loc){ 0, 1 }, "b0");
  fsD_add(&d, FS_SEV_ERROR, "r", a, (fs_loc){ 2, 9 }, "a2 second");
  fsD_sort(&d);
  const char *want[] = { "a2", "a2 second", "a5", "a5 second", "b0", "b1" };
  assert_int_equal(d.n, 6);
  for (size_t i = 0; i < 6; i++) assert_string_equal(d.items[i].message, want[i]);
  assert_int_equal(d.nerrors, 5);
  assert_int_equal(d.nwarnings, 1);
  fsD_free(&d);
  fsA_source_free(a);
  fsA_source_free(b);
}

static char *fixed(const fs_source *src, const fs_diags *d) {
  size_t n;
  char *out = fsD_apply_fixes(src, d, &n);
  assert_int_equal(n, strlen(out));
  return out;
}

static void test_apply_fixes(void **st) {
  (void)st;
  fs_source *src = src_of("abcdefghij");
  fs_source *other = src_of("abcdefghij");
  fs_diags d;
  fsD_init(&d);
  fs_diag *g = fsD_add(&d, FS_SEV_ERROR, "r", src, (fs_loc){ 0, 0 }, "m");
  fsD_edit(g, (fs_loc){ 6, 8 }, "GH");     /* replace "gh" */
  fsD_edit(g, (fs_loc){ 2, 2 }, "<");      /* insert before "c" */
  g = fsD_add(&d, FS_SEV_ERROR, "r", src, (fs_loc){ 0, 0 }, "m");
  fsD_edit(g, (fs_loc){ 7, 9 }, "X");      /* overlaps "gh": skipped */
  fsD_edit(g, (fs_loc){ 2, 2 }, ">");      /* same insertion point: skipped */
  fsD_edit(g, (fs_loc){ 2, 4 }, "");       /* delete "cd": after the insertion */
  fsD_edit(g, (fs_loc){ 8, 12 }, "?");     /* out of range: skipped */
  fsD_edit(g, (fs_loc){ 5, 4 }, "?");      /* reversed: skipped */
  fsD_edit(g, (fs_loc){ 10, 10 }, "!");    /* append */
  fsD_edit(g, (fs_loc){ 8, 8 }, "|");      /* at the end of "gh": allowed */
  fsD_edit(g, (fs_loc){ 7, 7 }, "?");      /* inside "gh": skipped */
  g = fsD_add(&d, FS_SEV_ERROR, "r", other, (fs_loc){ 0, 0 }, "m");
  fsD_edit(g, (fs_loc){ 0, 10 }, "other"); /* another source: not applied */
  char *out = fixed(src, &d);
  assert_string_equal(out, "ab<efGH|ij!");
  free(out);
  out = fixed(other, &d);
  assert_string_equal(out, "other");
  free(out);
  fsD_free(&d);
  out = fixed(src, &d);
  assert_string_equal(out, "abcdefghij");
  free(out);
  fsA_source_free(src);
  fsA_source_free(other);
}

static char *diff_of(const char *a, const char *b) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  fsD_print_unified_diff(f, "x.fab", a, strlen(a), b, strlen(b));
  fclose(f);
  return buf;
}

static void expect_diff(const char *a, const char *b, const char *want) {
  char *got = diff_of(a, b);
  assert_string_equal(got, want);
  free(got);
}

static void test_diff_shapes(void **st) {
  (void)st;
  expect_diff("a\nb\n", "a\nb\n", "");
  expect_diff("", "", "");
  expect_diff("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
              "--- a/x.fab\n+++ b/x.fab\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
  /* six unchanged lines between changes: one hunk; seven: two */
  expect_diff("a\n1\n2\n3\n4\n5\n6\nb\n", "A\n1\n2\n3\n4\n5\n6\nB\n",
              "--- a/x.fab\n+++ b/x.fab\n@@ -1,8 +1,8 @@\n-a\n+A\n 1\n 2\n 3\n 4\n 5\n 6\n-b\n+B\n");
  expect_diff("a\n1\n2\n3\n4\n5\n6\n7\nb\n", "A\n1\n2\n3\n4\n5\n6\n7\nB\n",
              "--- a/x.fab\n+++ b/x.fab\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n"
              "@@ -6,4 +6,4 @@\n 5\n 6\n 7\n-b\n+B\n");
  expect_diff("", "x\ny\n", "--- a/x.fab\n+++ b/x.fab\n@@ -0,0 +1,2 @@\n+x\n+y\n");
  expect_diff("x\n", "", "--- a/x.fab\n+++ b/x.fab\n@@ -1 +0,0 @@\n-x\n");
  expect_diff("a\nb", "a\nb\n", "--- a/x.fab\n+++ b/x.fab\n@@ -1,2 +1,2 @@\n a\n-b\n"
              "\\ No newline at end of file\n+b\n");
  expect_diff("a\nc\n", "a\nb\nc\n", "--- a/x.fab\n+++ b/x.fab\n@@ -1,2 +1,3 @@\n a\n+b\n c\n");
}

/* Applies a unified diff (as printed above) to a; returns the result. */
static char *patch(const char *a, const char *diff) {
  const char *lines[64];
  size_t n = 0, out = 0;
  for (const char *p = a; *p; p = strchr(p, '\n') + 1) lines[n++] = p;
  char *res = calloc(1, strlen(a) + strlen(diff) + 1);
  const char *d = strstr(diff, "@@");
  size_t i = 0;
  while (d && *d) {
    size_t os = 0;
    assert_int_equal(sscanf(d, "@@ -%zu", &os), 1);
    size_t start = os ? os - 1 : 0;
    if (strstr(d, ",0 +") && strstr(d, ",0 +") < strchr(d, '\n')) start = os;
    while (i < start) {                         /* lines between hunks */
      size_t l = strchr(lines[i], '\n') - lines[i] + 1;
      memcpy(res + out, lines[i++], l);
      out += l;
    }
    d = strchr(d, '\n') + 1;
    while (*d && *d != '@') {
      size_t l = strchr(d, '\n') - d + 1;
      if (*d == ' ' || *d == '+') memcpy(res + out, d + 1, l - 1), out += l - 1;
      if (*d == ' ' || *d == '-') {
        assert_memory_equal(lines[i], d + 1, l - 1);
        i++;
      }
      d += l;
    }
  }
  for (; i < n; i++) {
    size_t l = strchr(lines[i], '\n') - lines[i] + 1;
    memcpy(res + out, lines[i], l);
    out += l;
  }
  return res;
}

/* Length of a longest common subsequence of lines, by dynamic programming. */
static size_t lcs(const char *const *a, size_t n, const char *const *b, size_t m) {
  size_t t[33][33] = { { 0 } };
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      t[i][j] = strcmp(a[i], b[j]) == 0 ? t[i + 1][j + 1] + 1
                : t[i + 1][j] > t[i][j + 1] ? t[i + 1][j] : t[i][j + 1];
  return t[0][0];
}

/* Random texts over a small alphabet: the diff must turn a into b and be
 * minimal (as many changed lines as the LCS allows). */
static void test_diff_random(void **st) {
  (void)st;
  static const char *const alpha[] = { "a\n", "b\n", "c\n", "d\n" };
  uint64_t seed = 42;
  for (int round = 0; round < 2000; round++) {
    const char *la[32], *lb[32];
    size_t n, m;
    char a[128] = "", b[128] = "";
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    n = (seed >> 33) % 20;
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    m = (seed >> 33) % 20;
    for (size_t i = 0; i < n + m; i++) {
      seed = seed * 6364136223846793005u + 1442695040888963407u;
      const char *l = alpha[(seed >> 33) % (round % 3 + 2)];
      if (i < n) la[i] = l, strcat(a, l);
      else lb[i - n] = l, strcat(b, l);
    }
    char *d = diff_of(a, b);
    char *res = patch(a, d);
    assert_string_equal(res, b);
    size_t changed = 0;
    for (const char *p = d; (p = strchr(p, '\n')) != NULL && p[1];)
      if (*++p == '-' || *p == '+') changed += p[1] != '-' && p[1] != '+';
    assert_int_equal(changed, n + m - 2 * lcs(la, n, lb, m));
    free(res);
    free(d);
  }
}

/* Whether s is valid UTF-8 with no control character but newline. */
static int clean_text(const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = fsA_utf8_decode((const unsigned char *)s + i, n - i, &cp);
    if ((cp == 0xFFFD && k == 1) || (cp < 0x20 && cp != '\n' && cp != '\t') || (cp >= 0x7F && cp < 0xA0))
      return 0;
    i += k;
  }
  return 1;
}

/* Random bytes as source, message, help and note, at random spans: the text
 * rendering stays printable UTF-8, the JSON parses, nothing crashes. */
static void test_render_random(void **st) {
  (void)st;
  uint64_t seed = 7;
  for (int round = 0; round < 500; round++) {
    char text[64], msg[16];
    size_t n = 0;
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    size_t len = (seed >> 33) % sizeof text;
    for (; n < len; n++) {
      seed = seed * 6364136223846793005u + 1442695040888963407u;
      uint8_t b = (uint8_t)(seed >> 40);
      text[n] = (char)(b % 5 == 0 ? '\n' : b % 7 == 0 ? '\t' : b == 0 ? 1 : b);
    }
    for (size_t i = 0; i + 1 < sizeof msg; i++) msg[i] = (char)(text[i % (len + 1)] | 1);
    msg[sizeof msg - 1] = '\0';
    fs_source *src = fsA_source_from_buffer("r\33.fab", text, n);
    fs_diags d;
    fsD_init(&d);
    uint32_t a = (uint32_t)(seed >> 20) % (n + 3), b = (uint32_t)(seed >> 10) % (n + 3);
    fs_diag *g = fsD_add(&d, (fs_severity)(round % 3), msg, src, (fs_loc){ a, b }, "%s", msg);
    fsD_note(g, src, (fs_loc){ b, a }, "%s", msg);
    fsD_help(g, "%s", msg);
    fsD_edit(g, (fs_loc){ a, b }, msg);
    char *t = render(&d, FS_DIAG_TEXT, 0);
    assert_true(clean_text(t));
    free(t);
    char *j = render(&d, FS_DIAG_JSON, 0);
    json_t *o = json_loads(j, 0, NULL);
    assert_non_null(o);
    assert_true(json_is_integer(json_object_get(o, "line")));
    json_decref(o);
    free(j);
    size_t flen;
    free(fsD_apply_fixes(src, &d, &flen));
    fsD_free(&d);
    fsA_source_free(src);
  }
}

/* The fix-it under the message: the lines the edits touch, before and after. */
static void test_fixit_text(void **st) {
  (void)st;
  fs_source *src = src_of("a = 1\nfabric.lanch()\nb = 2\n");
  fs_diags d;
  fsD_init(&d);
  fs_diag *g = fsD_add(&d, FS_SEV_ERROR, "attr", src, span(src, "lanch"), "no attribute 'lanch'");
  fsD_help(g, "did you mean `launch`?");
  fsD_edit(g, span(src, "lanch"), "launch");
  expect_text(&d, "t.fab:2:8: error[attr]: no attribute 'lanch'\n"
                  "    2 | fabric.lanch()\n"
                  "      |        ^~~~~\n"
                  "help: did you mean `launch`?\n"
                  "fix-it: `fabricscript fix` makes this change\n"
                  "-   2 | fabric.lanch()\n"
                  "+   2 | fabric.launch()\n");
  fsD_free(&d);
  /* an edit that removes a whole line and one that adds two */
  g = fsD_add(&d, FS_SEV_ERROR, "R36", src, span(src, "b = 2"), "m");
  fsD_edit(g, span(src, "a = 1\n"), "");
  fsD_edit(g, span(src, "b = 2"), "x = 1\ny = 2");
  expect_text(&d, "t.fab:3:1: error[R36]: m\n"
                  "    3 | b = 2\n"
                  "      | ^~~~~\n"
                  "fix-it: `fabricscript fix` makes this change\n"
                  "-   1 | a = 1\n"
                  "-   2 | fabric.lanch()\n"
                  "-   3 | b = 2\n"
                  "+   1 | fabric.lanch()\n"
                  "+   2 | x = 1\n"
                  "+   3 | y = 2\n");
  fsD_free(&d);
  fsA_source_free(src);
}

static char *render_totals(const fs_diag_totals *t, fs_diag_format format) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  fs_render_opts o = { format, 0, NULL };
  fsD_render_totals(f, t, &o);
  fclose(f);
  return buf;
}

static void test_totals(void **st) {
  (void)st;
  fs_source *src = src_of("x\n");
  fs_diags d;
  fsD_init(&d);
  fsD_add(&d, FS_SEV_ERROR, "a", src, (fs_loc){0, 1}, "one");
  fs_diag *g = fsD_add(&d, FS_SEV_ERROR, "b", src, (fs_loc){0, 1}, "two");
  fsD_edit(g, (fs_loc){0, 1}, "y");
  fsD_edit(g, (fs_loc){1, 1}, "z"); /* two edits, one fix */
  fsD_add(&d, FS_SEV_WARNING, "c", src, (fs_loc){0, 1}, "three");
  fsD_add(&d, FS_SEV_NOTE, "d", src, (fs_loc){0, 1}, "not counted");
  fs_diag_totals t = {0};
  fsD_count(&d, &t);
  char *s = render_totals(&t, FS_DIAG_TEXT);
  assert_string_equal(s, "2 errors, 1 warning; fabricscript fix can apply 1 fix\n");
  free(s);
  s = render_totals(&t, FS_DIAG_JSON); /* a machine's channel has no prose */
  assert_string_equal(s, "");
  free(s);
  t = (fs_diag_totals){0, 2, 0};
  s = render_totals(&t, FS_DIAG_TEXT);
  assert_string_equal(s, "2 warnings\n");
  free(s);
  t = (fs_diag_totals){0, 0, 0};
  s = render_totals(&t, FS_DIAG_TEXT);
  assert_string_equal(s, "");
  free(s);
  fsD_free(&d);
  fsA_source_free(src);
}

/* Columns in UTF-16 code units: a code point above U+FFFF counts two. */
static void test_utf16_columns(void **st) {
  (void)st;
  fs_source *src = src_of("s = \"\xf0\x9f\x98\x80\xc3\xa9\" + x\n");
  uint32_t line, col;
  fs_loc x = span(src, "x");
  fsD_position(src, x.start, &line, &col);
  assert_int_equal(col, 12);
  assert_int_equal(fsD_column_utf16(src, x.start), 13);
  fs_diags d;
  fsD_init(&d);
  fsD_add(&d, FS_SEV_ERROR, "name", src, x, "m");
  char *j = render(&d, FS_DIAG_JSON, 0);
  json_t *o = json_loads(j, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(o, "column")), 12);
  assert_int_equal(json_integer_value(json_object_get(o, "column_utf16")), 13);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "end"), "column_utf16")), 14);
  assert_int_equal(json_integer_value(json_object_get(o, "version")), FS_DIAG_JSON_VERSION);
  assert_null(json_object_get(o, "rank"));
  json_decref(o);
  free(j);
  fsD_set_rank(3); /* a rank of a multi-rank run says which */
  j = render(&d, FS_DIAG_JSON, 0);
  fsD_set_rank(-1);
  o = json_loads(j, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(o, "rank")), 3);
  json_decref(o);
  free(j);
  fsD_free(&d);
  fsA_source_free(src);
}

static void test_closest(void **st) {
  (void)st;
  const char *strategies[] = {"ddp", "ddp_spawn", "fsdp", "deepspeed", "xla_fsdp"};
  assert_string_equal(fsD_closest("fdsp", strategies, 5), "fsdp"); /* a swap is one edit */
  assert_string_equal(fsD_closest("FSDP", strategies, 5), "fsdp"); /* case folded */
  assert_string_equal(fsD_closest("deepspede", strategies, 5), "deepspeed");
  assert_null(fsD_closest("megatron", strategies, 5));
  assert_null(fsD_closest("ddp", strategies, 5)); /* the word itself is no suggestion */
  const char *members[] = {"launch", "setup", "backward", NULL, "optimizer"};
  assert_string_equal(fsD_closest("lanch", members, 5), "launch");
  assert_string_equal(fsD_closest("optimzer", members, 5), "optimizer");
  assert_null(fsD_closest("x", members, 5));
  const char *opts[] = {"--devices", "--strategy", "--precision"};
  assert_string_equal(fsD_closest("--devcies", opts, 3), "--devices");
  const char *cmds[] = {"check", "plan", "fix", "test", "explain"};
  assert_string_equal(fsD_closest("chek", cmds, 5), "check");
  assert_null(fsD_closest("train", cmds, 5));
}

static const char *describe(const char *rule) { return !strcmp(rule, "R36") ? "in words" : NULL; }

/* SARIF 2.1.0: the properties the specification requires, rules with ids
 * and help, fixes as replacements, positions in UTF-16 code units. */
static void test_sarif(void **st) {
  (void)st;
  fs_source *src = fsA_source_from_buffer("dir/my train.fab", "a = \xf0\x9f\x98\x80 + bb\n", 15);
  fs_diags d;
  fsD_init(&d);
  fs_diag *g = fsD_add(&d, FS_SEV_ERROR, "R36", src, span(src, "bb"), "msg");
  fsD_help(g, "help text");
  fsD_note(g, src, span(src, "a"), "a note");
  fsD_edit(g, span(src, "bb"), "cc");
  fsD_add(&d, FS_SEV_WARNING, "W9", src, span(src, "a"), "warn");
  fsD_add(&d, FS_SEV_ERROR, "R36", src, span(src, "a"), "again");
  fsD_add(&d, FS_SEV_ERROR, "io", NULL, (fs_loc){0, 0}, "no location");
  fs_sarif *sarif = fsD_sarif_new("9.9", describe);
  fs_render_opts o = { FS_DIAG_SARIF, 0, sarif };
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fsD_render_all(f, &d, &o); /* collects, writes nothing */
  fclose(f);
  assert_int_equal(len, 0);
  free(buf);
  f = open_memstream(&buf, &len);
  fsD_sarif_write(f, sarif);
  fclose(f);
  json_t *log = json_loads(buf, 0, NULL);
  assert_non_null(log);
  assert_string_equal(json_string_value(json_object_get(log, "version")), "2.1.0");
  assert_non_null(json_string_value(json_object_get(log, "$schema")));
  json_t *run = json_array_get(json_object_get(log, "runs"), 0);
  json_t *driver = json_object_get(json_object_get(run, "tool"), "driver");
  assert_string_equal(json_string_value(json_object_get(driver, "name")), "fabricscript");
  assert_string_equal(json_string_value(json_object_get(run, "columnKind")), "utf16CodeUnits");
  json_t *rules = json_object_get(driver, "rules");
  assert_int_equal(json_array_size(rules), 3); /* R36 once, W9, io */
  json_t *r36 = json_array_get(rules, 0);
  assert_string_equal(json_string_value(json_object_get(r36, "id")), "R36");
  assert_string_equal(json_string_value(json_object_get(json_object_get(r36, "shortDescription"), "text")), "in words");
  assert_string_equal(json_string_value(json_object_get(json_object_get(r36, "help"), "text")), "help text");
  json_t *results = json_object_get(run, "results");
  assert_int_equal(json_array_size(results), 4);
  json_t *r = json_array_get(results, 0);
  assert_string_equal(json_string_value(json_object_get(r, "ruleId")), "R36");
  assert_int_equal(json_integer_value(json_object_get(r, "ruleIndex")), 0);
  assert_string_equal(json_string_value(json_object_get(r, "level")), "error");
  assert_string_equal(json_string_value(json_object_get(json_object_get(r, "message"), "text")), "msg");
  json_t *pl = json_object_get(json_array_get(json_object_get(r, "locations"), 0), "physicalLocation");
  assert_string_equal(json_string_value(json_object_get(json_object_get(pl, "artifactLocation"), "uri")),
                      "dir/my%20train.fab");
  json_t *region = json_object_get(pl, "region");
  assert_int_equal(json_integer_value(json_object_get(region, "startLine")), 1);
  assert_int_equal(json_integer_value(json_object_get(region, "startColumn")), 10); /* the emoji is 2 */
  assert_int_equal(json_integer_value(json_object_get(region, "endColumn")), 12);
  assert_int_equal(json_array_size(json_object_get(r, "relatedLocations")), 1);
  json_t *rep = json_array_get(json_object_get(json_array_get(json_object_get(json_array_get(
      json_object_get(r, "fixes"), 0), "artifactChanges"), 0), "replacements"), 0);
  assert_string_equal(json_string_value(json_object_get(json_object_get(rep, "insertedContent"), "text")), "cc");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(rep, "deletedRegion"), "startColumn")), 10);
  assert_string_equal(json_string_value(json_object_get(json_array_get(results, 1), "level")), "warning");
  assert_int_equal(json_integer_value(json_object_get(json_array_get(results, 2), "ruleIndex")), 0);
  assert_int_equal(json_array_size(json_object_get(json_array_get(results, 3), "locations")), 0);
  json_decref(log);
  free(buf);
  fsD_sarif_free(sarif);
  fsD_free(&d);
  fsA_source_free(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_spec_example), cmocka_unit_test(test_color),
    cmocka_unit_test(test_fixit_text),   cmocka_unit_test(test_totals),
    cmocka_unit_test(test_utf16_columns), cmocka_unit_test(test_closest),
    cmocka_unit_test(test_sarif),
    cmocka_unit_test(test_no_location),  cmocka_unit_test(test_gutter),
    cmocka_unit_test(test_tabs),         cmocka_unit_test(test_utf8_columns),
    cmocka_unit_test(test_invalid_bytes), cmocka_unit_test(test_span_shapes),
    cmocka_unit_test(test_json),         cmocka_unit_test(test_sort),
    cmocka_unit_test(test_apply_fixes),  cmocka_unit_test(test_diff_shapes),
    cmocka_unit_test(test_diff_random),  cmocka_unit_test(test_render_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
