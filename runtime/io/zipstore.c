/* zipstore.c -- stored zip members: torch's layout written, any stored
 * archive read back with every offset checked against the file. */
#define _POSIX_C_SOURCE 200809L
#include "zipstore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataio.h"

enum {
  LOCAL_SIG = 0x04034b50, CENTRAL_SIG = 0x02014b50, DESCRIPTOR_SIG = 0x08074b50,
  END_SIG = 0x06054b50, END64_SIG = 0x06064b50, LOCATOR64_SIG = 0x07064b50,
  LOCAL_LEN = 30, CENTRAL_LEN = 46, DESCRIPTOR_LEN = 16, END_LEN = 22, END64_LEN = 56, LOCATOR64_LEN = 20,
  FLAGS = 0x0808,  /* data descriptor follows; names are UTF-8 */
  ALIGN = 64,      /* torch's kFieldAlignment */
};
#define LIMIT32 0xFFFFFFFFu
/* Bytes per pread when computing a CRC. */
#define CRC_CHUNK (1u << 20)

static void le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void free_members(fsZ_member *m, size_t n) {
  for (size_t i = 0; i < n; i++) free(m[i].name);
  free(m);
}

/* CRC-32 of bytes [off, off + len) of fd. */
static int crc_of(int fd, uint64_t off, uint64_t len, uint32_t *crc, const char *path, char **err) {
  uint8_t *buf = malloc(len < CRC_CHUNK ? (size_t)len + 1 : CRC_CHUNK);
  if (!buf) return fsIO_fail(err, "%s: out of memory", path);
  uLong c = crc32(0L, Z_NULL, 0);
  for (uint64_t done = 0; done < len;) {
    size_t k = len - done < CRC_CHUNK ? (size_t)(len - done) : CRC_CHUNK;
    ssize_t got = fsIO_pread_full(fd, buf, k, off + done);
    if (got != (ssize_t)k) {
      free(buf);
      return fsIO_fail(err, "%s: cannot read: %s", path, got < 0 ? strerror(errno) : "the file was truncated");
    }
    c = crc32(c, buf, (uInt)k);
    done += k;
  }
  free(buf);
  *crc = (uint32_t)c;
  return 0;
}

/* ------------------------------------------------------------------ writing */

/* torch's PyTorchStreamWriter::getPadding: the extra field that puts the
 * data of a member whose header is at `at` on a 64-byte boundary. */
static uint64_t padding(uint64_t at, size_t name_len) {
  uint64_t start = at + LOCAL_LEN + name_len + 4;
  return (ALIGN - start % ALIGN) % ALIGN;
}

static int layout(fsZ_writer *w, const char *path, const char *const *names, const uint64_t *sizes, size_t n,
                  char **err) {
  if (n > 0xFFFF) return fsIO_fail(err, "%s: %zu members are more than a zip without ZIP64 holds", path, n);
  if (!(w->m = calloc(n + 1, sizeof *w->m))) return fsIO_fail(err, "%s: out of memory", path);
  uint64_t at = 0;
  for (; w->n < n; w->n++) {
    fsZ_member *m = &w->m[w->n];
    size_t len = strlen(names[w->n]);
    if (len > 0xFFFF || !(m->name = strdup(names[w->n])))
      return fsIO_fail(err, "%s: %s", path, len > 0xFFFF ? "a member name is too long" : "out of memory");
    m->header = at;
    m->data = at + LOCAL_LEN + len + 4 + padding(at, len);
    m->size = sizes[w->n];
    if (m->size >= LIMIT32 || m->data + m->size + DESCRIPTOR_LEN >= LIMIT32)
      return fsIO_fail(err, "%s: the checkpoint would exceed 4 GiB, and the torch format writer does not write "
                            "ZIP64 members yet (save to a .safetensors path)", path);
    at = m->data + m->size + DESCRIPTOR_LEN;
  }
  w->end = at;
  return 0;
}

static void release(fsZ_writer *w) {
  free_members(w->m, w->n);
  w->m = NULL;
  w->n = 0;
}

int fsZ_create(fsZ_writer *w, const char *path, const char *const *names, const uint64_t *sizes, size_t n,
               char **err) {
  memset(w, 0, sizeof *w);
  w->out.fd = -1;
  if (layout(w, path, names, sizes, n, err) < 0 || fsK_atomic_open(&w->out, path, err) < 0) {
    fsZ_abort(w);
    return -1;
  }
  bool ok = ftruncate(w->out.fd, (off_t)w->end) == 0;
  for (size_t i = 0; ok && i < n; i++) {
    const fsZ_member *m = &w->m[i];
    size_t len = strlen(m->name), pad = (size_t)(m->data - m->header - LOCAL_LEN - len - 4);
    uint8_t *h = malloc(LOCAL_LEN + len + 4 + pad);
    if (!h) {
      fsZ_abort(w);
      return fsIO_fail(err, "%s: out of memory", path);
    }
    memset(h, 0, LOCAL_LEN);
    le(h, LOCAL_SIG, 4);
    le(h + 6, FLAGS, 2); /* version 0, method 0, time and date 0; CRC and sizes in the descriptor */
    le(h + 26, len, 2);
    le(h + 28, pad + 4, 2);
    memcpy(h + LOCAL_LEN, m->name, len);
    uint8_t *x = h + LOCAL_LEN + len;
    x[0] = 'F';
    x[1] = 'B';
    le(x + 2, pad, 2);
    memset(x + 4, 'Z', pad);
    ok = fsIO_pwrite_full(w->out.fd, h, LOCAL_LEN + len + 4 + pad, m->header) == (ssize_t)(LOCAL_LEN + len + 4 + pad);
    free(h);
  }
  if (!ok) {
    fsIO_fail(err, "%s: cannot write %s: %s", path, w->out.tmp, strerror(errno));
    fsZ_abort(w);
    return -1;
  }
  return 0;
}

const char *fsZ_tmp_path(const fsZ_writer *w) { return w->out.tmp; }

int fsZ_attach(fsZ_writer *w, const char *tmp_path, const char *const *names, const uint64_t *sizes, size_t n,
               char **err) {
  memset(w, 0, sizeof *w);
  struct stat st;
  w->out.fd = open(tmp_path, O_RDWR | O_CLOEXEC);
  if (!(w->out.tmp = strdup(tmp_path)) || w->out.fd < 0 || fstat(w->out.fd, &st) != 0) {
    fsIO_fail(err, "%s: cannot open: %s", tmp_path, w->out.tmp ? strerror(errno) : "out of memory");
    fsZ_abort(w);
    return -1;
  }
  if (layout(w, tmp_path, names, sizes, n, err) < 0) {
    fsZ_abort(w);
    return -1;
  }
  if ((uint64_t)st.st_size != w->end) {
    fsIO_fail(err, "%s: the owner laid out %lld bytes, this process expects %llu (the checkpoints differ)",
              tmp_path, (long long)st.st_size, (unsigned long long)w->end);
    fsZ_abort(w);
    return -1;
  }
  return 0;
}

int fsZ_write(fsZ_writer *w, size_t i, uint64_t at, const void *src, size_t len, char **err) {
  const char *path = w->out.path ? w->out.path : w->out.tmp;
  if (i >= w->n || at > w->m[i].size || len > w->m[i].size - at)
    return fsIO_fail(err, "%s: bytes [%llu, %llu) are outside member %zu", path, (unsigned long long)at,
                     (unsigned long long)(at + len), i);
  if (fsIO_pwrite_full(w->out.fd, src, len, w->m[i].data + at) != (ssize_t)len)
    return fsIO_fail(err, "%s: cannot write %s: %s", path, w->m[i].name, strerror(errno));
  return 0;
}

/* The directory and end records after w->end (CRCs known). */
static int write_directory(fsZ_writer *w, char **err) {
  size_t len = 0;
  for (size_t i = 0; i < w->n; i++) len += CENTRAL_LEN + strlen(w->m[i].name);
  uint8_t *d = calloc(1, len + END64_LEN + LOCATOR64_LEN + END_LEN), *p = d;
  if (!d) return fsIO_fail(err, "%s: out of memory", w->out.path);
  for (size_t i = 0; i < w->n; i++) {
    const fsZ_member *m = &w->m[i];
    size_t nl = strlen(m->name);
    le(p, CENTRAL_SIG, 4);
    le(p + 8, FLAGS, 2);
    le(p + 16, m->crc, 4);
    le(p + 20, m->size, 4);
    le(p + 24, m->size, 4);
    le(p + 28, nl, 2);
    le(p + 42, m->header, 4);
    memcpy(p + CENTRAL_LEN, m->name, nl);
    p += CENTRAL_LEN + nl;
  }
  uint64_t end64 = w->end + len;
  le(p, END64_SIG, 4); /* as miniz writes it: made by 0x031e, needs 0x2d */
  le(p + 4, END64_LEN - 12, 8);
  le(p + 12, 0x031e, 2);
  le(p + 14, 0x2d, 2);
  le(p + 24, w->n, 8);
  le(p + 32, w->n, 8);
  le(p + 40, len, 8);
  le(p + 48, w->end, 8);
  p += END64_LEN;
  le(p, LOCATOR64_SIG, 4);
  le(p + 8, end64, 8);
  le(p + 16, 1, 4);
  p += LOCATOR64_LEN;
  le(p, END_SIG, 4);
  le(p + 8, w->n, 2);
  le(p + 10, w->n, 2);
  le(p + 12, len, 4);
  le(p + 16, w->end, 4);
  p += END_LEN;
  size_t total = (size_t)(p - d);
  int rc = fsIO_pwrite_full(w->out.fd, d, total, w->end) == (ssize_t)total
             ? 0 : fsIO_fail(err, "%s: cannot write %s: %s", w->out.path, w->out.tmp, strerror(errno));
  free(d);
  return rc;
}

int fsZ_commit(fsZ_writer *w, char **err) {
  int rc = 0;
  if (!w->out.path) { /* attached: the owner finishes the file */
    if (fsync(w->out.fd) != 0) rc = fsIO_fail(err, "%s: fsync failed: %s", w->out.tmp, strerror(errno));
    close(w->out.fd);
    free(w->out.tmp);
    release(w);
    memset(&w->out, 0, sizeof w->out);
    w->out.fd = -1;
    return rc;
  }
  int rd = open(w->out.tmp, O_RDONLY | O_CLOEXEC); /* atomicfile's descriptor only writes */
  if (rd < 0) rc = fsIO_fail(err, "%s: cannot read back %s: %s", w->out.path, w->out.tmp, strerror(errno));
  for (size_t i = 0; rc == 0 && i < w->n; i++) {
    fsZ_member *m = &w->m[i];
    uint8_t desc[DESCRIPTOR_LEN];
    rc = crc_of(rd, m->data, m->size, &m->crc, w->out.path, err);
    le(desc, DESCRIPTOR_SIG, 4);
    le(desc + 4, m->crc, 4);
    le(desc + 8, m->size, 4);
    le(desc + 12, m->size, 4);
    if (rc == 0 && fsIO_pwrite_full(w->out.fd, desc, sizeof desc, m->data + m->size) != (ssize_t)sizeof desc)
      rc = fsIO_fail(err, "%s: cannot write %s: %s", w->out.path, w->out.tmp, strerror(errno));
  }
  if (rd >= 0) close(rd);
  if (rc == 0) rc = write_directory(w, err);
  if (rc == 0) rc = fsK_atomic_commit(&w->out, err);
  else fsK_atomic_abort(&w->out);
  release(w);
  return rc;
}

void fsZ_abort(fsZ_writer *w) {
  if (w->out.path) fsK_atomic_abort(&w->out);
  else { /* attached (or never opened): the owner removes the shared file */
    if (w->out.fd >= 0) close(w->out.fd);
    free(w->out.tmp);
  }
  release(w);
  memset(&w->out, 0, sizeof w->out);
  w->out.fd = -1;
}

/* ------------------------------------------------------------------ reading */

static int corrupt(fsZ_archive *z, char **err, const char *what) {
  return fsIO_fail(err, "%s: not a valid torch checkpoint (zip): %s", z->path, what);
}

/* The classic end record: *count members, directory of *dir_len bytes at *dir. */
static int find_end(fsZ_archive *z, uint64_t size, uint64_t *dir, uint64_t *dir_len, size_t *count, char **err) {
  size_t tail = size < END_LEN + 0xFFFF ? (size_t)size : END_LEN + 0xFFFF;
  *dir = *dir_len = 0;
  *count = 0;
  if (size < END_LEN) return corrupt(z, err, "the file is too short");
  uint8_t *t = malloc(tail);
  if (!t) return fsIO_fail(err, "%s: out of memory", z->path);
  if (fsIO_pread_full(z->fd, t, tail, size - tail) != (ssize_t)tail) {
    free(t);
    return fsIO_fail(err, "%s: cannot read: %s", z->path, strerror(errno));
  }
  size_t at = tail - END_LEN + 1;
  do at--;
  while (at > 0 && !(get(t + at, 4) == END_SIG && at + END_LEN + get(t + at + 20, 2) == tail));
  int rc = 0;
  const uint8_t *e = t + at;
  if (get(e, 4) != END_SIG || at + END_LEN + get(e + 20, 2) != tail) rc = corrupt(z, err, "no end of central directory");
  else if (get(e + 10, 2) == 0xFFFF || get(e + 12, 4) == LIMIT32 || get(e + 16, 4) == LIMIT32)
    rc = fsIO_fail(err, "%s: ZIP64 archives (over 4 GiB or 65535 members) are not supported yet", z->path);
  else if (get(e + 4, 2) != 0 || get(e + 6, 2) != 0 || get(e + 8, 2) != get(e + 10, 2))
    rc = corrupt(z, err, "a multi-disk archive");
  *count = (size_t)get(e + 10, 2);
  *dir_len = get(e + 12, 4);
  *dir = get(e + 16, 4);
  if (rc == 0 && (*dir > size - tail + at || *dir_len > size - tail + at - *dir || *count > *dir_len / CENTRAL_LEN))
    rc = corrupt(z, err, "the central directory lies outside the file");
  free(t);
  return rc;
}

/* Member m's local header agrees with the directory; sets m->data. */
static int check_local(fsZ_archive *z, fsZ_member *m, uint64_t dir, char **err) {
  size_t nl = strlen(m->name);
  uint8_t h[LOCAL_LEN];
  if (m->header > dir || dir - m->header < LOCAL_LEN + nl ||
      fsIO_pread_full(z->fd, h, LOCAL_LEN, m->header) != LOCAL_LEN || get(h, 4) != LOCAL_SIG ||
      get(h + 26, 2) != nl)
    return fsIO_fail(err, "%s: not a valid torch checkpoint (zip): member %s has no local header", z->path, m->name);
  char *name = malloc(nl + 1);
  if (!name) return fsIO_fail(err, "%s: out of memory", z->path);
  bool same = fsIO_pread_full(z->fd, name, nl, m->header + LOCAL_LEN) == (ssize_t)nl && memcmp(name, m->name, nl) == 0;
  free(name);
  m->data = m->header + LOCAL_LEN + nl + get(h + 28, 2);
  if (!same || m->data > dir || m->size > dir - m->data)
    return fsIO_fail(err, "%s: not a valid torch checkpoint (zip): member %s's local header disagrees with the "
                          "directory or its data runs past it", z->path, m->name);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const fsZ_member *)a)->name, ((const fsZ_member *)b)->name);
}

static int read_directory(fsZ_archive *z, uint64_t size, char **err) {
  uint64_t dir, dir_len;
  size_t count;
  if (find_end(z, size, &dir, &dir_len, &count, err) < 0) return -1;
  uint8_t *d = malloc((size_t)dir_len + 1);
  if (!d) return fsIO_fail(err, "%s: out of memory", z->path);
  if (fsIO_pread_full(z->fd, d, (size_t)dir_len, dir) != (ssize_t)dir_len) {
    free(d);
    return fsIO_fail(err, "%s: cannot read: %s", z->path, strerror(errno));
  }
  int rc = (z->m = calloc(count + 1, sizeof *z->m)) ? 0 : fsIO_fail(err, "%s: out of memory", z->path);
  uint64_t at = 0;
  for (; rc == 0 && z->n < count; z->n++) {
    const uint8_t *c = d + at;
    uint64_t nl = dir_len - at >= CENTRAL_LEN ? get(c + 28, 2) : 0;
    uint64_t skip = dir_len - at >= CENTRAL_LEN ? CENTRAL_LEN + nl + get(c + 30, 2) + get(c + 32, 2) : 0;
    if (!skip || skip > dir_len - at || get(c, 4) != CENTRAL_SIG) {
      rc = corrupt(z, err, "a damaged central directory");
      break;
    }
    fsZ_member *m = &z->m[z->n];
    if (!(m->name = malloc(nl + 1))) {
      rc = fsIO_fail(err, "%s: out of memory", z->path);
      break;
    }
    memcpy(m->name, c + CENTRAL_LEN, nl);
    m->name[nl] = '\0';
    m->crc = (uint32_t)get(c + 16, 4);
    m->size = get(c + 24, 4);
    m->header = get(c + 42, 4);
    if (strlen(m->name) != nl) rc = corrupt(z, err, "a member name holds a NUL byte");
    else if (get(c + 8, 2) & 1) rc = fsIO_fail(err, "%s: member %s is encrypted", z->path, m->name);
    else if (get(c + 20, 4) == LIMIT32 || m->size == LIMIT32 || m->header == LIMIT32)
      rc = fsIO_fail(err, "%s: ZIP64 archives (over 4 GiB or 65535 members) are not supported yet", z->path);
    else if (get(c + 10, 2) != 0 || get(c + 20, 4) != m->size)
      rc = fsIO_fail(err, "%s: member %s is compressed (method %u); torch writes stored members only", z->path,
                     m->name, (unsigned)get(c + 10, 2));
    else rc = check_local(z, m, dir, err);
    at += skip;
  }
  free(d);
  if (rc == 0 && z->n > 1) {
    qsort(z->m, z->n, sizeof *z->m, by_name);
    for (size_t i = 1; rc == 0 && i < z->n; i++)
      if (strcmp(z->m[i - 1].name, z->m[i].name) == 0)
        rc = fsIO_fail(err, "%s: not a valid torch checkpoint (zip): two members named %s", z->path, z->m[i].name);
  }
  return rc;
}

int fsZ_open(fsZ_archive *z, const char *path, char **err) {
  memset(z, 0, sizeof *z);
  uint64_t size;
  int rc = 0;
  if ((z->fd = fsIO_open_regular(path, &size, err)) < 0) return -1;
  if (!(z->path = strdup(path))) rc = fsIO_fail(err, "%s: out of memory", path);
  else rc = read_directory(z, size, err);
  if (rc < 0) fsZ_close(z);
  return rc;
}

void fsZ_close(fsZ_archive *z) {
  if (z->fd >= 0) close(z->fd);
  free_members(z->m, z->n);
  free(z->path);
  memset(z, 0, sizeof *z);
  z->fd = -1;
}

const fsZ_member *fsZ_find(const fsZ_archive *z, const char *name) {
  fsZ_member key = {.name = (char *)name};
  return z->n ? bsearch(&key, z->m, z->n, sizeof *z->m, by_name) : NULL;
}

int fsZ_read(const fsZ_archive *z, const fsZ_member *m, uint64_t at, void *dst, size_t len, char **err) {
  if (at > m->size || len > m->size - at)
    return fsIO_fail(err, "%s: bytes [%llu, %llu) are outside member %s", z->path, (unsigned long long)at,
                     (unsigned long long)(at + len), m->name);
  ssize_t got = fsIO_pread_full(z->fd, dst, len, m->data + at);
  return got == (ssize_t)len ? 0 : fsIO_fail(err, "%s: cannot read %s: %s", z->path, m->name,
                                               got < 0 ? strerror(errno) : "the file was truncated");
}

int fsZ_verify(const fsZ_archive *z, const fsZ_member *m, char **err) {
  uint32_t crc;
  if (crc_of(z->fd, m->data, m->size, &crc, z->path, err) < 0) return -1;
  return crc == m->crc ? 0 : fsIO_fail(err, "%s: member %s fails its CRC-32 check (the file is corrupt)", z->path, m->name);
}
