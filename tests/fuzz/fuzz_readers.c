/* fuzz_readers.c -- libFuzzer harnesses for every reader of untrusted bytes
 * outside the front end: safetensors files, the checkpoint metadata literal,
 * IDX files, text data sets, NumPy .npy/.npz files, PNG/JPEG images and
 * REPL input. One binary per reader, chosen by
 * FUZZ_READER at compile time (Makefile.am's fuzz block builds them all).
 * Invariant: any bytes end in a value or an error message, never in a crash,
 * a hang or a leak. The file readers take paths, so the bytes are handed to
 * them as /proc/self/fd/N of a memfd (no disk, nothing left behind). The
 * front end's harness is fuzz_front.c. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dataset.h"
#include "idx.h"
#include "safetensors.h"
#include "value.h"
#include "ast.h"
#include "check.h"
#include "diag.h"
#include "lex.h"
#include "repl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes as a file: its /proc path in `path`, the fd to close after. */
static int as_file(const uint8_t *data, size_t size, char path[64]) {
  int fd = memfd_create("fuzz", 0);
  if (fd < 0) abort();
  for (size_t off = 0; off < size;) {
    ssize_t w = write(fd, data + off, size - off);
    if (w <= 0) abort();
    off += (size_t)w;
  }
  snprintf(path, 64, "/proc/self/fd/%d", fd);
  return fd;
}

/* safetensors: the header, every tensor's info, then every tensor read as f32 */
static void read_safetensors(const char *path) {
  fsK_file f;
  char *err = NULL;
  if (fsK_open(&f, path, &err) < 0) {
    free(err);
    return;
  }
  for (size_t i = 0; i < f.n; i++) {
    const fsK_info *t = &f.t[i];
    if (t != fsK_find(&f, t->name)) abort(); /* the lookup finds what the header listed */
    uint64_t count = t->numel < 4096 ? t->numel : 4096;
    float *buf = malloc((count ? count : 1) * sizeof *buf);
    if (buf && fsK_read(&f, t, 0, count, FS_F32, buf, &err) < 0) free(err), err = NULL;
    free(buf);
  }
  for (size_t i = 0; i < f.nmeta; i++) fsV_release(fsV_literal(f.meta[i].value));
  fsK_close(&f);
}

static void read_idx(const char *path) {
  for (int ndim = 1; ndim <= 3; ndim += 2) {
    fsI_array a;
    char *err = NULL;
    if (fsI_read(path, ndim, "image", &a, &err) == 0) fsI_free(&a);
    free(err);
  }
}

static void read_text(const char *path) {
  fsS_dataset ds;
  char *err = NULL;
  if (fsS_text(&ds, path, 8, &err) == 0) fsS_free(&ds);
  free(err);
}

/* NumPy: the file as .npy (mapped) and as .npz, every array converted */
static void convert_all(const fsS_array *a) {
  uint64_t n = a->numel < 4096 ? a->numel : 4096;
  int64_t *buf = malloc((n ? n : 1) * 8);
  if (buf) fsS_convert(a->code, a->data, (size_t)n, buf);
  free(buf);
}

static void read_numpy(const char *path) {
  fsS_array a;
  fsS_npz z;
  char *err = NULL;
  if (fsS_npy_open(&a, path, &err) == 0) {
    convert_all(&a);
    fsS_array_free(&a);
  }
  free(err);
  err = NULL;
  if (fsS_npz_open(path, &z, &err) == 0) {
    for (size_t k = 0; k < z.n; k++) convert_all(&z.arrays[k]);
    fsS_npz_free(&z);
  }
  free(err);
}

/* PNG and JPEG: the decoder on the bytes */
static void read_image(const uint8_t *data, size_t size) {
  uint8_t *rgb = NULL;
  int64_t h, w;
  char *why = NULL;
  if (fsS_image_decode(data, size, &rgb, &h, &w, &why) == 0) {
    volatile uint8_t sink = rgb[(size_t)(h * w * 3) - 1]; /* every pixel was written */
    (void)sink;
  }
  free(rgb);
  free(why);
}

/* The metadata literal, as fabric.load parses it, and repr of what it gives */
static void read_literal(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return;
  memcpy(text, data, size);
  text[size] = '\0';
  fs_value *v = fsV_literal(text);
  if (v) free(fsV_repr(v));
  fsV_release(v);
  free(text);
}

/* REPL input: lines joined into entries as the session does (needs_more),
 * each entry parsed and checked as the continuation of the accepted ones. */
static void read_repl(const uint8_t *data, size_t size) {
  static fsC_options opt;
  static int ready;
  if (!ready) fsC_options_init(&opt), ready = 1;
  char *session = calloc(1, 1), *entry = calloc(1, 1);
  size_t nsession = 0, nentry = 0;
  for (size_t at = 0; at < size && session && entry;) {
    const uint8_t *nl = memchr(data + at, '\n', size - at);
    size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
    int blank = 1;
    for (size_t k = 0; k < len; k++) blank &= data[at + k] == ' ' || data[at + k] == '\t';
    char *grown = realloc(entry, nentry + len + 2);
    if (!grown) break;
    entry = grown;
    memcpy(entry + nentry, data + at, len);
    nentry += len;
    entry[nentry++] = '\n';
    entry[nentry] = '\0';
    at += len + 1;
    if (fsRP_needs_more(entry, blank) && at < size) continue;
    char *cand = malloc(nsession + nentry + 1);
    if (!cand) break;
    memcpy(cand, session, nsession);
    memcpy(cand + nsession, entry, nentry + 1);
    fs_source *src = fsA_source_from_buffer("<stdin>", cand, nsession + nentry);
    fs_diags d;
    fsD_init(&d);
    int nerrors = 0;
    fs_node *ast = fsP_parse(src, &d, &nerrors);
    if (!nerrors) fsC_check(src, ast, &opt, &d);
    if (!fsD_has_errors(&d) && !nerrors) { /* accepted: part of the session */
      free(session);
      session = cand, cand = NULL;
      nsession += nentry;
    }
    free(cand);
    fsA_free(ast);
    fsD_free(&d);
    fsA_source_free(src);
    nentry = 0;
    entry[0] = '\0';
  }
  free(session);
  free(entry);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#if defined FUZZ_LITERAL
  read_literal(data, size);
#elif defined FUZZ_REPL
  read_repl(data, size);
#elif defined FUZZ_IMAGE
  read_image(data, size);
#else
  char path[64];
  int fd = as_file(data, size, path);
#if defined FUZZ_SAFETENSORS
  read_safetensors(path);
#elif defined FUZZ_IDX
  read_idx(path);
#elif defined FUZZ_TEXT
  read_text(path);
#elif defined FUZZ_NUMPY
  read_numpy(path);
#else
#error "FUZZ_READER: one of FUZZ_SAFETENSORS FUZZ_LITERAL FUZZ_IDX FUZZ_TEXT FUZZ_NUMPY FUZZ_IMAGE FUZZ_REPL"
#endif
  close(fd);
#endif
  return 0;
}
