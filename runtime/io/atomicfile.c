/* atomicfile.c -- temp file + fsync + rename + fsync(dir).
 *
 * The file replaced is the one the path names: a symbolic link is followed
 * to its target (the link stays a link), and a destination that exists and
 * is not a regular file (a device node, a FIFO, a directory) is refused,
 * since renaming over it would replace the node itself. The new file keeps
 * the mode of the one it replaces. */
#define _POSIX_C_SOURCE 200809L
#include "atomicfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataio.h"

/* A name taken by another live writer (or left by a dead one) is skipped. */
#define MAX_TRIES 1000
/* Links followed before giving up, as the kernel's ELOOP limit. */
#define MAX_LINKS 40

/* The length of path's directory part including its '/', 0 when none. */
static size_t dir_len(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? (size_t)(slash - path) + 1 : 0;
}

/* The file path names after its symbolic links (malloc'd), which may not
 * exist yet; *st is its lstat and *exists whether it does. NULL + *err. */
static char *resolve(const char *path, struct stat *st, int *exists, char **err) {
  char *at = strdup(path);
  for (int hops = 0; at; hops++) {
    if (lstat(at, st) != 0) {
      if (errno == ENOENT) {
        *exists = 0;
        return at;
      }
      fsIO_fail(err, "%s: cannot save: %s", path, strerror(errno));
      free(at);
      return NULL;
    }
    *exists = 1;
    if (!S_ISLNK(st->st_mode)) return at;
    if (hops == MAX_LINKS) {
      fsIO_fail(err, "%s: cannot save: %s", path, strerror(ELOOP));
      free(at);
      return NULL;
    }
    char target[4096];
    ssize_t n = readlink(at, target, sizeof target - 1);
    if (n < 0) {
      fsIO_fail(err, "%s: cannot save: %s", path, strerror(errno));
      free(at);
      return NULL;
    }
    target[n] = 0;
    char *next = target[0] == '/' ? fsIO_errf("%s", target) : fsIO_errf("%.*s%s", (int)dir_len(at), at, target);
    free(at);
    at = next;
  }
  fsIO_fail(err, "%s: out of memory", path);
  return NULL;
}

int fsK_atomic_open(fsK_atomic *a, const char *path, char **err) {
  struct stat st;
  int exists = 0;
  a->tmp = NULL;
  a->fd = -1;
  if (!(a->path = resolve(path, &st, &exists, err))) return -1;
  if (exists && !S_ISREG(st.st_mode)) {
    fsIO_fail(err, "%s: cannot save: it %s, not a regular file", path, fsIO_file_kind(st.st_mode));
    free(a->path);
    a->path = NULL;
    return -1;
  }
  for (int n = 0; n < MAX_TRIES && a->fd < 0; n++) {
    free(a->tmp);
    a->tmp = fsIO_errf("%s.tmp.%ld.%d", a->path, (long)getpid(), n);
    if (!a->tmp) break;
    a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (a->fd < 0 && errno != EEXIST) break;
  }
  if (a->fd >= 0 && (!exists || fchmod(a->fd, st.st_mode & 07777) == 0)) return 0;
  int e = errno;
  fsIO_fail(err, "%s: cannot create a temporary file next to it: %s", path,
            a->tmp ? strerror(e) : "out of memory");
  if (a->fd >= 0) {
    close(a->fd);
    unlink(a->tmp);
    a->fd = -1;
  }
  free(a->tmp);
  free(a->path);
  a->tmp = a->path = NULL;
  return -1;
}

/* The directory part of path ("." when there is none), opened. */
static int open_dir(const char *path) {
  size_t n = dir_len(path);
  char *dir = n ? strndup(path, n) : strdup(".");
  if (!dir) return -1;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free(dir);
  return fd;
}

/* Removes the "<path>.tmp.<pid>.<n>" files that writers which died before
 * their rename left beside path; a live writer's (its pid exists) stays. */
static void sweep_stale(int dirfd, const char *path) {
  const char *base = path + dir_len(path);
  size_t bl = strlen(base);
  int fd = dup(dirfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return; /* best effort: the save itself succeeded */
  }
  for (struct dirent *e; (e = readdir(d));) {
    const char *s = e->d_name;
    char *end;
    if (strncmp(s, base, bl) || strncmp(s + bl, ".tmp.", 5)) continue;
    long pid = strtol(s + bl + 5, &end, 10);
    if (end == s + bl + 5 || *end != '.' || pid <= 0) continue;
    strtol(end + 1, &end, 10);
    if (*end) continue;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) unlinkat(dirfd, s, 0);
  }
  closedir(d);
}

static void release(fsK_atomic *a) {
  free(a->tmp);
  free(a->path);
  a->tmp = a->path = NULL;
  a->fd = -1;
}

int fsK_atomic_commit(fsK_atomic *a, char **err) {
  const char *step = NULL;
  int e = 0, dirfd = -1;
  if (fsync(a->fd) != 0) step = "fsync", e = errno;
  if (close(a->fd) != 0 && !step) step = "close", e = errno;
  a->fd = -1;
  if (!step && rename(a->tmp, a->path) != 0) step = "rename", e = errno;
  if (step) unlink(a->tmp);
  /* After the rename a failing directory fsync leaves the new file in place,
   * but not durable: still an error. */
  else if ((dirfd = open_dir(a->path)) < 0 || fsync(dirfd) != 0) step = "syncing the directory", e = errno;
  else sweep_stale(dirfd, a->path);
  if (dirfd >= 0) close(dirfd);
  if (step) fsIO_fail(err, "%s: cannot save: %s failed: %s", a->path, step, strerror(e));
  release(a);
  return step ? -1 : 0;
}

void fsK_atomic_abort(fsK_atomic *a) {
  if (!a->tmp) return;
  if (a->fd >= 0) close(a->fd);
  unlink(a->tmp);
  release(a);
}

int fsK_atomic_write(const char *path, const void *data, size_t len, char **err) {
  fsK_atomic a;
  if (fsK_atomic_open(&a, path, err) < 0) return -1;
  if (fsIO_pwrite_full(a.fd, data, len, 0) != (ssize_t)len) {
    fsIO_fail(err, "%s: cannot write: %s", path, strerror(errno));
    fsK_atomic_abort(&a);
    return -1;
  }
  return fsK_atomic_commit(&a, err);
}

int fsK_make_dirs(char *path, const char *what, char **err) {
  for (char *s = path + 1;; s++) {
    if (*s && *s != '/') continue;
    char c = *s;
    *s = '\0';
    struct stat st;
    int bad = mkdir(path, 0777) != 0 && (errno != EEXIST || stat(path, &st) != 0 || !S_ISDIR(st.st_mode));
    int e = errno == EEXIST ? ENOTDIR : errno;
    if (bad) fsIO_fail(err, "%s: cannot create the %s directory: %s", path, what, strerror(e));
    *s = c;
    if (bad) return -1;
    if (!c) return 0;
  }
}
