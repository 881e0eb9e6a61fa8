/* fuzz_front.c -- libFuzzer harness: any bytes through the scanner, the
 * parser, the checker and the diagnostics renderer must end in diagnostics,
 * never in a crash, a hang or a leak. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ast.h"
#include "check.h"
#include "diag.h"
#include "lex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *sink;
  static fsC_options opt;
  if (!sink) {
    sink = fopen("/dev/null", "w");
    fsC_options_init(&opt);
    opt.machine.cuda_gpus = 2; /* reach the GPU strategies' rules too */
  }
  fs_source *src = fsA_source_from_buffer("fuzz.fab", (const char *)data, size);
  fs_diags diags;
  fsD_init(&diags);
  int nerrors = 0;
  fs_node *ast = fsP_parse(src, &diags, &nerrors);
  if (nerrors == 0) fsC_check(src, ast, &opt, &diags);
  fsD_sort(&diags);
  fs_render_opts text = {FS_DIAG_TEXT, 1, NULL}, json = {FS_DIAG_JSON, 0, NULL};
  fsD_render_all(sink, &diags, &text);
  fsD_render_all(sink, &diags, &json);
  size_t len;
  free(fsD_apply_fixes(src, &diags, &len));
  fsA_free(ast);
  fsD_free(&diags);
  fsA_source_free(src);
  return 0;
}
