/* lib_core.c -- the language's own functions and the methods of list, dict
 * and str. Signatures (and so arity, keywords, literal types, defaults)
 * come from signatures.c; these see bound slots only. */
#define _GNU_SOURCE /* memmem */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "eval_int.h"

static fs_value *oom(void) {
  fsV_seterr("out of memory");
  return NULL;
}

fs_value *fsE_print(fsE_ctx *E, fs_value *const *s, const fsV_args *a) {
  fs_value *args = s[0];
  FILE *out = fsE_out(E);
  /* a run has no file objects (sys is not importable there): only the
   * default, the run's output */
  if (s[3]->type != FSV_NONE) {
    fsE_error(E, a->loc, "print(): file= must be None at run time (the run prints to its output; `sys` is not importable)");
    return NULL;
  }
  if (E->progress) fsPG_clear(E->progress); /* a line drawn in place must not swallow the text */
  for (size_t i = 0; i < args->u.seq.n; i++) {
    char *t = fsV_tostr(args->u.seq.items[i]);
    if (!t) return NULL;
    if (i) fputs(s[1]->u.str.s, out);
    fputs(t, out);
    free(t);
  }
  fputs(s[2]->u.str.s, out);
  /* with progress lines on the other stream, a piped (block-buffered)
   * stdout would reach the reader after them: each print goes out now */
  if (E->opt->progress || fsV_truthy(s[4])) fflush(out);
  return fsV_none();
}

NATIVE(b_print) { return fsE_print(E, s, a); }

NATIVE(b_param) {
  const char *name = s[0]->u.str.s;
  fsE_define *hit = NULL;
  for (size_t i = 0; i < E->ndefines; i++)
    if (E->defines[i].nlen == strlen(name) && strncmp(E->defines[i].name, name, E->defines[i].nlen) == 0) {
      hit = &E->defines[i]; /* the last -D of a name wins */
    }
  if (!hit) return fsV_retain(s[1]);
  fs_value *v;
  char *err;
  if (fsV_parse_param(hit->value, s[1], &v, &err) < 0) {
    if (!E->status) E->status = 2; /* a usage error, not the script's */
    fsE_error(E, a->loc, "-D %s=%s: %s", name, hit->value, err ? err : "out of memory");
    free(err);
    return NULL;
  }
  return v;
}

NATIVE(b_range) {
  fs_value *st = s[0], *sp = s[1], *stepv = s[2];
  if (sp->type == FSV_NONE) return fsV_range(0, st->type == FSV_INT ? st->u.i : st->u.b, 1);
  int64_t step = stepv->type == FSV_NONE ? 1 : stepv->type == FSV_INT ? stepv->u.i : stepv->u.b;
  if (step == 0) {
    fsV_seterr("range() arg 3 must not be zero");
    return NULL;
  }
  return fsV_range(st->type == FSV_INT ? st->u.i : st->u.b, sp->type == FSV_INT ? sp->u.i : sp->u.b, step);
}

NATIVE(b_len) {
  int64_t n = fsV_len(E, s[0]);
  return n < 0 ? NULL : fsV_int(n);
}

/* The items of an iterable as a new list. */
static fs_value *collect(fsE_ctx *E, fs_value *v) {
  fsE_iter it;
  fs_value *list = fsV_list(0), *item;
  int st = list && fsE_iter_begin(E, v, &it) == 0 ? 1 : -1;
  if (list && st < 0) fsE_iter_end(&it);
  if (!list) return NULL;
  if (st > 0) {
    while ((st = fsE_iter_next(E, &it, &item)) == 1)
      if (fsV_list_append(list, item) < 0) {
        st = -1;
        break;
      }
    fsE_iter_end(&it);
  }
  if (st < 0) {
    fsV_release(list);
    return NULL;
  }
  return list;
}

/* a < b as Python's, -1 on a type error */
static int less(fsE_ctx *E, fs_value *a, fs_value *b) {
  fs_value *r = fsV_binop(E, FS_OP_LT, a, b);
  if (!r) return -1;
  int t = fsV_truthy(r);
  fsV_release(r);
  return t;
}

static fs_value *minmax(fsE_ctx *E, fs_value *args, bool max, const char *name) {
  fs_value *items = args->u.seq.n == 1 ? collect(E, args->u.seq.items[0]) : fsV_retain(args);
  if (!items) return NULL;
  if (items->u.seq.n == 0) {
    fsV_release(items);
    fsV_seterr(args->u.seq.n ? "%s() arg is an empty sequence" : "%s expected at least 1 argument, got 0",
               name);
    return NULL;
  }
  fs_value *best = items->u.seq.items[0];
  for (size_t i = 1; i < items->u.seq.n; i++) {
    fs_value *x = items->u.seq.items[i];
    int l = max ? less(E, best, x) : less(E, x, best);
    if (l < 0) {
      fsV_release(items);
      return NULL;
    }
    if (l) best = x;
  }
  fsV_retain(best);
  fsV_release(items);
  return best;
}

NATIVE(b_min) { return minmax(E, s[0], false, "min"); }
NATIVE(b_max) { return minmax(E, s[0], true, "max"); }

NATIVE(b_abs) {
  fs_value *v = s[0];
  if (v->type == FSV_FLOAT) return fsV_float(fabs(v->u.f));
  if (v->type == FSV_INT || v->type == FSV_BOOL) {
    int64_t i = v->type == FSV_INT ? v->u.i : v->u.b;
    return i >= 0 ? fsV_int(i) : fsV_unop(E, FS_OP_NEG, v);
  }
  fsV_seterr("bad operand type for abs(): '%s'", fsV_type_name(v));
  return NULL;
}

/* str -> number as int()/float() read it: surrounding spaces allowed */
static fs_value *parse_number(const fs_value *v, bool want_int) {
  const char *t = v->u.str.s;
  while (isspace((unsigned char)*t)) t++;
  size_t n = strlen(t);
  while (n && isspace((unsigned char)t[n - 1])) n--;
  char buf[128];
  if (n < sizeof buf) {
    memcpy(buf, t, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    if (want_int) {
      long long i = strtoll(buf, &end, 10);
      if (n && !*end && errno == 0) return fsV_int(i);
    } else {
      double f = strtod(buf, &end);
      if (n && !*end) return fsV_float(f);
    }
  }
  char *r = fsV_repr(v);
  if (want_int) fsV_seterr("invalid literal for int() with base 10: %s", r ? r : "?");
  else fsV_seterr("could not convert string to float: %s", r ? r : "?");
  free(r);
  return NULL;
}

NATIVE(b_int) {
  fs_value *v = s[0];
  if (v->type == FSV_STR) return parse_number(v, true);
  if (v->type == FSV_FLOAT) {
    if (!isfinite(v->u.f)) {
      fsV_seterr(isnan(v->u.f) ? "cannot convert float NaN to integer"
                               : "cannot convert float infinity to integer");
      return NULL;
    }
    if (fabs(v->u.f) >= 9223372036854775808.0) {
      fsV_seterr("integer overflow: the result does not fit in 64 bits");
      return NULL;
    }
    return fsV_int((int64_t)v->u.f);
  }
  return fsV_int(v->type == FSV_INT ? v->u.i : v->u.b);
}

NATIVE(b_float) {
  return s[0]->type == FSV_STR ? parse_number(s[0], false) : fsV_float(fsV_to_double(s[0]));
}

NATIVE(b_str) {
  char *t = fsV_tostr(s[0]);
  return t ? fsV_str_own(t, strlen(t)) : NULL;
}

NATIVE(b_repr) {
  char *t = fsV_repr(s[0]);
  return t ? fsV_str_own(t, strlen(t)) : NULL;
}

NATIVE(b_bool) { return fsV_bool(fsV_truthy(s[0])); }
NATIVE(b_list) { return collect(E, s[0]); }

NATIVE(b_tuple) {
  fs_value *l = collect(E, s[0]);
  if (l) l->type = FSV_TUPLE; /* same layout */
  return l;
}

/* set(iterable): sets.c's set of the iterable's elements. */
NATIVE(b_set) {
  fs_value *items = collect(E, s[0]), *r = items ? fsE_set_of(items) : NULL;
  fsV_release(items);
  return r;
}

NATIVE(b_dict) {
  fs_value *d = fsV_dict(), *pairs = NULL;
  if (!d) return NULL;
  if (s[0]->type != FSV_NONE && !(pairs = s[0]->type == FSV_DICT ? NULL : collect(E, s[0]))) {
    if (s[0]->type != FSV_DICT) goto fail;
  }
  if (s[0]->type == FSV_DICT)
    for (size_t i = 0; i < s[0]->u.dict.n; i++)
      if (fsV_dict_set(d, s[0]->u.dict.keys[i], fsV_retain(s[0]->u.dict.vals[i])) < 0) goto fail;
  for (size_t i = 0; pairs && i < pairs->u.seq.n; i++) {
    fs_value *p = pairs->u.seq.items[i];
    if ((p->type != FSV_TUPLE && p->type != FSV_LIST) || p->u.seq.n != 2) {
      fsV_seterr("dictionary update sequence element #%zu has the wrong shape (a pair is required)", i);
      goto fail;
    }
    if (fsV_dict_set(d, p->u.seq.items[0], fsV_retain(p->u.seq.items[1])) < 0) goto fail;
  }
  for (size_t i = 0; i < s[1]->u.dict.n; i++)
    if (fsV_dict_set(d, s[1]->u.dict.keys[i], fsV_retain(s[1]->u.dict.vals[i])) < 0) goto fail;
  fsV_release(pairs);
  return d;
fail:
  fsV_release(pairs);
  fsV_release(d);
  return NULL;
}

/* enumerate and zip are lazy, so they can walk a data loader. */
typedef struct lazy {
  size_t n;
  int64_t count;
  fsE_iter its[];
} lazy;

static void lazy_free(void *p) {
  lazy *z = p;
  for (size_t i = 0; i < z->n; i++) fsE_iter_end(&z->its[i]);
  free(z);
}

static fs_value *lazy_iter(fsE_ctx *E, fs_value *self) { return fsV_retain(self); }

static int lazy_next(fsE_ctx *E, fs_value *self, fs_value **out, bool numbered) {
  lazy *z = self->u.obj.data;
  size_t k = numbered ? 1 : 0;
  if (z->n == 0) return 0; /* zip() is empty */
  fs_value *t = fsV_tuple(z->n + k);
  if (!t) return -1;
  if (numbered && !(t->u.seq.items[0] = fsV_int(z->count))) {
    fsV_release(t);
    return -1;
  }
  for (size_t i = 0; i < z->n; i++) {
    int st = fsE_iter_next(E, &z->its[i], &t->u.seq.items[i + k]);
    if (st <= 0) {
      t->u.seq.n = i + k; /* release only the items already taken */
      fsV_release(t);
      return st;
    }
  }
  z->count++;
  *out = t;
  return 1;
}

static int enum_next(fsE_ctx *E, fs_value *self, fs_value **out) { return lazy_next(E, self, out, true); }
static int zip_next(fsE_ctx *E, fs_value *self, fs_value **out) { return lazy_next(E, self, out, false); }

static const fsV_class enumerate_class = {
  .name = "enumerate", .iter = lazy_iter, .next = enum_next, .free = lazy_free};
static const fsV_class zip_class = {.name = "zip", .iter = lazy_iter, .next = zip_next, .free = lazy_free};

static fs_value *make_lazy(fsE_ctx *E, const fsV_class *cls, fs_value *const *srcs, size_t n, int64_t start) {
  lazy *z = calloc(1, sizeof *z + n * sizeof z->its[0]);
  if (!z) return oom();
  z->count = start;
  for (; z->n < n; z->n++)
    if (fsE_iter_begin(E, srcs[z->n], &z->its[z->n]) < 0) {
      z->n++; /* ends the failed iterator too */
      lazy_free(z);
      return NULL;
    }
  return fsV_obj(cls, z);
}

NATIVE(b_enumerate) { return make_lazy(E, &enumerate_class, &s[0], 1, s[1]->type == FSV_INT ? s[1]->u.i : s[1]->u.b); }
NATIVE(b_zip) { return make_lazy(E, &zip_class, s[0]->u.seq.items, s[0]->u.seq.n, 0); }

NATIVE(b_sum) {
  fsE_iter it;
  fs_value *acc = fsV_retain(s[1]), *item;
  if (fsE_iter_begin(E, s[0], &it) < 0) {
    fsE_iter_end(&it);
    fsV_release(acc);
    return NULL;
  }
  int st;
  while (acc && (st = fsE_iter_next(E, &it, &item)) != 0) {
    fs_value *r = st > 0 ? fsV_binop(E, FS_OP_ADD, acc, item) : NULL;
    if (st > 0) fsV_release(item);
    fsV_release(acc);
    acc = r;
  }
  fsE_iter_end(&it);
  return acc;
}

NATIVE(b_round) {
  fs_value *x = s[0], *nd = s[1];
  if (x->type != FSV_FLOAT) {
    if (nd->type == FSV_NONE || nd->u.i >= 0) return fsV_int(x->type == FSV_INT ? x->u.i : x->u.b);
    fsV_seterr("round() of an int with negative ndigits is not supported");
    return NULL;
  }
  if (nd->type == FSV_NONE) {
    fs_value *f = fsV_float(nearbyint(x->u.f)); /* half to even, as Python */
    if (!f) return NULL;
    fs_value *r = b_int(E, NULL, &f, a);
    fsV_release(f);
    return r;
  }
  if (!isfinite(x->u.f) || nd->u.i > 300) return fsV_float(x->u.f);
  char buf[400];
  snprintf(buf, sizeof buf, "%.*f", nd->u.i < 0 ? 0 : (int)nd->u.i, x->u.f); /* correctly rounded */
  double r = strtod(buf, NULL);
  if (nd->u.i < 0) {
    double p = pow(10.0, (double)-nd->u.i);
    r = nearbyint(x->u.f / p) * p;
  }
  return fsV_float(r);
}

NATIVE(b_sorted) {
  fs_value *items = collect(E, s[0]), *keys = NULL;
  if (!items) return NULL;
  size_t n = items->u.seq.n;
  bool rev = fsV_truthy(s[2]);
  if (s[1]->type != FSV_NONE) { /* key= : compare key(x) */
    if (!(keys = fsV_list(n))) goto fail;
    for (size_t i = 0; i < n; i++) {
      fsV_args ka = {&items->u.seq.items[i], 1, NULL, NULL, 0, a->loc};
      fs_value *k = fsE_call(E, s[1], &ka);
      if (!k) goto fail;
      fsV_list_append(keys, k);
    }
  }
  fs_value **ks = keys ? keys->u.seq.items : items->u.seq.items;
  /* stable insertion sort; reverse keeps equal items in order, as Python */
  for (size_t i = 1; i < n; i++) {
    fs_value *k = ks[i], *v = items->u.seq.items[i];
    size_t j = i;
    while (j > 0) {
      int l = rev ? less(E, ks[j - 1], k) : less(E, k, ks[j - 1]);
      if (l < 0) goto fail;
      if (!l) break;
      ks[j] = ks[j - 1];
      if (keys) items->u.seq.items[j] = items->u.seq.items[j - 1];
      j--;
    }
    ks[j] = k;
    if (keys) items->u.seq.items[j] = v;
  }
  fsV_release(keys);
  return items;
fail:
  fsV_release(keys);
  fsV_release(items);
  return NULL;
}

/* ---- methods of the built-in types ---- */

static const char cycle_msg[] = "a container cannot hold itself (reference cycles are not supported)";

NATIVE(m_append) {
  if (fsV_reaches(s[0], self)) {
    fsV_seterr(cycle_msg);
    return NULL;
  }
  return fsV_list_append(self, fsV_retain(s[0])) < 0 ? NULL : fsV_none();
}

static fs_value *dict_view(fs_value *d, int which) {
  fs_value *l = fsV_list(d->u.dict.n);
  for (size_t i = 0; l && i < d->u.dict.n; i++) {
    fs_value *v;
    if (which == 2) v = fsV_pair(fsV_retain(d->u.dict.keys[i]), fsV_retain(d->u.dict.vals[i]));
    else v = fsV_retain(which ? d->u.dict.vals[i] : d->u.dict.keys[i]);
    if (!v) {
      fsV_release(l);
      return NULL;
    }
    fsV_list_append(l, v);
  }
  return l;
}

NATIVE(m_keys) { return dict_view(self, 0); }
NATIVE(m_values) { return dict_view(self, 1); }
NATIVE(m_items) { return dict_view(self, 2); }

NATIVE(m_get) {
  fs_value *v = fsV_dict_get(self, s[0]);
  return fsV_retain(v ? v : s[1]);
}

NATIVE(m_join) {
  fs_value *items = collect(E, s[0]);
  if (!items) return NULL;
  fsV_buf b = {0};
  fsV_buf_put(&b, "", 0);
  for (size_t i = 0; i < items->u.seq.n; i++) {
    fs_value *it = items->u.seq.items[i];
    if (it->type != FSV_STR) {
      fsV_seterr("sequence item %zu: expected str instance, %s found", i, fsV_type_name(it));
      free(b.s);
      fsV_release(items);
      return NULL;
    }
    if (i) fsV_buf_put(&b, self->u.str.s, self->u.str.len);
    fsV_buf_put(&b, it->u.str.s, it->u.str.len);
  }
  fsV_release(items);
  size_t n = b.n;
  char *t = fsV_buf_take(&b);
  return t ? fsV_str_own(t, n) : NULL;
}

/* str.find(sub[, start[, end]]): the index (in code points, as Python counts)
 * of the first sub inside s[start:end], or -1; start past the end finds
 * nothing, not even "" (CPython's rule). */
NATIVE(m_find) {
  const char *p = self->u.str.s;
  size_t len = self->u.str.len;
  int64_t n = (int64_t)fsV_utf8_count(p, len), lo = s[1]->type == FSV_NONE ? 0 : fsE_ival(s[1]);
  int64_t hi = s[2]->type == FSV_NONE ? n : fsE_ival(s[2]);
  if (lo < 0) lo = lo + n < 0 ? 0 : lo + n;
  if (hi < 0) hi = hi + n < 0 ? 0 : hi + n;
  if (hi > n) hi = n;
  if (lo > n || lo > hi) return fsV_int(-1);
  size_t b0 = fsV_utf8_offset(p, len, (size_t)lo), b1 = fsV_utf8_offset(p, len, (size_t)hi);
  const char *q = memmem(p + b0, b1 - b0, s[0]->u.str.s, s[0]->u.str.len);
  return fsV_int(q ? (int64_t)fsV_utf8_count(p, (size_t)(q - p)) : -1);
}

NATIVE(m_split) {
  const char *p = self->u.str.s, *end = p + self->u.str.len;
  fs_value *l = fsV_list(0), *sep = s[0];
  int64_t max = s[1]->type == FSV_INT ? s[1]->u.i : -1;
  if (sep->type == FSV_STR && sep->u.str.len == 0) {
    fsV_release(l);
    fsV_seterr("empty separator");
    return NULL;
  }
  while (l) {
    if (sep->type == FSV_NONE)
      while (p < end && isspace((unsigned char)*p)) p++;
    if (sep->type == FSV_NONE && p == end) break;
    const char *q = NULL;
    if (max != 0) {
      if (sep->type == FSV_NONE)
        for (q = p; q < end && !isspace((unsigned char)*q); q++) {}
      else
        q = memmem(p, (size_t)(end - p), sep->u.str.s, sep->u.str.len);
    }
    if (!q || q == end) q = end;
    fs_value *piece = fsV_str(p, (size_t)(q - p));
    if (!piece || fsV_list_append(l, piece) < 0) {
      fsV_release(l);
      return NULL;
    }
    if (q == end) break;
    p = q + (sep->type == FSV_NONE ? 1 : sep->u.str.len);
    if (max > 0) max--;
    if (sep->type != FSV_NONE && p == end) { /* a trailing separator leaves '' */
      fs_value *e = fsV_str("", 0);
      if (!e || fsV_list_append(l, e) < 0) {
        fsV_release(l);
        return NULL;
      }
      break;
    }
  }
  return l;
}

static fs_value *recase(fs_value *v, int (*f)(int)) {
  fs_value *r = fsV_str(v->u.str.s, v->u.str.len);
  for (size_t i = 0; r && i < r->u.str.len; i++) r->u.str.s[i] = (char)f((unsigned char)r->u.str.s[i]);
  return r;
}

NATIVE(m_upper) { return recase(self, toupper); }
NATIVE(m_lower) { return recase(self, tolower); }

/* str.startswith/endswith(affix): affix a str or a tuple of str (any one
 * matching), as Python; bytes compare as code points do in UTF-8 */
static fs_value *has_affix(const fs_value *self, const fs_value *affix, bool at_end, const char *fn) {
  bool tuple = affix->type == FSV_TUPLE;
  size_t n = tuple ? affix->u.seq.n : 1, len = self->u.str.len;
  for (size_t i = 0; i < n; i++) {
    const fs_value *a = tuple ? affix->u.seq.items[i] : affix;
    if (a->type != FSV_STR) {
      fsV_seterr(tuple ? "tuple for %s must only contain str, not %s"
                       : "%s first arg must be str or a tuple of str, not %s", fn, fsV_type_name(a));
      return NULL;
    }
    size_t k = a->u.str.len;
    if (k <= len && memcmp(self->u.str.s + (at_end ? len - k : 0), a->u.str.s, k) == 0) return fsV_bool(true);
  }
  return fsV_bool(false);
}

NATIVE(m_startswith) { return has_affix(self, s[0], false, "startswith"); }
NATIVE(m_endswith) { return has_affix(self, s[0], true, "endswith"); }

/* ord(c) and chr(i): one code point of a str (held as UTF-8) and back, with
 * Python's errors; a byte-level model's prompt and sample go through them. */
NATIVE(b_ord) {
  const unsigned char *t = (const unsigned char *)s[0]->u.str.s;
  size_t n = s[0]->u.str.len, len = 0;
  uint32_t cp = 0, later;
  for (size_t i = 0; i < n; len++) i += fsA_utf8_decode(t + i, n - i, len ? &later : &cp);
  if (len != 1) {
    fsV_seterr("ord() expected a character, but string of length %zu found", len);
    return NULL;
  }
  return fsV_int(cp);
}

NATIVE(b_chr) {
  int64_t i = s[0]->u.i;
  if (i < 0 || i > 0x10FFFF) {
    fsV_seterr("chr() arg not in range(0x110000)");
    return NULL;
  }
  char b[4];
  return fsV_str(b, fsA_utf8_encode((uint32_t)i, b));
}

static const fsE_reg core_funcs[] = {
  {"print", b_print}, {"param", b_param}, {"range", b_range}, {"len", b_len},
  {"min", b_min}, {"max", b_max}, {"abs", b_abs}, {"int", b_int}, {"float", b_float},
  {"str", b_str}, {"repr", b_repr}, {"bool", b_bool}, {"list", b_list}, {"tuple", b_tuple}, {"dict", b_dict},
  {"set", b_set},
  {"enumerate", b_enumerate}, {"zip", b_zip}, {"sum", b_sum}, {"round", b_round},
  {"sorted", b_sorted},
  {"ord", b_ord}, {"chr", b_chr},
  {"list.append", m_append}, {"dict.keys", m_keys}, {"dict.values", m_values},
  {"dict.items", m_items}, {"dict.get", m_get}, {"str.join", m_join}, {"str.split", m_split},
  {"str.find", m_find},
  {"str.upper", m_upper}, {"str.lower", m_lower}, {"str.startswith", m_startswith}, {"str.endswith", m_endswith},
  {NULL, NULL},
};
const fsE_lib fsE_lib_core = {"core", core_funcs};
