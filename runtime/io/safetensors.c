/* safetensors.c -- header layout, validation, atomic and sliced I/O. */
#define _POSIX_C_SOURCE 200809L
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataio.h"

/* The reference implementation's limit: a bigger header is corrupt. */
#define MAX_HEADER 100000000u
/* Elements converted per pread when dtypes differ. */
#define CONVERT_CHUNK 65536

/* ------------------------------------------------------------------ common */

/* Safetensors spelling of the dtypes. */
static const char *const tags[] = {[FS_F32] = "F32", [FS_BF16] = "BF16", [FS_I64] = "I64", [FS_BOOL] = "BOOL",
                                   [FS_F16] = "F16", [FS_F64] = "F64"};

static const char *dtype_tag(fs_dtype dt) { return tags[dt]; }

static int dtype_parse(const char *tag, fs_dtype *dt) {
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
    if (strcmp(tag, tags[i]) == 0) {
      *dt = (fs_dtype)i;
      return 0;
    }
  return -1;
}

static void free_infos(fsK_info *t, size_t n) {
  for (size_t i = 0; i < n; i++) free(t[i].name);
  free(t);
}

static void free_file(fsK_file *f) {
  free_infos(f->t, f->n);
  for (size_t i = 0; i < f->nmeta; i++) {
    free((char *)f->meta[i].key);
    free((char *)f->meta[i].value);
  }
  free(f->meta);
  free(f->path);
  memset(f, 0, sizeof *f);
  f->fd = -1;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const fsK_info *)a)->name, ((const fsK_info *)b)->name);
}

static int by_offset(const void *a, const void *b) {
  const fsK_info *x = *(const fsK_info *const *)a, *y = *(const fsK_info *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* The reference writer's data order: larger elements first, then by name. */
static int by_layout(const void *a, const void *b) {
  const fsK_info *x = a, *y = b;
  size_t sx = fsT_dtype_size(x->dtype), sy = fsT_dtype_size(y->dtype);
  if (sx != sy) return sx > sy ? -1 : 1;
  return strcmp(x->name, y->name);
}

const fsK_info *fsK_find(const fsK_file *f, const char *name) {
  fsK_info key = {.name = (char *)name};
  return f->n ? bsearch(&key, f->t, f->n, sizeof key, by_name) : NULL;
}

const char *fsK_meta_get(const fsK_file *f, const char *key) {
  for (size_t i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
  return NULL;
}

/* ------------------------------------------------------------------ header */

/* The JSON header of f's metadata and tensors (f->t in data order, as the
 * reference writer lists them), padded with spaces so that 8 + N is a
 * multiple of 8. */
static char *header_json(const fsK_file *f, size_t *len) {
  json_t *root = json_object();
  int bad = !root;
  if (!bad && f->nmeta) {
    json_t *m = json_object();
    bad = json_object_set_new(root, "__metadata__", m) != 0;
    for (size_t i = 0; !bad && i < f->nmeta; i++)
      bad = json_object_set_new(m, f->meta[i].key, json_string(f->meta[i].value)) != 0;
  }
  for (size_t i = 0; !bad && i < f->n; i++) {
    const fsK_info *t = &f->t[i];
    json_t *shape = json_array();
    for (int d = 0; shape && d < t->ndim; d++)
      if (json_array_append_new(shape, json_integer(t->shape[d])) != 0) break;
    json_t *e = json_pack("{s:s, s:o?, s:[I, I]}", "dtype", dtype_tag(t->dtype), "shape",
                          shape, "data_offsets", (json_int_t)t->begin, (json_int_t)t->end);
    bad = !shape || !e || json_object_set_new(root, t->name, e) != 0;
  }
  char *s = bad ? NULL : json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!s) return NULL;
  size_t n = strlen(s), padded = (n + 7) & ~(size_t)7;
  char *out = realloc(s, padded + 1);
  if (!out) {
    free(s);
    return NULL;
  }
  memset(out + n, ' ', padded - n);
  out[padded] = 0;
  *len = padded;
  return out;
}

static int parse_meta(fsK_file *f, json_t *m, char **err) {
  if (!json_is_object(m))
    return fsIO_fail(err, "%s: corrupt header: __metadata__ is not an object", f->path);
  f->meta = calloc(json_object_size(m) + 1, sizeof *f->meta);
  if (!f->meta) return fsIO_fail(err, "%s: out of memory", f->path);
  const char *k;
  json_t *v;
  json_object_foreach(m, k, v) {
    if (!json_is_string(v))
      return fsIO_fail(err, "%s: corrupt header: __metadata__ value of \"%s\" is not a string",
                       f->path, k);
    fsK_meta *e = &f->meta[f->nmeta++];
    e->key = strdup(k);
    e->value = strdup(json_string_value(v));
    if (!e->key || !e->value) return fsIO_fail(err, "%s: out of memory", f->path);
  }
  return 0;
}

static int parse_info(const char *path, const char *name, json_t *e, fsK_info *t, char **err) {
  json_t *dt = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape");
  json_t *off = json_object_get(e, "data_offsets");
  if (!json_is_object(e) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(off))
    return fsIO_fail(err, "%s: corrupt header: tensor \"%s\" needs dtype, shape and data_offsets",
                     path, name);
  if (dtype_parse(json_string_value(dt), &t->dtype) != 0)
    return fsIO_fail(err, "%s: tensor \"%s\" has dtype %s; supported are F32, F64, BF16, F16, I64 and BOOL", path,
                     name, json_string_value(dt));
  if (json_array_size(shape) > FS_MAX_RANK)
    return fsIO_fail(err, "%s: tensor \"%s\" has %zu dimensions, at most %d are supported", path,
                     name, json_array_size(shape), FS_MAX_RANK);
  t->ndim = (int)json_array_size(shape);
  for (int d = 0; d < t->ndim; d++) {
    json_t *v = json_array_get(shape, (size_t)d);
    t->shape[d] = json_is_integer(v) ? json_integer_value(v) : -1;
  }
  size_t es = fsT_dtype_size(t->dtype);
  json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
  if (fsIO_numel(t->ndim, t->shape, es, &t->numel) != 0)
    return fsIO_fail(err, "%s: corrupt header: tensor \"%s\" has an invalid shape", path, name);
  if (json_array_size(off) != 2 || !json_is_integer(b) || !json_is_integer(en) ||
      json_integer_value(b) < 0 || json_integer_value(en) < json_integer_value(b))
    return fsIO_fail(err, "%s: corrupt header: tensor \"%s\" has invalid data_offsets", path, name);
  t->begin = (uint64_t)json_integer_value(b);
  t->end = (uint64_t)json_integer_value(en);
  if (t->end - t->begin != t->numel * es) {
    char sh[160];
    return fsIO_fail(err, "%s: corrupt header: tensor \"%s\" (%s %s) needs %llu bytes but its "
                     "data_offsets span %llu", path, name, json_string_value(dt),
                     fsT_dims_str(t->ndim, t->shape, sh, sizeof sh),
                     (unsigned long long)(t->numel * es),
                     (unsigned long long)(t->end - t->begin));
  }
  return (t->name = strdup(name)) ? 0 : fsIO_fail(err, "%s: out of memory", path);
}

/* The tensors, in offset order, must tile the data section exactly. */
static int check_tiling(fsK_file *f, uint64_t data_len, char **err) {
  const fsK_info **o = malloc((f->n + 1) * sizeof *o);
  if (!o) return fsIO_fail(err, "%s: out of memory", f->path);
  for (size_t i = 0; i < f->n; i++) o[i] = &f->t[i];
  qsort(o, f->n, sizeof *o, by_offset);
  uint64_t at = 0;
  int rc = 0;
  for (size_t i = 0; i < f->n && rc == 0; i++) {
    if (o[i]->begin != at)
      rc = fsIO_fail(err, "%s: corrupt header: tensor \"%s\" starts at byte %llu of the data, "
                     "expected %llu (%s)", f->path, o[i]->name, (unsigned long long)o[i]->begin,
                     (unsigned long long)at, o[i]->begin < at ? "overlap" : "gap");
    at = o[i]->end;
  }
  if (rc == 0 && at != data_len)
    rc = at > data_len
             ? fsIO_fail(err, "%s: truncated: the header describes %llu bytes of tensor data, "
                         "the file holds %llu", f->path, (unsigned long long)at,
                         (unsigned long long)data_len)
             : fsIO_fail(err, "%s: corrupt: %llu bytes after the last tensor's data", f->path,
                         (unsigned long long)(data_len - at));
  free(o);
  return rc;
}

/* Reads and validates f->fd's header; f->path set. */
static int parse_header(fsK_file *f, char **err) {
  struct stat st;
  uint8_t lenbuf[8];
  if (fstat(f->fd, &st) != 0) return fsIO_fail(err, "%s: %s", f->path, strerror(errno));
  uint64_t size = (uint64_t)st.st_size, n = 0;
  if (size < 8)
    return fsIO_fail(err, "%s: truncated: %llu bytes, too short for a safetensors header", f->path,
                     (unsigned long long)size);
  if (fsIO_pread_full(f->fd, lenbuf, 8, 0) != 8)
    return fsIO_fail(err, "%s: read error: %s", f->path, strerror(errno));
  for (int i = 7; i >= 0; i--) n = n << 8 | lenbuf[i];
  if (n > MAX_HEADER)
    return fsIO_fail(err, "%s: not a safetensors file: header length %llu is over the limit of %u",
                     f->path, (unsigned long long)n, MAX_HEADER);
  if (n > size - 8)
    return fsIO_fail(err, "%s: truncated: header length %llu but only %llu bytes follow", f->path,
                     (unsigned long long)n, (unsigned long long)(size - 8));
  char *text = malloc(n + 1);
  if (!text) return fsIO_fail(err, "%s: out of memory", f->path);
  if (fsIO_pread_full(f->fd, text, n, 8) != (ssize_t)n) {
    free(text);
    return fsIO_fail(err, "%s: read error: %s", f->path, strerror(errno));
  }
  json_error_t je;
  int object = n && text[0] == '{';
  json_t *root = object ? json_loadb(text, n, JSON_REJECT_DUPLICATES, &je) : NULL;
  free(text);
  if (!root)
    return object
               ? fsIO_fail(err, "%s: corrupt header: invalid JSON at byte %d: %s", f->path,
                           je.position, je.text)
               : fsIO_fail(err, "%s: not a safetensors file: the header is not a JSON object",
                           f->path);
  int rc = 0;
  f->t = calloc(json_object_size(root) + 1, sizeof *f->t);
  if (!f->t) rc = fsIO_fail(err, "%s: out of memory", f->path);
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    if (rc) break;
    if (strcmp(k, "__metadata__") == 0) rc = parse_meta(f, v, err);
    else if ((rc = parse_info(f->path, k, v, &f->t[f->n], err)) == 0) f->n++;
  }
  json_decref(root);
  f->data_start = 8 + n;
  if (rc == 0) rc = check_tiling(f, size - f->data_start, err);
  if (rc == 0) qsort(f->t, f->n, sizeof *f->t, by_name);
  return rc;
}

/* ----------------------------------------------------------------- writing */

static int fill_layout(fsK_file *f, const char *path, const fsK_entry *ts, size_t n,
                       const fsK_meta *meta, size_t nmeta, char **err) {
  char sh[160];
  f->t = calloc(n + 1, sizeof *f->t);
  f->meta = calloc(nmeta + 1, sizeof *f->meta);
  if (!f->t || !f->meta) return fsIO_fail(err, "%s: out of memory", path);
  while (f->nmeta < nmeta) {
    fsK_meta *m = &f->meta[f->nmeta];
    m->key = strdup(meta[f->nmeta].key);
    m->value = strdup(meta[f->nmeta++].value);
    if (!m->key || !m->value) return fsIO_fail(err, "%s: out of memory", path);
  }
  for (; f->n < n; f->n++) {
    const fsK_entry *e = &ts[f->n];
    fsK_info *t = &f->t[f->n];
    if (!e->name || strcmp(e->name, "__metadata__") == 0)
      return fsIO_fail(err, "%s: cannot save a tensor named %s", path,
                       e->name ? "\"__metadata__\"" : "NULL");
    if (e->ndim < 0 || e->ndim > FS_MAX_RANK ||
        fsIO_numel(e->ndim, e->shape, fsT_dtype_size(e->dtype), &t->numel) != 0)
      return fsIO_fail(err, "%s: tensor \"%s\" has an invalid shape %s", path, e->name,
                       fsT_dims_str(e->ndim < 0 ? 0 : e->ndim, e->shape, sh, sizeof sh));
    if (!(t->name = strdup(e->name))) return fsIO_fail(err, "%s: out of memory", path);
    t->dtype = e->dtype;
    t->ndim = e->ndim;
    if (e->ndim) memcpy(t->shape, e->shape, sizeof(int64_t) * (size_t)e->ndim);
  }
  qsort(f->t, n, sizeof *f->t, by_layout);
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t bytes = f->t[i].numel * fsT_dtype_size(f->t[i].dtype);
    if (bytes > (uint64_t)INT64_MAX - at)
      return fsIO_fail(err, "%s: the tensors are too large for one file", path);
    f->t[i].begin = at;
    at = f->t[i].end = at + bytes;
  }
  return 0;
}

int fsK_create(fsK_writer *w, const char *path, const fsK_entry *ts, size_t n,
               const fsK_meta *meta, size_t nmeta, char **err) {
  memset(w, 0, sizeof *w);
  w->out.fd = w->layout.fd = -1;
  fsK_file *f = &w->layout;
  size_t hlen = 0;
  char *hdr = NULL;
  if (fill_layout(f, path, ts, n, meta, nmeta, err) != 0) goto fail;
  if (!(hdr = header_json(f, &hlen))) {
    fsIO_fail(err, "%s: cannot encode the header (names and metadata must be UTF-8)", path);
    goto fail;
  }
  uint64_t total = 8 + hlen + (n ? f->t[n - 1].end : 0);
  qsort(f->t, n, sizeof *f->t, by_name);
  for (size_t i = 1; i < n; i++)
    if (strcmp(f->t[i - 1].name, f->t[i].name) == 0) {
      fsIO_fail(err, "%s: two tensors named \"%s\"", path, f->t[i].name);
      goto fail;
    }
  if (!(f->path = strdup(path))) {
    fsIO_fail(err, "%s: out of memory", path);
    goto fail;
  }
  if (fsK_atomic_open(&w->out, path, err) != 0) goto fail;
  f->fd = w->out.fd;
  f->data_start = 8 + hlen;
  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  if (fsIO_pwrite_full(f->fd, len8, 8, 0) != 8 || fsIO_pwrite_full(f->fd, hdr, hlen, 8) != (ssize_t)hlen ||
      ftruncate(f->fd, (off_t)total) != 0) {
    fsIO_fail(err, "%s: cannot write %s: %s", path, w->out.tmp, strerror(errno));
    goto fail;
  }
  free(hdr);
  return 0;
fail:
  free(hdr);
  fsK_abort(w);
  return -1;
}

const char *fsK_tmp_path(const fsK_writer *w) { return w->out.tmp; }

int fsK_attach(fsK_writer *w, const char *tmp_path, char **err) {
  memset(w, 0, sizeof *w);
  fsK_file *f = &w->layout;
  w->out.tmp = strdup(tmp_path);
  f->path = strdup(tmp_path);
  w->out.fd = f->fd = open(tmp_path, O_RDWR | O_CLOEXEC);
  if (!w->out.tmp || !f->path || f->fd < 0) {
    fsIO_fail(err, "%s: cannot open: %s", tmp_path, f->fd < 0 ? strerror(errno) : "out of memory");
    fsK_abort(w);
    return -1;
  }
  if (parse_header(f, err) != 0) {
    fsK_abort(w);
    return -1;
  }
  return 0;
}

int fsK_write(fsK_writer *w, const char *name, uint64_t first, uint64_t count, const void *src,
              char **err) {
  const fsK_file *f = &w->layout;
  const fsK_info *t = fsK_find(f, name);
  if (!t) return fsIO_fail(err, "%s: no tensor \"%s\" in this checkpoint", f->path, name);
  if (first > t->numel || count > t->numel - first)
    return fsIO_fail(err, "%s: elements [%llu, %llu) are outside tensor \"%s\" of %llu", f->path,
                     (unsigned long long)first, (unsigned long long)(first + count), name,
                     (unsigned long long)t->numel);
  size_t es = fsT_dtype_size(t->dtype), nb = (size_t)count * es;
  if (fsIO_pwrite_full(f->fd, src, nb, f->data_start + t->begin + first * es) != (ssize_t)nb)
    return fsIO_fail(err, "%s: cannot write tensor \"%s\": %s", f->path, name, strerror(errno));
  return 0;
}

int fsK_commit(fsK_writer *w, char **err) {
  int rc;
  if (w->out.path) rc = fsK_atomic_commit(&w->out, err);
  else {
    rc = fsync(w->out.fd) == 0 ? 0 : fsIO_fail(err, "%s: fsync failed: %s", w->out.tmp,
                                                strerror(errno));
    close(w->out.fd);
    free(w->out.tmp);
  }
  free_file(&w->layout);
  memset(&w->out, 0, sizeof w->out);
  w->out.fd = -1;
  return rc;
}

void fsK_abort(fsK_writer *w) {
  if (w->out.path) fsK_atomic_abort(&w->out);
  else {
    /* Attached: the owner removes the shared file. */
    if (w->out.fd >= 0) close(w->out.fd);
    free(w->out.tmp);
  }
  free_file(&w->layout);
  memset(&w->out, 0, sizeof w->out);
  w->out.fd = -1;
}

int fsK_save(const char *path, const fsK_entry *ts, size_t n, const fsK_meta *meta, size_t nmeta,
             char **err) {
  fsK_writer w;
  if (fsK_create(&w, path, ts, n, meta, nmeta, err) != 0) return -1;
  for (size_t i = 0; i < n; i++) {
    const fsK_info *t = fsK_find(&w.layout, ts[i].name);
    if (fsK_write(&w, ts[i].name, 0, t->numel, ts[i].data, err) != 0) {
      fsK_abort(&w);
      return -1;
    }
  }
  return fsK_commit(&w, err);
}

/* ----------------------------------------------------------------- reading */

int fsK_open(fsK_file *f, const char *path, char **err) {
  memset(f, 0, sizeof *f);
  if ((f->fd = fsIO_open_regular(path, NULL, err)) < 0) return -1;
  if (!(f->path = strdup(path)) ? fsIO_fail(err, "%s: out of memory", path) : parse_header(f, err)) {
    fsK_close(f);
    return -1;
  }
  return 0;
}

void fsK_close(fsK_file *f) {
  if (f->fd >= 0) close(f->fd);
  free_file(f);
}

int fsK_read(const fsK_file *f, const fsK_info *t, uint64_t first, uint64_t count, fs_dtype dt,
             void *dst, char **err) {
  if (first > t->numel || count > t->numel - first)
    return fsIO_fail(err, "%s: elements [%llu, %llu) are outside tensor \"%s\" of %llu", f->path,
                     (unsigned long long)first, (unsigned long long)(first + count), t->name,
                     (unsigned long long)t->numel);
  size_t es = fsT_dtype_size(t->dtype), ds = fsT_dtype_size(dt);
  uint64_t off = f->data_start + t->begin + first * es;
  if (dt == t->dtype) {
    ssize_t got = fsIO_pread_full(f->fd, dst, (size_t)count * es, off);
    return got == (ssize_t)(count * es) ? 0
           : fsIO_fail(err, "%s: cannot read tensor \"%s\": %s", f->path, t->name,
                       got < 0 ? strerror(errno) : "the file was truncated");
  }
  uint8_t *buf = malloc(CONVERT_CHUNK * es);
  if (!buf) return fsIO_fail(err, "%s: out of memory", f->path);
  for (uint64_t done = 0; done < count;) {
    size_t k = count - done < CONVERT_CHUNK ? (size_t)(count - done) : CONVERT_CHUNK;
    ssize_t got = fsIO_pread_full(f->fd, buf, k * es, off + done * es);
    if (got != (ssize_t)(k * es)) {
      free(buf);
      return fsIO_fail(err, "%s: cannot read tensor \"%s\": %s", f->path, t->name,
                       got < 0 ? strerror(errno) : "the file was truncated");
    }
    char *out = (char *)dst + done * ds;
    fsT_convert(dt, out, t->dtype, buf, k);
    done += k;
  }
  free(buf);
  return 0;
}

/* ---------------------------------------------------------------- matching */

static void list_names(FILE *m, const char *title, int *first_part, const char *const *names,
                       size_t n) {
  if (!n) return;
  fprintf(m, "%s%s: ", *first_part ? "" : "; ", title);
  for (size_t i = 0; i < n; i++) fprintf(m, "%s\"%s\"", i ? ", " : "", names[i]);
  *first_part = 0;
}

char *fsK_match(const fsK_file *f, const fsK_entry *want, size_t n, const char *prefix,
                const fsK_info **found) {
  size_t plen = prefix ? strlen(prefix) : 0, nmiss = 0, nextra = 0, nbad = 0;
  bool *used = calloc(f->n + 1, sizeof *used);
  const char **miss = calloc(n + 1, sizeof *miss), **extra = calloc(f->n + 1, sizeof *extra);
  size_t *bad = calloc(n + 1, sizeof *bad);
  char *msg = NULL;
  size_t len;
  if (!used || !miss || !extra || !bad) goto oom;
  for (size_t i = 0; i < n; i++) {
    const fsK_info *t = fsK_find(f, want[i].name);
    found[i] = NULL;
    if (!t) miss[nmiss++] = want[i].name;
    else {
      used[t - f->t] = true;
      if (t->ndim != want[i].ndim ||
          (t->ndim && memcmp(t->shape, want[i].shape, sizeof(int64_t) * (size_t)t->ndim) != 0))
        bad[nbad++] = i;
      else found[i] = t;
    }
  }
  for (size_t j = 0; j < f->n; j++)
    if (!used[j] && strncmp(f->t[j].name, prefix ? prefix : "", plen) == 0)
      extra[nextra++] = f->t[j].name;
  if (nmiss + nextra + nbad) {
    FILE *m = open_memstream(&msg, &len);
    if (!m) goto oom;
    int first_part = 1;
    fprintf(m, "%s: ", f->path);
    list_names(m, "missing key(s)", &first_part, miss, nmiss);
    list_names(m, "unexpected key(s)", &first_part, extra, nextra);
    for (size_t k = 0; k < nbad; k++) {
      const fsK_entry *e = &want[bad[k]];
      const fsK_info *t = fsK_find(f, e->name);
      char a[160], b[160];
      fprintf(m, "%ssize mismatch for \"%s\": shape %s in the checkpoint, %s expected",
              first_part ? "" : "; ", e->name, fsT_dims_str(t->ndim, t->shape, a, sizeof a),
              fsT_dims_str(e->ndim, e->shape, b, sizeof b));
      first_part = 0;
    }
    if (fclose(m) != 0) goto oom;
  }
  free(used);
  free(miss);
  free(extra);
  free(bad);
  return msg;
oom:
  free(used);
  free(miss);
  free(extra);
  free(bad);
  free(msg);
  return fsIO_errf("%s: out of memory comparing the checkpoint", f->path);
}

int fsK_load(const fsK_file *f, const fsK_entry *want, size_t n, const char *prefix, bool strict,
             void **bufs, char **report, char **err) {
  const fsK_info **found = calloc(n + 1, sizeof *found);
  if (!found) return fsIO_fail(err, "%s: out of memory", f->path);
  for (size_t i = 0; i < n; i++) bufs[i] = NULL;
  char *msg = fsK_match(f, want, n, prefix, found);
  int rc = 0;
  if (msg && strict) {
    if (err) *err = msg;
    else free(msg);
    msg = NULL;
    rc = -1;
  }
  for (size_t i = 0; rc == 0 && i < n; i++) {
    if (!found[i]) continue;
    size_t nb = (size_t)found[i]->numel * fsT_dtype_size(want[i].dtype);
    if (!(bufs[i] = malloc(nb ? nb : 1))) rc = fsIO_fail(err, "%s: out of memory", f->path);
    else rc = fsK_read(f, found[i], 0, found[i]->numel, want[i].dtype, bufs[i], err);
  }
  if (rc != 0) {
    for (size_t i = 0; i < n; i++) {
      free(bufs[i]);
      bufs[i] = NULL;
    }
    free(msg);
    msg = NULL;
  }
  if (report) *report = msg;
  else free(msg);
  free(found);
  return rc;
}
