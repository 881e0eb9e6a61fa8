/* except.c -- try/except/else/finally and raise.
 *
 * A run reports an error where it happens (fsE_error); inside a try body
 * it is held instead (E->pending: its words, its location and the class of
 * exception Python would raise), and the try's handlers are asked.  A
 * handler that matches clears it and runs; when none does, an enclosing
 * try may, and the outermost reports it as any error (without the call
 * notes of where it happened).  Exception classes are names: a runtime
 * error's class is read from its words (Python's and torch's), a raise
 * names its own.  Its other half is fsE_error in eval.c. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <errno.h>
#include <string.h>

#include "eval_int.h"

void fsE_exc_clear(struct fsE_exc *x) {
  free(x->type);
  free(x->text);
  free(x->msg);
  *x = (struct fsE_exc){0};
}

/* Python's class of a runtime error, from its words; *text: what str(e) gives. */
static const char *class_of_error(const char *msg, const char **text) {
  static const struct { const char *prefix, *type; } prefixed[] = {
    {"AssertionError", "AssertionError"}, {"KeyError", "KeyError"}, {"RecursionError", "RecursionError"},
    {"KeyboardInterrupt", "KeyboardInterrupt"}, {"MemoryError", "MemoryError"},
    {"OverflowError", "OverflowError"}, {"ValueError", "ValueError"},
  };
  static const struct { const char *words, *type; } contained[] = {
    /* torch's indexing errors (runtime/tensor/index.c), before "must be" */
    {"is out of bounds for dimension", "IndexError"}, {"too many indices for tensor", "IndexError"},
    {"The shape of the mask", "IndexError"}, {"are valid indices", "IndexError"},
    {"tensors used as indices must be", "IndexError"}, {"indexing tensors could not be broadcast", "IndexError"},
    {"slice step cannot be zero", "ValueError"}, {"step must be greater than zero", "ValueError"},
    {"Dimension out of range", "IndexError"},
    /* torch's RuntimeErrors worded with "must be" */
    {"prob_dist must be", "RuntimeError"}, {"Input dtype must be", "RuntimeError"},
    {"is not defined", "NameError"}, {"by zero", "ZeroDivisionError"}, {"index out of range", "IndexError"},
    {"has no attribute", "AttributeError"}, {"out of memory", "MemoryError"},
    {"values to unpack", "ValueError"}, {"invalid literal", "ValueError"},
    {"unsupported operand", "TypeError"}, {"argument", "TypeError"}, {"must be", "TypeError"},
    {"is not callable", "TypeError"}, {"is not iterable", "TypeError"}, {"takes ", "TypeError"},
  };
  *text = msg;
  for (size_t i = 0; i < sizeof prefixed / sizeof *prefixed; i++) {
    size_t n = strlen(prefixed[i].prefix);
    if (strncmp(msg, prefixed[i].prefix, n) == 0) {
      *text = msg[n] == ':' ? msg + n + 1 + (msg[n + 1] == ' ') : msg + n;
      return prefixed[i].type;
    }
  }
  for (size_t i = 0; i < sizeof contained / sizeof *contained; i++)
    if (strstr(msg, contained[i].words)) return contained[i].type;
  return "RuntimeError"; /* torch's errors are RuntimeErrors */
}

void fsE_hold_error(fsE_ctx *E, fs_loc loc, const char *msg) {
  const char *text, *type = class_of_error(msg, &text);
  size_t tn = E->raise_type ? strlen(E->raise_type) : 0;
  if (E->raise_type) /* "ValueError: text", "ValueError", or a re-raised runtime error's words */
    type = E->raise_type, text = strncmp(msg, type, tn) == 0 ? msg + tn + (msg[tn] == ':' ? 2 : 0) : msg;
  E->raise_type = NULL;
  fsE_exc_clear(&E->pending);
  E->pending = (struct fsE_exc){strdup(type), strdup(text), strdup(msg), loc};
  E->reported = true;
  if (!E->status) E->status = fsE_error_status(msg);
}

int fsE_error_status(const char *msg) {
  if (!strncmp(msg, "MemoryError", 11) || strstr(msg, strerror(ENOSPC))) return 3;
  return strcmp(msg, "KeyboardInterrupt") ? 1 : 130;
}

/* Whether an error of class type is caught by `except name`. */
static bool catches(const char *type, const char *name) {
  static const char *const parents[][2] = {
    {"ZeroDivisionError", "ArithmeticError"}, {"IndexError", "LookupError"}, {"KeyError", "LookupError"},
    {"RecursionError", "RuntimeError"}, {"KeyboardInterrupt", "BaseException"}, {"Exception", "BaseException"},
  };
  while (strcmp(type, name) != 0) {
    const char *up = "Exception";
    for (size_t i = 0; i < sizeof parents / sizeof *parents; i++)
      if (strcmp(parents[i][0], type) == 0) up = parents[i][1];
    if (strcmp(type, "BaseException") == 0) return false;
    type = up;
  }
  return true;
}

/* The class a name node spells: `ValueError`, `torch.cuda.OutOfMemoryError`. */
static const char *spelled_class(const fs_node *n) {
  return n && (n->kind == FS_N_NAME || n->kind == FS_N_ATTR) ? n->str : NULL;
}

/* Whether handler h (FS_N_EXCEPT) catches the pending error; -1 on a type it cannot read. */
static int handler_matches(fsE_ctx *E, const fs_node *h) {
  const fs_node *t = h->kids[0];
  if (!t) return 1;
  if (t->kind == FS_N_TUPLE) {
    for (uint32_t i = 0; i < t->nkids; i++)
      if (!spelled_class(t->kids[i])) return -1;
    for (uint32_t i = 0; i < t->nkids; i++)
      if (catches(E->pending.type, t->kids[i]->str)) return 1;
    return 0;
  }
  if (!spelled_class(t)) return -1;
  return catches(E->pending.type, t->str);
}

/* The outermost try found no handler: the error is reported now. */
static void report_pending(fsE_ctx *E) {
  if (!E->pending.msg) return;
  fsD_add(E->diags, FS_SEV_ERROR, "runtime", E->src, E->pending.loc, "%s", E->pending.msg);
  fsE_exc_clear(&E->pending);
}

/* Runs block with the state of an error in flight (pending, retval) put
 * aside; an error of block's own replaces it. */
static fsE_flow run_finally(fsE_ctx *E, const fs_node *block, fsE_flow fl) {
  struct fsE_exc held = E->pending;
  fs_value *retval = E->retval;
  bool reported = E->reported;
  int status = E->status;
  E->pending = (struct fsE_exc){0};
  E->retval = NULL;
  E->reported = false;
  fsE_flow f = fsE_exec_block(E, block);
  if (f == FSE_OK) {
    E->pending = held;
    E->retval = retval;
    E->reported = reported;
    E->status = status ? status : E->status;
    return fl;
  }
  fsE_exc_clear(&held);
  fsV_release(retval);
  return f;
}

fsE_flow fsE_exec_try(fsE_ctx *E, const fs_node *s) {
  for (uint32_t i = 3; i < s->nkids; i++) {
    const char *unsupported = fsA_run_unsupported(s->kids[i]);
    if (unsupported) return fsE_error(E, s->kids[i]->loc, "%s is not supported at run time yet", unsupported), FSE_ERROR;
  }
  int status = E->status;
  E->try_depth++;
  fsE_flow fl = fsE_exec_block(E, s->kids[0]);
  E->try_depth--;
  if (fl == FSE_ERROR && E->pending.msg) {
    const fs_node *h = NULL;
    for (uint32_t i = 3; !h && i < s->nkids; i++) {
      int m = handler_matches(E, s->kids[i]);
      if (m < 0) {
        fsE_exc_clear(&E->pending);
        E->reported = false;
        fsE_error(E, s->kids[i]->kids[0]->loc, "an except clause's class must be a name or a tuple of names "
                  "at run time yet");
        return FSE_ERROR;
      }
      if (m) h = s->kids[i];
    }
    if (h) { /* caught: the run goes on as if nothing had been reported */
      struct fsE_exc exc = E->pending, *outer = E->handling;
      E->pending = (struct fsE_exc){0};
      E->reported = false;
      E->status = status;
      E->handling = &exc;
      fs_value *text = h->kids[2] ? fsV_cstr(exc.text) : NULL;
      fl = h->kids[2] && (!text || fsE_set_name(E, h->kids[2]->str, text) < 0)
               ? (fsE_error(E, h->kids[2]->loc, "out of memory"), FSE_ERROR)
               : fsE_exec_block(E, h->kids[1]);
      fsV_release(text);
      E->handling = outer;
      fsE_exc_clear(&exc);
    }
  } else if (fl == FSE_OK && s->kids[1]) {
    fl = fsE_exec_block(E, s->kids[1]);
  }
  if (s->kids[2]) fl = run_finally(E, s->kids[2], fl);
  if (fl == FSE_ERROR && !E->try_depth) report_pending(E);
  return fl;
}

int fsE_call_until_stop(fsE_ctx *E, fs_value *callee, const fsV_args *a, fs_value **out) {
  int status = E->status;
  E->try_depth++; /* held, as in a try body, so that StopIteration can be caught */
  *out = fsE_call(E, callee, a);
  E->try_depth--;
  if (*out) return 1;
  if (E->pending.msg && catches(E->pending.type, "StopIteration")) {
    fsE_exc_clear(&E->pending);
    E->reported = false;
    E->status = status;
    return 0;
  }
  if (!E->try_depth) report_pending(E);
  return -1;
}

fsE_flow fsE_exec_raise(fsE_ctx *E, const fs_node *s) {
  const fs_node *x = s->nkids ? s->kids[0] : NULL;
  if (!x) { /* bare raise: the error being handled, again */
    if (!E->handling) return fsE_error(E, s->loc, "RuntimeError: No active exception to reraise"), FSE_ERROR;
    E->raise_type = E->handling->type;
    fsE_error(E, s->loc, "%s", E->handling->msg);
    E->raise_type = NULL;
    return FSE_ERROR;
  }
  const fs_node *cls = x->kind == FS_N_CALL ? x->kids[0] : x;
  if (!spelled_class(cls))
    return fsE_error(E, x->loc, "raise takes an exception class or a call of one at run time yet"), FSE_ERROR;
  char *text = NULL;
  if (x->kind == FS_N_CALL && x->nkids > 1 && x->kids[1]->kind != FS_N_KWARG && x->kids[1]->kind != FS_N_STARRED) {
    fs_value *v = fsE_eval(E, x->kids[1]);
    if (!v) return FSE_ERROR;
    text = fsV_tostr(v);
    fsV_release(v);
    if (!text) return fsE_error(E, x->loc, "%s", fsV_error()), FSE_ERROR;
  }
  E->raise_type = cls->str;
  if (text && *text) fsE_error(E, s->loc, "%s: %s", cls->str, text);
  else fsE_error(E, s->loc, "%s", cls->str);
  E->raise_type = NULL;
  free(text);
  return FSE_ERROR;
}
