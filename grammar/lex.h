/* lex.h -- state shared by the flex scanner (lexer.l) and the bison parser
 * (parser.y). The scanner returns raw tokens; fsL_lex (lex_hot.h) turns them into the
 * parser's stream: NEWLINE at the end of each logical line, INDENT/DEDENT from
 * the indentation stack (tabs as Python counts them), soft keywords (match,
 * case, type, model, repeat, residual) and the bracket stack that gives
 * CPython's words for a bracket never closed or closed by the wrong one. */
#ifndef FS_LEX_H
#define FS_LEX_H

#include "ast.h"
#include "diag.h"

#define FS_MAX_INDENT_LEVELS 100
#define FS_MAX_BRACKETS 200 /* CPython's MAXLEVEL: "too many nested parentheses" */

typedef struct fs_lexer {
  const fs_source *src;
  fs_arena *arena;      /* where the tree's nodes and strings go */
  fs_diags *diags;
  void *scanner;        /* yyscan_t */
  char **flex_next;     /* the scanner's scan position and the byte held back there: */
  char *flex_held;      /* fast_lex (lex_hot.h) takes the common tokens from flex's buffer */
  uint32_t pos;         /* offset in src->text of the next token */
  uint32_t read;        /* offset of the next byte flex reads (YY_INPUT) */
  int expr_mode;        /* an f-string field: no lines, no indentation */
  uint32_t range_end;
  int depth;            /* open brackets */
  int at_line_start;    /* next real token starts a logical line */
  int line_tokens;      /* tokens emitted on this logical line */
  int first_is_name;    /* the line so far is `NAME =` (for `h = repeat n:`) */
  /* What makes the next token a held or skipped one, in one word that
   * fsL_lex tests at once (most tokens have none of them): */
  union {
    struct {
      uint16_t start_token;     /* first token handed to the parser (mode selector) */
      uint16_t pending_dedents;
      uint16_t pending_token;   /* raw token held back behind INDENT/DEDENT, or 0 */
      uint16_t skip_group;      /* 1 + the bracket depth to skip back to: the token an error
                                 * was found at opened a group, which recovery takes as one token */
    };
    uint64_t held;
  };
  fs_node *pending_node;
  fs_loc pending_loc;
  int indent[FS_MAX_INDENT_LEVELS];
  int alt_indent[FS_MAX_INDENT_LEVELS]; /* the same with tabs of width 1: a tab/space mix
                                         * the two disagree on is a TabError, as in CPython */
  int nindent;
  int last_tok;         /* the last token handed to the parser (the lookahead at an error) */
  fs_loc last_loc;
  uint32_t line_first;  /* offset of the first token of the current logical line */
  uint32_t bracket_at[FS_MAX_BRACKETS]; /* offsets of the open brackets, innermost last */
  int nbrackets;
  unsigned char match_body[FS_MAX_INDENT_LEVELS]; /* the block is a match statement's body */
  int line_match;       /* the current logical line starts with `match` */
  int last_line_match;  /* ... the previous one did */
  int eof_done;
  int nerrors;
  fs_loc last_error;    /* the parser does not repeat what the scanner said */
  void *field_scanner;  /* yyscan_t the f-string fields parsed under this parse share
                         * (fsP_parse_expr): a scanner made and freed per field cost
                         * four times its parse; freed when this parse ends */
} fs_lexer;

typedef struct fs_parser {
  fs_lexer lex;
  fs_node *result;
  int nerrors;
  int depth_reported;
  /* bison's message for the last error, held until the recovery that follows
   * it shows whether a targeted production has better words */
  char held[256];
  fs_loc held_loc;
  int held_tok;         /* the lookahead token when it was raised */
  int recovering;       /* from an error to the error production that ends its recovery:
                         * the lexer hands over a bracketed group opened meanwhile as
                         * one token, so `( error )` resumes at the matching closer */
} fs_parser;

/* Parse a whole file; always returns a tree (possibly with FS_N_ERROR nodes).
 * Syntax errors go to diags; *nerrors counts them. */
fs_node *fsP_parse(const fs_source *src, fs_diags *diags, int *nerrors);
/* Parse the expression in src->text[start, end) of the parse P (an
 * f-string's field) into P's tree's arena; its errors go to P's diags. */
fs_node *fsP_parse_expr(fs_parser *P, uint32_t start, uint32_t end, int *nerrors);

/* f-strings (PEP 701: a replacement field may hold any expression, quotes
 * of the enclosing string included). Given the offset just past '{' that
 * opens a field, returns the offset of the '}' that closes it, or of the
 * end of `text` if none does; *expr_end is where the expression ends (at
 * '=', '!' or ':' when there is one), *spec_at the offset after the spec's
 * ':' or 0. Quotes inside the expression start nested strings. */
uint32_t fsL_fstring_field(const char *text, uint32_t at, uint32_t end, uint32_t *expr_end, uint32_t *spec_at);
/* The length of the escape at text[i] == '\\' inside an f-string's literal
 * text: a backslash never escapes a brace, and \N{NAME}'s braces are no field. */
size_t fsL_fstring_escape(const char *text, size_t i, size_t end);
/* Decodes one escape sequence at text[i] == '\\' of a str (bytes: 0) literal
 * into out (at most 4 bytes); returns the bytes written and sets *used to
 * the source bytes consumed. */
size_t fsL_escape(const char *text, size_t i, size_t len, int bytes, char *out, size_t *used);

#endif
