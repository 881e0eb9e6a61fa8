/* torchckpt.h -- checkpoints in PyTorch's format: what torch.save writes and
 * torch.load(path, weights_only=True) reads (.pt, .pth, .ckpt).
 *
 * A zip archive (zipstore.h) named after the file: "<stem>/data.pkl" is
 * the pickle of one value (pickle.h), "<stem>/data/<key>" each storage's
 * raw little-endian bytes, "<stem>/version" "3\n", "<stem>/byteorder"
 * "little". The value is any tree of None, bools, ints, floats, strings,
 * tuples, lists, dicts, OrderedDicts and tensors (float32, bfloat16, int64).
 *
 * fsH_open validates everything before returning: the zip, every CRC, the
 * pickle (restricted: nothing is called), each tensor inside its storage.
 * A caller therefore gets the whole value or an error naming the file; only
 * an I/O error can make a later fsH_read fail.
 *
 * Writing mirrors safetensors.h so that FSDP ranks share one file: the owner
 * fsH_create's it from the value (tensors whose data is NULL are written
 * later), the others fsH_attach with the same value, each fsH_write's its
 * slices, the others fsH_commit (fsync), and after a barrier the owner
 * fsH_commit's (CRCs, directory, rename). */
#ifndef FS_TORCHCKPT_H
#define FS_TORCHCKPT_H

#include <stdbool.h>
#include <stdint.h>
#include "pickle.h"
#include "zipstore.h"

typedef struct fsH_file {
  fsZ_archive z;
  fsQ_doc *doc;                /* doc->root: the value; doc->storages */
  const fsZ_member **storage;  /* the member of each doc->storages[i] */
} fsH_file;

typedef struct fsH_writer {
  fsZ_writer z;
  const fsQ_value **tensors;   /* storage key i: tensors[i] */
  size_t *member;              /* its member index */
  size_t nt;
} fsH_writer;

/* Whether fabric.save / fabric.load use this format for path: its name ends
 * in ".pt", ".pth" or ".ckpt" (safetensors.h for every other name). */
bool fsH_is_torch_path(const char *path);

/* --- writing (-1 + *err naming the file) --- */
int fsH_save(const char *path, const fsQ_value *root, char **err);
int fsH_create(fsH_writer *w, const char *path, const fsQ_value *root, char **err);
const char *fsH_tmp_path(const fsH_writer *w);
int fsH_attach(fsH_writer *w, const char *tmp_path, const fsQ_value *root, char **err);
/* Elements [first, first + count) of tensor t (a value of root), in its dtype. */
int fsH_write(fsH_writer *w, const fsQ_value *t, uint64_t first, uint64_t count, const void *src, char **err);
/* Releases w whether or not it succeeds. */
int fsH_commit(fsH_writer *w, char **err);
void fsH_abort(fsH_writer *w);

/* --- reading --- */
int fsH_open(fsH_file *f, const char *path, char **err);
void fsH_close(fsH_file *f);
/* Elements [first, first + count) (row-major) of tensor t of f's value,
 * converted to dt as safetensors.h's fsK_read converts. A view with
 * non-contiguous strides is gathered through a buffer of the part of its
 * storage it spans. */
int fsH_read(const fsH_file *f, const fsQ_value *t, uint64_t first, uint64_t count, fs_dtype dt, void *dst,
             char **err);

#endif
