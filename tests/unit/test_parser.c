/* test_parser.c -- the scanner and parser: tree shapes, locations, the
 * contextual keywords, f-strings, and errors with their positions. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "ast.h"
#include "diag.h"
#include "lex.h"

typedef struct parsed {
  fs_source *src;
  fs_node *ast;
  fs_diags diags;
  int nerrors;
} parsed;

static parsed parse(const char *text) {
  parsed p;
  p.src = fsA_source_from_buffer("t.fab", text, strlen(text));
  fsD_init(&p.diags);
  p.ast = fsP_parse(p.src, &p.diags, &p.nerrors);
  return p;
}

static void done(parsed *p) {
  fsA_free(p->ast);
  fsD_free(&p->diags);
  fsA_source_free(p->src);
}

/* The (line, column) where diagnostic i starts. */
static void where(const parsed *p, size_t i, uint32_t *line, uint32_t *col) {
  assert_true(i < p->diags.n);
  fsA_source_position(p->src, p->diags.items[i].loc.start, line, col);
}

static void test_assignment_and_call(void **state) {
  (void)state;
  parsed p = parse("x = f(1, b=2.5)\n");
  assert_int_equal(p.nerrors, 0);
  assert_int_equal(p.ast->kind, FS_N_BLOCK);
  assert_int_equal(p.ast->nkids, 1);
  fs_node *a = p.ast->kids[0];
  assert_int_equal(a->kind, FS_N_ASSIGN);
  assert_string_equal(a->kids[0]->str, "x");
  fs_node *call = a->kids[1];
  assert_int_equal(call->kind, FS_N_CALL);
  assert_int_equal(call->nkids, 3);
  assert_string_equal(call->kids[0]->str, "f");
  assert_int_equal(call->kids[1]->ival, 1);
  assert_int_equal(call->kids[2]->kind, FS_N_KWARG);
  assert_string_equal(call->kids[2]->str, "b");
  assert_true(call->kids[2]->kids[0]->fval == 2.5);
  assert_int_equal(call->loc.start, 4);
  assert_int_equal(call->loc.end, 15);
  done(&p);
}

static void test_seed_setup_call_location(void **state) {
  (void)state;
  parsed p = parse("model, optimizer = fabric.setup(model, optimizer)\n");
  assert_int_equal(p.nerrors, 0);
  fs_node *a = p.ast->kids[0];
  assert_int_equal(a->kids[0]->kind, FS_N_TUPLE);
  assert_int_equal(a->kids[0]->nkids, 2);
  uint32_t line, col;
  fsA_source_position(p.src, a->kids[1]->loc.start, &line, &col);
  assert_int_equal(line, 1);
  assert_int_equal(col, 20); /* the spec's example column */
  done(&p);
}

static void test_precedence(void **state) {
  (void)state;
  parsed p = parse("x = -a ** 2 + b * c if not d or e else f\n");
  assert_int_equal(p.nerrors, 0);
  fs_node *cond = p.ast->kids[0]->kids[1];
  assert_int_equal(cond->kind, FS_N_COND);
  fs_node *test = cond->kids[0];
  assert_int_equal(test->op, FS_OP_OR);
  assert_int_equal(test->kids[0]->op, FS_OP_NOT);
  fs_node *sum = cond->kids[1];
  assert_int_equal(sum->op, FS_OP_ADD);
  assert_int_equal(sum->kids[0]->op, FS_OP_NEG);           /* -(a ** 2) */
  assert_int_equal(sum->kids[0]->kids[0]->op, FS_OP_POW);
  assert_int_equal(sum->kids[1]->op, FS_OP_MUL);
  done(&p);
}

static void test_blocks_and_elif(void **state) {
  (void)state;
  parsed p = parse("if a:\n    x = 1\nelif b:\n    x = 2\nelse:\n    x = 3\nfor i, j in z:\n    pass\n");
  assert_int_equal(p.nerrors, 0);
  assert_int_equal(p.ast->nkids, 2);
  fs_node *i = p.ast->kids[0];
  assert_int_equal(i->kind, FS_N_IF);
  assert_int_equal(i->kids[2]->kind, FS_N_BLOCK);
  assert_int_equal(i->kids[2]->kids[0]->kind, FS_N_IF);
  assert_non_null(i->kids[2]->kids[0]->kids[2]);
  fs_node *f = p.ast->kids[1];
  assert_int_equal(f->kind, FS_N_FOR);
  assert_int_equal(f->kids[0]->kind, FS_N_TUPLE);
  done(&p);
}

static void test_model_declaration(void **state) {
  (void)state;
  parsed p = parse("model GPT(vocab=256, layers=4):\n"
                   "    wte = Embedding(vocab, 8)\n"
                   "    h = repeat layers:\n"
                   "        Block(8, 2)\n"
                   "    residual:\n"
                   "        ReLU()\n"
                   "model Net:\n"
                   "    Flatten()\n");
  assert_int_equal(p.nerrors, 0);
  assert_int_equal(p.ast->nkids, 2);
  fs_node *m = p.ast->kids[0];
  assert_int_equal(m->kind, FS_N_MODEL);
  assert_string_equal(m->str, "GPT");
  assert_int_equal(m->kids[0]->nkids, 2);
  assert_string_equal(m->kids[0]->kids[1]->str, "layers");
  fs_node *body = m->kids[1];
  assert_int_equal(body->nkids, 3);
  assert_int_equal(body->kids[1]->kind, FS_N_REPEAT);
  assert_string_equal(body->kids[1]->str, "h");
  assert_int_equal(body->kids[2]->kind, FS_N_RESIDUAL);
  assert_null(body->kids[2]->str);
  assert_int_equal(p.ast->kids[1]->kids[0]->nkids, 0); /* `model Net:` has no parameters */
  done(&p);
}

static void test_contextual_names(void **state) {
  (void)state;
  parsed p = parse("model = fabric.setup_module(model)\nrepeat = 2\nresidual = repeat\nmodel.train()\n");
  assert_int_equal(p.nerrors, 0);
  assert_int_equal(p.ast->nkids, 4);
  for (int i = 0; i < 3; i++) assert_int_equal(p.ast->kids[i]->kind, FS_N_ASSIGN);
  assert_string_equal(p.ast->kids[0]->kids[0]->str, "model");
  assert_string_equal(p.ast->kids[2]->kids[1]->str, "repeat");
  done(&p);
}

static void test_fstring(void **state) {
  (void)state;
  parsed p = parse("s = f\"loss {loss:.4f} at {d['k']} {{x}}\"\n");
  assert_int_equal(p.nerrors, 0);
  fs_node *f = p.ast->kids[0]->kids[1];
  assert_int_equal(f->kind, FS_N_FSTR);
  assert_int_equal(f->nkids, 5);
  assert_string_equal(f->kids[0]->str, "loss ");
  assert_int_equal(f->kids[1]->kind, FS_N_FMT);
  assert_string_equal(f->kids[1]->str, ".4f");
  assert_string_equal(f->kids[1]->kids[0]->str, "loss");
  assert_int_equal(f->kids[3]->kids[0]->kind, FS_N_INDEX);
  assert_null(f->kids[3]->str);
  assert_string_equal(f->kids[4]->str, " {x}");
  /* The field's expression keeps its position in the file. */
  uint32_t line, col;
  fsA_source_position(p.src, f->kids[1]->kids[0]->loc.start, &line, &col);
  assert_int_equal(col, 13);
  done(&p);
}

static void test_literals(void **state) {
  (void)state;
  parsed p = parse("x = [50_304, .5, 1e-3, 'a\\tb' \"c\", (1,), (), {}, {1: 2}, None, True]\n");
  assert_int_equal(p.nerrors, 0);
  fs_node *l = p.ast->kids[0]->kids[1];
  assert_int_equal(l->kind, FS_N_LIST);
  assert_int_equal(l->nkids, 10);
  assert_int_equal(l->kids[0]->ival, 50304);
  assert_true(l->kids[1]->fval == 0.5);
  assert_true(l->kids[2]->fval == 1e-3);
  assert_string_equal(l->kids[3]->str, "a\tbc");
  assert_int_equal(l->kids[4]->kind, FS_N_TUPLE);
  assert_int_equal(l->kids[4]->nkids, 1);
  assert_int_equal(l->kids[5]->nkids, 0);
  assert_int_equal(l->kids[7]->nkids, 2);
  done(&p);
}

static void test_several_errors_reported(void **state) {
  (void)state;
  /* The bracket never closed is the mistake, as CPython reports it (not
   * what the parser made of the lines it swallowed); the scanner's own
   * errors after it are reported too. */
  parsed p = parse("x = (1,\n  2\ny = 3\nz = $\nw = 'open\nv = 1 +\nok = 1\n");
  assert_int_equal(p.nerrors, 3);
  int saw_open = 0, saw_dollar = 0, saw_string = 0;
  for (size_t i = 0; i < p.diags.n; i++) {
    uint32_t line, col;
    where(&p, i, &line, &col);
    saw_open |= strcmp(p.diags.items[i].message, "'(' was never closed") == 0 && line == 1 && col == 5;
    saw_dollar |= strstr(p.diags.items[i].message, "invalid character '$'") != NULL;
    saw_string |= strstr(p.diags.items[i].message, "unterminated string literal") != NULL;
  }
  assert_true(saw_open);
  assert_true(saw_dollar);
  assert_true(saw_string);
  done(&p);
  /* brackets closed: each line's mistake once, recovery in between */
  p = parse("x = (1 +)\ny = 2\nz = [1, 2 3]\nw = 4\nv = 1 +\nok = 1\n");
  assert_int_equal(p.nerrors, 3);
  for (size_t i = 0; i < p.diags.n; i++) {
    uint32_t line, col;
    where(&p, i, &line, &col);
    assert_int_equal(line, 2 * i + 1);
  }
  done(&p);
}

static void test_indentation_errors(void **state) {
  (void)state;
  parsed p = parse("if a:\n\tx = 1\n\tif b:\n\t\ty = 2\n\tz = 3\n"); /* tabs indent, as in Python */
  assert_int_equal(p.nerrors, 0);
  done(&p);
  p = parse("if a:\n        x = 1\n\ty = 2\n"); /* equal at tab size 8, not at 1 */
  assert_int_equal(p.nerrors, 1);
  assert_string_equal(p.diags.items[0].message, "inconsistent use of tabs and spaces in indentation");
  done(&p);
  p = parse("if a:\n    x = 1\n  y = 2\n");
  assert_true(p.nerrors >= 1);
  assert_string_equal(p.diags.items[0].message, "unindent does not match any outer indentation level");
  uint32_t line, col;
  where(&p, 0, &line, &col);
  assert_int_equal(line, 3);
  assert_int_equal(col, 3);
  done(&p);
}

static void test_hostile_bytes(void **state) {
  (void)state;
  static const char nul[] = "x = 1\n\0y = 2\n";
  fs_source *src = fsA_source_from_buffer("t.fab", nul, sizeof nul - 1);
  fs_diags d;
  fsD_init(&d);
  int n = 0;
  fs_node *ast = fsP_parse(src, &d, &n);
  assert_true(n >= 1);
  assert_string_equal(d.items[0].message, "NUL byte in source");
  fsA_free(ast);
  fsD_free(&d);
  fsA_source_free(src);
  parsed p = parse("s = \"\xff\"\nt = \xe2\x82\xac\n"); /* U+20AC is no letter; U+00E9 would be */
  assert_int_equal(p.nerrors, 2);
  done(&p);
}

static void test_nesting_is_bounded(void **state) {
  (void)state;
  size_t n = 3 * 100000 + 16;
  char *text = malloc(n);
  assert_non_null(text);
  strcpy(text, "x = 1");
  size_t len = strlen(text);
  for (int i = 0; i < 100000; i++) { memcpy(text + len, "+1", 2); len += 2; }
  text[len++] = '\n';
  text[len] = '\0';
  parsed p = parse(text);
  assert_int_equal(p.nerrors, 1);
  assert_non_null(strstr(p.diags.items[0].message, "nested too deeply"));
  done(&p);
  memset(text, '-', 50000);
  strcpy(text + 50000, "1\n");
  p = parse(text);
  assert_true(p.nerrors >= 1);
  done(&p);
  free(text);
}

/* A big file may be mapped, one that ends on a page boundary is read: both
 * give the text with its NUL, the line index and a clean parse. */
static void test_big_file_sources(void **state) {
  (void)state;
  static const size_t sizes[] = {200004, 262144}; /* 4096 divides the second */
  for (size_t k = 0; k < 2; k++) {
    size_t n = sizes[k];
    char *text = malloc(n + 1);
    assert_non_null(text);
    for (size_t i = 0; i < n; i += 4) memcpy(text + i, "a=1\n", 4);
    text[n] = '\0';
    char path[] = "/tmp/fs_test_big_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    fs_source *src = fsA_source_from_file(path, 1), *read = fsA_source_from_file(path, 0);
    unlink(path);
    assert_non_null(src);
    assert_non_null(read);
    assert_int_equal(read->mapped, 0); /* a run reads: the file may change under it */
    assert_int_equal(read->len, n);
    fsA_source_free(read);
    assert_int_equal(src->len, n);
    assert_int_equal(src->text[n], '\0');
    assert_memory_equal(src->text, text, n);
    assert_int_equal(fsA_source_nlines(src), n / 4 + 1);
    assert_int_equal(src->mapped, k == 0 ? n : 0);
    fs_diags d;
    fsD_init(&d);
    int nerr = -1;
    fs_node *ast = fsP_parse(src, &d, &nerr);
    assert_int_equal(nerr, 0);
    assert_int_equal(ast->nkids, n / 4);
    fsA_free(ast);
    fsD_free(&d);
    fsA_source_free(src);
    free(text);
  }
}

static void test_column_counts_code_points(void **state) {
  (void)state;
  parsed p = parse("s = \"\xc3\xa9\xc3\xa9\" + $\n");
  assert_int_equal(p.nerrors, 1);
  uint32_t line, col;
  where(&p, 0, &line, &col);
  assert_int_equal(col, 12); /* two 2-byte characters count as two columns */
  done(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_assignment_and_call),
    cmocka_unit_test(test_seed_setup_call_location),
    cmocka_unit_test(test_precedence),
    cmocka_unit_test(test_blocks_and_elif),
    cmocka_unit_test(test_model_declaration),
    cmocka_unit_test(test_contextual_names),
    cmocka_unit_test(test_fstring),
    cmocka_unit_test(test_literals),
    cmocka_unit_test(test_several_errors_reported),
    cmocka_unit_test(test_indentation_errors),
    cmocka_unit_test(test_hostile_bytes),
    cmocka_unit_test(test_nesting_is_bounded),
    cmocka_unit_test(test_column_counts_code_points),
    cmocka_unit_test(test_big_file_sources),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
