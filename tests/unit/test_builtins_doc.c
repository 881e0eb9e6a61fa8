/* test_builtins_doc.c -- every row of the builtin table has its one line of
 * documentation (interp/lang/sigdoc.c) and every line names a row, and
 * docs/builtins.md is exactly what the table renders to, so the page cannot
 * drift from the table. `test_builtins_doc --print` writes the page
 * (`make update-builtins-doc`). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "signatures.h"

/* The section a row belongs to: "math", "Tensor", ... for dotted names, else its kind's. */
static const char *section_of(const fsSig *s, char *buf, size_t n) {
  static const char *const kinds[] = {"Functions", "Classes", "Layers (valid in a `model` block)", "Modules"};
  const char *dot = strrchr(s->name, '.');
  if (!dot) return kinds[s->kind <= FSSIG_MODULE ? s->kind : 0];
  snprintf(buf, n, "`%.*s`", (int)(dot - s->name), s->name);
  return buf;
}

static void render(FILE *out) {
  size_t n;
  const fsSig *all = fsSig_all(&n);
  fputs("# Builtins\n\n"
        "Every function, class, layer, module, method and attribute the language\n"
        "provides, with its signature as Python shows it and one line of doc.\n"
        "Generated from the builtin table (`interp/lang/signatures.c`, the lines in\n"
        "`interp/lang/sigdoc.c`) by `make update-builtins-doc`; `make check` fails\n"
        "when this page is not what the table renders to. In a Python script the\n"
        "torch and Lightning names (`torch.zeros`, `nn.Linear`, `L.Fabric`) reach\n"
        "these rows (docs/python.md).\n", out);
  /* sections in the order they first appear in the table; rows in table order */
  const char **done = calloc(n, sizeof *done);
  char *names = calloc(n, 64);
  assert_non_null(done);
  assert_non_null(names);
  size_t ndone = 0;
  for (size_t i = 0; i < n; i++) {
    char buf[64];
    const char *sec = section_of(&all[i], buf, sizeof buf);
    int seen = 0;
    for (size_t k = 0; k < ndone; k++) seen |= strcmp(done[k], sec) == 0;
    if (seen) continue;
    snprintf(names + 64 * ndone, 64, "%s", sec);
    done[ndone] = names + 64 * ndone;
    ndone++;
    fprintf(out, "\n## %s\n\n", sec);
    for (size_t j = i; j < n; j++) {
      char b2[64];
      if (strcmp(section_of(&all[j], b2, sizeof b2), sec)) continue;
      fputs("- `", out);
      fsSig_format(&all[j], out);
      const char *doc = fsSig_doc(all[j].name);
      fprintf(out, "` — %s\n", doc ? doc : "(undocumented)");
    }
  }
  free(done);
  free(names);
}

static void test_every_row_documented(void **st) {
  (void)st;
  size_t n, missing = 0;
  const fsSig *all = fsSig_all(&n);
  for (size_t i = 0; i < n; i++)
    if (!fsSig_doc(all[i].name)) fprintf(stderr, "no line in sigdoc.c for '%s'\n", all[i].name), missing++;
  assert_int_equal(missing, 0);
}

static void test_every_doc_names_a_row(void **st) {
  (void)st;
  size_t n, stray = 0;
  const fsSig *all = fsSig_all(&n);
  const char *name;
  for (size_t i = 0; (name = fsSig_doc_name(i)); i++) {
    int found = 0;
    for (size_t k = 0; k < n && !found; k++) found = strcmp(all[k].name, name) == 0;
    if (!found) fprintf(stderr, "sigdoc.c documents '%s', which the table lacks\n", name), stray++;
    if (i > 0) assert_true(strcmp(fsSig_doc_name(i - 1), name) < 0); /* sorted, for bsearch */
  }
  assert_int_equal(stray, 0);
}

static void test_format(void **st) {
  (void)st;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fsSig_format(fsSig_find("range"), f);
  fputc('|', f);
  fsSig_format(fsSig_find("print"), f);
  fputc('|', f);
  fsSig_format(fsSig_member("Tensor", "shape"), f);
  fclose(f);
  assert_string_equal(buf, "range(start, stop=None, step=None, /) -> range|"
                           "print(*args, sep=' ', end='\\n', file=None, flush=False) -> None|Tensor.shape -> tuple");
  free(buf);
}

static void test_page_is_current(void **st) {
  (void)st;
  char *want = NULL, *got = NULL;
  size_t wlen = 0, glen = 0;
  FILE *f = open_memstream(&got, &glen);
  render(f);
  fclose(f);
  const char *srcdir = getenv("srcdir");
  char path[4096];
  snprintf(path, sizeof path, "%s/docs/builtins.md", srcdir ? srcdir : ".");
  FILE *in = fopen(path, "rb");
  if (in) {
    f = open_memstream(&want, &wlen);
    int c;
    while ((c = getc(in)) != EOF) putc(c, f);
    fclose(f);
    fclose(in);
  }
  if (!want || strcmp(want, got) != 0) {
    FILE *o = fopen("builtins.md.new", "w");
    if (o) fputs(got, o), fclose(o);
    fprintf(stderr, "%s is not what the builtin table renders to (see builtins.md.new in the build "
                    "directory); `make update-builtins-doc` regenerates it\n", path);
  }
  assert_non_null(want);
  assert_string_equal(want, got);
  free(want);
  free(got);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--print") == 0) {
    render(stdout);
    return fflush(stdout) != 0;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_every_row_documented), cmocka_unit_test(test_every_doc_names_a_row),
    cmocka_unit_test(test_format), cmocka_unit_test(test_page_is_current),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
