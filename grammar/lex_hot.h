/* lex_hot.h -- the hot half of the token stream (lexer.l has the rest):
 * the common tokens scanned in flex's buffer (fast_lex), names and
 * keywords, brackets, and fsL_lex, the parser's yylex. It is a header so
 * that fsL_lex inlines into bison's loop (parser.y includes it): a call per
 * token, and the registers the scanner saved at each, cost a tenth of the
 * scanner's instructions. It reaches flex's scan position and held byte
 * through L->flex_next and L->flex_held (set where the scanner is made,
 * parse_range in lexer.l), since flex's own struct is private to lexer.c.
 * Everything else, and every token fast_lex leaves to flex, is
 * fsL_lex_rest's (lexer.l). */
#ifndef FS_LEX_HOT_H
#define FS_LEX_HOT_H

#include <stdint.h>
#include <string.h>

#include "parser.h"

enum { RAW_NEWLINE = 10000 }; /* a raw line end, before fsL_lex decides what it is */

/* lexer.l: */
int fsL_lex_rest(fs_parser *P, FSP_YYSTYPE *lval, fs_loc *lloc, int first);
int fsL_scan_number(fs_lexer *L, const char *text, size_t len, fs_loc loc, fs_node **out);
int fsL_bracket_mistake(fs_lexer *L, int t, fs_loc loc);

/* Python's hard keywords: the token of s[0, n), or 0 for a name. One
 * table for the scanner's names and for `type`'s test (contextual). */
static inline __attribute__((always_inline)) int keyword(const char *s, size_t n) {
#define KW(word, tok) if (n == sizeof word - 1 && memcmp(s, word, sizeof word - 1) == 0) return tok
  switch (s[0]) {
  case 'F': KW("False", FALSE); break;
  case 'N': KW("None", NONE); break;
  case 'T': KW("True", TRUE); break;
  case 'a': KW("and", AND); KW("as", AS); KW("assert", ASSERT); KW("async", ASYNC); KW("await", AWAIT); break;
  case 'b': KW("break", BREAK); break;
  case 'c': KW("class", CLASS); KW("continue", CONTINUE); break;
  case 'd': KW("def", DEF); KW("del", DEL); break;
  case 'e': KW("elif", ELIF); KW("else", ELSE); KW("except", EXCEPT); break;
  case 'f': KW("finally", FINALLY); KW("for", FOR); KW("from", FROM); break;
  case 'g': KW("global", GLOBAL); break;
  case 'i': KW("if", IF); KW("import", IMPORT); KW("in", IN); KW("is", IS); break;
  case 'l': KW("lambda", LAMBDA); break;
  case 'n': KW("nonlocal", NONLOCAL); KW("not", NOT); break;
  case 'o': KW("or", OR); break;
  case 'p': KW("pass", PASS); break;
  case 'r': KW("raise", RAISE); KW("return", RETURN); break;
  case 't': KW("try", TRY); break;
  case 'w': KW("while", WHILE); KW("with", WITH); break;
  case 'y': KW("yield", YIELD); break;
  default: break;
  }
#undef KW
  return 0;
}

/* An ASCII identifier: a keyword's token, else a NAME with its text. */
/* Copies s[0, n), n >= 1, to d: a name is short, and memcpy's call cost
 * more than the copy. Two fixed-size copies that may overlap read nothing
 * outside s[0, n). */
static inline __attribute__((always_inline)) void copy_short(char *d, const char *s, size_t n) {
  if (n >= 8 && n <= 16) {
    uint64_t a, b;
    memcpy(&a, s, 8);
    memcpy(&b, s + n - 8, 8);
    memcpy(d, &a, 8);
    memcpy(d + n - 8, &b, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    memcpy(&a, s, 4);
    memcpy(&b, s + n - 4, 4);
    memcpy(d, &a, 4);
    memcpy(d + n - 4, &b, 4);
  } else if (n < 4) {
    d[0] = s[0];
    d[n / 2] = s[n / 2];
    d[n - 1] = s[n - 1];
  } else {
    memcpy(d, s, n);
  }
}

static inline __attribute__((always_inline)) int name_or_keyword(fs_lexer *L, const char *text, size_t len, fs_loc loc, fs_node **out) {
  int k = keyword(text, len);
  if (k) return k;
  /* the node and its text in one allocation: a name is a third of the tokens */
  fs_node *n = fsA_alloc(L->arena, sizeof *n + len + 1);
  *n = (fs_node){.kind = FS_N_NAME, .loc = loc, .depth = 1, .str = (char *)(n + 1), .slen = (uint32_t)len};
  copy_short(n->str, text, len);
  n->str[len] = '\0';
  *out = n;
  return NAME;
}

/* Whether the NAME may be a soft keyword (contextual): where a statement
 * or the value of `NAME =` starts, and spelt with the first letter of one. */
static inline int may_be_soft_keyword(const fs_lexer *L, const fs_node *name) {
  char c = name->str[0];
  return (L->line_tokens == 0 || L->first_is_name == 2) && (c == 'm' || c == 'r' || c == 't' || c == 'c');
}

/* A token of a logical line (no NEWLINE, INDENT or DEDENT) handed to the
 * parser: fsL_lex's hot path knows it is one. Inlined, as emit: a call per
 * token was 2% of a big check's instructions. */
static inline __attribute__((always_inline)) int emit_in_line(fs_lexer *L, int tok, fs_loc loc) {
  L->last_tok = tok;
  L->last_loc = loc;
  /* first_is_name: 1 after a leading NAME, 2 after `NAME =`; 0 from the
   * third token on, so most tokens only test it. */
  if (L->line_tokens == 0) {
    L->first_is_name = tok == NAME ? 1 : 0;
    L->line_first = loc.start;
    L->line_match = tok == MATCH;
  } else if (L->first_is_name) {
    L->first_is_name = L->first_is_name == 1 && tok == ASSIGN ? 2 : 0;
  }
  L->line_tokens++;
  return tok;
}

/* Any token handed to the parser. */
static inline __attribute__((always_inline)) int emit(fs_lexer *L, int tok, fs_loc loc) {
  if (tok != NEWLINE && tok != INDENT && tok != DEDENT) return emit_in_line(L, tok, loc);
  L->last_tok = tok;
  L->last_loc = loc;
  if (tok == NEWLINE) {
    L->last_line_match = L->line_match;
    L->line_match = 0;
    L->at_line_start = 1;
    L->line_tokens = 0;
    L->first_is_name = 0;
  }
  return tok;
}

/* Opening and closing brackets; a mistake (too many, one unmatched or
 * closed by the wrong one) goes to fsL_bracket_mistake for CPython's words. */
static inline __attribute__((always_inline)) int bracket(fs_lexer *L, int t, fs_loc loc) {
  if (t == LPAREN || t == LBRACKET || t == LBRACE || t == WITH_LPAREN) {
    L->depth++;
    if (L->nbrackets == FS_MAX_BRACKETS) return fsL_bracket_mistake(L, t, loc);
    L->bracket_at[L->nbrackets++] = loc.start;
    return t;
  }
  if (L->depth > 0) L->depth--;
  if (L->nbrackets == 0) return fsL_bracket_mistake(L, t, loc);
  char open = L->src->text[L->bracket_at[L->nbrackets - 1]];
  if ((open == '(' ? RPAREN : open == '[' ? RBRACKET : RBRACE) != t) return fsL_bracket_mistake(L, t, loc);
  L->nbrackets--;
  return t;
}

/* What fast_lex makes of a byte: its class, and for an operator whether a
 * byte after it may make a longer token. */
enum {
  CH_OTHER,   /* flex decides */
  CH_NAME,    /* starts and continues a name */
  CH_DIGIT,   /* continues a name; starts a number */
  CH_SINGLE,  /* a token alone, whatever follows: ( ) [ ] { } , ; ~ */
  CH_OP,      /* an operator, or the first byte of a longer one */
  CH_NEWLINE,
};
static const unsigned char char_class[256] = {
  ['a' ... 'z'] = CH_NAME, ['A' ... 'Z'] = CH_NAME, ['_'] = CH_NAME, ['0' ... '9'] = CH_DIGIT,
  ['('] = CH_SINGLE, [')'] = CH_SINGLE, ['['] = CH_SINGLE, [']'] = CH_SINGLE, ['{'] = CH_SINGLE,
  ['}'] = CH_SINGLE, [','] = CH_SINGLE, [';'] = CH_SINGLE, ['~'] = CH_SINGLE,
  ['+'] = CH_OP, ['-'] = CH_OP, ['*'] = CH_OP, ['/'] = CH_OP, ['%'] = CH_OP, ['<'] = CH_OP,
  ['>'] = CH_OP, ['='] = CH_OP, [':'] = CH_OP, ['.'] = CH_OP, ['@'] = CH_OP, ['&'] = CH_OP,
  ['|'] = CH_OP, ['^'] = CH_OP, ['\n'] = CH_NEWLINE,
};
/* The token of each one-byte operator and bracket (api.token.raw in
 * parser.y: no character is its own token number). */
static const unsigned short char_token[256] = {
  [';'] = SEMI, [','] = COMMA, ['='] = ASSIGN, [':'] = COLON, ['.'] = DOT, ['*'] = STAR,
  ['('] = LPAREN, [')'] = RPAREN, ['@'] = AT, ['['] = LBRACKET, [']'] = RBRACKET, ['/'] = SLASH,
  ['|'] = VBAR, ['{'] = LBRACE, ['}'] = RBRACE, ['+'] = PLUS, ['-'] = MINUS, ['<'] = LESS,
  ['>'] = GREATER, ['^'] = CIRCUMFLEX, ['&'] = AMPER, ['%'] = PERCENT, ['~'] = TILDE,
};
/* The bytes after an operator that may continue it ("**=", "->", "..."),
 * and the NUL that may be the end of flex's buffer. */
static const unsigned char op_continues[256] = {
  ['='] = 1, ['*'] = 1, ['/'] = 1, ['<'] = 1, ['>'] = 1, ['.'] = 1, ['\0'] = 1,
};

/* The common tokens, scanned here in flex's buffer: flex spent some 60
 * instructions a token in its tables (the backing-up checks, a match of its
 * own for each run of blanks, the dispatch to the rule), this a third of
 * that. Returns the raw token as raw_lex would have, or -1 where flex must
 * decide: any byte this does not know to end the token (a NUL, which also
 * marks the end of flex's buffer; a non-ASCII byte or a quote after a name,
 * which may go on as a name or be a string's prefix; what may continue a
 * number or an operator; a '\r'). Flex keeps the byte after its last match
 * in yy_hold_char (a NUL, or after input() that byte, stands there in the
 * buffer) and puts it back when it next scans from yy_c_buf_p, so moving
 * both past a token is what its rule for that token would have done;
 * YY_USER_ACTION's offsets are kept as in every rule. Blanks before a '\r'
 * are left to flex: its blanks rule takes the '\r' with them, and the
 * newline's location starts after it. */
/* Moves flex's scan position and held byte past the token [p, q) whose first
 * byte is c (flex's buffer holds a NUL or c at p), as flex's rule for it would,
 * and sets its location. */
static inline __attribute__((always_inline)) void fast_took(fs_lexer *L, char *p, unsigned char c,
                                                            const unsigned char *q, fs_loc *lloc) {
  size_t len = (size_t)((const char *)q - p);
  *p = (char)c;
  *L->flex_next = (char *)q;
  *L->flex_held = (char)*q;
  *(char *)q = '\0';
  lloc->start = L->pos;
  lloc->end = L->pos += (uint32_t)len;
}

static inline __attribute__((always_inline)) int fast_lex(fs_lexer *L, FSP_YYSTYPE *lval, fs_loc *lloc) {
  char *p = *L->flex_next;
  if (!p) return -1;
  unsigned char c = (unsigned char)*L->flex_held;
  const unsigned char *q = (const unsigned char *)p + 1; /* p[0] holds the NUL or c */
  if (c == ' ') {
    while (*q == ' ') q++;
    if (*q == '\r' || *q == '\0') return -1;
    *p = ' ';
    L->pos += (uint32_t)((const char *)q - p);
    p = (char *)q;
    c = *q++;
    *L->flex_next = p;
    *L->flex_held = (char)c;
  }
  /* tests in the order of the tokens' frequency (names, then operators
   * and brackets): a jump table cost every token its indirect branch */
  int t;
  unsigned cls = char_class[c];
  if (cls == CH_NAME) {
    while (char_class[*q] == CH_NAME || char_class[*q] == CH_DIGIT) q++;
    if (*q >= 0x80 || *q == '\'' || *q == '"' || *q == '\0') return -1;
    t = NAME;
  } else if (cls == CH_SINGLE) {
    t = char_token[c];
  } else if (cls == CH_OP) {
    if (op_continues[*q] || (c == '.' && char_class[*q] == CH_DIGIT)) return -1;
    t = char_token[c];
  } else if (cls == CH_NEWLINE) {
    t = RAW_NEWLINE;
  } else if (cls == CH_DIGIT) {
    while (char_class[*q] == CH_DIGIT) q++;
    if (char_class[*q] == CH_NAME || *q == '.' || *q >= 0x80 || *q == '\0') return -1;
    t = INT;
  } else {
    return -1;
  }
  const char *text = p;
  size_t len = (size_t)((const char *)q - p);
  fast_took(L, p, c, q, lloc);
  if (t == NAME) return name_or_keyword(L, text, len, *lloc, &lval->NAME);
  if (t == INT) return fsL_scan_number(L, text, len, *lloc, &lval->NAME);
  return t;
}

/* Most tokens: a name, an operator or a bracket in the middle of a line,
 * the end of a line, as fast_lex scans them; lex_rest does the rest, and
 * all of it while a token is held back or a group is being skipped (which
 * the parser's error recovery may start: fsP_error). */
static inline __attribute__((always_inline)) int fsL_lex(FSP_YYSTYPE *lval, fs_loc *lloc, fs_parser *P) {
  fs_lexer *L = &P->lex;
  if (L->held) return fsL_lex_rest(P, lval, lloc, -1);
  for (;;) {
    int t = fast_lex(L, lval, lloc);
    if (t == RAW_NEWLINE) {
      if (L->depth > 0 || L->at_line_start) continue;
      return emit(L, NEWLINE, *lloc);
    }
    if (t < 0 || L->at_line_start || (t == NAME && may_be_soft_keyword(L, lval->NAME)))
      return fsL_lex_rest(P, lval, lloc, t);
    if (t == LPAREN || t == LBRACKET || t == LBRACE || t == RPAREN || t == RBRACKET || t == RBRACE) {
      if (P->recovering || (t == LPAREN && L->last_tok == WITH)) return fsL_lex_rest(P, lval, lloc, t);
      t = bracket(L, t, *lloc);
    }
    return emit_in_line(L, t, *lloc);
  }
}

#endif
