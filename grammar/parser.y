/* parser.y -- FabricScript grammar: a pure, reentrant bison parser with
 * byte-offset locations. Python's precedence levels, spelled out as rules
 * (no precedence declarations), so %expect 0 holds without hiding anything. */
%code requires {
#include "lex.h"
}

%code provides {
int fsL_lex(FSP_YYSTYPE *lval, fs_loc *lloc, fs_parser *P);
void fsP_error(fs_loc *loc, fs_parser *P, const char *msg);
}

%code {
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define YYLLOC_DEFAULT(Cur, Rhs, N)                        \
  do {                                                     \
    if (N) { (Cur).start = YYRHSLOC(Rhs, 1).start;         \
             (Cur).end = YYRHSLOC(Rhs, N).end; }           \
    else { (Cur).start = (Cur).end = YYRHSLOC(Rhs, 0).end; } \
  } while (0)

static fs_node *mk(fs_parser *P, fs_node_kind k, fs_loc loc, int n, ...);
static fs_node *mk_op(fs_parser *P, fs_node_kind k, fs_op op, fs_loc loc, int n, ...);
static fs_node *fstring(fs_parser *P, fs_node *raw);
static fs_node *concat_strings(fs_parser *P, fs_node *a, fs_node *b);
static fs_node *as_block(fs_parser *P, fs_node *stmt);
static fs_node *tuple_add(fs_parser *P, fs_node *items, fs_node *x, fs_loc loc);
static fs_node *tuple_trailing(fs_parser *P, fs_node *items, fs_loc loc);
static fs_node *tuple_close(fs_node *t);
static void check_target(fs_parser *P, const fs_node *t);
static fs_node *named(fs_parser *P, fs_node *block, fs_node *target);
#define fsP_yyerror fsP_error
#define fsP_yylex fsL_lex
}

%define api.prefix {fsP_yy}
%define api.pure full
%define api.location.type {fs_loc}
%define api.value.type union
%define parse.error verbose
%locations
%param {fs_parser *P}
%expect 0

%token END 0 "end of file"
%token START_FILE START_EXPR
%token <fs_node *> NAME "name" INT "integer" FLOAT "float" STRING "string" FSTRING "f-string"
%token NEWLINE "end of line" INDENT "indent" DEDENT "dedent"
%token DEF "def" RETURN "return" IF "if" ELIF "elif" ELSE "else" FOR "for" IN "in"
%token WITH "with" AS "as" AND "and" OR "or" NOT "not" TRUE "True" FALSE "False"
%token NONE "None" PASS "pass" BREAK "break" CONTINUE "continue" ASSERT "assert"
%token MODEL "model" REPEAT "repeat" RESIDUAL "residual"
%token POW "**" FDIV "//" EQ "==" NE "!=" LE "<=" GE ">="
%token ADDEQ "+=" SUBEQ "-=" MULEQ "*=" DIVEQ "/=" FDIVEQ "//=" MODEQ "%=" POWEQ "**="
%token LEXERROR "invalid token"

%type <fs_node *> stmts stmt simple_stmt small_stmt compound_stmt suite block
%type <fs_node *> if_tail params param_list param args arg_list arg
%type <fs_node *> testlist testlist_items test or_test and_test not_test comparison
%type <fs_node *> arith term factor power primary atom strings
%type <fs_node *> exprlist exprlist_items list_items dict_items subscript opt_test
%type <fs_op> augop compop

%%

start
  : START_FILE stmts       { P->result = $2; }
  | START_EXPR testlist    { P->result = tuple_close($2); }
  ;

stmts
  : %empty                 { $$ = fsA_new(P->lex.arena, FS_N_BLOCK, @$); }
  | stmts stmt             { $$ = $1; if ($2) fsA_push(P->lex.arena, $$, $2); $$->loc.end = @2.end; }
  | stmts NEWLINE          { $$ = $1; }
  ;

stmt
  : simple_stmt
  | compound_stmt
  | error NEWLINE          { $$ = fsA_new(P->lex.arena, FS_N_ERROR, @$); yyerrok; }
  ;

simple_stmt
  : small_stmt NEWLINE     { $$ = $1; }
  ;

small_stmt
  : testlist               { $$ = mk(P, FS_N_EXPR, @$, 1, tuple_close($1)); }
  | testlist '=' testlist  { check_target(P, $1);
                             $$ = mk(P, FS_N_ASSIGN, @$, 2, tuple_close($1), tuple_close($3)); }
  | testlist augop testlist { check_target(P, $1);
                             $$ = mk_op(P, FS_N_AUGASSIGN, $2, @$, 2, tuple_close($1), tuple_close($3)); }
  | PASS                   { $$ = fsA_new(P->lex.arena, FS_N_PASS, @$); }
  | BREAK                  { $$ = fsA_new(P->lex.arena, FS_N_BREAK, @$); }
  | CONTINUE               { $$ = fsA_new(P->lex.arena, FS_N_CONTINUE, @$); }
  | RETURN                 { $$ = mk(P, FS_N_RETURN, @$, 1, NULL); }
  | RETURN testlist        { $$ = mk(P, FS_N_RETURN, @$, 1, tuple_close($2)); }
  | ASSERT test            { $$ = mk(P, FS_N_ASSERT, @$, 2, $2, NULL); }
  | ASSERT test ',' test   { $$ = mk(P, FS_N_ASSERT, @$, 2, $2, $4); }
  ;

augop
  : ADDEQ { $$ = FS_OP_ADD; } | SUBEQ { $$ = FS_OP_SUB; } | MULEQ { $$ = FS_OP_MUL; }
  | DIVEQ { $$ = FS_OP_DIV; } | FDIVEQ { $$ = FS_OP_FDIV; } | MODEQ { $$ = FS_OP_MOD; }
  | POWEQ { $$ = FS_OP_POW; }
  ;

compound_stmt
  : IF test ':' suite if_tail          { $$ = mk(P, FS_N_IF, @$, 3, $2, $4, $5); }
  | FOR exprlist IN testlist ':' suite { check_target(P, $2);
                                         $$ = mk(P, FS_N_FOR, @$, 3, tuple_close($2), tuple_close($4), $6); }
  | WITH test ':' suite                { $$ = mk(P, FS_N_WITH, @$, 3, $2, NULL, $4); }
  | WITH test AS NAME ':' suite        { $$ = mk(P, FS_N_WITH, @$, 3, $2, $4, $6); }
  | DEF NAME '(' params ')' ':' suite  { $$ = mk(P, FS_N_DEF, @$, 2, $4, $7);
                                         $$->str = $2->str; $2->str = NULL; $$->name_loc = @2; }
  | MODEL NAME '(' params ')' ':' suite { $$ = mk(P, FS_N_MODEL, @$, 2, $4, $7);
                                         $$->str = $2->str; $2->str = NULL; $$->name_loc = @2; }
  | MODEL NAME ':' suite               { $$ = mk(P, FS_N_MODEL, @$, 2, fsA_new(P->lex.arena, FS_N_BLOCK, @2), $4);
                                         $$->str = $2->str; $2->str = NULL; $$->name_loc = @2; }
  | REPEAT test ':' suite              { $$ = mk(P, FS_N_REPEAT, @$, 2, $2, $4); }
  | testlist '=' REPEAT test ':' suite { $$ = named(P, mk(P, FS_N_REPEAT, @$, 2, $4, $6), tuple_close($1)); }
  | RESIDUAL ':' suite                 { $$ = mk(P, FS_N_RESIDUAL, @$, 1, $3); }
  | testlist '=' RESIDUAL ':' suite    { $$ = named(P, mk(P, FS_N_RESIDUAL, @$, 1, $5), tuple_close($1)); }
  ;

if_tail
  : %empty                             { $$ = NULL; }
  | ELSE ':' suite                     { $$ = $3; }
  | ELIF test ':' suite if_tail        { $$ = as_block(P, mk(P, FS_N_IF, @$, 3, $2, $4, $5)); }
  ;

suite
  : simple_stmt                        { $$ = as_block(P, $1); }
  | NEWLINE INDENT block DEDENT        { $$ = $3; }
  ;

block
  : stmt                               { $$ = as_block(P, $1); }
  | block stmt                         { $$ = $1; if ($2) fsA_push(P->lex.arena, $$, $2); $$->loc.end = @2.end; }
  ;

params
  : %empty                             { $$ = fsA_new(P->lex.arena, FS_N_BLOCK, @$); }
  | param_list
  | param_list ','
  ;

param_list
  : param                              { $$ = as_block(P, $1); }
  | param_list ',' param               { $$ = $1; fsA_push(P->lex.arena, $$, $3); $$->loc.end = @3.end; }
  ;

param
  : NAME                               { $$ = $1; $$->kind = FS_N_PARAM; }
  | NAME '=' test                      { $$ = $1; $$->kind = FS_N_PARAM; fsA_push(P->lex.arena, $$, $3); }
  ;

testlist
  : testlist_items
  | testlist_items ','                 { $$ = tuple_trailing(P, $1, @$); }
  ;

/* A lone item is itself; a TUPLE tagged with ival == 1 is still "open":
 * tuple_close closes it. */
testlist_items
  : test
  | testlist_items ',' test            { $$ = tuple_add(P, $1, $3, @$); }
  ;

exprlist
  : exprlist_items
  | exprlist_items ','                 { $$ = tuple_trailing(P, $1, @$); }
  ;

exprlist_items
  : arith
  | exprlist_items ',' arith           { $$ = tuple_add(P, $1, $3, @$); }
  ;

test
  : or_test
  | or_test IF or_test ELSE test       { $$ = mk(P, FS_N_COND, @$, 3, $3, $1, $5); }
  ;

or_test
  : and_test
  | or_test OR and_test                { $$ = mk_op(P, FS_N_BINARY, FS_OP_OR, @$, 2, $1, $3); }
  ;

and_test
  : not_test
  | and_test AND not_test              { $$ = mk_op(P, FS_N_BINARY, FS_OP_AND, @$, 2, $1, $3); }
  ;

not_test
  : comparison
  | NOT not_test                       { $$ = mk_op(P, FS_N_UNARY, FS_OP_NOT, @$, 1, $2); }
  ;

/* Comparisons do not chain (`a < b < c` is a syntax error), which keeps each
 * operand evaluated once without a hidden temporary. */
comparison
  : arith
  | arith compop arith                 { $$ = mk_op(P, FS_N_BINARY, $2, @$, 2, $1, $3); }
  ;

compop
  : EQ { $$ = FS_OP_EQ; } | NE { $$ = FS_OP_NE; } | '<' { $$ = FS_OP_LT; }
  | LE { $$ = FS_OP_LE; } | '>' { $$ = FS_OP_GT; } | GE { $$ = FS_OP_GE; }
  | IN { $$ = FS_OP_IN; } | NOT IN { $$ = FS_OP_NOT_IN; }
  ;

arith
  : term
  | arith '+' term                     { $$ = mk_op(P, FS_N_BINARY, FS_OP_ADD, @$, 2, $1, $3); }
  | arith '-' term                     { $$ = mk_op(P, FS_N_BINARY, FS_OP_SUB, @$, 2, $1, $3); }
  ;

term
  : factor
  | term '*' factor                    { $$ = mk_op(P, FS_N_BINARY, FS_OP_MUL, @$, 2, $1, $3); }
  | term '/' factor                    { $$ = mk_op(P, FS_N_BINARY, FS_OP_DIV, @$, 2, $1, $3); }
  | term FDIV factor                   { $$ = mk_op(P, FS_N_BINARY, FS_OP_FDIV, @$, 2, $1, $3); }
  | term '%' factor                    { $$ = mk_op(P, FS_N_BINARY, FS_OP_MOD, @$, 2, $1, $3); }
  ;

factor
  : power
  | '-' factor                         { $$ = mk_op(P, FS_N_UNARY, FS_OP_NEG, @$, 1, $2); }
  | '+' factor                         { $$ = mk_op(P, FS_N_UNARY, FS_OP_POS, @$, 1, $2); }
  ;

power
  : primary
  | primary POW factor                 { $$ = mk_op(P, FS_N_BINARY, FS_OP_POW, @$, 2, $1, $3); }
  ;

primary
  : atom
  | primary '(' args ')'               { $$ = $3; $$->kind = FS_N_CALL; $$->loc = @$;
                                         $$->kids[0] = $1; if ($1->depth + 1 > $$->depth) $$->depth = $1->depth + 1; }
  | primary '.' NAME                   { $$ = mk(P, FS_N_ATTR, @$, 1, $1); $$->str = $3->str; $3->str = NULL;
                                         $$->name_loc = @3; }
  | primary '[' subscript ']'          { $$ = mk(P, FS_N_INDEX, @$, 2, $1, $3); }
  ;

/* The callee slot is kids[0]; it is filled in by the `primary` rule. */
args
  : %empty                             { $$ = mk(P, FS_N_CALL, @$, 1, NULL); }
  | arg_list
  | arg_list ','
  ;

arg_list
  : arg                                { $$ = mk(P, FS_N_CALL, @$, 2, NULL, $1); }
  | arg_list ',' arg                   { $$ = $1; fsA_push(P->lex.arena, $$, $3); }
  ;

arg
  : test
  | NAME '=' test                      { $$ = mk(P, FS_N_KWARG, @$, 1, $3); $$->str = $1->str; $1->str = NULL;
                                         $$->name_loc = @1; }
  ;

subscript
  : test
  | opt_test ':' opt_test              { $$ = mk(P, FS_N_SLICE, @$, 3, $1, $3, NULL); }
  | opt_test ':' opt_test ':' opt_test { $$ = mk(P, FS_N_SLICE, @$, 3, $1, $3, $5); }
  ;

opt_test
  : %empty                             { $$ = NULL; }
  | test
  ;

atom
  : NAME
  | INT
  | FLOAT
  | strings
  | FSTRING                            { $$ = fstring(P, $1); }
  | TRUE                               { $$ = fsA_new(P->lex.arena, FS_N_TRUE, @$); }
  | FALSE                              { $$ = fsA_new(P->lex.arena, FS_N_FALSE, @$); }
  | NONE                               { $$ = fsA_new(P->lex.arena, FS_N_NONE, @$); }
  | '(' ')'                            { $$ = fsA_new(P->lex.arena, FS_N_TUPLE, @$); }
  | '(' testlist ')'                   { $$ = tuple_close($2); if ($$->kind == FS_N_TUPLE) $$->loc = @$; }
  | '[' ']'                            { $$ = fsA_new(P->lex.arena, FS_N_LIST, @$); }
  | '[' list_items ']'                 { $$ = $2; $$->loc = @$; }
  | '[' list_items ',' ']'             { $$ = $2; $$->loc = @$; }
  | '{' '}'                            { $$ = fsA_new(P->lex.arena, FS_N_DICT, @$); }
  | '{' dict_items '}'                 { $$ = $2; $$->loc = @$; }
  | '{' dict_items ',' '}'             { $$ = $2; $$->loc = @$; }
  ;

strings
  : STRING
  | strings STRING                     { $$ = concat_strings(P, $1, $2); $$->loc.end = @2.end; }
  ;

list_items
  : test                               { $$ = mk(P, FS_N_LIST, @$, 1, $1); }
  | list_items ',' test                { $$ = $1; fsA_push(P->lex.arena, $$, $3); }
  ;

dict_items
  : test ':' test                      { $$ = mk(P, FS_N_DICT, @$, 2, $1, $3); }
  | dict_items ',' test ':' test       { $$ = $1; fsA_push(P->lex.arena, $$, $3); fsA_push(P->lex.arena, $$, $5); }
  ;

%%

static void too_deep(fs_parser *P, fs_loc loc) {
  if (P->depth_reported) return;
  P->depth_reported = 1;
  P->nerrors++;
  fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", P->lex.src, loc,
          "expression nested too deeply (the limit is %d levels)", FS_MAX_DEPTH);
}

static fs_node *mk_va(fs_parser *P, fs_node_kind k, fs_op op, fs_loc loc, int n, va_list ap) {
  fs_node *x = fsA_new(P->lex.arena, k, loc);
  x->op = (uint8_t)op;
  fsA_reserve(P->lex.arena, x, (uint32_t)n);
  for (int i = 0; i < n; i++) fsA_push(P->lex.arena, x, va_arg(ap, fs_node *));
  if (x->depth > FS_MAX_DEPTH) too_deep(P, loc);
  return x;
}

static fs_node *mk(fs_parser *P, fs_node_kind k, fs_loc loc, int n, ...) {
  va_list ap;
  va_start(ap, n);
  fs_node *x = mk_va(P, k, FS_OP_NONE, loc, n, ap);
  va_end(ap);
  return x;
}

static fs_node *mk_op(fs_parser *P, fs_node_kind k, fs_op op, fs_loc loc, int n, ...) {
  va_list ap;
  va_start(ap, n);
  fs_node *x = mk_va(P, k, op, loc, n, ap);
  va_end(ap);
  return x;
}

static fs_node *as_block(fs_parser *P, fs_node *stmt) {
  return mk(P, FS_N_BLOCK, stmt ? stmt->loc : (fs_loc){0, 0}, 1, stmt);
}

/* Items make no node until the first comma (most lists are one item):
 * `a, b` is an open TUPLE, later items join it. */
static int tuple_open(const fs_node *t) { return t->kind == FS_N_TUPLE && t->ival == 1; }

static fs_node *tuple_add(fs_parser *P, fs_node *items, fs_node *x, fs_loc loc) {
  if (!tuple_open(items)) {
    fs_node *t = mk(P, FS_N_TUPLE, loc, 2, items, x);
    t->ival = 1;
    return t;
  }
  fsA_push(P->lex.arena, items, x);
  items->loc.end = loc.end;
  return items;
}

/* `a,` is a tuple of one. */
static fs_node *tuple_trailing(fs_parser *P, fs_node *items, fs_loc loc) {
  fs_node *t = tuple_open(items) ? items : mk(P, FS_N_TUPLE, loc, 1, items);
  t->ival = 0;
  t->loc = loc;
  return t;
}

static fs_node *tuple_close(fs_node *t) {
  if (t && tuple_open(t)) t->ival = 0;
  return t;
}

static void check_target(fs_parser *P, const fs_node *t) {
  switch (t->kind) {
  case FS_N_NAME: case FS_N_ATTR: case FS_N_INDEX: return;
  case FS_N_TUPLE: case FS_N_LIST:
    for (uint32_t i = 0; i < t->nkids; i++) check_target(P, t->kids[i]);
    return;
  default:
    P->nerrors++;
    fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", P->lex.src, t->loc,
            "cannot assign to %s", fsA_kind_name(t->kind));
  }
}

/* `h = repeat n:` names the block; only a plain name can. */
static fs_node *named(fs_parser *P, fs_node *block, fs_node *target) {
  if (target->kind == FS_N_NAME) {
    block->str = target->str;
    target->str = NULL;
    block->name_loc = target->loc;
  } else {
    P->nerrors++;
    fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", P->lex.src, target->loc,
            "only a name can be bound to a `%s` block", block->kind == FS_N_REPEAT ? "repeat" : "residual");
  }
  return block;
}

static fs_node *concat_strings(fs_parser *P, fs_node *a, fs_node *b) {
  char *s = fsA_alloc(P->lex.arena, a->slen + b->slen + 1);
  memcpy(s, a->str, a->slen);
  memcpy(s + a->slen, b->str, b->slen + 1);
  a->str = s;
  a->slen += b->slen;
  return a;
}

static fs_node *str_piece(fs_parser *P, const char *text, size_t len, fs_loc loc) {
  fs_node *x = fsA_new(P->lex.arena, FS_N_STR, loc);
  x->str = fsA_strndup(P->lex.arena, text, len);
  x->slen = len;
  return x;
}

/* The scanner hands over an f-string as FS_N_FSTR with the decoded literal
 * text in str and the raw body's offset in ival; split it into literal pieces
 * and fields here, parsing each field's expression from the source text. */
static fs_node *fstring(fs_parser *P, fs_node *raw) {
  const fs_source *src = P->lex.src;
  fs_node *out = fsA_new(P->lex.arena, FS_N_FSTR, raw->loc);
  uint32_t body = (uint32_t)raw->ival, end = raw->loc.end - 1; /* before the quote */
  const char *t = src->text;
  char *lit = fsA_xrealloc(NULL, end - body + 1);
  size_t nlit = 0;
  uint32_t lit_start = body;
  for (uint32_t i = body; i < end;) {
    char c = t[i];
    if ((c == '{' || c == '}') && i + 1 < end && t[i + 1] == c) { lit[nlit++] = c; i += 2; continue; }
    if (c == '}') {
      P->nerrors++;
      fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", src, (fs_loc){i, i + 1},
              "f-string: single '}' is not allowed");
      i++;
      continue;
    }
    if (c == '\\' && i + 1 < end) {
      char e = t[i + 1];
      lit[nlit++] = e == 'n' ? '\n' : e == 't' ? '\t' : e;
      i += 2;
      continue;
    }
    if (c != '{') { lit[nlit++] = c; i++; continue; }
    if (nlit) { fsA_push(P->lex.arena, out, str_piece(P, lit, nlit, (fs_loc){lit_start, i})); nlit = 0; }
    /* Find the field's end: the matching '}' outside brackets and quotes, and
     * the ':' that starts its format spec. */
    uint32_t j = i + 1, colon = 0;
    int nest = 0;
    char quote = 0;
    for (; j < end; j++) {
      char d = t[j];
      if (quote) { if (d == quote) quote = 0; continue; }
      if (d == '"' || d == '\'') quote = d;
      else if (d == '(' || d == '[' || d == '{') nest++;
      else if ((d == ')' || d == ']') && nest) nest--;
      else if (d == '}') { if (!nest) break; nest--; }
      else if (d == ':' && !nest && !colon) colon = j;
    }
    if (j >= end) {
      P->nerrors++;
      fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", src, (fs_loc){i, end},
              "f-string: expecting '}'");
      break;
    }
    uint32_t expr_end = colon ? colon : j;
    fs_node *field = fsA_new(P->lex.arena, FS_N_FMT, (fs_loc){i, j + 1});
    int errs = 0;
    fs_node *e = fsP_parse_expr(P->lex.arena, src, i + 1, expr_end, P->lex.diags, &errs);
    P->nerrors += errs;
    fsA_push(P->lex.arena, field, e);
    if (colon) {
      fs_node *spec = str_piece(P, t + colon + 1, j - colon - 1, (fs_loc){colon + 1, j});
      field->str = spec->str; field->slen = spec->slen;
    }
    fsA_push(P->lex.arena, out, field);
    i = j + 1;
    lit_start = i;
  }
  if (nlit) fsA_push(P->lex.arena, out, str_piece(P, lit, nlit, (fs_loc){lit_start, end}));
  free(lit);
  if (out->depth > FS_MAX_DEPTH) too_deep(P, out->loc);
  return out;
}

void fsP_error(fs_loc *loc, fs_parser *P, const char *msg) {
  if (P->lex.nerrors && loc->start == P->lex.last_error.start && loc->end == P->lex.last_error.end) return;
  P->nerrors++;
  if (strcmp(msg, "memory exhausted") == 0) {
    fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", P->lex.src, *loc,
            "expression nested too deeply for the parser");
    return;
  }
  /* Bison says "syntax error, unexpected X, expecting Y"; keep its substance. */
  const char *m = strncmp(msg, "syntax error, ", 14) == 0 ? msg + 14 : msg;
  fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", P->lex.src, *loc, "invalid syntax: %s", m);
}
