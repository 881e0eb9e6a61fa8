/* atomicfile.h -- replace a file all-or-nothing.
 *
 * Writes go to a temporary file in the target's directory; commit fsyncs
 * it, renames it over the target and fsyncs the directory. A process killed
 * at any point before the rename leaves the target as it was (plus, at
 * worst, a stale "<path>.tmp.<pid>.<n>" file); after it the new content is
 * durable. */
#ifndef FS_ATOMICFILE_H
#define FS_ATOMICFILE_H

typedef struct fsK_atomic {
  char *path; /* the target */
  char *tmp;  /* the file written */
  int fd;     /* open for writing on tmp; -1 when closed */
} fsK_atomic;

/* Creates the temporary file (mode 0666 minus umask, like a plain create). */
int fsK_atomic_open(fsK_atomic *a, const char *path, char **err);
/* fsync + rename + fsync of the directory; releases a whether or not it
 * succeeds (on failure the temporary file is removed). */
int fsK_atomic_commit(fsK_atomic *a, char **err);
/* Closes and removes the temporary file; a no-op on a released one. */
void fsK_atomic_abort(fsK_atomic *a);

#endif
