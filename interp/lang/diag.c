/* diag.c -- collects diagnostics and renders them as GCC-shaped text or as
 * JSON lines. Source text is untrusted: whatever bytes a script holds are
 * shown as printable UTF-8 (U+FFFD for invalid bytes and control
 * characters), so a diagnostic can never drive the terminal. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "diag.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
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

static void free_diag(fs_diag *g) {
  free(g->rule);
  free(g->message);
  for (size_t j = 0; j < g->nnotes; j++) free(g->notes[j].message);
  free(g->notes);
  free(g->help);
  for (size_t j = 0; j < g->nedits; j++) free(g->edits[j].text);
  free(g->edits);
}

void fsD_free(fs_diags *d) {
  for (size_t i = 0; i < d->n; i++) free_diag(&d->items[i]);
  free(d->items);
  fsD_init(d);
}

void fsD_drop_repeated_warnings(fs_diags *d, const fs_diags *seen) {
  size_t kept = 0;
  for (size_t i = 0; i < d->n; i++) {
    fs_diag *g = &d->items[i];
    bool repeated = false;
    for (size_t j = 0; g->severity == FS_SEV_WARNING && !repeated && j < seen->n; j++)
      repeated = seen->items[j].severity == FS_SEV_WARNING && !strcmp(seen->items[j].rule, g->rule) &&
                 !strcmp(seen->items[j].message, g->message);
    if (repeated) {
      free_diag(g);
      d->nwarnings--;
    } else {
      d->items[kept++] = *g;
    }
  }
  d->n = kept;
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

/* `error[R36]: `: errors and warnings name their rule (`fabricscript
 * explain R36`); a note has none to name. */
static void put_severity(FILE *out, int color, fs_severity sev, const char *rule) {
  static const char *const name[] = { "note", "warning", "error" };
  static const char *const sgr[] = { SGR_CYAN, SGR_MAGENTA, SGR_RED };
  char *r = rule && rule[0] && sev != FS_SEV_NOTE ? printable_copy(rule, strlen(rule)) : NULL;
  char *label = fsA_xrealloc(NULL, strlen(name[sev]) + (r ? strlen(r) : 0) + sizeof "[]: ");
  sprintf(label, r ? "%s[%s]: " : "%s: ", name[sev], r);
  put_sgr(out, color, sgr[sev], label);
  free(label);
  free(r);
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

/* One line of a fix-it: `-` or `+`, the line number, the text. */
static void put_fix_line(FILE *out, int color, char mark, uint32_t line, int gutter, const char *s, size_t n) {
  if (color) fputs(mark == '+' ? SGR_GREEN : SGR_RED, out);
  fprintf(out, "%c%*u | ", mark, gutter - 1, line);
  put_printable(out, s, n);
  if (color) fputs(SGR_RESET, out);
  fputc('\n', out);
}

/* The lines g's edits touch, before (`-`) and after (`+`), as `fabricscript
 * fix` would write them. */
static void put_fixit(FILE *out, int color, const fs_diag *g) {
  const fs_source *src = g->src;
  uint32_t lo = UINT32_MAX, hi = 0;
  for (size_t i = 0; i < g->nedits; i++) {
    if (g->edits[i].loc.start > g->edits[i].loc.end || g->edits[i].loc.end > src->len) return;
    if (g->edits[i].loc.start < lo) lo = g->edits[i].loc.start;
    if (g->edits[i].loc.end > hi) hi = g->edits[i].loc.end;
  }
  fs_diags one = {.items = (fs_diag *)g, .n = 1, .cap = 1};
  size_t len;
  char *fixed = fsD_apply_fixes(src, &one, &len);
  uint32_t line, col;
  fsD_position(src, lo, &line, &col);
  size_t b = src->line_starts[line - 1], e = hi;
  if (!(e > b && src->text[e - 1] == '\n')) { /* to the end of the last line touched */
    while (e < src->len && src->text[e] != '\n') e++;
    if (e < src->len) e++;
  }
  size_t fixed_end = e + len - src->len; /* the same suffix follows in both */
  int gutter = snprintf(NULL, 0, "%u", line) + 1;
  if (gutter < 5) gutter = 5;
  put_sgr(out, color, SGR_BOLD, "fix-it:");
  fputs(" `fabricscript fix` makes this change\n", out);
  const char *texts[2] = {src->text, fixed};
  size_t from[2] = {b, b}, to[2] = {e, fixed_end};
  for (int side = 0; side < 2; side++) {
    uint32_t ln = line;
    for (size_t i = from[side]; i < to[side]; ln++) {
      size_t j = i;
      while (j < to[side] && texts[side][j] != '\n') j++;
      size_t k = j > i && texts[side][j - 1] == '\r' ? j - 1 : j;
      put_fix_line(out, color, side ? '+' : '-', ln, gutter, texts[side] + i, k - i);
      i = j + 1;
    }
  }
  free(fixed);
}

static void render_text(FILE *out, const fs_diag *g, int color) {
  if (g->src) put_locus(out, color, g->src, g->loc.start);
  else fputs("fabricscript: ", out);
  put_severity(out, color, g->severity, g->rule);
  put_printable(out, g->message, strlen(g->message));
  fputc('\n', out);
  if (g->src) put_excerpt(out, color, g->src, g->loc);
  for (size_t i = 0; i < g->nnotes; i++) {
    put_locus(out, color, g->notes[i].src, g->notes[i].loc.start);
    put_severity(out, color, FS_SEV_NOTE, NULL);
    put_printable(out, g->notes[i].message, strlen(g->notes[i].message));
    fputc('\n', out);
    put_excerpt(out, color, g->notes[i].src, g->notes[i].loc);
  }
  if (g->help) {
    put_sgr(out, color, SGR_BOLD, "help:");
    fputc(' ', out);
    size_t n = strlen(g->help);
    put_printable(out, g->help, n);
    if (n == 0 || g->help[n - 1] != '\n') fputc('\n', out);
  }
  if (g->src && g->nedits) put_fixit(out, color, g);
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *jstring(const char *s) {
  char *p = printable_copy(s, strlen(s));
  json_t *j = json_string(p);
  free(p);
  return j;
}

static int diag_rank = -1; /* this process's rank in a multi-rank run */

void fsD_set_rank(int rank) { diag_rank = rank; }
int fsD_rank(void) { return diag_rank; }

/* The 1-based column of offset in UTF-16 code units, as LSP and SARIF
 * editors count: a code point above U+FFFF is two, an invalid byte one. */
uint32_t fsD_column_utf16(const fs_source *src, uint32_t offset) {
  uint32_t line, col;
  fsD_position(src, offset, &line, &col);
  size_t i = src->line_starts[line - 1], end = offset > src->len ? src->len : offset;
  uint32_t units = 1;
  while (i < end) {
    uint32_t cp;
    i += fsA_utf8_decode((const unsigned char *)src->text + i, end - i, &cp);
    units += cp > 0xFFFF ? 2 : 1;
  }
  return units;
}

static json_t *jposition(const fs_source *src, uint32_t offset) {
  uint32_t line, col;
  fsD_position(src, offset, &line, &col);
  return json_pack("{s:I,s:I,s:I}", "line", (json_int_t)line, "column", (json_int_t)col,
                   "column_utf16", (json_int_t)fsD_column_utf16(src, offset));
}

/* Sets line, column, column_utf16 and end (exclusive) of loc in src on o. */
static void jlocate(json_t *o, const fs_source *src, fs_loc loc) {
  json_t *startp = jposition(src, loc.start);
  json_object_set(o, "line", json_object_get(startp, "line"));
  json_object_set(o, "column", json_object_get(startp, "column"));
  json_object_set(o, "column_utf16", json_object_get(startp, "column_utf16"));
  json_decref(startp);
  json_object_set_new(o, "end", jposition(src, loc.end < loc.start ? loc.start : loc.end));
}

static void render_json(FILE *out, const fs_diag *g) {
  static const char *const sev[] = { "note", "warning", "error" };
  json_t *o = json_object();
  json_object_set_new(o, "version", json_integer(FS_DIAG_JSON_VERSION));
  if (g->src) {
    json_object_set_new(o, "file", jstring(g->src->path));
    jlocate(o, g->src, g->loc);
  } else {
    json_object_set_new(o, "file", json_null());
    json_object_set_new(o, "line", json_null());
    json_object_set_new(o, "column", json_null());
    json_object_set_new(o, "column_utf16", json_null());
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
  if (diag_rank >= 0) json_object_set_new(o, "rank", json_integer(diag_rank));
  char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (!s) fsA_oom();
  fprintf(out, "%s\n", s);
  free(s);
}

/* ---- SARIF 2.1.0 --------------------------------------------------------- */

struct fs_sarif {
  json_t *log, *rules, *results; /* rules and results are borrowed from log */
  const char *(*describe)(const char *rule);
};

fs_sarif *fsD_sarif_new(const char *tool_version, const char *(*describe)(const char *rule)) {
  fs_sarif *s = fsA_xrealloc(NULL, sizeof *s);
  s->describe = describe;
  s->rules = json_array();
  s->results = json_array();
  json_t *driver = json_pack("{s:s,s:s,s:o}", "name", "fabricscript", "version", tool_version,
                             "rules", s->rules);
  json_t *run = json_pack("{s:{s:o},s:s,s:o}", "tool", "driver", driver, "columnKind", "utf16CodeUnits",
                          "results", s->results);
  s->log = json_pack("{s:s,s:s,s:[o]}", "$schema", "https://json.schemastore.org/sarif-2.1.0.json",
                     "version", "2.1.0", "runs", run);
  if (!s->log) fsA_oom();
  return s;
}

void fsD_sarif_free(fs_sarif *s) {
  if (!s) return;
  json_decref(s->log);
  free(s);
}

void fsD_sarif_write(FILE *out, const fs_sarif *s) {
  char *text = json_dumps(s->log, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (!text) fsA_oom();
  fprintf(out, "%s\n", text);
  fflush(out);
  free(text);
}

/* A path as a relative URI reference: bytes outside RFC 3986's unreserved
 * set and '/' are percent-encoded. */
static json_t *juri(const char *path) {
  char *u = fsA_xrealloc(NULL, 3 * strlen(path) + 1), *o = u;
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if (isalnum(*p) || strchr("-._~/", *p)) *o++ = (char)*p;
    else o += sprintf(o, "%%%02X", *p);
  }
  *o = 0;
  json_t *j = json_string(u);
  free(u);
  return j;
}

static json_t *sarif_region(const fs_source *src, fs_loc loc) {
  uint32_t l0, c0, l1, c1;
  uint32_t end = loc.end < loc.start ? loc.start : loc.end;
  fsD_position(src, loc.start, &l0, &c0);
  fsD_position(src, end, &l1, &c1);
  return json_pack("{s:I,s:I,s:I,s:I}", "startLine", (json_int_t)l0,
                   "startColumn", (json_int_t)fsD_column_utf16(src, loc.start),
                   "endLine", (json_int_t)l1, "endColumn", (json_int_t)fsD_column_utf16(src, end));
}

static json_t *sarif_location(const fs_source *src, fs_loc loc, const char *message) {
  json_t *l = json_pack("{s:{s:{s:o},s:o}}", "physicalLocation", "artifactLocation", "uri",
                        juri(src->path), "region", sarif_region(src, loc));
  if (message) json_object_set_new(l, "message", json_pack("{s:o}", "text", jstring(message)));
  return l;
}

/* The index of g's rule in the driver's rules, added on first sight. */
static size_t sarif_rule(fs_sarif *s, const fs_diag *g) {
  const char *id = g->rule[0] ? g->rule : "fabricscript";
  size_t i;
  json_t *r;
  json_array_foreach(s->rules, i, r)
    if (!strcmp(json_string_value(json_object_get(r, "id")), id)) return i;
  const char *words = s->describe ? s->describe(id) : NULL;
  r = json_pack("{s:o}", "id", jstring(id));
  if (words) json_object_set_new(r, "shortDescription", json_pack("{s:o}", "text", jstring(words)));
  if (g->help) json_object_set_new(r, "help", json_pack("{s:o}", "text", jstring(g->help)));
  json_array_append_new(s->rules, r);
  return json_array_size(s->rules) - 1;
}

static void render_sarif(fs_sarif *s, const fs_diag *g) {
  static const char *const level[] = { "note", "warning", "error" };
  size_t rule = sarif_rule(s, g);
  json_t *res = json_pack("{s:o,s:I,s:s,s:{s:o}}", "ruleId", jstring(g->rule[0] ? g->rule : "fabricscript"),
                          "ruleIndex", (json_int_t)rule, "level", level[g->severity],
                          "message", "text", jstring(g->message));
  json_t *locs = json_array();
  if (g->src) json_array_append_new(locs, sarif_location(g->src, g->loc, NULL));
  json_object_set_new(res, "locations", locs);
  if (g->nnotes) {
    json_t *rel = json_array();
    for (size_t i = 0; i < g->nnotes; i++)
      json_array_append_new(rel, sarif_location(g->notes[i].src, g->notes[i].loc, g->notes[i].message));
    json_object_set_new(res, "relatedLocations", rel);
  }
  if (g->src && g->nedits) {
    json_t *reps = json_array();
    for (size_t i = 0; i < g->nedits; i++)
      json_array_append_new(reps, json_pack("{s:o,s:{s:o}}", "deletedRegion", sarif_region(g->src, g->edits[i].loc),
                                            "insertedContent", "text", jstring(g->edits[i].text)));
    json_t *fix = json_pack("{s:[{s:{s:o},s:o}]}", "artifactChanges", "artifactLocation", "uri",
                            juri(g->src->path), "replacements", reps);
    json_object_set_new(fix, "description", json_pack("{s:o}", "text", jstring(g->help ? g->help : g->message)));
    json_object_set_new(res, "fixes", json_pack("[o]", fix));
  }
  if (diag_rank >= 0) json_object_set_new(res, "properties", json_pack("{s:i}", "rank", diag_rank));
  json_array_append_new(s->results, res);
}

/* One write per diagnostic: the ranks of a run share stderr, and a pipe
 * keeps a write of up to PIPE_BUF bytes whole. */
void fsD_render(FILE *out, const fs_diag *g, const fs_render_opts *opt) {
  if (opt->format == FS_DIAG_SARIF && opt->sarif && diag_rank < 0) {
    render_sarif(opt->sarif, g);
    return;
  }
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) fsA_oom();
  if (opt->format != FS_DIAG_TEXT) render_json(m, g); /* a rank's SARIF: JSON lines */
  else render_text(m, g, opt->color);
  if (fclose(m) != 0) fsA_oom();
  fwrite(buf, 1, len, out);
  free(buf);
}

void fsD_render_all(FILE *out, const fs_diags *d, const fs_render_opts *opt) {
  fs_diag_limit *lim = opt->format == FS_DIAG_TEXT ? opt->limit : NULL;
  for (size_t i = 0; i < d->n; i++) {
    const fs_diag *g = &d->items[i];
    if (lim && lim->max && lim->shown_errors >= lim->max) {
      if (g->severity == FS_SEV_ERROR) lim->hidden_errors++;
      else if (g->severity == FS_SEV_WARNING) lim->hidden_warnings++;
      continue;
    }
    fsD_render(out, g, opt);
    if (lim && g->severity == FS_SEV_ERROR) lim->shown_errors++;
  }
  fflush(out);
}

void fsD_count(const fs_diags *d, fs_diag_totals *t) {
  t->errors += d->nerrors;
  t->warnings += d->nwarnings;
  for (size_t i = 0; i < d->n; i++) t->fixes += d->items[i].src && d->items[i].nedits > 0;
}

void fsD_render_totals(FILE *out, const fs_diag_totals *t, const fs_render_opts *opt) {
  if (opt->format != FS_DIAG_TEXT || (t->errors == 0 && t->warnings == 0)) return;
  if (t->errors) fprintf(out, "%zu error%s", t->errors, t->errors == 1 ? "" : "s");
  if (t->errors && t->warnings) fputs(", ", out);
  if (t->warnings) fprintf(out, "%zu warning%s", t->warnings, t->warnings == 1 ? "" : "s");
  if (t->fixes) fprintf(out, "; fabricscript fix can apply %zu fix%s", t->fixes, t->fixes == 1 ? "" : "es");
  fputc('\n', out);
  const fs_diag_limit *lim = opt->limit;
  if (lim && (lim->hidden_errors || lim->hidden_warnings)) {
    fputs("not shown: ", out);
    if (lim->hidden_errors) fprintf(out, "%zu more error%s", lim->hidden_errors, lim->hidden_errors == 1 ? "" : "s");
    if (lim->hidden_errors && lim->hidden_warnings) fputs(" and ", out);
    if (lim->hidden_warnings)
      fprintf(out, "%zu more warning%s", lim->hidden_warnings, lim->hidden_warnings == 1 ? "" : "s");
    fprintf(out, " after the first %zu errors (--error-limit=N shows N, 0 all)\n", lim->max);
  }
  fflush(out);
}

/* ---- did you mean -------------------------------------------------------- */

/* Optimal string alignment distance of a and b, case folded; stops early
 * (returns limit + 1) once every alignment costs more than limit. */
static size_t edit_distance(const char *a, const char *b, size_t limit) {
  size_t la = strlen(a), lb = strlen(b);
  if ((la > lb ? la - lb : lb - la) > limit || la > 64 || lb > 64) return limit + 1;
  size_t d[65][65];
  for (size_t i = 0; i <= la; i++) d[i][0] = i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t row_min = (size_t)-1;
    for (size_t j = 1; j <= lb; j++) {
      int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
      size_t best = d[i - 1][j - 1] + (ca != cb);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
      if (best < row_min) row_min = best;
    }
    if (row_min > limit) return limit + 1;
  }
  return d[la][lb];
}

const char *fsD_closest(const char *word, const char *const *cands, size_t n) {
  size_t limit = strlen(word) / 3 ? strlen(word) / 3 : 1;
  const char *best = NULL;
  size_t best_d = limit + 1;
  for (size_t i = 0; i < n; i++) {
    if (!cands[i] || !strcmp(cands[i], word)) continue;
    size_t dist = edit_distance(word, cands[i], limit);
    if (dist < best_d) { best_d = dist; best = cands[i]; }
  }
  return best;
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
