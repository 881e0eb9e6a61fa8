/* atomicfile.h -- replace a file all-or-nothing.
 *
 * Writes go to a temporary file in the target's directory; commit fsyncs
 * it, renames it over the target and fsyncs the directory. A process killed
 * at any point before the rename leaves the target as it was (plus, at
 * worst, a stale "<path>.tmp.<pid>.<n>" file, which the next commit to that
 * path removes once its pid is gone); after it the new content is durable.
 * The target is what the path names: symbolic links are followed (the new
 * content lands in the link's target), and an existing destination that is
 * not a regular file is refused. The new file keeps the old one's mode. */
#ifndef FS_ATOMICFILE_H
#define FS_ATOMICFILE_H

#include <stddef.h>

typedef struct fsK_atomic {
  char *path; /* the target */
  char *tmp;  /* the file written */
  int fd;     /* open for writing on tmp; -1 when closed */
} fsK_atomic;

/* mkdir -p: every missing component of path (modified in place while it
 * walks, restored); the error names the component and says "cannot create
 * the WHAT directory". */
int fsK_make_dirs(char *path, const char *what, char **err);

/* Creates the temporary file (the replaced file's mode, or 0666 minus the
 * umask for a new one). a->path is the resolved target. */
int fsK_atomic_open(fsK_atomic *a, const char *path, char **err);
/* fsync + rename + fsync of the directory; releases a whether or not it
 * succeeds (on failure the temporary file is removed). */
int fsK_atomic_commit(fsK_atomic *a, char **err);
/* Closes and removes the temporary file; a no-op on a released one. */
void fsK_atomic_abort(fsK_atomic *a);
/* The whole of a small file at once: data[0, len) replaces path (open,
 * write, commit; "PATH: cannot write: ..." when the write fails). */
int fsK_atomic_write(const char *path, const void *data, size_t len, char **err);

#endif
