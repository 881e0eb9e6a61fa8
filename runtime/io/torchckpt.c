/* torchckpt.c -- torch.save's file: the pickle in a zip, storages beside it.
 * Member order is torch's: data.pkl, byteorder, data/<key> by key as text
 * ("0", "1", "10", "2", ...), version. */
#define _POSIX_C_SOURCE 200809L
#include "torchckpt.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataio.h"

/* Format version torch.save writes; torch 1.13 reads versions 1 to 10. */
#define FORMAT_VERSION "3\n"
#define MAX_VERSION 10
/* Larger than any data.pkl of a state dict; past it the file is hostile. */
#define MAX_PICKLE (1u << 30)

bool fsH_is_torch_path(const char *path) {
  static const char *const ext[] = {".pt", ".pth", ".ckpt"};
  size_t n = strlen(path);
  for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
    if (n > strlen(ext[i]) && strcmp(path + n - strlen(ext[i]), ext[i]) == 0 && path[n - strlen(ext[i]) - 1] != '/')
      return true;
  return false;
}

/* ------------------------------------------------------------------ writing */

/* torch's archive name: the file's name without directory and extension. */
static char *stem(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  size_t n = dot ? (size_t)(dot - base) : strlen(base);
  if (n == 0) return strdup("archive");
  char *s = malloc(n + 1);
  if (s) {
    memcpy(s, base, n);
    s[n] = '\0';
  }
  return s;
}

static int by_key_text(const void *a, const void *b) {
  char x[24], y[24];
  snprintf(x, sizeof x, "%zu", *(const size_t *)a);
  snprintf(y, sizeof y, "%zu", *(const size_t *)b);
  return strcmp(x, y);
}

/* The pickle, the tensors and the members of root; w->tensors and
 * w->member set, *names and *sizes (n_members) malloc'd. */
static int plan(fsH_writer *w, const char *path, char *s, const fsQ_value *root, uint8_t **pkl, size_t *pkl_len,
                char ***names, uint64_t **sizes, size_t *n_members, char **err) {
  char *msg = NULL;
  *names = NULL;
  *sizes = NULL;
  *pkl = NULL;
  if (!s) return fsIO_fail(err, "%s: cannot name the archive (out of memory, or not a file fsH_create started)", path);
  if (fsQ_dump(root, pkl, pkl_len, &w->tensors, &w->nt, &msg) < 0) {
    free(s);
    fsIO_fail(err, "%s: cannot save: %s", path, msg ? msg : "out of memory");
    free(msg);
    return -1;
  }
  size_t n = w->nt + 3, *order = calloc(w->nt + 1, sizeof *order);
  *names = calloc(n, sizeof **names);
  *sizes = calloc(n, sizeof **sizes);
  w->member = calloc(w->nt + 1, sizeof *w->member);
  *n_members = n;
  int rc = order && *names && *sizes && w->member ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < w->nt; i++) order[i] = i;
  if (rc == 0) qsort(order, w->nt, sizeof *order, by_key_text);
  size_t slen = strlen(s) + 32;
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (!((*names)[i] = malloc(slen))) rc = -1;
  if (rc == 0) {
    snprintf((*names)[0], slen, "%s/data.pkl", s);
    (*sizes)[0] = *pkl_len;
    snprintf((*names)[1], slen, "%s/byteorder", s);
    (*sizes)[1] = 6;
    for (size_t j = 0; j < w->nt; j++) {
      const fsQ_tensor *t = &w->tensors[order[j]]->u.t;
      snprintf((*names)[2 + j], slen, "%s/data/%zu", s, order[j]);
      (*sizes)[2 + j] = t->numel * fsT_dtype_size(t->dtype);
      w->member[order[j]] = 2 + j;
    }
    snprintf((*names)[n - 1], slen, "%s/version", s);
    (*sizes)[n - 1] = strlen(FORMAT_VERSION);
  }
  free(order);
  free(s);
  return rc == 0 ? 0 : fsIO_fail(err, "%s: out of memory", path);
}

static void free_plan(uint8_t *pkl, char **names, uint64_t *sizes, size_t n) {
  for (size_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
  free(sizes);
  free(pkl);
}

static void release(fsH_writer *w) {
  free(w->tensors);
  free(w->member);
  w->tensors = NULL;
  w->member = NULL;
  w->nt = 0;
}

int fsH_create(fsH_writer *w, const char *path, const fsQ_value *root, char **err) {
  memset(w, 0, sizeof *w);
  w->z.out.fd = -1;
  uint8_t *pkl;
  size_t len, n = 0;
  char **names;
  uint64_t *sizes;
  int rc = plan(w, path, stem(path), root, &pkl, &len, &names, &sizes, &n, err);
  if (rc == 0) rc = fsZ_create(&w->z, path, (const char *const *)names, sizes, n, err);
  else w->z.out.fd = -1;
  bool open = rc == 0;
  if (rc == 0) rc = fsZ_write(&w->z, 0, 0, pkl, len, err);
  if (rc == 0) rc = fsZ_write(&w->z, 1, 0, "little", 6, err);
  if (rc == 0) rc = fsZ_write(&w->z, n - 1, 0, FORMAT_VERSION, strlen(FORMAT_VERSION), err);
  for (size_t i = 0; rc == 0 && i < w->nt; i++)
    if (w->tensors[i]->u.t.data) rc = fsH_write(w, w->tensors[i], 0, w->tensors[i]->u.t.numel, w->tensors[i]->u.t.data, err);
  free_plan(pkl, names, sizes, n);
  if (rc < 0) {
    if (open) fsZ_abort(&w->z);
    release(w);
  }
  return rc;
}

const char *fsH_tmp_path(const fsH_writer *w) { return fsZ_tmp_path(&w->z); }

/* The archive name the owner chose (from the final path, which an attached
 * writer does not know): its first member is "<stem>/data.pkl". NULL when
 * the file does not start so. */
static char *owner_stem(const char *tmp_path) {
  int fd = open(tmp_path, O_RDONLY | O_CLOEXEC);
  uint8_t h[30];
  char *s = NULL;
  if (fd >= 0 && fsIO_pread_full(fd, h, sizeof h, 0) == (ssize_t)sizeof h) {
    size_t n = (size_t)(h[26] | h[27] << 8);
    if (n > 9 && (s = malloc(n + 1)) && fsIO_pread_full(fd, s, n, sizeof h) == (ssize_t)n) {
      s[n] = '\0';
      if (strcmp(s + n - 9, "/data.pkl") == 0) s[n - 9] = '\0';
      else s[0] = '\0';
    }
  }
  if (fd >= 0) close(fd);
  if (s && !s[0]) {
    free(s);
    s = NULL;
  }
  return s;
}

int fsH_attach(fsH_writer *w, const char *tmp_path, const fsQ_value *root, char **err) {
  memset(w, 0, sizeof *w);
  uint8_t *pkl, *theirs = NULL;
  size_t len, n = 0;
  char **names;
  uint64_t *sizes;
  int rc = plan(w, tmp_path, owner_stem(tmp_path), root, &pkl, &len, &names, &sizes, &n, err);
  if (rc == 0) rc = fsZ_attach(&w->z, tmp_path, (const char *const *)names, sizes, n, err);
  bool open = rc == 0;
  if (rc == 0 && !(theirs = malloc(len + 1))) rc = fsIO_fail(err, "%s: out of memory", tmp_path);
  if (rc == 0 && (fsIO_pread_full(w->z.out.fd, theirs, len, w->z.m[0].data) != (ssize_t)len || memcmp(theirs, pkl, len) != 0))
    rc = fsIO_fail(err, "%s: the owner's checkpoint holds other values than this process's", tmp_path);
  free(theirs);
  free_plan(pkl, names, sizes, n);
  if (rc < 0) {
    if (open) fsZ_abort(&w->z);
    release(w);
  }
  return rc;
}

int fsH_write(fsH_writer *w, const fsQ_value *t, uint64_t first, uint64_t count, const void *src, char **err) {
  size_t i = 0;
  while (i < w->nt && w->tensors[i] != t) i++;
  const char *path = w->z.out.path ? w->z.out.path : w->z.out.tmp;
  if (i == w->nt) return fsIO_fail(err, "%s: the tensor written is not in this checkpoint", path);
  const fsQ_tensor *x = &t->u.t;
  if (first > x->numel || count > x->numel - first)
    return fsIO_fail(err, "%s: elements [%llu, %llu) are outside a tensor of %llu", path, (unsigned long long)first,
                     (unsigned long long)(first + count), (unsigned long long)x->numel);
  size_t es = fsT_dtype_size(x->dtype);
  return fsZ_write(&w->z, w->member[i], first * es, src, (size_t)count * es, err);
}

int fsH_commit(fsH_writer *w, char **err) {
  release(w);
  return fsZ_commit(&w->z, err);
}

void fsH_abort(fsH_writer *w) {
  release(w);
  fsZ_abort(&w->z);
}

int fsH_save(const char *path, const fsQ_value *root, char **err) {
  fsH_writer w;
  return fsH_create(&w, path, root, err) < 0 ? -1 : fsH_commit(&w, err);
}

/* ------------------------------------------------------------------ reading */

/* The archive's one "<stem>/data.pkl" gives the stem. */
static int find_stem(const fsZ_archive *z, char *s, size_t cap, char **err) {
  int found = 0;
  for (size_t i = 0; i < z->n; i++) {
    const char *name = z->m[i].name, *slash = strchr(name, '/');
    if (!slash || strcmp(slash, "/data.pkl") != 0) continue;
    if (found++ || (size_t)(slash - name) >= cap)
      return fsIO_fail(err, "%s: not a torch checkpoint: %s", z->path,
                       found > 1 ? "it holds several data.pkl" : "its archive name is too long");
    memcpy(s, name, (size_t)(slash - name));
    s[slash - name] = '\0';
  }
  return found ? 0 : fsIO_fail(err, "%s: not a torch checkpoint: it holds no data.pkl", z->path);
}

/* The verified member "<stem>/<name>" read whole into a NUL-terminated
 * malloc'd buffer (*out); NULL member when absent and optional. */
static int small_member(const fsZ_archive *z, const char *s, const char *name, size_t max, bool optional,
                        uint8_t **out, size_t *len, char **err) {
  char full[600];
  snprintf(full, sizeof full, "%s/%s", s, name);
  const fsZ_member *m = fsZ_find(z, full);
  *out = NULL;
  if (!m) return optional ? 0 : fsIO_fail(err, "%s: not a torch checkpoint: it holds no %s", z->path, name);
  if (m->size > max) return fsIO_fail(err, "%s: %s is %llu bytes, more than the %zu this reader takes", z->path, name,
                                      (unsigned long long)m->size, max);
  if (fsZ_verify(z, m, err) < 0) return -1;
  if (!(*out = malloc((size_t)m->size + 1))) return fsIO_fail(err, "%s: out of memory", z->path);
  if (fsZ_read(z, m, 0, *out, (size_t)m->size, err) < 0) {
    free(*out);
    *out = NULL;
    return -1;
  }
  (*out)[m->size] = '\0';
  *len = (size_t)m->size;
  return 0;
}

static int check_header(fsH_file *f, const char *s, char **err) {
  uint8_t *text;
  size_t len;
  if (small_member(&f->z, s, "version", 16, false, &text, &len, err) < 0) return -1;
  char *end;
  long v = strtol((const char *)text, &end, 10);
  bool ok = end != (char *)text && (*end == '\0' || *end == '\n') && v >= 1 && v <= MAX_VERSION;
  free(text);
  if (!ok) return fsIO_fail(err, "%s: unsupported torch file format version (1 to %d are read)", f->z.path, MAX_VERSION);
  if (small_member(&f->z, s, "byteorder", 16, true, &text, &len, err) < 0) return -1;
  ok = !text || strcmp((const char *)text, "little") == 0;
  free(text);
  return ok ? 0 : fsIO_fail(err, "%s: byteorder is not \"little\" (big-endian checkpoints are not supported)", f->z.path);
}

/* Each storage's member: present, of its size, with a good CRC. */
static int bind_storages(fsH_file *f, const char *s, char **err) {
  const fsQ_doc *d = f->doc;
  if (!(f->storage = calloc(d->nstorages + 1, sizeof *f->storage))) return fsIO_fail(err, "%s: out of memory", f->z.path);
  for (size_t i = 0; i < d->nstorages; i++) {
    const fsQ_storage *st = &d->storages[i];
    size_t len = strlen(s) + strlen(st->key) + 8;
    char *name = malloc(len);
    if (!name) return fsIO_fail(err, "%s: out of memory", f->z.path);
    snprintf(name, len, "%s/data/%s", s, st->key);
    const fsZ_member *m = fsZ_find(&f->z, name);
    free(name);
    uint64_t bytes = st->numel * fsT_dtype_size(st->dtype);
    if (!m) return fsIO_fail(err, "%s: storage '%s' has no data/%s member", f->z.path, st->key, st->key);
    if (m->size != bytes)
      return fsIO_fail(err, "%s: storage '%s' holds %llu bytes, not the %llu of %llu %s elements", f->z.path, st->key,
                       (unsigned long long)m->size, (unsigned long long)bytes, (unsigned long long)st->numel,
                       fsT_dtype_name(st->dtype));
    if (fsZ_verify(&f->z, m, err) < 0) return -1;
    f->storage[i] = m;
  }
  return 0;
}

int fsH_open(fsH_file *f, const char *path, char **err) {
  memset(f, 0, sizeof *f);
  if (fsZ_open(&f->z, path, err) < 0) return -1;
  char s[512], *msg = NULL;
  uint8_t *pkl = NULL;
  size_t len;
  int rc = find_stem(&f->z, s, sizeof s, err);
  if (rc == 0) rc = check_header(f, s, err);
  if (rc == 0) rc = small_member(&f->z, s, "data.pkl", MAX_PICKLE, false, &pkl, &len, err);
  if (rc == 0 && fsQ_load(pkl, len, &f->doc, &msg) < 0) {
    rc = fsIO_fail(err, "%s: %s", path, msg ? msg : "out of memory");
    free(msg);
  }
  free(pkl);
  if (rc == 0) rc = bind_storages(f, s, err);
  if (rc < 0) fsH_close(f);
  return rc;
}

void fsH_close(fsH_file *f) {
  fsZ_close(&f->z);
  fsQ_free(f->doc);
  free(f->storage);
  f->doc = NULL;
  f->storage = NULL;
}

static bool contiguous(const fsQ_tensor *t) {
  int64_t want = 1;
  for (int k = t->ndim - 1; k >= 0; k--) {
    if (t->shape[k] != 1 && t->stride[k] != want) return false;
    want *= t->shape[k];
  }
  return true;
}

/* Elements of a strided view: its span of the storage read once, then
 * gathered in row-major order. */
static int gather(const fsH_file *f, const fsQ_tensor *t, uint64_t first, uint64_t count, void *dst, char **err) {
  size_t es = fsT_dtype_size(t->dtype);
  uint64_t span = 1;
  for (int k = 0; k < t->ndim; k++) span += (uint64_t)(t->shape[k] - 1) * (uint64_t)t->stride[k];
  uint8_t *buf = malloc((size_t)(span * es));
  if (!buf) return fsIO_fail(err, "%s: out of memory", f->z.path);
  if (fsZ_read(&f->z, f->storage[t->storage], (uint64_t)t->offset * es, buf, (size_t)(span * es), err) < 0) {
    free(buf);
    return -1;
  }
  int64_t idx[FS_MAX_RANK];
  uint64_t rest = first, at = 0;
  for (int k = t->ndim - 1; k >= 0; k--) {
    idx[k] = (int64_t)(rest % (uint64_t)t->shape[k]);
    rest /= (uint64_t)t->shape[k];
    at += (uint64_t)idx[k] * (uint64_t)t->stride[k];
  }
  for (uint64_t i = 0; i < count; i++) {
    memcpy((uint8_t *)dst + i * es, buf + at * es, es);
    for (int k = t->ndim - 1; k >= 0; k--) { /* the next index, odometer-wise */
      at += (uint64_t)t->stride[k];
      if (++idx[k] < t->shape[k]) break;
      at -= (uint64_t)t->stride[k] * (uint64_t)idx[k];
      idx[k] = 0;
    }
  }
  free(buf);
  return 0;
}

int fsH_read(const fsH_file *f, const fsQ_value *v, uint64_t first, uint64_t count, fs_dtype dt, void *dst,
             char **err) {
  const fsQ_tensor *t = &v->u.t;
  if (v->kind != FSQ_TENSOR || !t->loaded) return fsIO_fail(err, "%s: not a tensor of this checkpoint", f->z.path);
  if (first > t->numel || count > t->numel - first)
    return fsIO_fail(err, "%s: elements [%llu, %llu) are outside a tensor of %llu", f->z.path,
                     (unsigned long long)first, (unsigned long long)(first + count), (unsigned long long)t->numel);
  if (!count) return 0;
  size_t es = fsT_dtype_size(t->dtype);
  void *raw = dt == t->dtype ? dst : malloc((size_t)count * es);
  if (!raw) return fsIO_fail(err, "%s: out of memory", f->z.path);
  int rc = contiguous(t) ? fsZ_read(&f->z, f->storage[t->storage], ((uint64_t)t->offset + first) * es, raw,
                                    (size_t)count * es, err)
                         : gather(f, t, first, count, raw, err);
  if (rc == 0 && raw != dst) fsT_convert(dt, dst, t->dtype, raw, (size_t)count);
  if (raw != dst) free(raw);
  return rc;
}
