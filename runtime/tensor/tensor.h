/* tensor.h -- the one tensor struct (ggml-style): dtype, device, shape, data.
 *
 * Tensors are contiguous row-major and reference counted: every function that
 * returns an fs_tensor * hands the caller one reference, which it gives back
 * with fsT_release.  Holders that keep a tensor (modules, optimizers, the
 * autograd tape) take their own reference with fsT_retain.  A meta tensor has
 * shape and dtype but data == NULL; nothing is allocated for it.
 *
 * Runtime errors: functions that can fail return NULL or -1 and leave a
 * message in fsT_error() (per thread), e.g. "mat1 and mat2 shapes cannot be
 * multiplied (64x256 and 128x10)". */
#ifndef FS_TENSOR_H
#define FS_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Marks the inline functions that CUDA kernels share with the cpu: under nvcc
 * they compile for both, in C the mark is empty. */
#ifdef __CUDACC__
#define FS_HOSTDEV __host__ __device__
#else
#define FS_HOSTDEV
#endif

/* FS_BOOL: one byte per element, 0 or 1 (torch.bool: comparisons, masks) */
typedef enum fs_dtype {
  FS_F32, FS_BF16, FS_I64, FS_BOOL,
  /* ---- low-precision floats (precision.c): float16 is stored, never computed in ---- */
  FS_F16,
  /* ---- float64 (f64.c): computed in double by the ops that have a double
   * path; the others refuse it with an error naming the op ---- */
  FS_F64,
} fs_dtype;
typedef enum fs_device { FS_DEV_META, FS_DEV_CPU, FS_DEV_CUDA, FS_DEV__COUNT } fs_device;

#define FS_MAX_RANK 8

typedef struct fsG_node fsG_node; /* autograd.h */

typedef struct fs_tensor {
  int refcount;
  fs_dtype dtype;
  fs_device device;
  int rank;                     /* 0 = scalar */
  int64_t shape[FS_MAX_RANK];
  int64_t numel;
  void *data;                   /* numel elements on `device`; NULL on meta */
  bool requires_grad;           /* a parameter, or computed from one on the tape */
  struct fs_tensor *grad;       /* f32, same shape; accumulated by backward */
  fsG_node *node;               /* op that produced it; NULL for leaves */
  struct fs_tensor *base;       /* a view: data lies in base's storage (held) */
} fs_tensor;

/* Uninitialized storage on `dev` (none on meta). NULL + fsT_error on a bad
 * shape (negative dim, rank > FS_MAX_RANK, overflow) or out of memory. */
fs_tensor *fsT_new(fs_dtype dt, fs_device dev, int rank, const int64_t *shape);
fs_tensor *fsT_zeros(fs_dtype dt, fs_device dev, int rank, const int64_t *shape);
fs_tensor *fsT_zeros_like(const fs_tensor *t); /* f32 on t's device */
fs_tensor *fsT_scalar(float v);                /* rank-0 f32 on cpu */
fs_tensor *fsT_retain(fs_tensor *t);
void fsT_release(fs_tensor *t);                /* NULL is a no-op */

/* A tensor of another shape with the same numel sharing t's storage
 * (reshape/flatten of contiguous data); NULL + fsT_error on a numel mismatch. */
fs_tensor *fsT_view(fs_tensor *t, int rank, const int64_t *shape);
/* A tensor of `shape` whose elements are t's [off, off + numel) (a
 * contiguous block of t, as x[1:3] or x[0] are): shares t's storage.
 * NULL + fsT_error when the block does not lie inside t. */
fs_tensor *fsT_view_at(fs_tensor *t, int64_t off, int rank, const int64_t *shape);

/* Allocates storage for a meta tensor in place (uninitialized), so holders of
 * the tensor see it materialize. -1 + fsT_error on failure. */
int fsT_alloc_storage(fs_tensor *t, fs_device dev);

size_t fsT_dtype_size(fs_dtype dt);
size_t fsT_nbytes(const fs_tensor *t);
const char *fsT_dtype_name(fs_dtype dt);   /* "float32", "bfloat16", "int64", "bool", "float64" */
const char *fsT_device_name(fs_device d);  /* "meta", "cpu", "cuda" */
bool fsT_same_shape(const fs_tensor *a, const fs_tensor *b);
/* "[64, 784]" into buf; returns buf. */
char *fsT_shape_str(const fs_tensor *t, char *buf, size_t len);
char *fsT_dims_str(int rank, const int64_t *shape, char *buf, size_t len);

static inline float *fsT_f32(const fs_tensor *t) { return (float *)t->data; }
static inline int64_t *fsT_i64(const fs_tensor *t) { return (int64_t *)t->data; }
static inline uint8_t *fsT_bool(const fs_tensor *t) { return (uint8_t *)t->data; }

/* Element i as a double, whatever the dtype (cpu only). */
double fsT_get(const fs_tensor *t, int64_t i);
/* A new tensor of dtype dt with the same values (`.float()`); a new
 * reference to t itself when it already has that dtype. */
fs_tensor *fsT_to_dtype(fs_tensor *t, fs_dtype dt);
/* The same values on dev (no grad, no tape): a new reference to t itself
 * when it is there already or has no data (meta). */
fs_tensor *fsT_to_device(fs_tensor *t, fs_device dev);
/* Deep copy of the values (no grad, no tape). */
fs_tensor *fsT_copy(const fs_tensor *t);

/* bfloat16 <-> float32: round to nearest even; NaN stays NaN (quiet).
 * Inline and branch-free: every conversion loop and every rounding of a
 * float to bfloat16 precision calls these (the cuda kernels too), and they
 * must vectorize. */
static inline FS_HOSTDEV uint16_t fsT_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40 : r);
}
static inline FS_HOSTDEV float fsT_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* f at bfloat16 precision, as a float */
static inline float fsT_bf16_round(float f) { return fsT_bf16_to_f32(fsT_f32_to_bf16(f)); }
/* n elements of src (dtype from) into dst (dtype to), as PyTorch's copy_
 * converts: bfloat16 rounds to nearest even, floats to int64 truncate toward
 * zero (NaN and out of range give INT64_MIN, as x86 does). */
void fsT_convert(fs_dtype to, void *dst, fs_dtype from, const void *src, size_t n);

/* ---- low-precision floats (bfloat16, float16) ----
 * They are storage types: every op computes in float32 on widened copies and
 * rounds its result back (precision.c), as torch's CPU kernels for these
 * types compute in float internally. */
static inline bool fsT_is_low(fs_dtype dt) { return dt == FS_BF16 || dt == FS_F16; }
static inline bool fsT_is_float(fs_dtype dt) { return dt == FS_F32 || fsT_is_low(dt); }
/* torch.is_floating_point: the float types and float64 */
static inline bool fsT_is_floating(fs_dtype dt) { return fsT_is_float(dt) || dt == FS_F64; }
static inline double *fsT_f64(const fs_tensor *t) { return (double *)t->data; }
/* all ones where c holds: the float16 conversions select without branches,
 * so the loops calling them vectorize */
static inline FS_HOSTDEV uint32_t fsT_mask(int c) { return -(uint32_t)c; }
/* float32 <-> float16: round to nearest even (IEEE binary16, torch's Half);
 * NaN stays NaN (quiet, its payload's top bits kept).  Integer arithmetic, not
 * _Float16 casts: without F16C those are libgcc calls that also raise
 * floating-point exceptions, 15x the time of a bfloat16 conversion
 * (16-true's GPT step was 14 s).  Bitwise the casts' results, checked over
 * every float32 and every float16. */
static inline FS_HOSTDEV uint16_t fsT_f32_to_f16(float f) {
  uint32_t u, a, tb;
  memcpy(&u, &f, 4);
  a = u & 0x7fffffffu;
  /* normal results: rebias the exponent and round the 13 dropped bits to
   * nearest even (a carry into the exponent gives the next binade or inf) */
  uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  /* subnormal results (|f| < 2^-14): adding 0.5 makes the float adder round
   * |f| to a multiple of 2^-24, which lands in the low mantissa bits */
  float t;
  memcpy(&t, &a, 4);
  t += 0.5f;
  memcpy(&tb, &t, 4);
  uint32_t sub = tb - 0x3f000000u, big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u;
  uint32_t ms = fsT_mask(a < 0x38800000u), mb = fsT_mask(a >= 0x47800000u);
  return (uint16_t)(((u >> 16) & 0x8000u) | (sub & ms) | (big & mb) | (normal & ~(ms | mb)));
}
static inline FS_HOSTDEV float fsT_f16_to_f32(uint16_t h) {
  uint32_t e = h & 0x7c00u, m = h & 0x3ffu, sb, o;
  float sub = (float)m * 0x1p-24f; /* a subnormal's value, exact */
  memcpy(&sb, &sub, 4);
  uint32_t ms = fsT_mask(e == 0), mi = fsT_mask(e == 0x7c00u);
  o = (sb & ms) | ((0x7f800000u | (m << 13) | (fsT_mask(m != 0) & 0x400000u)) & mi)
    | ((((h & 0x7fffu) << 13) + 0x38000000u) & ~(ms | mi));
  o |= (uint32_t)(h & 0x8000u) << 16;
  float r;
  memcpy(&r, &o, 4);
  return r;
}
/* v rounded to the precision of dt (identity for float32). */
static inline float fsT_round_to(fs_dtype dt, float v) {
  return dt == FS_BF16 ? fsT_bf16_round(v) : dt == FS_F16 ? fsT_f16_to_f32(fsT_f32_to_f16(v)) : v;
}
/* x[0..n) rounded in place to dt's precision (host memory). */
void fsT_round_array(fs_dtype dt, float *x, size_t n);
/* Converts t's storage to dt in place (module.to(dtype) on a parameter: its
 * holders see the new type); its grad is dropped.  A meta tensor only
 * changes type.  -1 + fsT_error (out of memory, a view). */
int fsT_set_dtype(fs_tensor *t, fs_dtype dt);

void fsT_seterr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *fsT_error(void);

#endif
