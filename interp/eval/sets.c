/* sets.c -- Python's set at run time (`{a, b}`, `{x for x in ...}`): the
 * keys of a dict whose values are None, so elements are hashable exactly as
 * dict keys are (`unhashable type: 'list'` otherwise), unique by Python's ==
 * (1, 1.0 and True are one element), and iterate in insertion order (CPython's
 * order is the hash table's: a script printing a set of several ints may show
 * another order). Enough for what training scripts do with sets: FSDP's
 * `auto_wrap_policy={Block}`, membership, iteration, len, | & - and ==. */
#include <stdlib.h>

#include "eval_int.h"

typedef struct set { fs_value *keys; } set; /* a dict: element -> None */

static void set_free(void *p) {
  set *s = p;
  fsV_release(s->keys);
  free(s);
}

static const fsV_class set_class;

static fs_value *dict_of(const fs_value *v) {
  const set *s = fsV_objdata(v, &set_class);
  return s ? s->keys : NULL;
}

static fs_value *set_new(void) {
  set *s = malloc(sizeof *s);
  if (!s || !(s->keys = fsV_dict())) {
    free(s);
    fsV_seterr("out of memory");
    return NULL;
  }
  return fsV_obj(&set_class, s);
}

static int set_add(fs_value *set_value, fs_value *v) {
  fs_value *none = fsV_none();
  return none ? fsV_dict_set(dict_of(set_value), v, none) : -1;
}

fs_value *fsE_set_of(const fs_value *seq) {
  fs_value *r = set_new();
  for (size_t i = 0; r && i < seq->u.seq.n; i++)
    if (set_add(r, seq->u.seq.items[i]) < 0) fsV_release(r), r = NULL;
  return r;
}

static char *set_repr(fs_value *v) {
  const fs_value *d = dict_of(v);
  fsV_buf b = {0};
  if (!d->u.dict.n) {
    fsV_buf_printf(&b, "set()");
    return fsV_buf_take(&b);
  }
  fsV_buf_printf(&b, "{");
  for (size_t i = 0; i < d->u.dict.n; i++) {
    char *r = fsV_repr(d->u.dict.keys[i]);
    fsV_buf_printf(&b, "%s%s", i ? ", " : "", r ? r : "...");
    free(r);
  }
  fsV_buf_printf(&b, "}");
  return fsV_buf_take(&b);
}

static int64_t set_len(fsE_ctx *E, fs_value *v) {
  (void)E;
  return (int64_t)dict_of(v)->u.dict.n;
}

/* Iteration: a snapshot of the elements, as a list, walked by index. */
typedef struct set_iter { fs_value *items; size_t i; } set_iter;

static void iter_free(void *p) {
  set_iter *it = p;
  fsV_release(it->items);
  free(it);
}

static int iter_next(fsE_ctx *E, fs_value *self, fs_value **out) {
  (void)E;
  set_iter *it = self->u.obj.data;
  if (it->i >= it->items->u.seq.n) return 0;
  *out = fsV_retain(it->items->u.seq.items[it->i++]);
  return 1;
}

static const fsV_class iter_class = {.name = "set_iterator", .next = iter_next, .free = iter_free};

static fs_value *set_iter_new(fsE_ctx *E, fs_value *v) {
  (void)E;
  const fs_value *d = dict_of(v);
  set_iter *it = malloc(sizeof *it);
  fs_value *items = fsV_list(d->u.dict.n);
  if (!it || !items) {
    free(it);
    fsV_release(items);
    fsV_seterr("out of memory");
    return NULL;
  }
  for (size_t i = 0; i < d->u.dict.n; i++) fsV_list_append(items, fsV_retain(d->u.dict.keys[i]));
  *it = (set_iter){items, 0};
  return fsV_obj(&iter_class, it);
}

/* Whether the set a holds every element of the set b. */
static int holds_all(const fs_value *a, const fs_value *b) {
  for (size_t i = 0; i < b->u.dict.n; i++)
    if (!fsV_dict_get(a, b->u.dict.keys[i])) return 0;
  return 1;
}

/* x in s, s == t, s | t, s & t, s - t. */
static fs_value *set_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b) {
  (void)E;
  const fs_value *da = dict_of(a), *db = dict_of(b);
  if ((op == FS_OP_IN || op == FS_OP_NOT_IN) && db) {
    fs_value *hit = fsV_dict_get(db, a);
    if (!hit && fsV_error()[0]) return NULL;
    return fsV_bool((hit != NULL) == (op == FS_OP_IN));
  }
  if (!da || !db) return NULL; /* not an operation of sets: the caller says so */
  if (op == FS_OP_EQ || op == FS_OP_NE)
    return fsV_bool((da->u.dict.n == db->u.dict.n && holds_all(da, db)) == (op == FS_OP_EQ));
  if (op != FS_OP_BITOR && op != FS_OP_BITAND && op != FS_OP_SUB) return NULL;
  fs_value *r = set_new();
  for (size_t i = 0; r && i < da->u.dict.n; i++) {
    bool in_b = fsV_dict_get(db, da->u.dict.keys[i]) != NULL;
    if ((op == FS_OP_BITOR || (op == FS_OP_BITAND) == in_b) && set_add(r, da->u.dict.keys[i]) < 0)
      fsV_release(r), r = NULL;
  }
  for (size_t i = 0; r && op == FS_OP_BITOR && i < db->u.dict.n; i++)
    if (set_add(r, db->u.dict.keys[i]) < 0) fsV_release(r), r = NULL;
  return r;
}

static bool set_truthy(const fs_value *v) { return dict_of(v)->u.dict.n != 0; }

static const fsV_class set_class = {
  .name = "set", .iter = set_iter_new, .binop = set_binop, .len = set_len, .repr = set_repr, .free = set_free,
  .truthy = set_truthy,
};

bool fsE_is_set(const fs_value *v) { return dict_of(v) != NULL; }
