/* dataset_file.c -- data sets over the files users have: NumPy .npy
 * (memory-mapped) and .npz (zip, stored or deflated), raw token files as
 * nanoGPT and llm.c write them (memory-mapped), and CSV files of numbers.
 *
 * Invariant: a mapped file is checked whole at open (header, dtype, shape
 * against the file's size), so an item read can no longer fail; the mapping
 * is read-only and shared by every thread. Conversion: floating types to
 * float32, integer and bool types to int64 (the runtime's two dtypes for
 * data). The other half is dataset.c's fsS_get, which calls fsS_file_item. */
#define _DEFAULT_SOURCE /* strndup */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "dataio.h"
#include "dataset.h"
#include "rng.h"

/* ---- NumPy's array format ------------------------------------------------------------------ */

static const struct { const char *descr; fsS_elem code; size_t size; } descrs[] = {
  {"f2", FSS_E_F16, 2}, {"f4", FSS_E_F32, 4}, {"f8", FSS_E_F64, 8}, {"i1", FSS_E_I8, 1},
  {"u1", FSS_E_U8, 1}, {"i2", FSS_E_I16, 2}, {"u2", FSS_E_U16, 2}, {"i4", FSS_E_I32, 4},
  {"u4", FSS_E_U32, 4}, {"i8", FSS_E_I64, 8}, {"u8", FSS_E_U64, 8}, {"b1", FSS_E_BOOL, 1},
};

/* the text after 'key': in the header dict, or NULL */
static const char *dict_value(const char *h, const char *key) {
  const char *k = strstr(h, key);
  if (!k) return NULL;
  k = strchr(k + strlen(key), ':');
  if (!k) return NULL;
  for (k++; *k == ' '; k++) {}
  return k;
}

/* Parses the header of an .npy image of n bytes: *a's element type, shape
 * and data offset; checks the data's length. -1 + *why. */
static int npy_parse(const uint8_t *p, size_t n, fsS_array *a, char **why) {
  if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0) {
    *why = fsIO_errf("not a NumPy .npy file (no \\x93NUMPY magic)");
    return -1;
  }
  int major = p[6];
  size_t hl = major == 1 ? (size_t)(p[8] | p[9] << 8) : n >= 12 ? (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24 : 0;
  size_t off = (major == 1 ? 10 : 12) + hl;
  if (major < 1 || major > 3) {
    *why = fsIO_errf("unsupported .npy format version %d.%d", major, p[7]);
    return -1;
  }
  if (off > n || hl > 65536 * 16) {
    *why = fsIO_errf("truncated: the header claims %zu bytes, the file holds %zu", hl, n);
    return -1;
  }
  char *h = malloc(hl + 1);
  if (!h) {
    *why = fsIO_errf("out of memory");
    return -1;
  }
  memcpy(h, p + (major == 1 ? 10 : 12), hl);
  h[hl] = 0;
  const char *d = dict_value(h, "'descr'"), *f = dict_value(h, "'fortran_order'"), *s = dict_value(h, "'shape'");
  int rc = -1;
  if (!d || !f || !s || *d != '\'' || *s != '(') {
    *why = fsIO_errf("corrupt header: expected {'descr': ..., 'fortran_order': ..., 'shape': (...)}");
    goto done;
  }
  if (d[1] == '>' && !(d[2] == 'i' && d[3] == '1') && !(d[2] == 'u' && d[3] == '1') && !(d[2] == 'b' && d[3] == '1')) {
    *why = fsIO_errf("big-endian data (dtype '%.3s') is not supported", d + 1);
    goto done;
  }
  a->code = FSS_E_NONE;
  for (size_t k = 0; k < sizeof descrs / sizeof *descrs; k++)
    if ((d[1] == '<' || d[1] == '|' || d[1] == '=' || d[1] == '>') && !strncmp(d + 2, descrs[k].descr, 2) && d[4] == '\'') {
      a->code = descrs[k].code;
      a->esize = descrs[k].size;
    }
  if (a->code == FSS_E_NONE) {
    const char *end = strchr(d + 1, '\'');
    *why = fsIO_errf("dtype '%.*s' is not supported (numbers and bools only)", end ? (int)(end - d - 1) : 8, d + 1);
    goto done;
  }
  if (strncmp(f, "False", 5) != 0) {
    *why = fsIO_errf("Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");
    goto done;
  }
  a->ndim = 0;
  uint64_t numel = 1;
  for (s++; *s && *s != ')';) {
    while (*s == ' ' || *s == ',') s++;
    if (*s == ')') break;
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (e == s || v < 0 || errno || a->ndim >= FS_MAX_RANK - 1 || (v && numel > UINT64_MAX / 16 / (uint64_t)v)) {
      *why = fsIO_errf("corrupt header: bad shape (at most %d dimensions of sizes >= 0)", FS_MAX_RANK - 1);
      goto done;
    }
    a->shape[a->ndim++] = v;
    numel *= (uint64_t)v;
    s = e;
  }
  if (*s != ')') {
    *why = fsIO_errf("corrupt header: unterminated shape");
    goto done;
  }
  a->numel = numel;
  uint64_t want = numel * a->esize;
  if (n - off < want) {
    *why = fsIO_errf("truncated: shape needs %llu bytes of data, the file holds %zu", (unsigned long long)want, n - off);
    goto done;
  }
  if (n - off > want) {
    *why = fsIO_errf("trailing data: shape needs %llu bytes of data, the file holds %zu", (unsigned long long)want, n - off);
    goto done;
  }
  a->data = p + off;
  rc = 0;
done:
  free(h);
  return rc;
}

fs_dtype fsS_elem_dtype(fsS_elem e) { return e <= FSS_E_F64 ? FS_F32 : FS_I64; }

static float half(uint16_t h) {
  int e = h >> 10 & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
  return h >> 15 ? -v : v;
}

void fsS_convert(fsS_elem e, const void *src, size_t n, void *dst) {
  const uint8_t *s = src;
  float *f = dst;
  int64_t *i = dst;
  for (size_t k = 0; k < n; k++) {
    union { uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32; double f64; uint64_t u64; int64_t i64; } v;
    switch (e) {
    case FSS_E_F16: memcpy(&v.u16, s + 2 * k, 2); f[k] = half(v.u16); break;
    case FSS_E_F32: memcpy(&v.f32, s + 4 * k, 4); f[k] = v.f32; break;
    case FSS_E_F64: memcpy(&v.f64, s + 8 * k, 8); f[k] = (float)v.f64; break;
    case FSS_E_I8: i[k] = (int8_t)s[k]; break;
    case FSS_E_U8: case FSS_E_BOOL: i[k] = s[k]; break;
    case FSS_E_I16: memcpy(&v.i16, s + 2 * k, 2); i[k] = v.i16; break;
    case FSS_E_U16: memcpy(&v.u16, s + 2 * k, 2); i[k] = v.u16; break;
    case FSS_E_I32: memcpy(&v.i32, s + 4 * k, 4); i[k] = v.i32; break;
    case FSS_E_U32: memcpy(&v.u32, s + 4 * k, 4); i[k] = v.u32; break;
    case FSS_E_I64: memcpy(&v.i64, s + 8 * k, 8); i[k] = v.i64; break;
    case FSS_E_U64: memcpy(&v.u64, s + 8 * k, 8); i[k] = (int64_t)v.u64; break;
    case FSS_E_NONE: break;
    }
  }
}

/* The whole file mapped read-only (an empty file: no mapping). */
static int map_file(const char *path, fsS_array *a, char **err) {
  memset(a, 0, sizeof *a);
  uint64_t size;
  int fd = fsIO_open_regular(path, &size, err);
  if (fd < 0) return -1;
  a->maplen = (size_t)size;
  if (a->maplen) {
    void *m = mmap(NULL, a->maplen, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int e = errno;
      close(fd);
      return fsIO_fail(err, "%s: cannot map: %s", path, strerror(e));
    }
    a->map = m;
  }
  close(fd);
  return 0;
}

void fsS_array_free(fsS_array *a) {
  if (a->map) munmap(a->map, a->maplen);
  free(a->own);
  memset(a, 0, sizeof *a);
}

int fsS_npy_open(fsS_array *a, const char *path, char **err) {
  char *why = NULL;
  if (map_file(path, a, err) != 0) return -1;
  if (npy_parse(a->map ? a->map : (const uint8_t *)"", a->maplen, a, &why) != 0) {
    fsIO_fail(err, "%s: %s", path, why ? why : "out of memory");
    free(why);
    fsS_array_free(a);
    return -1;
  }
  return 0;
}

/* ---- .npz: a zip of .npy members ----------------------------------------------------------- */

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const uint8_t *p) { return le16(p) | le16(p + 2) << 16; }
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

/* Member k's bytes (stored or deflated) into a new buffer. */
static int npz_member(const uint8_t *z, size_t n, uint64_t lho, uint64_t csize, uint64_t usize, int method,
                      uint8_t **out, char **why) {
  if (lho > n || n - lho < 30 || le32(z + lho) != 0x04034b50) {
    *why = fsIO_errf("corrupt zip: a local header is missing");
    return -1;
  }
  uint64_t data = lho + 30 + le16(z + lho + 26) + le16(z + lho + 28);
  if (data > n || n - data < csize) {
    *why = fsIO_errf("truncated zip: a member's data runs past the end of the file");
    return -1;
  }
  /* deflate expands at most 1032:1: a larger claim is corrupt, not a reason to allocate it */
  if (usize > csize * 1032 + 1024 || (method == 0 && csize != usize)) {
    *why = fsIO_errf("corrupt zip: member sizes %llu and %llu", (unsigned long long)csize, (unsigned long long)usize);
    return -1;
  }
  uint8_t *buf = malloc(usize + 1);
  if (!buf) {
    *why = fsIO_errf("out of memory for a member of %llu bytes", (unsigned long long)usize);
    return -1;
  }
  if (method == 0) memcpy(buf, z + data, usize);
  else if (method == 8) {
    z_stream s;
    memset(&s, 0, sizeof s);
    int rc = inflateInit2(&s, -15);
    s.next_in = (Bytef *)(z + data);
    s.avail_in = (uInt)csize;
    s.next_out = buf;
    s.avail_out = (uInt)usize;
    if (rc == Z_OK) rc = inflate(&s, Z_FINISH);
    bool ok = rc == Z_STREAM_END && s.total_out == usize && csize < UINT32_MAX && usize < UINT32_MAX;
    if (!ok) *why = fsIO_errf("corrupt deflate data: %s", s.msg ? s.msg : "wrong length");
    inflateEnd(&s);
    if (!ok) {
      free(buf);
      return -1;
    }
  } else {
    free(buf);
    *why = fsIO_errf("zip compression method %d is not supported (stored and deflate are)", method);
    return -1;
  }
  *out = buf;
  return 0;
}

int fsS_npz_open(const char *path, fsS_npz *out, char **err) {
  memset(out, 0, sizeof *out);
  fsS_array f;
  char *why = NULL;
  if (map_file(path, &f, err) != 0) return -1;
  const uint8_t *z = f.map;
  size_t n = f.maplen;
  /* the end record: the last PK\5\6 within the last 64 KiB + 22 bytes */
  size_t eocd = SIZE_MAX;
  for (size_t k = n >= 22 ? n - 22 : SIZE_MAX; k != SIZE_MAX && n - k <= 65557; k--) {
    if (le32(z + k) == 0x06054b50) {
      eocd = k;
      break;
    }
    if (k == 0) break;
  }
  uint64_t count, cd;
  if (eocd == SIZE_MAX) {
    why = fsIO_errf("not a zip file, or truncated (no end-of-directory record)");
    goto fail;
  }
  count = le16(z + eocd + 10);
  cd = le32(z + eocd + 16);
  if (cd == 0xffffffffu || count == 0xffff) { /* ZIP64: the locator precedes the end record */
    if (eocd < 20 || le32(z + eocd - 20) != 0x07064b50) {
      why = fsIO_errf("corrupt zip: ZIP64 locator missing");
      goto fail;
    }
    uint64_t r = le64(z + eocd - 12);
    if (r > n || n - r < 56 || le32(z + r) != 0x06064b50) {
      why = fsIO_errf("corrupt zip: ZIP64 end record missing");
      goto fail;
    }
    count = le64(z + r + 32);
    cd = le64(z + r + 48);
  }
  if (count > 4096) {
    why = fsIO_errf("zip of %llu members: more than 4096 arrays", (unsigned long long)count);
    goto fail;
  }
  out->arrays = calloc(count + 1, sizeof *out->arrays);
  out->names = calloc(count + 1, sizeof *out->names);
  if (!out->arrays || !out->names) {
    why = fsIO_errf("out of memory");
    goto fail;
  }
  for (uint64_t k = 0, at = cd; k < count; k++) {
    if (at > n || n - at < 46 || le32(z + at) != 0x02014b50) {
      why = fsIO_errf("corrupt zip: directory entry %llu is missing", (unsigned long long)k);
      goto fail;
    }
    int method = (int)le16(z + at + 10);
    uint64_t csize = le32(z + at + 20), usize = le32(z + at + 24), lho = le32(z + at + 42);
    size_t nl = le16(z + at + 28), xl = le16(z + at + 30), cl = le16(z + at + 32);
    if (n - at - 46 < nl + xl + cl) {
      why = fsIO_errf("corrupt zip: directory entry %llu is cut off", (unsigned long long)k);
      goto fail;
    }
    for (size_t x = 0; x + 4 <= xl;) { /* ZIP64 extra: the 0xffffffff fields, in order */
      const uint8_t *e = z + at + 46 + nl + x;
      size_t len = le16(e + 2), q = 4;
      if (le16(e) == 1) {
        if (usize == 0xffffffffu && q + 8 <= len + 4) usize = le64(e + q), q += 8;
        if (csize == 0xffffffffu && q + 8 <= len + 4) csize = le64(e + q), q += 8;
        if (lho == 0xffffffffu && q + 8 <= len + 4) lho = le64(e + q);
      }
      x += 4 + len;
    }
    char *name = strndup((const char *)z + at + 46, nl);
    if (!name) {
      why = fsIO_errf("out of memory");
      goto fail;
    }
    size_t len = strlen(name); /* a NUL inside the name ends it */
    if (len > 4 && !strcmp(name + len - 4, ".npy")) name[len - 4] = 0; /* np.load's keys */
    out->names[out->n] = name;
    fsS_array *a = &out->arrays[out->n++];
    uint8_t *bytes;
    if (npz_member(z, n, lho, csize, usize, method, &bytes, &why) != 0) goto fail;
    a->own = bytes;
    if (npy_parse(bytes, usize, a, &why) != 0) {
      char *w = fsIO_errf("member %s.npy: %s", name, why);
      free(why);
      why = w;
      goto fail;
    }
    at += 46 + nl + xl + cl;
  }
  fsS_array_free(&f);
  return 0;
fail:
  fsIO_fail(err, "%s: %s", path, why ? why : "out of memory");
  free(why);
  fsS_array_free(&f);
  fsS_npz_free(out);
  return -1;
}

void fsS_npz_free(fsS_npz *z) {
  for (size_t k = 0; k < z->n; k++) {
    free(z->names[k]);
    fsS_array_free(&z->arrays[k]);
  }
  free(z->names);
  free(z->arrays);
  memset(z, 0, sizeof *z);
}

/* ---- data sets ----------------------------------------------------------------------------- */

static void row_layout(fsS_layout *l, const fsS_array *a) {
  l->dtype = fsS_elem_dtype(a->code);
  l->ndim = a->ndim - 1;
  size_t n = 1;
  for (int k = 1; k < a->ndim; k++) n *= (size_t)(l->shape[k - 1] = a->shape[k]);
  l->bytes = n * fsT_dtype_size(l->dtype);
}

int fsS_numpy(fsS_dataset *ds, const char *xpath, const char *ypath, char **err) {
  memset(ds, 0, sizeof *ds);
  if (fsS_npy_open(&ds->ax, xpath, err) != 0) return -1;
  if (fsS_npy_open(&ds->ay, ypath, err) != 0) {
    fsS_free(ds);
    return -1;
  }
  if (ds->ax.ndim < 1 || ds->ay.ndim < 1 || ds->ax.shape[0] != ds->ay.shape[0]) {
    fsIO_fail(err, "%s: %lld items (first dimension) for the %lld of %s", ypath,
              ds->ay.ndim ? (long long)ds->ay.shape[0] : 0LL, ds->ax.ndim ? (long long)ds->ax.shape[0] : 0LL, xpath);
    fsS_free(ds);
    return -1;
  }
  ds->kind = FSS_NUMPY;
  ds->len = (size_t)ds->ax.shape[0];
  row_layout(&ds->x, &ds->ax);
  row_layout(&ds->y, &ds->ay);
  return 0;
}

/* llm.c's .bin header: 256 int32, [0] magic, [1] version (1: uint16, 2: uint32), [2] tokens */
#define LLMC_MAGIC 20240520

int fsS_tokens(fsS_dataset *ds, const char *path, int64_t block, int token_bytes, int64_t samples,
               uint64_t seed, char **err) {
  memset(ds, 0, sizeof *ds);
  if (block < 1) return fsIO_fail(err, "%s: block_size must be a positive size, not %lld", path, (long long)block);
  if (samples < 0) return fsIO_fail(err, "%s: samples must be >= 0, not %lld", path, (long long)samples);
  if (map_file(path, &ds->ax, err) != 0) return -1;
  const uint8_t *p = ds->ax.map;
  size_t n = ds->ax.maplen, off = 0;
  if (n >= 1024 && le32(p) == LLMC_MAGIC) { /* llm.c's format: the header says the dtype and count */
    uint32_t version = le32(p + 4), count = le32(p + 8);
    token_bytes = version == 1 ? 2 : version == 2 ? 4 : 0;
    if (!token_bytes) {
      fsS_free(ds);
      return fsIO_fail(err, "%s: llm.c header version %u is not 1 (uint16) or 2 (uint32)", path, version);
    }
    off = 1024;
    if ((n - off) != (uint64_t)count * (uint64_t)token_bytes) {
      fsS_free(ds);
      return fsIO_fail(err, "%s: %s: the llm.c header counts %u tokens, the file holds %zu bytes of tokens", path,
                       (n - off) < (uint64_t)count * token_bytes ? "truncated" : "trailing data", count, n - off);
    }
  } else if (n % (size_t)token_bytes) {
    fsS_free(ds);
    return fsIO_fail(err, "%s: %zu bytes is not a whole number of uint%d tokens", path, n, 8 * token_bytes);
  }
  size_t tokens = (n - off) / (size_t)token_bytes;
  if (tokens <= (uint64_t)block) {
    fsS_free(ds);
    return fsIO_fail(err, "%s: %zu tokens is too short for block_size %lld (needs at least %lld)", path, tokens,
                     (long long)block, (long long)block + 1);
  }
  ds->ax.data = p + off;
  ds->ax.code = token_bytes == 2 ? FSS_E_U16 : FSS_E_U32;
  ds->ax.esize = (size_t)token_bytes;
  ds->ax.numel = tokens;
  ds->kind = FSS_TOKENS;
  ds->samples = (uint64_t)samples;
  ds->seed = seed;
  ds->len = samples ? (size_t)samples : tokens - (size_t)block;
  fsS_layout l = {FS_I64, 1, {block}, (size_t)block * 8};
  ds->x = ds->y = l;
  return 0;
}

/* CSV of numbers: one row per line, the same number of fields on each; a
 * first line that is not all numbers is a header. */
int fsS_csv(fsS_dataset *ds, const char *path, int64_t target, char **err) {
  memset(ds, 0, sizeof *ds);
  uint8_t *text;
  size_t n;
  if (fsIO_slurp(path, &text, &n, err) != 0) return -1;
  double *vals = NULL;
  size_t nv = 0, cap = 0, rows = 0, cols = 0, line = 1;
  char *s = (char *)text, *why = NULL;
  bool header_ok = true;
  while (*s) {
    char *eol = strchr(s, '\n');
    if (eol) *eol = 0;
    size_t len = strlen(s);
    if (len && s[len - 1] == '\r') s[--len] = 0;
    if (len == 0) { /* blank lines separate nothing */
      if (!eol) break;
      s = eol + 1;
      line++;
      continue;
    }
    size_t fields = 0, start = nv;
    bool numeric = true;
    for (char *f = s;; fields++) {
      char *e;
      while (*f == ' ' || *f == '\t') f++;
      double v = strtod(f, &e);
      char *t = e;
      while (*t == ' ' || *t == '\t') t++;
      if (e == f || (*t != ',' && *t != 0)) {
        numeric = false;
        if (!header_ok) {
          why = fsIO_errf("line %zu, field %zu: not a number: \"%.*s\"", line, fields + 1,
                          (int)(strcspn(f, ",") < 40 ? strcspn(f, ",") : 40), f);
          break;
        }
      } else if (nv == cap) {
        cap = cap ? 2 * cap : 1024;
        double *p = realloc(vals, cap * sizeof *p);
        if (!p) {
          why = fsIO_errf("out of memory");
          break;
        }
        vals = p;
      }
      if (numeric) vals[nv++] = v;
      f = strchr(f, ',');
      if (!f) {
        fields++;
        break;
      }
      f++;
    }
    if (why) break;
    if (!numeric) { /* the header: its values are dropped */
      nv = start;
    } else if (rows == 0) {
      cols = fields;
      rows = 1;
    } else if (fields != cols) {
      why = fsIO_errf("line %zu has %zu fields, the first row has %zu", line, fields, cols);
      break;
    } else
      rows++;
    header_ok = false;
    if (!eol) break;
    s = eol + 1;
    line++;
  }
  free(text);
  int64_t t = target < 0 ? target + (int64_t)cols : target;
  if (!why && rows == 0) why = fsIO_errf("no rows of numbers");
  if (!why && cols < 2) why = fsIO_errf("%zu column: needs at least one feature column and the target column", cols);
  if (!why && (t < 0 || t >= (int64_t)cols))
    why = fsIO_errf("target column %lld is not one of the %zu columns", (long long)target, cols);
  if (why) {
    fsIO_fail(err, "%s: %s", path, why);
    free(why);
    free(vals);
    return -1;
  }
  bool integral = true;
  for (size_t r = 0; r < rows; r++) integral = integral && vals[r * cols + (size_t)t] == floor(vals[r * cols + (size_t)t]);
  float *x = malloc((rows * (cols - 1) + 1) * sizeof *x);
  void *y = malloc(rows * 8 + 1);
  if (!x || !y) {
    free(x);
    free(y);
    free(vals);
    return fsIO_fail(err, "%s: out of memory", path);
  }
  for (size_t r = 0; r < rows; r++) {
    for (size_t c = 0, k = 0; c < cols; c++)
      if ((int64_t)c != t) x[r * (cols - 1) + k++] = (float)vals[r * cols + c];
    if (integral) ((int64_t *)y)[r] = (int64_t)vals[r * cols + (size_t)t];
    else ((float *)y)[r] = (float)vals[r * cols + (size_t)t];
  }
  free(vals);
  ds->kind = FSS_CSV;
  ds->len = rows;
  ds->table = x;
  ds->column = y;
  ds->x = (fsS_layout){FS_F32, 1, {(int64_t)cols - 1}, (cols - 1) * sizeof(float)};
  ds->y = (fsS_layout){integral ? FS_I64 : FS_F32, 0, {0}, integral ? 8 : 4};
  return 0;
}

void fsS_file_item(const fsS_dataset *ds, size_t i, uint64_t key, void *x, void *y) {
  switch (ds->kind) {
  case FSS_NUMPY: {
    size_t nx = ds->ax.numel / ds->len, ny = ds->ay.numel / ds->len;
    fsS_convert(ds->ax.code, ds->ax.data + i * nx * ds->ax.esize, nx, x);
    fsS_convert(ds->ay.code, ds->ay.data + i * ny * ds->ay.esize, ny, y);
    break;
  }
  case FSS_TOKENS: {
    size_t block = (size_t)ds->x.shape[0], windows = ds->ax.numel - block;
    /* random windows: the offset drawn from the item's key (nanoGPT's get_batch) */
    size_t at = ds->samples ? (size_t)(fsR_bits(key, 0) % windows) : i;
    fsS_convert(ds->ax.code, ds->ax.data + at * ds->ax.esize, block, x);
    fsS_convert(ds->ax.code, ds->ax.data + (at + 1) * ds->ax.esize, block, y);
    break;
  }
  case FSS_CSV:
    memcpy(x, (const char *)ds->table + i * ds->x.bytes, ds->x.bytes);
    memcpy(y, (const char *)ds->column + i * ds->y.bytes, ds->y.bytes);
    break;
  default: break;
  }
}
