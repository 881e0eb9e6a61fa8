/* value.c -- construction, reference counting, containers, repr. */
#include "value.h"

#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char errbuf[2048];

void fsV_seterr(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(errbuf, sizeof errbuf, fmt, ap);
  va_end(ap);
}
const char *fsV_error(void) { return errbuf; }
void fsV_clearerr(void) { errbuf[0] = '\0'; }

static fs_value v_none = {-1, FSV_NONE, {0}};
static fs_value v_true = {-1, FSV_BOOL, {.b = true}};
static fs_value v_false = {-1, FSV_BOOL, {.b = false}};

fs_value *fsV_none(void) { return &v_none; }
fs_value *fsV_bool(bool b) { return b ? &v_true : &v_false; }

static fs_value *alloc(fs_vtype t) {
  fs_value *v = calloc(1, sizeof *v);
  if (!v) {
    fsV_seterr("out of memory");
    return NULL;
  }
  v->refcount = 1;
  v->type = t;
  return v;
}

fs_value *fsV_int(int64_t i) {
  fs_value *v = alloc(FSV_INT);
  if (v) v->u.i = i;
  return v;
}

fs_value *fsV_float(double f) {
  fs_value *v = alloc(FSV_FLOAT);
  if (v) v->u.f = f;
  return v;
}

fs_value *fsV_str_own(char *s, size_t len) {
  fs_value *v = alloc(FSV_STR);
  if (!v) {
    free(s);
    return NULL;
  }
  v->u.str.s = s;
  v->u.str.len = len;
  return v;
}

fs_value *fsV_str_utf8(const unsigned char *s, size_t len) {
  char *d = malloc(3 * len + 1), *o = d; /* U+FFFD is 3 bytes for 1 */
  if (!d) {
    fsV_seterr("out of memory");
    return NULL;
  }
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    i += fsA_utf8_decode(s + i, len - i, &cp);
    o += fsA_utf8_encode(cp, o);
  }
  *o = '\0';
  return fsV_str_own(d, (size_t)(o - d));
}

fs_value *fsV_str(const char *s, size_t len) {
  char *c = malloc(len + 1);
  if (!c) {
    fsV_seterr("out of memory");
    return NULL;
  }
  memcpy(c, s, len);
  c[len] = '\0';
  return fsV_str_own(c, len);
}

fs_value *fsV_cstr(const char *s) { return fsV_str(s, strlen(s)); }

fs_value *fsV_list(size_t cap) {
  fs_value *v = alloc(FSV_LIST);
  if (v && cap && !(v->u.seq.items = malloc(cap * sizeof(fs_value *)))) {
    free(v);
    fsV_seterr("out of memory");
    return NULL;
  }
  if (v) v->u.seq.cap = cap;
  return v;
}

fs_value *fsV_tuple(size_t n) {
  fs_value *v = alloc(FSV_TUPLE);
  if (v && n && !(v->u.seq.items = calloc(n, sizeof(fs_value *)))) {
    free(v);
    fsV_seterr("out of memory");
    return NULL;
  }
  if (v) v->u.seq.n = v->u.seq.cap = n;
  return v;
}

fs_value *fsV_pair(fs_value *a, fs_value *b) {
  fs_value *t = a && b ? fsV_tuple(2) : NULL;
  if (!t) {
    fsV_release(a);
    fsV_release(b);
    return NULL;
  }
  fsV_seq_set(t, 0, a);
  fsV_seq_set(t, 1, b);
  return t;
}

fs_value *fsV_dict(void) { return alloc(FSV_DICT); }

fs_value *fsV_range(int64_t start, int64_t stop, int64_t step) {
  fs_value *v = alloc(FSV_RANGE);
  if (v) {
    v->u.range.start = start;
    v->u.range.stop = stop;
    v->u.range.step = step;
  }
  return v;
}

fs_value *fsV_obj(const fsV_class *cls, void *data) {
  fs_value *v = alloc(FSV_OBJ);
  if (!v) {
    if (cls->free) cls->free(data);
    return NULL;
  }
  v->u.obj.cls = cls;
  v->u.obj.data = data;
  return v;
}

/* Depth first over an explicit stack (a value may be nested far deeper than
 * the C stack allows). If the stack cannot grow, the answer is "yes": the
 * caller then refuses a store that might have made a cycle. */
bool fsV_reaches(const fs_value *from, const fs_value *target) {
  const fs_value *first = from, **stack = &first;
  size_t n = 1, cap = 0;
  bool found = false;
  while (n && !found) {
    const fs_value *v = stack[--n];
    if (v == target) {
      found = true;
      break;
    }
    bool dict = v->type == FSV_DICT;
    if (!dict && v->type != FSV_LIST && v->type != FSV_TUPLE) continue;
    size_t k = dict ? v->u.dict.n : v->u.seq.n;
    if (n + k > cap) {
      size_t ncap = cap ? cap : 16;
      while (ncap < n + k) ncap *= 2;
      const fs_value **ns = malloc(ncap * sizeof *ns);
      if (!ns) {
        found = true;
        break;
      }
      memcpy(ns, stack, n * sizeof *ns);
      if (cap) free(stack);
      stack = ns;
      cap = ncap;
    }
    for (size_t i = 0; i < k; i++) stack[n++] = dict ? v->u.dict.vals[i] : v->u.seq.items[i];
  }
  if (cap) free(stack);
  return found;
}

void *fsV_objdata(const fs_value *v, const fsV_class *cls) {
  return v && v->type == FSV_OBJ && v->u.obj.cls == cls ? v->u.obj.data : NULL;
}

fs_value *fsV_retain(fs_value *v) {
  if (v && v->refcount >= 0) v->refcount++;
  return v;
}

/* A dead container's next child to release, taken off its end (a dict gives
 * each value, then its key): 1 and *child (which may be a NULL slot of an
 * unfilled tuple), or 0 when it has none left. */
static int take_child(fs_value *c, fs_value **child) {
  if (c->type == FSV_DICT) {
    if (c->u.dict.n == 0) return 0;
    size_t last = c->u.dict.n - 1;
    if (c->u.dict.vals[last]) {
      *child = c->u.dict.vals[last];
      c->u.dict.vals[last] = NULL;
    } else {
      *child = c->u.dict.keys[last];
      c->u.dict.n--;
    }
    return 1;
  }
  if (c->u.seq.n == 0) return 0;
  *child = c->u.seq.items[--c->u.seq.n];
  return 1;
}

/* Iterative, as CPython's trashcan: a container whose count reaches zero
 * joins a list of dead containers (linked through dead_next), and children
 * are released one at a time off the list's head, so a list nested 400,000
 * deep frees in constant stack. An object's free hook may release values
 * itself: that starts a list of its own. */
void fsV_release(fs_value *v) {
  if (!v || v->refcount < 0 || --v->refcount > 0) return;
  fs_value *dead = NULL;
  for (;;) {
    switch (v->type) {
    case FSV_LIST:
    case FSV_TUPLE:
      v->u.seq.dead_next = dead;
      dead = v;
      break;
    case FSV_DICT:
      v->u.dict.dead_next = dead;
      dead = v;
      break;
    case FSV_STR: free(v->u.str.s); free(v); break;
    case FSV_OBJ:
      if (v->u.obj.cls->free) v->u.obj.cls->free(v->u.obj.data);
      free(v);
      break;
    default: free(v); break;
    }
    for (v = NULL; !v && dead;) {
      fs_value *child;
      if (take_child(dead, &child)) {
        if (child && child->refcount >= 0 && --child->refcount == 0) v = child;
        continue;
      }
      fs_value *c = dead;
      if (c->type == FSV_DICT) {
        dead = c->u.dict.dead_next;
        free(c->u.dict.keys);
        free(c->u.dict.vals);
      } else {
        dead = c->u.seq.dead_next;
        free(c->u.seq.items);
      }
      free(c);
    }
    if (!v) return;
  }
}

int fsV_list_append(fs_value *list, fs_value *v) {
  if (list->u.seq.n == list->u.seq.cap) {
    size_t cap = list->u.seq.cap ? 2 * list->u.seq.cap : 4;
    fs_value **items = realloc(list->u.seq.items, cap * sizeof *items);
    if (!items) {
      fsV_release(v);
      fsV_seterr("out of memory");
      return -1;
    }
    list->u.seq.items = items;
    list->u.seq.cap = cap;
  }
  list->u.seq.items[list->u.seq.n++] = v;
  return 0;
}

void fsV_seq_set(fs_value *seq, size_t i, fs_value *v) { seq->u.seq.items[i] = v; }

/* 1 if k can be a dict key, 0 if not, -1 (RecursionError set) past
 * FSV_MAX_DEPTH nested tuples. */
static int hashable(const fs_value *k, int depth) {
  switch (k->type) {
  case FSV_LIST: case FSV_DICT: return 0;
  case FSV_TUPLE:
    if (depth >= FSV_MAX_DEPTH) {
      fsV_seterr("RecursionError: maximum recursion depth exceeded while calling a Python object");
      return -1;
    }
    for (size_t i = 0; i < k->u.seq.n; i++) {
      int h = hashable(k->u.seq.items[i], depth + 1);
      if (h <= 0) return h;
    }
    return 1;
  default: return 1;
  }
}

/* ---- the dict's index ------------------------------------------------------
 * A dict of DICT_INDEXED slots or more keeps an open-addressing table right
 * after its values: 2 * cap uint32 entries, each 1 + a key's position (0:
 * empty). Finding a key is then a hash and a comparison or two, not a scan
 * of every key (an 80,000-key literal took 43 s to build). The table lives in
 * the vals allocation, so code that moves a dict's arrays whole (lib_optim's
 * swap) moves it too; keys are never removed, so no slot is ever a tombstone. */

#define DICT_INDEXED 16

static uint32_t *dict_index(const fs_value *d) {
  return d->u.dict.cap >= DICT_INDEXED ? (uint32_t *)(void *)(d->u.dict.vals + d->u.dict.cap) : NULL;
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* Equal keys hash alike: 1 == 1.0 == True, as fsV_equal compares them. A
 * key is hashable (hashable() said so), so a tuple's depth is bounded. */
static uint64_t hash_key(const fs_value *k) {
  switch (k->type) {
  case FSV_NONE: return 0x9e3779b97f4a7c15ull;
  case FSV_BOOL: return mix64((uint64_t)k->u.b);
  case FSV_INT: return mix64((uint64_t)k->u.i);
  case FSV_FLOAT: {
    double f = k->u.f;
    if (f == floor(f) && f >= -9.2e18 && f <= 9.2e18) return mix64((uint64_t)(int64_t)f);
    uint64_t bits;
    memcpy(&bits, &f, sizeof bits);
    return mix64(bits);
  }
  case FSV_STR: {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < k->u.str.len; i++) h = (h ^ (unsigned char)k->u.str.s[i]) * 1099511628211ull;
    return mix64(h);
  }
  case FSV_TUPLE: {
    uint64_t h = 0x345678ull + k->u.seq.n;
    for (size_t i = 0; i < k->u.seq.n; i++) h = mix64(h ^ hash_key(k->u.seq.items[i]));
    return h;
  }
  case FSV_OBJ: return mix64((uint64_t)(uintptr_t)k);
  default: return 0x5bd1e995ull; /* ranges compare as sequences: all alike */
  }
}

/* Records the key at position at in the index (there is room: load <= 1/2). */
static void index_add(fs_value *d, size_t at) {
  uint32_t *ix = dict_index(d);
  size_t mask = 2 * d->u.dict.cap - 1, j = (size_t)hash_key(d->u.dict.keys[at]) & mask;
  while (ix[j]) j = (j + 1) & mask;
  ix[j] = (uint32_t)(at + 1);
}

/* The key's index, -1 if absent, -2 (error set) if a comparison went too deep. */
static ptrdiff_t dict_find(const fs_value *d, const fs_value *key) {
  const uint32_t *ix = dict_index(d);
  if (ix) {
    size_t mask = 2 * d->u.dict.cap - 1;
    for (size_t j = (size_t)hash_key(key) & mask; ix[j]; j = (j + 1) & mask) {
      int eq = fsV_equal_checked(d->u.dict.keys[ix[j] - 1], key);
      if (eq) return eq > 0 ? (ptrdiff_t)ix[j] - 1 : -2;
    }
    return -1;
  }
  for (size_t i = 0; i < d->u.dict.n; i++) {
    int eq = fsV_equal_checked(d->u.dict.keys[i], key);
    if (eq) return eq > 0 ? (ptrdiff_t)i : -2;
  }
  return -1;
}

int fsV_dict_set(fs_value *d, fs_value *key, fs_value *v) {
  int h = hashable(key, 0);
  if (h == 0) fsV_seterr("unhashable type: '%s'", fsV_type_name(key));
  ptrdiff_t i = h > 0 ? dict_find(d, key) : -2;
  if (i == -2) {
    fsV_release(v);
    return -1;
  }
  if (i >= 0) {
    fsV_release(d->u.dict.vals[i]);
    d->u.dict.vals[i] = v;
    return 0;
  }
  if (d->u.dict.n == d->u.dict.cap) {
    size_t cap = d->u.dict.cap ? 2 * d->u.dict.cap : 4;
    if (cap > UINT32_MAX / 2) { /* positions are 32-bit in the index */
      fsV_release(v);
      fsV_seterr("out of memory");
      return -1;
    }
    size_t index_bytes = cap >= DICT_INDEXED ? 2 * cap * sizeof(uint32_t) : 0;
    fs_value **k = realloc(d->u.dict.keys, cap * sizeof *k);
    if (k) d->u.dict.keys = k;
    fs_value **vs = k ? realloc(d->u.dict.vals, cap * sizeof *vs + index_bytes) : NULL;
    if (!vs) {
      fsV_release(v);
      fsV_seterr("out of memory");
      return -1;
    }
    d->u.dict.vals = vs;
    d->u.dict.cap = cap;
    if (index_bytes) { /* rebuilt at each doubling: linear overall */
      memset(dict_index(d), 0, index_bytes);
      for (size_t j = 0; j < d->u.dict.n; j++) index_add(d, j);
    }
  }
  d->u.dict.keys[d->u.dict.n] = fsV_retain(key);
  d->u.dict.vals[d->u.dict.n++] = v;
  if (dict_index(d)) index_add(d, d->u.dict.n - 1);
  return 0;
}

fs_value *fsV_dict_get(const fs_value *d, const fs_value *key) {
  int h = hashable(key, 0);
  ptrdiff_t i = h > 0 ? dict_find(d, key) : -1;
  return i >= 0 ? d->u.dict.vals[i] : NULL;
}

fs_value *fsV_dict_getstr(const fs_value *d, const char *key) {
  for (size_t i = 0; i < d->u.dict.n; i++) {
    const fs_value *k = d->u.dict.keys[i];
    if (k->type == FSV_STR && strcmp(k->u.str.s, key) == 0) return d->u.dict.vals[i];
  }
  return NULL;
}

uint64_t fsV_range_count(const fs_value *r) {
  int64_t lo = r->u.range.start, hi = r->u.range.stop, st = r->u.range.step;
  /* unsigned arithmetic: the span of two int64 values fits in uint64 */
  if (st > 0 && lo < hi) return ((uint64_t)hi - (uint64_t)lo - 1) / (uint64_t)st + 1;
  if (st < 0 && lo > hi) return ((uint64_t)lo - (uint64_t)hi - 1) / (0 - (uint64_t)st) + 1;
  return 0;
}

int64_t fsV_range_len(const fs_value *r) {
  uint64_t n = fsV_range_count(r);
  if (n > (uint64_t)INT64_MAX) { /* range(-2**63 + 1, 2**63 - 1): Python's len() cannot say it either */
    fsV_seterr("OverflowError: Python int too large to convert to C ssize_t");
    return -1;
  }
  return (int64_t)n;
}

int64_t fsV_range_at(const fs_value *r, int64_t i) {
  return (int64_t)((uint64_t)r->u.range.start + (uint64_t)i * (uint64_t)r->u.range.step);
}

const char *fsV_type_name(const fs_value *v) {
  static const char *names[] = {"NoneType", "bool", "int", "float", "str",
                                "list", "tuple", "dict", "range"};
  return v->type == FSV_OBJ ? v->u.obj.cls->name : names[v->type];
}

bool fsV_truthy(const fs_value *v) {
  switch (v->type) {
  case FSV_NONE: return false;
  case FSV_BOOL: return v->u.b;
  case FSV_INT: return v->u.i != 0;
  case FSV_FLOAT: return v->u.f != 0.0;
  case FSV_STR: return v->u.str.len != 0;
  case FSV_LIST: case FSV_TUPLE: return v->u.seq.n != 0;
  case FSV_DICT: return v->u.dict.n != 0;
  case FSV_RANGE: return fsV_range_len(v) != 0;
  default: return !(v->type == FSV_OBJ && v->u.obj.cls->truthy) || v->u.obj.cls->truthy(v);
  }
}

bool fsV_is_number(const fs_value *v) {
  return v->type == FSV_BOOL || v->type == FSV_INT || v->type == FSV_FLOAT;
}

double fsV_to_double(const fs_value *v) {
  return v->type == FSV_FLOAT ? v->u.f : v->type == FSV_INT ? (double)v->u.i : (double)v->u.b;
}

/* ---- repr ---------------------------------------------------------------- */

void fsV_buf_put(fsV_buf *b, const char *s, size_t n) {
  if (b->oom || b->too_deep) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 32;
    while (cap < b->n + n + 1) cap *= 2;
    char *ns = realloc(b->s, cap);
    if (!ns) {
      b->oom = true;
      return;
    }
    b->s = ns;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
}

void fsV_buf_puts(fsV_buf *b, const char *s) { fsV_buf_put(b, s, strlen(s)); }

void fsV_buf_printf(fsV_buf *b, const char *fmt, ...) {
  char small[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    fsV_buf_put(b, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->oom = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  fsV_buf_put(b, big, (size_t)n);
  free(big);
}

char *fsV_buf_take(fsV_buf *b) {
  if (!b->oom && !b->too_deep && !b->s) fsV_buf_put(b, "", 0);
  if (b->oom || b->too_deep) {
    free(b->s);
    b->s = NULL;
    if (b->too_deep) fsV_seterr("RecursionError: maximum recursion depth exceeded while getting the repr of an object");
    else fsV_seterr("out of memory");
    b->n = b->cap = 0;
    b->oom = b->too_deep = false;
    return NULL;
  }
  char *s = b->s;
  b->s = NULL;
  b->n = b->cap = 0;
  return s;
}

void fsV_float_repr(double f, char *buf, size_t len) {
  if (isnan(f)) {
    snprintf(buf, len, "nan");
    return;
  }
  if (isinf(f)) {
    snprintf(buf, len, f < 0 ? "-inf" : "inf");
    return;
  }
  char tmp[40];
  for (int p = 1; p <= 17; p++) {
    snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
    if (strtod(tmp, NULL) == f) break;
  }
  /* tmp is [-]d[.ddd]e(+|-)XX: split it into sign, digits and exponent */
  const char *s = tmp;
  bool neg = *s == '-';
  if (neg) s++;
  char digits[24];
  int nd = 0;
  for (; *s != 'e'; s++)
    if (*s != '.') digits[nd++] = *s;
  int exp = atoi(s + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = '\0';
  char out[64];
  int o = 0;
  if (neg) out[o++] = '-';
  if (exp >= -4 && exp < 16) { /* fixed notation, as Python's repr */
    if (exp >= 0) {
      for (int i = 0; i <= exp; i++) out[o++] = i < nd ? digits[i] : '0';
      out[o++] = '.';
      if (nd > exp + 1)
        for (int i = exp + 1; i < nd; i++) out[o++] = digits[i];
      else
        out[o++] = '0';
    } else {
      out[o++] = '0';
      out[o++] = '.';
      for (int i = 0; i < -exp - 1; i++) out[o++] = '0';
      for (int i = 0; i < nd; i++) out[o++] = digits[i];
    }
    out[o] = '\0';
  } else {
    out[o++] = digits[0];
    if (nd > 1) {
      out[o++] = '.';
      for (int i = 1; i < nd; i++) out[o++] = digits[i];
    }
    snprintf(out + o, sizeof out - (size_t)o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  }
  snprintf(buf, len, "%s", out);
}

static void repr_str(fsV_buf *b, const char *s, size_t n) {
  bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
  char q = sq && !dq ? '"' : '\'';
  fsV_buf_put(b, &q, 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\\' || c == (unsigned char)q) {
      char e[2] = {'\\', (char)c};
      fsV_buf_put(b, e, 2);
    } else if (c == '\n') fsV_buf_puts(b, "\\n");
    else if (c == '\t') fsV_buf_puts(b, "\\t");
    else if (c == '\r') fsV_buf_puts(b, "\\r");
    else if (c < 0x20 || c == 0x7f) fsV_buf_printf(b, "\\x%02x", c);
    else fsV_buf_put(b, (const char *)&c, 1);
  }
  fsV_buf_put(b, &q, 1);
}

static void repr_at(fsV_buf *b, const fs_value *v, int depth);

static void repr_items(fsV_buf *b, const fs_value *v, int depth) {
  if (depth >= FSV_MAX_DEPTH) {
    b->too_deep = true;
    return;
  }
  for (size_t i = 0; i < v->u.seq.n && !b->too_deep; i++) {
    if (i) fsV_buf_puts(b, ", ");
    repr_at(b, v->u.seq.items[i], depth + 1);
  }
}

static void repr_at(fsV_buf *b, const fs_value *v, int depth) {
  char num[40];
  switch (v->type) {
  case FSV_NONE: fsV_buf_puts(b, "None"); break;
  case FSV_BOOL: fsV_buf_puts(b, v->u.b ? "True" : "False"); break;
  case FSV_INT: fsV_buf_printf(b, "%lld", (long long)v->u.i); break;
  case FSV_FLOAT:
    fsV_float_repr(v->u.f, num, sizeof num);
    fsV_buf_puts(b, num);
    break;
  case FSV_STR: repr_str(b, v->u.str.s, v->u.str.len); break;
  case FSV_LIST:
  case FSV_TUPLE:
    fsV_buf_puts(b, v->type == FSV_LIST ? "[" : "(");
    repr_items(b, v, depth);
    if (v->type == FSV_TUPLE && v->u.seq.n == 1) fsV_buf_puts(b, ",");
    fsV_buf_puts(b, v->type == FSV_LIST ? "]" : ")");
    break;
  case FSV_DICT:
    fsV_buf_puts(b, "{");
    if (depth >= FSV_MAX_DEPTH) b->too_deep = true;
    for (size_t i = 0; i < v->u.dict.n && !b->too_deep; i++) {
      if (i) fsV_buf_puts(b, ", ");
      repr_at(b, v->u.dict.keys[i], depth + 1);
      fsV_buf_puts(b, ": ");
      repr_at(b, v->u.dict.vals[i], depth + 1);
    }
    fsV_buf_puts(b, "}");
    break;
  case FSV_RANGE:
    fsV_buf_printf(b, "range(%lld, %lld", (long long)v->u.range.start, (long long)v->u.range.stop);
    if (v->u.range.step != 1) fsV_buf_printf(b, ", %lld", (long long)v->u.range.step);
    fsV_buf_puts(b, ")");
    break;
  case FSV_OBJ: {
    char *r = v->u.obj.cls->repr ? v->u.obj.cls->repr((fs_value *)v) : NULL;
    if (r) fsV_buf_puts(b, r);
    else fsV_buf_printf(b, "<%s object>", v->u.obj.cls->name);
    free(r);
    break;
  }
  }
}

void fsV_buf_repr(fsV_buf *b, const fs_value *v) { repr_at(b, v, 0); }

char *fsV_repr(const fs_value *v) {
  fsV_buf b = {0};
  fsV_buf_repr(&b, v);
  return fsV_buf_take(&b);
}

char *fsV_tostr(const fs_value *v) {
  if (v->type == FSV_STR) {
    char *s = malloc(v->u.str.len + 1);
    if (!s) {
      fsV_seterr("out of memory");
      return NULL;
    }
    memcpy(s, v->u.str.s, v->u.str.len + 1);
    return s;
  }
  return fsV_repr(v);
}
