/* testrun.c -- `fabricscript test`: reads each script's annotations, runs
 * the interpreter on it as a child process and compares what it did. */
#define _POSIX_C_SOURCE 200809L
#include "testrun.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Output past this is a runaway script: kill it rather than fill memory. */
#define OUTPUT_LIMIT ((size_t)64 << 20)

static char *xstrndup(const char *s, size_t n) {
  char *d = fsA_xrealloc(NULL, n + 1);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* A growable array of strings. */
typedef struct strv { char **v; size_t n, cap; } strv;

static void strv_push(strv *a, char *s) {
  if (a->n == a->cap) a->v = fsA_xrealloc(a->v, (a->cap = a->cap ? 2 * a->cap : 8) * sizeof *a->v);
  a->v[a->n++] = s;
}

static void strv_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* ---- annotations --------------------------------------------------------- */

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Offset of the comment's `#` in line[0, n), or n: quotes open strings
 * (with backslash escapes) that end at their quote or at the end of line. */
static size_t comment_start(const char *line, size_t n) {
  char quote = 0;
  for (size_t i = 0; i < n; i++) {
    if (quote) {
      if (line[i] == '\\') i++;
      else if (line[i] == quote) quote = 0;
    } else if (line[i] == '"' || line[i] == '\'') {
      quote = line[i];
    } else if (line[i] == '#') {
      return i;
    }
  }
  return n;
}

/* Splits s[0, n) on blanks into args; '...' and "..." group (no
 * escapes inside). Returns -1 on an unterminated quote. */
static int split_args(const char *s, size_t n, strv *args) {
  size_t i = 0;
  while (i < n) {
    while (i < n && is_blank(s[i])) i++;
    if (i == n) break;
    char *tok = fsA_xrealloc(NULL, n - i + 1);
    size_t t = 0;
    while (i < n && !is_blank(s[i])) {
      if (s[i] == '"' || s[i] == '\'') {
        const char *close = memchr(s + i + 1, s[i], n - i - 1);
        if (!close) { free(tok); return -1; }
        memcpy(tok + t, s + i + 1, (size_t)(close - s - i - 1));
        t += (size_t)(close - s - i - 1);
        i = (size_t)(close - s) + 1;
      } else {
        tok[t++] = s[i++];
      }
    }
    tok[t] = '\0';
    strv_push(args, tok);
  }
  return 0;
}

static const char *keyword_after(const char *c, const char *end, const char *kw) {
  size_t n = strlen(kw);
  return (size_t)(end - c) >= n && memcmp(c, kw, n) == 0 ? c + n : NULL;
}

static void trim(const char **b, const char **e) {
  while (*b < *e && is_blank(**b)) (*b)++;
  while (*e > *b && is_blank((*e)[-1])) (*e)--;
}

static char *fail_line(uint32_t line, const char *what) {
  int n = snprintf(NULL, 0, "line %u: %s", line, what);
  char *s = fsA_xrealloc(NULL, (size_t)n + 1);
  snprintf(s, (size_t)n + 1, "line %u: %s", line, what);
  return s;
}

/* One line's annotation; returns -1 with spec->error set if malformed. */
static int parse_line(fsX_spec *spec, strv *out, strv *args, uint32_t lineno,
                      const char *line, size_t n) {
  size_t h = comment_start(line, n);
  if (h == n) return 0;
  int whole = 1;
  for (size_t i = 0; i < h; i++) whole &= is_blank(line[i]);
  const char *c = line + h + 1, *end = line + n, *rest;
  while (c < end && is_blank(*c)) c++;
  fs_severity sev = FS_SEV_WARNING;
  int in_help = 0;
  if ((rest = keyword_after(c, end, "error:")) != NULL) sev = FS_SEV_ERROR;
  else if ((rest = keyword_after(c, end, "help:")) != NULL) { sev = FS_SEV_ERROR; in_help = 1; }
  else if ((rest = keyword_after(c, end, "note:")) != NULL) sev = FS_SEV_NOTE;
  else rest = keyword_after(c, end, "warning:");
  if (rest) {
    trim(&rest, &end);
    if (rest == end) {
      spec->error = fail_line(lineno, "an error, warning, note or help annotation needs the text");
      return -1;
    }
    spec->expects = fsA_xrealloc(spec->expects, (spec->nexpects + 1) * sizeof *spec->expects);
    spec->expects[spec->nexpects++] =
        (fsX_expect){ sev, lineno, xstrndup(rest, (size_t)(end - rest)), in_help };
    return 0;
  }
  int kind = (rest = keyword_after(c, end, "out:")) ? 'o'
             : (rest = keyword_after(c, end, "args:")) ? 'a'
             : (rest = keyword_after(c, end, "mode:")) ? 'm'
             : (rest = keyword_after(c, end, "warnings:")) ? 'w' : 0;
  if (!kind) return 0;
  if (!whole) {
    spec->error = fail_line(lineno, "`# out:`, `# args:`, `# mode:` and `# warnings:` must be "
                                    "whole-line comments");
    return -1;
  }
  if (kind == 'o') {
    if (rest < end && *rest == ' ') rest++;
    strv_push(out, xstrndup(rest, (size_t)(end - rest)));
  } else if (kind == 'a') {
    if (split_args(rest, (size_t)(end - rest), args) < 0) {
      spec->error = fail_line(lineno, "unterminated quote in `# args:`");
      return -1;
    }
  } else {
    /* `# mode: check|run` (or plan), `# warnings: exact|allowed`: a flag set or cleared */
    static const char *const words[][3] = {
      { "check", "run", "`# mode:` is `check`, `plan` or `run`" },
      { "exact", "allowed", "`# warnings:` is `exact` or `allowed`" } };
    const char *const *w = words[kind == 'w'];
    int *flag = kind == 'w' ? &spec->exact_warnings : &spec->check_mode;
    trim(&rest, &end);
    size_t len = (size_t)(end - rest);
    if (kind != 'w' && len == 4 && memcmp(rest, "plan", 4) == 0) *flag = 2;
    else if (len == strlen(w[0]) && memcmp(rest, w[0], len) == 0) *flag = 1;
    else if (len == strlen(w[1]) && memcmp(rest, w[1], len) == 0) *flag = 0;
    else {
      spec->error = fail_line(lineno, w[2]);
      return -1;
    }
  }
  return 0;
}

int fsX_parse_spec(const char *text, size_t len, fsX_spec *spec) {
  memset(spec, 0, sizeof *spec);
  strv out = { 0 }, args = { 0 };
  int rc = 0;
  uint32_t lineno = 1;
  for (size_t i = 0; i < len && rc == 0; lineno++) {
    const char *nl = memchr(text + i, '\n', len - i);
    size_t n = nl ? (size_t)(nl - text) - i : len - i;
    size_t m = n > 0 && text[i + n - 1] == '\r' ? n - 1 : n;
    rc = parse_line(spec, &out, &args, lineno, text + i, m);
    i += n + 1;
  }
  spec->out = out.v; spec->nout = out.n;
  spec->args = args.v; spec->nargs = args.n;
  return rc;
}

void fsX_spec_free(fsX_spec *spec) {
  for (size_t i = 0; i < spec->nexpects; i++) free(spec->expects[i].text);
  free(spec->expects);
  strv_free(spec->out, spec->nout);
  strv_free(spec->args, spec->nargs);
  free(spec->error);
  memset(spec, 0, sizeof *spec);
}

/* ---- running ----------------------------------------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void close_pair(int p[2]) {
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
}

static int cloexec_pipe(int p[2]) {
  if (pipe(p) < 0) { p[0] = p[1] = -1; return -1; }
  fcntl(p[0], F_SETFD, FD_CLOEXEC);
  fcntl(p[1], F_SETFD, FD_CLOEXEC);
  return 0;
}

/* In the child: wire the pipes and exec; an error goes back through report
 * as errno (its close on exec tells the parent that exec worked). */
static void exec_child(const char *exe, char *const argv[], int out, int err, int report) {
  setpgid(0, 0);
  int nul = open("/dev/null", O_RDONLY);
  if (nul >= 0 && dup2(nul, 0) >= 0 && dup2(out, 1) >= 0 && dup2(err, 2) >= 0)
    execv(exe, argv);
  int e = errno;
  if (write(report, &e, sizeof e) < 0) _exit(126);
  _exit(127);
}

typedef struct capture { int fd; char **buf; size_t *len, cap; } capture;

/* Reads what fd has; 0 at end of file or error, 1 to keep reading. */
static int drain(capture *c) {
  if (c->cap - *c->len < 65536) *c->buf = fsA_xrealloc(*c->buf, (c->cap = 2 * c->cap + 65536) + 1);
  ssize_t n = read(c->fd, *c->buf + *c->len, c->cap - *c->len);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
  if (n <= 0) return 0;
  *c->len += (size_t)n;
  (*c->buf)[*c->len] = '\0';
  return 1;
}

/* Collects the child's output until both pipes close, the deadline passes
 * or the output grows past OUTPUT_LIMIT. */
static void collect(fsX_result *r, int out, int err, double deadline) {
  capture cap[2] = { { out, &r->out, &r->out_len, 0 }, { err, &r->err, &r->err_len, 0 } };
  struct pollfd fds[2] = { { out, POLLIN, 0 }, { err, POLLIN, 0 } };
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    double left = deadline - now();
    if (left <= 0) { r->timed_out = 1; return; }
    int k = poll(fds, 2, left > 3600 ? 3600000 : (int)ceil(left * 1000));
    if (k < 0 && errno != EINTR) { r->timed_out = 1; return; }
    for (int i = 0; k > 0 && i < 2; i++)
      if (fds[i].fd >= 0 && fds[i].revents && !drain(&cap[i])) fds[i].fd = -1;
    if (r->out_len + r->err_len > OUTPUT_LIMIT) { r->overflowed = 1; return; }
  }
}

/* Waits for pid until the deadline, then kills its process group. */
static int reap(pid_t pid, fsX_result *r, double deadline) {
  int st = 0;
  pid_t w = 0;
  while (!r->timed_out && !r->overflowed && (w = waitpid(pid, &st, WNOHANG)) == 0) {
    if (now() >= deadline) { r->timed_out = 1; break; }
    nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
  }
  if (r->timed_out || r->overflowed) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {}
  }
  if (w < 0) return -1;
  if (WIFEXITED(st)) r->status = WEXITSTATUS(st);
  else { r->status = -1; r->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0; }
  return 0;
}

int fsX_spawn(const char *exe, char *const argv[], double timeout, fsX_result *r) {
  memset(r, 0, sizeof *r);
  r->timeout = timeout;
  r->out = xstrndup("", 0);
  r->err = xstrndup("", 0);
  int po[2], pe[2], px[2], e;
  cloexec_pipe(po);
  cloexec_pipe(pe);
  cloexec_pipe(px);
  pid_t pid = po[0] < 0 || pe[0] < 0 || px[0] < 0 ? -1 : fork();
  if (pid == 0) exec_child(exe, argv, po[1], pe[1], px[1]);
  e = errno;
  close(po[1]); close(pe[1]); close(px[1]);
  po[1] = pe[1] = px[1] = -1;
  if (pid < 0) goto fail;
  setpgid(pid, pid); /* also here, so that the group exists before any kill */
  ssize_t n;
  while ((n = read(px[0], &e, sizeof e)) < 0 && errno == EINTR) {}
  if (n == (ssize_t)sizeof e) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    goto fail;
  }
  double deadline = now() + timeout;
  collect(r, po[0], pe[0], deadline);
  close_pair(po); close_pair(pe); close_pair(px);
  return reap(pid, r, deadline);
fail:
  close_pair(po); close_pair(pe); close_pair(px);
  errno = e;
  return -1;
}

/* A sanitizer report opens with a rule of `=`: the first line with words
 * in it says more. */
static int has_letter(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z') return 1;
  return 0;
}

void fsX_parse_stderr(fsX_result *r) {
  static const char *const sev[] = { "note", "warning", "error" };
  for (size_t i = 0; i < r->err_len;) {
    const char *nl = memchr(r->err + i, '\n', r->err_len - i);
    size_t n = nl ? (size_t)(nl - r->err) - i : r->err_len - i;
    const char *line = r->err + i;
    i += n + 1;
    if (n == 0) continue;
    json_t *j = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
    const char *s = json_string_value(json_object_get(j, "severity"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    const char *help = json_string_value(json_object_get(j, "help"));
    json_t *ln = json_object_get(j, "line");
    int k = 0;
    while (s && k < 3 && strcmp(s, sev[k]) != 0) k++;
    if (!msg || k == 3 || !s || !(json_is_null(ln) || json_integer_value(ln) > 0)) {
      if (!r->bad_stderr || (!has_letter(r->bad_stderr, strlen(r->bad_stderr)) && has_letter(line, n))) {
        free(r->bad_stderr);
        r->bad_stderr = xstrndup(line, n);
      }
    } else {
      r->diags = fsA_xrealloc(r->diags, (r->ndiags + 1) * sizeof *r->diags);
      r->diags[r->ndiags++] = (fsX_reported){
        (fs_severity)k, json_is_integer(ln) ? (uint32_t)json_integer_value(ln) : 0,
        xstrndup(msg, strlen(msg)), xstrndup(help ? help : "", help ? strlen(help) : 0) };
      /* a diagnostic's own notes answer `# note:` at their lines too */
      json_t *notes = json_object_get(j, "notes"), *note;
      size_t at;
      json_array_foreach(notes, at, note) {
        const char *nm = json_string_value(json_object_get(note, "message"));
        json_t *note_line = json_object_get(note, "line");
        if (!nm || !json_is_integer(note_line)) continue;
        r->diags = fsA_xrealloc(r->diags, (r->ndiags + 1) * sizeof *r->diags);
        r->diags[r->ndiags++] = (fsX_reported){FS_SEV_NOTE, (uint32_t)json_integer_value(note_line),
                                               xstrndup(nm, strlen(nm)), xstrndup("", 0)};
      }
    }
    json_decref(j);
  }
}

void fsX_result_free(fsX_result *r) {
  for (size_t i = 0; i < r->ndiags; i++) {
    free(r->diags[i].message);
    free(r->diags[i].help);
  }
  free(r->diags);
  free(r->out);
  free(r->err);
  free(r->bad_stderr);
  memset(r, 0, sizeof *r);
}

/* ---- comparing ----------------------------------------------------------- */

/* Writes s[0, n) quoted: escapes for quotes, backslashes, control
 * characters and invalid UTF-8, so that a reason is one printable line. */
static void put_quoted(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = fsA_utf8_decode((const unsigned char *)s + i, n - i, &cp);
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c == '\n') fputs("\\n", f);
    else if (c == '\t') fputs("\\t", f);
    else if (c < 0x20 || c == 0x7F || (cp == 0xFFFD && k == 1 && c >= 0x80)) fprintf(f, "\\x%02x", c);
    else fwrite(s + i, 1, k, f);
    i += k;
  }
  fputc('"', f);
}

static void put_cstr(FILE *f, const char *s) { put_quoted(f, s, strlen(s)); }

/* Starts the next reason in the list. */
static void sep(FILE *f) {
  if (ftell(f) > 0) fputs("; ", f);
}

static const char *sev_name(fs_severity s) {
  return s == FS_SEV_ERROR ? "error" : s == FS_SEV_WARNING ? "warning" : "note";
}

static void compare_diags(FILE *f, const fsX_spec *spec, const fsX_result *r) {
  char *used = memset(fsA_xrealloc(NULL, r->ndiags + 1), 0, r->ndiags + 1);
  for (size_t i = 0; i < spec->nexpects; i++) {
    const fsX_expect *x = &spec->expects[i];
    size_t j = 0, near = r->ndiags;
    for (; j < r->ndiags; j++) {
      const fsX_reported *g = &r->diags[j];
      if (used[j] || g->severity != x->severity || g->line != x->line) continue;
      if (strstr(x->in_help ? g->help : g->message, x->text)) break;
      if (near == r->ndiags) near = j;
    }
    if (j < r->ndiags) { used[j] = 1; continue; }
    sep(f);
    fprintf(f, "missing %s at line %u: ", x->in_help ? "help" : sev_name(x->severity), x->line);
    put_cstr(f, x->text);
    if (near < r->ndiags) {
      fputs(" (reported there: ", f);
      put_cstr(f, x->in_help ? r->diags[near].help : r->diags[near].message);
      fputc(')', f);
    }
  }
  for (size_t j = 0; j < r->ndiags; j++) {
    fs_severity s = r->diags[j].severity;
    if (used[j] || !(s == FS_SEV_ERROR || (spec->exact_warnings && s == FS_SEV_WARNING))) continue;
    sep(f);
    fprintf(f, "unexpected %s", sev_name(s));
    if (r->diags[j].line) fprintf(f, " at line %u", r->diags[j].line);
    fputs(": ", f);
    put_cstr(f, r->diags[j].message);
  }
  free(used);
}

/* The first line where stdout differs from the expected lines. */
static void compare_out(FILE *f, const fsX_spec *spec, const fsX_result *r) {
  size_t at = 0, line = 0;
  for (; line < spec->nout && at < r->out_len; line++) {
    const char *nl = memchr(r->out + at, '\n', r->out_len - at);
    size_t n = nl ? (size_t)(nl - r->out) - at : r->out_len - at;
    if (n != strlen(spec->out[line]) || memcmp(r->out + at, spec->out[line], n) != 0) {
      sep(f);
      fprintf(f, "stdout line %zu: expected ", line + 1);
      put_cstr(f, spec->out[line]);
      fputs(", got ", f);
      put_quoted(f, r->out + at, n);
      return;
    }
    at += n + 1;
  }
  if (line < spec->nout) {
    sep(f);
    fprintf(f, "stdout line %zu: expected ", line + 1);
    put_cstr(f, spec->out[line]);
    fputs(", got end of output", f);
  } else if (at < r->out_len) {
    const char *nl = memchr(r->out + at, '\n', r->out_len - at);
    sep(f);
    fprintf(f, "stdout line %zu: expected end of output, got ", line + 1);
    put_quoted(f, r->out + at, nl ? (size_t)(nl - r->out) - at : r->out_len - at);
  }
}

char *fsX_compare(const fsX_spec *spec, const fsX_result *r) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) fsA_oom();
  if (r->timed_out) fprintf(f, "timed out after %g s", r->timeout);
  else if (r->overflowed) fprintf(f, "output exceeded %zu MiB", OUTPUT_LIMIT >> 20);
  else if (r->status < 0) fprintf(f, "killed by signal %d (%s)", r->signal, strsignal(r->signal));
  else {
    int want_errors = 0;
    for (size_t i = 0; i < spec->nexpects; i++) want_errors |= spec->expects[i].severity == FS_SEV_ERROR;
    if (r->bad_stderr) {
      fputs("stderr line is not a diagnostic: ", f);
      put_cstr(f, r->bad_stderr);
    }
    compare_diags(f, spec, r);
    if (r->status != want_errors) {
      sep(f);
      fprintf(f, "exit status %d, expected %d", r->status, want_errors);
    }
    if (spec->nout) compare_out(f, spec, r);
  }
  fclose(f);
  if (len == 0) { free(buf); return NULL; }
  return buf;
}

/* ---- the command --------------------------------------------------------- */

/* FabricScript scripts, and Python ones (always in check mode: a .py is checked, not run). */
static int is_script(const char *name) {
  size_t n = strlen(name);
  return (n > 4 && strcmp(name + n - 4, ".fab") == 0) || (n > 3 && strcmp(name + n - 3, ".py") == 0);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name) {
  size_t d = strlen(dir), n = strlen(name);
  int slash = d > 0 && dir[d - 1] != '/';
  char *p = fsA_xrealloc(NULL, d + slash + n + 1);
  memcpy(p, dir, d);
  if (slash) p[d] = '/';
  memcpy(p + d + slash, name, n + 1);
  return p;
}

/* Appends the scripts under dir; symbolic links to directories are not
 * followed, so a link cycle cannot recurse forever. */
static void find_scripts(const char *dir, strv *found) {
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *de;
  while ((de = readdir(dp))) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    char *p = join(dir, de->d_name);
    struct stat st, lst;
    if (lstat(p, &lst) == 0 && S_ISDIR(lst.st_mode)) {
      find_scripts(p, found);
      free(p);
    } else if (is_script(de->d_name) && stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
      strv_push(found, p);
    } else {
      free(p);
    }
  }
  closedir(dp);
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0, k;
  do {
    if (cap - n < 65536) buf = fsA_xrealloc(buf, (cap = 2 * cap + 65536) + 1);
    k = fread(buf + n, 1, cap - n, f);
    n += k;
  } while (k > 0);
  int bad = ferror(f);
  fclose(f);
  if (bad) { free(buf); errno = EIO; return NULL; }
  buf[n] = '\0';
  *len = n;
  return buf;
}

/* What one script's run came to: the failure reason (NULL: it passed) and
 * the diagnostics it reported, one per line, for the TAP and JUnit reports. */
typedef struct outcome { char *path, *why, *diags; double secs; } outcome;

/* The child's diagnostics as `LINE: severity: message` lines (help on a
 * line of its own), or its raw standard error when that was not JSON. */
static char *render_diags(const fsX_result *r) {
  static const char *const sev[] = { "note", "warning", "error" };
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return xstrndup("", 0);
  for (size_t i = 0; i < r->ndiags; i++) {
    const fsX_reported *d = &r->diags[i];
    if (d->line) fprintf(f, "%u: ", d->line);
    fprintf(f, "%s: %s\n", sev[d->severity], d->message);
    if (*d->help) fprintf(f, "  help: %s\n", d->help);
  }
  if (r->bad_stderr) fprintf(f, "%s\n", r->bad_stderr);
  fclose(f);
  return buf;
}

/* Runs one script into o: its failure reason or NULL, and its diagnostics. */
static void run_script(const char *path, const char *exe, double timeout, outcome *o) {
  double start = now();
  o->diags = xstrndup("", 0);
  size_t len;
  char *text = read_all(path, &len);
  if (!text) {
    const char *why = strerror(errno);
    o->why = xstrndup(why, strlen(why));
    return;
  }
  fsX_spec spec;
  int bad = fsX_parse_spec(text, len, &spec);
  free(text);
  if (bad) {
    o->why = spec.error;
    spec.error = NULL;
    fsX_spec_free(&spec);
    return;
  }
  size_t plen = strlen(path);
  if (plen > 3 && !strcmp(path + plen - 3, ".py")) spec.check_mode = 1; /* checked, never run */
  char **argv = fsA_xrealloc(NULL, (spec.nargs + 5) * sizeof *argv);
  size_t n = 0;
  argv[n++] = "fabricscript"; /* what its messages call it */
  if (spec.check_mode) argv[n++] = spec.check_mode == 2 ? "plan" : "check", argv[n++] = "--diagnostics-format=json";
  for (size_t i = 0; i < spec.nargs; i++) argv[n++] = spec.args[i];
  if (!spec.check_mode) argv[n++] = "--diagnostics-format=json";
  argv[n++] = (char *)path;
  argv[n] = NULL;
  fsX_result r;
  if (fsX_spawn(exe, argv, timeout, &r) < 0) {
    const char *e = strerror(errno);
    o->why = fsA_xrealloc(NULL, strlen(exe) + strlen(e) + 16);
    sprintf(o->why, "cannot run %s: %s", exe, e);
  } else {
    fsX_parse_stderr(&r);
    o->why = fsX_compare(&spec, &r);
    free(o->diags);
    o->diags = render_diags(&r);
  }
  fsX_result_free(&r);
  free(argv);
  fsX_spec_free(&spec);
  o->secs = now() - start;
}

/* ---- reports ------------------------------------------------------------- */

/* Writes s for an XML attribute or text: the five entities escaped, and
 * what XML 1.0 cannot hold (C0 controls but tab and newline, bytes that are
 * not UTF-8) as U+FFFD. */
static void put_xml(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t k = 1;
    if (*p >= 0x80) { /* the length of a well-formed sequence, else 0 */
      k = (*p & 0xe0) == 0xc0 && *p >= 0xc2 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : (*p & 0xf8) == 0xf0 && *p <= 0xf4 ? 4 : 0;
      for (size_t i = 1; i < k; i++)
        if ((p[i] & 0xc0) != 0x80) k = 0;
    }
    if (k == 0 || (*p < 0x20 && *p != '\t' && *p != '\n')) { fputs("\xef\xbf\xbd", f); p++; continue; }
    switch (*p) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fwrite(p, 1, k, f);
    }
    p += k;
  }
}

/* Writes text as the lines of a YAML literal block indented by ind spaces. */
static void put_yaml_block(FILE *f, const char *text, const char *ind) {
  for (const char *l = text; *l;) {
    const char *nl = strchr(l, '\n');
    size_t n = nl ? (size_t)(nl - l) : strlen(l);
    fprintf(f, "%s", ind);
    for (size_t i = 0; i < n; i++) fputc((unsigned char)l[i] < 0x20 && l[i] != '\t' ? '?' : l[i], f);
    fputc('\n', f);
    l += n + (nl != NULL);
  }
}

/* One script's line, as soon as it has run (JUnit waits for the end). */
static void report_one(FILE *out, fsX_format format, size_t number, const outcome *o) {
  if (format == FSX_PLAIN) {
    if (o->why) fprintf(out, "FAIL %s: %s\n", o->path, o->why);
    else fprintf(out, "PASS %s\n", o->path);
  } else if (format == FSX_TAP) {
    fprintf(out, "%s %zu - %s\n", o->why ? "not ok" : "ok", number, o->path);
    if (o->why) {
      fprintf(out, "  ---\n  message: |-\n");
      put_yaml_block(out, o->why, "    ");
      fprintf(out, "  duration_ms: %.1f\n", o->secs * 1e3);
      if (*o->diags) fprintf(out, "  diagnostics: |\n"), put_yaml_block(out, o->diags, "    ");
      fprintf(out, "  ...\n");
    }
  }
  fflush(out);
}

static void report_end(FILE *out, fsX_format format, const outcome *all, size_t n, size_t failed) {
  if (format == FSX_PLAIN) fprintf(out, "%zu passed, %zu failed\n", n - failed, failed);
  else if (format == FSX_TAP) fprintf(out, "1..%zu\n", n);
  else {
    double total = 0;
    for (size_t i = 0; i < n; i++) total += all[i].secs;
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<testsuites name=\"fabricscript test\" tests=\"%zu\" failures=\"%zu\" time=\"%.3f\">\n"
                 "  <testsuite name=\"fabricscript test\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" "
                 "skipped=\"0\" time=\"%.3f\">\n", n, failed, total, n, failed, total);
    for (size_t i = 0; i < n; i++) {
      const char *slash = strrchr(all[i].path, '/');
      fputs("    <testcase classname=\"", out);
      if (slash) { /* the directory, dotted as JUnit readers group by it */
        for (const char *p = all[i].path; p < slash; p++) {
          char c[2] = { *p == '/' ? '.' : *p, 0 };
          put_xml(out, c);
        }
      } else fputs(".", out);
      fputs("\" name=\"", out);
      put_xml(out, slash ? slash + 1 : all[i].path);
      fputs("\" file=\"", out);
      put_xml(out, all[i].path);
      fprintf(out, "\" time=\"%.3f\"", all[i].secs);
      if (!all[i].why) { fputs("/>\n", out); continue; }
      fputs(">\n      <failure type=\"mismatch\" message=\"", out);
      put_xml(out, all[i].why);
      fputs("\">", out);
      put_xml(out, all[i].why);
      if (*all[i].diags) fputs("\n\ndiagnostics:\n", out), put_xml(out, all[i].diags);
      fputs("</failure>\n    </testcase>\n", out);
    }
    fputs("  </testsuite>\n</testsuites>\n", out);
  }
  fflush(out);
}

int fsX_run_paths(FILE *out, char **paths, size_t npaths, const char *exe, double timeout, fsX_format format) {
  outcome *all = NULL;
  size_t n = 0, failed = 0;
  if (format == FSX_TAP) fputs("TAP version 13\n", out);
  for (size_t i = 0; i < npaths; i++) {
    strv scripts = { 0 };
    struct stat st;
    if (stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      find_scripts(paths[i], &scripts);
      if (scripts.n) qsort(scripts.v, scripts.n, sizeof *scripts.v, cmp_str);
    } else {
      strv_push(&scripts, xstrndup(paths[i], strlen(paths[i])));
    }
    all = fsA_xrealloc(all, (n + scripts.n + 1) * sizeof *all);
    for (size_t k = 0; k < scripts.n; k++) {
      outcome *o = &all[n++];
      *o = (outcome){ .path = scripts.v[k] }; /* the outcome owns the path now */
      run_script(o->path, exe, timeout, o);
      failed += o->why != NULL;
      report_one(out, format, n, o);
    }
    free(scripts.v);
  }
  report_end(out, format, all, n, failed);
  for (size_t i = 0; i < n; i++) free(all[i].path), free(all[i].why), free(all[i].diags);
  free(all);
  return failed > 0;
}

int fsX_main(int argc, char **argv, const char *self_exe, fsX_format format) {
  if (argc < 1) {
    fputs("fabricscript test: no scripts given (usage: fabricscript test PATH...)\n", stderr);
    return 2;
  }
  double timeout = 120;
  const char *env = getenv("FABRICSCRIPT_TEST_TIMEOUT");
  if (env && *env) {
    char *end;
    timeout = strtod(env, &end);
    if (*end || !(timeout > 0) || !isfinite(timeout)) {
      fprintf(stderr, "fabricscript test: FABRICSCRIPT_TEST_TIMEOUT must be a positive number "
                      "of seconds, not '%s'\n", env);
      return 2;
    }
  }
  return fsX_run_paths(stdout, argv, (size_t)argc, self_exe, timeout, format);
}
