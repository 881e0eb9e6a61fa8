/* format.c -- format(value, spec) for f-string fields, as Python's
 * format-spec mini-language (the subset documented in format.h). */
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct spec {
  char fill[5];  /* one UTF-8 character */
  char align;    /* < > ^ = or 0 (type's default) */
  char sign;     /* + - space, 0 */
  char group;    /* , _ or 0 */
  long width, prec; /* -1 when absent */
  char type;     /* d f F e E g G % s or 0 */
} spec;

static int parse_spec(const char *s, spec *sp, const fs_value *v) {
  memset(sp, 0, sizeof *sp);
  strcpy(sp->fill, " ");
  sp->width = sp->prec = -1;
  const char *start = s;
  size_t clen = 1;
  while (s[0] && ((unsigned char)s[clen] & 0xc0) == 0x80) clen++;
  if (s[0] && s[clen] && strchr("<>^=", s[clen])) {
    memcpy(sp->fill, s, clen);
    sp->fill[clen] = '\0';
    sp->align = s[clen];
    s += clen + 1;
  } else if (*s && strchr("<>^=", *s)) {
    sp->align = *s++;
  }
  if (*s && strchr("+- ", *s)) sp->sign = *s++;
  if (*s == '0') {
    if (!sp->align) {
      strcpy(sp->fill, "0");
      sp->align = '=';
    }
    s++;
  }
  if (*s >= '0' && *s <= '9') sp->width = strtol(s, (char **)&s, 10);
  if (*s == ',' || *s == '_') sp->group = *s++;
  if (*s == '.') {
    s++;
    if (!(*s >= '0' && *s <= '9')) goto invalid;
    sp->prec = strtol(s, (char **)&s, 10);
  }
  if (*s && strchr("dfFeEgG%s", *s)) sp->type = *s++;
  if (*s || sp->width > 10000 || sp->prec > 1000) goto invalid;
  return 0;
invalid:
  fsV_seterr("Invalid format specifier '%s' for object of type '%s'", start, fsV_type_name(v));
  return -1;
}

static size_t cps(const char *s) { return fsV_utf8_count(s, strlen(s)); }

/* Pads body (sign already split off into `sign`) to the spec's width. */
static char *pad(const spec *sp, const char *sign, const char *body, char defalign) {
  size_t len = cps(sign) + cps(body);
  size_t w = sp->width > 0 && (size_t)sp->width > len ? (size_t)sp->width - len : 0;
  char align = sp->align ? sp->align : defalign;
  size_t left = align == '>' ? w : align == '^' ? w / 2 : 0, right = align == '=' ? 0 : w - left;
  if (align == '=') left = 0;
  fsV_buf b = {0};
  for (size_t i = 0; i < left; i++) fsV_buf_puts(&b, sp->fill);
  fsV_buf_puts(&b, sign);
  if (align == '=')
    for (size_t i = 0; i < w; i++) fsV_buf_puts(&b, sp->fill);
  fsV_buf_puts(&b, body);
  if (align != '=')
    for (size_t i = 0; i < right; i++) fsV_buf_puts(&b, sp->fill);
  return fsV_buf_take(&b);
}

/* Inserts the grouping character into the leading run of digits. */
static void group_digits(char *out, size_t outlen, const char *digits, char sep) {
  size_t run = strspn(digits, "0123456789"), o = 0;
  for (size_t i = 0; i < run && o + 2 < outlen; i++) {
    if (i && (run - i) % 3 == 0) out[o++] = sep;
    out[o++] = digits[i];
  }
  snprintf(out + o, outlen - o, "%s", digits + run);
}

static char *format_number(const spec *sp, const fs_value *v) {
  char body[1200], grouped[1600];
  bool neg;
  if (v->type != FSV_FLOAT && (sp->type == 0 || sp->type == 'd')) {
    int64_t i = v->type == FSV_INT ? v->u.i : v->u.b;
    if (sp->prec >= 0) {
      fsV_seterr("Precision not allowed in integer format specifier");
      return NULL;
    }
    neg = i < 0;
    snprintf(body, sizeof body, "%llu", neg ? 0ull - (unsigned long long)i : (unsigned long long)i);
  } else {
    double f = fsV_to_double(v);
    char type = sp->type;
    if (type == 'd') {
      fsV_seterr("Unknown format code 'd' for object of type 'float'");
      return NULL;
    }
    neg = signbit(f) && !isnan(f);
    double a = fabs(f);
    int prec = sp->prec >= 0 ? (int)sp->prec : 6;
    if (type == 0 && sp->prec < 0) {
      fsV_float_repr(a, body, sizeof body);
    } else if (!isfinite(a)) {
      snprintf(body, sizeof body, "%s%s", isnan(a) ? "nan" : "inf", type == '%' ? "%" : "");
      if (type == 'F' || type == 'E' || type == 'G')
        for (char *c = body; *c; c++) *c = (char)(*c - 32 * (*c >= 'a' && *c <= 'z'));
    } else if (type == '%') {
      snprintf(body, sizeof body, "%.*f%%", prec, a * 100.0);
    } else if (type == 0) { /* like g, but a fixed result keeps a digit after the point */
      snprintf(body, sizeof body, "%.*g", prec ? prec : 1, a);
      if (!strpbrk(body, ".e")) strcat(body, ".0");
    } else {
      char fmt[8] = {'%', '.', '*', type == 'F' ? 'f' : type, '\0'};
      snprintf(body, sizeof body, fmt, (type == 'g' || type == 'G') && prec == 0 ? 1 : prec, a);
    }
  }
  if (sp->group) group_digits(grouped, sizeof grouped, body, sp->group);
  else snprintf(grouped, sizeof grouped, "%s", body);
  const char *sign = neg ? "-" : sp->sign == '+' ? "+" : sp->sign == ' ' ? " " : "";
  return pad(sp, sign, grouped, '>');
}

char *fsV_format(const fs_value *v, const char *text) {
  if (!text || !*text) return fsV_tostr(v);
  spec sp;
  if (parse_spec(text, &sp, v) < 0) return NULL;
  switch (v->type) {
  case FSV_BOOL:
  case FSV_INT:
  case FSV_FLOAT:
    if (sp.type == 's') break;
    return format_number(&sp, v);
  case FSV_STR: {
    if (sp.type && sp.type != 's') break;
    if (sp.sign || sp.group) {
      fsV_seterr(sp.sign ? "Sign not allowed in string format specifier"
                         : "Cannot specify ',' with 's'.");
      return NULL;
    }
    if (sp.align == '=') {
      fsV_seterr("'=' alignment not allowed in string format specifier");
      return NULL;
    }
    char *s = fsV_tostr(v);
    if (s && sp.prec >= 0) s[fsV_utf8_offset(s, strlen(s), (size_t)sp.prec)] = '\0'; /* prec code points */
    char *r = s ? pad(&sp, "", s, '<') : NULL;
    free(s);
    return r;
  }
  default:
    fsV_seterr("unsupported format string passed to %s.__format__", fsV_type_name(v));
    return NULL;
  }
  fsV_seterr("Unknown format code '%c' for object of type '%s'", sp.type, fsV_type_name(v));
  return NULL;
}
