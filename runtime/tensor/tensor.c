/* tensor.c -- tensor lifetime, shapes, dtype conversion, runtime errors. */
#include "tensor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "autograd.h"
#include "backend.h"
#include "vmath.h"

static _Thread_local char errbuf[512];

void fsT_seterr(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(errbuf, sizeof errbuf, fmt, ap);
  va_end(ap);
}

const char *fsT_error(void) { return errbuf; }

size_t fsT_dtype_size(fs_dtype dt) { return dt == FS_I64 || dt == FS_F64 ? 8 : fsT_is_low(dt) ? 2 : dt == FS_BOOL ? 1 : 4; }
size_t fsT_nbytes(const fs_tensor *t) { return (size_t)t->numel * fsT_dtype_size(t->dtype); }

const char *fsT_dtype_name(fs_dtype dt) {
  static const char *const names[] = {[FS_F32] = "float32", [FS_BF16] = "bfloat16", [FS_I64] = "int64",
                                      [FS_BOOL] = "bool", [FS_F16] = "float16", [FS_F64] = "float64"};
  return names[dt];
}

const char *fsT_device_name(fs_device d) {
  static const char *const names[] = {"meta", "cpu", "cuda"};
  return d < FS_DEV__COUNT ? names[d] : "?";
}

static fs_tensor *header(fs_dtype dt, fs_device dev, int rank, const int64_t *shape) {
  if (rank < 0 || rank > FS_MAX_RANK) {
    fsT_seterr("tensor rank %d is out of range (at most %d dimensions)", rank, FS_MAX_RANK);
    return NULL;
  }
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0) {
      fsT_seterr("negative dimension %lld", (long long)shape[i]);
      return NULL;
    }
    if (shape[i] && numel > (INT64_MAX / 8) / shape[i]) {
      fsT_seterr("tensor too large");
      return NULL;
    }
    numel *= shape[i];
  }
  fs_tensor *t = calloc(1, sizeof *t);
  if (!t) {
    fsT_seterr("out of memory");
    return NULL;
  }
  t->refcount = 1;
  t->dtype = dt;
  t->device = dev;
  t->rank = rank;
  if (rank) memcpy(t->shape, shape, (size_t)rank * sizeof *shape);
  t->numel = numel;
  return t;
}

int fsT_alloc_storage(fs_tensor *t, fs_device dev) {
  if (dev == FS_DEV_META) {
    t->device = dev;
    return 0;
  }
  const fsB_backend *be = fsB_get(dev);
  if (!be) return -1;
  size_t nb = fsT_nbytes(t);
  void *p = be->alloc(nb ? nb : 1);
  if (!p) {
    fsT_seterr("out of memory allocating %zu bytes on %s", nb, fsT_device_name(dev));
    return -1;
  }
  t->data = p;
  t->device = dev;
  return 0;
}

fs_tensor *fsT_new(fs_dtype dt, fs_device dev, int rank, const int64_t *shape) {
  fs_tensor *t = header(dt, dev, rank, shape);
  if (t && dev != FS_DEV_META && fsT_alloc_storage(t, dev) < 0) {
    free(t);
    return NULL;
  }
  return t;
}

fs_tensor *fsT_zeros(fs_dtype dt, fs_device dev, int rank, const int64_t *shape) {
  fs_tensor *t = fsT_new(dt, dev, rank, shape);
  if (t && t->data) fsB_get(dev)->zero(t->data, fsT_nbytes(t));
  return t;
}

fs_tensor *fsT_zeros_like(const fs_tensor *t) {
  return fsT_zeros(FS_F32, t->device, t->rank, t->shape);
}

fs_tensor *fsT_scalar(float v) {
  fs_tensor *t = fsT_new(FS_F32, FS_DEV_CPU, 0, NULL);
  if (t) fsT_f32(t)[0] = v;
  return t;
}

fs_tensor *fsT_view_at(fs_tensor *t, int64_t off, int rank, const int64_t *shape) {
  fs_tensor *v = header(t->dtype, t->device, rank, shape);
  if (!v) return NULL;
  if (off < 0 || off + v->numel > t->numel) {
    char a[96], b[96];
    fsT_seterr("shape %s is invalid for input of shape %s",
               fsT_dims_str(rank, shape, a, sizeof a), fsT_shape_str(t, b, sizeof b));
    free(v);
    return NULL;
  }
  v->base = fsT_retain(t->base ? t->base : t);
  v->data = t->data ? (char *)t->data + (size_t)off * fsT_dtype_size(t->dtype) : NULL;
  return v;
}

fs_tensor *fsT_view(fs_tensor *t, int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i] < 0 ? 0 : shape[i];
  if (rank >= 0 && rank <= FS_MAX_RANK && n != t->numel) {
    char a[96], b[96];
    fsT_seterr("shape %s is invalid for input of shape %s",
               fsT_dims_str(rank, shape, a, sizeof a), fsT_shape_str(t, b, sizeof b));
    return NULL;
  }
  return fsT_view_at(t, 0, rank, shape);
}

fs_tensor *fsT_retain(fs_tensor *t) {
  if (t) t->refcount++;
  return t;
}

static void destroy(fs_tensor *t) {
  fsG_detach(t);
  fsT_release(t->grad);
  if (t->base) fsT_release(t->base);
  else if (t->data) fsB_get(t->device)->free(t->data, fsT_nbytes(t));
  free(t);
}

/* Dead tensors are destroyed from a worklist, not by recursion: freeing the
 * end of a long autograd chain (a loss accumulated over many steps) would
 * otherwise recurse once per op and overflow the stack. */
static _Thread_local struct { fs_tensor **v; size_t n, cap; bool draining; } dead;

void fsT_release(fs_tensor *t) {
  if (!t || --t->refcount > 0) return;
  if (dead.n == dead.cap) {
    size_t cap = dead.cap ? 2 * dead.cap : 64;
    fs_tensor **v = realloc(dead.v, cap * sizeof *v);
    if (!v) { /* no room to defer: free it here, recursing */
      destroy(t);
      return;
    }
    dead.v = v;
    dead.cap = cap;
  }
  dead.v[dead.n++] = t;
  if (dead.draining) return;
  dead.draining = true;
  while (dead.n) destroy(dead.v[--dead.n]);
  dead.draining = false;
  free(dead.v);
  dead.v = NULL;
  dead.cap = 0;
}

bool fsT_same_shape(const fs_tensor *a, const fs_tensor *b) {
  return a->rank == b->rank && !memcmp(a->shape, b->shape, (size_t)a->rank * sizeof a->shape[0]);
}

char *fsT_dims_str(int rank, const int64_t *shape, char *buf, size_t len) {
  size_t k = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < rank && k < len; i++) {
    if (shape[i] < 0) k += (size_t)snprintf(buf + k, len - k, "%s?", i ? ", " : "");
    else k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  }
  if (k < len) snprintf(buf + k, len - k, "]");
  return buf;
}

char *fsT_shape_str(const fs_tensor *t, char *buf, size_t len) {
  return fsT_dims_str(t->rank, t->shape, buf, len);
}

double fsT_get(const fs_tensor *t, int64_t i) {
  switch (t->dtype) {
  case FS_F32: return fsT_f32(t)[i];
  case FS_BF16: return fsT_bf16_to_f32(((const uint16_t *)t->data)[i]);
  case FS_F16: return fsT_f16_to_f32(((const uint16_t *)t->data)[i]);
  case FS_I64: return (double)fsT_i64(t)[i];
  case FS_BOOL: return fsT_bool(t)[i];
  case FS_F64: return fsT_f64(t)[i];
  }
  return 0;
}

fs_tensor *fsT_to_device(fs_tensor *t, fs_device dev) {
  if (t->device == dev || !t->data) return fsT_retain(t);
  fs_tensor *c = fsT_new(t->dtype, dev, t->rank, t->shape);
  if (c && fsB_transfer(dev, c->data, t->device, t->data, fsT_nbytes(t)) < 0) {
    fsT_release(c);
    return NULL;
  }
  return c;
}

fs_tensor *fsT_copy(const fs_tensor *t) {
  fs_tensor *c = fsT_new(t->dtype, t->device, t->rank, t->shape);
  if (c && t->data) fsB_get(t->device)->copy(c->data, t->data, fsT_nbytes(t));
  return c;
}

fs_tensor *fsT_to_dtype(fs_tensor *t, fs_dtype dt) {
  if (t->dtype == dt) return fsT_retain(t);
  if (!t->data) return fsT_new(dt, t->device, t->rank, t->shape); /* meta: shapes only */
  if (t->device != FS_DEV_CPU) {
    const fsB_backend *be = fsB_get(t->device);
    fs_tensor *c = fsT_new(dt, t->device, t->rank, t->shape);
    if (!c) return NULL;
    if (be->convert && be->convert(dt, c->data, t->dtype, t->data, (size_t)t->numel) == 0) return c;
    fsT_release(c);
    /* the integer types: converted on the host, rare and small (metrics) */
    fs_tensor *h = fsT_to_device(t, FS_DEV_CPU);
    c = h ? fsT_to_dtype(h, dt) : NULL;
    fs_tensor *d = c ? fsT_to_device(c, t->device) : NULL;
    fsT_release(h);
    fsT_release(c);
    return d;
  }
  fs_tensor *c = fsT_new(dt, t->device, t->rank, t->shape);
  if (c) fsT_convert(dt, c->data, t->dtype, t->data, (size_t)t->numel);
  return c;
}

static double load_elem(fs_dtype dt, const void *p, size_t i) {
  switch (dt) {
  case FS_F32: return ((const float *)p)[i];
  case FS_BF16: return fsT_bf16_to_f32(((const uint16_t *)p)[i]);
  case FS_F16: return fsT_f16_to_f32(((const uint16_t *)p)[i]);
  case FS_I64: return (double)((const int64_t *)p)[i];
  case FS_BOOL: return ((const uint8_t *)p)[i];
  case FS_F64: return ((const double *)p)[i];
  }
  return 0;
}

/* The conversions a low-precision run does on every op, as loops the
 * compiler vectorizes; false for the other pairs (load_elem's loop). */
FS_VECTOR_TARGET
static bool convert_fast(fs_dtype to, void *dst, fs_dtype from, const void *src, size_t n) {
  if (to == FS_F32 && from == FS_BF16) {
    const uint16_t *h = src;
    uint32_t *u = dst;
#pragma omp simd
    for (size_t i = 0; i < n; i++) u[i] = (uint32_t)h[i] << 16;
    return true;
  }
  if (to == FS_BF16 && from == FS_F32) {
    const float *f = src;
    uint16_t *h = dst;
#pragma omp simd
    for (size_t i = 0; i < n; i++) h[i] = fsT_f32_to_bf16(f[i]);
    return true;
  }
  if (to == FS_F32 && from == FS_F16) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) ((float *)dst)[i] = fsT_f16_to_f32(((const uint16_t *)src)[i]);
    return true;
  }
  if (to == FS_F16 && from == FS_F32) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = fsT_f32_to_f16(((const float *)src)[i]);
    return true;
  }
  return false;
}

void fsT_convert(fs_dtype to, void *dst, fs_dtype from, const void *src, size_t n) {
  if (to == from) {
    memcpy(dst, src, n * fsT_dtype_size(to));
    return;
  }
  if (convert_fast(to, dst, from, src, n)) return;
  for (size_t i = 0; i < n; i++) {
    double v = load_elem(from, src, i);
    switch (to) {
    case FS_F32: ((float *)dst)[i] = (float)v; break;
    case FS_BF16: ((uint16_t *)dst)[i] = fsT_f32_to_bf16((float)v); break;
    case FS_F16: ((uint16_t *)dst)[i] = fsT_f32_to_f16((float)v); break;
    case FS_I64: ((int64_t *)dst)[i] = v > -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN; break;
    case FS_BOOL: ((uint8_t *)dst)[i] = v != 0; break;
    case FS_F64: ((double *)dst)[i] = v; break;
    }
  }
}

FS_VECTOR_TARGET
void fsT_round_array(fs_dtype dt, float *x, size_t n) {
  if (dt == FS_BF16) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = fsT_bf16_round(x[i]);
  } else if (dt == FS_F16) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = fsT_round_to(FS_F16, x[i]);
  }
}

int fsT_set_dtype(fs_tensor *t, fs_dtype dt) {
  if (t->dtype == dt) return 0;
  if (t->base) {
    fsT_seterr("cannot change the dtype of a view in place");
    return -1;
  }
  fsT_release(t->grad);
  t->grad = NULL;
  if (!t->data) {
    t->dtype = dt;
    return 0;
  }
  fs_tensor *c = fsT_to_dtype(t, dt);
  if (!c) return -1;
  void *old = t->data;
  t->data = c->data; /* c's storage moves to t; c dies without it */
  c->data = old;
  c->dtype = t->dtype;
  t->dtype = dt;
  fsT_release(c);
  return 0;
}
