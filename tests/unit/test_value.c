/* test_value.c -- values: repr, operators, indexing, literals, -D typing, format.
 * Expected texts were produced by CPython 3. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "format.h"
#include "value.h"

static void check_repr(fs_value *v, const char *want) {
  assert_non_null(v);
  char *r = fsV_repr(v);
  assert_string_equal(r, want);
  free(r);
  fsV_release(v);
}

static fs_value *lit(const char *text) {
  fs_value *v = fsV_literal(text);
  if (!v) fail_msg("literal %s: %s", text, fsV_error());
  return v;
}

/* repr(a op b) for literals a and b, or "error: message". */
static void check_op(const char *a, fs_op op, const char *b, const char *want) {
  fs_value *x = lit(a), *y = lit(b);
  fs_value *r = fsV_binop(NULL, op, x, y);
  if (r) {
    check_repr(r, want);
  } else {
    char msg[600];
    snprintf(msg, sizeof msg, "error: %s", fsV_error());
    assert_string_equal(msg, want);
  }
  fsV_release(x);
  fsV_release(y);
}

static void test_float_repr(void **st) {
  (void)st;
  const char *cases[][2] = {
    {"0.1", "0.1"}, {"1.0", "1.0"}, {"1e-05", "1e-05"}, {"1e16", "1e+16"},
    {"1e15", "1000000000000000.0"}, {"123456789.123", "123456789.123"}, {"-0.0", "-0.0"},
    {"2.5e-7", "2.5e-07"}, {"0.0001", "0.0001"}, {"1e22", "1e+22"}, {"5e-324", "5e-324"},
    {"1.7976931348623157e308", "1.7976931348623157e+308"}, {"3", "3"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_repr(lit(cases[i][0]), cases[i][1]);
  check_repr(fsV_float(1.0 / 3.0), "0.3333333333333333");
  check_repr(fsV_float(1.0 / 0.0), "inf");
  check_repr(fsV_float(-1.0 / 0.0), "-inf");
}

static void test_container_repr(void **st) {
  (void)st;
  check_repr(lit("[1, 'a', (2,), (), None, True]"), "[1, 'a', (2,), (), None, True]");
  check_repr(lit("\"it's\""), "\"it's\"");
  check_repr(lit("'say \"hi\"\\n'"), "'say \"hi\"\\n'");
  check_repr(lit("(1)"), "1");
  fs_value *d = fsV_dict();
  fs_value *k = fsV_cstr("lr");
  assert_int_equal(fsV_dict_set(d, k, fsV_float(0.1)), 0);
  fs_value *k2 = fsV_int(1);
  assert_int_equal(fsV_dict_set(d, k2, fsV_none()), 0);
  fs_value *k3 = fsV_float(1.0); /* 1.0 == 1: the same key, as Python */
  assert_int_equal(fsV_dict_set(d, k3, fsV_int(5)), 0);
  fs_value *l = fsV_list(0);
  assert_int_equal(fsV_dict_set(d, l, fsV_int(1)), -1);
  assert_string_equal(fsV_error(), "unhashable type: 'list'");
  check_repr(fsV_retain(d), "{'lr': 0.1, 1: 5}");
  fs_value *r = fsV_index(NULL, d, k);
  check_repr(r, "0.1");
  fs_value *missing = fsV_cstr("x");
  assert_null(fsV_index(NULL, d, missing));
  assert_string_equal(fsV_error(), "KeyError: 'x'");
  fsV_release(missing);
  fsV_release(k);
  fsV_release(k2);
  fsV_release(k3);
  fsV_release(l);
  fsV_release(d);
  check_repr(fsV_range(0, 5, 1), "range(0, 5)");
  check_repr(fsV_range(10, 0, -2), "range(10, 0, -2)");
}

static void test_arith(void **st) {
  (void)st;
  check_op("-7", FS_OP_FDIV, "2", "-4");
  check_op("-7", FS_OP_MOD, "2", "1");
  check_op("7", FS_OP_FDIV, "-2", "-4");
  check_op("7", FS_OP_MOD, "-2", "-1");
  check_op("-7.5", FS_OP_FDIV, "2", "-4.0");
  check_op("-7.5", FS_OP_MOD, "2", "0.5");
  check_op("7.5", FS_OP_MOD, "-2", "-0.5");
  check_op("5.0", FS_OP_FDIV, "0.3", "16.0");
  check_op("-0.0", FS_OP_MOD, "5", "0.0");
  check_op("7", FS_OP_DIV, "2", "3.5");
  check_op("6", FS_OP_DIV, "3", "2.0");
  check_op("2", FS_OP_POW, "-1", "0.5");
  check_op("2", FS_OP_POW, "62", "4611686018427387904");
  check_op("2", FS_OP_POW, "63", "error: integer overflow: the result does not fit in 64 bits");
  check_op("9223372036854775807", FS_OP_ADD, "1", "error: integer overflow: the result does not fit in 64 bits");
  check_op("1", FS_OP_DIV, "0", "error: division by zero");
  check_op("1", FS_OP_FDIV, "0", "error: integer division or modulo by zero");
  check_op("1", FS_OP_MOD, "0", "error: integer modulo by zero");
  check_op("1.0", FS_OP_DIV, "0", "error: float division by zero");
  check_op("0", FS_OP_POW, "-1", "error: 0.0 cannot be raised to a negative power");
  check_op("True", FS_OP_ADD, "1", "2");
  check_op("1", FS_OP_ADD, "0.5", "1.5");
  check_op("1", FS_OP_ADD, "'a'", "error: unsupported operand type(s) for +: 'int' and 'str'");
  check_op("'ab'", FS_OP_MUL, "3", "'ababab'");
  check_op("2", FS_OP_MUL, "[0]", "[0, 0]");
  check_op("[1]", FS_OP_ADD, "[2, 3]", "[1, 2, 3]");
  check_op("(1,)", FS_OP_ADD, "(2,)", "(1, 2)");
  check_op("[1]", FS_OP_ADD, "(2,)", "error: unsupported operand type(s) for +: 'list' and 'tuple'");
}

static void test_compare(void **st) {
  (void)st;
  check_op("1", FS_OP_EQ, "1.0", "True");
  check_op("True", FS_OP_EQ, "1", "True");
  check_op("[1, 2]", FS_OP_LT, "[1, 3]", "True");
  check_op("(1, 2)", FS_OP_EQ, "[1, 2]", "False");
  check_op("'abc'", FS_OP_LT, "'abd'", "True");
  check_op("'ab'", FS_OP_LT, "'abc'", "True");
  check_op("1", FS_OP_LT, "'a'", "error: '<' not supported between instances of 'int' and 'str'");
  check_op("9007199254740993", FS_OP_GT, "9007199254740992.0", "True"); /* exact, not via double */
  check_op("None", FS_OP_EQ, "None", "True");
  check_op("None", FS_OP_EQ, "0", "False");
  check_op("2", FS_OP_IN, "[1, 2]", "True");
  check_op("'b'", FS_OP_IN, "'abc'", "True");
  check_op("'x'", FS_OP_NOT_IN, "'abc'", "True");
  check_op("1", FS_OP_IN, "'abc'", "error: 'in <string>' requires string as left operand, not int");
  fs_value *r = fsV_range(0, 10, 3), *three = fsV_int(3), *four = fsV_int(4);
  check_repr(fsV_binop(NULL, FS_OP_IN, three, r), "True");
  check_repr(fsV_binop(NULL, FS_OP_IN, four, r), "False");
  fsV_release(r);
  fsV_release(three);
  fsV_release(four);
}

static void test_index_slice(void **st) {
  (void)st;
  fs_value *l = lit("[10, 20, 30, 40, 50]"), *s = lit("'héllo'");
  fs_value *m1 = fsV_int(-1), *five = fsV_int(5), *one = fsV_int(1), *m2 = fsV_int(-2);
  check_repr(fsV_index(NULL, l, m1), "50");
  assert_null(fsV_index(NULL, l, five));
  assert_string_equal(fsV_error(), "list index out of range");
  check_repr(fsV_index(NULL, s, one), "'é'");
  assert_int_equal(fsV_len(NULL, s), 5);
  check_repr(fsV_slice(l, one, m1, NULL), "[20, 30, 40]");
  check_repr(fsV_slice(l, NULL, NULL, m1), "[50, 40, 30, 20, 10]");
  check_repr(fsV_slice(l, NULL, NULL, m2), "[50, 30, 10]");
  check_repr(fsV_slice(s, one, NULL, NULL), "'éllo'");
  check_repr(fsV_slice(s, NULL, NULL, m1), "'olléh'");
  fs_value *r = fsV_range(0, 10, 1);
  check_repr(fsV_slice(r, one, NULL, m2), "range(1, -1, -2)");
  check_repr(fsV_index(NULL, r, m1), "9");
  fs_value *zero = fsV_int(0);
  assert_null(fsV_slice(l, NULL, NULL, zero));
  assert_string_equal(fsV_error(), "slice step cannot be zero");
  fs_value *i = fsV_int(3);
  assert_null(fsV_index(NULL, i, zero));
  assert_string_equal(fsV_error(), "'int' object is not subscriptable");
  fs_value *vals[] = {l, s, m1, five, one, m2, r, zero, i};
  for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) fsV_release(vals[k]);
}

static void test_reaches(void **st) {
  (void)st;
  fs_value *inner = lit("[1, 2]"), *outer = fsV_list(0), *d = fsV_dict(), *k = fsV_cstr("k");
  assert_int_equal(fsV_list_append(outer, fsV_retain(inner)), 0);
  assert_int_equal(fsV_dict_set(d, k, fsV_retain(outer)), 0);
  assert_true(fsV_reaches(d, inner));   /* through a dict value and a list */
  assert_true(fsV_reaches(inner, inner));
  assert_false(fsV_reaches(inner, outer));
  assert_false(fsV_reaches(k, d));
  fs_value *vals[] = {inner, outer, d, k};
  for (size_t i = 0; i < 4; i++) fsV_release(vals[i]);
}

/* ---- deep values (issue 18): free at any depth; repr, ==, <, hashing and
 * literals stop at FSV_MAX_DEPTH with Python's words instead of the stack ---- */

/* [[...[]...]] with `levels` lists, built as a script would (x = [x]) */
static fs_value *nest(size_t levels, fs_vtype type) {
  fs_value *x = type == FSV_TUPLE ? fsV_tuple(0) : fsV_list(0);
  for (size_t i = 1; i < levels; i++) {
    fs_value *y;
    if (type == FSV_DICT) {
      y = fsV_dict();
      fs_value *k = fsV_int((int64_t)i);
      assert_int_equal(fsV_dict_set(y, k, x), 0);
      fsV_release(k);
    } else if (type == FSV_TUPLE) {
      y = fsV_tuple(1);
      fsV_seq_set(y, 0, x);
    } else {
      y = fsV_list(1);
      assert_int_equal(fsV_list_append(y, x), 0);
    }
    x = y;
  }
  return x;
}

static void test_deep_free(void **st) {
  (void)st;
  fsV_release(nest(400000, FSV_LIST)); /* recursive freeing overflowed the stack here */
  fsV_release(nest(400000, FSV_DICT));
  fsV_release(nest(400000, FSV_TUPLE));
  /* a shared deep child outlives the first parent released */
  fs_value *deep = nest(100000, FSV_LIST), *a = fsV_list(0), *b = fsV_list(0);
  assert_int_equal(fsV_list_append(a, fsV_retain(deep)), 0);
  assert_int_equal(fsV_list_append(b, deep), 0);
  fsV_release(a);
  assert_int_equal(deep->refcount, 1);
  fsV_release(b);
  fs_value *unfilled = fsV_tuple(3); /* NULL slots of a tuple abandoned half-built */
  fsV_seq_set(unfilled, 0, fsV_int(1));
  fsV_release(unfilled);
}

static void test_deep_repr(void **st) {
  (void)st;
  const char *recursion = "RecursionError: maximum recursion depth exceeded while getting the repr of an object";
  fs_value *ok = nest(FSV_MAX_DEPTH, FSV_LIST), *deep = nest(100000, FSV_LIST);
  char *r = fsV_repr(ok);
  assert_non_null(r);
  assert_int_equal(strlen(r), 2 * FSV_MAX_DEPTH);
  fs_value *back = fsV_literal(r); /* what repr writes reads back */
  free(r);
  assert_non_null(back);
  assert_int_equal(fsV_equal_checked(back, ok), 1);
  fsV_release(back);
  fs_value *over = fsV_list(1);
  assert_int_equal(fsV_list_append(over, fsV_retain(ok)), 0);
  assert_null(fsV_repr(over));
  assert_string_equal(fsV_error(), recursion);
  assert_null(fsV_repr(deep));
  assert_string_equal(fsV_error(), recursion);
  fs_value *d = nest(100000, FSV_DICT);
  assert_null(fsV_tostr(d));
  assert_string_equal(fsV_error(), recursion);
  fs_value *vals[] = {ok, deep, over, d};
  for (size_t i = 0; i < 4; i++) fsV_release(vals[i]);
}

static void test_deep_compare(void **st) {
  (void)st;
  const char *recursion = "RecursionError: maximum recursion depth exceeded in comparison";
  fs_value *a = nest(100000, FSV_LIST), *b = nest(100000, FSV_LIST);
  fs_op ops[] = {FS_OP_EQ, FS_OP_NE, FS_OP_LT, FS_OP_GE, FS_OP_IN};
  fs_value *in_b = fsV_list(1);
  assert_int_equal(fsV_list_append(in_b, fsV_retain(b)), 0);
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    fsV_clearerr();
    assert_null(fsV_binop(NULL, ops[i], a, ops[i] == FS_OP_IN ? in_b : b));
    assert_string_equal(fsV_error(), recursion);
  }
  assert_int_equal(fsV_equal_checked(a, b), -1);
  assert_false(fsV_equal(a, b));
  assert_int_equal(fsV_equal_checked(a, a), 1); /* identity, as Python */
  fs_value *ta = nest(100000, FSV_TUPLE), *tb = nest(100000, FSV_TUPLE), *d = fsV_dict();
  assert_int_equal(fsV_dict_set(d, ta, fsV_int(1)), -1); /* a key too deep to hash */
  assert_string_equal(fsV_error(), "RecursionError: maximum recursion depth exceeded while calling a Python object");
  fs_value *shallow = fsV_tuple(0);
  assert_int_equal(fsV_dict_set(d, shallow, fsV_int(1)), 0);
  fsV_clearerr();
  assert_null(fsV_index(NULL, d, tb));
  assert_string_equal(fsV_error(), "RecursionError: maximum recursion depth exceeded while calling a Python object");
  fs_value *vals[] = {a, b, in_b, ta, tb, d, shallow};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) fsV_release(vals[i]);
}

static void test_deep_literal(void **st) {
  (void)st;
  size_t levels = 40000;
  char *text = malloc(2 * levels + 1);
  memset(text, '[', levels);
  memset(text + levels, ']', levels);
  text[2 * levels] = '\0';
  assert_null(fsV_literal(text));
  assert_string_equal(fsV_error(), "too many nested parentheses");
  fs_value *out, *none = fsV_none();
  char *err;
  assert_int_equal(fsV_parse_param(text, none, &out, &err), -1); /* not taken as a string */
  assert_string_equal(err, "too many nested parentheses (more than 1000 levels)");
  free(err);
  memset(text, '(', levels);
  memset(text + levels, ')', levels);
  assert_null(fsV_literal(text));
  free(text);
}

static void test_deep_reaches(void **st) {
  (void)st;
  fs_value *deep = nest(400000, FSV_LIST), *other = fsV_list(0), *leaf = deep;
  while (leaf->u.seq.n) leaf = leaf->u.seq.items[0];
  assert_true(fsV_reaches(deep, leaf));
  assert_false(fsV_reaches(deep, other));
  fsV_release(deep);
  fsV_release(other);
}

static void test_literal(void **st) {
  (void)st;
  check_repr(lit("50_304"), "50304");
  check_repr(lit("-3"), "-3");
  check_repr(lit("1e-3"), "0.001");
  check_repr(lit(".5"), "0.5");
  check_repr(lit("(0.9, 0.999)"), "(0.9, 0.999)");
  const char *bad[] = {"abc", "1.2.3", "007", "(1, 2", "'x", "1_", "Truex", "99999999999999999999"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) assert_null(fsV_literal(bad[k]));
}

static void check_param(const char *text, const char *def, const char *want) {
  fs_value *d = lit(def), *out;
  char *err;
  int rc = fsV_parse_param(text, d, &out, &err);
  if (rc == 0) {
    assert_null(err);
    check_repr(out, want);
  } else {
    assert_null(out);
    assert_string_equal(err, want);
    free(err);
  }
  fsV_release(d);
}

static void test_param(void **st) {
  (void)st;
  check_param("0.1", "1e-3", "0.1");
  check_param("3", "1e-3", "3.0");
  check_param("abc", "1e-3", "expected a float, got 'abc'");
  check_param("5", "2", "5");
  check_param("5.0", "2", "expected an int, got '5.0'");
  check_param("true", "False", "True");
  check_param("0", "True", "False");
  check_param("yes", "True", "expected a bool (True, False, true, false, 1 or 0), got 'yes'");
  check_param("fsdp", "'auto'", "'fsdp'");
  check_param("1 2", "'x'", "'1 2'");
  check_param("4", "None", "4");
  check_param("ddp", "None", "'ddp'");
}

static void check_fmt(fs_value *v, const char *spec, const char *want) {
  char *s = fsV_format(v, spec);
  if (s) {
    assert_string_equal(s, want);
    free(s);
  } else {
    assert_string_equal(fsV_error(), want);
  }
  fsV_release(v);
}

static void test_format(void **st) {
  (void)st;
  check_fmt(fsV_float(0.123456), ".4f", "0.1235");
  check_fmt(fsV_int(1234567), ",", "1,234,567");
  check_fmt(fsV_float(0.8567), ".2%", "85.67%");
  check_fmt(fsV_float(3.14159), ">8.3f", "   3.142");
  check_fmt(fsV_int(42), "5d", "   42");
  check_fmt(fsV_int(42), "<5", "42   ");
  check_fmt(fsV_cstr("ab"), "^6", "  ab  ");
  check_fmt(fsV_cstr("ab"), "*>5", "***ab");
  check_fmt(fsV_int(-3), "05d", "-0003");
  check_fmt(fsV_float(1234.5), ",.2f", "1,234.50");
  check_fmt(fsV_float(1e-7), "e", "1.000000e-07");
  check_fmt(fsV_float(123456789.0), "g", "1.23457e+08");
  check_fmt(fsV_float(1.0), ".3", "1.0");
  check_fmt(fsV_float(1234.5), ".3", "1.23e+03");
  check_fmt(fsV_int(7), "+d", "+7");
  check_fmt(fsV_float(2.5), ".0f", "2");
  check_fmt(fsV_float(1.0 / 0.0), ".2f", "inf");
  check_fmt(fsV_bool(true), "d", "1");
  check_fmt(fsV_bool(true), "", "True");
  check_fmt(fsV_cstr("abcdef"), ".3", "abc");
  check_fmt(fsV_float(1e-5), "g", "1e-05");
  check_fmt(fsV_int(100), "e", "1.000000e+02");
  check_fmt(fsV_int(-7), "x^+7", "xx-7xxx");
  check_fmt(fsV_float(0.1), "", "0.1");
  check_fmt(fsV_float(1.5), "d", "Unknown format code 'd' for object of type 'float'");
  check_fmt(fsV_cstr("a"), "d", "Unknown format code 'd' for object of type 'str'");
  check_fmt(fsV_int(1), ".2d", "Precision not allowed in integer format specifier");
  check_fmt(fsV_int(1), "5q", "Invalid format specifier '5q' for object of type 'int'");
  check_fmt(fsV_none(), ">4", "unsupported format string passed to NoneType.__format__");
}

/* A big dict finds its keys through its index: equal keys of different
 * types are one key (1, 1.0, True), tuples and strings hash by content, and
 * every key is still found after the doublings that rebuild the index. */
static void test_dict_index(void **state) {
  (void)state;
  fs_value *d = fsV_dict();
  enum { N = 5000 };
  for (int64_t i = 0; i < N; i++) {
    fs_value *k = i % 3 ? fsV_int(i) : i % 2 ? fsV_float((double)i) : fsV_pair(fsV_int(i), fsV_cstr("t"));
    assert_int_equal(fsV_dict_set(d, k, fsV_int(i)), 0);
    fsV_release(k);
  }
  assert_int_equal(d->u.dict.n, N);
  for (int64_t i = 0; i < N; i++) {
    fs_value *k = i % 3 ? fsV_float((double)i) : i % 2 ? fsV_int(i) : fsV_pair(fsV_int(i), fsV_cstr("t"));
    const fs_value *v = fsV_dict_get(d, k);
    assert_non_null(v);
    assert_int_equal(v->u.i, i);
    fsV_release(k);
  }
  fs_value *one = fsV_bool(true), *s = fsV_cstr("k4999");
  assert_int_equal(fsV_dict_get(d, one)->u.i, 1); /* True == 1 */
  assert_null(fsV_dict_get(d, s));
  assert_int_equal(fsV_dict_set(d, s, fsV_int(-1)), 0);
  fs_value *s2 = fsV_cstr("k4999");
  assert_int_equal(fsV_dict_get(d, s2)->u.i, -1);
  assert_int_equal(fsV_dict_set(d, one, fsV_int(7)), 0); /* replaces key 1's value */
  assert_int_equal(d->u.dict.n, N + 1);
  fs_value *k1 = fsV_int(1);
  assert_int_equal(fsV_dict_get(d, k1)->u.i, 7);
  fsV_release(k1);
  fsV_release(s);
  fsV_release(s2);
  fsV_release(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dict_index),
    cmocka_unit_test(test_float_repr),  cmocka_unit_test(test_container_repr),
    cmocka_unit_test(test_arith),       cmocka_unit_test(test_compare),
    cmocka_unit_test(test_index_slice), cmocka_unit_test(test_literal),
    cmocka_unit_test(test_reaches),
    cmocka_unit_test(test_deep_free),   cmocka_unit_test(test_deep_repr),
    cmocka_unit_test(test_deep_compare), cmocka_unit_test(test_deep_literal),
    cmocka_unit_test(test_deep_reaches),
    cmocka_unit_test(test_param),       cmocka_unit_test(test_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
