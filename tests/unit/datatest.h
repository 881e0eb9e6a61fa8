/* datatest.h -- scratch directories and files for the data and checkpoint
 * unit tests. Every helper fails the running test on an I/O error. */
#ifndef FS_DATATEST_H
#define FS_DATATEST_H

/* cmocka's prerequisites, then cmocka: every user is a cmocka test */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* The scratch-directory fixture: dt_dir is a fresh directory during each
 * test run through DT_TEST, removed with its files afterwards. */
extern char *dt_dir;
int dt_setup(void **state);
int dt_teardown(void **state);
#define DT_TEST(f) cmocka_unit_test_setup_teardown(f, dt_setup, dt_teardown)

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
