/* test_query.c -- fsC_query, the checker's answer to "what is this
 * expression" (interp/check/query.c), which the language server's hover
 * and completion show: the state a name has at the point asked (meta
 * parameters, set up, launched), its type for members, the builtin row or
 * torch namespace it is, and nothing for a span the check never evaluates.
 * The same question must not change the diagnostics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "check.h"
#include "lex.h"

/* Checks text (as a file named path) asking about the nth occurrence
 * (0-based) of word; returns the number of diagnostics. */
static size_t ask(const char *path, const char *text, const char *word, int nth, fsC_query *q) {
  const char *at = text;
  for (int i = 0; at && i <= nth; i++) at = strstr(i ? at + 1 : at, word);
  assert_non_null(at);
  memset(q, 0, sizeof *q);
  q->span = (fs_loc){(uint32_t)(at - text), (uint32_t)(at - text + strlen(word))};
  fs_source *src = fsA_source_from_buffer(path, text, strlen(text));
  fs_diags d;
  fsD_init(&d);
  int nerr = 0;
  fs_node *ast = fsP_parse(src, &d, &nerr);
  assert_int_equal(nerr, 0);
  fsC_options o;
  fsC_options_init(&o);
  o.machine.cuda_gpus = 2;
  o.query = q;
  fsC_check(src, ast, &o, &d);
  size_t n = d.n;
  fsA_free(ast);
  fsD_free(&d);
  fsA_source_free(src);
  return n;
}

static const char seed[] =
  "fabric = Fabric(strategy=\"fsdp\", accelerator=\"cuda\", devices=1)\n"
  "fabric.launch()\n"
  "with fabric.init_module(empty_init=True):\n"
  "    model = Linear(8, 8)\n"
  "optimizer = Adam(model.parameters())\n"
  "model, optimizer = fabric.setup(model, optimizer)\n";

static void model_on_meta(void **state) {
  (void)state;
  fsC_query q;
  ask("t.fab", seed, "model", 0, &q); /* the assignment under init_module */
  assert_true(q.found);
  assert_string_equal(q.type, "Module");
  assert_string_equal(q.about, "Linear \xe2\x80\x94 parameters on the meta device (built under "
                               "`fabric.init_module(empty_init=True)` with strategy fsdp)");
}

static void state_where_asked(void **state) {
  (void)state;
  fsC_query q;
  ask("t.fab", seed, "fabric", 0, &q); /* before launch() */
  assert_string_equal(q.type, "Fabric");
  assert_non_null(strstr(q.about, "strategy fsdp, accelerator cuda, 1 device"));
  assert_non_null(strstr(q.about, "not launched"));
  ask("t.fab", seed, "fabric", 2, &q); /* at init_module, after launch() */
  assert_non_null(strstr(q.about, "; launched"));
  ask("t.fab", seed, "optimizer", 0, &q);
  assert_string_equal(q.type, "Optimizer");
  assert_non_null(strstr(q.about, "references parameters on the meta device"));
}

static void builtins_and_namespaces(void **state) {
  (void)state;
  fsC_query q;
  ask("t.fab", seed, "Adam", 0, &q);
  assert_string_equal(q.builtin, "Adam");
  const char *py = "import torch.nn as nn\nlayer = nn.Linear(2, 2)\n";
  ask("t.py", py, "nn", 2, &q); /* `nn.Linear`: the alias stands for torch.nn */
  assert_string_equal(q.ns, "torch.nn");
  assert_string_equal(q.builtin, "");
}

static void unreached_and_harmless(void **state) {
  (void)state;
  fsC_query q;
  const char *dead = "def f():\n    return 1\n    x = 2\n";
  ask("t.fab", dead, "x", 0, &q); /* after a return: never evaluated */
  assert_false(q.found);
  /* asking changes nothing the check reports */
  fsC_query q2;
  size_t with_query = ask("t.fab", seed, "model", 1, &q2);
  fs_source *src = fsA_source_from_buffer("t.fab", seed, strlen(seed));
  fs_diags d;
  fsD_init(&d);
  int nerr = 0;
  fs_node *ast = fsP_parse(src, &d, &nerr);
  fsC_options o;
  fsC_options_init(&o);
  o.machine.cuda_gpus = 2;
  fsC_check(src, ast, &o, &d);
  assert_int_equal(d.n, with_query);
  assert_true(d.n > 0);
  fsA_free(ast);
  fsD_free(&d);
  fsA_source_free(src);
}

/* A description cut at the buffer's end stays valid UTF-8 (an editor's
 * JSON cannot carry half a character). */
static void cut_whole_characters(void **state) {
  (void)state;
  for (int shift = 0; shift < 4; shift++) { /* ASCII before: the cut falls at each byte of a sequence */
    char text[2048] = "s = \"";
    for (int i = 0; i < shift; i++) strcat(text, "x");
    for (int i = 0; i < 300; i++) strcat(text, i % 3 ? "\xc3\xa9" : "\xe2\x82\xac"); /* é and € */
    strcat(text, "\"\n");
    fsC_query q;
    ask("t.fab", text, "s", 0, &q);
    assert_true(q.found);
    size_t n = strlen(q.about);
    assert_true(n > sizeof q.about - 5);
    for (size_t i = 0; i < n;) {
      uint32_t cp;
      i += fsA_utf8_decode((const unsigned char *)q.about + i, n - i, &cp);
      assert_int_not_equal(cp, 0xFFFD);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(model_on_meta),
    cmocka_unit_test(state_where_asked),
    cmocka_unit_test(builtins_and_namespaces),
    cmocka_unit_test(unreached_and_harmless),
    cmocka_unit_test(cut_whole_characters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
