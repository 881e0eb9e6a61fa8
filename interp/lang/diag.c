/* diag.c -- collects diagnostics and renders them as GCC-shaped text or as
 * JSON lines. Source text is untrusted: whatever bytes a script holds are
 * shown as printable UTF-8 (U+FFFD for invalid bytes and control
 * characters), so a diagnostic can never drive the terminal. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "diag.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(fsA_xrealloc(NULL, n), s, n);
}

static char *vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return xstrdup(""); /* only on a bad conversion in fmt */
  char *s = fsA_xrealloc(NULL, (size_t)n + 1);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

/* ---- collection --------------------------------------------------------- */

void fsD_init(fs_diags *d) { memset(d, 0, sizeof *d); }

void fsD_free(fs_diags *d) {
  for (size_t i = 0; i < d->n; i++) {
    fs_diag *g = &d->items[i];
    free(g->rule);
    free(g->message);
    for (size_t j = 0; j < g->nnotes; j++) free(g->notes[j].message);
    free(g->notes);
    free(g->help);
    for (size_t j = 0; j < g->nedits; j++) free(g->edits[j].text);
    free(g->edits);
  }
  free(d->items);
  fsD_init(d);
}

fs_diag *fsD_add(fs_diags *d, fs_severity sev, const char *rule,
                 const fs_source *src, fs_loc loc, const char *fmt, ...) {
  if (d->n == d->cap) {
    d->cap = d->cap ? 2 * d->cap : 8;
    d->items = fsA_xrealloc(d->items, d->cap * sizeof *d->items);
  }
  fs_diag *g = &d->items[d->n++];
  memset(g, 0, sizeof *g);
  g->severity = sev;
  g->rule = xstrdup(rule ? rule : "");
  g->src = src;
  g->loc = loc;
  va_list ap;
  va_start(ap, fmt);
  g->message = vformat(fmt, ap);
  va_end(ap);
  if (sev == FS_SEV_ERROR) d->nerrors++;
  else if (sev == FS_SEV_WARNING) d->nwarnings++;
  return g;
}

/* A note the diagnostic already has (same place, same words) is not added
 * again: several facts can lead the checker to the same one. */
void fsD_note(fs_diag *g, const fs_source *src, fs_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(fmt, ap);
  va_end(ap);
  for (size_t i = 0; i < g->nnotes; i++)
    if (g->notes[i].src == src && g->notes[i].loc.start == loc.start && g->notes[i].loc.end == loc.end &&
        strcmp(g->notes[i].message, msg) == 0) {
      free(msg);
      return;
    }
  g->notes = fsA_xrealloc(g->notes, (g->nnotes + 1) * sizeof *g->notes);
  g->notes[g->nnotes++] = (fs_note){.src = src, .loc = loc, .message = msg};
}

void fsD_help(fs_diag *g, const char *fmt, ...) {
  free(g->help);
  va_list ap;
  va_start(ap, fmt);
  g->help = vformat(fmt, ap);
  va_end(ap);
}

void fsD_edit(fs_diag *g, fs_loc loc, const char *text) {
  g->edits = fsA_xrealloc(g->edits, (g->nedits + 1) * sizeof *g->edits);
  g->edits[g->nedits].loc = loc;
  g->edits[g->nedits].text = xstrdup(text);
  g->nedits++;
}

int fsD_has_errors(const fs_diags *d) { return d->nerrors > 0; }

/* Sort key: sources in order of first appearance, then offset; the index
 * breaks ties so that qsort is stable. */
typedef struct sort_key { size_t group, idx; uint32_t start; } sort_key;

static int cmp_key(const void *pa, const void *pb) {
  const sort_key *a = pa, *b = pb;
  if (a->group != b->group) return a->group < b->group ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

void fsD_sort(fs_diags *d) {
  if (d->n < 2) return;
  sort_key *k = fsA_xrealloc(NULL, d->n * sizeof *k);
  for (size_t i = 0; i < d->n; i++) {
    size_t g = 0;
    while (d->items[g].src != d->items[i].src) g++;
    k[i] = (sort_key){ g, i, d->items[i].loc.start };
  }
  qsort(k, d->n, sizeof *k, cmp_key);
  fs_diag *sorted = fsA_xrealloc(NULL, d->cap * sizeof *sorted);
  for (size_t i = 0; i < d->n; i++) sorted[i] = d->items[k[i].idx];
  free(d->items);
  d->items = sorted;
  free(k);
}

/* ---- UTF-8 -------------------------------------------------------------- */

/* What a terminal may be shown for cp: controls (C0 but tab and newline,
 * DEL, C1) and bidirectional overrides (which reorder what the reader sees)
 * become U+FFFD. */
static uint32_t printable(uint32_t cp) {
  if ((cp < 0x20 && cp != '\t' && cp != '\n') || (cp >= 0x7F && cp < 0xA0)) return 0xFFFD;
  if ((cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069)) return 0xFFFD;
  return cp;
}

/* Terminal cells of a printable code point: combining marks and zero-width
 * characters take none, East Asian wide ones and emoji two. */
static unsigned cp_width(uint32_t cp) {
  if ((cp >= 0x0300 && cp <= 0x036F) || (cp >= 0x200B && cp <= 0x200F) ||
      (cp >= 0xFE00 && cp <= 0xFE0F))
    return 0;
  if ((cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0x303E) ||
      (cp >= 0x3041 && cp <= 0x33FF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
      (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xA000 && cp <= 0xA4CF) ||
      (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
      (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
      (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
      (cp >= 0x1F900 && cp <= 0x1F9FF) || (cp >= 0x20000 && cp <= 0x3FFFD))
    return 2;
  return 1;
}

/* A malloc'd printable copy of s[0, n) (also valid UTF-8, as jansson needs). */
static char *printable_copy(const char *s, size_t n) {
  char *out = fsA_xrealloc(NULL, 3 * n + 1), *o = out; /* a bad byte grows to 3 */
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    i += fsA_utf8_decode((const unsigned char *)s + i, n - i, &cp);
    o += fsA_utf8_encode(printable(cp), o);
  }
  *o = '\0';
  return out;
}

static void put_printable(FILE *out, const char *s, size_t n) {
  char *p = printable_copy(s, n);
  fputs(p, out);
  free(p);
}

/* One position function for every consumer: the line map's. */
void fsD_position(const fs_source *src, uint32_t offset, uint32_t *line, uint32_t *column) {
  fsA_source_position(src, offset, line, column);
}

/* ---- text ---------------------------------------------------------------- */

/* GCC's SGR sequences; the erase-to-end-of-line keeps colours from bleeding. */
#define SGR_BOLD "\33[01m\33[K"
#define SGR_RED "\33[01;31m\33[K"
#define SGR_MAGENTA "\33[01;35m\33[K"
#define SGR_CYAN "\33[01;36m\33[K"
#define SGR_GREEN "\33[01;32m\33[K"
#define SGR_RESET "\33[m\33[K"
#define TABSTOP 8

static void put_sgr(FILE *out, int color, const char *sgr, const char *text) {
  fprintf(out, "%s%s%s", color ? sgr : "", text, color ? SGR_RESET : "");
}

static void put_locus(FILE *out, int color, const fs_source *src, uint32_t offset) {
  uint32_t line, col;
  fsD_position(src, offset, &line, &col);
  char *path = printable_copy(src->path, strlen(src->path));
  char *locus = fsA_xrealloc(NULL, strlen(path) + 32);
  sprintf(locus, "%s:%u:%u:", path, line, col);
  put_sgr(out, color, SGR_BOLD, locus);
  free(locus);
  free(path);
  fputc(' ', out);
}

static void put_severity(FILE *out, int color, fs_severity sev) {
  static const char *const name[] = { "note: ", "warning: ", "error: " };
  static const char *const sgr[] = { SGR_CYAN, SGR_MAGENTA, SGR_RED };
  put_sgr(out, color, sgr[sev], name[sev]);
}

/* The primary line and a caret line under the span: `^` at its start, `~`
 * to its end or to the end of the line when it crosses lines. Tabs expand
 * to the same stops in both lines, wide characters take two cells. */
static void put_excerpt(FILE *out, int color, const fs_source *src, fs_loc loc) {
  size_t start = loc.start > src->len ? src->len : loc.start;
  size_t end = loc.end < start ? start : loc.end;
  uint32_t line, col;
  fsD_position(src, (uint32_t)start, &line, &col);
  size_t b = src->line_starts[line - 1], e = b;
  while (e < src->len && src->text[e] != '\n') e++;
  if (e > b && src->text[e - 1] == '\r') e--;
  int gutter = snprintf(NULL, 0, "%u", line);
  if (gutter < 5) gutter = 5;
  fprintf(out, "%*u | ", gutter, line);
  unsigned cells = 0, c0 = 0, c1 = 0;
  for (size_t i = b; i < e;) {
    uint32_t cp;
    size_t n = fsA_utf8_decode((const unsigned char *)src->text + i, e - i, &cp);
    unsigned w;
    cp = printable(cp);
    if (cp == '\t') {
      w = TABSTOP - cells % TABSTOP;
      fprintf(out, "%*s", (int)w, "");
    } else {
      char buf[4];
      w = cp_width(cp);
      fwrite(buf, 1, fsA_utf8_encode(cp, buf), out);
    }
    if (i < start) c0 = cells + w;
    if (i < end) c1 = cells + w;
    cells += w;
    i += n;
  }
  if (c1 < c0) c1 = c0;
  fprintf(out, "\n%*s | %*s", gutter, "", (int)c0, "");
  if (color) fputs(SGR_GREEN, out);
  fputc('^', out);
  for (unsigned i = c0 + 1; i < c1; i++) fputc('~', out);
  if (color) fputs(SGR_RESET, out);
  fputc('\n', out);
}

static void render_text(FILE *out, const fs_diag *g, int color) {
  if (g->src) put_locus(out, color, g->src, g->loc.start);
  else fputs("fabricscript: ", out);
  put_severity(out, color, g->severity);
  put_printable(out, g->message, strlen(g->message));
  fputc('\n', out);
  if (g->src) put_excerpt(out, color, g->src, g->loc);
  for (size_t i = 0; i < g->nnotes; i++) {
    put_locus(out, color, g->notes[i].src, g->notes[i].loc.start);
    put_severity(out, color, FS_SEV_NOTE);
    put_printable(out, g->notes[i].message, strlen(g->notes[i].message));
    fputc('\n', out);
  }
  if (g->help) {
    put_sgr(out, color, SGR_BOLD, "help:");
    fputc(' ', out);
    size_t n = strlen(g->help);
    put_printable(out, g->help, n);
    if (n == 0 || g->help[n - 1] != '\n') fputc('\n', out);
  }
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *jstring(const char *s) {
  char *p = printable_copy(s, strlen(s));
  json_t *j = json_string(p);
  free(p);
  return j;
}

static json_t *jposition(const fs_source *src, uint32_t offset) {
  uint32_t line, col;
  fsD_position(src, offset, &line, &col);
  return json_pack("{s:I,s:I}", "line", (json_int_t)line, "column", (json_int_t)col);
}

/* Sets line, column and end (exclusive) of loc in src on o. */
static void jlocate(json_t *o, const fs_source *src, fs_loc loc) {
  json_t *startp = jposition(src, loc.start);
  json_object_set(o, "line", json_object_get(startp, "line"));
  json_object_set(o, "column", json_object_get(startp, "column"));
  json_decref(startp);
  json_object_set_new(o, "end", jposition(src, loc.end < loc.start ? loc.start : loc.end));
}

static void render_json(FILE *out, const fs_diag *g) {
  static const char *const sev[] = { "note", "warning", "error" };
  json_t *o = json_object();
  if (g->src) {
    json_object_set_new(o, "file", jstring(g->src->path));
    jlocate(o, g->src, g->loc);
  } else {
    json_object_set_new(o, "file", json_null());
    json_object_set_new(o, "line", json_null());
    json_object_set_new(o, "column", json_null());
    json_object_set_new(o, "end", json_null());
  }
  json_object_set_new(o, "severity", json_string(sev[g->severity]));
  json_object_set_new(o, "rule", jstring(g->rule));
  json_object_set_new(o, "message", jstring(g->message));
  json_t *notes = json_array();
  for (size_t i = 0; i < g->nnotes; i++) {
    json_t *n = json_object();
    json_object_set_new(n, "file", jstring(g->notes[i].src->path));
    jlocate(n, g->notes[i].src, g->notes[i].loc);
    json_object_set_new(n, "message", jstring(g->notes[i].message));
    json_array_append_new(notes, n);
  }
  json_object_set_new(o, "notes", notes);
  json_object_set_new(o, "help", g->help ? jstring(g->help) : json_null());
  json_t *fix = json_array();
  for (size_t i = 0; g->src && i < g->nedits; i++) {
    json_t *e = json_object();
    jlocate(e, g->src, g->edits[i].loc);
    json_object_set_new(e, "text", jstring(g->edits[i].text));
    json_array_append_new(fix, e);
  }
  json_object_set_new(o, "fix", fix);
  char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (!s) fsA_oom();
  fprintf(out, "%s\n", s);
  free(s);
}

/* One write per diagnostic: the ranks of a run share stderr, and a pipe
 * keeps a write of up to PIPE_BUF bytes whole. */
void fsD_render(FILE *out, const fs_diag *g, const fs_render_opts *opt) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) fsA_oom();
  if (opt->format == FS_DIAG_JSON) render_json(m, g);
  else render_text(m, g, opt->color);
  if (fclose(m) != 0) fsA_oom();
  fwrite(buf, 1, len, out);
  free(buf);
}

void fsD_render_all(FILE *out, const fs_diags *d, const fs_render_opts *opt) {
  for (size_t i = 0; i < d->n; i++) fsD_render(out, &d->items[i], opt);
  fflush(out);
}

/* ---- fixes --------------------------------------------------------------- */

/* Whether two edits touch the same text. An insertion conflicts with one at
 * the same offset (their order would be a guess) or strictly inside a
 * replaced range; a replacement may end where another begins. */
static int edits_conflict(fs_loc a, fs_loc b) {
  int ea = a.start == a.end, eb = b.start == b.end;
  if (ea && eb) return a.start == b.start;
  if (ea) return b.start < a.start && a.start < b.end;
  if (eb) return a.start < b.start && b.start < a.end;
  return a.start < b.end && b.start < a.end;
}

char *fsD_apply_fixes(const fs_source *src, const fs_diags *d, size_t *out_len) {
  size_t total = 0, n = 0;
  for (size_t i = 0; i < d->n; i++)
    if (d->items[i].src == src) total += d->items[i].nedits;
  const fs_edit **taken = fsA_xrealloc(NULL, total * sizeof *taken);
  for (size_t i = 0; i < d->n; i++) {
    const fs_diag *g = &d->items[i];
    for (size_t j = 0; g->src == src && j < g->nedits; j++) {
      const fs_edit *e = &g->edits[j];
      if (e->loc.start > e->loc.end || e->loc.end > src->len) continue;
      size_t k = 0;
      while (k < n && !edits_conflict(taken[k]->loc, e->loc)) k++;
      if (k < n) continue;
      /* Keep taken in text order: by start, then end, which puts an
       * insertion before a replacement that starts at its offset. */
      for (k = n++; k > 0 && (taken[k - 1]->loc.start > e->loc.start ||
                              (taken[k - 1]->loc.start == e->loc.start &&
                               taken[k - 1]->loc.end > e->loc.end)); k--)
        taken[k] = taken[k - 1];
      taken[k] = e;
    }
  }
  size_t len = src->len;
  for (size_t k = 0; k < n; k++)
    len += strlen(taken[k]->text) - (taken[k]->loc.end - taken[k]->loc.start);
  char *out = fsA_xrealloc(NULL, len + 1), *o = out;
  size_t at = 0;
  for (size_t k = 0; k < n; k++) {
    size_t tl = strlen(taken[k]->text);
    memcpy(o, src->text + at, taken[k]->loc.start - at);
    o += taken[k]->loc.start - at;
    memcpy(o, taken[k]->text, tl);
    o += tl;
    at = taken[k]->loc.end;
  }
  memcpy(o, src->text + at, src->len - at);
  out[len] = '\0';
  free(taken);
  *out_len = len;
  return out;
}
