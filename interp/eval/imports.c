/* imports.c -- `import` and `from ... import` at run time. A module is a
 * value naming a dotted path ("torch.nn"); its attributes are what
 * pynames.c says the longer path is, the same table the checker reads: a
 * builtin row (`nn.Linear` is Linear, `L.Fabric` is Fabric), an nn.Module
 * class the evaluator makes (`nn.Sequential`), or a deeper module. A name of
 * torch's or Lightning's the runtime does not have is a module value too, and
 * fails where the script calls it, naming itself. Which imports a run can
 * bind at all is fsSig_run_importable, which the checker also asks, so a
 * script check accepts does not stop at its imports. */
#include <stdlib.h>
#include <string.h>

#include "eval_int.h"
#include "pynames.h"

typedef struct module { char *dotted; } module;

static void module_free(void *p) {
  module *m = p;
  free(m->dotted);
  free(m);
}

static char *module_repr(fs_value *v) {
  const module *m = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<module '%s'>", m->dotted);
  return fsV_buf_take(&b);
}

static fs_value *module_call(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  (void)E, (void)a;
  fsV_seterr("`%s` is not supported at run time yet", ((const module *)v->u.obj.data)->dotted);
  return NULL;
}

static const fsV_class module_class = {.name = "module", .call = module_call, .repr = module_repr,
                                       .free = module_free};

static fs_value *new_module(const char *dotted, size_t n) {
  module *m = malloc(sizeof *m);
  char *d = malloc(n + 1);
  if (!m || !d) {
    free(m);
    free(d);
    fsV_seterr("out of memory");
    return NULL;
  }
  memcpy(d, dotted, n);
  d[n] = '\0';
  m->dotted = d;
  return fsV_obj(&module_class, m);
}

/* What `dotted` names: a builtin, an nn.Module class, or a module value. */
static fs_value *resolve(fsE_ctx *E, const char *dotted) {
  const char *dot = strchr(dotted, '.');
  if (!dot && fsSig_find(dotted)) return fsE_builtin(E, dotted); /* math, time */
  char head[16];
  if (dot && (size_t)(dot - dotted) < sizeof head && !strchr(dot + 1, '.')) {
    memcpy(head, dotted, (size_t)(dot - dotted));
    head[dot - dotted] = '\0';
    const fsSig *m = fsSig_find(head);
    if (m && m->kind == FSSIG_MODULE) { /* math.cos: the module value's member */
      fs_value *mv = fsE_builtin(E, head), *v = mv ? fsE_getattr(E, mv, dot + 1) : NULL;
      fsV_release(mv);
      return v;
    }
  }
  if (!strcmp(dotted, "torch.nn.Module")) return fsE_builtin(E, "Module"); /* what a script subclasses */
  if (!strcmp(dotted, "torch.utils.data.Dataset") || !strcmp(dotted, "torch.utils.data.dataset.Dataset"))
    return fsE_class_builtin(E, "Dataset"); /* a script's data set class derives from it */
  /* torch's alias of float32: no row of that name, which would hide Python's float */
  if (!strcmp(dotted, "torch.float")) return fsE_builtin(E, "float32");
  const char *row = NULL;
  switch (fsSig_resolve(dotted, &row)) {
  case FSSIG_NS_ROW:
  case FSSIG_NS_LOOSE:
  case FSSIG_NS_MODULE: {
    fs_value *v = fsE_builtin(E, row);
    if (!v && !*fsV_error()) fsV_seterr("`%s` is not supported at run time yet", dotted);
    return v;
  }
  default: return new_module(dotted, strlen(dotted));
  }
}

int fsE_module_getattr(fsE_ctx *E, fs_value *obj, const char *name, fs_value **out) {
  const module *m = fsV_objdata(obj, &module_class);
  if (!m) return 0;
  size_t a = strlen(m->dotted), b = strlen(name);
  char *dotted = malloc(a + b + 2);
  if (!dotted) {
    fsV_seterr("out of memory");
    return -1;
  }
  memcpy(dotted, m->dotted, a);
  dotted[a] = '.';
  memcpy(dotted + a + 1, name, b + 1);
  *out = resolve(E, dotted);
  free(dotted);
  return *out ? 1 : -1;
}

/* Binds name to v in the running scope; 0 or -1 (reported at loc). */
static int bind(fsE_ctx *E, const char *name, fs_value *v, fs_loc loc) {
  int rc = v ? fsE_set_name(E, name, v) : -1;
  fsV_release(v);
  if (rc < 0) fsE_error(E, loc, "%s", *fsV_error() ? fsV_error() : "out of memory");
  return rc;
}

fsE_flow fsE_exec_import(fsE_ctx *E, const fs_node *s) {
  bool from = s->kind == FS_N_IMPORTFROM;
  if (from && (!s->str || s->op))
    return fsE_error(E, s->loc, "a relative import is not supported at run time yet"), FSE_ERROR;
  const char *base = from ? s->str : NULL;
  if (from && !fsSig_run_importable(base))
    return fsE_error(E, s->loc, "module '%s' is not available at run time", base), FSE_ERROR;
  for (uint32_t i = 0; i < s->nkids; i++) {
    const fs_node *a = s->kids[i];
    const char *as = a->kids[0] ? a->kids[0]->str : NULL;
    fsV_clearerr();
    if (!strcmp(a->str, "*"))
      return fsE_error(E, a->loc, "`from %s import *` is not supported at run time yet", base), FSE_ERROR;
    if (from) { /* from torch import nn: the module's attribute */
      fs_value *m = new_module(base, strlen(base)), *v = NULL;
      if (m && fsE_module_getattr(E, m, a->str, &v) < 0) v = NULL;
      fsV_release(m);
      if (bind(E, as ? as : a->str, v, a->loc) < 0) return FSE_ERROR;
      continue;
    }
    if (!fsSig_run_importable(a->str))
      return fsE_error(E, a->loc, "module '%s' is not available at run time", a->str), FSE_ERROR;
    /* import torch.nn as nn binds torch.nn; import torch.nn binds torch */
    size_t top = strcspn(a->str, ".");
    char *name = as ? NULL : malloc(top + 1);
    if (!as && !name) return fsE_error(E, a->loc, "out of memory"), FSE_ERROR;
    if (name) memcpy(name, a->str, top), name[top] = '\0';
    fs_value *v = as ? resolve(E, a->str) : fsSig_find(name) ? fsE_builtin(E, name) : new_module(a->str, top);
    int rc = bind(E, as ? as : name, v, a->loc);
    free(name);
    if (rc < 0) return FSE_ERROR;
  }
  return FSE_OK;
}
