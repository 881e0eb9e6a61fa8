/* classes.c -- the script's own classes: `class` statements, their
 * instances, bound methods and super().
 *
 * A class is a value holding its body's namespace (a dict) and its base.  A
 * plain class's instance is an object whose vtable is its class's own copy
 * (so type names in messages are the class's) with a dict of attributes.  A
 * class deriving from the builtin `Module` makes a runtime module instead:
 * an FSM_CUSTOM node of runtime/model/module.h whose hook (script_module
 * below) holds the class and the attributes, and whose children are the
 * modules assigned as attributes, under the attributes' names; the value
 * is a lib_nn.c Module value, so every Module method, Fabric's setup, the
 * optimizers and the checkpoints see an ordinary module tree.  Its forward
 * is the class's `forward`, run by the evaluator with the tensor API
 * recording on the autograd tape.  Invariant: no attribute may hold its
 * own instance (reference counting cannot free a cycle).  docs/classes.md. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <string.h>

#include "eval_int.h"

typedef struct klass {
  char *name;
  fs_value *base;   /* a script class, or NULL (object, or the builtin Module) */
  bool module;      /* derives from the builtin Module */
  fs_value *ns;     /* dict: the names the class body bound */
  fsV_class inst;   /* its plain instances' vtable: named as the class */
} klass;

typedef struct instance { fs_value *cls, *attrs; } instance;

/* A script Module's hook; the module owns it (fsM_custom first, cast back). */
typedef struct script_module {
  fsM_custom hook;
  fsE_ctx *E;
  fs_value *cls, *attrs;
} script_module;

typedef struct bound { fs_value *fn, *self, *owner; } bound; /* owner: the class fn was found in */
typedef struct super_of { fs_value *owner, *self; } super_of;

static void klass_free(void *p) {
  klass *k = p;
  fsV_release(k->base);
  fsV_release(k->ns);
  free(k->name);
  free(k);
}

static char *klass_repr(fs_value *v) {
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<class '__main__.%s'>", ((klass *)v->u.obj.data)->name);
  return fsV_buf_take(&b);
}

static fs_value *klass_call(fsE_ctx *E, fs_value *self, const fsV_args *a);
static const fsV_class klass_class = {
  .name = "type", .call = klass_call, .repr = klass_repr, .free = klass_free,
};

static void bound_free(void *p) {
  bound *b = p;
  fsV_release(b->fn);
  fsV_release(b->self);
  fsV_release(b->owner);
  free(b);
}

/* A method call: self first; super() inside sees the method's class and self. */
static fs_value *bound_call(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  bound *b = v->u.obj.data;
  fs_value **pos = malloc((a->npos + 1) * sizeof *pos);
  if (!pos) {
    fsV_seterr("out of memory");
    return NULL;
  }
  pos[0] = b->self;
  if (a->npos) memcpy(pos + 1, a->pos, a->npos * sizeof *pos);
  fsV_args with_self = *a;
  with_self.pos = pos;
  with_self.npos = a->npos + 1;
  fs_value *owner = E->method_owner, *self = E->method_self;
  E->method_owner = b->owner;
  E->method_self = b->self;
  fs_value *r = fsE_call(E, b->fn, &with_self);
  E->method_owner = owner;
  E->method_self = self;
  free(pos);
  return r;
}

static const fsV_class bound_class = {.name = "method", .call = bound_call, .free = bound_free};

const fsSig *fsE_callable_sig(const fs_value *v) {
  bound *b = fsV_objdata(v, &bound_class);
  if (b) v = b->fn;
  const fsSig *sig = fsE_func_sig(v);
  return sig ? sig : fsE_native_sig(v);
}

static void super_free(void *p) {
  super_of *s = p;
  fsV_release(s->owner);
  fsV_release(s->self);
  free(s);
}
static const fsV_class super_class = {.name = "super", .free = super_free};

/* object.__init__ and Module.__init__: nothing to do */
static fs_value *base_init_call(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  (void)E, (void)v;
  if (a->npos || a->nkw) {
    fsV_seterr("__init__() takes exactly one argument (the instance to initialize)");
    return NULL;
  }
  return fsV_none();
}
static const fsV_class base_init_class = {.name = "method-wrapper", .call = base_init_call};

/* `super()` as a value: made at the call from the running method */
static fs_value *super_call(fsE_ctx *E, fs_value *v, const fsV_args *a) {
  (void)v;
  if (a->npos || a->nkw) {
    fsV_seterr("super() with arguments is not supported at run time yet");
    return NULL;
  }
  if (!E->method_owner) {
    fsV_seterr("super(): no arguments");
    return NULL;
  }
  super_of *s = malloc(sizeof *s);
  if (!s) {
    fsV_seterr("out of memory");
    return NULL;
  }
  s->owner = fsV_retain(E->method_owner);
  s->self = fsV_retain(E->method_self);
  return fsV_obj(&super_class, s);
}
static const fsV_class super_fn_class = {.name = "type", .call = super_call};

static klass *class_of(const fs_value *v) { return fsV_objdata(v, &klass_class); }

static void instance_free(void *p);

/* every class's instance vtable frees with instance_free */
static bool is_instance(const fs_value *v) { return v->type == FSV_OBJ && v->u.obj.cls->free == instance_free; }

static script_module *script_module_of(const fs_value *v) {
  modv *mv = fsV_objdata(v, &fsE_module_class);
  return mv && mv->m->kind == FSM_CUSTOM ? (script_module *)mv->m->custom : NULL;
}

/* name in cls or its bases: borrowed, with *where the class that holds it */
static fs_value *class_find(fs_value *cls, const char *name, fs_value **where) {
  for (; cls; cls = class_of(cls)->base) {
    fs_value *v = fsV_dict_getstr(class_of(cls)->ns, name);
    if (v) {
      *where = cls;
      return v;
    }
  }
  return NULL;
}

/* A class attribute read through self: a function becomes a bound method. */
static fs_value *bind_found(fs_value *v, fs_value *self, fs_value *where) {
  if (!self || strcmp(fsV_type_name(v), "function") != 0) return fsV_retain(v);
  bound *b = malloc(sizeof *b);
  if (!b) {
    fsV_seterr("out of memory");
    return NULL;
  }
  *b = (bound){fsV_retain(v), fsV_retain(self), fsV_retain(where)};
  return fsV_obj(&bound_class, b);
}

int fsE_instance_getattr(fsE_ctx *E, fs_value *obj, const char *name, fs_value **out) {
  (void)E;
  fs_value *attrs = NULL, *cls = NULL, *self = obj, *where, *v;
  script_module *sm;
  if (obj->type != FSV_OBJ) return 0;
  if ((sm = script_module_of(obj))) attrs = sm->attrs, cls = sm->cls;
  else if (is_instance(obj)) attrs = ((instance *)obj->u.obj.data)->attrs, cls = ((instance *)obj->u.obj.data)->cls;
  else if (class_of(obj)) cls = obj, self = NULL;
  else if (obj->u.obj.cls == &super_class) {
    super_of *s = obj->u.obj.data;
    cls = class_of(s->owner)->base;
    self = s->self;
    if (!(cls && class_find(cls, name, &where)) && strcmp(name, "__init__") == 0) {
      *out = fsV_obj(&base_init_class, NULL);
      return *out ? 1 : -1;
    }
    if (!cls) {
      fsV_seterr("'super' object has no attribute '%s'", name);
      return -1;
    }
  } else
    return 0;
  if (attrs && (v = fsV_dict_getstr(attrs, name))) {
    *out = fsV_retain(v);
    return 1;
  }
  if (cls && (v = class_find(cls, name, &where))) return (*out = bind_found(v, self, where)) ? 1 : -1;
  if (sm || (obj->u.obj.cls == &super_class && class_of(cls)->module)) return 0; /* Module's own rows */
  fsV_seterr(self ? "'%s' object has no attribute '%s'" : "type object '%s' has no attribute '%s'",
             class_of(cls)->name, name);
  return -1;
}

/* ---- instances ------------------------------------------------------------ */

static void instance_free(void *p) {
  instance *in = p;
  fsV_release(in->attrs);
  fsV_release(in->cls);
  free(in);
}

static char *instance_repr(fs_value *v) {
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<__main__.%s object>", class_of(((instance *)v->u.obj.data)->cls)->name);
  return fsV_buf_take(&b);
}

/* len(obj) and obj[key] of an instance whose class defines __len__ /
 * __getitem__ (new_class's hooks are set only then, so a class without
 * them keeps the plain "has no len()" and "not subscriptable" errors) */
static fs_value *call_dunder(fsE_ctx *E, fs_value *self, const char *name, fs_value *arg) {
  fs_value *m = NULL, *r = NULL;
  if (fsE_instance_getattr(E, self, name, &m) > 0) r = fsE_call(E, m, &(fsV_args){.pos = &arg, .npos = arg ? 1 : 0});
  fsV_release(m);
  return r;
}

static int64_t instance_len(fsE_ctx *E, fs_value *self) {
  fs_value *r = call_dunder(E, self, "__len__", NULL);
  int64_t n = r && r->type == FSV_INT ? r->u.i : -1;
  if (r && r->type != FSV_INT) fsV_seterr("'%s' object cannot be interpreted as an integer", fsV_type_name(r));
  else if (r && n < 0) fsV_seterr("__len__() should return >= 0");
  fsV_release(r);
  return n;
}

static fs_value *instance_index(fsE_ctx *E, fs_value *self, fs_value *key) {
  return call_dunder(E, self, "__getitem__", key);
}

/* iter(obj): the class's __iter__, whose result must be an iterator (a
 * value with a next: an instance whose class has __next__, or a builtin's). */
static fs_value *instance_iter(fsE_ctx *E, fs_value *self) {
  fs_value *r = call_dunder(E, self, "__iter__", NULL);
  if (r && (r->type != FSV_OBJ || !r->u.obj.cls->next)) {
    fsV_seterr("iter() returned non-iterator of type '%s'", fsV_type_name(r));
    fsV_release(r);
    return NULL;
  }
  return r;
}

/* next(obj): the class's __next__; StopIteration ends the loop (0). */
static int instance_next(fsE_ctx *E, fs_value *self, fs_value **out) {
  fs_value *m = NULL;
  int k = fsE_instance_getattr(E, self, "__next__", &m);
  int r = k > 0 ? fsE_call_until_stop(E, m, &(fsV_args){0}, out) : -1;
  if (!k) fsV_seterr("'%s' object is not an iterator", fsV_type_name(self));
  fsV_release(m);
  return r;
}

/* attrs[name] = v unless v holds self */
static int store_attr(fs_value *attrs, fs_value *self, const char *name, fs_value *v) {
  bound *b = fsV_objdata(v, &bound_class); /* self.f = self.method holds self too */
  if (v == self || fsV_reaches(v, self) || (b && b->self == self)) {
    fsV_seterr("an object cannot hold itself as attribute '%s' (reference cycles are not supported)", name);
    return -1;
  }
  fs_value *k = fsV_cstr(name);
  int rc = k ? fsV_dict_set(attrs, k, fsV_retain(v)) : -1;
  fsV_release(k);
  return rc;
}

static int instance_setattr(fsE_ctx *E, fs_value *self, const char *name, fs_value *v) {
  (void)E;
  return store_attr(((instance *)self->u.obj.data)->attrs, self, name, v);
}

int fsE_custom_setattr(fsE_ctx *E, fs_value *self, const char *name, fs_value *v) {
  (void)E;
  script_module *sm = script_module_of(self);
  modv *mv = self->u.obj.data, *child = fsV_objdata(v, &fsE_module_class);
  fs_tensor *t = fsE_as_tensor(v);
  fs_module *had = NULL; /* the tree's leaf or child under this name */
  for (int i = 0; i < mv->m->nkids && !had; i++)
    if (strcmp(mv->m->kids[i]->key, name) == 0) had = mv->m->kids[i];
  if (t && t->requires_grad && !t->node) { /* a leaf that requires grad: a Parameter of this module */
    if (fsM_set_child(mv->m, name, fsM_param_holder(t)) < 0) return fsE_rt_fail(), -1;
  } else if (had && had->kind == FSM_BUFFER && (t || v->type == FSV_NONE)) { /* a new value for a buffer */
    /* None: torch keeps a None buffer out of the state dict */
    if (t ? fsM_set_child(mv->m, name, fsM_buffer_holder(t, had->transient)) < 0 : (fsM_remove_child(mv->m, name), 0))
      return fsE_rt_fail(), -1;
  } else if (child) {
    if (child->m == mv->m || child->m->refcount > 1) {
      fsV_seterr("this %s is already part of a model; create a new one for each use", child->cls);
      return -1;
    }
    if (fsM_set_child(mv->m, name, fsM_retain(child->m)) < 0) return fsE_rt_fail(), -1;
  } else if (had && had->kind == FSM_BUFFER) {
    fsV_seterr("cannot assign '%s' as buffer '%s' (torch.Tensor or None expected)", fsV_type_name(v), name);
    return -1;
  } else if (had) {
    fsV_seterr("cannot assign '%s' as %s '%s' (torch.nn.%s or None expected)", fsV_type_name(v),
               had->kind == FSM_PARAM ? "parameter" : "child module", name,
               had->kind == FSM_PARAM ? "Parameter" : "Module");
    return -1;
  }
  return store_attr(sm->attrs, self, name, v);
}

/* register_buffer(name, tensor, persistent): torch's checks and words */
NATIVE(module_register_buffer) {
  (void)a;
  script_module *sm = script_module_of(self);
  modv *mv = self->u.obj.data;
  const char *name = s[0]->u.str.s;
  fs_tensor *t = fsE_as_tensor(s[1]);
  if (!sm) {
    fsV_seterr("%s.register_buffer(): buffers can be registered on a script's own Module class, not on a built-in %s",
               mv->cls, mv->cls);
    return NULL;
  }
  if (!*name || strchr(name, '.')) {
    fsV_seterr(*name ? "KeyError: 'buffer name can\\'t contain \".\"'" : "KeyError: 'buffer name can\\'t be empty string \"\"'");
    return NULL;
  }
  bool is_buffer = false;
  for (int i = 0; i < mv->m->nkids; i++)
    if (strcmp(mv->m->kids[i]->key, name) == 0) is_buffer = mv->m->kids[i]->kind == FSM_BUFFER;
  if (!is_buffer && (fsV_dict_getstr(sm->attrs, name) || class_find(sm->cls, name, &(fs_value *){NULL}))) {
    fsV_seterr("KeyError: \"attribute '%s' already exists\"", name);
    return NULL;
  }
  if (!t && s[1]->type != FSV_NONE) {
    fsV_seterr("cannot assign '%s' object to buffer '%s' (torch Tensor or None required)", fsV_type_name(s[1]), name);
    return NULL;
  }
  if (t ? fsM_set_child(mv->m, name, fsM_buffer_holder(t, !fsV_truthy(s[2]))) < 0 : (fsM_remove_child(mv->m, name), 0))
    return fsE_rt_fail();
  return store_attr(sm->attrs, self, name, s[1]) < 0 ? NULL : fsV_none();
}

/* ---- calling a class: a new instance ------------------------------------------ */

static fs_value *run_init(fsE_ctx *E, fs_value *self, fs_value *cls, const fsV_args *a) {
  fs_value *where, *init = class_find(cls, "__init__", &where);
  if (!init) {
    if (a->npos || a->nkw) {
      fsV_seterr("%s() takes no arguments", class_of(cls)->name);
      return NULL;
    }
    return fsV_none();
  }
  fs_value *m = bind_found(init, self, where), *r = m ? fsE_call(E, m, a) : NULL;
  fsV_release(m);
  if (r && r->type != FSV_NONE) {
    fsV_seterr("__init__() should return None, not '%s'", fsV_type_name(r));
    fsV_release(r);
    return NULL;
  }
  return r;
}

static void script_module_release(fsM_custom *c) {
  script_module *sm = (script_module *)c;
  fsV_release(sm->cls);
  fsV_release(sm->attrs);
  free(sm);
}

/* The runtime runs a script Module (a part of a Sequential or a model
 * block): a Module value for m around the class's forward. */
static fs_tensor *script_module_forward(fsM_custom *c, fs_module *m, fs_tensor *x) {
  script_module *sm = (script_module *)c;
  fs_value *self = fsE_module_new(sm->E, fsM_retain(m), c->class_name), *xv = NULL, *r = NULL;
  if (self) xv = fsE_tensor_value(fsT_retain(x));
  if (xv) {
    fsV_args a = {&xv, 1, NULL, NULL, 0, {0, 0}};
    r = fsE_custom_call(sm->E, self, &a);
  }
  fs_tensor *t = r ? fsE_as_tensor(r) : NULL;
  if (r && !t) fsV_seterr("%s.forward() returned %s, where its model needs a Tensor", c->class_name, fsV_type_name(r));
  if (!t) fsT_seterr("%s", fsV_error());
  fsT_retain(t);
  fsV_release(r);
  fsV_release(xv);
  fsV_release(self);
  return t;
}

static fs_value *new_module_instance(fsE_ctx *E, fs_value *cls, const fsV_args *a) {
  klass *k = class_of(cls);
  script_module *sm = calloc(1, sizeof *sm);
  if (!sm || !(sm->attrs = fsV_dict())) {
    free(sm);
    fsV_seterr("out of memory");
    return NULL;
  }
  sm->hook = (fsM_custom){k->name, script_module_forward, script_module_release};
  sm->E = E;
  sm->cls = fsV_retain(cls);
  fs_value *self = fsE_module_new(E, fsM_custom_new(&sm->hook), k->name);
  if (!self) return NULL;
  fs_module *building = E->building; /* __init__'s statements are not a model body's */
  fs_device device = E->device;
  E->building = NULL;
  /* On the meta device the layers' parameters stay meta until setup (layers
   * are built on meta and the root materializes them); the tensors __init__
   * makes itself (a Parameter's data, a buffer) are made on the CPU, as they
   * have no initialization rule to recreate them from. */
  if (E->device == FS_DEV_META) E->device = FS_DEV_CPU;
  E->module_init++;
  fs_value *r = run_init(E, self, cls, a);
  E->module_init--;
  E->building = building;
  E->device = device;
  if (!r || fsE_module_built(E, self) < 0) {
    fsV_release(r);
    fsV_release(self);
    return NULL;
  }
  fsV_release(r);
  return self;
}

static fs_value *new_class(const char *name, fs_value *base, bool module);

/* dict[name] = v (taken) */
static int set_str(fs_value *dict, const char *name, fs_value *v) {
  fs_value *k = v ? fsV_cstr(name) : NULL;
  int rc = k ? fsV_dict_set(dict, k, v) : -1;
  if (!k) fsV_release(v);
  fsV_release(k);
  return rc;
}

fs_value *fsE_model_with_forward(fsE_ctx *E, fs_module *seq, const char *name, fs_value *fwd) {
  fs_value *cls = new_class(name, NULL, true), *self = NULL;
  klass *k = cls ? class_of(cls) : NULL;
  script_module *sm = k ? calloc(1, sizeof *sm) : NULL;
  if (!sm || !(k->ns = fsV_dict()) || set_str(k->ns, "forward", fsV_retain(fwd)) < 0 || !(sm->attrs = fsV_dict())) {
    if (sm) fsV_release(sm->attrs);
    free(sm);
    fsV_release(cls);
    fsM_release(seq);
    fsV_seterr("out of memory");
    return NULL;
  }
  sm->hook = (fsM_custom){k->name, script_module_forward, script_module_release};
  sm->E = E;
  sm->cls = cls;
  fs_module *m = fsM_custom_new(&sm->hook);
  for (int i = 0; m && i < seq->nkids; i++) { /* the layers keep their keys: fc1.weight, 0.weight */
    fs_module *kid = seq->kids[i];
    const char *kind = kid->kind == FSM_CUSTOM ? kid->custom->class_name : fsM_kind_name(kid->kind);
    char *key = kid->named ? strdup(kid->key) : NULL; /* fsM_append replaces kid->key */
    if ((kid->named && !key) || fsM_append(m, key, fsM_retain(kid)) < 0 ||
        (key && set_str(sm->attrs, key, fsE_module_new(E, fsM_retain(kid), kind)) < 0)) {
      fsM_release(m);
      m = NULL;
    }
    free(key);
  }
  fsM_release(seq);
  if (!m) return fsE_rt_fail();
  if (!(self = fsE_module_new(E, m, name))) return NULL;
  if (fsE_module_built(E, self) < 0) {
    fsV_release(self);
    return NULL;
  }
  return self;
}

static fs_value *klass_call(fsE_ctx *E, fs_value *cls, const fsV_args *a) {
  klass *k = class_of(cls);
  if (k->module) {
    if (!k->ns) {
      fsV_seterr("Module() itself has no forward: subclass it (class Net(Module): ...)");
      return NULL;
    }
    return new_module_instance(E, cls, a);
  }
  instance *in = calloc(1, sizeof *in);
  if (!in || !(in->attrs = fsV_dict())) {
    free(in);
    fsV_seterr("out of memory");
    return NULL;
  }
  in->cls = fsV_retain(cls);
  fs_value *self = fsV_obj(&k->inst, in), *r = self ? run_init(E, self, cls, a) : NULL;
  if (!r) {
    fsV_release(self);
    return NULL;
  }
  fsV_release(r);
  return self;
}

fs_value *fsE_custom_call(fsE_ctx *E, fs_value *self, const fsV_args *a) {
  script_module *sm = script_module_of(self);
  fs_value *where, *fwd = class_find(sm->cls, "forward", &where);
  if (!fwd) {
    fsV_seterr("Module [%s] is missing the required \"forward\" function", class_of(sm->cls)->name);
    return NULL;
  }
  fs_value *m = bind_found(fwd, self, where), *r = m ? fsE_call(E, m, a) : NULL;
  fsV_release(m);
  return r;
}

/* ---- __class__ and __name__ ------------------------------------------------------------- */

/* The class of a module value: a script class, a layer's builtin (Conv2d), or a
 * model block (a global of the script); borrowed or made, NULL + fsV_error. */
static fs_value *module_class_value(fsE_ctx *E, const modv *mv) {
  fs_value *v = fsV_dict_getstr(E->globals, mv->cls);
  if (v && class_of(v)) return fsV_retain(v);
  if ((v = fsE_builtin(E, mv->cls))) return v;
  if (!*fsV_error()) fsV_seterr("the class of a '%s' module is not known at run time", mv->cls);
  return NULL;
}

/* module.__class__ (the sig row Module.__class__) */
NATIVE(module_class_attr) {
  (void)s, (void)a;
  script_module *sm = script_module_of(self);
  return sm ? fsV_retain(sm->cls) : module_class_value(E, self->u.obj.data);
}

int fsE_type_getattr(fsE_ctx *E, fs_value *obj, const char *name, fs_value **out) {
  (void)E;
  if (obj->type != FSV_OBJ) return 0;
  if (!strcmp(name, "__class__")) { /* a module's is its sig row's */
    if (!is_instance(obj)) return 0;
    return (*out = fsV_retain(((instance *)obj->u.obj.data)->cls)) ? 1 : -1;
  }
  if (!strcmp(name, "__name__")) {
    klass *k = class_of(obj);
    const fsSig *sig = k ? NULL : fsE_native_sig(obj);
    const char *n = k ? k->name : sig && !strchr(sig->name, '.') ? sig->name : NULL;
    if (!n) return 0;
    return (*out = fsV_cstr(n)) ? 1 : -1;
  }
  return 0;
}

/* ---- isinstance ---------------------------------------------------------------------- */

/* Whether v is an instance of one class: a script class (its chain), the
 * builtin Module (any module), a layer or type builtin (its name). */
static int instance_of(const fs_value *v, const fs_value *cls) {
  klass *k = class_of(cls);
  if (k && !k->ns) return fsV_objdata(v, &fsE_module_class) != NULL; /* Module */
  if (k) {
    script_module *sm = script_module_of(v);
    fs_value *c = sm ? sm->cls : is_instance(v) ? ((instance *)v->u.obj.data)->cls : NULL;
    for (; c; c = class_of(c)->base)
      if (c == cls) return 1;
    return 0;
  }
  const fsSig *sig = fsE_native_sig(cls);
  if (!sig) {
    fsV_seterr("isinstance() arg 2 must be a type, a tuple of types, or a union");
    return -1;
  }
  modv *mv = fsV_objdata(v, &fsE_module_class);
  if (mv) return strcmp(mv->cls, sig->name) == 0;
  const char *strategy = fsE_strategy_class_name(v); /* fabric.strategy: its Lightning class */
  if (strategy) return strcmp(strategy, sig->name) == 0;
  const char *t = fsV_type_name(v);
  return strcmp(t, sig->name) == 0 || (v->type == FSV_BOOL && strcmp(sig->name, "int") == 0);
}

NATIVE(isinstance) {
  (void)E, (void)self, (void)a;
  if (s[1]->type != FSV_TUPLE) {
    int r = instance_of(s[0], s[1]);
    return r < 0 ? NULL : fsV_bool(r);
  }
  for (size_t i = 0; i < s[1]->u.seq.n; i++) {
    int r = instance_of(s[0], s[1]->u.seq.items[i]);
    if (r) return r < 0 ? NULL : fsV_bool(true);
  }
  return fsV_bool(false);
}

/* ---- FSDP's auto_wrap_policy (runtime/dist/fsdp.h) ----------------------------------- */

/* The classes of a set, list or tuple (`{Block}`), each a script Module
 * class or a layer (`nn.Linear`): a new list, or NULL + fsV_error. */
fs_value *fsE_module_classes(fsE_ctx *E, fs_value *v, const char *what) {
  fsE_iter it;
  fs_value *classes = fsV_list(0), *cls;
  if (!classes) return NULL;
  if (fsE_iter_begin(E, v, &it) < 0) {
    fsV_release(classes);
    return NULL;
  }
  int r;
  while ((r = fsE_iter_next(E, &it, &cls)) > 0) {
    klass *k = class_of(cls);
    if (!(k ? k->module : fsE_native_sig(cls) != NULL)) {
      fsV_seterr("%s: %s is not a module class", what, fsV_type_name(cls));
      fsV_release(cls);
      r = -1;
      break;
    }
    if (fsV_list_append(classes, cls) < 0) {
      r = -1;
      break;
    }
  }
  fsE_iter_end(&it);
  if (r < 0) fsV_release(classes);
  return r < 0 ? NULL : classes;
}

fs_value *fsE_wrap_policy_of(fsE_ctx *E, fs_value *v) {
  const char *what = "FSDPStrategy(auto_wrap_policy=...)";
  if (v->type == FSV_LIST || v->type == FSV_TUPLE || fsE_is_set(v)) return fsE_module_classes(E, v, what);
  fs_value *classes = fsE_module_wrap_policy_classes(v);
  if (classes) return fsV_retain(classes);
  if (v->type == FSV_OBJ && v->u.obj.cls->call) return fsV_retain(v);
  fsV_seterr("%s: a set of module classes ({Block}) or a callable policy, not %s", what, fsV_type_name(v));
  return NULL;
}

int fsE_module_is_one_of(const fs_module *m, const fs_value *classes) {
  for (size_t i = 0; i < classes->u.seq.n; i++) {
    const fs_value *cls = classes->u.seq.items[i];
    klass *k = class_of(cls);
    if (k && !k->ns) return 1; /* Module itself: any module */
    if (k && m->kind == FSM_CUSTOM) {
      for (const fs_value *c = ((const script_module *)m->custom)->cls; c; c = class_of(c)->base)
        if (c == cls) return 1;
    } else if (!k && strcmp(fsE_native_sig(cls)->name, fsM_kind_name(m->kind)) == 0)
      return 1;
  }
  return 0;
}

int fsE_wrap_policy_wraps(fs_module *m, bool recurse, int64_t nonwrapped_numel, void *ud) {
  fsE_policy_ud *p = ud;
  if (p->policy->type == FSV_LIST) return recurse ? 1 : fsE_module_is_one_of(m, p->policy); /* ModuleWrapPolicy's */
  /* policy(module=m, recurse=..., nonwrapped_numel=...), as torch calls it */
  fs_value *kw[3] = {fsE_module_part(p->E, m), fsV_bool(recurse), fsV_int(nonwrapped_numel)};
  static const char *const names[3] = {"module", "recurse", "nonwrapped_numel"};
  fs_value *r = NULL;
  if (kw[0] && kw[1] && kw[2]) {
    fsV_args a = {.kwnames = names, .kw = kw, .nkw = 3};
    r = fsE_call(p->E, p->policy, &a);
  }
  for (int i = 0; i < 3; i++) fsV_release(kw[i]);
  int w = r ? fsV_truthy(r) : -1;
  fsV_release(r);
  if (w < 0) fsT_seterr("auto_wrap_policy: %s", fsV_error());
  return w;
}

static const fsE_reg classes_funcs[] = {
  {"isinstance", isinstance}, {"Module.register_buffer", module_register_buffer},
  {"Module.__class__", module_class_attr}, {NULL, NULL},
};
const fsE_lib fsE_lib_classes = {"classes", classes_funcs};

/* ---- the class statement ---------------------------------------------------------- */

static fs_value *new_class(const char *name, fs_value *base, bool module) {
  klass *k = calloc(1, sizeof *k);
  if (!k || !(k->name = strdup(name))) {
    free(k);
    fsV_seterr("out of memory");
    return NULL;
  }
  k->base = fsV_retain(base);
  k->module = module;
  k->inst = (fsV_class){.name = k->name, .setattr = instance_setattr, .repr = instance_repr,
                        .free = instance_free};
  return fsV_obj(&klass_class, k);
}

fs_value *fsE_class_builtin(fsE_ctx *E, const char *name) {
  (void)E;
  if (strcmp(name, "super") == 0) return fsV_obj(&super_fn_class, NULL);
  if (strcmp(name, "Module") == 0) return new_class("Module", NULL, true);
  /* torch.utils.data.Dataset: a base with nothing of its own (its __add__,
   * ConcatDataset, is not modelled); a subclass's __len__/__getitem__ make it a data set */
  if (strcmp(name, "Dataset") == 0) return new_class("Dataset", NULL, false);
  return NULL;
}

fsE_flow fsE_exec_class(fsE_ctx *E, const fs_node *s) {
  const fs_node *args = s->kids[0];
  if ((s->nkids > 2 && s->kids[2]) || (s->nkids > 3 && s->kids[3]))
    return fsE_error(E, s->loc, "a decorated or generic class is not supported at run time yet"), FSE_ERROR;
  size_t nb = args ? args->nkids - 1 : 0;
  for (size_t i = 1; args && i < args->nkids; i++)
    if (args->kids[i]->kind == FS_N_KWARG || args->kids[i]->kind == FS_N_STARRED)
      return fsE_error(E, args->kids[i]->loc, "a class's keywords (metaclass=...) and starred bases are not "
                       "supported at run time yet"), FSE_ERROR;
  if (nb > 1) return fsE_error(E, args->kids[2]->loc, "multiple inheritance is not supported at run time yet"), FSE_ERROR;
  fs_value *base = NULL;
  klass *bk = NULL;
  if (nb) {
    const fs_node *b = args->kids[1];
    /* nn.Module and torch.nn.Module are the builtin Module until imports run */
    base = b->kind == FS_N_ATTR && strcmp(b->str, "Module") == 0 ? fsE_class_builtin(E, "Module") : fsE_eval(E, b);
    if (!base) return b->kind == FS_N_ATTR ? (fsE_error(E, b->loc, "out of memory"), FSE_ERROR) : FSE_ERROR;
    if (!(bk = class_of(base))) {
      fsE_error(E, b->loc, "a class can derive from a class or Module, not %s (built-in types are not supported as "
                "bases at run time yet)", fsV_type_name(base));
      fsV_release(base);
      return FSE_ERROR;
    }
  }
  fs_value *cls = new_class(s->str, bk && bk->ns ? base : NULL, bk && bk->module), *ns = fsV_dict();
  fsV_release(base);
  if (!cls || !ns) {
    fsV_release(cls);
    fsV_release(ns);
    return fsE_error(E, s->loc, "out of memory"), FSE_ERROR;
  }
  fs_value *saved = E->locals;
  E->locals = ns;
  fsE_flow fl = fsE_exec_block(E, s->kids[1]);
  E->locals = saved;
  if (fl == FSE_RETURN) {
    fsV_release(E->retval);
    E->retval = NULL;
  }
  class_of(cls)->ns = ns;
  if (class_find(cls, "__len__", &(fs_value *){NULL})) class_of(cls)->inst.len = instance_len;
  if (class_find(cls, "__getitem__", &(fs_value *){NULL})) class_of(cls)->inst.index = instance_index;
  if (class_find(cls, "__iter__", &(fs_value *){NULL})) class_of(cls)->inst.iter = instance_iter;
  if (class_find(cls, "__next__", &(fs_value *){NULL})) class_of(cls)->inst.next = instance_next;
  fs_value *k = fl == FSE_OK ? fsV_cstr(s->str) : NULL;
  int rc = k ? fsV_dict_set(E->locals ? E->locals : E->globals, k, fsV_retain(cls)) : -1;
  fsV_release(k);
  fsV_release(cls);
  if (rc < 0 && fl == FSE_OK) fsE_error(E, s->name_loc, "out of memory");
  return rc < 0 ? FSE_ERROR : FSE_OK;
}
