/* test_signatures.c -- the builtin table, the argument binder, and the
 * evaluator's libraries registered against the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "eval_int.h"
#include "pynames.h"
#include "signatures.h"

/* Binds and returns the error text (malloc'd) or NULL on success. */
static char *bind(const char *fn, size_t npos, const char *const *kw, size_t nkw,
                  int *pos, int *kws) {
  const fsSig *s = fsSig_find(fn);
  assert_non_null(s);
  char *err = NULL;
  int rc = fsSig_bind(s, npos, kw, nkw, pos, kws, &err);
  assert_true(rc == 0 ? err == NULL : err != NULL);
  return err;
}

static void expect_error(const char *fn, size_t npos, const char *const *kw, size_t nkw,
                         const char *msg) {
  int pos[8], kws[8];
  char *err = bind(fn, npos, kw, nkw, pos, kws);
  assert_non_null(err);
  assert_string_equal(err, msg);
  free(err);
}

static void test_lookup(void **st) {
  (void)st;
  assert_int_equal(fsSig_find("Linear")->kind, FSSIG_LAYER);
  assert_int_equal(fsSig_find("Fabric")->kind, FSSIG_CLASS);
  assert_int_equal(fsSig_find("print")->kind, FSSIG_FUNC);
  assert_int_equal(fsSig_find("math")->kind, FSSIG_MODULE); /* a module value; members are rows */
  assert_int_equal(fsSig_member("math", "cos")->kind, FSSIG_METHOD);
  assert_int_equal(fsSig_member("math", "pi")->kind, FSSIG_ATTR);
  assert_null(fsSig_find("setup"));           /* methods are not global names */
  assert_null(fsSig_find("Fabric.setup"));
  const fsSig *m = fsSig_member("Fabric", "setup_dataloaders");
  assert_non_null(m);
  assert_int_equal(m->kind, FSSIG_METHOD);
  assert_null(fsSig_member("Fabric", "setup_dataloader"));
  assert_null(fsSig_member("Fab", "setup"));  /* prefix of a type is not the type */
  const fsSig *lr = fsSig_member("Optimizer", "lr");
  assert_int_equal(lr->kind, FSSIG_ATTR);
  assert_true(lr->flags & FSSIG_SETTABLE);
  assert_false(fsSig_member("Fabric", "world_size")->flags & FSSIG_SETTABLE);
  assert_true(fsSig_member("Fabric", "init_module")->flags & FSSIG_CONTEXT);
}

static void test_defaults(void **st) {
  (void)st;
  const fsSig *f = fsSig_find("Fabric");
  int i = fsSig_param_index(f, "precision");
  assert_true(i >= 0);
  assert_string_equal(f->params[fsSig_param_index(f, "strategy")].def, "'auto'");
  const fsSig *adam = fsSig_find("Adam");
  assert_string_equal(adam->params[fsSig_param_index(adam, "betas")].def, "(0.9, 0.999)");
  const fsSig *sgd = fsSig_find("SGD");
  assert_null(sgd->params[fsSig_param_index(sgd, "lr")].def);
  const fsSig *fsdp = fsSig_find("FSDPStrategy");
  int u = fsSig_param_index(fsdp, "use_orig_params");
  assert_string_equal(fsdp->params[u].def, "True");
  assert_int_equal(fsdp->params[u].types, FSSIG_T_BOOL);
  assert_int_equal(fsSig_param_index(fsdp, "kwargs"), -1); /* ** is not a name */
}

static void test_bind_ok(void **st) {
  (void)st;
  int pos[8], kws[8];
  const char *kw[] = {"bias"};
  assert_null(bind("Linear", 2, kw, 1, pos, kws));
  assert_int_equal(pos[0], 0);
  assert_int_equal(pos[1], 1);
  assert_int_equal(kws[0], 2);
  /* extras go to *args, keywords after it are keyword-only */
  const fsSig *p = fsSig_find("print");
  const char *pkw[] = {"end", "sep"};
  char *err;
  assert_int_equal(fsSig_bind(p, 3, pkw, 2, pos, kws, &err), 0);
  assert_int_equal(pos[0], 0);
  assert_int_equal(pos[2], 0);
  assert_int_equal(kws[0], 2);
  assert_int_equal(kws[1], 1);
  /* unknown keywords go to **kwargs */
  const char *fkw[] = {"limit_all_gathers", "use_orig_params"};
  const fsSig *fsdp = fsSig_find("FSDPStrategy");
  assert_int_equal(fsSig_bind(fsdp, 0, fkw, 2, pos, kws, &err), 0);
  assert_int_equal(kws[0], (int)fsdp->nparams - 1);
  assert_int_equal(kws[1], fsSig_param_index(fsdp, "use_orig_params"));
}

static void test_bind_errors(void **st) {
  (void)st;
  const char *x[] = {"x"};
  expect_error("print", 1, x, 1, "print() got an unexpected keyword argument 'x'");
  expect_error("SGD", 1, NULL, 0, "SGD() missing required argument 'lr'");
  expect_error("enumerate", 3, NULL, 0, "enumerate() takes at most 2 positional arguments (3 given)");
  expect_error("bmm", 3, NULL, 0, "bmm() takes 2 positional arguments (3 given)");
  expect_error("ReLU", 1, NULL, 0, "ReLU() takes no positional arguments (1 given)");
  expect_error("FSDPStrategy", 1, NULL, 0, "FSDPStrategy() takes no positional arguments (1 given)");
  const char *lr[] = {"lr"};
  expect_error("SGD", 2, lr, 1, "SGD() got multiple values for argument 'lr'");
  const char *twice[] = {"lr", "lr"};
  expect_error("SGD", 1, twice, 2, "SGD() got multiple values for keyword argument 'lr'");
  const char *obj[] = {"obj"};
  expect_error("len", 0, obj, 1,
               "len() got some positional-only arguments passed as keyword arguments: 'obj'");
  const fsSig *setup = fsSig_member("Fabric", "setup");
  int pos[4], kws[4];
  char *err;
  assert_int_equal(fsSig_bind(setup, 0, NULL, 0, pos, kws, &err), -1);
  assert_string_equal(err, "Fabric.setup() missing required argument 'module'");
  free(err);
}

static void test_table_consistent(void **st) {
  (void)st;
  size_t n;
  const fsSig *all = fsSig_all(&n);
  assert_true(n > 80);
  for (size_t i = 0; i < n; i++) {
    /* methods and attributes are Type.member, the rest plain names */
    assert_true((strchr(all[i].name, '.') != NULL) == (all[i].kind >= FSSIG_METHOD));
    assert_non_null(all[i].returns);
    int seen_default = 0;
    for (size_t k = 0; k < all[i].nparams; k++) {
      const fsSig_param *p = &all[i].params[k];
      /* no required positional after an optional one (Python's rule) */
      if (p->flags & (FSSIG_KWONLY | FSSIG_VARARGS | FSSIG_VARKW)) continue;
      if (p->def) seen_default = 1;
      else assert_false(seen_default);
    }
    for (size_t j = 0; j < i; j++) assert_string_not_equal(all[i].name, all[j].name);
  }
}

/* The sig row a library row names ("print", "Fabric.setup"), or NULL. */
static const fsSig *row_sig(const char *name) {
  const char *dot = strchr(name, '.');
  if (!dot) return fsSig_find(name);
  char type[32];
  assert_true((size_t)(dot - name) < sizeof type);
  memcpy(type, name, (size_t)(dot - name));
  type[dot - name] = '\0';
  return fsSig_member(type, dot + 1);
}

/* Every library row names a builtin of the table, no builtin is registered
 * twice, every builtin has an implementation, and the index finds it. */
static void test_libraries_cover_table(void **st) {
  (void)st;
  size_t n, nlibs;
  const fsSig *all = fsSig_all(&n);
  const fsE_lib *const *libs = fsE_libs(&nlibs);
  int *rows = calloc(n, sizeof *rows);
  assert_non_null(rows);
  for (size_t l = 0; l < nlibs; l++)
    for (const fsE_reg *r = libs[l]->funcs; r->name; r++) {
      const fsSig *sig = row_sig(r->name);
      if (!sig) fail_msg("library %s registers %s, which the sig table does not have", libs[l]->name, r->name);
      rows[sig - all]++;
      assert_ptr_equal(fsE_native_of(sig), r->fn);
    }
  for (size_t i = 0; i < n; i++)
    if (rows[i] != 1) fail_msg("%s has %d implementations (one expected)", all[i].name, rows[i]);
  free(rows);
}

/* pynames.c's table is searched by bisection: a name out of order there
 * would be missed. The first, the last and names from each part of it. */
static void test_python_builtins(void **state) {
  (void)state;
  static const char *const names[] = {"ArithmeticError", "EOFError", "Ellipsis", "IOError", "NotImplemented",
                                      "ZeroDivisionError", "__build_class__", "__name__", "__spec__", "abs",
                                      "enumerate", "isinstance", "print", "super", "zip"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!fsSig_python_builtin(names[i])) fail_msg("%s is a Python builtin", names[i]);
  assert_false(fsSig_python_builtin("Linear"));
  assert_false(fsSig_python_builtin("zipp"));
  assert_false(fsSig_python_builtin("A"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_python_builtins),
    cmocka_unit_test(test_lookup),
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_bind_ok),
    cmocka_unit_test(test_bind_errors),
    cmocka_unit_test(test_table_consistent),
    cmocka_unit_test(test_libraries_cover_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
