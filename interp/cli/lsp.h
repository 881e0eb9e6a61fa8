/* lsp.h -- `fabricscript lsp`: the Language Server Protocol over stdio
 * (Content-Length framed JSON-RPC 2.0). The server checks each open
 * document on every change with the checker `fabricscript check` uses and
 * publishes its diagnostics; hover, completion, definition and code actions
 * (the fix-its) answer from the same analysis. Implementation: lsp.c (the
 * protocol) and lsp_lang.c (the language features). */
#ifndef FS_LSP_H
#define FS_LSP_H

#include <stdio.h>
#include "check.h"

/* Serves one client on in/out until `exit` or the end of in. Bad input of
 * any kind gets a JSON-RPC error and the server goes on. Returns 0 after a
 * `shutdown` then `exit`, 1 otherwise (as the protocol asks). */
int fsJ_main(FILE *in, FILE *out, const fsC_options *o);

#endif
