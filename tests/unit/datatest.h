/* datatest.h -- scratch directories and files for the data and checkpoint
 * unit tests. Every helper fails the running test on an I/O error. */
#ifndef FS_DATATEST_H
#define FS_DATATEST_H

#include <stddef.h>

/* A fresh directory under $TMPDIR (or /tmp); remove it with dt_rmdir. */
char *dt_mkdtemp(void);
/* Removes dir and the files directly in it. Frees dir. */
void dt_rmdir(char *dir);
/* dir/name, malloc'd. */
char *dt_path(const char *dir, const char *name);
void dt_write(const char *path, const void *data, size_t n);
void dt_write_gz(const char *path, const void *data, size_t n);
/* An IDX file of unsigned bytes (magic 0x0000080N) followed by n data bytes;
 * gz selects gzip. */
void dt_write_idx(const char *path, int gz, int ndim, const unsigned *dims, const void *data,
                  size_t n);
/* The file's size, or -1 if it does not exist. */
long dt_size(const char *path);

#endif
