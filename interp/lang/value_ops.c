/* value_ops.c -- Python's operators, comparisons, indexing and slicing on
 * the built-in types; objects are handed to their class. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "value.h"

static bool intlike(const fs_value *v) { return v->type == FSV_INT || v->type == FSV_BOOL; }
static int64_t ival(const fs_value *v) { return v->type == FSV_INT ? v->u.i : v->u.b; }

static fs_value *overflow(void) {
  fsV_seterr("integer overflow: the result does not fit in 64 bits");
  return NULL;
}

/* int ** int, exponent >= 0, by squaring with overflow checks */
static fs_value *ipow(int64_t base, int64_t e) {
  int64_t r = 1;
  while (e > 0) {
    if ((e & 1) && __builtin_mul_overflow(r, base, &r)) return overflow();
    e >>= 1;
    if (e && __builtin_mul_overflow(base, base, &base)) return overflow();
  }
  return fsV_int(r);
}

static fs_value *int_arith(fs_op op, int64_t a, int64_t b) {
  int64_t r;
  switch (op) {
  case FS_OP_ADD: return __builtin_add_overflow(a, b, &r) ? overflow() : fsV_int(r);
  case FS_OP_SUB: return __builtin_sub_overflow(a, b, &r) ? overflow() : fsV_int(r);
  case FS_OP_MUL: return __builtin_mul_overflow(a, b, &r) ? overflow() : fsV_int(r);
  case FS_OP_DIV:
    if (b == 0) break;
    return fsV_float((double)a / (double)b);
  case FS_OP_FDIV:
  case FS_OP_MOD: {
    if (b == 0) break;
    if (a == INT64_MIN && b == -1) return op == FS_OP_MOD ? fsV_int(0) : overflow();
    int64_t q = a / b, m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) { /* floor toward -inf, as Python */
      q--;
      m += b;
    }
    return fsV_int(op == FS_OP_FDIV ? q : m);
  }
  case FS_OP_POW:
    if (b >= 0) return ipow(a, b);
    if (a == 0) {
      fsV_seterr("0.0 cannot be raised to a negative power");
      return NULL;
    }
    return fsV_float(pow((double)a, (double)b));
  default: break;
  }
  fsV_seterr(op == FS_OP_DIV ? "division by zero"
             : op == FS_OP_MOD ? "integer modulo by zero"
                               : "integer division or modulo by zero");
  return NULL;
}

static fs_value *float_arith(fs_op op, double a, double b) {
  switch (op) {
  case FS_OP_ADD: return fsV_float(a + b);
  case FS_OP_SUB: return fsV_float(a - b);
  case FS_OP_MUL: return fsV_float(a * b);
  case FS_OP_DIV:
    if (b == 0.0) {
      fsV_seterr("float division by zero");
      return NULL;
    }
    return fsV_float(a / b);
  case FS_OP_FDIV:
  case FS_OP_MOD: {
    if (b == 0.0) {
      fsV_seterr(op == FS_OP_MOD ? "float modulo by zero" : "float floor division by zero");
      return NULL;
    }
    /* CPython's float_divmod */
    double m = fmod(a, b), d = (a - m) / b;
    if (m != 0.0) {
      if ((b < 0) != (m < 0)) {
        m += b;
        d -= 1.0;
      }
    } else {
      m = copysign(0.0, b);
    }
    double fd;
    if (d != 0.0) {
      fd = floor(d);
      if (d - fd > 0.5) fd += 1.0;
    } else {
      fd = copysign(0.0, a / b);
    }
    return fsV_float(op == FS_OP_MOD ? m : fd);
  }
  case FS_OP_POW: {
    if (a == 0.0 && b < 0) {
      fsV_seterr("0.0 cannot be raised to a negative power");
      return NULL;
    }
    if (a < 0 && b != floor(b) && isfinite(b)) {
      fsV_seterr("negative number cannot be raised to a fractional power");
      return NULL;
    }
    double r = pow(a, b);
    if (isinf(r) && isfinite(a) && isfinite(b)) {
      fsV_seterr("float overflow: the result of ** is out of range");
      return NULL;
    }
    return fsV_float(r);
  }
  default: return NULL;
  }
}

size_t fsV_utf8_count(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
  return c;
}

size_t fsV_utf8_offset(const char *s, size_t n, size_t k) {
  size_t i = 0;
  for (; i < n; i++)
    if (((unsigned char)s[i] & 0xc0) != 0x80 && k-- == 0) break;
  return i;
}

static fs_value *repeat_seq(const fs_value *s, int64_t times) {
  if (times < 0) times = 0;
  if (s->type == FSV_STR) {
    size_t total;
    if (__builtin_mul_overflow(s->u.str.len, (size_t)times, &total)) return overflow();
    char *out = malloc(total + 1);
    if (!out) {
      fsV_seterr("out of memory");
      return NULL;
    }
    for (int64_t i = 0; i < times; i++) memcpy(out + (size_t)i * s->u.str.len, s->u.str.s, s->u.str.len);
    out[total] = '\0';
    return fsV_str_own(out, total);
  }
  size_t n;
  if (__builtin_mul_overflow(s->u.seq.n, (size_t)times, &n)) return overflow();
  fs_value *r = s->type == FSV_LIST ? fsV_list(n) : fsV_tuple(n);
  if (!r) return NULL;
  for (size_t i = 0; i < n; i++) {
    fs_value *it = fsV_retain(s->u.seq.items[i % s->u.seq.n]);
    if (s->type == FSV_LIST) fsV_list_append(r, it); /* capacity reserved: cannot fail */
    else fsV_seq_set(r, i, it);
  }
  return r;
}

static fs_value *concat(const fs_value *a, const fs_value *b) {
  if (a->type == FSV_STR) {
    size_t n = a->u.str.len + b->u.str.len;
    char *out = malloc(n + 1);
    if (!out) {
      fsV_seterr("out of memory");
      return NULL;
    }
    memcpy(out, a->u.str.s, a->u.str.len);
    memcpy(out + a->u.str.len, b->u.str.s, b->u.str.len + 1);
    return fsV_str_own(out, n);
  }
  size_t n = a->u.seq.n + b->u.seq.n;
  fs_value *r = a->type == FSV_LIST ? fsV_list(n) : fsV_tuple(n);
  if (!r) return NULL;
  for (size_t i = 0; i < n; i++) {
    fs_value *it = fsV_retain(i < a->u.seq.n ? a->u.seq.items[i] : b->u.seq.items[i - a->u.seq.n]);
    if (a->type == FSV_LIST) fsV_list_append(r, it);
    else fsV_seq_set(r, i, it);
  }
  return r;
}

/* Exact comparison of an int with a double (no rounding of large ints). */
static int cmp_int_double(int64_t i, double d) {
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  double t = trunc(d);
  int64_t di = (int64_t)t;
  if (i != di) return i < di ? -1 : 1;
  return t == d ? 0 : (d > t ? -1 : 1);
}

static int equal_at(const fs_value *a, const fs_value *b, int depth);

static void too_deep(void) {
  fsV_seterr("RecursionError: maximum recursion depth exceeded in comparison");
}

/* Ordering of two values: 0 and *c in {-1, 0, 1}; 1 when unordered (NaN);
 * -1 when the types cannot be ordered; -2 (error set) past FSV_MAX_DEPTH. */
static int order(const fs_value *a, const fs_value *b, int *c, int depth) {
  if (fsV_is_number(a) && fsV_is_number(b)) {
    if (intlike(a) && intlike(b)) {
      *c = (ival(a) > ival(b)) - (ival(a) < ival(b));
      return 0;
    }
    if (isnan(fsV_to_double(a)) || isnan(fsV_to_double(b))) return 1;
    if (intlike(a)) *c = cmp_int_double(ival(a), b->u.f);
    else if (intlike(b)) *c = -cmp_int_double(ival(b), a->u.f);
    else *c = (a->u.f > b->u.f) - (a->u.f < b->u.f);
    return 0;
  }
  if (a->type == FSV_STR && b->type == FSV_STR) {
    size_t n = a->u.str.len < b->u.str.len ? a->u.str.len : b->u.str.len;
    int m = memcmp(a->u.str.s, b->u.str.s, n);
    *c = m ? (m > 0) - (m < 0) : (a->u.str.len > b->u.str.len) - (a->u.str.len < b->u.str.len);
    return 0;
  }
  if (a->type == b->type && (a->type == FSV_LIST || a->type == FSV_TUPLE)) {
    if (depth >= FSV_MAX_DEPTH) {
      too_deep();
      return -2;
    }
    size_t n = a->u.seq.n < b->u.seq.n ? a->u.seq.n : b->u.seq.n;
    for (size_t i = 0; i < n; i++) {
      int eq = equal_at(a->u.seq.items[i], b->u.seq.items[i], depth + 1);
      if (eq < 0) return -2;
      if (!eq) return order(a->u.seq.items[i], b->u.seq.items[i], c, depth + 1);
    }
    *c = (a->u.seq.n > b->u.seq.n) - (a->u.seq.n < b->u.seq.n);
    return 0;
  }
  return -1;
}

/* 1 equal, 0 not, -1 (error set) past FSV_MAX_DEPTH */
static int equal_at(const fs_value *a, const fs_value *b, int depth) {
  if (a == b) return !(a->type == FSV_FLOAT && isnan(a->u.f));
  if (fsV_is_number(a) && fsV_is_number(b)) {
    int c;
    return order(a, b, &c, depth) == 0 && c == 0;
  }
  if (a->type != b->type) return 0;
  switch (a->type) {
  case FSV_NONE: return 1;
  case FSV_STR: return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
  case FSV_LIST:
  case FSV_TUPLE:
    if (a->u.seq.n != b->u.seq.n) return 0;
    if (depth >= FSV_MAX_DEPTH && a->u.seq.n) {
      too_deep();
      return -1;
    }
    for (size_t i = 0; i < a->u.seq.n; i++) {
      int eq = equal_at(a->u.seq.items[i], b->u.seq.items[i], depth + 1);
      if (eq <= 0) return eq;
    }
    return 1;
  case FSV_DICT:
    if (a->u.dict.n != b->u.dict.n) return 0;
    if (depth >= FSV_MAX_DEPTH && a->u.dict.n) {
      too_deep();
      return -1;
    }
    for (size_t i = 0; i < a->u.dict.n; i++) {
      fsV_clearerr();
      const fs_value *o = fsV_dict_get(b, a->u.dict.keys[i]);
      if (!o) return fsV_error()[0] ? -1 : 0;
      int eq = equal_at(a->u.dict.vals[i], o, depth + 1);
      if (eq <= 0) return eq;
    }
    return 1;
  case FSV_RANGE: {
    uint64_t n = fsV_range_count(a);
    if (n != fsV_range_count(b)) return 0;
    return n == 0 || (a->u.range.start == b->u.range.start &&
                      (n == 1 || a->u.range.step == b->u.range.step));
  }
  default: return 0; /* objects: identity, handled above */
  }
}

int fsV_equal_checked(const fs_value *a, const fs_value *b) { return equal_at(a, b, 0); }

bool fsV_equal(const fs_value *a, const fs_value *b) { return equal_at(a, b, 0) > 0; }

static fs_value *contains(fs_value *item, fs_value *c) {
  switch (c->type) {
  case FSV_STR:
    if (item->type != FSV_STR) {
      fsV_seterr("'in <string>' requires string as left operand, not %s", fsV_type_name(item));
      return NULL;
    }
    if (item->u.str.len == 0) return fsV_bool(true);
    for (size_t i = 0; i + item->u.str.len <= c->u.str.len; i++)
      if (memcmp(c->u.str.s + i, item->u.str.s, item->u.str.len) == 0) return fsV_bool(true);
    return fsV_bool(false);
  case FSV_LIST:
  case FSV_TUPLE:
    for (size_t i = 0; i < c->u.seq.n; i++) {
      int eq = fsV_equal_checked(item, c->u.seq.items[i]);
      if (eq) return eq > 0 ? fsV_bool(true) : NULL;
    }
    return fsV_bool(false);
  case FSV_DICT: {
    fsV_clearerr();
    fs_value *v = fsV_dict_get(c, item);
    return v || !fsV_error()[0] ? fsV_bool(v != NULL) : NULL;
  }
  case FSV_RANGE: {
    if (!fsV_is_number(item)) return fsV_bool(false);
    uint64_t n = fsV_range_count(c);
    double x = fsV_to_double(item);
    if (item->type == FSV_FLOAT && (x != floor(x) || fabs(x) > 9.2e18)) return fsV_bool(false);
    /* 128 bits: item - start spans up to 2**64 */
    __int128 v = item->type == FSV_FLOAT ? (__int128)(int64_t)x : (__int128)ival(item);
    __int128 st = c->u.range.step, off = v - c->u.range.start;
    if (n == 0 || (st > 0 ? off < 0 : off > 0) || off % st != 0) return fsV_bool(false);
    return fsV_bool((unsigned __int128)(off / st) < n);
  }
  default:
    fsV_seterr("argument of type '%s' is not iterable", fsV_type_name(c));
    return NULL;
  }
}

static fs_value *type_error(fs_op op, const fs_value *a, const fs_value *b) {
  if (op >= FS_OP_LT && op <= FS_OP_GE)
    fsV_seterr("'%s' not supported between instances of '%s' and '%s'", fsA_op_text(op),
               fsV_type_name(a), fsV_type_name(b));
  else
    fsV_seterr("unsupported operand type(s) for %s: '%s' and '%s'", fsA_op_text(op),
               fsV_type_name(a), fsV_type_name(b));
  return NULL;
}

fs_value *fsV_binop(fsE_ctx *E, fs_op op, fs_value *a, fs_value *b) {
  const fs_value *o = a->type == FSV_OBJ ? a : b->type == FSV_OBJ ? b : NULL;
  if (o && o->u.obj.cls->binop) {
    fsV_clearerr();
    fs_value *r = o->u.obj.cls->binop(E, op, a, b);
    if (r || fsV_error()[0]) return r;
  }
  if (op == FS_OP_IN || op == FS_OP_NOT_IN) {
    fs_value *r = contains(a, b);
    return r && op == FS_OP_NOT_IN ? fsV_bool(!r->u.b) : r;
  }
  if (op == FS_OP_EQ || op == FS_OP_NE) {
    int eq = fsV_equal_checked(a, b);
    return eq < 0 ? NULL : fsV_bool((eq > 0) == (op == FS_OP_EQ));
  }
  if (op >= FS_OP_LT && op <= FS_OP_GE) {
    int c = 0, rc = order(a, b, &c, 0);
    if (rc == -2) return NULL;
    if (rc < 0) return type_error(op, a, b);
    if (rc > 0) return fsV_bool(false);
    return fsV_bool(op == FS_OP_LT ? c < 0 : op == FS_OP_LE ? c <= 0 : op == FS_OP_GT ? c > 0 : c >= 0);
  }
  if (fsV_is_number(a) && fsV_is_number(b)) {
    if (intlike(a) && intlike(b)) return int_arith(op, ival(a), ival(b));
    return float_arith(op, fsV_to_double(a), fsV_to_double(b));
  }
  bool seq_a = a->type == FSV_STR || a->type == FSV_LIST || a->type == FSV_TUPLE;
  if (op == FS_OP_ADD && seq_a && a->type == b->type) return concat(a, b);
  if (op == FS_OP_MUL && seq_a && intlike(b)) return repeat_seq(a, ival(b));
  bool seq_b = b->type == FSV_STR || b->type == FSV_LIST || b->type == FSV_TUPLE;
  if (op == FS_OP_MUL && seq_b && intlike(a)) return repeat_seq(b, ival(a));
  return type_error(op, a, b);
}

fs_value *fsV_unop(fsE_ctx *E, fs_op op, fs_value *v) {
  if (op == FS_OP_NOT) return fsV_bool(!fsV_truthy(v));
  if (v->type == FSV_OBJ && v->u.obj.cls->unop) return v->u.obj.cls->unop(E, op, v);
  if (intlike(v)) {
    if (op == FS_OP_POS) return fsV_int(ival(v));
    if (ival(v) == INT64_MIN) return overflow();
    return fsV_int(-ival(v));
  }
  if (v->type == FSV_FLOAT) return fsV_float(op == FS_OP_NEG ? -v->u.f : v->u.f);
  fsV_seterr("bad operand type for unary %s: '%s'", fsA_op_text(op), fsV_type_name(v));
  return NULL;
}

int64_t fsV_len(fsE_ctx *E, fs_value *v) {
  switch (v->type) {
  case FSV_STR: return (int64_t)fsV_utf8_count(v->u.str.s, v->u.str.len);
  case FSV_LIST: case FSV_TUPLE: return (int64_t)v->u.seq.n;
  case FSV_DICT: return (int64_t)v->u.dict.n;
  case FSV_RANGE: return fsV_range_len(v);
  case FSV_OBJ:
    if (v->u.obj.cls->len) return v->u.obj.cls->len(E, v);
    /* fall through */
  default:
    fsV_seterr("object of type '%s' has no len()", fsV_type_name(v));
    return -1;
  }
}

fs_value *fsV_index(fsE_ctx *E, fs_value *obj, fs_value *key) {
  if (obj->type == FSV_DICT) {
    fsV_clearerr();
    fs_value *v = fsV_dict_get(obj, key);
    if (v) return fsV_retain(v);
    if (fsV_error()[0]) return NULL;
    char *r = fsV_repr(key);
    fsV_seterr("KeyError: %s", r ? r : "?");
    free(r);
    return NULL;
  }
  if (obj->type == FSV_OBJ) {
    if (obj->u.obj.cls->index) return obj->u.obj.cls->index(E, obj, key);
    fsV_seterr("'%s' object is not subscriptable", fsV_type_name(obj));
    return NULL;
  }
  if (obj->type != FSV_STR && obj->type != FSV_LIST && obj->type != FSV_TUPLE && obj->type != FSV_RANGE) {
    fsV_seterr("'%s' object is not subscriptable", fsV_type_name(obj));
    return NULL;
  }
  if (!intlike(key)) {
    fsV_seterr("%s indices must be integers or slices, not %s", fsV_type_name(obj), fsV_type_name(key));
    return NULL;
  }
  if (obj->type == FSV_RANGE) { /* its length may pass INT64_MAX: Python indexes it all the same */
    uint64_t n = fsV_range_count(obj);
    int64_t i = ival(key);
    uint64_t at = i < 0 ? n - (0 - (uint64_t)i) : (uint64_t)i;
    if (i < 0 ? (0 - (uint64_t)i) > n : at >= n) {
      fsV_seterr("range object index out of range");
      return NULL;
    }
    return fsV_int((int64_t)((uint64_t)obj->u.range.start + at * (uint64_t)obj->u.range.step));
  }
  int64_t n = fsV_len(E, obj), i = ival(key);
  if (i < 0) i += n;
  if (i < 0 || i >= n) {
    fsV_seterr("%s index out of range", obj->type == FSV_STR ? "string" : fsV_type_name(obj));
    return NULL;
  }
  switch (obj->type) {
  case FSV_STR: {
    size_t at = fsV_utf8_offset(obj->u.str.s, obj->u.str.len, (size_t)i);
    size_t end = fsV_utf8_offset(obj->u.str.s, obj->u.str.len, (size_t)i + 1);
    return fsV_str(obj->u.str.s + at, end - at);
  }
  case FSV_RANGE: return fsV_int(fsV_range_at(obj, i));
  default: return fsV_retain(obj->u.seq.items[i]);
  }
}

/* Python's PySlice_AdjustIndices: clamps bounds and returns the length. */
static int64_t slice_bounds(int64_t n, const fs_value *lo, const fs_value *hi, int64_t step,
                            int64_t *start, int64_t *stop) {
  int64_t s, e;
  bool has_lo = lo && lo->type != FSV_NONE, has_hi = hi && hi->type != FSV_NONE;
  if (step > 0) {
    s = has_lo ? ival(lo) : 0;
    e = has_hi ? ival(hi) : n;
  } else {
    s = has_lo ? ival(lo) : n - 1;
    e = has_hi ? ival(hi) : -1 - n;
  }
  if (s < 0) s = s + n < 0 ? (step < 0 ? -1 : 0) : s + n;
  else if (s >= n) s = step < 0 ? n - 1 : n;
  if (e < 0) e = e + n < 0 ? (step < 0 ? -1 : 0) : e + n;
  else if (e >= n) e = step < 0 ? n - 1 : n;
  *start = s;
  *stop = e;
  if (step < 0) return e < s ? (s - e - 1) / (-step) + 1 : 0;
  return s < e ? (e - s - 1) / step + 1 : 0;
}

fs_value *fsV_slice(const fs_value *obj, const fs_value *lo, const fs_value *hi,
                    const fs_value *stepv) {
  const fs_value *bounds[3] = {lo, hi, stepv};
  for (int k = 0; k < 3; k++)
    if (bounds[k] && bounds[k]->type != FSV_NONE && !intlike(bounds[k])) {
      fsV_seterr("slice indices must be integers or None");
      return NULL;
    }
  int64_t step = stepv && stepv->type != FSV_NONE ? ival(stepv) : 1;
  if (step == 0) {
    fsV_seterr("slice step cannot be zero");
    return NULL;
  }
  if (step == INT64_MIN) step = -INT64_MAX;
  int64_t start, stop, n;
  switch (obj->type) {
  case FSV_STR: {
    const char *s = obj->u.str.s;
    size_t bytes = obj->u.str.len, cps = fsV_utf8_count(s, bytes);
    n = slice_bounds((int64_t)cps, lo, hi, step, &start, &stop);
    fsV_buf b = {0};
    fsV_buf_put(&b, "", 0);
    for (int64_t k = 0; k < n; k++) {
      size_t at = fsV_utf8_offset(s, bytes, (size_t)(start + k * step));
      size_t end = fsV_utf8_offset(s, bytes, (size_t)(start + k * step) + 1);
      fsV_buf_put(&b, s + at, end - at);
    }
    size_t len = b.n;
    char *t = fsV_buf_take(&b);
    return t ? fsV_str_own(t, len) : NULL;
  }
  case FSV_RANGE: {
    /* as CPython: the slice's adjusted bounds mapped through the range */
    slice_bounds(fsV_range_len(obj), lo, hi, step, &start, &stop);
    int64_t st;
    if (__builtin_mul_overflow(obj->u.range.step, step, &st)) return overflow();
    return fsV_range(fsV_range_at(obj, start), fsV_range_at(obj, stop), st);
  }
  case FSV_LIST:
  case FSV_TUPLE: {
    n = slice_bounds((int64_t)obj->u.seq.n, lo, hi, step, &start, &stop);
    fs_value *r = obj->type == FSV_LIST ? fsV_list((size_t)n) : fsV_tuple((size_t)n);
    if (!r) return NULL;
    for (int64_t k = 0; k < n; k++) {
      fs_value *it = fsV_retain(obj->u.seq.items[start + k * step]);
      if (obj->type == FSV_LIST) fsV_list_append(r, it);
      else fsV_seq_set(r, (size_t)k, it);
    }
    return r;
  }
  default:
    fsV_seterr("'%s' object is not subscriptable", fsV_type_name(obj));
    return NULL;
  }
}
