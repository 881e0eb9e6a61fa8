/* test_testrun.c -- `fabricscript test`: the annotation parser, the
 * comparison of a run against its annotations, the child runner, and the
 * whole command against a stand-in interpreter. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testrun.h"

static void parse_ok(const char *text, fsX_spec *spec) {
  assert_int_equal(fsX_parse_spec(text, strlen(text), spec), 0);
  assert_null(spec->error);
}

static void test_parse(void **st) {
  (void)st;
  fsX_spec s;
  parse_ok("# args: -D lr=0.1  --strategy 'ddp spawn' -D\"name=a b\"c\n"
           "x = \"# error: not a comment\"  # error:   unknown name  \n"
           "y = 'it''s' # warning: unused # error: still the warning text\n"
           "   # out: hello\n"
           "#out:  two spaces\r\n"
           "# out:\n"
           "z = 1  # a comment with error: in it\n"
           "# mode: check\n"
           "# args: -D x=1\n"
           "w = f\"{d['#']}\"  # error: at w\n",
           &s);
  assert_int_equal(s.nexpects, 3);
  assert_int_equal(s.expects[0].severity, FS_SEV_ERROR);
  assert_int_equal(s.expects[0].line, 2);
  assert_string_equal(s.expects[0].text, "unknown name");
  assert_int_equal(s.expects[1].severity, FS_SEV_WARNING);
  assert_int_equal(s.expects[1].line, 3);
  assert_string_equal(s.expects[1].text, "unused # error: still the warning text");
  assert_int_equal(s.expects[2].line, 10);
  assert_string_equal(s.expects[2].text, "at w");
  assert_int_equal(s.nout, 3);
  assert_string_equal(s.out[0], "hello");
  assert_string_equal(s.out[1], " two spaces");
  assert_string_equal(s.out[2], "");
  const char *args[] = { "-D", "lr=0.1", "--strategy", "ddp spawn", "-Dname=a bc", "-D", "x=1" };
  assert_int_equal(s.nargs, 7);
  for (size_t i = 0; i < 7; i++) assert_string_equal(s.args[i], args[i]);
  assert_int_equal(s.check_mode, 1);
  fsX_spec_free(&s);
  assert_int_equal(fsX_parse_spec("# mode: plan\n", 13, &s), 0);
  assert_int_equal(s.check_mode, 2); /* `fabricscript plan` */
  fsX_spec_free(&s);

  assert_false(s.exact_warnings);
  fsX_spec_free(&s);

  parse_ok("", &s);
  assert_int_equal(s.nexpects + s.nout + s.nargs, 0);
  assert_false(s.check_mode);
  fsX_spec_free(&s);

  parse_ok("# warnings: exact\n", &s);
  assert_true(s.exact_warnings);
  assert_false(s.check_mode);
  fsX_spec_free(&s);
  parse_ok("# warnings: exact\n#warnings:  allowed \n", &s);
  assert_false(s.exact_warnings);
  fsX_spec_free(&s);
}

static void parse_bad(const char *text, const char *why) {
  fsX_spec s;
  assert_int_equal(fsX_parse_spec(text, strlen(text), &s), -1);
  assert_non_null(s.error);
  assert_string_equal(s.error, why);
  fsX_spec_free(&s);
}

static void test_parse_errors(void **st) {
  (void)st;
  parse_bad("x = 1\n# args: -D 'a=1\n", "line 2: unterminated quote in `# args:`");
  parse_bad("print(1)  # out: 1\n",
            "line 1: `# out:`, `# args:`, `# mode:` and `# warnings:` must be whole-line comments");
  parse_bad("x = 1  # warnings: exact\n",
            "line 1: `# out:`, `# args:`, `# mode:` and `# warnings:` must be whole-line comments");
  parse_bad("# mode: fast\n", "line 1: `# mode:` is `check`, `plan` or `run`");
  parse_bad("# warnings: none\n", "line 1: `# warnings:` is `exact` or `allowed`");
  parse_bad("\n\nx  # error:  \n", "line 3: an error, warning, note or help annotation needs the text");
}

/* A run result with the given stdout, exit status and diagnostics. */
static fsX_result result(int status, const char *out, size_t n, const fsX_reported *diags) {
  fsX_result r;
  memset(&r, 0, sizeof r);
  r.status = status;
  r.out = strdup(out);
  r.out_len = strlen(out);
  r.err = strdup("");
  r.diags = calloc(n + 1, sizeof *r.diags);
  for (size_t i = 0; i < n; i++) {
    r.diags[i] = diags[i];
    r.diags[i].message = strdup(diags[i].message);
  }
  r.ndiags = n;
  return r;
}

/* Compares r against the annotations of script; NULL means pass. */
static void expect_verdict(const char *script, fsX_result r, const char *want) {
  fsX_spec s;
  parse_ok(script, &s);
  char *got = fsX_compare(&s, &r);
  if (want) {
    assert_non_null(got);
    assert_string_equal(got, want);
  } else {
    assert_null(got);
  }
  free(got);
  fsX_spec_free(&s);
  fsX_result_free(&r);
}

static const char *const errs_script =
    "a = b  # error: unknown name `b`\n"
    "m = Linear(1, 2)\n"
    "c = 1  # warning: unused\n";

static void test_compare(void **st) {
  (void)st;
  const fsX_reported both[] = {
    { FS_SEV_ERROR, 1, "unknown name `b`" }, { FS_SEV_WARNING, 3, "`c` is unused" },
    { FS_SEV_WARNING, 2, "another warning" }, { FS_SEV_NOTE, 2, "a note" } };
  expect_verdict(errs_script, result(1, "", 4, both), NULL);
  /* the wrong line */
  const fsX_reported moved[] = {
    { FS_SEV_ERROR, 2, "unknown name `b`" }, { FS_SEV_WARNING, 3, "unused" } };
  expect_verdict(errs_script, result(1, "", 2, moved),
                 "missing error at line 1: \"unknown name `b`\"; "
                 "unexpected error at line 2: \"unknown name `b`\"");
  /* the wrong text, and a warning that is not there */
  const fsX_reported wrong[] = { { FS_SEV_ERROR, 1, "unknown name `x`" } };
  expect_verdict(errs_script, result(1, "", 1, wrong),
                 "missing error at line 1: \"unknown name `b`\" (reported there: "
                 "\"unknown name `x`\"); missing warning at line 3: \"unused\"; "
                 "unexpected error at line 1: \"unknown name `x`\"");
  /* nothing reported, clean exit */
  expect_verdict(errs_script, result(0, "", 0, NULL),
                 "missing error at line 1: \"unknown name `b`\"; missing warning at line 3: "
                 "\"unused\"; exit status 0, expected 1");
  /* an error where none is expected, and one without a location */
  const fsX_reported extra[] = { { FS_SEV_ERROR, 4, "boom\n\"x\"" }, { FS_SEV_ERROR, 0, "io" } };
  expect_verdict("x = 1\n", result(1, "", 2, extra),
                 "unexpected error at line 4: \"boom\\n\\\"x\\\"\"; unexpected error: \"io\"; "
                 "exit status 1, expected 0");
  /* a warning expected as an error does not match */
  const fsX_reported warn[] = { { FS_SEV_WARNING, 1, "unused" } };
  expect_verdict("x = 1  # error: unused\n", result(1, "", 1, warn),
                 "missing error at line 1: \"unused\"");
  /* `# warnings: exact`: an unannotated warning fails too, notes never do */
  const fsX_reported wn[] = { { FS_SEV_WARNING, 2, "unused" }, { FS_SEV_NOTE, 2, "a note" } };
  expect_verdict("# warnings: exact\nx = 1  # warning: unused\n", result(0, "", 2, wn), NULL);
  expect_verdict("# warnings: exact\nx = 1\n", result(0, "", 2, wn),
                 "unexpected warning at line 2: \"unused\"");
  expect_verdict("x = 1\n", result(0, "", 2, wn), NULL);
}

static void test_compare_stdout(void **st) {
  (void)st;
  const char *script = "print(1)\n# out: one\n# out: two\n";
  expect_verdict(script, result(0, "one\ntwo\n", 0, NULL), NULL);
  expect_verdict(script, result(0, "one\ntwo", 0, NULL), NULL);
  expect_verdict(script, result(0, "one\nTwo\n", 0, NULL),
                 "stdout line 2: expected \"two\", got \"Two\"");
  expect_verdict(script, result(0, "one\n", 0, NULL),
                 "stdout line 2: expected \"two\", got end of output");
  expect_verdict(script, result(0, "one\ntwo\n\xff\33\n", 0, NULL),
                 "stdout line 3: expected end of output, got \"\\xff\\x1b\"");
  expect_verdict(script, result(0, "one\ntwo \n", 0, NULL),
                 "stdout line 2: expected \"two\", got \"two \"");
  /* without out lines, stdout is not compared */
  expect_verdict("print(1)\n", result(0, "anything\n", 0, NULL), NULL);
  /* a script expected to fail still has its output compared */
  const fsX_reported e[] = { { FS_SEV_ERROR, 2, "division by zero" } };
  expect_verdict("# out: 1\nx = 1 / 0  # error: division by zero\n", result(1, "2\n", 1, e),
                 "stdout line 1: expected \"1\", got \"2\"");
}

static void test_compare_abnormal(void **st) {
  (void)st;
  fsX_result r = result(-1, "", 0, NULL);
  r.timed_out = 1;
  r.timeout = 120;
  r.signal = SIGKILL;
  expect_verdict("x = 1\n", r, "timed out after 120 s");
  r = result(-1, "", 0, NULL);
  r.signal = SIGSEGV;
  char want[128];
  snprintf(want, sizeof want, "killed by signal %d (%s)", SIGSEGV, strsignal(SIGSEGV));
  expect_verdict("x = 1\n", r, want);
  r = result(-1, "", 0, NULL);
  r.overflowed = 1;
  expect_verdict("x = 1\n", r, "output exceeded 64 MiB");
  r = result(3, "", 0, NULL);
  expect_verdict("x = 1\n", r, "exit status 3, expected 0");
  r = result(0, "", 0, NULL);
  r.bad_stderr = strdup("AddressSanitizer: heap-use-after-free");
  expect_verdict("x = 1\n", r, "stderr line is not a diagnostic: "
                               "\"AddressSanitizer: heap-use-after-free\"");
}

static void test_parse_stderr(void **st) {
  (void)st;
  fsX_result r;
  memset(&r, 0, sizeof r);
  r.err = strdup(
      "{\"file\":\"a.fab\",\"line\":3,\"column\":1,\"severity\":\"error\",\"rule\":\"R1\","
      "\"message\":\"bad\"}\n"
      "\n"
      "{\"file\":null,\"line\":null,\"severity\":\"warning\",\"message\":\"w\"}\n"
      "{\"line\":2,\"severity\":\"fatal\",\"message\":\"x\"}\n"
      "=====\n"
      "plain text\n"
      "more text\n"
      "{\"line\":1,\"severity\":\"note\",\"message\":\"n\"}");
  r.err_len = strlen(r.err);
  fsX_parse_stderr(&r);
  assert_int_equal(r.ndiags, 3);
  assert_int_equal(r.diags[0].severity, FS_SEV_ERROR);
  assert_int_equal(r.diags[0].line, 3);
  assert_string_equal(r.diags[0].message, "bad");
  assert_int_equal(r.diags[1].severity, FS_SEV_WARNING);
  assert_int_equal(r.diags[1].line, 0);
  assert_int_equal(r.diags[2].severity, FS_SEV_NOTE);
  assert_string_equal(r.bad_stderr, "{\"line\":2,\"severity\":\"fatal\",\"message\":\"x\"}");
  fsX_result_free(&r);
  /* a sanitizer report is named by its first line with words */
  memset(&r, 0, sizeof r);
  r.err = strdup("=====\n==12==ERROR: AddressSanitizer: heap-use-after-free\nmore\n");
  r.err_len = strlen(r.err);
  fsX_parse_stderr(&r);
  assert_int_equal(r.ndiags, 0);
  assert_string_equal(r.bad_stderr, "==12==ERROR: AddressSanitizer: heap-use-after-free");
  fsX_result_free(&r);
  memset(&r, 0, sizeof r);
  r.err = strdup("=====\n");
  r.err_len = strlen(r.err);
  fsX_parse_stderr(&r);
  assert_string_equal(r.bad_stderr, "=====");
  fsX_result_free(&r);
}

static int sh(const char *script, double timeout, fsX_result *r) {
  char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
  return fsX_spawn("/bin/sh", argv, timeout, r);
}

static void test_spawn(void **st) {
  (void)st;
  fsX_result r;
  assert_int_equal(sh("echo out; echo err >&2; exit 3", 60, &r), 0);
  assert_int_equal(r.status, 3);
  assert_string_equal(r.out, "out\n");
  assert_string_equal(r.err, "err\n");
  assert_false(r.timed_out);
  fsX_result_free(&r);
  /* more than a pipe holds on both streams at once: no deadlock */
  assert_int_equal(sh("head -c 300000 /dev/zero >&2; head -c 200000 /dev/zero; "
                      "head -c 100000 /dev/zero >&2", 60, &r), 0);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.out_len, 200000);
  assert_int_equal(r.err_len, 400000);
  fsX_result_free(&r);
  /* stdin is empty rather than the terminal */
  assert_int_equal(sh("cat; echo done", 60, &r), 0);
  assert_string_equal(r.out, "done\n");
  fsX_result_free(&r);
  assert_int_equal(sh("kill -SEGV $$", 60, &r), 0);
  assert_int_equal(r.status, -1);
  assert_int_equal(r.signal, SIGSEGV);
  fsX_result_free(&r);
  char *missing[] = { "/nonexistent/fabricscript", NULL };
  assert_int_equal(fsX_spawn(missing[0], missing, 60, &r), -1);
  assert_int_equal(errno, ENOENT);
  fsX_result_free(&r);
}

/* Whether process pid ends (or is a zombie) within a minute of a SIGKILL. */
static int gone(long pid) {
  char path[64], stat[256];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  for (int i = 0; i < 6000; i++) {
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *paren = strrchr(stat, ')');
    if (paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X')) return 1;
    nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
  }
  kill((pid_t)pid, SIGKILL); /* do not leave it behind */
  return 0;
}

/* A child that never ends is killed, with what it printed so far. */
static void test_spawn_timeout(void **st) {
  (void)st;
  fsX_result r;
  assert_int_equal(sh("echo started; sleep 600 & echo $!; sleep 600", 0.2, &r), 0);
  assert_true(r.timed_out);
  assert_int_equal(r.status, -1);
  assert_int_equal(r.signal, SIGKILL);
  long bg = 0;
  assert_int_equal(sscanf(r.out, "started\n%ld\n", &bg), 1);
  fsX_result_free(&r);
  /* the whole process group went: the background sleep dies (soon) too */
  assert_true(gone(bg));
  /* a child that closes its output and keeps running is still timed out */
  assert_int_equal(sh("exec >/dev/null 2>&1; sleep 600", 0.2, &r), 0);
  assert_true(r.timed_out);
  fsX_result_free(&r);
}

static char dir[64];

static void put_file(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* A stand-in for the interpreter: logs its arguments, prints FILE.out and
 * FILE.err, exits with FILE.rc. */
static const char fake[] =
    "#!/bin/sh\n"
    "for a; do f=$a; done\n"
    "echo \"$*\" >> \"$(dirname \"$0\")/log\"\n"
    "cat \"$f.out\" 2>/dev/null; cat \"$f.err\" >&2 2>/dev/null\n"
    "exit $(cat \"$f.rc\" 2>/dev/null || echo 0)\n";

static void test_run_paths(void **st) {
  (void)st;
  strcpy(dir, "/tmp/fs_testrun_XXXXXX");
  assert_non_null(mkdtemp(dir));
  char sub[128], exe[128], t[128];
  snprintf(sub, sizeof sub, "%s/t/sub", dir);
  snprintf(exe, sizeof exe, "%s/fake", dir);
  snprintf(t, sizeof t, "%s/t", dir);
  assert_int_equal(mkdir(t, 0700), 0);
  assert_int_equal(mkdir(sub, 0700), 0);
  put_file("fake", fake);
  assert_int_equal(chmod(exe, 0700), 0);
  put_file("t/b.fab", "# out: hi\nprint(\"hi\")\n");
  put_file("t/b.fab.out", "hi\n");
  put_file("t/a.fab", "# mode: check\n# args: -D 'n=1 2'\nx = y  # error: unknown\n");
  put_file("t/a.fab.err", "{\"line\":3,\"severity\":\"error\",\"message\":\"unknown name\"}\n");
  put_file("t/a.fab.rc", "1\n");
  put_file("t/sub/c.fab", "x = 1  # error: never reported\n");
  put_file("t/sub/c.fab.err", "{\"line\":1,\"severity\":\"warning\",\"message\":\"a <b> & c\",\"help\":\"h\"}\n");
  put_file("t/notes.txt", "# error: not a script\n");
  put_file("t/bad.fab", "# mode: later\n");
  char *paths[] = { t };
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  assert_non_null(out);
  assert_int_equal(fsX_run_paths(out, paths, 1, exe, 60, FSX_PLAIN), 1);
  fclose(out);
  char want[2048];
  snprintf(want, sizeof want,
           "PASS %s/t/a.fab\n"
           "PASS %s/t/b.fab\n"
           "FAIL %s/t/bad.fab: line 1: `# mode:` is `check`, `plan` or `run`\n"
           "FAIL %s/t/sub/c.fab: missing error at line 1: \"never reported\"; "
           "exit status 0, expected 1\n"
           "2 passed, 2 failed\n", dir, dir, dir, dir);
  assert_string_equal(buf, want);
  free(buf);
  /* the arguments each script was run with, in order */
  char log[128];
  snprintf(log, sizeof log, "%s/log", dir);
  FILE *lf = fopen(log, "r");
  assert_non_null(lf);
  char line[512];
  assert_non_null(fgets(line, sizeof line, lf));
  snprintf(want, sizeof want, "check --diagnostics-format=json -D n=1 2 %s/t/a.fab\n", dir);
  assert_string_equal(line, want);
  assert_non_null(fgets(line, sizeof line, lf));
  snprintf(want, sizeof want, "--diagnostics-format=json %s/t/b.fab\n", dir);
  assert_string_equal(line, want);
  fclose(lf);
  /* TAP 13: a YAML block under each failure with its reason and diagnostics */
  buf = NULL;
  out = open_memstream(&buf, &len);
  assert_int_equal(fsX_run_paths(out, paths, 1, exe, 60, FSX_TAP), 1);
  fclose(out);
  snprintf(want, sizeof want,
           "TAP version 13\nok 1 - %s/t/a.fab\nok 2 - %s/t/b.fab\nnot ok 3 - %s/t/bad.fab\n"
           "  ---\n  message: |-\n    line 1: `# mode:` is `check`, `plan` or `run`\n  duration_ms: ", dir, dir, dir);
  assert_memory_equal(buf, want, strlen(want));
  snprintf(want, sizeof want, "not ok 4 - %s/t/sub/c.fab\n", dir);
  assert_non_null(strstr(buf, want));
  assert_non_null(strstr(buf, "  diagnostics: |\n    1: warning: a <b> & c\n      help: h\n  ...\n1..4\n"));
  free(buf);
  /* JUnit: one testcase per script, the failure's text escaped */
  buf = NULL;
  out = open_memstream(&buf, &len);
  assert_int_equal(fsX_run_paths(out, paths, 1, exe, 60, FSX_JUNIT), 1);
  fclose(out);
  assert_non_null(strstr(buf, "<testsuite name=\"fabricscript test\" tests=\"4\" failures=\"2\""));
  assert_non_null(strstr(buf, "name=\"a.fab\""));
  assert_non_null(strstr(buf, "<failure type=\"mismatch\" message=\"line 1: `# mode:` is `check`, `plan` or `run`\">"));
  assert_non_null(strstr(buf, "diagnostics:\n1: warning: a &lt;b&gt; &amp; c\n  help: h\n</failure>"));
  assert_non_null(strstr(buf, "</testsuites>\n"));
  free(buf);
  /* a missing path fails; an empty list passes */
  buf = NULL;
  out = open_memstream(&buf, &len);
  char *nowhere[] = { "/nonexistent/x.fab" };
  assert_int_equal(fsX_run_paths(out, nowhere, 1, exe, 60, FSX_PLAIN), 1);
  fclose(out);
  assert_string_equal(buf, "FAIL /nonexistent/x.fab: No such file or directory\n"
                           "0 passed, 1 failed\n");
  free(buf);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static void test_main_usage(void **st) {
  (void)st;
  assert_int_equal(fsX_main(0, NULL, "/bin/false", FSX_PLAIN), 2);
  char *p[] = { "x.fab" };
  setenv("FABRICSCRIPT_TEST_TIMEOUT", "soon", 1);
  assert_int_equal(fsX_main(1, p, "/bin/false", FSX_PLAIN), 2);
  setenv("FABRICSCRIPT_TEST_TIMEOUT", "-1", 1);
  assert_int_equal(fsX_main(1, p, "/bin/false", FSX_PLAIN), 2);
  unsetenv("FABRICSCRIPT_TEST_TIMEOUT");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_parse),         cmocka_unit_test(test_parse_errors),
    cmocka_unit_test(test_compare),       cmocka_unit_test(test_compare_stdout),
    cmocka_unit_test(test_compare_abnormal), cmocka_unit_test(test_parse_stderr),
    cmocka_unit_test(test_spawn),         cmocka_unit_test(test_spawn_timeout),
    cmocka_unit_test(test_run_paths),     cmocka_unit_test(test_main_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
