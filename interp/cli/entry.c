/* entry.c -- when a line typed at the session's prompt completes an entry:
 * the REPL (repl.c) and its fuzz target (tests/fuzz/fuzz_readers.c,
 * FUZZ_REPL) share it, and it needs nothing of the terminal. */
#include "repl.h"

#include <ctype.h>
#include <string.h>

int fsRP_needs_more(const char *text, int last_line_blank) {
  int depth = 0, backslash = 0;
  char quote = 0;
  const char *first_line_end = strchr(text, '\n');
  int header = 0; /* does the first line end with ':' (a block header)? */
  char last = 0;
  for (const char *p = text; *p; p++) {
    char c = *p;
    if (quote) {
      if (c == '\\' && p[1]) { p++; continue; }
      if (c == quote || c == '\n') quote = 0;
      continue;
    }
    if (c == '#') { while (p[1] && p[1] != '\n') p++; continue; }
    if (c == '"' || c == '\'') { quote = c; last = c; continue; }
    if (c == '(' || c == '[' || c == '{') depth++;
    else if ((c == ')' || c == ']' || c == '}') && depth > 0) depth--;
    if (c == '\n') {
      if (p == first_line_end || !first_line_end) header = last == ':' && depth == 0;
      backslash = last == '\\';
      last = 0;
      continue;
    }
    if (!isspace((unsigned char)c)) last = c;
  }
  if (depth > 0 || backslash) return 1;
  return header && !last_line_blank;
}
