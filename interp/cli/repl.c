/* repl.c -- the interactive session. The session is the text of every
 * accepted entry; a new entry is parsed and checked as the continuation of
 * that text (so its diagnostics are those `fabricscript check` gives the
 * saved session); an entry with an error is dropped, a clean one is kept and
 * run. libedit's native interface, unbuffered (one key per el_gets), lets a
 * select() loop see Ctrl-C at the prompt, as Python's REPL does. Not its
 * readline emulation: that keeps rl_line_buffer pointing into a conversion
 * buffer el_gets reallocates past each 1 KB of line, then writes through the
 * stale pointer (libedit 3.1-20221030: a heap overflow from ~1 KB of input). */
#define _POSIX_C_SOURCE 200809L
#include "repl.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <unistd.h>

#include <histedit.h>
#include <wchar.h>

#include "config.h"
#include "eval.h"
#include "lex.h"
#include "signatures.h"

/* One flag for both places Ctrl-C can land: the prompt (here) and a running
 * statement (the evaluator's loops). */
static void on_sigint(int sig) {
  (void)sig;
  fsE_interrupt = 1;
}

/* --- growable text ------------------------------------------------------- */

typedef struct buf { char *s; size_t n, cap; } buf;

static void buf_add(buf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    b->s = fsA_xrealloc(b->s, cap);
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
}

/* --- the session ---------------------------------------------------------- */

typedef struct entry { fs_source *src; fs_node *ast; } entry;

typedef struct session {
  const fsRP_options *opt;
  buf text;           /* every accepted entry */
  buf clean;          /* the accepted entries that also ran without error: :save's script */
  entry *kept; size_t nkept, capkept; /* sources and trees that run code may point into */
  buf pending;        /* the entry being typed */
  int quit;
} session;

static void keep(session *S, fs_source *src, fs_node *ast) {
  if (S->nkept == S->capkept) {
    S->capkept = S->capkept ? 2 * S->capkept : 16;
    S->kept = fsA_xrealloc(S->kept, S->capkept * sizeof *S->kept);
  }
  S->kept[S->nkept++] = (entry){src, ast};
}

/* Moves the diagnostics located at or after `from` into `out`. */
static void select_new(const fs_diags *all, uint32_t from, fs_diags *out) {
  for (size_t i = 0; i < all->n; i++) {
    const fs_diag *g = &all->items[i];
    if (g->src && g->loc.start < from) continue;
    fs_diag *c = fsD_add(out, g->severity, g->rule, g->src, g->loc, "%s", g->message);
    for (size_t j = 0; j < g->nnotes; j++)
      fsD_note(c, g->notes[j].src, g->notes[j].loc, "%s", g->notes[j].message);
    if (g->help) fsD_help(c, "%s", g->help);
  }
}

/* Checks `text` as the continuation of the session and, when clean, runs it.
 * Returns 1 if the entry was accepted. */
static int submit(session *S, const char *text, size_t len) {
  const fsRP_engine *E = S->opt->engine;
  uint32_t base = (uint32_t)S->text.n;
  buf cand = {0};
  if (S->text.n) buf_add(&cand, S->text.s, S->text.n);
  buf_add(&cand, text, len);
  if (len == 0 || text[len - 1] != '\n') buf_add(&cand, "\n", 1);
  fs_source *src = fsA_source_from_buffer("<stdin>", cand.s, cand.n);
  free(cand.s);
  fs_diags all, shown;
  fsD_init(&all);
  fsD_init(&shown);
  int nerrors = 0;
  fs_node *ast = fsP_parse(src, &all, &nerrors);
  if (!nerrors && E && E->check) E->check(E->ud, src, ast, &all);
  select_new(&all, base, &shown);
  fsD_sort(&shown);
  fsD_render_all(stderr, &shown, &S->opt->render);
  int ok = !fsD_has_errors(&shown) && !nerrors;
  /* An entry that passed the check is part of the session even if it fails
   * while running: what it did before failing (an interrupted training loop)
   * stays done, and later entries are checked knowing it. */
  int ran_clean = ok;
  if (ok && E && E->exec) {
    size_t first = 0;
    while (first < ast->nkids && ast->kids[first]->loc.start < base) first++;
    fs_diags run;
    fsD_init(&run);
    ran_clean = E->exec(E->ud, src, ast->kids + first, ast->nkids - first, &run) == 0 && !fsD_has_errors(&run);
    fsD_render_all(stderr, &run, &S->opt->render);
    fsD_free(&run);
  }
  /* A saved session must run as a script: an entry that failed while running
   * (a runtime error, Ctrl-C) would fail there again, so it is not saved. */
  if (ran_clean) buf_add(&S->clean, src->text + base, src->len - base);
  fsD_free(&all);
  fsD_free(&shown);
  if (!ok) {
    fsA_free(ast);
    fsA_source_free(src);
    return 0;
  }
  S->text.n = 0;
  buf_add(&S->text, src->text, src->len);
  keep(S, src, ast);
  return 1;
}

/* --- commands ------------------------------------------------------------- */

static const char help_text[] =
  "Statements are checked against everything entered before them, then run.\n"
  "A block (model, def, for, if, with) ends with a blank line.\n"
  "  :help        this text\n"
  "  :check       check the whole session again\n"
  "  :plan        the per-rank memory plan of the session (as `fabricscript plan`)\n"
  "  :save FILE   write the statements that checked and ran cleanly as a script\n"
  "  :load FILE   check and run a script as one entry\n"
  "  :quit        leave (also Ctrl-D); Ctrl-C interrupts a running statement\n";

static int save_session(session *S, const char *path) {
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (!tmp) return -1;
  snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  int ok = f && fwrite(S->clean.s ? S->clean.s : "", 1, S->clean.n, f) == S->clean.n;
  if (f && fclose(f) != 0) ok = 0;
  if (ok && rename(tmp, path) != 0) ok = 0;
  if (!ok) { fprintf(stderr, "fabricscript: cannot write %s: %s\n", path, strerror(errno)); remove(tmp); }
  free(tmp);
  return ok ? 0 : -1;
}

static void command(session *S, char *line) {
  char *arg = line + 1;
  while (*arg && !isspace((unsigned char)*arg)) arg++;
  if (*arg) *arg++ = '\0';
  while (isspace((unsigned char)*arg)) arg++;
  char *end = arg + strlen(arg);
  while (end > arg && isspace((unsigned char)end[-1])) *--end = '\0';
  const char *cmd = line + 1;
  if (strcmp(cmd, "help") == 0) fputs(help_text, stdout);
  else if (strcmp(cmd, "quit") == 0 || strcmp(cmd, "q") == 0) S->quit = 1;
  else if (strcmp(cmd, "check") == 0 || strcmp(cmd, "plan") == 0) {
    int plan = cmd[0] == 'p';
    fs_source *src = fsA_source_from_buffer("<stdin>", S->text.s ? S->text.s : "", S->text.n);
    fs_diags d;
    fsD_init(&d);
    int ne = 0;
    fs_node *ast = fsP_parse(src, &d, &ne);
    const fsRP_engine *E = S->opt->engine;
    if (!ne && E && E->check) E->check(E->ud, src, ast, &d);
    if (plan && !fsD_has_errors(&d) && E && E->plan) E->plan(E->ud, src, ast, &d);
    fsD_sort(&d);
    fsD_render_all(stderr, &d, &S->opt->render);
    if (!plan && !fsD_has_errors(&d)) printf("session checks clean (%zu lines)\n", fsA_source_nlines(src) - (src->len > 0));
    fsD_free(&d);
    fsA_free(ast);
    fsA_source_free(src);
  } else if (strcmp(cmd, "save") == 0) {
    if (!*arg) fputs("usage: :save FILE\n", stderr);
    else if (save_session(S, arg) == 0) printf("saved %zu bytes to %s\n", S->clean.n, arg);
  } else if (strcmp(cmd, "load") == 0) {
    fs_source *file = *arg ? fsA_source_from_file(arg, 0) : NULL;
    if (!*arg) fputs("usage: :load FILE\n", stderr);
    else if (!file) fprintf(stderr, "fabricscript: %s: %s\n", arg, strerror(errno));
    else submit(S, file->text, file->len);
    fsA_source_free(file);
  } else {
    fprintf(stderr, "unknown command ':%s' (:help lists them)\n", cmd);
  }
}

/* --- completion ----------------------------------------------------------- */

static session *completing; /* libedit's completion callbacks take no user data */

static const char *const keywords[] = {
  "def", "return", "if", "elif", "else", "for", "in", "with", "as", "and", "or",
  "not", "True", "False", "None", "pass", "break", "continue", "assert", "model",
  "repeat", "residual",
};

typedef struct names { char **v; size_t n, cap; } names;

static void names_add(names *N, const char *s, size_t len) {
  for (size_t i = 0; i < N->n; i++)
    if (strlen(N->v[i]) == len && strncmp(N->v[i], s, len) == 0) return;
  if (N->n == N->cap) {
    N->cap = N->cap ? 2 * N->cap : 64;
    char **v = realloc(N->v, N->cap * sizeof *v);
    if (!v) return;
    N->v = v;
  }
  char *c = strndup(s, len);
  if (c) N->v[N->n++] = c;
}

static void names_free(names *N) {
  for (size_t i = 0; i < N->n; i++) free(N->v[i]);
  free(N->v);
}

/* The builtin type a statement's value has, when syntax alone tells. */
static const char *value_type(const fs_node *v, const fs_node *const *stmts, size_t nstmts);

static const char *type_of_name(const char *name, const fs_node *const *stmts, size_t n) {
  for (size_t i = n; i-- > 0;) { /* the last binding wins */
    const fs_node *s = stmts[i];
    if (s->kind == FS_N_MODEL && strcmp(s->str, name) == 0) return "ModelClass";
    if (s->kind != FS_N_ASSIGN) continue;
    const fs_node *t = s->kids[0], *v = s->kids[1];
    if (t->kind == FS_N_NAME && strcmp(t->str, name) == 0) return value_type(v, stmts, i);
    if (t->kind == FS_N_TUPLE && v->kind == FS_N_CALL)
      for (uint32_t k = 0; k < t->nkids; k++)
        if (t->kids[k]->kind == FS_N_NAME && strcmp(t->kids[k]->str, name) == 0)
          return k == 0 ? "Module" : "Optimizer"; /* model, optimizer = fabric.setup(...) */
  }
  return NULL;
}

static const char *value_type(const fs_node *v, const fs_node *const *stmts, size_t nstmts) {
  if (v->kind == FS_N_STR || v->kind == FS_N_FSTR) return "str";
  if (v->kind == FS_N_LIST) return "list";
  if (v->kind == FS_N_DICT) return "dict";
  if (v->kind != FS_N_CALL) return NULL;
  const fs_node *callee = v->kids[0];
  if (callee->kind == FS_N_NAME) {
    const fsSig *sig = fsSig_find(callee->str);
    if (sig) return sig->kind == FSSIG_LAYER ? "Module" : sig->returns;
    return type_of_name(callee->str, stmts, nstmts) ? "Module" : NULL; /* a declared model */
  }
  if (callee->kind == FS_N_ATTR && callee->kids[0]->kind == FS_N_NAME) {
    const char *recv = type_of_name(callee->kids[0]->str, stmts, nstmts);
    const fsSig *sig = recv ? fsSig_member(recv, callee->str) : NULL;
    return sig ? sig->returns : NULL;
  }
  return NULL;
}

static names candidates;

/* Fills `candidates` for the word that ends at `start` in the line. */
static void collect(session *S, const char *line, int start) {
  for (size_t i = 0; i < candidates.n; i++) free(candidates.v[i]);
  candidates.n = 0;
  size_t nstmts = 0;
  for (size_t i = 0; i < S->nkept; i++) nstmts += S->kept[i].ast->nkids;
  const fs_node **stmts = malloc((nstmts ? nstmts : 1) * sizeof *stmts);
  if (!stmts) return;
  nstmts = 0;
  for (size_t i = 0; i < S->nkept; i++)
    for (uint32_t k = 0; k < S->kept[i].ast->nkids; k++) {
      const fs_node *s = S->kept[i].ast->kids[k];
      if (s->loc.start >= (i ? S->kept[i - 1].src->len : 0)) stmts[nstmts++] = s;
    }
  size_t nsig;
  const fsSig *all = fsSig_all(&nsig);
  if (start > 0 && line[start - 1] == '.') {
    int b = start - 1;
    while (b > 0 && (isalnum((unsigned char)line[b - 1]) || line[b - 1] == '_')) b--;
    char *recv_name = strndup(line + b, (size_t)(start - 1 - b));
    const char *type = recv_name ? type_of_name(recv_name, stmts, nstmts) : NULL;
    free(recv_name);
    size_t tl = type ? strlen(type) : 0;
    for (size_t i = 0; type && i < nsig; i++)
      if (strncmp(all[i].name, type, tl) == 0 && all[i].name[tl] == '.')
        names_add(&candidates, all[i].name + tl + 1, strlen(all[i].name + tl + 1));
  } else {
    for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
      names_add(&candidates, keywords[i], strlen(keywords[i]));
    for (size_t i = 0; i < nsig; i++)
      if (all[i].kind != FSSIG_METHOD && all[i].kind != FSSIG_ATTR)
        names_add(&candidates, all[i].name, strlen(all[i].name));
    for (size_t i = 0; i < nstmts; i++) {
      const fs_node *s = stmts[i];
      if ((s->kind == FS_N_MODEL || s->kind == FS_N_DEF) && s->str) names_add(&candidates, s->str, strlen(s->str));
      const fs_node *t = s->kind == FS_N_ASSIGN ? s->kids[0] : s->kind == FS_N_FOR ? s->kids[0] : NULL;
      if (t && t->kind == FS_N_NAME) names_add(&candidates, t->str, strlen(t->str));
      if (t && t->kind == FS_N_TUPLE)
        for (uint32_t k = 0; k < t->nkids; k++)
          if (t->kids[k]->kind == FS_N_NAME) names_add(&candidates, t->kids[k]->str, strlen(t->kids[k]->str));
    }
  }
  free(stmts);
}

/* Characters that end the word being completed. */
static const char word_breaks[] = " \t\n()[]{},.=+-*/%<>:\"'";

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The candidates for the word, sorted, in columns (as readline lists them). */
static void list_matches(const char *word, size_t wordlen) {
  const char **match = malloc((candidates.n ? candidates.n : 1) * sizeof *match);
  if (!match) return;
  size_t width = 0, nmatch = 0;
  for (size_t i = 0; i < candidates.n; i++)
    if (strncmp(candidates.v[i], word, wordlen) == 0) {
      size_t l = strlen(candidates.v[i]);
      if (l > width) width = l;
      match[nmatch++] = candidates.v[i];
    }
  qsort(match, nmatch, sizeof *match, by_name);
  struct winsize ws;
  size_t cols = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
  size_t per_row = cols / (width + 2) ? cols / (width + 2) : 1;
  fputc('\n', stdout);
  for (size_t k = 0; k < nmatch; k++)
    printf("%-*s%s", (int)width + 2, match[k], (k + 1) % per_row == 0 || k + 1 == nmatch ? "\n" : "");
  fflush(stdout);
  free(match);
}

/* Tab: the word before the cursor grows to the candidates' common prefix;
 * when it cannot grow, a second Tab lists them (as readline does). */
static unsigned char complete_key(EditLine *el, int ch) {
  (void)ch;
  static char *last_ambiguous; /* the line at the last Tab that could not grow */
  const LineInfo *li = el_line(el);
  size_t cursor = (size_t)(li->cursor - li->buffer), start = cursor;
  while (start > 0 && !strchr(word_breaks, li->buffer[start - 1])) start--;
  char *line = strndup(li->buffer, cursor);
  if (!line) return CC_REFRESH_BEEP;
  collect(completing, line, (int)start);
  const char *word = line + start, *first = NULL;
  size_t wordlen = cursor - start, common = 0, nmatch = 0;
  for (size_t i = 0; i < candidates.n; i++) {
    const char *c = candidates.v[i];
    if (strncmp(c, word, wordlen) != 0) continue;
    if (!first) first = c, common = strlen(c);
    else
      for (size_t k = wordlen; k < common; k++)
        if (c[k] != first[k]) { common = k; break; }
    nmatch++;
  }
  unsigned char r = CC_REFRESH_BEEP;
  char *now = NULL; /* the line after this Tab, while still ambiguous */
  if (common > wordlen) {
    size_t n = cursor + common - wordlen;
    now = malloc(n + 1);
    if (now) {
      memcpy(now, line, cursor);
      memcpy(now + cursor, first + wordlen, common - wordlen);
      now[n] = '\0';
      r = el_insertstr(el, now + cursor) == 0 ? CC_REFRESH : CC_REFRESH_BEEP;
    }
  } else if (nmatch > 1 && last_ambiguous && strcmp(last_ambiguous, line) == 0) {
    list_matches(word, wordlen);
    r = CC_REDISPLAY;
  } else {
    now = line;
    line = NULL;
  }
  free(last_ambiguous);
  last_ambiguous = nmatch > 1 ? now : NULL;
  if (last_ambiguous != now) free(now);
  free(line);
  return r;
}

/* --- the loop ------------------------------------------------------------- */

static session *active; /* libedit's prompt callback takes no user data */

static char *prompt(EditLine *el) {
  (void)el;
  return active->pending.n ? "... " : ">>> ";
}

/* A finished line (without its newline), or NULL for Ctrl-D. */
static void on_line(session *S, History *hist, const char *line) {
  HistEvent ev;
  fsE_interrupt = 0; /* a Ctrl-C from here on is for what this line starts */
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  sigprocmask(SIG_UNBLOCK, &sigint, NULL);
  if (!line) { /* Ctrl-D */
    if (S->pending.n) { submit(S, S->pending.s, S->pending.n); S->pending.n = 0; }
    putchar('\n');
    S->quit = 1;
    return;
  }
  int blank = line[strspn(line, " \t")] == '\0';
  if (S->pending.n == 0 && line[0] == ':') {
    history(hist, &ev, H_ENTER, line);
    char *cmd = strdup(line);
    if (cmd) command(S, cmd);
    free(cmd);
  } else if (!(S->pending.n == 0 && blank)) {
    buf_add(&S->pending, line, strlen(line));
    buf_add(&S->pending, "\n", 1);
    /* A recalled multi-line entry (it holds newlines) is complete as it is. */
    if (strchr(line, '\n') || !fsRP_needs_more(S->pending.s, blank)) {
      /* One history entry per entry, its lines joined, so Up recalls a
       * whole block; the blank line that ended it is not part of it. */
      size_t n = S->pending.n;
      while (n > 0 && (S->pending.s[n - 1] == '\n' || S->pending.s[n - 1] == ' ' || S->pending.s[n - 1] == '\t')) n--;
      char *whole = strndup(S->pending.s, n);
      if (whole) history(hist, &ev, H_ENTER, whole);
      free(whole);
      submit(S, S->pending.s, S->pending.n);
      S->pending.n = 0;
    }
  }
  fflush(stdout);
}

int fsRP_main(const fsRP_options *opt) {
  session S = {0};
  S.opt = opt;
  active = completing = &S;
  char *history_file = NULL;
  if (opt->history_path) history_file = strdup(opt->history_path);
  else if (getenv("HOME")) {
    size_t n = strlen(getenv("HOME")) + 32;
    history_file = malloc(n);
    if (history_file) snprintf(history_file, n, "%s/.fabricscript_history", getenv("HOME"));
  }
  EditLine *el = el_init("fabricscript", stdin, stdout, stderr);
  History *hist = history_init();
  if (!el || !hist) {
    fputs("fabricscript: cannot start the line editor\n", stderr);
    if (el) el_end(el);
    if (hist) history_end(hist);
    free(history_file);
    return 3;
  }
  HistEvent ev;
  history(hist, &ev, H_SETSIZE, 1 << 30);
  if (history_file) history(hist, &ev, H_LOAD, history_file);
  el_set(el, EL_HIST, history, hist);
  el_set(el, EL_EDITOR, "emacs");
  el_set(el, EL_SIGNAL, 0); /* Ctrl-C is ours (on_sigint) */
  el_set(el, EL_PROMPT, prompt);
  el_set(el, EL_ADDFN, "fs-complete", "complete a name of the session or the API", complete_key);
  el_set(el, EL_BIND, "^I", "fs-complete", NULL);
  /* readline's keys where libedit's emacs map differs (its ^U is a repeat count) */
  static const char *const keys[][2] = {
    {"^R", "em-inc-search-prev"}, {"^U", "em-kill-line"}, {"^W", "ed-delete-prev-word"},
    {"\\e[1~", "ed-move-to-beg"}, {"\\e[4~", "ed-move-to-end"}, {"\\e[7~", "ed-move-to-beg"},
    {"\\e[8~", "ed-move-to-end"}, {"\\e[H", "ed-move-to-beg"}, {"\\e[F", "ed-move-to-end"},
    {"\\e[3~", "ed-delete-next-char"},
  };
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) el_set(el, EL_BIND, keys[i][0], keys[i][1], NULL);
  el_source(el, NULL); /* ~/.editrc */
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint; /* no SA_RESTART: select() must return EINTR */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  printf("fabricscript %s -- :help for commands, Ctrl-D to leave\n", PACKAGE_VERSION);
  fflush(stdout);
  el_set(el, EL_UNBUFFERED, 1); /* raw terminal, the prompt, an empty line */
  /* SIGINT is blocked except inside pselect (and while a line runs), so a
   * Ctrl-C that came between two waits is seen at the next one, not lost. */
  sigset_t sigint, unblocked;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  while (!S.quit) {
    sigprocmask(SIG_BLOCK, &sigint, &unblocked);
    int r = 0;
    if (!fsE_interrupt) {
      fd_set in;
      FD_ZERO(&in);
      FD_SET(STDIN_FILENO, &in);
      r = pselect(STDIN_FILENO + 1, &in, NULL, NULL, NULL, &unblocked);
    }
    int interrupted = fsE_interrupt;
    fsE_interrupt = 0;
    if (interrupted) {
      sigprocmask(SIG_SETMASK, &unblocked, NULL);
      el_set(el, EL_UNBUFFERED, 0); /* cooked terminal; the half line is dropped */
      S.pending.n = 0;
      fputs("\nKeyboardInterrupt\n", stdout);
      fflush(stdout);
      el_set(el, EL_UNBUFFERED, 1);
      continue;
    }
    if (r < 0 && errno == EINTR) { sigprocmask(SIG_SETMASK, &unblocked, NULL); continue; }
    if (r < 0) break;
    int count = 0;
    /* One key: the line so far, wide (el_gets would encode the whole line
     * at every key, quadratic in a pasted line); NULL and -1 when the line
     * is empty, or (errno set) when the terminal cannot be read. */
    errno = 0;
    const wchar_t *got = el_wgets(el, &count);
    int eof = (count < 0 && errno != 0) || (got && count == 1 && got[0] == 4); /* or Ctrl-D */
    if (eof || (got && count > 0 && (got[count - 1] == '\n' || got[count - 1] == '\r'))) {
      const LineInfo *li = eof ? NULL : el_line(el); /* the finished line, encoded once */
      size_t n = li ? (size_t)(li->lastchar - li->buffer) : 0;
      if (n && (li->buffer[n - 1] == '\n' || li->buffer[n - 1] == '\r')) n--;
      char *line = li ? strndup(li->buffer, n) : NULL;
      el_set(el, EL_UNBUFFERED, 0); /* a line runs with the terminal cooked */
      on_line(&S, hist, eof ? NULL : line ? line : "");
      free(line);
      if (!S.quit) el_set(el, EL_UNBUFFERED, 1); /* the next prompt */
    }
    sigprocmask(SIG_SETMASK, &unblocked, NULL);
  }
  el_set(el, EL_UNBUFFERED, 0);
  sigaction(SIGINT, &old, NULL);
  if (history_file) history(hist, &ev, H_SAVE, history_file);
  el_end(el);
  history_end(hist);
  free(history_file);
  for (size_t i = 0; i < S.nkept; i++) { fsA_free(S.kept[i].ast); fsA_source_free(S.kept[i].src); }
  free(S.kept);
  free(S.text.s);
  free(S.clean.s);
  free(S.pending.s);
  names_free(&candidates);
  candidates = (names){0};
  return 0;
}
