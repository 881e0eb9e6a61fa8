/* parser.y -- FabricScript's grammar, which is Python 3.12's plus `model`
 * blocks, `repeat` and `residual`: a pure, reentrant bison parser with
 * byte-offset locations. Precedence levels are spelled out as rules, but
 * for the arithmetic and bitwise operators' (see or_expr): there %left
 * declarations resolve the conflicts of one ambiguous nonterminal, and
 * %expect 0 holds for every other state.
 * What an LALR(1) grammar cannot decide (assignment targets, parameter and
 * argument order, starred expressions) is parsed broadly and checked in the
 * actions, with CPython's words; tokens come from fsL_lex (lex_hot.h, lexer.l). */
%code requires {
#include "lex.h"
}

%code provides {
void fsP_error(fs_loc *loc, fs_parser *P, const char *msg);
void fsP_flush_held(fs_parser *P);
}

%code {
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lex_hot.h" /* fsL_lex, inlined into the parser's loop */

/* Runs at every reduction: one end for an empty rule and any other (its
 * last symbol's end; an empty rule's is the symbol before it), and no
 * branch but the start's. */
#define YYLLOC_DEFAULT(Cur, Rhs, N)                            \
  do {                                                         \
    (Cur).end = YYRHSLOC(Rhs, N).end;                          \
    (Cur).start = (N) ? YYRHSLOC(Rhs, 1).start : (Cur).end;    \
  } while (0)

static inline fs_node *mk_kids(fs_parser *P, fs_node_kind k, fs_op op, fs_loc loc, uint32_t n, fs_node *const *kids);
/* A node of n kids (the arguments after n), as an array: through a va_list
 * a node cost twice the instructions. */
#define mk(P, k, loc, n, ...) mk_kids((P), (k), FS_OP_NONE, (loc), (n), (fs_node *const[]){__VA_ARGS__})
#define mk_op(P, k, op, loc, n, ...) mk_kids((P), (k), (op), (loc), (n), (fs_node *const[]){__VA_ARGS__})
static fs_node *await_pow(fs_parser *P, fs_node *operand, fs_node *exponent, fs_loc loc, fs_loc operand_loc);
static fs_node *fstring(fs_parser *P, fs_node *raw);
static fs_node *string_more(fs_parser *P, fs_node *list, fs_node *s);
static fs_node *strings_done(fs_parser *P, fs_node *list);
static fs_node *as_block(fs_parser *P, fs_node *stmt);
static fs_node *suite_of(fs_parser *P, fs_node *line);
static void push_stmt(fs_parser *P, fs_node *block, fs_node *s);
static void stray_block(fs_parser *P, fs_node *into, fs_node *block, fs_loc indent);
static fs_node *stmt_line(fs_parser *P, fs_node *line, fs_node *s);
static fs_node *tuple_add(fs_parser *P, fs_node *items, fs_node *x, fs_loc loc);
static fs_node *tuple_trailing(fs_parser *P, fs_node *items, fs_loc loc);
static fs_node *tuple_close(fs_node *t);
static void seq_extend(fs_parser *P, fs_node *t, fs_node *items);
static void set_kid(fs_node *x, uint32_t i, fs_node *kid);
static fs_node *as_seq(fs_parser *P, fs_node *items, fs_node_kind kind, fs_loc loc);
static fs_node *expression(fs_parser *P, fs_node *x);
static void check_target(fs_parser *P, const fs_node *t);
static void check_del(fs_parser *P, const fs_node *t);
static fs_node *named(fs_parser *P, fs_node *block, fs_node *target);
static fs_node *compare(fs_parser *P, fs_node *chain, fs_op op, fs_node *x, fs_loc loc);
static fs_node *assignment(fs_parser *P, fs_node *target, fs_node *value, fs_loc loc);
static fs_node *chain_assign(fs_parser *P, fs_node *assign, fs_node *value, fs_loc loc);
static fs_node *annassign(fs_parser *P, fs_node *target, fs_node *annotation, fs_node *value, fs_loc loc);
static fs_node *augassign(fs_parser *P, fs_op op, fs_node *target, fs_node *value, fs_loc loc);
static fs_node *param(fs_parser *P, fs_node *name, fs_param_kind kind, fs_node *annotation, fs_node *dflt, fs_loc loc);
static fs_node *params_done(fs_parser *P, fs_node *params);
static fs_node *call_done(fs_parser *P, fs_node *call);
static fs_node *comp(fs_parser *P, fs_comp kind, fs_node *elt, fs_node *value, fs_node *clauses, fs_loc loc);
static fs_node *def(fs_parser *P, fs_node *name, fs_node *tparams, fs_node *params, fs_node *ret, fs_node *body, fs_loc loc);
static fs_node *decorate(fs_parser *P, fs_node *decorators, fs_node *defn);
static fs_node *with_items(fs_parser *P, fs_node *items, fs_node *body, fs_loc loc);
static fs_node *dotted(fs_parser *P, fs_node *a, fs_node *b);
static fs_node *steal_name(fs_node *into, fs_node *name);
static fs_node *name_node(fs_parser *P, fs_node *name, fs_node_kind k, fs_loc loc, fs_node *kid);
static void expected_colon(fs_parser *P, fs_loc err);
static void syntax_error(fs_parser *P, fs_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* api.token.raw: the scanner's token numbers are bison's symbol numbers, so
 * the parser does not translate each token through a table (YYTRANSLATE, 8
 * instructions a token); it rules out character literals as tokens, so ')'
 * is RPAREN, spelt "')'" in messages as the literal was. Bison's own
 * yytnamerr keeps the double quotes of an alias holding a quote or a comma;
 * this one strips every alias's. */
#define yytnamerr token_name
#define yystpcpy copy_to_end /* bison's would go unused */
static char *copy_to_end(char *out, const char *s) {
  while ((*out = *s++)) out++;
  return out;
}
static ptrdiff_t token_name(char *out, const char *name) {
  ptrdiff_t n = 0;
  if (*name != '"') return out ? copy_to_end(out, name) - out : (ptrdiff_t)strlen(name);
  for (const char *p = name + 1; *p && *p != '"'; p++) {
    if (*p == '\\' && p[1]) p++;
    if (out) out[n] = *p;
    n++;
  }
  if (out) out[n] = '\0';
  return n;
}
#define fsP_yyerror fsP_error
#define fsP_yylex fsL_lex
#define NEW(k, loc) fsA_new(P->lex.arena, (k), (loc))
#define PUSH(parent, kid) fsA_push(P->lex.arena, (parent), (kid))
}

%define api.prefix {fsP_yy}
%define api.token.raw
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
%token CLASS "class" DEL "del" EXCEPT "except" FINALLY "finally" FROM "from" GLOBAL "global"
%token IMPORT "import" IS "is" LAMBDA "lambda" NONLOCAL "nonlocal" RAISE "raise" TRY "try"
%token WHILE "while" YIELD "yield" ASYNC "async" AWAIT "await"
%token MODEL "model" REPEAT "repeat" RESIDUAL "residual" MATCH "match" CASE "case" TYPE "type"
%token POW "**" FDIV "//" EQ "==" NE "!=" LE "<=" GE ">=" LSHIFT "<<" RSHIFT ">>"
%token ARROW "->" WALRUS ":=" ELLIPSIS "..." WITH_LPAREN "("
%token ADDEQ "+=" SUBEQ "-=" MULEQ "*=" DIVEQ "/=" FDIVEQ "//=" MODEQ "%=" POWEQ "**="
%token MATMULEQ "@=" ANDEQ "&=" OREQ "|=" XOREQ "^=" LSHIFTEQ "<<=" RSHIFTEQ ">>="
%token LEXERROR "invalid token"

/* The one-byte tokens, spelt as character literals were, in the order
 * "expecting ..." messages list them (api.token.raw: see token_name). */
%token SEMI "';'" COMMA "','" ASSIGN "'='" COLON "':'" DOT "'.'" STAR "'*'" LPAREN "'('" RPAREN "')'"
%token AT "'@'" LBRACKET "'['" RBRACKET "']'" SLASH "'/'" VBAR "'|'" LBRACE "'{'" RBRACE "'}'" PLUS "'+'"
%token MINUS "'-'" LESS "'<'" GREATER "'>'" CIRCUMFLEX "'^'" AMPER "'&'" PERCENT "'%'" TILDE "'~'"

/* Only or_expr's operators (see there); lowest first. */
%left VBAR
%left CIRCUMFLEX
%left AMPER
%left LSHIFT RSHIFT
%left PLUS MINUS
%left STAR SLASH FDIV PERCENT AT
%precedence UNARY
%precedence POW

%type <fs_node *> stmts stmt simple_stmt small_stmts small_stmt assign rhs compound_stmt
%type <fs_node *> suite block if_tail else_opt finally_opt handlers handler
%type <fs_node *> with_stmt with_list with_parens with_item for_stmt funcdef parameters classdef decorators decorator
%type <fs_node *> params param_list mparam typedargs tparams tparam lparams_opt lparams lparam
%type <fs_node *> ret_opt class_args_opt type_params_opt type_params type_param
%type <fs_node *> dotted_name dotted_as_names dotted_as_name import_targets import_as_names import_as_name
%type <fs_node *> names match_stmt subject subject_items cases case_block guard_opt
%type <fs_node *> patterns pattern_seq pat_items mstar_pattern pattern or_pattern closed_pattern
%type <fs_node *> attr_chain literal_pattern signed_number cls_args cls_arg map_items map_item
%type <fs_node *> star_testlist star_items star_item targetlist target_items target_item
%type <fs_node *> namedexpr_test test test_op lambdef or_test and_test not_test comp_chain
%type <fs_node *> or_expr not_op and_op or_op primary
%type <fs_node *> star_expr strings string_list string yield_expr field_expr
%type <fs_node *> args arg_list arg subscripts subscript_items subscript opt_test
%type <fs_node *> seq_items dict_items dict_item comp_clauses comp_for
%type <int> dots
%type <fs_op> augop compop

%%
start
  : START_FILE stmts       { P->result = $2; }
  | START_EXPR field_expr  { P->result = $2; }
  ;

field_expr
  : star_testlist          { $$ = expression(P, tuple_close($1)); }
  | yield_expr
  ;

stmts
  : %empty                 { $$ = NEW(FS_N_BLOCK, @$); }
  | stmts stmt             { $$ = $1; push_stmt(P, $$, $2); $$->loc.end = @2.end; }
  | stmts NEWLINE          { $$ = $1; }
  | stmts INDENT block DEDENT { $$ = $1; stray_block(P, $$, $3, @2); }
  ;

/* simple_stmt's forms spelt out: a line of a block goes to stmt in one
 * reduction (simple_stmt is a one-line suite's). */
stmt
  : small_stmt NEWLINE
  | small_stmt SEMI NEWLINE
  | small_stmts NEWLINE
  | small_stmts SEMI NEWLINE
  | compound_stmt
  | error NEWLINE          { fsP_flush_held(P); $$ = NEW(FS_N_ERROR, @$); yyerrok; }
  ;

/* `a; b` is a line of statements: a BLOCK with op 1 that push_stmt splices. */
simple_stmt
  : small_stmt NEWLINE
  | small_stmt SEMI NEWLINE
  | small_stmts NEWLINE
  | small_stmts SEMI NEWLINE
  ;

/* Two statements or more: a lone one, most lines, is a small_stmt without a
 * reduction of its own. */
small_stmts
  : small_stmt SEMI small_stmt   { $$ = stmt_line(P, $1, $3); }
  | small_stmts SEMI small_stmt  { $$ = stmt_line(P, $1, $3); }
  ;

small_stmt
  : star_testlist                  { $$ = mk(P, FS_N_EXPR, @$, 1, expression(P, tuple_close($1))); }
  | yield_expr                     { $$ = mk(P, FS_N_EXPR, @$, 1, $1); }
  | star_testlist COLON test         { $$ = annassign(P, $1, $3, NULL, @$); }
  | star_testlist COLON test ASSIGN rhs { $$ = annassign(P, $1, $3, $5, @$); }
  | star_testlist augop rhs        { $$ = augassign(P, $2, $1, $3, @$); }
  | star_testlist ASSIGN rhs          { $$ = assignment(P, $1, $3, @$); }
  | assign ASSIGN rhs                 { $$ = chain_assign(P, $1, $3, @$); }
  | DEL targetlist           { check_del(P, $2); $$ = mk(P, FS_N_DEL, @$, 1, tuple_close($2));
                               if ($2->kind == FS_N_TUPLE && $2->loc.start == @2.start && $2->loc.end == @2.end) {
                                 $$->kids = $2->kids; $$->nkids = $2->nkids; $$->kids_cap = $2->kids_cap; } }
  | PASS                     { $$ = NEW(FS_N_PASS, @$); }
  | BREAK                    { $$ = NEW(FS_N_BREAK, @$); }
  | CONTINUE                 { $$ = NEW(FS_N_CONTINUE, @$); }
  | RETURN                   { $$ = mk(P, FS_N_RETURN, @$, 1, NULL); }
  | RETURN star_testlist     { $$ = mk(P, FS_N_RETURN, @$, 1, expression(P, tuple_close($2))); }
  | RAISE                    { $$ = mk(P, FS_N_RAISE, @$, 2, NULL, NULL); }
  | RAISE test               { $$ = mk(P, FS_N_RAISE, @$, 2, $2, NULL); }
  | RAISE test FROM test     { $$ = mk(P, FS_N_RAISE, @$, 2, $2, $4); }
  | GLOBAL names             { $$ = $2; $$->kind = FS_N_GLOBAL; $$->loc = @$; }
  | NONLOCAL names           { $$ = $2; $$->kind = FS_N_NONLOCAL; $$->loc = @$; }
  | ASSERT test              { $$ = mk(P, FS_N_ASSERT, @$, 2, $2, NULL); }
  | ASSERT test COMMA test     { $$ = mk(P, FS_N_ASSERT, @$, 2, $2, $4); }
  | IMPORT dotted_as_names   { $$ = $2; $$->loc = @$; }
  | FROM dotted_name IMPORT import_targets      { $$ = $4; $$->loc = @$; steal_name($$, $2); }
  | FROM dots dotted_name IMPORT import_targets { $$ = $5; $$->loc = @$; steal_name($$, $3);
                                                  $$->op = (uint8_t)($2 > 255 ? 255 : $2); }
  | FROM dots IMPORT import_targets             { $$ = $4; $$->loc = @$; $$->op = (uint8_t)($2 > 255 ? 255 : $2); }
  | TYPE NAME type_params_opt ASSIGN test          { $$ = mk(P, FS_N_TYPEALIAS, @$, 3, $2, $3, $5); }
  ;

/* An assignment with another `=` after it (`a = b = v`). small_stmt spells
 * out the last one's forms, so that a plain assignment reduces once. */
assign
  : star_testlist ASSIGN rhs          { $$ = assignment(P, $1, $3, @$); }
  | assign ASSIGN rhs                 { $$ = chain_assign(P, $1, $3, @$); }
  ;

rhs
  : yield_expr
  | star_testlist                  { $$ = expression(P, tuple_close($1)); }
  ;

augop
  : ADDEQ { $$ = FS_OP_ADD; } | SUBEQ { $$ = FS_OP_SUB; } | MULEQ { $$ = FS_OP_MUL; }
  | DIVEQ { $$ = FS_OP_DIV; } | FDIVEQ { $$ = FS_OP_FDIV; } | MODEQ { $$ = FS_OP_MOD; }
  | POWEQ { $$ = FS_OP_POW; } | MATMULEQ { $$ = FS_OP_MATMUL; } | ANDEQ { $$ = FS_OP_BITAND; }
  | OREQ { $$ = FS_OP_BITOR; } | XOREQ { $$ = FS_OP_BITXOR; } | LSHIFTEQ { $$ = FS_OP_LSHIFT; }
  | RSHIFTEQ { $$ = FS_OP_RSHIFT; }
  ;

names
  : NAME                           { $$ = mk(P, FS_N_GLOBAL, @$, 1, $1); }
  | names COMMA NAME                 { $$ = $1; PUSH($$, $3); }
  ;

dotted_name
  : NAME
  | dotted_name DOT NAME           { $$ = dotted(P, $1, $3); $$->loc = @$; }
  ;

dots
  : DOT                            { $$ = 1; }
  | ELLIPSIS                       { $$ = 3; }
  | dots DOT                       { $$ = $1 + 1; }
  | dots ELLIPSIS                  { $$ = $1 + 3; }
  ;

dotted_as_names
  : dotted_as_name                     { $$ = mk(P, FS_N_IMPORT, @$, 1, $1); }
  | dotted_as_names COMMA dotted_as_name { $$ = $1; PUSH($$, $3); }
  ;

dotted_as_name
  : dotted_name                    { $$ = steal_name(mk(P, FS_N_ALIAS, @$, 1, NULL), $1); }
  | dotted_name AS NAME            { $$ = steal_name(mk(P, FS_N_ALIAS, @$, 1, $3), $1); }
  ;

import_targets
  : STAR                            { fs_node *a = mk(P, FS_N_ALIAS, @1, 1, NULL); a->str = "*"; a->slen = 1;
                                     $$ = mk(P, FS_N_IMPORTFROM, @$, 1, a); }
  | import_as_names
  | LPAREN import_as_names RPAREN        { $$ = $2; }
  | LPAREN import_as_names COMMA RPAREN    { $$ = $2; }
  ;

import_as_names
  : import_as_name                     { $$ = mk(P, FS_N_IMPORTFROM, @$, 1, $1); }
  | import_as_names COMMA import_as_name { $$ = $1; PUSH($$, $3); }
  ;

import_as_name
  : NAME                           { $$ = steal_name(mk(P, FS_N_ALIAS, @$, 1, NULL), $1); }
  | NAME AS NAME                   { $$ = steal_name(mk(P, FS_N_ALIAS, @$, 1, $3), $1); }
  ;

/* A header's ':' -- or the error production that reports it missing. The
 * bracket productions below call yyerrok (their closer resynchronises the
 * parse); this one consumes no token, so it must not, or an error at the
 * same token would recover here forever. */
colon
  : COLON
  | error                          { expected_colon(P, @1); } /* no yyerrok: nothing was consumed */
  ;

compound_stmt
  : IF namedexpr_test colon suite if_tail { $$ = mk(P, FS_N_IF, @$, 3, $2, $4, $5); }
  | WHILE namedexpr_test colon suite else_opt { $$ = mk(P, FS_N_WHILE, @$, 3, $2, $4, $5); }
  | for_stmt
  | TRY colon suite handlers else_opt finally_opt { $$ = $4; $$->loc = @$; set_kid($$, 0, $3); set_kid($$, 1, $5);
                                                   set_kid($$, 2, $6); }
  | TRY colon suite FINALLY colon suite { $$ = mk(P, FS_N_TRY, @$, 3, $3, NULL, $6); }
  | TRY colon suite                { syntax_error(P, P->lex.last_loc, "expected 'except' or 'finally' block");
                                     $$ = mk(P, FS_N_TRY, @$, 3, $3, NULL, NULL); }
  | with_stmt
  | funcdef
  | classdef
  | decorators funcdef             { $$ = decorate(P, $1, $2); }
  | decorators classdef            { $$ = decorate(P, $1, $2); }
  | decorators ASYNC funcdef       { $3->op = 1; $$ = decorate(P, $1, $3); }
  | ASYNC funcdef                  { $$ = $2; $$->op = 1; $$->loc = @$; }
  | ASYNC for_stmt                 { $$ = $2; $$->op = 1; $$->loc = @$; }
  | ASYNC with_stmt                { $$ = $2; $$->loc = @$;
                                     for (fs_node *w = $$; w && w->kind == FS_N_WITH;
                                          w = w->kids[2]->nkids == 1 ? w->kids[2]->kids[0] : NULL) w->op = 1; }
  | match_stmt
  | MODEL NAME LPAREN params RPAREN COLON suite { $$ = mk(P, FS_N_MODEL, @$, 2, $4, $7);
                                         $$->str = $2->str; $2->str = NULL; $$->name_loc = @2; }
  | MODEL NAME COLON suite           { $$ = mk(P, FS_N_MODEL, @$, 2, NEW(FS_N_BLOCK, @2), $4);
                                     $$->str = $2->str; $2->str = NULL; $$->name_loc = @2; }
  | REPEAT test colon suite        { $$ = mk(P, FS_N_REPEAT, @$, 2, $2, $4); }
  | star_testlist ASSIGN REPEAT test colon suite { $$ = named(P, mk(P, FS_N_REPEAT, @$, 2, $4, $6), tuple_close($1)); }
  | RESIDUAL colon suite           { $$ = mk(P, FS_N_RESIDUAL, @$, 1, $3); }
  | star_testlist ASSIGN RESIDUAL colon suite { $$ = named(P, mk(P, FS_N_RESIDUAL, @$, 1, $5), tuple_close($1)); }
  ;

if_tail
  : %empty                         { $$ = NULL; }
  | ELSE colon suite               { $$ = $3; }
  | ELIF namedexpr_test colon suite if_tail { $$ = as_block(P, mk(P, FS_N_IF, @$, 3, $2, $4, $5)); }
  ;

else_opt
  : %empty                         { $$ = NULL; }
  | ELSE colon suite               { $$ = $3; }
  ;

finally_opt
  : %empty                         { $$ = NULL; }
  | FINALLY colon suite            { $$ = $3; }
  ;

for_stmt
  : FOR targetlist IN star_testlist colon suite else_opt
                                   { check_target(P, $2);
                                     $$ = mk(P, FS_N_FOR, @$, 3, tuple_close($2), expression(P, tuple_close($4)), $6);
                                     if ($7) PUSH($$, $7); }
  ;

handlers
  : handler                        { $$ = mk(P, FS_N_TRY, @$, 4, NULL, NULL, NULL, $1); }
  | handlers handler               { $$ = $1; PUSH($$, $2);
                                     if ($2->op != $1->kids[3]->op)
                                       syntax_error(P, $2->loc, "cannot have both 'except' and 'except*' on the same 'try'"); }
  ;

handler
  : EXCEPT colon suite             { $$ = mk(P, FS_N_EXCEPT, @$, 3, NULL, $3, NULL); }
  | EXCEPT test colon suite        { $$ = mk(P, FS_N_EXCEPT, @$, 3, $2, $4, NULL); }
  | EXCEPT test AS NAME colon suite { $$ = mk(P, FS_N_EXCEPT, @$, 3, $2, $6, $4); }
  | EXCEPT STAR test colon suite    { $$ = mk(P, FS_N_EXCEPT, @$, 3, $3, $5, NULL); $$->op = 1; }
  | EXCEPT STAR test AS NAME colon suite { $$ = mk(P, FS_N_EXCEPT, @$, 3, $3, $7, $5); $$->op = 1; }
  ;

/* Items are pushed as (expression, target or NULL) pairs, then nested. */
with_stmt
  : WITH with_list colon suite     { $$ = with_items(P, $2, $4, @$); }
  | WITH with_parens colon suite   { $$ = with_items(P, $2, $4, @$); }
  ;

with_parens
  : WITH_LPAREN with_list RPAREN      { $$ = $2; }
  | WITH_LPAREN with_list COMMA RPAREN  { $$ = $2; }
  | WITH_LPAREN error RPAREN          { fsP_flush_held(P); yyerrok; $$ = mk(P, FS_N_BLOCK, @$, 2, NEW(FS_N_ERROR, @2), NULL); }
  ;

with_list
  : with_item                      { $$ = $1; }
  | with_list COMMA with_item        { $$ = $1; for (uint32_t i = 0; i < $3->nkids; i++) PUSH($$, $3->kids[i]); }
  ;

with_item
  : test                           { $$ = mk(P, FS_N_BLOCK, @$, 2, $1, NULL); }
  | test AS or_expr                { check_target(P, $3); $$ = mk(P, FS_N_BLOCK, @$, 2, $1, $3); }
  ;

funcdef
  : DEF NAME type_params_opt parameters ret_opt colon suite { $$ = def(P, $2, $3, $4, $5, $7, @$); }
  ;

parameters
  : LPAREN typedargs RPAREN              { $$ = $2; }
  | LPAREN error RPAREN                  { fsP_flush_held(P); yyerrok; $$ = NEW(FS_N_BLOCK, @2); }
  ;

ret_opt
  : %empty                         { $$ = NULL; }
  | ARROW test                     { $$ = $2; }
  ;

classdef
  : CLASS NAME type_params_opt class_args_opt colon suite
                                   { $$ = mk(P, FS_N_CLASS, @$, 4, $4, $6, NULL, $3);
                                     $$->str = $2->str; $2->str = NULL; $$->name_loc = @2; }
  ;

class_args_opt
  : %empty                         { $$ = mk(P, FS_N_CALL, @$, 1, NULL); }
  | LPAREN args RPAREN                   { $$ = call_done(P, $2); $$->loc = @$; }
  | LPAREN error RPAREN                  { fsP_flush_held(P); yyerrok; $$ = mk(P, FS_N_CALL, @$, 1, NULL); }
  ;

decorators
  : decorator                      { $$ = as_block(P, $1); }
  | decorators decorator           { $$ = $1; PUSH($$, $2); }
  ;

decorator
  : AT namedexpr_test NEWLINE     { $$ = $2; }
  ;

type_params_opt
  : %empty                         { $$ = NULL; }
  | LBRACKET type_params RBRACKET            { $$ = $2; $$->loc = @$; }
  | LBRACKET type_params COMMA RBRACKET        { $$ = $2; $$->loc = @$; }
  ;

type_params
  : type_param                     { $$ = as_block(P, $1); }
  | type_params COMMA type_param     { $$ = $1; PUSH($$, $3); }
  ;

type_param
  : NAME                           { $$ = param(P, $1, FS_PARAM_PLAIN, NULL, NULL, @$); }
  | NAME COLON test                  { $$ = param(P, $1, FS_PARAM_PLAIN, $3, NULL, @$); }
  | STAR NAME                       { $$ = param(P, $2, FS_PARAM_VARARGS, NULL, NULL, @$); }
  | POW NAME                       { $$ = param(P, $2, FS_PARAM_VARKW, NULL, NULL, @$); }
  ;

/* def's parameters; `*` and `/` arrive as nameless PARAMs and params_done
 * turns them into the kinds of the parameters around them. */
typedargs
  : %empty                         { $$ = NEW(FS_N_BLOCK, @$); }
  | tparams                        { $$ = params_done(P, $1); }
  | tparams COMMA                    { $$ = params_done(P, $1); }
  ;

tparams
  : tparam                         { $$ = as_block(P, $1); }
  | tparams COMMA tparam             { $$ = $1; PUSH($$, $3); $$->loc.end = @3.end; }
  ;

tparam
  : NAME                           { $$ = param(P, $1, FS_PARAM_PLAIN, NULL, NULL, @$); }
  | NAME COLON test                  { $$ = param(P, $1, FS_PARAM_PLAIN, $3, NULL, @$); }
  | NAME ASSIGN test                  { $$ = param(P, $1, FS_PARAM_PLAIN, NULL, $3, @$); }
  | NAME COLON test ASSIGN test         { $$ = param(P, $1, FS_PARAM_PLAIN, $3, $5, @$); }
  | STAR                            { $$ = param(P, NULL, FS_PARAM_VARARGS, NULL, NULL, @$); }
  | STAR NAME                       { $$ = param(P, $2, FS_PARAM_VARARGS, NULL, NULL, @$); }
  | STAR NAME COLON test              { $$ = param(P, $2, FS_PARAM_VARARGS, $4, NULL, @$); }
  | STAR NAME COLON star_expr         { $$ = param(P, $2, FS_PARAM_VARARGS, $4, NULL, @$); }
  | POW NAME                       { $$ = param(P, $2, FS_PARAM_VARKW, NULL, NULL, @$); }
  | POW NAME COLON test              { $$ = param(P, $2, FS_PARAM_VARKW, $4, NULL, @$); }
  | SLASH                            { $$ = param(P, NULL, FS_PARAM_POSONLY, NULL, NULL, @$); }
  ;

lparams_opt
  : %empty                         { $$ = NEW(FS_N_BLOCK, @$); }
  | lparams                        { $$ = params_done(P, $1); }
  | lparams COMMA                    { $$ = params_done(P, $1); }
  ;

lparams
  : lparam                         { $$ = as_block(P, $1); }
  | lparams COMMA lparam             { $$ = $1; PUSH($$, $3); $$->loc.end = @3.end; }
  ;

lparam
  : NAME                           { $$ = param(P, $1, FS_PARAM_PLAIN, NULL, NULL, @$); }
  | NAME ASSIGN test                  { $$ = param(P, $1, FS_PARAM_PLAIN, NULL, $3, @$); }
  | STAR                            { $$ = param(P, NULL, FS_PARAM_VARARGS, NULL, NULL, @$); }
  | STAR NAME                       { $$ = param(P, $2, FS_PARAM_VARARGS, NULL, NULL, @$); }
  | POW NAME                       { $$ = param(P, $2, FS_PARAM_VARKW, NULL, NULL, @$); }
  | SLASH                            { $$ = param(P, NULL, FS_PARAM_POSONLY, NULL, NULL, @$); }
  ;

/* A model's parameters: names with defaults, as FabricScript always had. */
params
  : %empty                         { $$ = NEW(FS_N_BLOCK, @$); }
  | param_list
  | param_list COMMA
  ;

param_list
  : mparam                         { $$ = as_block(P, $1); }
  | param_list COMMA mparam          { $$ = $1; PUSH($$, $3); $$->loc.end = @3.end; }
  ;

mparam
  : NAME                           { $$ = $1; $$->kind = FS_N_PARAM; }
  | NAME ASSIGN test                  { $$ = $1; $$->kind = FS_N_PARAM; PUSH($$, $3); }
  ;

/* ---- match ---- */

match_stmt
  : MATCH subject colon NEWLINE INDENT cases DEDENT { $$ = $6; $$->loc = @$; set_kid($$, 0, $2); }
  ;

subject
  : subject_items                  { $$ = expression(P, tuple_close($1)); }
  | subject_items COMMA              { $$ = tuple_trailing(P, $1, @$); }
  ;

subject_items
  : namedexpr_test
  | star_expr
  | subject_items COMMA namedexpr_test { $$ = tuple_add(P, $1, $3, @$); }
  | subject_items COMMA star_expr    { $$ = tuple_add(P, $1, $3, @$); }
  ;

cases
  : case_block                     { $$ = mk(P, FS_N_MATCH, @$, 2, NULL, $1); }
  | cases case_block               { $$ = $1; PUSH($$, $2); }
  ;

case_block
  : CASE patterns guard_opt colon suite { $$ = mk(P, FS_N_CASE, @$, 3, $2, $3, $5); }
  ;

guard_opt
  : %empty                         { $$ = NULL; }
  | IF namedexpr_test              { $$ = $2; }
  ;

patterns
  : pattern
  | pattern_seq                    { $$ = tuple_close($1); }
  ;

/* `case a, *rest:` -- a sequence without brackets */
pattern_seq
  : mstar_pattern COMMA              { $$ = tuple_trailing(P, $1, @$); }
  | mstar_pattern COMMA pat_items    { $$ = mk(P, FS_N_TUPLE, @$, 1, $1); seq_extend(P, $$, $3); }
  | mstar_pattern COMMA pat_items COMMA { $$ = mk(P, FS_N_TUPLE, @$, 1, $1); seq_extend(P, $$, $3); }
  ;

pat_items
  : mstar_pattern
  | pat_items COMMA mstar_pattern    { $$ = tuple_add(P, $1, $3, @$); }
  ;

mstar_pattern
  : pattern
  | STAR NAME                       { $$ = mk_op(P, FS_N_STARRED, 1, @$, 1, $2); }
  ;

pattern
  : or_pattern
  | or_pattern AS NAME             { $$ = mk(P, FS_N_MATCHAS, @$, 2, $1, $3); }
  ;

or_pattern
  : closed_pattern
  | or_pattern VBAR closed_pattern  { $$ = mk_op(P, FS_N_BINARY, FS_OP_BITOR, @$, 2, $1, $3); }
  ;

closed_pattern
  : literal_pattern
  | NAME
  | attr_chain
  | LPAREN RPAREN                        { $$ = NEW(FS_N_TUPLE, @$); }
  | LPAREN pattern RPAREN                { $$ = $2; }
  | LPAREN pattern_seq RPAREN            { $$ = tuple_close($2); $$->loc = @$; }
  | LBRACKET RBRACKET                        { $$ = NEW(FS_N_LIST, @$); }
  | LBRACKET pat_items RBRACKET              { $$ = as_seq(P, $2, FS_N_LIST, @$); }
  | LBRACKET pat_items COMMA RBRACKET          { $$ = as_seq(P, $2, FS_N_LIST, @$); }
  | LBRACE RBRACE                        { $$ = NEW(FS_N_DICT, @$); }
  | LBRACE map_items RBRACE              { $$ = $2; $$->loc = @$; }
  | LBRACE map_items COMMA RBRACE          { $$ = $2; $$->loc = @$; }
  | NAME LPAREN RPAREN                   { $$ = mk(P, FS_N_CALL, @$, 1, $1); }
  | NAME LPAREN cls_args RPAREN          { $$ = $3; set_kid($$, 0, $1); $$->loc = @$; }
  | NAME LPAREN cls_args COMMA RPAREN      { $$ = $3; set_kid($$, 0, $1); $$->loc = @$; }
  | attr_chain LPAREN RPAREN             { $$ = mk(P, FS_N_CALL, @$, 1, $1); }
  | attr_chain LPAREN cls_args RPAREN    { $$ = $3; set_kid($$, 0, $1); $$->loc = @$; }
  | attr_chain LPAREN cls_args COMMA RPAREN { $$ = $3; set_kid($$, 0, $1); $$->loc = @$; }
  ;

attr_chain
  : NAME DOT NAME                  { $$ = name_node(P, $3, FS_N_ATTR, @$, $1); }
  | attr_chain DOT NAME            { $$ = name_node(P, $3, FS_N_ATTR, @$, $1); }
  ;

literal_pattern
  : signed_number
  | signed_number PLUS FLOAT        { $$ = mk_op(P, FS_N_BINARY, FS_OP_ADD, @$, 2, $1, $3); }
  | signed_number MINUS FLOAT        { $$ = mk_op(P, FS_N_BINARY, FS_OP_SUB, @$, 2, $1, $3); }
  | strings                        { if ($1->kind == FS_N_FSTR) syntax_error(P, @1, "patterns may only match literals and attribute lookups"); }
  | NONE                           { $$ = NEW(FS_N_NONE, @$); }
  | TRUE                           { $$ = NEW(FS_N_TRUE, @$); }
  | FALSE                          { $$ = NEW(FS_N_FALSE, @$); }
  ;

signed_number
  : INT
  | FLOAT
  | MINUS INT                        { $$ = mk_op(P, FS_N_UNARY, FS_OP_NEG, @$, 1, $2); }
  | MINUS FLOAT                      { $$ = mk_op(P, FS_N_UNARY, FS_OP_NEG, @$, 1, $2); }
  ;

cls_args
  : cls_arg                        { $$ = mk(P, FS_N_CALL, @$, 2, NULL, $1); }
  | cls_args COMMA cls_arg           { $$ = $1; PUSH($$, $3);
                                     if ($3->kind != FS_N_KWARG && $1->kids[$1->nkids - 2]->kind == FS_N_KWARG)
                                       syntax_error(P, $3->loc, "positional patterns follow keyword patterns"); }
  ;

cls_arg
  : pattern
  | NAME ASSIGN pattern               { $$ = name_node(P, $1, FS_N_KWARG, @$, $3); }
  ;

map_items
  : map_item                       { $$ = $1; }
  | map_items COMMA map_item         { $$ = $1; PUSH($$, $3->kids[0]); PUSH($$, $3->kids[1]); }
  ;

map_item
  : literal_pattern COLON pattern    { $$ = mk(P, FS_N_DICT, @$, 2, $1, $3); }
  | attr_chain COLON pattern         { $$ = mk(P, FS_N_DICT, @$, 2, $1, $3); }
  | POW NAME                       { $$ = mk(P, FS_N_DICT, @$, 2, mk_op(P, FS_N_STARRED, 2, @$, 1, $2), NULL); }
  ;

/* ---- blocks ---- */

suite
  : simple_stmt                    { $$ = suite_of(P, $1); }
  | NEWLINE INDENT block DEDENT    { $$ = $3; }
  ;

block
  : stmt                           { $$ = suite_of(P, $1); }
  | block stmt                     { $$ = $1; push_stmt(P, $$, $2); $$->loc.end = @2.end; }
  | block INDENT block DEDENT      { $$ = $1; stray_block(P, $$, $3, @2); }
  ;

/* ---- expressions ---- */

/* A lone item is itself, without a reduction of its own (most statements
 * are one); a TUPLE tagged with ival == 1 is still "open": tuple_close
 * closes it. */
star_testlist
  : or_expr
  | test_op
  | star_expr
  | star_items
  | test COMMA                       { $$ = tuple_trailing(P, $1, @$); }
  | star_expr COMMA                  { $$ = tuple_trailing(P, $1, @$); }
  | star_items COMMA                 { $$ = tuple_trailing(P, $1, @$); }
  ;

/* two items or more */
star_items
  : test COMMA star_item             { $$ = tuple_add(P, $1, $3, @$); }
  | star_expr COMMA star_item        { $$ = tuple_add(P, $1, $3, @$); }
  | star_items COMMA star_item       { $$ = tuple_add(P, $1, $3, @$); }
  ;

star_item
  : test
  | star_expr
  ;

/* for-loop, comprehension and del targets: above comparisons, so `in` ends them */
targetlist
  : target_items
  | target_items COMMA               { $$ = tuple_trailing(P, $1, @$); }
  ;

target_items
  : target_item
  | target_items COMMA target_item   { $$ = tuple_add(P, $1, $3, @$); }
  ;

target_item
  : or_expr
  | star_expr
  ;

star_expr
  : STAR or_expr                    { $$ = mk_op(P, FS_N_STARRED, 1, @$, 1, $2); }
  ;

/* A plain argument, a test, is an item here without a reduction to arg. */
arg_list
  : test                           { $$ = mk(P, FS_N_CALL, @$, 2, NULL, $1); }
  | arg                            { $$ = mk(P, FS_N_CALL, @$, 2, NULL, $1); }
  | arg_list COMMA test              { $$ = $1; PUSH($$, $3); }
  | arg_list COMMA arg               { $$ = $1; PUSH($$, $3); }
  ;

/* The other arguments (a plain test is an arg_list item of its own).
 * arg_list and arg come before namedexpr_test, so that where a test may
 * end either, reducing it to an argument is the state's default (what a
 * syntax error there reports expecting: a ')'): bison breaks a tie
 * between two reductions by the rules' order. */
arg
  : NAME WALRUS test               { $$ = mk(P, FS_N_NAMEDEXPR, @$, 2, $1, $3); }
  | namedexpr_test comp_clauses    { $$ = comp(P, FS_COMP_GEN, $1, NULL, $2, @$); $$->ival = 1; /* bare */ }
  | NAME ASSIGN test                  { $$ = name_node(P, $1, FS_N_KWARG, @$, $3); }
  | STAR test                       { $$ = mk_op(P, FS_N_STARRED, 1, @$, 1, $2); }
  | POW test                       { $$ = mk_op(P, FS_N_STARRED, 2, @$, 1, $2); }
  ;

namedexpr_test
  : test
  | NAME WALRUS test               { $$ = mk(P, FS_N_NAMEDEXPR, @$, 2, $1, $3); }
  ;

/* An operand without `not`, `and` or `or` goes from or_expr to test in one
 * reduction: comparison is no level of its own. */
test
  : or_expr
  | test_op
  ;

/* test's forms but the plain or_expr: an expression statement's or a call
 * argument's or_expr goes straight to star_testlist or arg, one reduction
 * where test in between made two. */
test_op
  : comp_chain
  | not_op
  | and_op
  | or_op
  | or_test IF or_test ELSE test   { $$ = mk(P, FS_N_COND, @$, 3, $3, $1, $5); }
  | lambdef
  ;

lambdef
  : LAMBDA lparams_opt COLON test    { $$ = mk(P, FS_N_LAMBDA, @$, 2, $2, $4); }
  ;

or_test
  : and_test
  | or_op
  ;

or_op
  : or_test OR and_test            { $$ = mk_op(P, FS_N_BINARY, FS_OP_OR, @$, 2, $1, $3); }
  ;

and_test
  : not_test
  | and_op
  ;

and_op
  : and_test AND not_test          { $$ = mk_op(P, FS_N_BINARY, FS_OP_AND, @$, 2, $1, $3); }
  ;

not_test
  : or_expr
  | comp_chain
  | not_op
  ;

not_op
  : NOT not_test                   { $$ = mk_op(P, FS_N_UNARY, FS_OP_NOT, @$, 1, $2); }
  ;

/* `a < b` is a BINARY; a longer chain a COMPARE, each operand evaluated once. */
comp_chain
  : or_expr compop or_expr         { $$ = mk_op(P, FS_N_BINARY, $2, @$, 2, $1, $3); }
  | comp_chain compop or_expr      { $$ = compare(P, $1, $2, $3, @$); }
  ;

compop
  : EQ { $$ = FS_OP_EQ; } | NE { $$ = FS_OP_NE; } | LESS { $$ = FS_OP_LT; }
  | LE { $$ = FS_OP_LE; } | GREATER { $$ = FS_OP_GT; } | GE { $$ = FS_OP_GE; }
  | IN { $$ = FS_OP_IN; } | NOT IN { $$ = FS_OP_NOT_IN; }
  | IS { $$ = FS_OP_IS; } | IS NOT { $$ = FS_OP_IS_NOT; }
  ;

/* Python's levels from `|` down to the unary operators are one nonterminal
 * whose operators' precedence and associativity are declared above (%left
 * ... %precedence POW): each level as a rule of its own cost an operand a
 * reduction per level (a name went primary, factor, arith, or_expr), three
 * fifths of the parser's reductions. Every operand of these operators is
 * an or_expr (a `not`, a comparison or a lambda is no operand of `+`), and
 * the only conflicts the declarations resolve are between these rules (the
 * parser.output report lists them). `**`'s left operand is a primary (so
 * it binds tighter than a unary minus on its left, and `a * b ** c` shifts
 * without a conflict) and its right one an or_expr that every binary
 * operator ends (`-2 ** -1 * 3` is (-(2 ** (-1))) * 3).
 *
 * A NAME is no primary: each rule with a primary on its left has a twin with
 * a NAME there, so a name used as a whole operand (a third of a script's
 * operands) reduces once, to or_expr, not twice, and `x.y` or `f(x)` reduces
 * its name together with the first trailer. The twins' lookaheads are
 * disjoint (a trailer or `**` after a NAME shifts, anything else reduces),
 * so no conflict comes of them. */
or_expr
  : primary
  | NAME
  | primary POW or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_POW, @$, 2, $1, $3); }
  | NAME POW or_expr               { $$ = mk_op(P, FS_N_BINARY, FS_OP_POW, @$, 2, $1, $3); }
  | AWAIT primary                  { $$ = mk(P, FS_N_AWAIT, @$, 1, $2); }
  | AWAIT NAME                     { $$ = mk(P, FS_N_AWAIT, @$, 1, $2); }
  | AWAIT primary POW or_expr      { $$ = await_pow(P, $2, $4, @$, @2); }
  | AWAIT NAME POW or_expr         { $$ = await_pow(P, $2, $4, @$, @2); }
  | MINUS or_expr %prec UNARY        { $$ = mk_op(P, FS_N_UNARY, FS_OP_NEG, @$, 1, $2); }
  | PLUS or_expr %prec UNARY        { $$ = mk_op(P, FS_N_UNARY, FS_OP_POS, @$, 1, $2); }
  | TILDE or_expr %prec UNARY        { $$ = mk_op(P, FS_N_UNARY, FS_OP_INVERT, @$, 1, $2); }
  | or_expr STAR or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_MUL, @$, 2, $1, $3); }
  | or_expr SLASH or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_DIV, @$, 2, $1, $3); }
  | or_expr FDIV or_expr           { $$ = mk_op(P, FS_N_BINARY, FS_OP_FDIV, @$, 2, $1, $3); }
  | or_expr PERCENT or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_MOD, @$, 2, $1, $3); }
  | or_expr AT or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_MATMUL, @$, 2, $1, $3); }
  | or_expr PLUS or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_ADD, @$, 2, $1, $3); }
  | or_expr MINUS or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_SUB, @$, 2, $1, $3); }
  | or_expr LSHIFT or_expr         { $$ = mk_op(P, FS_N_BINARY, FS_OP_LSHIFT, @$, 2, $1, $3); }
  | or_expr RSHIFT or_expr         { $$ = mk_op(P, FS_N_BINARY, FS_OP_RSHIFT, @$, 2, $1, $3); }
  | or_expr AMPER or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_BITAND, @$, 2, $1, $3); }
  | or_expr CIRCUMFLEX or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_BITXOR, @$, 2, $1, $3); }
  | or_expr VBAR or_expr            { $$ = mk_op(P, FS_N_BINARY, FS_OP_BITOR, @$, 2, $1, $3); }
  ;

primary
  : primary LPAREN args RPAREN           { $$ = call_done(P, $3); $$->loc = @$; set_kid($$, 0, $1); }
  | NAME LPAREN args RPAREN              { $$ = call_done(P, $3); $$->loc = @$; set_kid($$, 0, $1); }
  | primary DOT NAME               { $$ = name_node(P, $3, FS_N_ATTR, @$, $1); }
  | NAME DOT NAME                  { $$ = name_node(P, $3, FS_N_ATTR, @$, $1); }
  | primary LBRACKET subscripts RBRACKET     { $$ = mk(P, FS_N_INDEX, @$, 2, $1, $3); }
  | NAME LBRACKET subscripts RBRACKET        { $$ = mk(P, FS_N_INDEX, @$, 2, $1, $3); }
  | primary LPAREN error RPAREN          { fsP_flush_held(P); yyerrok; $$ = NEW(FS_N_ERROR, @$); }
  | NAME LPAREN error RPAREN             { fsP_flush_held(P); yyerrok; $$ = NEW(FS_N_ERROR, @$); }
  | primary LBRACKET error RBRACKET          { fsP_flush_held(P); yyerrok; $$ = NEW(FS_N_ERROR, @$); }
  | NAME LBRACKET error RBRACKET             { fsP_flush_held(P); yyerrok; $$ = NEW(FS_N_ERROR, @$); }
  /* the other atoms (primary's operands, without a reduction of their own) */
  | INT
  | FLOAT
  | STRING
  | FSTRING                        { $$ = fstring(P, $1); }
  | string_list                    { $$ = strings_done(P, $1); }
  | ELLIPSIS                       { $$ = NEW(FS_N_ELLIPSIS, @$); }
  | TRUE                           { $$ = NEW(FS_N_TRUE, @$); }
  | FALSE                          { $$ = NEW(FS_N_FALSE, @$); }
  | NONE                           { $$ = NEW(FS_N_NONE, @$); }
  | LPAREN RPAREN                        { $$ = NEW(FS_N_TUPLE, @$); }
  | LPAREN yield_expr RPAREN             { $$ = $2; }
  | LPAREN seq_items RPAREN              { $$ = expression(P, tuple_close($2)); if ($$->kind == FS_N_TUPLE) $$->loc = @$; }
  | LPAREN seq_items COMMA RPAREN          { $$ = tuple_trailing(P, $2, @$); }
  | LPAREN namedexpr_test comp_clauses RPAREN { $$ = comp(P, FS_COMP_GEN, $2, NULL, $3, @$); }
  | LBRACKET RBRACKET                        { $$ = NEW(FS_N_LIST, @$); }
  | LBRACKET seq_items RBRACKET              { $$ = as_seq(P, $2, FS_N_LIST, @$); }
  | LBRACKET seq_items COMMA RBRACKET          { $$ = as_seq(P, $2, FS_N_LIST, @$); }
  | LBRACKET namedexpr_test comp_clauses RBRACKET { $$ = comp(P, FS_COMP_LIST, $2, NULL, $3, @$); }
  | LBRACE RBRACE                        { $$ = NEW(FS_N_DICT, @$); }
  | LBRACE dict_items RBRACE             { $$ = $2; $$->loc = @$; }
  | LBRACE dict_items COMMA RBRACE         { $$ = $2; $$->loc = @$; }
  | LBRACE test COLON test comp_clauses RBRACE { $$ = comp(P, FS_COMP_DICT, $2, $4, $5, @$); }
  | LBRACE seq_items RBRACE              { $$ = as_seq(P, $2, FS_N_SET, @$); }
  | LBRACE seq_items COMMA RBRACE          { $$ = as_seq(P, $2, FS_N_SET, @$); }
  | LBRACE namedexpr_test comp_clauses RBRACE { $$ = comp(P, FS_COMP_SET, $2, NULL, $3, @$); }
  | LPAREN error RPAREN                  { fsP_flush_held(P); yyerrok; $$ = NEW(FS_N_ERROR, @$); }
  | LBRACKET error RBRACKET                  { fsP_flush_held(P); yyerrok; $$ = NEW(FS_N_ERROR, @$); }
  | LBRACE error RBRACE                  { fsP_flush_held(P); yyerrok; $$ = NEW(FS_N_ERROR, @$); }
  ;

/* The callee slot is kids[0]; it is filled in by the `primary` rule. */
args
  : %empty                         { $$ = mk(P, FS_N_CALL, @$, 1, NULL); }
  | arg_list
  | arg_list COMMA
  ;

subscripts
  : subscript_items                { $$ = tuple_close($1); }
  | subscript_items COMMA            { $$ = tuple_trailing(P, $1, @$); }
  ;

subscript_items
  : subscript
  | subscript_items COMMA subscript  { $$ = tuple_add(P, $1, $3, @$); }
  ;

subscript
  : namedexpr_test
  | star_expr
  | opt_test COLON opt_test          { $$ = mk(P, FS_N_SLICE, @$, 3, $1, $3, NULL); }
  | opt_test COLON opt_test COLON opt_test { $$ = mk(P, FS_N_SLICE, @$, 3, $1, $3, $5); }
  ;

opt_test
  : %empty                         { $$ = NULL; }
  | test
  ;

comp_clauses
  : comp_for                       { $$ = as_block(P, $1); }
  | comp_clauses comp_for          { $$ = $1; PUSH($$, $2); }
  | comp_clauses IF or_test        { $$ = $1; PUSH($$->kids[$$->nkids - 1], $3); }
  ;

comp_for
  : FOR targetlist IN or_test      { check_target(P, $2); $$ = mk(P, FS_N_COMPFOR, @$, 2, tuple_close($2), $4); }
  | ASYNC FOR targetlist IN or_test { check_target(P, $3); $$ = mk(P, FS_N_COMPFOR, @$, 2, tuple_close($3), $5);
                                     $$->op = 1; }
  ;

yield_expr
  : YIELD                          { $$ = mk(P, FS_N_YIELD, @$, 1, NULL); }
  | YIELD star_testlist            { $$ = mk(P, FS_N_YIELD, @$, 1, expression(P, tuple_close($2))); }
  | YIELD FROM test                { $$ = mk(P, FS_N_YIELD, @$, 1, $3); $$->op = 1; }
  ;

/* Adjacent literals gather in a list (an FSTR with op 1) and join once:
 * a file of thousands of them must not copy the growing string each time.
 * A lone literal, most of them, is a primary of its own (see there), not a
 * string_list of one, which cost it three more reductions. */
strings
  : string
  | string_list                    { $$ = strings_done(P, $1); }
  ;

/* two literals or more */
string_list
  : string string                  { $$ = string_more(P, $1, $2); $$->loc.end = @2.end; }
  | string_list string             { $$ = string_more(P, $1, $2); $$->loc.end = @2.end; }
  ;

string
  : STRING
  | FSTRING                        { $$ = fstring(P, $1); }
  ;

seq_items
  : namedexpr_test
  | star_expr
  | seq_items COMMA namedexpr_test   { $$ = tuple_add(P, $1, $3, @$); }
  | seq_items COMMA star_expr        { $$ = tuple_add(P, $1, $3, @$); }
  ;

dict_items
  : dict_item
  | dict_items COMMA dict_item       { $$ = $1; PUSH($$, $3->kids[0]); PUSH($$, $3->kids[1]); }
  ;

dict_item
  : test COLON test                  { $$ = mk(P, FS_N_DICT, @$, 2, $1, $3); }
  | POW or_expr                    { $$ = mk(P, FS_N_DICT, @$, 2, mk_op(P, FS_N_STARRED, 2, @$, 1, $2), NULL); }
  ;

%%

static void too_deep(fs_parser *P, fs_loc loc) {
  if (P->depth_reported) return;
  P->depth_reported = 1;
  P->nerrors++;
  fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", P->lex.src, loc,
          "expression nested too deeply (the limit is %d levels)", FS_MAX_DEPTH);
}

static void syntax_error(fs_parser *P, fs_loc loc, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  P->nerrors++;
  fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", P->lex.src, loc, "%s", buf);
}

static inline __attribute__((always_inline)) fs_node *mk_kids(fs_parser *P, fs_node_kind k, fs_op op, fs_loc loc, uint32_t n, fs_node *const *kids) {
  /* the kids written straight into the node's array: fsA_push's capacity
   * test per kid was a tenth of the tree's instructions */
  fs_node *x = fsA_new_kids(P->lex.arena, k, loc, n);
  x->op = (uint8_t)op;
  uint32_t depth = 1;
  for (uint32_t i = 0; i < n; i++) {
    fs_node *kid = kids[i];
    x->kids[i] = kid;
    if (kid && kid->depth >= depth) depth = kid->depth + 1;
  }
  x->nkids = n;
  x->depth = depth;
  if (depth > FS_MAX_DEPTH) too_deep(P, loc);
  return x;
}

/* `await x ** y`: the await binds tighter, and spans `await x` only. */
static fs_node *await_pow(fs_parser *P, fs_node *operand, fs_node *exponent, fs_loc loc, fs_loc operand_loc) {
  fs_node *x = mk_op(P, FS_N_BINARY, FS_OP_POW, loc, 2, mk(P, FS_N_AWAIT, loc, 1, operand), exponent);
  x->kids[0]->loc = (fs_loc){loc.start, operand_loc.end};
  return x;
}

/* Fills a slot made NULL earlier (a callee, a try's body), keeping depth. */
static void set_kid(fs_node *x, uint32_t i, fs_node *kid) {
  x->kids[i] = kid;
  if (kid && kid->depth + 1 > x->depth) x->depth = kid->depth + 1;
}

static fs_node *as_block(fs_parser *P, fs_node *stmt) {
  fs_loc loc = stmt ? stmt->loc : (fs_loc){0, 0};
  return mk(P, FS_N_BLOCK, loc, 1, stmt);
}

/* A line `a; b` is a BLOCK with op 1 until it joins its block. */
static fs_node *stmt_line(fs_parser *P, fs_node *line, fs_node *s) {
  if (line->kind != FS_N_BLOCK || line->op != 1) {
    line = as_block(P, line);
    line->op = 1;
  }
  fsA_push(P->lex.arena, line, s);
  line->loc.end = s->loc.end;
  return line;
}

static void push_stmt(fs_parser *P, fs_node *block, fs_node *s) {
  if (s && s->kind == FS_N_BLOCK && s->op == 1) {
    for (uint32_t i = 0; i < s->nkids; i++) fsA_push(P->lex.arena, block, s->kids[i]);
    if (s->depth > block->depth) block->depth = s->depth;
  } else if (s) {
    fsA_push(P->lex.arena, block, s);
  }
}

/* An indented block where none opens: CPython's "unexpected indent", unless
 * it is the body of a header already reported (the statement before it is
 * an error); its statements are parsed and kept, so their own mistakes are
 * reported and nothing cascades from the indentation. */
static void stray_block(fs_parser *P, fs_node *into, fs_node *block, fs_loc indent) {
  const fs_node *before = into->nkids ? into->kids[into->nkids - 1] : NULL;
  if (!before || before->kind != FS_N_ERROR) syntax_error(P, indent, "unexpected indent");
  for (uint32_t i = 0; i < block->nkids; i++) fsA_push(P->lex.arena, into, block->kids[i]);
  if (block->nkids) into->loc.end = block->loc.end;
}

static fs_node *suite_of(fs_parser *P, fs_node *line) {
  if (line && line->kind == FS_N_BLOCK && line->op == 1) { line->op = 0; return line; }
  return as_block(P, line);
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

static void seq_extend(fs_parser *P, fs_node *t, fs_node *items) {
  if (!tuple_open(items)) { fsA_push(P->lex.arena, t, items); return; }
  for (uint32_t i = 0; i < items->nkids; i++) fsA_push(P->lex.arena, t, items->kids[i]);
}

/* The items of a display, as a LIST or SET node. */
static fs_node *as_seq(fs_parser *P, fs_node *items, fs_node_kind kind, fs_loc loc) {
  fs_node *x = tuple_open(items) ? items : mk(P, kind, loc, 1, items);
  x->kind = (uint8_t)kind;
  x->ival = 0;
  x->loc = loc;
  return x;
}

/* A value where a starred item alone cannot stand (`*a` is not a value;
 * `*a,` is). */
static fs_node *expression(fs_parser *P, fs_node *x) {
  if (x->kind == FS_N_STARRED)
    syntax_error(P, x->loc, x->op == 1 ? "can't use starred expression here" : "invalid syntax");
  return x;
}

/* CPython's names for what cannot be assigned to. */
static const char *target_kind(const fs_node *t) {
  switch (t->kind) {
  case FS_N_CALL: return "function call";
  case FS_N_COMPARE: return "comparison";
  case FS_N_NAMEDEXPR: return "named expression";
  case FS_N_LAMBDA: return "lambda";
  case FS_N_COMP: return t->op == FS_COMP_GEN ? "generator expression" : t->op == FS_COMP_LIST ? "list comprehension"
                       : t->op == FS_COMP_SET ? "set comprehension" : "dict comprehension";
  case FS_N_YIELD: return "yield expression";
  case FS_N_AWAIT: return "await expression";
  case FS_N_COND: return "conditional expression";
  case FS_N_ELLIPSIS: return "ellipsis";
  case FS_N_BINARY: return t->op >= FS_OP_EQ && t->op <= FS_OP_NOT_IN ? "comparison" : "expression";
  default: return fsA_kind_name((fs_node_kind)t->kind);
  }
}

static void check_targets(fs_parser *P, const fs_node *t, int del) {
  switch (t->kind) {
  case FS_N_NAME: case FS_N_ATTR: case FS_N_INDEX: return;
  case FS_N_TUPLE: case FS_N_LIST: {
    int stars = 0;
    for (uint32_t i = 0; i < t->nkids; i++) {
      const fs_node *k = t->kids[i];
      if (k->kind == FS_N_STARRED && !del) {
        if (stars++) { syntax_error(P, k->loc, "multiple starred expressions in assignment"); continue; }
        check_targets(P, k->kids[0], del);
        continue;
      }
      check_targets(P, k, del);
    }
    return;
  }
  case FS_N_STARRED:
    syntax_error(P, t->loc, del ? "cannot delete starred" : "starred assignment target must be in a list or tuple");
    return;
  default:
    syntax_error(P, t->loc, "cannot %s %s", del ? "delete" : "assign to", target_kind(t));
  }
}

static void check_target(fs_parser *P, const fs_node *t) { check_targets(P, t, 0); }
static void check_del(fs_parser *P, const fs_node *t) { check_targets(P, t, 1); }

static fs_node *assignment(fs_parser *P, fs_node *target, fs_node *value, fs_loc loc) {
  check_target(P, target);
  return mk(P, FS_N_ASSIGN, loc, 2, tuple_close(target), value);
}

static fs_node *chain_assign(fs_parser *P, fs_node *assign, fs_node *value, fs_loc loc) {
  fs_node *target = assign->kids[1];
  check_target(P, target);
  assign->kids[1] = value;
  fsA_push(P->lex.arena, assign, target);
  if (value->depth + 1 > assign->depth) assign->depth = value->depth + 1;
  assign->loc = loc;
  return assign;
}

static fs_node *annassign(fs_parser *P, fs_node *target, fs_node *annotation, fs_node *value, fs_loc loc) {
  target = tuple_close(target);
  if (target->kind == FS_N_TUPLE || target->kind == FS_N_LIST)
    syntax_error(P, target->loc, "only single target (not %s) can be annotated",
                 target->kind == FS_N_TUPLE ? "tuple" : "list");
  else
    check_target(P, target);
  return mk(P, FS_N_ANNASSIGN, loc, 3, target, annotation, value);
}

static fs_node *augassign(fs_parser *P, fs_op op, fs_node *target, fs_node *value, fs_loc loc) {
  target = tuple_close(target);
  if (target->kind != FS_N_NAME && target->kind != FS_N_ATTR && target->kind != FS_N_INDEX)
    syntax_error(P, target->loc, "'%s' is an illegal expression for augmented assignment", target_kind(target));
  return mk_op(P, FS_N_AUGASSIGN, op, loc, 2, target, value);
}

/* `a < b < c`: the BINARY of the first link becomes a COMPARE whose str
 * lists the operators, one byte each. */
static fs_node *compare(fs_parser *P, fs_node *chain, fs_op op, fs_node *x, fs_loc loc) {
  char first;
  if (chain->kind == FS_N_BINARY) {
    first = (char)chain->op;
    chain->kind = FS_N_COMPARE;
    chain->op = FS_OP_NONE;
    chain->str = &first;
    chain->slen = 1;
  }
  char *ops = fsA_alloc(P->lex.arena, (size_t)chain->slen + 2); /* chains are short: copy each time */
  memcpy(ops, chain->str, chain->slen);
  ops[chain->slen++] = (char)op;
  ops[chain->slen] = '\0';
  chain->str = ops;
  fsA_push(P->lex.arena, chain, x);
  chain->loc = loc;
  if (chain->depth > FS_MAX_DEPTH) too_deep(P, loc);
  return chain;
}

static fs_node *param(fs_parser *P, fs_node *name, fs_param_kind kind, fs_node *annotation, fs_node *dflt, fs_loc loc) {
  fs_node *x = mk_op(P, FS_N_PARAM, (fs_op)kind, loc, 1, dflt);
  if (annotation) fsA_push(P->lex.arena, x, annotation);
  if (name) { x->str = name->str; x->slen = name->slen; name->str = NULL; }
  return x;
}

/* Checks the order of a parameter list as CPython does and folds the `/`
 * and `*` markers into the kinds of the parameters they govern. */
static fs_node *params_done(fs_parser *P, fs_node *ps) {
  int seen_slash = 0, seen_star = 0, seen_kw = 0, seen_default = 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < ps->nkids; i++) {
    fs_node *p = ps->kids[i];
    if (seen_kw) { syntax_error(P, p->loc, "arguments cannot follow var-keyword argument"); continue; }
    if (p->op == FS_PARAM_POSONLY) { /* the `/` marker */
      if (seen_slash) syntax_error(P, p->loc, "/ may appear only once");
      else if (seen_star) syntax_error(P, p->loc, "/ must be ahead of *");
      else if (n == 0) syntax_error(P, p->loc, "at least one argument must precede /");
      for (uint32_t k = 0; k < n; k++) ps->kids[k]->op = FS_PARAM_POSONLY;
      seen_slash = 1;
      continue;
    }
    if (p->op == FS_PARAM_VARARGS) {
      if (seen_star) syntax_error(P, p->loc, "* argument may appear only once");
      seen_star = 1;
      if (!p->str) { /* bare `*`: keyword-only parameters must follow */
        if (i + 1 == ps->nkids || ps->kids[i + 1]->op == FS_PARAM_VARKW)
          syntax_error(P, p->loc, "named arguments must follow bare *");
        continue;
      }
    } else if (p->op == FS_PARAM_VARKW) {
      seen_kw = 1;
    } else if (seen_star) {
      p->op = FS_PARAM_KWONLY;
    } else if (p->kids[0]) {
      seen_default = 1;
    } else if (seen_default) {
      syntax_error(P, p->loc, "non-default argument follows default argument");
    }
    for (uint32_t k = 0; k < n; k++)
      if (strcmp(ps->kids[k]->str, p->str) == 0) {
        syntax_error(P, p->loc, "duplicate argument '%s' in function definition", p->str);
        break;
      }
    ps->kids[n++] = p;
  }
  ps->nkids = n;
  return ps;
}

/* Argument order, as CPython checks it. */
static fs_node *call_done(fs_parser *P, fs_node *call) {
  int seen_kw = 0, seen_dstar = 0;
  for (uint32_t i = 1; i < call->nkids; i++) {
    const fs_node *a = call->kids[i];
    if (a->kind == FS_N_COMP && a->ival == 1 && call->nkids > 2)
      syntax_error(P, a->loc, "Generator expression must be parenthesized");
    if (a->kind == FS_N_KWARG) { seen_kw = 1; continue; }
    if (a->kind == FS_N_STARRED && a->op == 2) { seen_dstar = 1; continue; }
    if (a->kind == FS_N_STARRED) {
      if (seen_dstar) syntax_error(P, a->loc, "iterable argument unpacking follows keyword argument unpacking");
      continue;
    }
    if (seen_dstar) syntax_error(P, a->loc, "positional argument follows keyword argument unpacking");
    else if (seen_kw) syntax_error(P, a->loc, "positional argument follows keyword argument");
  }
  return call;
}

static fs_node *comp(fs_parser *P, fs_comp kind, fs_node *elt, fs_node *value, fs_node *clauses, fs_loc loc) {
  if (elt->kind == FS_N_STARRED)
    syntax_error(P, elt->loc, kind == FS_COMP_DICT ? "dict unpacking cannot be used in dict comprehension"
                                                   : "iterable unpacking cannot be used in comprehension");
  fs_node *x = mk_op(P, FS_N_COMP, (fs_op)kind, loc, 2, elt, value);
  for (uint32_t i = 0; i < clauses->nkids; i++) fsA_push(P->lex.arena, x, clauses->kids[i]);
  return x;
}

static fs_node *def(fs_parser *P, fs_node *name, fs_node *tparams, fs_node *params, fs_node *ret, fs_node *body, fs_loc loc) {
  fs_node *x = mk(P, FS_N_DEF, loc, 2, params, body);
  if (tparams || ret) { /* Python's form: kids[2] decorators, kids[3] return annotation, kids[4] type params */
    fsA_push(P->lex.arena, x, NULL);
    fsA_push(P->lex.arena, x, ret);
    fsA_push(P->lex.arena, x, tparams);
  }
  steal_name(x, name);
  x->name_loc = name->loc;
  return x;
}

/* Decorators are kids[2] of a DEF (Python's form) or CLASS; the statement
 * keeps the `def`/`class` line's span, as CPython's does. */
static fs_node *decorate(fs_parser *P, fs_node *decorators, fs_node *defn) {
  if (defn->kind == FS_N_DEF)
    while (defn->nkids < 5) fsA_push(P->lex.arena, defn, NULL);
  set_kid(defn, 2, decorators);
  return defn;
}

/* `with a as x, b:` is `with a as x:` holding `with b:`. */
static fs_node *with_items(fs_parser *P, fs_node *items, fs_node *body, fs_loc loc) {
  fs_node *inner = body;
  for (uint32_t i = items->nkids; i >= 2; i -= 2) {
    fs_node *w = mk(P, FS_N_WITH, loc, 3, items->kids[i - 2], items->kids[i - 1], inner);
    inner = i > 2 ? as_block(P, w) : w;
  }
  return inner;
}

/* The NAME leaf becomes the node its name belongs to (`a.name`, `name=v`):
 * name_loc is the leaf's own location. Every attribute and keyword argument
 * would otherwise leave a NAME node behind unused, a tenth of a big tree. */
static fs_node *name_node(fs_parser *P, fs_node *name, fs_node_kind k, fs_loc loc, fs_node *kid) {
  name->name_loc = name->loc;
  name->kind = (uint8_t)k;
  name->loc = loc;
  /* a NAME token has no kids yet: its array of one is made here, not by
   * fsA_push's growth (a call to fsA_reserve per attribute) */
  name->kids = fsA_alloc(P->lex.arena, sizeof *name->kids);
  name->kids[0] = kid;
  name->kids_cap = 1;
  name->nkids = 1;
  if (kid) name->depth = kid->depth + 1;
  if (name->depth > FS_MAX_DEPTH) too_deep(P, loc);
  return name;
}

static fs_node *steal_name(fs_node *into, fs_node *name) {
  into->str = name->str;
  into->slen = name->slen;
  name->str = NULL;
  return into;
}

static fs_node *dotted(fs_parser *P, fs_node *a, fs_node *b) {
  char *s = fsA_alloc(P->lex.arena, (size_t)a->slen + b->slen + 2);
  memcpy(s, a->str, a->slen);
  s[a->slen] = '.';
  memcpy(s + a->slen + 1, b->str, b->slen + 1);
  a->str = s;
  a->slen += b->slen + 1;
  return a;
}

/* `h = repeat n:` names the block; only a plain name can. */
static fs_node *named(fs_parser *P, fs_node *block, fs_node *target) {
  if (target->kind == FS_N_NAME) {
    block->str = target->str;
    target->str = NULL;
    block->name_loc = target->loc;
  } else {
    syntax_error(P, target->loc, "only a name can be bound to a `%s` block",
                 block->kind == FS_N_REPEAT ? "repeat" : "residual");
  }
  return block;
}

/* Implicit concatenation: str with str, bytes with bytes; an f-string makes
 * the whole an f-string. */
static fs_node *string_more(fs_parser *P, fs_node *list, fs_node *s) {
  if (list->kind != FS_N_FSTR || list->op != 1) {
    fs_node *first = list;
    list = mk(P, FS_N_FSTR, first->loc, 1, first);
    list->op = 1;
  }
  const fs_node *first = list->kids[0];
  if ((first->kind == FS_N_BYTES) != (s->kind == FS_N_BYTES))
    syntax_error(P, (fs_loc){list->loc.start, s->loc.end}, "cannot mix bytes and nonbytes literals");
  else
    fsA_push(P->lex.arena, list, s);
  return list;
}

static fs_node *strings_done(fs_parser *P, fs_node *list) {
  if (list->kind != FS_N_FSTR || list->op != 1) return list;
  int fields = 0;
  size_t len = 0;
  for (uint32_t i = 0; i < list->nkids; i++) {
    fields |= list->kids[i]->kind == FS_N_FSTR;
    len += list->kids[i]->slen;
  }
  if (fields) { /* pieces of an f-string, in order */
    fs_node *out = fsA_new(P->lex.arena, FS_N_FSTR, list->loc);
    for (uint32_t i = 0; i < list->nkids; i++) {
      fs_node *k = list->kids[i];
      if (k->kind != FS_N_FSTR) { fsA_push(P->lex.arena, out, k); continue; }
      for (uint32_t j = 0; j < k->nkids; j++) fsA_push(P->lex.arena, out, k->kids[j]);
    }
    return out;
  }
  fs_node *out = fsA_new(P->lex.arena, (fs_node_kind)list->kids[0]->kind, list->loc);
  char *t = fsA_alloc(P->lex.arena, len + 1);
  size_t n = 0;
  for (uint32_t i = 0; i < list->nkids; i++) {
    memcpy(t + n, list->kids[i]->str, list->kids[i]->slen);
    n += list->kids[i]->slen;
  }
  t[n] = '\0';
  out->str = t;
  out->slen = (uint32_t)n;
  return out;
}

static fs_node *str_piece(fs_parser *P, const char *text, size_t len, fs_loc loc) {
  fs_node *x = fsA_new(P->lex.arena, FS_N_STR, loc);
  x->str = fsA_strndup(P->lex.arena, text, len);
  x->slen = len;
  return x;
}

/* A field that is one name or one short decimal integer, the common `{x}`
 * and `{0}`: its node as the field's own parse makes it (a lone name is a
 * name even where it could be a soft keyword), without starting a parser
 * and a scanner for it, which cost 2,300 instructions a field. NULL for any
 * other text (spaces included), which is parsed. */
static fs_node *field_leaf(fs_parser *P, uint32_t start, uint32_t end) {
  const char *t = P->lex.src->text + start;
  size_t n = end - start;
  fs_loc loc = {start, end};
  fs_node *x = NULL;
  if (n == 0) return NULL;
  if (t[0] >= '0' && t[0] <= '9') { /* what fsL_scan_number reads without a copy, and never refuses */
    if (n > 18 || (n > 1 && t[0] == '0')) return NULL;
    for (size_t k = 0; k < n; k++)
      if (t[k] < '0' || t[k] > '9') return NULL;
    fsL_scan_number(&P->lex, t, n, loc, &x);
    return x;
  }
  for (size_t k = 0; k < n; k++) {
    char c = t[k];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return NULL;
  }
  return name_or_keyword(&P->lex, t, n, loc, &x) == NAME ? x : NULL;
}

/* Splits the body text[start, end) of an f-string (or of a format spec with
 * fields) into literal pieces and FS_N_FMT fields pushed onto out. */
static void fstring_body(fs_parser *P, fs_node *out, uint32_t start, uint32_t end, int raw) {
  const fs_source *src = P->lex.src;
  const char *t = src->text;
  char *lit = fsA_xrealloc(NULL, end - start + 4);
  size_t nlit = 0;
  uint32_t lit_start = start;
  for (uint32_t i = start; i < end;) {
    char c = t[i];
    if ((c == '{' || c == '}') && i + 1 < end && t[i + 1] == c) { lit[nlit++] = c; i += 2; continue; }
    if (c == '}') {
      syntax_error(P, (fs_loc){i, i + 1}, "f-string: single '}' is not allowed");
      i++;
      continue;
    }
    if (c == '\\' && i + 1 < end) {
      size_t used = fsL_fstring_escape(t, i, end);
      if (raw || used != 2) { /* kept as written: raw text, `\{`, \N{NAME} */
        memcpy(lit + nlit, t + i, used);
        nlit += used;
      } else {
        nlit += fsL_escape(t, i, end, 0, lit + nlit, &used);
      }
      i += (uint32_t)used;
      continue;
    }
    if (c != '{') { lit[nlit++] = c; i++; continue; }
    uint32_t expr_end, spec_at, j = fsL_fstring_field(t, i + 1, end, &expr_end, &spec_at);
    if (j >= end) {
      syntax_error(P, (fs_loc){i, end}, "f-string: expecting '}'");
      break;
    }
    /* `{x=}` shows its own text, then the value's repr unless told otherwise */
    uint32_t k = expr_end;
    int debug = t[k] == '=';
    if (debug) {
      k++;
      while (k < j && (t[k] == ' ' || t[k] == '\t')) k++;
      memcpy(lit + nlit, t + i + 1, k - i - 1);
      nlit += k - i - 1;
    }
    if (nlit) { fsA_push(P->lex.arena, out, str_piece(P, lit, nlit, (fs_loc){lit_start, i})); nlit = 0; }
    fs_node *field = fsA_new(P->lex.arena, FS_N_FMT, (fs_loc){i, j + 1});
    int errs = 0;
    fs_node *e = field_leaf(P, i + 1, expr_end);
    if (!e) e = fsP_parse_expr(P, i + 1, expr_end, &errs);
    P->nerrors += errs;
    fsA_push(P->lex.arena, field, e);
    if (k < j && t[k] == '!') {
      char conv = k + 1 < j ? t[k + 1] : 0;
      uint32_t after = k + 2;
      if (conv != 'r' && conv != 's' && conv != 'a') {
        syntax_error(P, (fs_loc){k, k + 2 <= j ? k + 2 : j},
                     "f-string: invalid conversion character: expected 's', 'r', or 'a'");
      } else if (after < j && t[after] != ':') {
        syntax_error(P, (fs_loc){k, after + 1}, "f-string: expecting '}'");
      }
      field->op = (uint8_t)conv;
    } else if (debug && !spec_at) {
      field->op = 'r';
    }
    if (spec_at) {
      if (memchr(t + spec_at, '{', j - spec_at)) {
        fs_node *spec = fsA_new(P->lex.arena, FS_N_FSTR, (fs_loc){spec_at, j});
        fstring_body(P, spec, spec_at, j, raw);
        fsA_push(P->lex.arena, field, spec);
      } else {
        fs_node *spec = str_piece(P, t + spec_at, j - spec_at, (fs_loc){spec_at, j});
        field->str = spec->str; field->slen = spec->slen;
      }
    }
    fsA_push(P->lex.arena, out, field);
    i = j + 1;
    lit_start = i;
  }
  if (nlit) fsA_push(P->lex.arena, out, str_piece(P, lit, nlit, (fs_loc){lit_start, end}));
  free(lit);
}

/* The scanner hands over an f-string as FS_N_FSTR with the body's offset in
 * ival and (raw | triple-quoted << 1) in op; the fields' expressions are
 * parsed here from the source text. */
static fs_node *fstring(fs_parser *P, fs_node *raw) {
  fs_node *out = fsA_new(P->lex.arena, FS_N_FSTR, raw->loc);
  uint32_t nq = raw->op & 2 ? 3 : 1;
  fstring_body(P, out, (uint32_t)raw->ival, raw->loc.end - nq, raw->op & 1);
  if (out->depth > FS_MAX_DEPTH) too_deep(P, out->loc);
  return out;
}

/* ---- errors ---- */

void fsP_flush_held(fs_parser *P) {
  P->recovering = 0;
  if (!P->held[0]) return;
  P->nerrors++;
  fsD_add(P->lex.diags, FS_SEV_ERROR, "syntax", P->lex.src, P->held_loc, "%s", P->held);
  P->held[0] = '\0';
}

/* The colon of a compound statement's header is missing: CPython's words
 * when the line ended right there (the recovery popped nothing, so the
 * error is where ':' belongs), bison's otherwise. */
static void expected_colon(fs_parser *P, fs_loc err) {
  P->recovering = 0;
  if (!P->held[0]) return;
  if (P->held_tok == NEWLINE && err.start == P->held_loc.start) {
    P->held[0] = '\0';
    uint32_t start = P->lex.line_first < err.start ? P->lex.line_first : err.start;
    syntax_error(P, (fs_loc){start, err.start > start ? err.start : start + 1}, "expected ':'");
    return;
  }
  fsP_flush_held(P);
}

void fsP_error(fs_loc *loc, fs_parser *P, const char *msg) {
  int said = P->lex.nerrors && loc->start == P->lex.last_error.start && loc->end == P->lex.last_error.end;
  if (!said) fsP_flush_held(P); /* the previous error's words, before this one's recovery starts */
  P->recovering = 1;
  int t = P->lex.last_tok;
  if ((t == LPAREN || t == LBRACKET || t == LBRACE || t == WITH_LPAREN) && P->lex.nbrackets > 0)
    P->lex.skip_group = P->lex.nbrackets; /* its group is skipped whole, to its closer */
  if (said) return;
  if (strcmp(msg, "memory exhausted") == 0) {
    syntax_error(P, *loc, "expression nested too deeply for the parser");
    return;
  }
  /* Bison says "syntax error, unexpected X, expecting Y"; keep its substance,
   * and CPython's words where they are plain. */
  const char *m = strncmp(msg, "syntax error, ", 14) == 0 ? msg + 14 : msg;
  if (P->lex.last_tok == INDENT) snprintf(P->held, sizeof P->held, "unexpected indent");
  else if (strstr(m, "expecting indent")) snprintf(P->held, sizeof P->held, "expected an indented block");
  else snprintf(P->held, sizeof P->held, "invalid syntax: %s", m);
  P->held_loc = *loc;
  P->held_tok = P->lex.last_tok;
}
