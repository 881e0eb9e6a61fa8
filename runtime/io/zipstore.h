/* zipstore.h -- zip archives of stored (uncompressed) members, laid out as
 * PyTorch's writer (miniz in torch 1.13) lays out torch.save's files.
 *
 * Each member's data starts on a 64-byte boundary (the local header's extra
 * field "FB" pads it), is followed by a data descriptor (flag bit 3), and
 * the archive ends with the central directory, a ZIP64 end record and
 * locator, and the classic end record. Members and offsets stay below
 * 4 GiB (no ZIP64 member fields, writing or reading).
 *
 * Writing follows safetensors.h: the owner fsZ_create's the layout in a
 * temporary file (atomicfile.h), other processes may fsZ_attach to it and
 * fill their byte ranges, and the owner's fsZ_commit computes every CRC-32
 * from the file, writes the directory and renames the file into place.
 * Reading validates the whole directory against the file at fsZ_open.
 * Users: torchckpt.c (its other half, the pickle, is pickle.h). */
#ifndef FS_ZIPSTORE_H
#define FS_ZIPSTORE_H

#include <stddef.h>
#include <stdint.h>
#include "atomicfile.h"

typedef struct fsZ_member {
  char *name;
  uint64_t header; /* the local header's offset */
  uint64_t data;   /* the data's offset */
  uint64_t size;
  uint32_t crc;
} fsZ_member;

typedef struct fsZ_writer {
  fsK_atomic out;  /* out.path NULL for an attached (non-owner) writer */
  fsZ_member *m;
  size_t n;
  uint64_t end;    /* where the central directory will start */
} fsZ_writer;

typedef struct fsZ_archive {
  char *path;
  int fd;
  fsZ_member *m;   /* directory order */
  size_t n;
} fsZ_archive;

/* --- writing (-1 + *err naming the file; the writer is released) --- */
/* Members names[i] of sizes[i] bytes, in this order, their data zeroed. */
int fsZ_create(fsZ_writer *w, const char *path, const char *const *names, const uint64_t *sizes, size_t n,
               char **err);
const char *fsZ_tmp_path(const fsZ_writer *w);
/* The same names and sizes as the owner's fsZ_create. */
int fsZ_attach(fsZ_writer *w, const char *tmp_path, const char *const *names, const uint64_t *sizes,
               size_t n, char **err);
/* Bytes [at, at + len) of member i. */
int fsZ_write(fsZ_writer *w, size_t i, uint64_t at, const void *src, size_t len, char **err);
/* Owner: CRCs, directory, rename. Attached: fsync. Releases w either way. */
int fsZ_commit(fsZ_writer *w, char **err);
void fsZ_abort(fsZ_writer *w);

/* --- reading --- */
int fsZ_open(fsZ_archive *z, const char *path, char **err);
void fsZ_close(fsZ_archive *z);
const fsZ_member *fsZ_find(const fsZ_archive *z, const char *name);
/* Bytes [at, at + len) of m's data. */
int fsZ_read(const fsZ_archive *z, const fsZ_member *m, uint64_t at, void *dst, size_t len, char **err);
/* -1 + *err when m's data does not have its directory's CRC-32. */
int fsZ_verify(const fsZ_archive *z, const fsZ_member *m, char **err);

#endif
