/* lsp.c -- `fabricscript lsp`, the protocol half: Content-Length framing,
 * JSON-RPC 2.0 (jansson), the lifecycle, open documents with full and
 * incremental sync, published diagnostics and the fix-its as code actions.
 * Invariant: nothing a client sends ends the server but `exit` (or the end
 * of its input): a bad frame, bad JSON, a bad request or bad parameters get
 * a JSON-RPC error and the next message is read. Each change re-parses and
 * re-checks the whole document; the checker has no side effects, so this is
 * safe on every keystroke. The language features are in lsp_lang.c. */
#define _POSIX_C_SOURCE 200809L
#include "lsp_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "lex.h"

/* JSON-RPC's and LSP's error codes. */
enum { PARSE_ERROR = -32700, INVALID_REQUEST = -32600, METHOD_NOT_FOUND = -32601, INVALID_PARAMS = -32602,
       INTERNAL_ERROR = -32603, SERVER_NOT_INITIALIZED = -32002 };

#define MAX_HEADER_LINE 1024
#define MAX_BODY ((size_t)256 << 20) /* a document past this is not a script */

/* ---- positions ------------------------------------------------------------ */

uint32_t fsJ_offset(const char *text, size_t len, json_int_t line, json_int_t character) {
  size_t i = 0;
  for (json_int_t l = 0; l < line; l++) {
    const char *nl = memchr(text + i, '\n', len - i);
    if (!nl) return (uint32_t)len;
    i = (size_t)(nl - text) + 1;
  }
  for (json_int_t units = 0; i < len && text[i] != '\n' && units < character;) {
    uint32_t cp;
    i += fsA_utf8_decode((const unsigned char *)text + i, len - i, &cp);
    units += cp > 0xFFFF ? 2 : 1;
  }
  return (uint32_t)i;
}

json_t *fsJ_position(const fs_source *src, uint32_t offset) {
  uint32_t line, col;
  if (offset > src->len) offset = (uint32_t)src->len;
  fsD_position(src, offset, &line, &col);
  return json_pack("{s:I,s:I}", "line", (json_int_t)line - 1, "character",
                   (json_int_t)fsD_column_utf16(src, offset) - 1);
}

json_t *fsJ_range(const fs_source *src, fs_loc loc) {
  return json_pack("{s:o,s:o}", "start", fsJ_position(src, loc.start), "end",
                   fsJ_position(src, loc.end < loc.start ? loc.start : loc.end));
}

/* A JSON string of s; bytes that are not UTF-8 become U+FFFD (jansson
 * takes only valid UTF-8, and a script may hold anything). */
static json_t *jstr(const char *s) {
  json_t *j = json_string(s);
  if (j) return j;
  size_t n = strlen(s);
  char *clean = fsA_xrealloc(NULL, 3 * n + 1), *o = clean;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    i += fsA_utf8_decode((const unsigned char *)s + i, n - i, &cp);
    o += fsA_utf8_encode(cp, o);
  }
  *o = '\0';
  j = json_string(clean);
  free(clean);
  return j ? j : json_string("");
}

/* ---- framing -------------------------------------------------------------- */

/* Takes msg; every message is built from valid UTF-8 (jstr), so only
 * memory can fail here. */
static void send(fsJ_server *S, json_t *msg) {
  if (!msg) fsA_oom();
  char *body = json_dumps(msg, JSON_COMPACT);
  json_decref(msg);
  if (!body) fsA_oom();
  fprintf(S->out, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
  fflush(S->out);
  free(body);
}

static void reply_error(fsJ_server *S, json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Takes result; NULL (a value jansson would not build) is answered as an
 * internal error, so a request never goes unanswered. */
static void reply(fsJ_server *S, json_t *id, json_t *result) {
  if (!result) {
    reply_error(S, id, INTERNAL_ERROR, "the result could not be encoded as JSON");
    return;
  }
  send(S, json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result", result));
}

static void reply_error(fsJ_server *S, json_t *id, int code, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  send(S, json_pack("{s:s,s:O,s:{s:i,s:o}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code",
                    code, "message", jstr(msg)));
}

static void notify(fsJ_server *S, const char *method, json_t *params) {
  send(S, json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", method, "params", params));
}

/* One header line without its line end; 0 at the end of input. A line
 * longer than the limit is read to its end and reported as too long. */
static int read_line(FILE *in, char *line, size_t cap, int *too_long) {
  size_t n = 0;
  int c;
  *too_long = 0;
  while ((c = getc(in)) != EOF && c != '\n') {
    if (n + 1 < cap) line[n++] = (char)c;
    else *too_long = 1;
  }
  if (c == EOF && n == 0) return 0;
  if (n && line[n - 1] == '\r') n--;
  line[n] = '\0';
  return 1;
}

/* Reads one framed message: 1 with *body (malloc'd, NUL-terminated, *len
 * bytes), 0 at the end of input, -1 for a frame that cannot be read, with
 * the reason in err; the next call reads on from the line after it. */
static int read_message(FILE *in, char **body, size_t *len, char *err, size_t errcap) {
  char line[MAX_HEADER_LINE];
  long long length = -1;
  int too_long, any = 0;
  for (;;) {
    if (!read_line(in, line, sizeof line, &too_long)) return 0;
    if (too_long) { snprintf(err, errcap, "header line longer than %d bytes", MAX_HEADER_LINE); return -1; }
    if (!line[0]) {
      if (!any) continue; /* blank lines between messages */
      break;
    }
    any = 1;
    char *colon = strchr(line, ':');
    if (!colon) { snprintf(err, errcap, "bad header line (no ':'): %.60s", line); return -1; }
    *colon = '\0';
    if (strcasecmp(line, "Content-Length") != 0) continue; /* Content-Type: always UTF-8 JSON here */
    char *v = colon + 1, *end;
    while (*v == ' ' || *v == '\t') v++;
    length = strtoll(v, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (end == v || *end || length < 0) { snprintf(err, errcap, "bad Content-Length: %.60s", v); return -1; }
  }
  if (length < 0) { snprintf(err, errcap, "a message without Content-Length"); return -1; }
  if ((unsigned long long)length > MAX_BODY) {
    for (long long i = 0; i < length && getc(in) != EOF; i++) {} /* skip it, stay in step */
    snprintf(err, errcap, "a message of %lld bytes is over the limit of %zu", length, MAX_BODY);
    return -1;
  }
  char *b = fsA_xrealloc(NULL, (size_t)length + 1);
  if (fread(b, 1, (size_t)length, in) != (size_t)length) { free(b); return 0; }
  b[length] = '\0';
  *body = b;
  *len = (size_t)length;
  return 1;
}

/* ---- documents ------------------------------------------------------------ */

/* The file name a file: URI names ("file:///a%20b/x.py" is "/a b/x.py");
 * another scheme's URI is its own name. */
static char *uri_path(const char *uri) {
  const char *p = strncmp(uri, "file://", 7) == 0 ? uri + 7 : uri;
  size_t n = strlen(p);
  char *out = fsA_xrealloc(NULL, n + 1), *o = out;
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '%' && isxdigit((unsigned char)p[i + 1]) && isxdigit((unsigned char)p[i + 2])) {
      char hex[3] = {p[i + 1], p[i + 2], 0};
      char c = (char)strtol(hex, NULL, 16);
      if (c) { *o++ = c; i += 2; continue; }
    }
    *o++ = p[i];
  }
  *o = '\0';
  return out;
}

static fsJ_doc *find_doc(fsJ_server *S, const char *uri) {
  for (size_t i = 0; i < S->ndocs; i++)
    if (strcmp(S->docs[i]->uri, uri) == 0) return S->docs[i];
  return NULL;
}

static void drop_analysis(fsJ_doc *d) {
  fsA_free(d->ast);
  d->ast = NULL;
  fsD_free(&d->diags);
  fsA_source_free(d->src);
  d->src = NULL;
}

static void free_doc(fsJ_doc *d) {
  drop_analysis(d);
  free(d->uri);
  free(d->path);
  free(d->text);
  free(d);
}

int fsJ_analyse(const fsC_options *o, const char *path, const char *text, size_t len, fsC_query *query,
                fs_source **src, fs_node **ast, fs_diags *diags) {
  *src = fsA_source_from_buffer(path, text, len);
  int nerrors = 0;
  *ast = fsP_parse(*src, diags, &nerrors);
  if (!nerrors && *ast) {
    fsC_options co = *o;
    co.query = query;
    fsC_check(*src, *ast, &co, diags);
  }
  fsD_sort(diags);
  return nerrors;
}

/* An LSP diagnostic of g: rule id as code, notes as related information,
 * help after the message. */
static json_t *lsp_diag(const fsJ_doc *d, const fs_diag *g) {
  static const int severity[] = {[FS_SEV_NOTE] = 3, [FS_SEV_WARNING] = 2, [FS_SEV_ERROR] = 1};
  json_t *o = json_object();
  fs_loc none = {0, 0};
  json_object_set_new(o, "range", fsJ_range(d->src, g->src ? g->loc : none));
  json_object_set_new(o, "severity", json_integer(severity[g->severity]));
  if (g->rule[0]) json_object_set_new(o, "code", jstr(g->rule));
  json_object_set_new(o, "source", json_string("fabricscript"));
  if (g->help) {
    size_t n = strlen(g->message) + strlen(g->help) + 8;
    char *m = fsA_xrealloc(NULL, n);
    snprintf(m, n, "%s\nhelp: %s", g->message, g->help);
    json_object_set_new(o, "message", jstr(m));
    free(m);
  } else {
    json_object_set_new(o, "message", jstr(g->message));
  }
  if (g->nnotes) {
    json_t *rel = json_array();
    for (size_t i = 0; i < g->nnotes; i++) {
      const fs_note *n = &g->notes[i];
      json_array_append_new(rel, json_pack("{s:{s:o,s:o},s:o}", "location", "uri", jstr(d->uri), "range",
                                           fsJ_range(n->src, n->loc), "message", jstr(n->message)));
    }
    json_object_set_new(o, "relatedInformation", rel);
  }
  return o;
}

static void publish(fsJ_server *S, const fsJ_doc *d) {
  json_t *list = json_array();
  for (size_t i = 0; d->src && i < d->diags.n; i++) json_array_append_new(list, lsp_diag(d, &d->diags.items[i]));
  json_t *params = json_pack("{s:o,s:o}", "uri", jstr(d->uri), "diagnostics", list);
  json_object_set_new(params, "version", json_integer(d->version));
  notify(S, "textDocument/publishDiagnostics", params);
}

static void analyse(fsJ_server *S, fsJ_doc *d) {
  drop_analysis(d);
  fsD_init(&d->diags);
  d->syntax_errors = fsJ_analyse(S->o, d->path, d->text, d->len, NULL, &d->src, &d->ast, &d->diags);
  publish(S, d);
}

/* Replaces bytes [from, to) of d's text with s[0, n). */
static void splice(fsJ_doc *d, size_t from, size_t to, const char *s, size_t n) {
  size_t len = d->len - (to - from) + n;
  char *t = fsA_xrealloc(NULL, len + 1);
  memcpy(t, d->text, from);
  memcpy(t + from, s, n);
  memcpy(t + from + n, d->text + to, d->len - to);
  t[len] = '\0';
  free(d->text);
  d->text = t;
  d->len = len;
}

/* ---- requests and notifications ------------------------------------------- */

/* params.textDocument.uri's document; NULL after replying (when id) that
 * the parameters are bad or the document is not open. */
static fsJ_doc *doc_of(fsJ_server *S, json_t *id, json_t *params) {
  const char *uri = json_string_value(json_object_get(json_object_get(params, "textDocument"), "uri"));
  fsJ_doc *d = uri ? find_doc(S, uri) : NULL;
  if (!d && id) {
    if (uri) reply_error(S, id, INVALID_PARAMS, "document not open: %.200s", uri);
    else reply_error(S, id, INVALID_PARAMS, "params.textDocument.uri: expected a string");
  }
  return d;
}

/* params.position as a byte offset of d; -1 after replying that it is bad. */
static long long position_of(fsJ_server *S, json_t *id, const fsJ_doc *d, json_t *params) {
  json_t *pos = json_object_get(params, "position");
  json_t *line = json_object_get(pos, "line"), *ch = json_object_get(pos, "character");
  if (!json_is_integer(line) || !json_is_integer(ch) || json_integer_value(line) < 0 || json_integer_value(ch) < 0) {
    reply_error(S, id, INVALID_PARAMS, "params.position: expected {line, character}, non-negative integers");
    return -1;
  }
  return fsJ_offset(d->text, d->len, json_integer_value(line), json_integer_value(ch));
}

static json_t *capabilities(void) {
  return json_pack("{s:{s:s,s:{s:b,s:i,s:{s:b}},s:b,s:{s:[s]},s:b,s:{s:[s,s]}},s:{s:s,s:s}}",
                   "capabilities", "positionEncoding", "utf-16",
                   "textDocumentSync", "openClose", 1, "change", 2, "save", "includeText", 1,
                   "hoverProvider", 1, "completionProvider", "triggerCharacters", ".",
                   "definitionProvider", 1,
                   "codeActionProvider", "codeActionKinds", "quickfix", "source.fixAll.fabricscript",
                   "serverInfo", "name", "fabricscript", "version", PACKAGE_VERSION);
}

static void did_open(fsJ_server *S, json_t *params) {
  json_t *td = json_object_get(params, "textDocument");
  const char *uri = json_string_value(json_object_get(td, "uri"));
  json_t *text = json_object_get(td, "text");
  if (!uri || !json_is_string(text)) return; /* a notification: no one to tell */
  fsJ_doc *d = find_doc(S, uri);
  if (!d) {
    d = fsA_xrealloc(NULL, sizeof *d);
    memset(d, 0, sizeof *d);
    size_t n = strlen(uri) + 1;
    d->uri = memcpy(fsA_xrealloc(NULL, n), uri, n);
    d->path = uri_path(uri);
    if (S->ndocs == S->capdocs) {
      S->capdocs = S->capdocs ? 2 * S->capdocs : 8;
      S->docs = fsA_xrealloc(S->docs, S->capdocs * sizeof *S->docs);
    }
    S->docs[S->ndocs++] = d;
  }
  free(d->text);
  d->len = json_string_length(text);
  d->text = memcpy(fsA_xrealloc(NULL, d->len + 1), json_string_value(text), d->len + 1);
  d->version = json_integer_value(json_object_get(td, "version"));
  analyse(S, d);
}

static void did_change(fsJ_server *S, json_t *params) {
  fsJ_doc *d = doc_of(S, NULL, params);
  json_t *changes = json_object_get(params, "contentChanges");
  if (!d || !json_is_array(changes)) return;
  size_t i;
  json_t *ch;
  json_array_foreach(changes, i, ch) {
    json_t *text = json_object_get(ch, "text"), *range = json_object_get(ch, "range");
    if (!json_is_string(text)) continue;
    size_t from = 0, to = d->len;
    if (range) { /* incremental: positions in the text as the earlier changes left it */
      json_t *s = json_object_get(range, "start"), *e = json_object_get(range, "end");
      json_int_t sl = json_integer_value(json_object_get(s, "line")), sc = json_integer_value(json_object_get(s, "character"));
      json_int_t el = json_integer_value(json_object_get(e, "line")), ec = json_integer_value(json_object_get(e, "character"));
      if (sl < 0 || sc < 0 || el < 0 || ec < 0) continue;
      from = fsJ_offset(d->text, d->len, sl, sc);
      to = fsJ_offset(d->text, d->len, el, ec);
      if (to < from) { size_t t = from; from = to; to = t; }
    }
    splice(d, from, to, json_string_value(text), json_string_length(text));
  }
  json_t *version = json_object_get(json_object_get(params, "textDocument"), "version");
  if (json_is_integer(version)) d->version = json_integer_value(version);
  analyse(S, d);
}

static void did_save(fsJ_server *S, json_t *params) {
  fsJ_doc *d = doc_of(S, NULL, params);
  json_t *text = json_object_get(params, "text");
  if (!d) return;
  if (json_is_string(text)) splice(d, 0, d->len, json_string_value(text), json_string_length(text));
  analyse(S, d);
}

static void did_close(fsJ_server *S, json_t *params) {
  fsJ_doc *d = doc_of(S, NULL, params);
  if (!d) return;
  notify(S, "textDocument/publishDiagnostics", json_pack("{s:o,s:[]}", "uri", jstr(d->uri), "diagnostics"));
  for (size_t i = 0; i < S->ndocs; i++)
    if (S->docs[i] == d) S->docs[i] = S->docs[--S->ndocs];
  free_doc(d);
}

/* Whether [a0, a1) and [b0, b1] touch (an empty request range at a fix's end counts). */
static int overlaps(uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1) { return a0 <= b1 && b0 <= a1; }

/* Whether the client asks for actions of this kind: context.only absent,
 * or holding the kind or a prefix of it ("source" for "source.fixAll"). */
static int wanted(json_t *params, const char *kind) {
  json_t *only = json_object_get(json_object_get(params, "context"), "only");
  if (!json_is_array(only)) return 1;
  size_t i;
  json_t *k;
  json_array_foreach(only, i, k) {
    const char *p = json_string_value(k);
    size_t n = p ? strlen(p) : 0;
    if (p && !strncmp(kind, p, n) && (kind[n] == '\0' || kind[n] == '.')) return 1;
  }
  return 0;
}

/* Every fix-it at once, as `fabricscript fix` applies them (overlapping ones
 * skipped): one edit of the whole text, or NULL when there is none. */
static json_t *fix_all(const fsJ_doc *d) {
  size_t nedits = 0, len = 0;
  for (size_t i = 0; i < d->diags.n; i++) nedits += d->diags.items[i].src ? d->diags.items[i].nedits : 0;
  char *fixed = nedits ? fsD_apply_fixes(d->src, &d->diags, &len) : NULL;
  if (!fixed) return NULL;
  json_t *edit = json_pack("{s:o,s:s%}", "range", fsJ_range(d->src, (fs_loc){0, (uint32_t)d->src->len}), "newText",
                           fixed, len);
  free(fixed);
  if (!edit) return NULL; /* the fixed text is not UTF-8: the quick fixes one by one still are */
  json_t *changes = json_object();
  json_object_set_new(changes, d->uri, json_pack("[o]", edit));
  char title[64];
  snprintf(title, sizeof title, "Apply all %zu fabricscript fix%s", nedits, nedits == 1 ? "" : "es");
  return json_pack("{s:s,s:s,s:{s:o}}", "title", title, "kind", "source.fixAll.fabricscript", "edit", "changes",
                   changes);
}

/* The fix-its of the diagnostics in the requested range, one quick fix
 * each, and all of them as a source.fixAll action. */
static json_t *code_actions(const fsJ_doc *d, json_t *params) {
  json_t *range = json_object_get(params, "range"), *actions = json_array();
  json_t *s = json_object_get(range, "start"), *e = json_object_get(range, "end");
  uint32_t from = fsJ_offset(d->text, d->len, json_integer_value(json_object_get(s, "line")),
                             json_integer_value(json_object_get(s, "character")));
  uint32_t to = fsJ_offset(d->text, d->len, json_integer_value(json_object_get(e, "line")),
                           json_integer_value(json_object_get(e, "character")));
  int quick = wanted(params, "quickfix");
  for (size_t i = 0; quick && i < d->diags.n; i++) {
    const fs_diag *g = &d->diags.items[i];
    if (!g->nedits || !g->src || !overlaps(g->loc.start, g->loc.end, from, to)) continue;
    json_t *edits = json_array();
    for (size_t k = 0; k < g->nedits; k++)
      json_array_append_new(edits, json_pack("{s:o,s:o}", "range", fsJ_range(d->src, g->edits[k].loc), "newText",
                                             jstr(g->edits[k].text)));
    char title[256];
    const char *help = g->help ? g->help : g->message;
    snprintf(title, sizeof title, "%s%s%.*s", g->rule[0] ? g->rule : "", g->rule[0] ? ": " : "",
             (int)strcspn(help, "\n"), help);
    json_t *changes = json_object();
    json_object_set_new(changes, d->uri, edits);
    json_array_append_new(actions, json_pack("{s:o,s:s,s:[o],s:b,s:{s:o}}", "title", jstr(title), "kind", "quickfix",
                                             "diagnostics", lsp_diag(d, g), "isPreferred", 1, "edit", "changes",
                                             changes));
  }
  json_t *all = wanted(params, "source.fixAll.fabricscript") ? fix_all(d) : NULL;
  if (all) json_array_append_new(actions, all);
  return actions;
}

/* A request that needs an open document and, for some, a position. */
static void document_request(fsJ_server *S, json_t *id, const char *method, json_t *params) {
  fsJ_doc *d = doc_of(S, id, params);
  if (!d) return;
  if (!strcmp(method, "textDocument/codeAction")) {
    if (!json_is_object(json_object_get(params, "range"))) {
      reply_error(S, id, INVALID_PARAMS, "params.range: expected {start, end}");
      return;
    }
    reply(S, id, code_actions(d, params));
    return;
  }
  long long off = position_of(S, id, d, params);
  if (off < 0) return;
  if (!strcmp(method, "textDocument/hover")) reply(S, id, fsJ_hover(S, d, (uint32_t)off));
  else if (!strcmp(method, "textDocument/completion")) reply(S, id, fsJ_completion(S, d, (uint32_t)off));
  else reply(S, id, fsJ_definition(S, d, (uint32_t)off));
}

/* Returns 1 when the client said `exit`. */
static int handle(fsJ_server *S, json_t *msg, int *status) {
  if (!json_is_object(msg)) {
    reply_error(S, NULL, INVALID_REQUEST, json_is_array(msg) ? "batches are not part of the Language Server Protocol"
                                                             : "a message must be a JSON object");
    return 0;
  }
  json_t *id = json_object_get(msg, "id"), *method_j = json_object_get(msg, "method");
  json_t *params = json_object_get(msg, "params");
  if (json_is_null(params)) params = NULL; /* as clients send for shutdown and exit */
  if (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id)) {
    reply_error(S, NULL, INVALID_REQUEST, "id must be a number or a string");
    return 0;
  }
  if (!method_j) {
    if (id && (json_object_get(msg, "result") || json_object_get(msg, "error"))) return 0; /* a response to us */
    reply_error(S, id, INVALID_REQUEST, "a request needs a method");
    return 0;
  }
  const char *method = json_string_value(method_j);
  const char *version = json_string_value(json_object_get(msg, "jsonrpc"));
  if (!method || !version || strcmp(version, "2.0") != 0 || (params && !json_is_object(params) && !json_is_array(params))) {
    if (id) reply_error(S, id, INVALID_REQUEST, "expected {\"jsonrpc\": \"2.0\", \"method\": string, \"params\": object}");
    return 0;
  }
  if (!strcmp(method, "exit")) {
    *status = S->shutdown ? 0 : 1;
    return 1;
  }
  if (!S->initialized && strcmp(method, "initialize") != 0) {
    if (id) reply_error(S, id, SERVER_NOT_INITIALIZED, "%s before initialize", method);
    return 0;
  }
  if (S->shutdown && id) {
    reply_error(S, id, INVALID_REQUEST, "%s after shutdown", method);
    return 0;
  }
  if (id) {
    if (!strcmp(method, "initialize")) {
      if (S->initialized) reply_error(S, id, INVALID_REQUEST, "initialize sent twice");
      else { S->initialized = 1; reply(S, id, capabilities()); }
    } else if (!strcmp(method, "shutdown")) {
      S->shutdown = 1;
      reply(S, id, json_null());
    } else if (!strcmp(method, "textDocument/hover") || !strcmp(method, "textDocument/completion") ||
               !strcmp(method, "textDocument/definition") || !strcmp(method, "textDocument/codeAction")) {
      document_request(S, id, method, params);
    } else {
      reply_error(S, id, METHOD_NOT_FOUND, "method not found: %.200s", method);
    }
    return 0;
  }
  if (!strcmp(method, "textDocument/didOpen")) did_open(S, params);
  else if (!strcmp(method, "textDocument/didChange")) did_change(S, params);
  else if (!strcmp(method, "textDocument/didSave")) did_save(S, params);
  else if (!strcmp(method, "textDocument/didClose")) did_close(S, params);
  /* other notifications (initialized, $/cancelRequest, settings) need nothing */
  return 0;
}

int fsJ_main(FILE *in, FILE *out, const fsC_options *o) {
  fsJ_server S = {.in = in, .out = out, .o = o};
  int status = 1; /* the input ended without `exit` */
  for (;;) {
    char *body = NULL, err[160];
    size_t len = 0;
    int r = read_message(in, &body, &len, err, sizeof err);
    if (r == 0) break;
    if (r < 0) { reply_error(&S, NULL, PARSE_ERROR, "%s", err); continue; }
    json_error_t jerr;
    json_t *msg = json_loadb(body, len, 0, &jerr);
    free(body);
    if (!msg) {
      reply_error(&S, NULL, PARSE_ERROR, "invalid JSON at byte %d: %s", jerr.position, jerr.text);
      continue;
    }
    int done = handle(&S, msg, &status);
    json_decref(msg);
    if (done) break;
  }
  for (size_t i = 0; i < S.ndocs; i++) free_doc(S.docs[i]);
  free(S.docs);
  return status;
}
