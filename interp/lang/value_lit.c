/* value_lit.c -- Python literals from text: signature defaults, -D values and
 * checkpoint metadata (which value.c's repr wrote). Nesting is bounded by
 * FSV_MAX_DEPTH, so hostile text cannot exhaust the stack and all repr writes
 * reads back. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "value.h"

static void skip_ws(const char **p) {
  while (**p == ' ' || **p == '\t') (*p)++;
}

static fs_value *parse(const char **p, int depth);

static const char too_deep[] = "too many nested parentheses"; /* Python's tokenizer's words */

/* A number: [sign] digits with '_' between them, optional fraction/exponent. */
static fs_value *parse_number(const char **p) {
  const char *s = *p;
  char buf[128];
  size_t n = 0;
  bool isfloat = false, digit = false;
  if (*s == '+' || *s == '-') buf[n++] = *s++;
  for (; n < sizeof buf - 1; s++) {
    if (*s >= '0' && *s <= '9') digit = true;
    else if (*s == '_' && digit && s[1] >= '0' && s[1] <= '9') continue;
    else if (*s == '.' || *s == 'e' || *s == 'E') isfloat = true;
    else if ((*s == '+' || *s == '-') && (s[-1] == 'e' || s[-1] == 'E')) {}
    else break;
    buf[n++] = *s;
  }
  buf[n] = '\0';
  char *end;
  errno = 0;
  if (!isfloat) {
    long long v = strtoll(buf, &end, 10);
    if (*end || end == buf) return NULL;
    /* a leading zero is not a Python int literal ("007"), except 0 itself */
    const char *d = buf + (buf[0] == '+' || buf[0] == '-');
    if (d[0] == '0' && strspn(d, "0") != strlen(d)) return NULL;
    if (errno == ERANGE) {
      fsV_seterr("integer literal too large for 64 bits: %s", buf);
      return NULL;
    }
    *p = s;
    return fsV_int(v);
  }
  double f = strtod(buf, &end);
  if (*end || end == buf || !digit) return NULL;
  *p = s;
  return fsV_float(f);
}

static fs_value *parse_string(const char **p) {
  char q = **p;
  const char *s = *p + 1;
  fsV_buf b = {0};
  fsV_buf_put(&b, "", 0);
  for (; *s && *s != q; s++) {
    char c = *s;
    if (c == '\\') {
      s++;
      switch (*s) {
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'r': c = '\r'; break;
      case '0': c = '\0'; break;
      case '\\': case '\'': case '"': c = *s; break;
      default: free(b.s); return NULL;
      }
    }
    fsV_buf_put(&b, &c, 1);
  }
  if (*s != q) {
    free(b.s);
    return NULL;
  }
  *p = s + 1;
  size_t n = b.n;
  char *t = fsV_buf_take(&b);
  return t ? fsV_str_own(t, n) : NULL;
}

static fs_value *parse_seq(const char **p, int depth) {
  if (depth >= FSV_MAX_DEPTH) {
    fsV_seterr("%s", too_deep);
    return NULL;
  }
  char close = **p == '(' ? ')' : ']';
  bool tuple = close == ')', comma = false;
  (*p)++;
  fs_value *list = fsV_list(0);
  if (!list) return NULL;
  for (;;) {
    skip_ws(p);
    if (**p == close) break;
    fs_value *v = parse(p, depth + 1);
    if (!v || fsV_list_append(list, v) < 0) goto fail;
    skip_ws(p);
    if (**p == ',') {
      comma = true;
      (*p)++;
    } else if (**p != close) {
      goto fail;
    }
  }
  (*p)++;
  if (!tuple) return list;
  if (list->u.seq.n == 1 && !comma) { /* (x) is x */
    fs_value *v = fsV_retain(list->u.seq.items[0]);
    fsV_release(list);
    return v;
  }
  list->type = FSV_TUPLE; /* same layout: a list becomes a tuple in place */
  return list;
fail:
  fsV_release(list);
  return NULL;
}

static fs_value *parse(const char **p, int depth) {
  skip_ws(p);
  static const struct { const char *word; int v; } words[] = {{"None", -1}, {"True", 1}, {"False", 0}};
  for (size_t i = 0; i < 3; i++) {
    size_t n = strlen(words[i].word);
    if (strncmp(*p, words[i].word, n) == 0) {
      char c = (*p)[n];
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
        return NULL;
      *p += n;
      return words[i].v < 0 ? fsV_none() : fsV_bool(words[i].v);
    }
  }
  if (**p == '\'' || **p == '"') return parse_string(p);
  if (**p == '(' || **p == '[') return parse_seq(p, depth);
  return parse_number(p);
}

fs_value *fsV_literal(const char *text) {
  const char *p = text;
  fsV_clearerr();
  fs_value *v = parse(&p, 0);
  skip_ws(&p);
  if (v && *p) {
    fsV_release(v);
    v = NULL;
  }
  if (!v && !fsV_error()[0]) fsV_seterr("not a Python literal: %s", text);
  return v;
}

static int bad(char **err, const char *what, const char *text) {
  size_t n = strlen(what) + strlen(text) + 32;
  *err = malloc(n);
  if (*err) snprintf(*err, n, "expected %s, got '%s'", what, text);
  return -1;
}

int fsV_parse_param(const char *text, const fs_value *def, fs_value **out, char **err) {
  *out = NULL;
  *err = NULL;
  switch (def->type) {
  case FSV_STR:
    *out = fsV_cstr(text);
    return *out ? 0 : bad(err, "a string (out of memory)", text);
  case FSV_BOOL: {
    static const char *yes[] = {"True", "true", "1"}, *no[] = {"False", "false", "0"};
    for (int i = 0; i < 3; i++)
      if (strcmp(text, yes[i]) == 0 || strcmp(text, no[i]) == 0) {
        *out = fsV_bool(strcmp(text, yes[i]) == 0);
        return 0;
      }
    return bad(err, "a bool (True, False, true, false, 1 or 0)", text);
  }
  default: break;
  }
  fs_value *v = fsV_literal(text);
  if (!v && strcmp(fsV_error(), too_deep) == 0) { /* a literal, but one too deep: not text */
    *err = malloc(sizeof too_deep + 32);
    if (*err) snprintf(*err, sizeof too_deep + 32, "%s (more than %d levels)", too_deep, FSV_MAX_DEPTH);
    return -1;
  }
  if (def->type == FSV_NONE) { /* no type to go by: a literal, else the text */
    *out = v ? v : fsV_cstr(text);
    return *out ? 0 : bad(err, "a value (out of memory)", text);
  }
  if (v && def->type == FSV_FLOAT && v->type == FSV_INT) {
    fs_value *f = fsV_float((double)v->u.i);
    fsV_release(v);
    v = f;
  }
  if (!v || v->type != def->type) {
    fsV_release(v);
    const char *what = def->type == FSV_INT ? "an int" : def->type == FSV_FLOAT ? "a float"
                       : def->type == FSV_TUPLE ? "a tuple literal"
                       : def->type == FSV_LIST ? "a list literal" : "a literal";
    return bad(err, what, text);
  }
  *out = v;
  return 0;
}
