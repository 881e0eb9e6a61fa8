/* eval.c -- the tree walker: expressions, statements, calls, scopes.
 * Names resolve in the function's locals, then the globals, then the
 * builtins (fsSig); a def sees the globals, not an enclosing def's locals. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "eval_int.h"

#include <math.h> /* NAN */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

fs_value *fsE_error(fsE_ctx *E, fs_loc loc, const char *fmt, ...) {
  if (E->reported || E->halt) return NULL;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!strcmp(msg, "out of memory")) strcpy(msg, "MemoryError: out of memory"); /* Python's class */
  if (E->try_depth) { /* a handler may catch it: reported only if none does */
    fsE_hold_error(E, loc, msg);
    return NULL;
  }
  fs_diag *g = fsD_add(E->diags, FS_SEV_ERROR, "runtime", E->src, loc, "%s", msg);
  for (size_t i = E->depth; i-- > 0;)
    fsD_note(g, E->src, E->call_sites[i], "in the call of `%s` from here",
             E->stack[i]->str ? E->stack[i]->str : "<lambda>");
  E->reported = true;
  if (!E->status) E->status = fsE_error_status(msg);
  return NULL;
}

/* A NULL from a value operation: report its fsV_error at loc. */
static fs_value *failed(fsE_ctx *E, fs_loc loc) {
  return fsE_error(E, loc, "%s", fsV_error()[0] ? fsV_error() : "internal error: no message");
}

FILE *fsE_out(fsE_ctx *E) { return E->out; }

/* ---- builtin callables ----------------------------------------------------- */

typedef struct native {
  const fsSig *sig;
  fsE_native fn; /* NULL: needs the runtime, which does not provide it */
  fs_value *self; /* the receiver of a bound method, or NULL */
} native;

static void native_free(void *p) {
  native *n = p;
  fsV_release(n->self);
  free(n);
}

static fs_value *native_call(fsE_ctx *E, fs_value *v, const fsV_args *a);

static char *native_repr(fs_value *v) {
  native *n = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, n->self ? "<built-in method %s>" : "<built-in function %s>",
                 n->self && n->self->type == FSV_OBJ ? strchr(n->sig->name, '.') + 1 : n->sig->name);
  return fsV_buf_take(&b);
}

static const fsV_class native_class = {
  .name = "builtin_function_or_method", .call = native_call, .repr = native_repr,
  .free = native_free,
};

static fs_value *native_value(const fsSig *sig, fs_value *self) {
  native *n = calloc(1, sizeof *n);
  if (!n) {
    fsV_seterr("out of memory");
    return NULL;
  }
  n->sig = sig;
  n->fn = fsE_native_of(sig);
  n->self = fsV_retain(self);
  return fsV_obj(&native_class, n);
}

const fsSig *fsE_native_sig(const fs_value *v) {
  native *n = fsV_objdata(v, &native_class);
  return n && !n->self ? n->sig : NULL;
}

static const char *mask_name(unsigned m, char *buf, size_t len) {
  static const char *names[] = {"None", "bool", "int", "float", "str", "list",
                                "tuple", "dict", "function", "object"};
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < 10; i++)
    if (m & (1u << i)) o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? " or " : "", names[i]);
  return buf;
}

static const fsV_class fn_class;

static unsigned type_bit(const fs_value *v) {
  switch (v->type) {
  case FSV_NONE: return FSSIG_T_NONE;
  case FSV_BOOL: return FSSIG_T_BOOL;
  case FSV_INT: return FSSIG_T_INT;
  case FSV_FLOAT: return FSSIG_T_FLOAT;
  case FSV_STR: return FSSIG_T_STR;
  case FSV_LIST: return FSSIG_T_LIST;
  case FSV_TUPLE: return FSSIG_T_TUPLE;
  case FSV_DICT: return FSSIG_T_DICT;
  default: return v->type == FSV_OBJ && v->u.obj.cls == &fn_class ? FSSIG_T_FUNC : FSSIG_T_OBJ;
  }
}

void fsE_unbind(const fsSig *sig, fs_value **slots) {
  for (size_t i = 0; i < sig->nparams; i++) {
    fsV_release(slots[i]);
    slots[i] = NULL;
  }
}

/* Binds a onto sig; defaults come from `defaults` (a def's values) when
 * given, else from the signature's literal text. */
static int bind(fsE_ctx *E, const fsSig *sig, fs_value *const *defaults, const fsV_args *a,
                fs_value **slots) {
  size_t np = sig->nparams;
  memset(slots, 0, np * sizeof *slots);
  int *pos = malloc((a->npos + a->nkw + 1) * sizeof *pos), *kw = pos + a->npos;
  char *err = NULL;
  if (!pos) {
    fsV_seterr("out of memory");
    return -1;
  }
  if (fsSig_bind(sig, a->npos, a->kwnames, a->nkw, pos, kw, &err) != 0) {
    fsV_seterr("%s", err ? err : "out of memory");
    free(err);
    free(pos);
    return -1;
  }
  for (size_t i = 0; i < np; i++) {
    unsigned f = sig->params[i].flags;
    if ((f & FSSIG_VARARGS) && !(slots[i] = fsV_list(0))) goto fail;
    if ((f & FSSIG_VARKW) && !(slots[i] = fsV_dict())) goto fail;
  }
  for (size_t i = 0; i < a->npos + a->nkw; i++) {
    fs_value *v = i < a->npos ? a->pos[i] : a->kw[i - a->npos];
    int s = pos[i];
    const fsSig_param *p = &sig->params[s];
    if (!(p->types & type_bit(v)) && !((p->types & FSSIG_T_INT) && v->type == FSV_BOOL)) {
      char want[96];
      fsV_seterr("%s() argument '%s' must be %s, not %s", sig->name, p->name,
                 mask_name(p->types, want, sizeof want), fsV_type_name(v));
      goto fail;
    }
    if (p->flags & FSSIG_VARARGS) {
      if (fsV_list_append(slots[s], fsV_retain(v)) < 0) goto fail;
    } else if (p->flags & FSSIG_VARKW) {
      fs_value *k = fsV_cstr(a->kwnames[i - a->npos]);
      int rc = k ? fsV_dict_set(slots[s], k, fsV_retain(v)) : -1;
      fsV_release(k);
      if (rc < 0) goto fail;
    } else {
      slots[s] = fsV_retain(v);
    }
  }
  for (size_t i = 0; i < np; i++) {
    if (sig->params[i].flags & FSSIG_VARARGS) slots[i]->type = FSV_TUPLE; /* same layout */
    if (slots[i]) continue;
    slots[i] = defaults ? fsV_retain(defaults[i]) : fsV_literal(sig->params[i].def);
    if (!slots[i]) goto fail;
  }
  free(pos);
  return 0;
fail:
  free(pos);
  fsE_unbind(sig, slots);
  return -1;
}

int fsE_bind(fsE_ctx *E, const fsSig *sig, const fsV_args *a, fs_value **slots) {
  return bind(E, sig, NULL, a, slots);
}

static fs_value *run_native(fsE_ctx *E, const fsSig *sig, fsE_native fn, fs_value *self,
                            const fsV_args *a) {
  if (!fn) {
    fsV_seterr("fabricscript: `%s` is not available yet: the runtime is not implemented in this build",
               sig->name);
    return NULL;
  }
  fs_value *small[16], **slots = sig->nparams <= 16 ? small : malloc(sig->nparams * sizeof *slots);
  if (!slots) {
    fsV_seterr("out of memory");
    return NULL;
  }
  fs_value *r = NULL;
  if (bind(E, sig, NULL, a, slots) == 0) {
    fsV_clearerr();
    r = fn(E, self, slots, a);
    fsE_unbind(sig, slots);
  }
  if (slots != small) free(slots);
  return r;
}

static fs_value *native_call(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  native *n = v->u.obj.data;
  return run_native(E, n->sig, n->fn, n->self, a);
}

/* ---- def functions and model classes ---------------------------------------- */

/* A def or lambda made inside a call closes over that call's locals and,
 * through the running function's own, over its enclosing calls': envs[0] is
 * the innermost. A closure held (directly or in a container) by the locals it
 * closes over would be a reference cycle, which reference counting never
 * frees; so when a call returns, each live closure over its locals gets a
 * snapshot of just the names its body uses, without closures over them.
 * (Closures defined side by side therefore cannot call each other once the
 * call that made them has returned; docs/language-notes.md.) */
typedef struct func {
  const fs_node *node; /* FS_N_DEF, FS_N_LAMBDA or FS_N_MODEL */
  fsSig sig;
  fsSig_param *params;
  fs_value **defaults; /* per parameter; NULL when required */
  fs_value **envs; size_t nenvs; /* enclosing calls' locals, innermost first (owned) */
  struct func *prev, *next;      /* the live closures (nenvs > 0) */
} func;

static func *live_closures;

static void func_free(void *p) {
  func *f = p;
  for (size_t i = 0; i < f->sig.nparams; i++) fsV_release(f->defaults[i]);
  for (size_t i = 0; i < f->nenvs; i++) fsV_release(f->envs[i]);
  if (f->nenvs) {
    if (f->prev) f->prev->next = f->next;
    else live_closures = f->next;
    if (f->next) f->next->prev = f->prev;
  }
  free(f->envs);
  free(f->defaults);
  free(f->params);
  free(f);
}

static char *func_repr(fs_value *v) {
  func *f = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, f->node->kind == FS_N_MODEL ? "<model %s>" : "<function %s>", f->sig.name);
  return fsV_buf_take(&b);
}

static fs_value *func_call(fsE_ctx *E, fs_value *v, const fsV_args *a);

static const fsV_class fn_class = {
  .name = "function", .call = func_call, .repr = func_repr, .free = func_free,
};

static fs_value *eval(fsE_ctx *E, const fs_node *n);

const fsSig *fsE_func_sig(const fs_value *v) {
  func *f = fsV_objdata(v, &fn_class);
  return f ? &f->sig : NULL;
}

static fs_value *make_func(fsE_ctx *E, const fs_node *n) {
  const fs_node *params = n->kids[0];
  func *f = calloc(1, sizeof *f);
  size_t np = params->nkids;
  if (!f || (np && (!(f->params = calloc(np, sizeof *f->params)) ||
                    !(f->defaults = calloc(np, sizeof *f->defaults))))) {
    if (f) {
      free(f->params);
      free(f);
    }
    return fsE_error(E, n->loc, "out of memory");
  }
  f->node = n;
  f->sig = (fsSig){n->str ? n->str : "<lambda>", FSSIG_FUNC, f->params, np, "any", 0};
  static const unsigned kind_flags[] = {
    [FS_PARAM_PLAIN] = 0, [FS_PARAM_POSONLY] = FSSIG_POSONLY, [FS_PARAM_KWONLY] = FSSIG_KWONLY,
    [FS_PARAM_VARARGS] = FSSIG_VARARGS, [FS_PARAM_VARKW] = FSSIG_VARKW,
  };
  for (size_t i = 0; i < np; i++) {
    const fs_node *p = params->kids[i];
    f->params[i] = (fsSig_param){p->str, FSSIG_T_ANY, p->nkids && p->kids[0] ? "" : NULL, kind_flags[p->op]};
    for (size_t j = 0; j < i; j++)
      if (strcmp(f->params[j].name, p->str) == 0) {
        f->sig.nparams = i;
        func_free(f);
        return fsE_error(E, p->loc, "duplicate argument '%s' in function definition", p->str);
      }
    if (f->params[i].def && !(f->defaults[i] = eval(E, p->kids[0]))) {
      f->sig.nparams = i;
      func_free(f);
      return NULL;
    }
  }
  if (E->frame && E->locals == E->frame && n->kind != FS_N_MODEL) {
    if (!(f->envs = malloc((E->nenvs + 1) * sizeof *f->envs))) {
      func_free(f);
      return fsE_error(E, n->loc, "out of memory");
    }
    f->envs[0] = fsV_retain(E->frame);
    for (size_t i = 0; i < E->nenvs; i++) f->envs[i + 1] = fsV_retain(E->envs[i]);
    f->nenvs = E->nenvs + 1;
    if ((f->next = live_closures)) live_closures->prev = f;
    live_closures = f;
  }
  fs_value *v = fsV_obj(&fn_class, f);
  return v ? v : failed(E, n->loc);
}

/* Whether v is a closure over the dict env. */
static bool closes_over(const fs_value *v, const fs_value *env) {
  const func *g = fsV_objdata(v, &fn_class);
  for (size_t i = 0; g && i < g->nenvs; i++)
    if (g->envs[i] == env) return true;
  return false;
}

/* Adds to snap the entries of env named anywhere in the tree n, but
 * closures over env. */
static int snapshot_names(const fs_node *n, const fs_value *env, fs_value *snap) {
  if (!n) return 0;
  if (n->kind == FS_N_NAME && !fsV_dict_getstr(snap, n->str)) {
    fs_value *v = fsV_dict_getstr(env, n->str);
    if (v && !closes_over(v, env)) {
      fs_value *k = fsV_cstr(n->str);
      int rc = k ? fsV_dict_set(snap, k, fsV_retain(v)) : -1;
      fsV_release(k);
      if (rc < 0) return -1;
    }
  }
  for (uint32_t i = 0; i < n->nkids; i++)
    if (snapshot_names(n->kids[i], env, snap) < 0) return -1;
  return 0;
}

/* The call whose locals are env returns: its live closures keep snapshots. */
static int detach_closures(fs_value *env) {
  for (func *f = live_closures; f; f = f->next)
    for (size_t i = 0; i < f->nenvs; i++) {
      if (f->envs[i] != env) continue;
      fs_value *snap = fsV_dict();
      if (!snap || snapshot_names(f->node, env, snap) < 0) {
        fsV_release(snap);
        return -1;
      }
      f->envs[i] = snap;
      fsV_release(env);
    }
  return 0;
}

static fs_value *set_name(fsE_ctx *E, const char *name, fs_value *v);

static fs_value *func_call(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  func *f = v->u.obj.data;
  for (size_t i = 0; i < E->depth; i++)
    if (E->stack[i] == f->node) { /* the checker's wording, for the cases it cannot see */
      fsV_seterr("recursion is not supported: `%s` calls itself", f->sig.name);
      return NULL;
    }
  if (E->depth == E->cap) {
    size_t cap = E->cap ? 2 * E->cap : 16;
    const fs_node **st = realloc(E->stack, cap * sizeof *st);
    if (st) E->stack = st;
    fs_loc *cs = st ? realloc(E->call_sites, cap * sizeof *cs) : NULL;
    if (!cs) {
      fsV_seterr("out of memory");
      return NULL;
    }
    E->call_sites = cs;
    E->cap = cap;
  }
  size_t np = f->sig.nparams;
  fs_value **slots = malloc((np + 1) * sizeof *slots), *locals = fsV_dict();
  if (!slots || !locals || bind(E, &f->sig, f->defaults, a, slots) < 0) {
    if (!slots || !locals) fsV_seterr("out of memory");
    free(slots);
    fsV_release(locals);
    return NULL;
  }
  fs_value *saved = E->locals, *saved_frame = E->frame, *saved_decls = E->decls;
  fs_value *const *saved_envs = E->envs;
  size_t saved_nenvs = E->nenvs;
  E->locals = E->frame = locals;
  E->envs = f->envs;
  E->nenvs = f->nenvs;
  E->decls = NULL;
  bool ok = true;
  for (size_t i = 0; i < np && ok; i++) ok = set_name(E, f->params[i].name, slots[i]) != NULL;
  fsE_unbind(&f->sig, slots);
  free(slots);
  fs_value *r = NULL;
  if (ok) {
    E->stack[E->depth] = f->node;
    E->call_sites[E->depth++] = a->loc;
    if (f->node->kind == FS_N_MODEL) {
      r = fsE_build_sequence(E, f->node->kids[1], FSM_SEQUENTIAL, f->node->str);
    } else if (f->node->kind == FS_N_LAMBDA) {
      r = eval(E, f->node->kids[1]);
    } else {
      fsE_flow fl = fsE_exec_block(E, f->node->kids[1]);
      r = fl == FSE_ERROR ? NULL : E->retval ? E->retval : fsV_none();
      if (fl == FSE_ERROR) fsV_release(E->retval);
      E->retval = NULL;
    }
    E->depth--;
  } else {
    failed(E, a->loc);
  }
  E->locals = saved;
  E->frame = saved_frame;
  E->envs = saved_envs;
  E->nenvs = saved_nenvs;
  fsV_release(E->decls);
  E->decls = saved_decls;
  if (live_closures && detach_closures(locals) < 0) {
    fsV_release(r);
    r = NULL;
    fsV_seterr("out of memory");
  }
  fsV_release(locals);
  return r;
}

/* ---- names, attributes, calls -------------------------------------------------- */

/* The dict a name's binding lives in for an assignment: the running
 * call's locals, unless `global` or `nonlocal` said otherwise. */
static fs_value *scope_of(fsE_ctx *E, const char *name) {
  fs_value *decl = E->decls ? fsV_dict_getstr(E->decls, name) : NULL;
  if (!decl) return E->locals ? E->locals : E->globals;
  if (decl->type == FSV_BOOL) return E->globals; /* global */
  for (size_t i = 0; i < E->nenvs; i++)          /* nonlocal */
    if (fsV_dict_getstr(E->envs[i], name)) return E->envs[i];
  fsV_seterr("no binding for nonlocal '%s' found", name);
  return NULL;
}

static fs_value *set_name(fsE_ctx *E, const char *name, fs_value *v) {
  fs_value *d = scope_of(E, name), *k = d ? fsV_cstr(name) : NULL;
  int rc = k ? fsV_dict_set(d, k, fsV_retain(v)) : -1;
  fsV_release(k);
  return rc < 0 ? NULL : v;
}

int fsE_set_name(fsE_ctx *E, const char *name, fs_value *v) { return set_name(E, name, v) ? 0 : -1; }

static fs_value *lookup(fsE_ctx *E, const fs_node *n) {
  fs_value *v = E->locals ? fsV_dict_getstr(E->locals, n->str) : NULL;
  for (size_t i = 0; !v && i < E->nenvs; i++) v = fsV_dict_getstr(E->envs[i], n->str);
  if (!v) v = fsV_dict_getstr(E->globals, n->str);
  if (v) return fsV_retain(v);
  if ((v = fsE_builtin(E, n->str))) return v;
  /* the script run is the one Python runs as __main__ (the checker says the same, check.c) */
  if (!*fsV_error() && !strcmp(n->str, "__name__")) return fsV_cstr("__main__");
  if (!*fsV_error()) return fsE_error(E, n->loc, "name '%s' is not defined", n->str);
  return failed(E, n->loc);
}

fs_value *fsE_builtin(fsE_ctx *E, const char *name) {
  fs_value *v = fsV_dict_getstr(E->builtins, name);
  if (v) return fsV_retain(v);
  const fsSig *sig = fsSig_find(name);
  fsV_clearerr();
  if (!sig) return fsE_class_builtin(E, name);
  fs_value *b, *k;
  if ((sig->flags & FSSIG_CONST) || sig->kind == FSSIG_MODULE) { /* float32, math: the value itself, made once */
    b = fsE_native_of(sig) ? fsE_native_of(sig)(E, NULL, NULL, NULL) : NULL;
  } else b = native_value(sig, NULL);
  k = b ? fsV_cstr(name) : NULL;
  if (!k || fsV_dict_set(E->builtins, k, fsV_retain(b)) < 0) {
    fsV_release(k);
    fsV_release(b);
    if (!*fsV_error()) fsV_seterr("out of memory");
    return NULL;
  }
  fsV_release(k);
  return b;
}

fs_value *fsE_method_value(fsE_ctx *E, fs_value *self, const char *name) {
  const fsSig *sig = fsSig_member(fsV_type_name(self), name);
  if (!sig || sig->kind != FSSIG_METHOD) {
    fsV_seterr("'%s' object has no attribute '%s'", fsV_type_name(self), name);
    return NULL;
  }
  return native_value(sig, self);
}

/* obj.name: an attribute row of the sig table, else a bound method. */
static fs_value *getattr(fsE_ctx *E, fs_value *obj, const char *name) {
  fs_value *own = NULL;
  int k = name[0] == '_' && name[1] == '_' ? fsE_type_getattr(E, obj, name, &own) : 0;
  if (!k) k = fsE_instance_getattr(E, obj, name, &own);
  if (!k) k = fsE_module_getattr(E, obj, name, &own);
  if (k) return k > 0 ? own : NULL;
  const fsSig *sig = fsSig_member(fsV_type_name(obj), name);
  if (!sig && (k = fsE_moduledict_getattr(E, obj, name, &own))) return k > 0 ? own : NULL; /* after methods, as torch */
  fsE_native fn = sig && sig->kind == FSSIG_ATTR ? fsE_native_of(sig) : NULL;
  fsV_clearerr();
  return fn ? fn(E, obj, NULL, NULL) : fsE_method_value(E, obj, name);
}

fs_value *fsE_getattr(fsE_ctx *E, fs_value *obj, const char *name) { return getattr(E, obj, name); }

fs_value *fsE_call(fsE_ctx *E, fs_value *callee, const fsV_args *a) {
  if (callee->type == FSV_OBJ && callee->u.obj.cls->call) return callee->u.obj.cls->call(E, callee, a);
  fsV_seterr("'%s' object is not callable", fsV_type_name(callee));
  return NULL;
}

fs_value *fsE_call_method(fsE_ctx *E, fs_value *self, const char *name, const fsV_args *a) {
  fs_value *own = NULL;
  int k = fsE_instance_getattr(E, self, name, &own); /* a script class's method comes first */
  if (k) {
    fs_value *r = k > 0 ? fsE_call(E, own, a) : NULL;
    fsV_release(own);
    return r;
  }
  const fsSig *sig = fsSig_member(fsV_type_name(self), name);
  if (sig && sig->kind == FSSIG_METHOD) return run_native(E, sig, fsE_native_of(sig), self, a);
  /* not a method: an attribute holding a callable */
  fs_value *m = getattr(E, self, name);
  if (!m) return NULL;
  fs_value *r = fsE_call(E, m, a);
  fsV_release(m);
  return r;
}

/* ---- iteration ------------------------------------------------------------------ */

int fsE_iter_begin(fsE_ctx *E, fs_value *v, fsE_iter *it) {
  it->src = fsV_retain(v);
  it->it = NULL;
  it->i = 0;
  if (v->type == FSV_OBJ) {
    if (!v->u.obj.cls->iter) {
      fsV_seterr("'%s' object is not iterable", fsV_type_name(v));
      return -1;
    }
    if (!(it->it = v->u.obj.cls->iter(E, v))) return -1;
    return 0;
  }
  if (v->type <= FSV_FLOAT) {
    fsV_seterr("'%s' object is not iterable", fsV_type_name(v));
    return -1;
  }
  return 0;
}

int fsE_iter_next(fsE_ctx *E, fsE_iter *it, fs_value **out) {
  fs_value *s = it->src;
  if (it->it) return it->it->u.obj.cls->next(E, it->it, out);
  if (s->type == FSV_RANGE) { /* counted in 64 unsigned bits: a range may hold more than INT64_MAX */
    if ((uint64_t)it->i >= fsV_range_count(s)) return 0;
    *out = fsV_int(fsV_range_at(s, it->i++));
    return *out ? 1 : -1;
  }
  int64_t n = s->type == FSV_DICT ? (int64_t)s->u.dict.n : fsV_len(E, s);
  if (it->i >= n) return 0;
  if (s->type == FSV_DICT) {
    *out = fsV_retain(s->u.dict.keys[it->i++]);
    return 1;
  }
  fs_value *idx = fsV_int(it->i++);
  *out = idx ? fsV_index(E, s, idx) : NULL;
  fsV_release(idx);
  return *out ? 1 : -1;
}

void fsE_iter_end(fsE_iter *it) {
  fsV_release(it->src);
  fsV_release(it->it);
  it->src = it->it = NULL;
}

/* ---- expressions ------------------------------------------------------------------ */

/* Python's operators beyond the value layer's: `is` is identity; None and
 * the bools are single objects, and equal ints, floats and strs count as
 * one (CPython shares small ints and a script's equal constants). The other
 * operators are reported. */
static fs_value *python_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b) {
  if (op == FS_OP_IS || op == FS_OP_IS_NOT) {
    bool scalar = a->type == FSV_NONE || a->type == FSV_BOOL || a->type == FSV_INT || a->type == FSV_FLOAT ||
                  a->type == FSV_STR;
    bool same = a == b || (a->type == b->type && scalar && fsV_equal(a, b));
    return fsV_bool(same == (op == FS_OP_IS));
  }
  if ((op == FS_OP_IN || op == FS_OP_NOT_IN) && fsE_is_set(b)) return b->u.obj.cls->binop(E, op, a, b);
  bool ints = (a->type == FSV_INT || a->type == FSV_BOOL) && (b->type == FSV_INT || b->type == FSV_BOOL);
  if (ints && op >= FS_OP_LSHIFT && op <= FS_OP_BITXOR) { /* Python's bitwise operators on ints and bools */
    int64_t x = a->u.i, y = b->u.i;
    if ((op == FS_OP_LSHIFT || op == FS_OP_RSHIFT) && y < 0) {
      fsV_seterr("negative shift count");
      return NULL;
    }
    if (op == FS_OP_LSHIFT && (y >= 63 || (x != 0 && (x > (INT64_MAX >> y) || x < (INT64_MIN >> y))))) {
      fsV_seterr("integer overflow: the result does not fit in 64 bits");
      return NULL;
    }
    bool both_bool = a->type == FSV_BOOL && b->type == FSV_BOOL;
    switch (op) {
    case FS_OP_LSHIFT: return fsV_int(x << y);
    case FS_OP_RSHIFT: return fsV_int(y >= 63 ? (x < 0 ? -1 : 0) : x >> y);
    case FS_OP_BITAND: return both_bool ? fsV_bool(x & y) : fsV_int(x & y);
    case FS_OP_BITOR: return both_bool ? fsV_bool(x | y) : fsV_int(x | y);
    default: return both_bool ? fsV_bool(x ^ y) : fsV_int(x ^ y);
    }
  }
  if (op >= FS_OP_MATMUL && a->type != FSV_OBJ && b->type != FSV_OBJ) { /* objects (tensors) may define them */
    fsV_seterr("unsupported operand type(s) for %s: '%s' and '%s'", fsA_op_text(op),
               fsV_type_name(a), fsV_type_name(b));
    return NULL;
  }
  return fsV_binop(E, op, a, b);
}

static fs_value *eval_fstr(fsE_ctx *E, const fs_node *n) {
  fsV_buf b = {0};
  fsV_buf_put(&b, "", 0);
  for (uint32_t i = 0; i < n->nkids; i++) {
    const fs_node *k = n->kids[i];
    if (k->kind == FS_N_STR) {
      fsV_buf_put(&b, k->str, k->slen);
      continue;
    }
    const char *unsupported = fsA_run_unsupported(k);
    if (unsupported) {
      free(b.s);
      return fsE_error(E, k->kids[1]->loc, "%s is not supported at run time yet", unsupported);
    }
    fs_value *v = eval(E, k->kids[0]);
    if (v && k->op) { /* !r, !a (repr) and !s (str) */
      char *t = k->op == 's' ? fsV_tostr(v) : fsV_repr(v);
      fsV_release(v);
      v = t ? fsV_str_own(t, strlen(t)) : NULL;
      if (!v) failed(E, k->loc);
    }
    if (v && v->type == FSV_OBJ && k->str && *k->str) { /* a tensor formats as its item() */
      fsV_args none = {.loc = k->loc};
      fs_value *item = fsE_call_method(E, v, "item", &none);
      fsV_release(v);
      v = item ? item : failed(E, k->loc);
    }
    char *s = v ? fsV_format(v, k->str) : NULL;
    fsV_release(v);
    if (!s) {
      free(b.s);
      return failed(E, k->loc);
    }
    fsV_buf_puts(&b, s);
    free(s);
  }
  size_t len = b.n;
  char *s = fsV_buf_take(&b);
  fs_value *r = s ? fsV_str_own(s, len) : NULL;
  return r ? r : failed(E, n->loc);
}

/* A call's argument values as they are gathered: positionals, then keywords
 * (names[i] for i >= npos; a `**m`'s names point into m, which held keeps). */
typedef struct call_args {
  fs_value **vals; const char **names; size_t n, cap, npos;
  fs_value *held; /* list of the `**` dicts */
} call_args;

static int push_arg(call_args *c, fs_value *v, const char *name) { /* takes v */
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 8;
    fs_value **vals = realloc(c->vals, cap * sizeof *vals);
    if (vals) c->vals = vals;
    const char **names = vals ? realloc(c->names, cap * sizeof *names) : NULL;
    if (!names) {
      fsV_release(v);
      fsV_seterr("out of memory");
      return -1;
    }
    c->names = names;
    c->cap = cap;
  }
  for (size_t i = c->npos; name && i < c->n; i++)
    if (strcmp(c->names[i], name) == 0) {
      fsV_seterr("got multiple values for keyword argument '%s'", name);
      fsV_release(v);
      return -1;
    }
  c->names[c->n] = name;
  c->vals[c->n++] = v;
  return 0;
}

/* One argument node into c: an expression, `*it`, `name=v` or `**m`. */
static int gather_arg(fsE_ctx *E, const fs_node *k, call_args *c) {
  bool kw = k->kind == FS_N_KWARG;
  fs_value *v = eval(E, kw || k->kind == FS_N_STARRED ? k->kids[0] : k);
  if (!v) return -1;
  if (k->kind != FS_N_STARRED) return push_arg(c, v, kw ? k->str : NULL) < 0 ? (failed(E, k->loc), -1) : 0;
  int rc = 0;
  if (k->op == 2) { /* **m: its str keys as keywords */
    if (v->type != FSV_DICT) {
      fsE_error(E, k->loc, "argument after ** must be a mapping, not %s", fsV_type_name(v));
      fsV_release(v);
      return -1;
    }
    for (size_t i = 0; rc == 0 && i < v->u.dict.n; i++) {
      if (v->u.dict.keys[i]->type != FSV_STR) {
        fsE_error(E, k->loc, "keywords must be strings");
        rc = -1;
      } else if (push_arg(c, fsV_retain(v->u.dict.vals[i]), v->u.dict.keys[i]->u.str.s) < 0) {
        rc = -1;
        failed(E, k->loc);
      }
    }
    if (rc == 0 && (c->held || (c->held = fsV_list(0))) && fsV_list_append(c->held, v) == 0) return 0;
    if (rc == 0) failed(E, k->loc);
    return -1;
  }
  fsE_iter it; /* *it: each item a positional */
  fs_value *item;
  int st = 0;
  if (fsE_iter_begin(E, v, &it) < 0) {
    fsE_error(E, k->loc, "argument after * must be an iterable, not %s", fsV_type_name(v));
    rc = -1;
  }
  while (rc == 0 && (st = fsE_iter_next(E, &it, &item)) == 1) rc = push_arg(c, item, NULL);
  if (rc == 0 && st < 0) rc = -1;
  if (rc < 0) failed(E, k->loc);
  fsE_iter_end(&it);
  fsV_release(v);
  return rc;
}

static fs_value *eval_call(fsE_ctx *E, const fs_node *n) {
  const fs_node *callee = n->kids[0];
  call_args c = {0};
  fs_value *self = NULL, *fn = NULL, *r = NULL;
  if (callee->kind == FS_N_ATTR) self = eval(E, callee->kids[0]);
  else fn = eval(E, callee);
  if (!self && !fn) goto done;
  /* positionals first, then keywords, in source order within each */
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t i = 1; i < n->nkids; i++) {
      const fs_node *k = n->kids[i];
      bool kw = k->kind == FS_N_KWARG || (k->kind == FS_N_STARRED && k->op == 2);
      if (kw == (pass == 1) && gather_arg(E, k, &c) < 0) goto done;
    }
    if (pass == 0) c.npos = c.n;
  }
  fsV_args a = {c.vals, c.npos, c.names + c.npos, c.vals + c.npos, c.n - c.npos, n->loc};
  const fs_node *outer = E->call;
  E->call = n;
  r = self ? fsE_call_method(E, self, callee->str, &a) : fsE_call(E, fn, &a);
  E->call = outer;
  if (!r) failed(E, self ? callee->name_loc : n->loc);
done:
  for (size_t i = 0; i < c.n; i++) fsV_release(c.vals[i]);
  free(c.vals);
  free(c.names);
  fsV_release(c.held);
  fsV_release(self);
  fsV_release(fn);
  return r;
}

static fs_value *eval_seq(fsE_ctx *E, const fs_node *n) {
  bool list = n->kind == FS_N_LIST;
  fs_value *r = list ? fsV_list(n->nkids) : fsV_tuple(n->nkids);
  if (!r) return failed(E, n->loc);
  for (uint32_t i = 0; i < n->nkids; i++) {
    fs_value *v = eval(E, n->kids[i]);
    if (!v) {
      fsV_release(r);
      return NULL;
    }
    if (list) fsV_list_append(r, v); /* capacity reserved */
    else fsV_seq_set(r, i, v);
  }
  return r;
}

static fs_value *eval_dict(fsE_ctx *E, const fs_node *n) {
  fs_value *d = fsV_dict();
  if (!d) return failed(E, n->loc);
  for (uint32_t i = 0; i + 1 < n->nkids; i += 2) {
    fs_value *k = eval(E, n->kids[i]), *v = k ? eval(E, n->kids[i + 1]) : NULL;
    int rc = v ? fsV_dict_set(d, k, v) : -1;
    fsV_release(k);
    if (rc < 0) {
      fsV_release(d);
      return v ? failed(E, n->kids[i]->loc) : NULL;
    }
  }
  return d;
}

static fs_value *eval_index(fsE_ctx *E, const fs_node *n) {
  fs_value *obj = eval(E, n->kids[0]), *r = NULL;
  if (!obj) return NULL;
  const fs_node *ix = n->kids[1];
  if (ix->kind == FS_N_SLICE && obj->type != FSV_OBJ) { /* an object gets a slice value (lib_index.c) */
    fs_value *b[3] = {NULL, NULL, NULL};
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++)
      if (i < (int)ix->nkids && ix->kids[i]) ok = (b[i] = eval(E, ix->kids[i])) != NULL;
    if (ok && !(r = fsV_slice(obj, b[0], b[1], b[2]))) failed(E, n->loc);
    for (int i = 0; i < 3; i++) fsV_release(b[i]);
  } else {
    fs_value *k = eval(E, ix);
    if (k && !(r = fsV_index(E, obj, k))) failed(E, n->loc);
    fsV_release(k);
  }
  fsV_release(obj);
  return r;
}

fs_value *fsE_eval(fsE_ctx *E, const fs_node *n) { return eval(E, n); }

static int assign(fsE_ctx *E, const fs_node *t, fs_value *v);

/* The comprehension's `for` clause i (kids[2 + i]) and the ones after it,
 * adding each element to out (a list or a dict). */
static int comp_clause(fsE_ctx *E, const fs_node *n, uint32_t i, fs_value *out) {
  if (2 + i == n->nkids) {
    fs_value *k = eval(E, n->kids[0]), *v = k && n->kids[1] ? eval(E, n->kids[1]) : NULL;
    int rc = !k || (n->kids[1] && !v) ? -1
             : out->type == FSV_DICT ? fsV_dict_set(out, k, v) : fsV_list_append(out, fsV_retain(k));
    if (rc < 0 && k && (!n->kids[1] || v)) failed(E, n->kids[0]->loc);
    fsV_release(k);
    return rc;
  }
  const fs_node *f = n->kids[2 + i];
  fs_value *src = eval(E, f->kids[1]), *item;
  fsE_iter it;
  if (!src) return -1;
  int rc = fsE_iter_begin(E, src, &it), st = 0;
  if (rc < 0) failed(E, f->kids[1]->loc);
  while (rc == 0 && (st = fsE_iter_next(E, &it, &item)) == 1) {
    rc = assign(E, f->kids[0], item);
    fsV_release(item);
    bool keep = true;
    for (uint32_t c = 2; rc == 0 && keep && c < f->nkids; c++) {
      fs_value *cv = eval(E, f->kids[c]);
      if (!cv) rc = -1;
      else keep = fsV_truthy(cv);
      fsV_release(cv);
    }
    if (rc == 0 && keep) rc = comp_clause(E, n, i + 1, out);
  }
  if (rc == 0 && st < 0) rc = -1, failed(E, f->kids[1]->loc);
  fsE_iter_end(&it);
  fsV_release(src);
  return rc;
}

/* [x for ...], {k: v for ...}, and a generator expression, which runs at
 * once into a list (what list(), sum(), tuple() and a for loop consume).
 * Its names live in a scope of their own, a copy of the enclosing one. */
static fs_value *eval_comp(fsE_ctx *E, const fs_node *n) {
  for (uint32_t i = 2; i < n->nkids; i++) {
    const char *unsupported = fsA_run_unsupported(n->kids[i]);
    if (unsupported) return fsE_error(E, n->kids[i]->loc, "%s is not supported at run time yet", unsupported);
  }
  fs_value *out = n->op == FS_COMP_DICT ? fsV_dict() : fsV_list(0), *scope = fsV_dict(), *saved = E->locals;
  for (size_t i = 0; out && scope && saved && i < saved->u.dict.n; i++)
    if (fsV_dict_set(scope, saved->u.dict.keys[i], fsV_retain(saved->u.dict.vals[i])) < 0) fsV_release(scope), scope = NULL;
  if (!out || !scope) {
    fsV_release(out);
    fsV_release(scope);
    return fsE_error(E, n->loc, "out of memory");
  }
  fs_value *saved_frame = E->frame;
  if (saved && saved == E->frame) E->frame = scope; /* a lambda here closes over the scope */
  E->locals = scope;
  int rc = comp_clause(E, n, 0, out);
  E->locals = saved;
  E->frame = saved_frame;
  if (live_closures && detach_closures(scope) < 0 && rc == 0) rc = -1, fsE_error(E, n->loc, "out of memory");
  fsV_release(scope);
  if (rc == 0 && n->op == FS_COMP_SET) { /* {x for ...}: the elements collected as a list first */
    fs_value *set = fsE_set_of(out);
    fsV_release(out);
    if (!(out = set)) rc = -1, failed(E, n->loc);
  }
  if (rc < 0) {
    fsV_release(out);
    return NULL;
  }
  return out;
}

static fs_value *eval(fsE_ctx *E, const fs_node *n) {
  fs_value *r = NULL;
  const char *unsupported = fsA_run_unsupported(n);
  if (unsupported) return fsE_error(E, n->loc, "%s is not supported at run time yet", unsupported);
  switch (n->kind) {
  case FS_N_NAME: return lookup(E, n);
  case FS_N_INT: r = fsV_int(n->ival); break;
  case FS_N_FLOAT: r = fsV_float(n->fval); break;
  case FS_N_STR: r = fsV_str(n->str, n->slen); break;
  case FS_N_TRUE: return fsV_bool(true);
  case FS_N_FALSE: return fsV_bool(false);
  case FS_N_NONE: return fsV_none();
  case FS_N_FSTR: return eval_fstr(E, n);
  case FS_N_LIST: case FS_N_TUPLE: return eval_seq(E, n);
  case FS_N_DICT: return eval_dict(E, n);
  case FS_N_SET: {
    fs_value *items = eval_seq(E, n);
    if (!items) return NULL;
    r = fsE_set_of(items);
    fsV_release(items);
    break;
  }
  case FS_N_CALL: return eval_call(E, n);
  case FS_N_INDEX: return eval_index(E, n);
  case FS_N_SLICE: return fsE_slice_value(E, n); /* an object's subscript: x[1:3, None] */
  case FS_N_ELLIPSIS: return fsE_ellipsis_value();
  case FS_N_COMP: return eval_comp(E, n);
  case FS_N_LAMBDA: return make_func(E, n);
  case FS_N_UNARY: {
    fs_value *v = eval(E, n->kids[0]);
    if (!v) return NULL;
    if (n->op == FS_OP_INVERT && v->type != FSV_OBJ) { /* ints and bools; an object (a tensor) may define it */
      r = v->type == FSV_INT || v->type == FSV_BOOL ? fsV_int(~v->u.i) : NULL;
      if (!r) fsV_seterr("bad operand type for unary ~: '%s'", fsV_type_name(v));
    } else {
      r = fsV_unop(E, n->op, v);
    }
    fsV_release(v);
    break;
  }
  case FS_N_BINARY: {
    fs_value *a = eval(E, n->kids[0]);
    if (!a) return NULL;
    if (n->op == FS_OP_AND || n->op == FS_OP_OR) {
      if (fsV_truthy(a) == (n->op == FS_OP_OR)) return a;
      fsV_release(a);
      return eval(E, n->kids[1]);
    }
    fs_value *b = eval(E, n->kids[1]);
    if (b) r = python_binop(E, n->op, a, b);
    fsV_release(a);
    if (!b) return NULL;
    fsV_release(b);
    break;
  }
  case FS_N_COMPARE: { /* a < b < c: each operand once, stopping at the first false link */
    fs_value *a = eval(E, n->kids[0]);
    for (uint32_t i = 1; a && i < n->nkids; i++) {
      fs_value *b = eval(E, n->kids[i]);
      r = b ? python_binop(E, (fs_op)n->str[i - 1], a, b) : NULL;
      fsV_release(a);
      a = b;
      if (!r) {
        bool evaluated = b != NULL;
        fsV_release(b);
        return evaluated ? failed(E, n->kids[i]->loc) : NULL;
      }
      if (i + 1 == n->nkids || !fsV_truthy(r)) break;
      fsV_release(r);
      r = NULL;
    }
    fsV_release(a);
    return r;
  }
  case FS_N_BIGINT: return fsE_error(E, n->loc, "integer literal too large (integers are 64-bit)");
  case FS_N_COND: {
    fs_value *c = eval(E, n->kids[0]);
    if (!c) return NULL;
    bool t = fsV_truthy(c);
    fsV_release(c);
    return eval(E, n->kids[t ? 1 : 2]);
  }
  case FS_N_NAMEDEXPR: { /* (n := v): binds n in the running scope, and is v */
    fs_value *v = eval(E, n->kids[1]);
    if (v && assign(E, n->kids[0], v) < 0) fsV_release(v), v = NULL;
    return v;
  }
  case FS_N_ATTR: {
    fs_value *o = eval(E, n->kids[0]);
    if (!o) return NULL;
    E->attr_loc = n->name_loc;
    r = getattr(E, o, n->str);
    fsV_release(o);
    return r ? r : failed(E, n->name_loc);
  }
  default:
    if (n->kind > FS_N_ERROR) /* Python's constructs (ast.h lists them after ERROR) */
      return fsE_error(E, n->loc, "%s is not supported at run time yet", fsA_kind_name(n->kind));
    return fsE_error(E, n->loc, "%s cannot be evaluated here", fsA_kind_name(n->kind));
  }
  return r ? r : failed(E, n->loc);
}

/* ---- statements -------------------------------------------------------------- */

static int unpack(fsE_ctx *E, const fs_node *t, fs_value *v) {
  fsE_iter it;
  fs_value **items = calloc(t->nkids + 1, sizeof *items);
  size_t got = 0;
  int rc = -1;
  if (!items) {
    fsE_error(E, t->loc, "out of memory");
    return -1;
  }
  if (fsE_iter_begin(E, v, &it) < 0) {
    fsE_iter_end(&it);
    fsE_error(E, t->loc, "cannot unpack non-iterable %s object", fsV_type_name(v));
    free(items);
    return -1;
  }
  fs_value *extra = NULL;
  int st;
  while (got < t->nkids && (st = fsE_iter_next(E, &it, &items[got])) == 1) got++;
  if (got == t->nkids && (st = fsE_iter_next(E, &it, &extra)) == 1)
    fsE_error(E, t->loc, "too many values to unpack (expected %u)", t->nkids);
  else if (st < 0)
    failed(E, t->loc);
  else if (got < t->nkids)
    fsE_error(E, t->loc, "not enough values to unpack (expected %u, got %zu)", t->nkids, got);
  else
    rc = 0;
  for (size_t i = 0; rc == 0 && i < got; i++) rc = assign(E, t->kids[i], items[i]);
  for (size_t i = 0; i < got; i++) fsV_release(items[i]);
  fsV_release(extra);
  fsE_iter_end(&it);
  free(items);
  return rc;
}

/* a, *rest, z = v: the starred target (kids[star]) takes a list of the middle */
static int unpack_starred(fsE_ctx *E, const fs_node *t, uint32_t star, fs_value *v) {
  fs_value *all = fsV_list(0), *item;
  fsE_iter it;
  int rc = all ? fsE_iter_begin(E, v, &it) : -1, st = 0;
  if (!all) return fsE_error(E, t->loc, "out of memory"), -1;
  if (rc < 0) fsE_error(E, t->loc, "cannot unpack non-iterable %s object", fsV_type_name(v));
  while (rc == 0 && (st = fsE_iter_next(E, &it, &item)) == 1) rc = fsV_list_append(all, item);
  if (rc == 0 && st < 0) rc = -1;
  if (rc < 0) failed(E, t->loc);
  fsE_iter_end(&it);
  size_t n = all->u.seq.n, after = t->nkids - 1 - star;
  if (rc == 0 && n < t->nkids - 1) {
    fsE_error(E, t->loc, "not enough values to unpack (expected at least %u, got %zu)", t->nkids - 1, n);
    rc = -1;
  }
  for (uint32_t i = 0; rc == 0 && i < t->nkids; i++) {
    if (i != star) {
      rc = assign(E, t->kids[i], all->u.seq.items[i < star ? i : n - (t->nkids - i)]);
      continue;
    }
    fs_value *mid = fsV_slice(all, NULL, NULL, NULL);
    if (mid) { /* the middle: drop the heads and tails of the copy */
      for (size_t j = 0; j < star; j++) fsV_release(mid->u.seq.items[j]);
      for (size_t j = n - after; j < n; j++) fsV_release(mid->u.seq.items[j]);
      memmove(mid->u.seq.items, mid->u.seq.items + star, (n - after - star) * sizeof *mid->u.seq.items);
      mid->u.seq.n = n - after - star;
    }
    rc = mid ? assign(E, t->kids[i]->kids[0], mid) : (failed(E, t->loc), -1);
    fsV_release(mid);
  }
  fsV_release(all);
  return rc;
}

static int assign(fsE_ctx *E, const fs_node *t, fs_value *v) {
  switch (t->kind) {
  case FS_N_NAME:
    return set_name(E, t->str, v) ? 0 : (failed(E, t->loc), -1);
  case FS_N_TUPLE:
  case FS_N_LIST:
    for (uint32_t i = 0; i < t->nkids; i++)
      if (t->kids[i]->kind == FS_N_STARRED) return unpack_starred(E, t, i, v);
    return unpack(E, t, v);
  case FS_N_ATTR: {
    fs_value *o = eval(E, t->kids[0]);
    if (!o) return -1;
    int rc = -1;
    if (o->type == FSV_OBJ && o->u.obj.cls->setattr) {
      fsV_clearerr();
      E->attr_loc = t->name_loc;
      rc = o->u.obj.cls->setattr(E, o, t->str, v);
      if (rc < 0) failed(E, t->name_loc);
    } else {
      fsE_error(E, t->name_loc, "'%s' object attribute '%s' cannot be set", fsV_type_name(o), t->str);
    }
    fsV_release(o);
    return rc;
  }
  case FS_N_INDEX: {
    fs_value *o = eval(E, t->kids[0]), *k = o ? eval(E, t->kids[1]) : NULL;
    int rc = -1;
    if (!k) {
    } else if ((o->type == FSV_DICT || o->type == FSV_LIST) && fsV_reaches(v, o)) {
      fsE_error(E, t->loc, "a container cannot hold itself (reference cycles are not supported)");
    } else if (o->type == FSV_DICT) {
      if ((rc = fsV_dict_set(o, k, fsV_retain(v))) < 0) failed(E, t->loc);
    } else if (o->type == FSV_LIST) {
      int64_t n = (int64_t)o->u.seq.n, i = k->type == FSV_INT ? k->u.i : k->type == FSV_BOOL ? k->u.b : 0;
      if (k->type != FSV_INT && k->type != FSV_BOOL)
        fsE_error(E, t->loc, "list indices must be integers, not %s", fsV_type_name(k));
      else if ((i < 0 ? i + n : i) < 0 || (i < 0 ? i + n : i) >= n)
        fsE_error(E, t->loc, "list assignment index out of range");
      else {
        i = i < 0 ? i + n : i;
        fsV_release(o->u.seq.items[i]);
        o->u.seq.items[i] = fsV_retain(v);
        rc = 0;
      }
    } else if (o->type == FSV_OBJ && o->u.obj.cls->setitem) {
      fsV_clearerr();
      fs_value *r = o->u.obj.cls->setitem(E, o, k, v);
      if (!r) failed(E, t->loc);
      else if (r == o) rc = 0;
      else rc = assign(E, t->kids[0], r); /* written out of place: the target holds the new value */
      fsV_release(r);
    } else {
      fsE_error(E, t->loc, "'%s' object does not support item assignment", fsV_type_name(o));
    }
    fsV_release(o);
    fsV_release(k);
    return rc;
  }
  default:
    fsE_error(E, t->loc, "cannot assign to %s", fsA_kind_name(t->kind));
    return -1;
  }
}

static fsE_flow exec(fsE_ctx *E, const fs_node *s);

/* Ctrl-C: every loop looks once per iteration */
static bool interrupted(fsE_ctx *E, const fs_node *s) {
  if (!fsE_interrupt) return false;
  fsE_interrupt = 0;
  fsE_error(E, s->loc, "KeyboardInterrupt");
  return true;
}

static fsE_flow exec_for(fsE_ctx *E, const fs_node *s) {
  fs_value *src = eval(E, s->kids[1]);
  if (!src) return FSE_ERROR;
  fsE_iter it;
  fsE_flow fl = FSE_OK;
  int64_t saved_round = E->loop_round, saved_rounds = E->loop_rounds, round = 0;
  if (fsE_iter_begin(E, src, &it) < 0) {
    failed(E, s->kids[1]->loc);
    fl = FSE_ERROR;
  }
  fs_value *item;
  int st;
  while (fl == FSE_OK && (st = fsE_iter_next(E, &it, &item)) != 0) {
    if (st < 0) {
      failed(E, s->kids[1]->loc);
      fl = FSE_ERROR;
      break;
    }
    int rc = assign(E, s->kids[0], item);
    fsV_release(item);
    if (src->type == FSV_RANGE) { /* `for epoch in range(n)`: loaders inside show "epoch k/n" */
      E->loop_round = round++;
      uint64_t rounds = fsV_range_count(src);
      E->loop_rounds = rounds > INT64_MAX ? INT64_MAX : (int64_t)rounds;
    }
    fl = rc < 0 ? FSE_ERROR : fsE_exec_block(E, s->kids[2]);
    if (fl == FSE_CONTINUE) fl = FSE_OK;
    if (fl == FSE_OK && interrupted(E, s)) fl = FSE_ERROR;
  }
  E->loop_round = saved_round;
  E->loop_rounds = saved_rounds;
  fsE_iter_end(&it);
  fsV_release(src);
  if (fl == FSE_BREAK) return FSE_OK;
  return fl == FSE_OK && s->nkids > 3 && s->kids[3] ? fsE_exec_block(E, s->kids[3]) : fl; /* for ... else */
}

/* while cond: body [else: ...] -- the else runs when cond turns false, not after a break */
static fsE_flow exec_while(fsE_ctx *E, const fs_node *s) {
  fsE_flow fl = FSE_OK;
  for (;;) {
    fs_value *c = eval(E, s->kids[0]);
    if (!c) return FSE_ERROR;
    bool go = fsV_truthy(c);
    fsV_release(c);
    if (!go) break;
    fl = fsE_exec_block(E, s->kids[1]);
    if (fl == FSE_CONTINUE) fl = FSE_OK;
    if (fl == FSE_OK && interrupted(E, s)) fl = FSE_ERROR;
    if (fl != FSE_OK) break;
  }
  if (fl == FSE_BREAK) return FSE_OK;
  return fl == FSE_OK && s->kids[2] ? fsE_exec_block(E, s->kids[2]) : fl;
}

static fsE_flow exec_with(fsE_ctx *E, const fs_node *s) {
  fs_value *ctx = eval(E, s->kids[0]);
  if (!ctx) return FSE_ERROR;
  const fsV_class *c = ctx->type == FSV_OBJ ? ctx->u.obj.cls : NULL;
  if (!c || !c->enter || !c->exit) {
    fsE_error(E, s->kids[0]->loc, "'%s' object does not support the context manager protocol",
              fsV_type_name(ctx));
    fsV_release(ctx);
    return FSE_ERROR;
  }
  fsV_clearerr();
  fs_value *as = c->enter(E, ctx);
  fsE_flow fl = FSE_ERROR;
  if (!as) failed(E, s->kids[0]->loc);
  else if (!s->kids[1] || assign(E, s->kids[1], as) == 0) fl = fsE_exec_block(E, s->kids[2]);
  fsV_release(as);
  /* exit restores what enter changed, even when the body failed */
  if (as && c->exit(E, ctx) < 0 && fl != FSE_ERROR) {
    failed(E, s->kids[0]->loc);
    fl = FSE_ERROR;
  }
  fsV_release(ctx);
  return fl;
}

static fsE_flow exec_assert(fsE_ctx *E, const fs_node *s) {
  fs_value *c = eval(E, s->kids[0]);
  if (!c) return FSE_ERROR;
  bool ok = fsV_truthy(c);
  fsV_release(c);
  if (ok) return FSE_OK;
  if (s->nkids < 2 || !s->kids[1]) return fsE_error(E, s->loc, "AssertionError"), FSE_ERROR;
  fs_value *m = eval(E, s->kids[1]);
  char *t = m ? fsV_tostr(m) : NULL;
  if (m && !t) failed(E, s->loc);
  if (t) fsE_error(E, s->loc, "AssertionError: %s", t);
  free(t);
  fsV_release(m);
  return FSE_ERROR;
}

/* Binds a def or model declaration's name: `@d1 @d2 def f` binds
 * d1(d2(f)), each decorator evaluated before the def, as Python does. */
static fsE_flow exec_def(fsE_ctx *E, const fs_node *s) {
  const fs_node *decos = s->kind == FS_N_DEF && s->nkids > 2 ? s->kids[2] : NULL;
  uint32_t nd = decos ? decos->nkids : 0;
  fs_value **d = nd ? calloc(nd, sizeof *d) : NULL;
  if (nd && !d) return fsE_error(E, s->loc, "out of memory"), FSE_ERROR;
  uint32_t got = 0;
  while (got < nd && (d[got] = eval(E, decos->kids[got]))) got++;
  fs_value *f = got == nd ? make_func(E, s) : NULL;
  for (uint32_t i = got; f && i-- > 0;) {
    fs_value *arg[1] = {f};
    fsV_args a = {.pos = arg, .npos = 1, .loc = decos->kids[i]->loc};
    fs_value *g = fsE_call(E, d[i], &a);
    fsV_release(f);
    f = g ? g : failed(E, decos->kids[i]->loc);
  }
  for (uint32_t i = 0; i < got; i++) fsV_release(d[i]);
  free(d);
  if (!f) return FSE_ERROR;
  fs_value *ok = set_name(E, s->str, f);
  fsV_release(f);
  return ok ? FSE_OK : (failed(E, s->name_loc), FSE_ERROR);
}

/* `global a, b` / `nonlocal a, b`: later assignments in this call bind
 * the names in the globals / the nearest enclosing call's locals. */
static fsE_flow exec_scope_decl(fsE_ctx *E, const fs_node *s) {
  bool global = s->kind == FS_N_GLOBAL;
  if (!E->locals) return FSE_OK; /* at module level both say what is already true */
  for (uint32_t i = 0; i < s->nkids; i++) {
    const char *name = s->kids[i]->str;
    size_t k = 0;
    while (!global && k < E->nenvs && !fsV_dict_getstr(E->envs[k], name)) k++;
    if (!global && k == E->nenvs)
      return fsE_error(E, s->kids[i]->loc, "no binding for nonlocal '%s' found", name), FSE_ERROR;
    fs_value *key = (E->decls || (E->decls = fsV_dict())) ? fsV_cstr(name) : NULL;
    fs_value *mark = global ? fsV_bool(true) : fsV_int(2);
    int rc = key && mark ? fsV_dict_set(E->decls, key, mark) : (fsV_release(mark), -1);
    fsV_release(key);
    if (rc < 0) return fsE_error(E, s->loc, "out of memory"), FSE_ERROR;
  }
  return FSE_OK;
}

/* A layer block outside a model body, or a statement that produced a layer. */
static fsE_flow exec_layer_block(fsE_ctx *E, const fs_node *s) {
  if (!E->building)
    return fsE_error(E, s->loc, "`%s` is only allowed in a model body",
                     s->kind == FS_N_REPEAT ? "repeat" : "residual"), FSE_ERROR;
  fs_value *m;
  if (s->kind == FS_N_REPEAT) {
    fs_value *n = eval(E, s->kids[0]);
    if (!n) return FSE_ERROR;
    if (n->type != FSV_INT) {
      fsE_error(E, s->kids[0]->loc, "repeat count must be an int, not %s", fsV_type_name(n));
      fsV_release(n);
      return FSE_ERROR;
    }
    m = fsE_build_repeat(E, n->u.i, s->kids[1]);
    fsV_release(n);
  } else {
    m = fsE_build_sequence(E, s->kids[0], FSM_RESIDUAL, NULL);
  }
  if (!m) return FSE_ERROR;
  int rc = fsE_append_layer(E, s->str, m);
  fsV_release(m);
  return rc > 0 ? FSE_OK : (failed(E, s->loc), FSE_ERROR);
}

static fsE_flow exec(fsE_ctx *E, const fs_node *s) {
  const char *unsupported = fsA_run_unsupported(s);
  if (unsupported) return fsE_error(E, s->loc, "%s is not supported at run time yet", unsupported), FSE_ERROR;
  switch (s->kind) {
  case FS_N_EXPR: {
    fs_value *v = eval(E, s->kids[0]);
    if (!v) return FSE_ERROR;
    int rc = E->building ? fsE_append_layer(E, NULL, v) : 0;
    fsV_release(v);
    return rc < 0 ? (failed(E, s->loc), FSE_ERROR) : FSE_OK;
  }
  case FS_N_ASSIGN: {
    fs_value *v = eval(E, s->kids[1]);
    if (!v) return FSE_ERROR;
    int rc = 0;
    if (E->building && s->kids[0]->kind == FS_N_NAME) rc = fsE_append_layer(E, s->kids[0]->str, v);
    if (rc < 0) failed(E, s->loc);
    else if (rc == 0) rc = assign(E, s->kids[0], v); /* not a layer: a local of the body */
    for (uint32_t i = 2; rc >= 0 && i < s->nkids; i++) rc = assign(E, s->kids[i], v); /* `a = b = v` */
    fsV_release(v);
    return rc < 0 ? FSE_ERROR : FSE_OK;
  }
  case FS_N_AUGASSIGN: {
    const fs_node *t = s->kids[0];
    if (t->kind != FS_N_NAME && t->kind != FS_N_ATTR && t->kind != FS_N_INDEX)
      return fsE_error(E, t->loc, "illegal expression for augmented assignment"), FSE_ERROR;
    fs_value *cur = eval(E, t), *rhs = cur ? eval(E, s->kids[1]) : NULL, *r = NULL;
    bool refused = false; /* the in-place form failed (not merely absent) */
    if (rhs && cur->type == FSV_OBJ && cur->u.obj.cls->ibinop) { /* in place, as Python's __iadd__ */
      fsV_clearerr();
      r = cur->u.obj.cls->ibinop(E, s->op, cur, rhs);
      if ((refused = !r && fsV_error()[0])) failed(E, s->loc);
    }
    if (rhs && !r && !refused && !(r = python_binop(E, s->op, cur, rhs))) failed(E, s->loc); /* `cur op rhs` */
    int rc = r ? assign(E, t, r) : -1;
    fsV_release(cur);
    fsV_release(rhs);
    fsV_release(r);
    return rc < 0 ? FSE_ERROR : FSE_OK;
  }
  case FS_N_IF: {
    fs_value *c = eval(E, s->kids[0]);
    if (!c) return FSE_ERROR;
    bool t = fsV_truthy(c);
    fsV_release(c);
    if (t) return fsE_exec_block(E, s->kids[1]);
    return s->kids[2] ? exec(E, s->kids[2]) : FSE_OK;
  }
  case FS_N_BLOCK: return fsE_exec_block(E, s);
  case FS_N_FOR: return exec_for(E, s);
  case FS_N_WHILE: return exec_while(E, s);
  case FS_N_WITH: return exec_with(E, s);
  case FS_N_ANNASSIGN: {
    if (!s->kids[2]) return FSE_OK; /* `x: int` declares, binds nothing */
    fs_value *v = eval(E, s->kids[2]);
    int rc = v ? assign(E, s->kids[0], v) : -1;
    fsV_release(v);
    return rc < 0 ? FSE_ERROR : FSE_OK;
  }
  case FS_N_DEF: return exec_def(E, s);
  case FS_N_MODEL: return exec_def(E, s);
  case FS_N_CLASS: return fsE_exec_class(E, s);
  case FS_N_RETURN:
    if (!E->depth) return fsE_error(E, s->loc, "'return' outside function"), FSE_ERROR;
    E->retval = s->nkids && s->kids[0] ? eval(E, s->kids[0]) : fsV_none();
    return E->retval ? FSE_RETURN : FSE_ERROR;
  case FS_N_GLOBAL:
  case FS_N_NONLOCAL: return exec_scope_decl(E, s);
  case FS_N_IMPORT:
  case FS_N_IMPORTFROM: return fsE_exec_import(E, s);
  case FS_N_BREAK: return FSE_BREAK;
  case FS_N_CONTINUE: return FSE_CONTINUE;
  case FS_N_PASS: return FSE_OK;
  case FS_N_ASSERT: return exec_assert(E, s);
  case FS_N_TRY: return fsE_exec_try(E, s);
  case FS_N_RAISE: return fsE_exec_raise(E, s);
  case FS_N_REPEAT:
  case FS_N_RESIDUAL: return exec_layer_block(E, s);
  default:
    if (s->kind > FS_N_ERROR) /* Python's statements (ast.h lists them after ERROR) */
      return fsE_error(E, s->loc, "%s is not supported at run time yet", fsA_kind_name(s->kind)), FSE_ERROR;
    return fsE_error(E, s->loc, "%s cannot be executed", fsA_kind_name(s->kind)), FSE_ERROR;
  }
}

fsE_flow fsE_exec_block(fsE_ctx *E, const fs_node *b) {
  for (uint32_t i = 0; i < b->nkids; i++) {
    fsE_flow f = exec(E, b->kids[i]);
    if (f != FSE_OK) return f;
  }
  return FSE_OK;
}

/* ---- entry point --------------------------------------------------------------- */

/* A session keeps one context across entries: the REPL runs each accepted
 * entry in the globals the earlier ones left. */
struct fsE_session {
  fsE_ctx E;
};

volatile sig_atomic_t fsE_interrupt;

fsE_session *fsE_session_new(const fsE_options *opt) {
  fsE_session *S = calloc(1, sizeof *S);
  if (!S) return NULL;
  fsE_ctx *E = &S->E;
  *E = (fsE_ctx){.opt = opt, .out = opt->out ? opt->out : stdout, .device = FS_DEV_CPU,
                  .last_loss = NAN};
  E->globals = fsV_dict();
  E->builtins = fsV_dict();
  E->defines = calloc(opt->ndefines + 1, sizeof *E->defines);
  if (!E->globals || !E->builtins || !E->defines) {
    fsE_session_free(S);
    return NULL;
  }
  for (size_t i = 0; i < opt->ndefines; i++) {
    const char *d = opt->defines[i], *eq = strchr(d, '=');
    E->defines[i] = (fsE_define){d, eq ? (size_t)(eq - d) : strlen(d), eq ? eq + 1 : ""};
  }
  E->ndefines = opt->ndefines;
  return S;
}

int fsE_session_exec(fsE_session *S, const fs_source *src, fs_node *const *stmts, size_t n,
                     fs_diags *diags, int echo) {
  fsE_ctx *E = &S->E;
  E->src = src;
  E->diags = diags;
  E->status = 0;
  E->reported = false;
  for (size_t i = 0; i < n && E->status == 0 && !E->halt; i++) {
    const fs_node *s = stmts[i];
    if (echo && s->kind == FS_N_EXPR) {
      fs_value *v = eval(E, s->kids[0]);
      if (!v) { failed(E, s->loc); break; }
      if (v->type != FSV_NONE) {
        char *r = fsV_repr(v);
        if (r) fprintf(E->out, "%s\n", r);
        free(r);
      }
      fsV_release(v);
      continue;
    }
    fsE_flow fl = exec(E, s);
    if (fl == FSE_BREAK || fl == FSE_CONTINUE)
      fsE_error(E, s->loc, "'break' or 'continue' outside a loop");
    if (fl != FSE_OK && E->status == 0) E->status = 1;
  }
  fflush(E->out);
  return E->halt ? E->halt_status : E->status;
}

void fsE_session_free(fsE_session *S) {
  if (!S) return;
  fsE_ctx *E = &S->E;
  fsV_release(E->retval);
  fsE_exc_clear(&E->pending);
  fsV_release(E->fabric);
  fsV_release(E->globals);
  fsV_release(E->builtins);
  free(E->defines);
  free(E->stack);
  free(E->call_sites);
  free(S);
}

int fsE_run(const fs_source *src, const fs_node *ast, const fsE_options *opt, fs_diags *diags) {
  fsE_session *S = fsE_session_new(opt);
  if (!S) {
    fsD_add(diags, FS_SEV_ERROR, "runtime", NULL, (fs_loc){0, 0}, "out of memory");
    return 3;
  }
  int status = fsE_session_exec(S, src, ast->kids, ast->nkids, diags, 0);
  if (opt->plan && status == 0 && !S->E.halt) status = fsE_plan_end(&S->E);
  fsE_session_free(S);
  return status;
}
