/* lex.h -- state shared by the flex scanner (lexer.l) and the bison parser
 * (parser.y). The scanner returns raw tokens; fsL_lex turns them into the
 * parser's stream: NEWLINE at the end of each logical line, INDENT/DEDENT from
 * the indentation stack, contextual keywords (model, repeat, residual). */
#ifndef FS_LEX_H
#define FS_LEX_H

#include "ast.h"
#include "diag.h"

#define FS_MAX_INDENT_LEVELS 100

typedef struct fs_lexer {
  const fs_source *src;
  fs_arena *arena;      /* where the tree's nodes and strings go */
  fs_diags *diags;
  void *scanner;        /* yyscan_t */
  uint32_t pos;         /* offset in src->text of the next token */
  uint32_t read;        /* offset of the next byte flex reads (YY_INPUT) */
  int expr_mode;        /* an f-string field: no lines, no indentation */
  uint32_t range_end;
  int depth;            /* open brackets */
  int at_line_start;    /* next real token starts a logical line */
  int line_tokens;      /* tokens emitted on this logical line */
  int first_is_name;    /* the line so far is `NAME =` (for `h = repeat n:`) */
  int pending_dedents;
  int pending_token;    /* raw token held back behind INDENT/DEDENT, or 0 */
  fs_node *pending_node;
  fs_loc pending_loc;
  int indent[FS_MAX_INDENT_LEVELS];
  int nindent;
  int eof_done;
  int start_token;      /* first token handed to the parser (mode selector) */
  int nerrors;
  fs_loc last_error;    /* the parser does not repeat what the scanner said */
} fs_lexer;

typedef struct fs_parser {
  fs_lexer lex;
  fs_node *result;
  int nerrors;
  int depth_reported;
} fs_parser;

/* Parse a whole file; always returns a tree (possibly with FS_N_ERROR nodes).
 * Syntax errors go to diags; *nerrors counts them. */
fs_node *fsP_parse(const fs_source *src, fs_diags *diags, int *nerrors);
/* Parse the expression in src->text[start, end) (f-string fields) into the
 * enclosing tree's arena. */
fs_node *fsP_parse_expr(fs_arena *arena, const fs_source *src, uint32_t start, uint32_t end,
                        fs_diags *diags, int *nerrors);

#endif
