/* placement.c -- where a model's parameters are, module by module, for
 * Fabric's warning about a model whose parameters sit on different devices
 * (W4, fabric.py:1144). Each model object has its own placement (cobj.placed,
 * cobj.meta); moving a module (`.to(...)`, `.cuda()`, `fabric.to_device`,
 * `to_empty`, setup) places it and the children its class's `__init__`
 * shows. At setup the tree is walked in named_parameters() order.
 * Invariant: a W4 fact is given only where every module of the tree, every
 * parameter's name and every parameter's device is certain; anything else
 * (a container, a Parameter of the class's own, an `__init__` with other
 * statements, a layer whose parameters depend on arguments not written at
 * the call, a script that stores attributes on other objects than `self`)
 * gives no fact, so no warning. The run's half is in
 * interp/eval/lib_fabric.c (devices_apart), the text in interp/fabric/fabric.c. */
#include "check_int.h"

#include <stdio.h>
#include <string.h>

#define PLACE_DEPTH 8

/* The `self.NAME = VALUE` statements of k's __init__ when they are all it
 * does besides `super().__init__(...)`: its self name, or NULL. */
static const char *plain_init(const pyclass *k, const fs_node **body) {
  const fs_node *init = fsC_init_of(k), *ps = init ? init->kids[0] : NULL;
  if (!ps || !ps->nkids || fsC_kid(init, 2)) return NULL;
  const char *self = ps->kids[0]->str;
  *body = init->kids[1];
  for (uint32_t i = 0; i < (*body)->nkids; i++) {
    const fs_node *s = (*body)->kids[i], *t = s->kids[0];
    if (s->kind == FS_N_EXPR && t->kind == FS_N_CALL && t->kids[0]->kind == FS_N_ATTR &&
        !strcmp(t->kids[0]->str, "__init__") && t->kids[0]->kids[0]->kind == FS_N_CALL &&
        t->kids[0]->kids[0]->kids[0]->kind == FS_N_NAME && !strcmp(t->kids[0]->kids[0]->kids[0]->str, "super"))
      continue;
    if (s->kind != FS_N_ASSIGN || s->nkids != 2 || t->kind != FS_N_ATTR || t->kids[0]->kind != FS_N_NAME ||
        strcmp(t->kids[0]->str, self))
      return NULL;
  }
  return self;
}

/* The model objects k's __init__ assigns to self, in order (at most max);
 * -1 when that is not certain. */
static int children(C *c, uint32_t id, uint32_t *out, const fs_node **calls, int max) {
  const pyclass *k = fsC_o(c, id)->pycls;
  const fs_node *body;
  if (!k || !plain_init(k, &body)) return -1;
  cv self = fsC_obj(id);
  int n = 0;
  for (uint32_t i = 0; i < body->nkids; i++) {
    const fs_node *s = body->kids[i];
    if (s->kind != FS_N_ASSIGN) continue;
    cv v = fsC_attr(c, &self, s->kids[0]->str);
    if (v.k != CV_OBJ || fsC_o(c, v.id)->kind != OB_MODEL) {
      /* a number, a string: no parameter; a tensor may be one of its own */
      const fs_node *x = s->kids[1];
      if (x->kind == FS_N_UNARY) x = x->kids[0];
      if (x->kind != FS_N_INT && x->kind != FS_N_FLOAT && x->kind != FS_N_STR && x->kind != FS_N_TRUE &&
          x->kind != FS_N_FALSE && x->kind != FS_N_NONE)
        return -1;
      continue;
    }
    for (int j = 0; j < n; j++)
      if (out[j] == v.id) return -1; /* named_parameters lists a shared module once */
    if (n == max) return -1;
    calls[n] = s->kids[1];
    out[n++] = v.id;
  }
  return n;
}

static void place(C *c, uint32_t id, fsF_pdev where, int materialize, int depth) {
  cobj *o = fsC_ow(c, id);
  /* `.to()` of meta parameters raises (the meta-move rule); where they end up is not known */
  o->placed = (uint8_t)(materialize || o->meta.m == MB_F ? where : FSF_PD_OTHER);
  if (materialize) o->meta = (mbit){MB_F, 0};
  uint32_t kids[16];
  const fs_node *calls[16];
  int n = depth < PLACE_DEPTH ? children(c, id, kids, calls, 16) : -1;
  for (int i = 0; i < n; i++) place(c, kids[i], where, materialize, depth + 1);
}

void fsC_place(C *c, uint32_t id, fsF_pdev where, int materialize) { place(c, id, where, materialize, 0); }

/* A layer's parameter names, from its class and its construction call
 * (`Linear(4, 2, bias=False)`): their count, or -1 when not certain. */
static int layer_params(const cobj *o, const fs_node *call, const char **names) {
  static const char *const none[] = {"ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "Dropout", "Flatten"};
  for (size_t i = 0; i < sizeof none / sizeof *none; i++)
    if (!strcmp(o->cls, none[i])) return 0;
  if (!strcmp(o->cls, "Embedding")) {
    names[0] = "weight";
    return 1;
  }
  if (call && call->kind != FS_N_CALL && o->stmt && o->stmt->kind == FS_N_ASSIGN && o->stmt->nkids == 2 &&
      o->stmt->kids[1]->kind == FS_N_CALL && o->stmt->kids[1]->loc.start == o->loc.start)
    call = o->stmt->kids[1]; /* made elsewhere (`head = Linear(...)`, passed in): its own call */
  if (strcmp(o->cls, "Linear") || !call || call->kind != FS_N_CALL) return -1;
  const fs_node *bias = call->nkids > 3 && call->kids[3]->kind != FS_N_KWARG ? call->kids[3] : NULL;
  for (uint32_t i = 1; i < call->nkids; i++) {
    const fs_node *k = call->kids[i];
    if (k->kind == FS_N_STARRED) return -1;
    if (k->kind == FS_N_KWARG && !strcmp(k->str, "bias")) bias = k->kids[0];
    else if (k->kind == FS_N_KWARG && strcmp(k->str, "in_features") && strcmp(k->str, "out_features")) return -1;
  }
  if (bias && bias->kind != FS_N_TRUE && bias->kind != FS_N_FALSE) return -1;
  names[0] = "weight";
  names[1] = "bias";
  return bias && bias->kind == FS_N_FALSE ? 1 : 2;
}

/* torch's str(param.device) of module o's own parameters; NULL when not certain. */
static const char *device_of(const cobj *o) {
  if (o->placed == FSF_PD_CUDA) return "cuda:0"; /* rank 0's, where Fabric warns */
  if (o->placed == FSF_PD_OTHER) return NULL;
  if (o->placed == FSF_PD_CPU || o->meta.m == MB_F) return "cpu";
  return o->meta.m == MB_T ? "meta" : NULL;
}

typedef struct place_walk {
  C *c;
  fsF_model *m;
  const char *first_name, *first_device;
  int root_meta; /* the root was made on the meta device */
} place_walk;

static const char *joined(C *c, const char *path, const char *name) {
  size_t n = strlen(path) + strlen(name) + 2;
  char *s = fsC_alloc(c, n);
  snprintf(s, n, "%s%s%s", path, *path ? "." : "", name);
  return s;
}

/* Module id's parameters in named_parameters() order; -1 when not certain. */
static int walk(place_walk *w, uint32_t id, const fs_node *call, const char *path, int depth) {
  C *c = w->c;
  const cobj *o = fsC_o(c, id);
  if (depth > PLACE_DEPTH) return -1;
  if (!o->pycls) {
    const char *names[2];
    int n = o->cls ? layer_params(o, call, names) : -1;
    const char *dev = n > 0 ? device_of(o) : NULL;
    /* a meta layer inside a model made off the meta device: torch keeps it
     * meta, the runtime materializes it with the root (docs/runtime.md):
     * not judged */
    if (n < 0 || (n && !dev) || (dev && !strcmp(dev, "meta") && !w->root_meta)) return -1;
    for (int i = 0; i < n; i++) {
      if (!w->first_name) {
        w->first_name = joined(c, path, names[i]);
        w->first_device = dev;
      } else if (strcmp(dev, w->first_device) && !w->m->devices_apart++) {
        w->m->apart_name = joined(c, path, names[i]);
        w->m->apart_device = dev;
      }
    }
    return 0;
  }
  uint32_t kids[16];
  const fs_node *calls[16];
  int n = children(c, id, kids, calls, 16);
  const fs_node *bases = o->pycls->node ? fsC_kid(o->pycls->node, 0) : NULL, *base = bases && bases->nkids == 2 ? bases->kids[1] : NULL;
  const char *bname = !base ? NULL : base->kind == FS_N_NAME ? base->str : base->kind == FS_N_ATTR ? base->str : NULL;
  if (n < 0 || !bname || strcmp(bname, "Module"))
    return -1; /* another base than Module may hold parameters of its own */
  const fs_node *body;
  plain_init(o->pycls, &body);
  for (int i = 0, k = 0; i < n; i++, k++) {
    while (body->kids[k]->kind != FS_N_ASSIGN || calls[i] != body->kids[k]->kids[1]) k++;
    if (walk(w, kids[i], calls[i], joined(c, path, body->kids[k]->kids[0]->str), depth + 1) < 0) return -1;
  }
  return 0;
}

/* Whether the script may add a module to a model after its __init__
 * (`net.extra = Linear(...)`, setattr): an attribute stored into on
 * anything but a name `self`. */
static int foreign_attr_store(const fs_node *n) {
  if (!n) return 0;
  if ((n->kind == FS_N_ASSIGN || n->kind == FS_N_AUGASSIGN || n->kind == FS_N_ANNASSIGN) &&
      n->kids[0]->kind == FS_N_ATTR &&
      (n->kids[0]->kids[0]->kind != FS_N_NAME || strcmp(n->kids[0]->kids[0]->str, "self")))
    return 1;
  if (n->kind == FS_N_ASSIGN)
    for (uint32_t i = 2; i < n->nkids; i++)
      if (n->kids[i]->kind == FS_N_ATTR) return 1;
  if (n->kind == FS_N_NAME && !strcmp(n->str, "setattr")) return 1;
  for (uint32_t i = 0; i < n->nkids; i++)
    if (foreign_attr_store(n->kids[i])) return 1;
  return 0;
}

void fsC_devices_apart(C *c, uint32_t raw, fsF_model *m) {
  place_walk w = {c, m, NULL, NULL, fsC_o(c, raw)->meta.m == MB_T && !fsC_o(c, raw)->placed};
  m->devices_apart = 0;
  /* the walk sees the modules __init__ made; one added later would be missed */
  if (walk(&w, raw, NULL, "", 0) < 0 || (m->devices_apart && foreign_attr_store(c->root))) m->devices_apart = 0;
  m->first_name = w.first_name;
  m->first_device = w.first_device;
}
