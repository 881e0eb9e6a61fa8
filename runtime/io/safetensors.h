/* safetensors.h -- checkpoints in the safetensors format.
 *
 * File: N as a little-endian uint64, N bytes of JSON header, then the data.
 * The header maps each tensor name to {"dtype": "F32"|"BF16"|"I64", "shape":
 * [...], "data_offsets": [begin, end]} (byte offsets into the data) and the
 * optional "__metadata__" key to a {string: string} map. The writer lays the
 * data out as the reference implementation does (larger dtypes first, then
 * by name, so every tensor is aligned to its element size), pads the header
 * with spaces to a multiple of 8 bytes and replaces the file atomically.
 *
 * One file may be written by several processes (FSDP ranks): the owner calls
 * fsK_create, the others fsK_attach to its temporary file, each writes its
 * slices with fsK_write, the others fsK_commit (fsync), and after a barrier
 * the owner fsK_commit (rename). */
#ifndef FS_SAFETENSORS_H
#define FS_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "atomicfile.h"
#include "tensor.h"

/* A named tensor to save (data: its numel elements) or expected by a load
 * (data unused). */
typedef struct fsK_entry {
  const char *name;
  fs_dtype dtype;
  int ndim;
  const int64_t *shape;
  const void *data;
} fsK_entry;

typedef struct fsK_meta {
  const char *key, *value;
} fsK_meta;

/* A tensor in a file: data at [begin, end) of the data section. */
typedef struct fsK_info {
  char *name;
  fs_dtype dtype;
  int ndim;
  int64_t shape[FS_MAX_RANK];
  uint64_t numel, begin, end;
} fsK_info;

typedef struct fsK_file {
  char *path;
  int fd;
  uint64_t data_start;  /* 8 + N */
  fsK_info *t;          /* sorted by name */
  size_t n;
  fsK_meta *meta;       /* owned strings, header order */
  size_t nmeta;
} fsK_file;

typedef struct fsK_writer {
  fsK_atomic out;       /* out.path NULL for an attached (non-owner) writer */
  fsK_file layout;      /* the header written, layout.fd = out.fd */
} fsK_writer;

/* --- writing --- */
int fsK_save(const char *path, const fsK_entry *ts, size_t n, const fsK_meta *meta, size_t nmeta,
             char **err);
/* Writes the header of ts (data ignored) to a temporary file sized for the
 * whole data section. */
int fsK_create(fsK_writer *w, const char *path, const fsK_entry *ts, size_t n,
               const fsK_meta *meta, size_t nmeta, char **err);
const char *fsK_tmp_path(const fsK_writer *w);
int fsK_attach(fsK_writer *w, const char *tmp_path, char **err);
/* Elements [first, first + count) of tensor `name`, in its dtype. */
int fsK_write(fsK_writer *w, const char *name, uint64_t first, uint64_t count, const void *src,
              char **err);
/* Releases w whether or not it succeeds. */
int fsK_commit(fsK_writer *w, char **err);
void fsK_abort(fsK_writer *w);

/* --- reading --- */
/* Validates the whole header against the file: -1 + *err naming the file
 * when it is truncated or corrupt. */
int fsK_open(fsK_file *f, const char *path, char **err);
void fsK_close(fsK_file *f);
const fsK_info *fsK_find(const fsK_file *f, const char *name);
const char *fsK_meta_get(const fsK_file *f, const char *key);
/* Elements [first, first + count) of t converted to dtype dt (as PyTorch's
 * copy_ does: bfloat16 rounds to nearest even, floats to int truncate). */
int fsK_read(const fsK_file *f, const fsK_info *t, uint64_t first, uint64_t count, fs_dtype dt,
             void *dst, char **err);

/* Compares the file with the expected entries (names and shapes; dtypes
 * convert). found[i] = the matching tensor or NULL. Tensors of the file whose
 * names start with prefix ("" or NULL: all) and that nothing expects are
 * unexpected. Returns NULL when everything matches, else one malloc'd
 * message naming the file and listing the missing, unexpected and
 * shape-mismatched names. fsK_find and fsK_match read only f's path, t
 * (sorted by name) and n, so an index of another format's tensors in that
 * shape is compared alike (interp/eval/lib_ckpt.c's torch files). */
char *fsK_match(const fsK_file *f, const fsK_entry *want, size_t n, const char *prefix,
                const fsK_info **found);
/* Reads every matching expected entry into a new buffer of its dtype
 * (bufs[i], NULL where not loaded). strict: any mismatch is an error and
 * nothing is read. Otherwise *report gets fsK_match's message (or NULL).
 * On error no buffer is left allocated. */
int fsK_load(const fsK_file *f, const fsK_entry *want, size_t n, const char *prefix, bool strict,
             void **bufs, char **report, char **err);

#endif
