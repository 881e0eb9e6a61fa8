/* lsp_int.h -- the language server's shared state, private to lsp.c (the
 * protocol: framing, JSON-RPC, documents, diagnostics, code actions) and
 * lsp_lang.c (hover, completion, definition). Invariant: a document's src,
 * ast and diags always describe its current text (they are rebuilt on every
 * change before anything else reads them), so positions computed from src
 * are positions in the editor's text. */
#ifndef FS_LSP_INT_H
#define FS_LSP_INT_H

#include <jansson.h>
#include <stdio.h>

#include "ast.h"
#include "check.h"
#include "diag.h"
#include "lsp.h"

typedef struct fsJ_doc {
  char *uri;
  char *path;       /* the file name the checker sees: a .py path is checked as Python */
  char *text; size_t len;
  json_int_t version;
  fs_source *src;   /* text, as last analysed */
  fs_node *ast;     /* its tree; after a syntax error, the parser's recovery */
  int syntax_errors;
  fs_diags diags;
} fsJ_doc;

typedef struct fsJ_server {
  FILE *in, *out;
  const fsC_options *o;
  fsJ_doc **docs; size_t ndocs, capdocs;
  int initialized, shutdown;
} fsJ_server;

/* Parses text as the document at path would be and, when it parses, checks
 * it with o (query may be set). *ast and the returned source are the
 * caller's; diags collects both kinds. Returns the syntax errors' count. */
int fsJ_analyse(const fsC_options *o, const char *path, const char *text, size_t len, fsC_query *query,
                fs_source **src, fs_node **ast, fs_diags *diags);

/* Byte offset of an LSP position (0-based line, UTF-16 code units) in
 * text; past a line's end is its end, past the last line the text's end. */
uint32_t fsJ_offset(const char *text, size_t len, json_int_t line, json_int_t character);
/* {"line", "character"} of a byte offset of src, in UTF-16 code units. */
json_t *fsJ_position(const fs_source *src, uint32_t offset);
/* {"start", "end"} of a span of src. */
json_t *fsJ_range(const fs_source *src, fs_loc loc);

/* textDocument/hover, completion, definition at offset of d: the result
 * (JSON null when there is nothing to say). */
json_t *fsJ_hover(const fsJ_server *S, const fsJ_doc *d, uint32_t offset);
json_t *fsJ_completion(const fsJ_server *S, const fsJ_doc *d, uint32_t offset);
json_t *fsJ_definition(const fsJ_server *S, const fsJ_doc *d, uint32_t offset);

#endif
