/* lsp_lang.c -- `fabricscript lsp`, the language half: hover, completion
 * and go to definition over a document's tree (lsp.c keeps it current).
 * Invariant: what a value is comes from the checker (fsC_query, one more
 * check of the same text with the question attached), what a builtin takes
 * from the signature table; this file only finds the expression under the
 * cursor and the names a scope binds, by the syntax. */
#define _POSIX_C_SOURCE 200809L
#include "lsp_int.h"

#include <stdlib.h>
#include <string.h>

#include "pynames.h"
#include "signatures.h"

/* LSP's CompletionItemKind values used here. */
enum { K_METHOD = 2, K_FUNCTION = 3, K_FIELD = 5, K_VARIABLE = 6, K_CLASS = 7, K_MODULE = 9, K_PROPERTY = 10,
       K_KEYWORD = 14 };

/* ---- the node under the cursor ---------------------------------------------- */

typedef struct hit {
  const fs_node *node; /* NAME, ATTR (attribute name hit), DEF/MODEL/CLASS (name hit), PARAM */
  fs_loc span;         /* the name's own span */
} hit;

static int covers(fs_loc l, uint32_t off) { return l.start <= off && off < l.end; }

static fs_loc param_name_loc(const fs_source *src, const fs_node *p) {
  size_t n = strlen(p->str);
  for (uint32_t i = p->loc.start; i + n <= p->loc.end && i + n <= src->len; i++)
    if (!memcmp(src->text + i, p->str, n)) return (fs_loc){i, (uint32_t)(i + n)};
  return p->loc;
}

/* The smallest name span at off, anywhere in the tree. */
static void find_at(const fs_source *src, const fs_node *n, uint32_t off, hit *best) {
  if (!n) return;
  fs_loc span = {0, 0};
  if (n->str) { /* a named node: its name's span */
    if (n->kind == FS_N_NAME) span = n->loc;
    else if (n->kind == FS_N_ATTR || n->kind == FS_N_DEF || n->kind == FS_N_MODEL || n->kind == FS_N_CLASS)
      span = n->name_loc;
    else if (n->kind == FS_N_PARAM) span = param_name_loc(src, n);
  }
  if (span.end > span.start && covers(span, off) &&
      (!best->node || span.end - span.start <= best->span.end - best->span.start))
    *best = (hit){n, span};
  for (uint32_t i = 0; i < n->nkids; i++) find_at(src, n->kids[i], off, best);
}

/* ---- signatures in words -------------------------------------------------- */

typedef struct buf { char *s; size_t n, cap; } buf;

static void add(buf *t, const char *s) {
  size_t k = strlen(s);
  if (t->n + k + 1 > t->cap) {
    t->cap = (t->n + k + 1) * 2;
    t->s = fsA_xrealloc(t->s, t->cap);
  }
  memcpy(t->s + t->n, s, k + 1);
  t->n += k;
}

/* "Fabric.setup(module, *optimizers, move_to_device=True) -> any", as Python writes it. */
static void sig_text(buf *t, const fsSig *s) {
  static const char *const kinds[] = {[FSSIG_FUNC] = "", [FSSIG_CLASS] = "class ", [FSSIG_LAYER] = "layer ",
                                      [FSSIG_MODULE] = "module ", [FSSIG_METHOD] = "", [FSSIG_ATTR] = ""};
  add(t, kinds[s->kind]);
  add(t, s->name);
  if (s->kind == FSSIG_MODULE) return;
  if (s->kind == FSSIG_ATTR || (s->flags & FSSIG_CONST)) {
    add(t, ": ");
    add(t, s->returns);
    return;
  }
  add(t, "(");
  int star = 0;
  for (size_t i = 0; i < s->nparams; i++) {
    const fsSig_param *p = &s->params[i];
    if (i) add(t, ", ");
    if ((p->flags & FSSIG_KWONLY) && !star) { add(t, "*, "); star = 1; }
    if (p->flags & FSSIG_VARARGS) { add(t, "*"); star = 1; }
    if (p->flags & FSSIG_VARKW) add(t, "**");
    add(t, p->name);
    if (p->def && p->def[0]) { add(t, "="); add(t, p->def); }
    if ((p->flags & FSSIG_POSONLY) && (i + 1 == s->nparams || !(s->params[i + 1].flags & FSSIG_POSONLY)))
      add(t, ", /");
  }
  add(t, ")");
  if (s->kind != FSSIG_LAYER && s->kind != FSSIG_CLASS) { add(t, " -> "); add(t, s->returns); }
}

static void sig_markdown(buf *t, const fsSig *s) {
  add(t, "```python\n");
  sig_text(t, s);
  add(t, "\n```");
  const char *doc = fsSig_doc(s->name);
  if (doc) { add(t, "\n\n"); add(t, doc); }
}

/* The row `ns.member` is in torch's or Lightning's namespaces, or NULL. */
static const fsSig *ns_member(const char *ns, const char *member) {
  char dotted[256];
  const char *row = NULL;
  if (snprintf(dotted, sizeof dotted, "%s.%s", ns, member) >= (int)sizeof dotted) return NULL;
  fsSig_ns kind = fsSig_resolve(dotted, &row);
  return (kind == FSSIG_NS_ROW || kind == FSSIG_NS_LOOSE) && row ? fsSig_find(row) : NULL;
}

/* Asks the checker what the expression at span is (one check of d's text). */
static int query(const fsJ_server *S, const fsJ_doc *d, const char *text, size_t len, fs_loc span, fsC_query *q) {
  memset(q, 0, sizeof *q);
  q->span = span;
  fs_source *src;
  fs_node *ast;
  fs_diags diags;
  fsD_init(&diags);
  int syntax = fsJ_analyse(S->o, d->path, text, len, q, &src, &ast, &diags);
  fsA_free(ast);
  fsD_free(&diags);
  fsA_source_free(src);
  return !syntax && q->found;
}

/* The first line of a statement's text ("def step(x, y):"). */
static void header_line(buf *t, const fs_source *src, const fs_node *n) {
  size_t k = strcspn(src->text + n->loc.start, "\n");
  if (k > n->loc.end - n->loc.start) k = n->loc.end - n->loc.start;
  char *line = fsA_xrealloc(NULL, k + 1);
  memcpy(line, src->text + n->loc.start, k);
  line[k] = '\0';
  add(t, "```python\n");
  add(t, line);
  add(t, "\n```");
  free(line);
}

json_t *fsJ_hover(const fsJ_server *S, const fsJ_doc *d, uint32_t offset) {
  hit h = {0};
  find_at(d->src, d->ast, offset, &h);
  if (!h.node) return json_null();
  const fs_node *n = h.node;
  buf t = {0};
  fsC_query q;
  if (n->kind == FS_N_DEF || n->kind == FS_N_MODEL || n->kind == FS_N_CLASS) {
    header_line(&t, d->src, n);
  } else if (n->kind == FS_N_PARAM) {
    add(&t, "parameter `");
    add(&t, n->str);
    add(&t, "`");
  } else if (n->kind == FS_N_ATTR) {
    /* a member of a known type: its row; else what the checker knows of the value */
    const fsSig *sig = NULL;
    if (n->nkids && n->kids[0] && query(S, d, d->text, d->len, n->kids[0]->loc, &q)) {
      if (q.type[0]) sig = fsSig_member(q.type, n->str);
      else if (q.ns[0]) sig = ns_member(q.ns, n->str); /* torch.nn.Linear, through any import alias */
    }
    if (!sig && query(S, d, d->text, d->len, n->loc, &q) && q.builtin[0]) sig = fsSig_find(q.builtin);
    if (sig) sig_markdown(&t, sig);
    else if (q.found && q.about[0]) { add(&t, "`"); add(&t, n->str); add(&t, "`: "); add(&t, q.about); }
  } else if (query(S, d, d->text, d->len, n->loc, &q)) {
    const fsSig *sig = q.builtin[0] ? fsSig_find(q.builtin) : NULL;
    if (sig) sig_markdown(&t, sig);
    else if (q.about[0]) { add(&t, "`"); add(&t, n->str); add(&t, "`: "); add(&t, q.about); }
  } else if (fsSig_find(n->str)) { /* not reached by the check (a syntax error): the builtin anyway */
    sig_markdown(&t, fsSig_find(n->str));
  }
  if (!t.n) { free(t.s); return json_null(); }
  json_t *r = json_pack("{s:{s:s,s:s},s:o}", "contents", "kind", "markdown", "value", t.s, "range",
                        fsJ_range(d->src, h.span));
  free(t.s);
  return r ? r : json_null();
}

/* ---- the names a scope binds ---------------------------------------------- */

/* Child i of n, or NULL where the parser left it out. */
static const fs_node *kid(const fs_node *n, uint32_t i) { return n && i < n->nkids ? n->kids[i] : NULL; }

typedef struct binding { const char *name; size_t len; fs_loc loc; int kind; } binding;
typedef struct bindings { binding *a; size_t n, cap; const fs_source *src; } bindings;

static void bind_n(bindings *b, const char *name, size_t len, fs_loc loc, int kind) {
  if (!name) return;
  if (b->n == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 64;
    b->a = fsA_xrealloc(b->a, b->cap * sizeof *b->a);
  }
  b->a[b->n++] = (binding){name, len, loc, kind};
}

static void bind(bindings *b, const char *name, fs_loc loc, int kind) {
  if (name) bind_n(b, name, strlen(name), loc, kind);
}

static int is_named(const binding *x, const char *name) { return strlen(name) == x->len && !strncmp(x->name, name, x->len); }

static void bind_target(bindings *b, const fs_node *t) {
  if (!t) return;
  switch (t->kind) {
  case FS_N_NAME: bind(b, t->str, t->loc, K_VARIABLE); break;
  case FS_N_TUPLE: case FS_N_LIST: for (uint32_t i = 0; i < t->nkids; i++) bind_target(b, t->kids[i]); break;
  case FS_N_STARRED: bind_target(b, kid(t, 0)); break;
  default: break;
  }
}

/* `import a.b` binds a; `import a.b as c` and `from m import x as c` bind c. */
static void bind_import(bindings *b, const fs_node *s) {
  for (uint32_t i = 0; i < s->nkids; i++) {
    const fs_node *a = s->kids[i];
    if (!a || !a->str || !strcmp(a->str, "*")) continue;
    if (kid(a, 0)) bind(b, a->kids[0]->str, a->kids[0]->loc, K_MODULE);
    else if (s->kind == FS_N_IMPORT) {
      size_t k = strcspn(a->str, ".");
      bind_n(b, a->str, k, (fs_loc){a->loc.start, a->loc.start + (uint32_t)k}, K_MODULE);
    } else {
      bind(b, a->str, a->loc, K_VARIABLE);
    }
  }
}

/* The statements of one scope level: into compound statements, not into
 * the bodies of def, class and model, which are scopes of their own. */
static void bind_block(bindings *b, const fs_node *n) {
  if (!n) return;
  switch (n->kind) {
  case FS_N_BLOCK: for (uint32_t i = 0; i < n->nkids; i++) bind_block(b, n->kids[i]); break;
  case FS_N_ASSIGN:
    bind_target(b, kid(n, 0));
    for (uint32_t i = 2; i < n->nkids; i++) bind_target(b, n->kids[i]);
    break;
  case FS_N_AUGASSIGN: case FS_N_ANNASSIGN: bind_target(b, kid(n, 0)); break;
  case FS_N_FOR: bind_target(b, kid(n, 0)); bind_block(b, kid(n, 2)); bind_block(b, kid(n, 3)); break;
  case FS_N_WITH: bind_target(b, kid(n, 1)); bind_block(b, kid(n, 2)); break;
  case FS_N_IF: case FS_N_WHILE: bind_block(b, kid(n, 1)); bind_block(b, kid(n, 2)); break;
  case FS_N_TRY: for (uint32_t i = 0; i < n->nkids; i++) bind_block(b, n->kids[i]); break;
  case FS_N_EXCEPT: bind_target(b, kid(n, 2)); bind_block(b, kid(n, 1)); break;
  case FS_N_MATCH: for (uint32_t i = 1; i < n->nkids; i++) bind_block(b, kid(n->kids[i], 2)); break;
  case FS_N_DEF: bind(b, n->str, n->name_loc, K_FUNCTION); break;
  case FS_N_CLASS: case FS_N_MODEL: bind(b, n->str, n->name_loc, K_CLASS); break;
  case FS_N_IMPORT: case FS_N_IMPORTFROM: bind_import(b, n); break;
  case FS_N_REPEAT: bind_block(b, kid(n, 1)); break;
  case FS_N_RESIDUAL: bind_block(b, kid(n, 0)); break;
  default: break;
  }
}

/* A def's or model's own scope: its parameters, then its body. */
static void bind_scope(bindings *b, const fs_node *fn) {
  const fs_node *params = kid(fn, 0);
  for (uint32_t i = 0; params && i < params->nkids; i++)
    if (params->kids[i] && params->kids[i]->kind == FS_N_PARAM && params->kids[i]->str)
      bind(b, params->kids[i]->str, param_name_loc(b->src, params->kids[i]), K_VARIABLE);
  bind_block(b, kid(fn, 1));
}

/* The defs and models around off, outermost first. */
static size_t enclosing(const fs_node *n, uint32_t off, const fs_node **out, size_t n_out, size_t max) {
  if (!n) return n_out;
  if ((n->kind == FS_N_DEF || n->kind == FS_N_MODEL) && covers(n->loc, off) && n_out < max) out[n_out++] = n;
  for (uint32_t i = 0; i < n->nkids; i++)
    if (n->kids[i] && n->kids[i]->loc.start <= off && off <= n->kids[i]->loc.end)
      n_out = enclosing(n->kids[i], off, out, n_out, max);
  return n_out;
}

json_t *fsJ_definition(const fsJ_server *S, const fsJ_doc *d, uint32_t offset) {
  (void)S;
  hit h = {0};
  find_at(d->src, d->ast, offset, &h);
  if (!h.node || h.node->kind == FS_N_ATTR) return json_null();
  const fs_node *scopes[FS_MAX_DEPTH];
  size_t n = enclosing(d->ast, offset, scopes, 0, FS_MAX_DEPTH);
  /* a def's own name is bound in the scope around it */
  if (n && (h.node->kind == FS_N_DEF || h.node->kind == FS_N_MODEL) && scopes[n - 1] == h.node) n--;
  json_t *result = NULL;
  for (size_t s = n + 1; s-- > 0 && !result;) {
    bindings b = {.src = d->src};
    if (s == 0) bind_block(&b, d->ast);
    else bind_scope(&b, scopes[s - 1]);
    for (size_t i = 0; i < b.n && !result; i++)
      if (is_named(&b.a[i], h.node->str))
        result = json_pack("{s:s,s:o}", "uri", d->uri, "range", fsJ_range(d->src, b.a[i].loc));
    free(b.a);
  }
  return result ? result : json_null();
}

/* ---- completion ------------------------------------------------------------- */

static const char *const keywords[] = {
  "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
  "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "match",
  "case", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
  "model", "repeat", "residual", /* FabricScript's own */
};

static int ident(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c & 0x80);
}

/* The labels offered so far, a set (open addressing, cap a power of two at
 * least twice the candidates): a big script offers thousands of names. */
typedef struct label { const char *s; size_t len; } label;
typedef struct items { json_t *list; const char *prefix; size_t plen; label *seen; size_t cap; } items;

static void items_init(items *it, const char *prefix, size_t candidates) {
  size_t cap = 64;
  while (cap < 2 * candidates) cap *= 2;
  *it = (items){json_array(), prefix, strlen(prefix), fsA_xrealloc(NULL, cap * sizeof(label)), cap};
  memset(it->seen, 0, cap * sizeof(label));
}

/* Adds one completion once, when it starts with the prefix. */
static void item(items *it, const char *name, size_t len, int kind, const char *detail) {
  if (len < it->plen || strncmp(name, it->prefix, it->plen)) return;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)name[i]) * 16777619u;
  size_t j = h & (it->cap - 1);
  for (; it->seen[j].s; j = (j + 1) & (it->cap - 1))
    if (it->seen[j].len == len && !strncmp(it->seen[j].s, name, len)) return;
  it->seen[j] = (label){name, len};
  json_t *o = json_pack("{s:s%,s:i}", "label", name, len, "kind", kind);
  if (o && detail) json_object_set_new(o, "detail", json_string(detail));
  if (o) json_array_append_new(it->list, o);
}

static void sig_item(items *it, const char *name, const fsSig *s, int kind) {
  buf t = {0};
  sig_text(&t, s);
  item(it, name, strlen(name), kind, t.s);
  free(t.s);
}

/* The members of type (or the builtin module) after `receiver.`: the
 * checker says what the receiver is, in the text with the dot and the
 * partial name blanked out (so that an unfinished line still parses). */
static void members(const fsJ_server *S, const fsJ_doc *d, fs_loc receiver, uint32_t dot, uint32_t offset, items *it) {
  char *text = memcpy(fsA_xrealloc(NULL, d->len + 1), d->text, d->len + 1);
  memset(text + dot, ' ', offset - dot);
  fsC_query q;
  int known = query(S, d, text, d->len, receiver, &q);
  free(text);
  if (!known) return;
  size_t n;
  const fsSig *all = fsSig_all(&n);
  size_t blen = strlen(q.builtin);
  for (size_t i = 0; i < n; i++) {
    const char *dotp = strchr(all[i].name, '.');
    if (!dotp) continue;
    int mine = q.type[0] ? fsSig_member(q.type, dotp + 1) == &all[i]
                         : blen && (size_t)(dotp - all[i].name) == blen && !strncmp(all[i].name, q.builtin, blen);
    if (mine) sig_item(it, dotp + 1, &all[i], all[i].kind == FSSIG_ATTR ? K_PROPERTY : K_METHOD);
  }
}

json_t *fsJ_completion(const fsJ_server *S, const fsJ_doc *d, uint32_t offset) {
  uint32_t p = offset;
  while (p > 0 && ident(d->text[p - 1])) p--;
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%.*s", (int)(offset - p), d->text + p);
  items it;
  size_t nsig;
  const fsSig *all = fsSig_all(&nsig);
  if (p > 0 && d->text[p - 1] == '.') {
    items_init(&it, prefix, nsig);
    uint32_t r = p - 1;
    while (r > 0 && (ident(d->text[r - 1]) || d->text[r - 1] == '.')) r--;
    if (r < p - 1 && !(d->text[r] >= '0' && d->text[r] <= '9'))
      members(S, d, (fs_loc){r, p - 1}, p - 1, offset, &it);
  } else {
    bindings b = {.src = d->src};
    const fs_node *scopes[FS_MAX_DEPTH];
    size_t n = enclosing(d->ast, offset, scopes, 0, FS_MAX_DEPTH);
    while (n-- > 0) bind_scope(&b, scopes[n]);
    bind_block(&b, d->ast);
    items_init(&it, prefix, b.n + sizeof keywords / sizeof keywords[0] + nsig);
    for (size_t i = 0; i < b.n; i++)
      if (b.a[i].loc.start != p) /* not the word being typed itself */
        item(&it, b.a[i].name, b.a[i].len, b.a[i].kind, NULL);
    free(b.a);
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
      item(&it, keywords[i], strlen(keywords[i]), K_KEYWORD, NULL);
    for (size_t i = 0; i < nsig; i++)
      if (!strchr(all[i].name, '.'))
        sig_item(&it, all[i].name, &all[i],
                 all[i].kind == FSSIG_CLASS || all[i].kind == FSSIG_LAYER ? K_CLASS
                 : all[i].kind == FSSIG_MODULE ? K_MODULE : all[i].kind == FSSIG_FUNC && (all[i].flags & FSSIG_CONST) ? K_FIELD
                 : K_FUNCTION);
  }
  free(it.seen);
  return json_pack("{s:b,s:o}", "isIncomplete", 0, "items", it.list);
}
