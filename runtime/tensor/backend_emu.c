/* backend_emu.c -- cuda emulated by the cpu table (--emulate-cuda), with
 * device pointers the host cannot dereference, so that a host read of device
 * memory faults here as it would on a GPU instead of passing unseen.
 *
 * A device pointer is the cpu allocation's address plus OFFSET; every entry
 * takes its pointers back (NULL stays NULL) and calls the cpu one (the
 * float64 table's entries too: 64-true runs bit for bit as on the cpu).  The
 * offset is additive, so device pointer arithmetic (FSDP's flat shards,
 * base + n) keeps meaning the same element. */
#include "backend.h"
#include "f64_cnn_kernels.h"
#include "f64_kernels.h"
#include "low_elem.h"
#include "nn.h"
#include "ops.h"

#include <pthread.h>
#include <stdlib.h>

/* 2^52: past the 47- and 48-bit user address spaces, hence non-canonical on
 * x86-64 and a translation fault on arm64 (whose top-byte-ignore spares
 * only bits 56..63); unmapped under 5-level paging, which hands out high
 * addresses only on request.  Far below a wrap, so base + n on a device
 * pointer is no pointer overflow for UBSan. */
#define OFFSET ((uintptr_t)1 << 52)

void *fsB_emu_host(const void *p) { return p ? (void *)((uintptr_t)p - OFFSET) : NULL; }
static void *dev(void *p) { return p ? (void *)((uintptr_t)p + OFFSET) : NULL; }

#define H fsB_emu_host
#define C fsB_cpu
#define K (*fsB_cpu.nn)
#define DK fsB_f64_cpu

static void *e_alloc(size_t nb) { return dev(C.alloc(nb)); }
static void e_free(void *p, size_t nb) { C.free(H(p), nb); }
static void e_zero(void *p, size_t nb) { C.zero(H(p), nb); }
static void e_copy(void *d, const void *s, size_t nb) { C.copy(H(d), H(s), nb); }
static int e_convert(fs_dtype to, void *d, fs_dtype from, const void *s, size_t n) {
  return C.convert(to, H(d), from, H(s), n);
}
static int e_from_host(void *d, const void *s, size_t nb) { return C.from_host(H(d), s, nb); }
static int e_to_host(void *d, const void *s, size_t nb) { return C.to_host(d, H(s), nb); }
static int e_sync(void) { return C.sync(); }
static void e_fill(float *d, size_t n, float v) { C.fill(H(d), n, v); }
static void e_fill_uniform(float *d, size_t n, uint64_t key, size_t o, float lo, float hi) {
  C.fill_uniform(H(d), n, key, o, lo, hi);
}
static void e_fill_normal(float *d, size_t n, uint64_t key, size_t o, float mean, float std) {
  C.fill_normal(H(d), n, key, o, mean, std);
}
static int e_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t Kd, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *Cm, int64_t ldc) {
  return C.gemm(ta, tb, M, N, Kd, alpha, H(A), lda, H(B), ldb, beta, H(Cm), ldc);
}
static void e_binary(fsB_binop op, size_t n, const float *a, size_t sa, const float *b, size_t sb,
                     float *out) {
  C.binary(op, n, H(a), sa, H(b), sb, H(out));
}
static void e_axpy(size_t n, float alpha, const float *x, float *y) { C.axpy(n, alpha, H(x), H(y)); }
static void e_scale(size_t n, float alpha, float *x) { C.scale(n, alpha, H(x)); }
static void e_clamp(size_t n, float lo, float hi, float *x) { C.clamp(n, lo, hi, H(x)); }
static double e_sum(size_t n, const float *x) { return C.sum(n, H(x)); }
static double e_sumsq(size_t n, const float *x) { return C.sumsq(n, H(x)); }
static float e_absmax(size_t n, const float *x) { return C.absmax(n, H(x)); }
static void e_sgd_update(size_t n, float *p, const float *g, float *buf, bool first, double lr,
                         double mom, double damp, double wd, bool nesterov, bool maximize) {
  C.sgd_update(n, H(p), H(g), H(buf), first, lr, mom, damp, wd, nesterov, maximize);
}
static void e_adam_update(size_t n, float *p, const float *g, float *m, float *v, float *vmax, double lr,
                          double b1, double b2, double eps, double wd, bool decoupled, bool maximize,
                          int64_t t) {
  C.adam_update(n, H(p), H(g), H(m), H(v), H(vmax), lr, b1, b2, eps, wd, decoupled, maximize, t);
}
static void e_rmsprop_update(size_t n, float *p, const float *g, float *sq, float *ga, float *buf,
                             double lr, double alpha, double eps, double wd, double mom, bool maximize) {
  C.rmsprop_update(n, H(p), H(g), H(sq), H(ga), H(buf), lr, alpha, eps, wd, mom, maximize);
}
static void e_adagrad_update(size_t n, float *p, const float *g, float *sum, double clr, double eps,
                             double wd, bool maximize) {
  C.adagrad_update(n, H(p), H(g), H(sum), clr, eps, wd, maximize);
}
static void e_adadelta_update(size_t n, float *p, const float *g, float *sq, float *acc, double lr,
                              double rho, double eps, double wd, bool maximize) {
  C.adadelta_update(n, H(p), H(g), H(sq), H(acc), lr, rho, eps, wd, maximize);
}

/* --- the layer kernels (nn.h gives the shapes) ------------------------------ */

static int e_linear_forward(float *o, const float *x, const float *W, const float *b, int64_t N,
                            int64_t Cn, int64_t OC) {
  return K.linear_forward(H(o), H(x), H(W), H(b), N, Cn, OC);
}
static int e_linear_backward(float *dx, float *dW, float *db, const float *dout, const float *x,
                             const float *W, int64_t N, int64_t Cn, int64_t OC) {
  return K.linear_backward(H(dx), H(dW), H(db), H(dout), H(x), H(W), N, Cn, OC);
}
static void e_embedding_forward(float *o, const int64_t *idx, const float *W, int64_t N, int64_t D) {
  K.embedding_forward(H(o), H(idx), H(W), N, D);
}
static void e_embedding_backward(float *dW, const float *dout, const int64_t *idx, int64_t N,
                                 int64_t D) {
  K.embedding_backward(H(dW), H(dout), H(idx), N, D);
}
static void e_posemb_forward(float *o, const float *x, const float *W, int64_t B, int64_t T,
                             int64_t D) {
  K.posemb_forward(H(o), H(x), H(W), B, T, D);
}
static void e_posemb_backward(float *dx, float *dW, const float *dout, int64_t B, int64_t T,
                              int64_t D) {
  K.posemb_backward(H(dx), H(dW), H(dout), B, T, D);
}
static void e_layernorm_forward(float *o, float *mean, float *rstd, const float *x, const float *w,
                                const float *b, int64_t N, int64_t Cn, float eps) {
  K.layernorm_forward(H(o), H(mean), H(rstd), H(x), H(w), H(b), N, Cn, eps);
}
static void e_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                                 const float *w, const float *mean, const float *rstd, int64_t N,
                                 int64_t Cn) {
  K.layernorm_backward(H(dx), H(dw), H(db), H(dout), H(x), H(w), H(mean), H(rstd), N, Cn);
}
static void e_act_forward(fsN_act a, float *o, const float *x, size_t n) {
  K.act_forward(a, H(o), H(x), n);
}
static void e_act_backward(fsN_act a, float *dx, const float *dout, const float *x, const float *o,
                           size_t n) {
  K.act_backward(a, H(dx), H(dout), H(x), H(o), n);
}
static void e_dropout_forward(float *o, const float *x, size_t n, float p, uint64_t key) {
  K.dropout_forward(H(o), H(x), n, p, key);
}
static void e_dropout_backward(float *dx, const float *dout, size_t n, float p, uint64_t key) {
  K.dropout_backward(H(dx), H(dout), n, p, key);
}
static int e_attention_forward(float *o, float *att, const float *x, int64_t B, int64_t T,
                               int64_t Cn, int64_t NH) {
  return K.attention_forward(H(o), H(att), H(x), B, T, Cn, NH);
}
static int e_attention_backward(float *dx, const float *dout, const float *x, const float *att,
                                int64_t B, int64_t T, int64_t Cn, int64_t NH) {
  return K.attention_backward(H(dx), H(dout), H(x), H(att), B, T, Cn, NH);
}
static double e_cross_entropy_forward(const float *l, const int64_t *t, int64_t N, int64_t Cn) {
  return K.cross_entropy_forward(H(l), H(t), N, Cn);
}
static void e_cross_entropy_backward(float *dl, const float *l, const int64_t *t, int64_t N,
                                     int64_t Cn, float dloss) {
  K.cross_entropy_backward(H(dl), H(l), H(t), N, Cn, dloss);
}
static double e_mse_forward(const float *p, const float *t, size_t n) {
  return K.mse_forward(H(p), H(t), n);
}
static void e_mse_backward(float *dp, float *dt, const float *p, const float *t, size_t n,
                           float dloss) {
  K.mse_backward(H(dp), H(dt), H(p), H(t), n, dloss);
}

#define E(f) .f = e_##f
static const fsN_kernels emu_nn = {
  E(linear_forward), E(linear_backward), E(embedding_forward), E(embedding_backward),
  E(posemb_forward), E(posemb_backward), E(layernorm_forward), E(layernorm_backward),
  E(act_forward), E(act_backward), E(dropout_forward), E(dropout_backward),
  E(attention_forward), E(attention_backward), E(cross_entropy_forward),
  E(cross_entropy_backward), E(mse_forward), E(mse_backward),
};

/* the tensor API's kernels that cuda has (fsU_cuda): the device-side path of
 * indexing and topk runs here with device pointers, as on a GPU */
static void e_take(int64_t n, const int64_t *off, size_t es, const void *x, void *y) {
  fsU_cpu.take(n, H(off), es, H(x), H(y));
}
static void e_take_backward(int64_t n, const int64_t *off, float *dx, const float *dy) {
  fsU_cpu.take_backward(n, H(off), H(dx), H(dy));
}
static void e_put(int64_t n, const int64_t *off, size_t es, const void *v, void *x) {
  fsU_cpu.put(n, H(off), es, H(v), H(x));
}
static int e_topk_forward(bool largest, int64_t O, int64_t L, int64_t I, int64_t Kn, const float *x, float *y,
                          int64_t *idx) {
  return fsU_cpu.topk_forward(largest, O, L, I, Kn, H(x), H(y), H(idx));
}
static void e_topk_backward(int64_t O, int64_t L, int64_t I, int64_t Kn, float *dx, const float *dy,
                            const int64_t *idx) {
  fsU_cpu.topk_backward(O, L, I, Kn, H(dx), H(dy), H(idx));
}

static const fsU_kernels emu_ops = {
  E(take), E(take_backward), E(put), E(topk_forward), E(topk_backward), .partial = true,
};

/* --- the low-precision elementwise kernels (fsB_low_kernels) --------------
 * low_cuda.cu's kernels, element for element (low_elem.h), in a loop on the
 * host: --emulate-cuda takes autograd.c's device paths and the device's
 * arithmetic. */

static int l_binary(fsB_binop op, size_t n, fs_dtype ta, const void *a, size_t sa, fs_dtype tb, const void *b,
                    size_t sb, fs_dtype to, void *out) {
  a = H(a), b = H(b), out = H(out);
  for (size_t i = 0; i < n; i++)
    fsL_store(to, out, i, fsL_binary(op, fsL_widen(ta, a, i * sa), fsL_widen(tb, b, i * sb)));
  return 0;
}

static int l_binary_backward(fsB_binop op, int side, size_t n, const float *g, fs_dtype ta, const void *a,
                             size_t sa, fs_dtype tb, const void *b, size_t sb, fs_dtype dt, float *d, bool fresh) {
  g = H(g), a = H(a), b = H(b), d = H(d);
  for (size_t i = 0; i < n; i++)
    fsL_grad_add(dt, d, i, fsL_binary_grad(op, side, g[i], ta, a, sa, tb, b, sb, i), fresh);
  return 0;
}

/* fsN_act_low_table for (act, type), made on first use and kept for the
 * process, as low_cuda.cu keeps its device copy */
typedef struct act_table {
  uint16_t out[65536];
  float slope[65536];
} act_table;

static act_table *act_tables[FSN_TANH + 1][2];
static pthread_mutex_t act_tables_lock = PTHREAD_MUTEX_INITIALIZER;

static const act_table *act_table_of(fsN_act act, fs_dtype dt) {
  pthread_mutex_lock(&act_tables_lock);
  act_table **slot = &act_tables[act][dt == FS_F16], *t = *slot;
  if (!t) {
    if (!(t = malloc(sizeof *t))) fsT_seterr("out of memory");
    else if (fsN_act_low_table(act, dt, t->out, t->slope) < 0) {
      free(t);
      t = NULL;
    }
    *slot = t;
  }
  pthread_mutex_unlock(&act_tables_lock);
  return t;
}

static int l_act_forward(fsN_act act, fs_dtype dt, size_t n, const void *x, void *y) {
  const act_table *t = act == FSN_RELU ? NULL : act_table_of(act, dt);
  if (act != FSN_RELU && !t) return -1;
  const uint16_t *xs = H(x);
  uint16_t *ys = H(y);
  for (size_t i = 0; i < n; i++) ys[i] = fsL_act(act == FSN_RELU, dt, xs, i, t ? t->out : NULL);
  return 0;
}

static int l_act_backward(fsN_act act, fs_dtype dt, size_t n, float *dx, bool fresh, const float *dout,
                          const void *x) {
  const act_table *t = act == FSN_RELU ? NULL : act_table_of(act, dt);
  if (act != FSN_RELU && !t) return -1;
  const uint16_t *xs = H(x);
  dx = H(dx), dout = H(dout);
  for (size_t i = 0; i < n; i++)
    fsL_grad_add(dt, dx, i, fsL_act_grad(act == FSN_RELU, dt, xs, i, dout[i], t ? t->slope : NULL), fresh);
  return 0;
}

static const fsB_low_kernels emu_low = {l_binary, l_binary_backward, l_act_forward, l_act_backward};

/* --- the float64 kernels (f64_kernels.h): 64-true on emulated cuda -------- */

static int d_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t Kd, double alpha, const double *A, int64_t lda,
                  const double *B, int64_t ldb, double beta, double *Cm, int64_t ldc) {
  return DK.gemm(ta, tb, M, N, Kd, alpha, H(A), lda, H(B), ldb, beta, H(Cm), ldc);
}
static void d_axpy(size_t n, double alpha, const double *x, double *y) { DK.axpy(n, alpha, H(x), H(y)); }
static void d_shift(size_t n, double v, double *y) { DK.shift(n, v, H(y)); }
static void d_scale(size_t n, double alpha, double *x) { DK.scale(n, alpha, H(x)); }
static void d_divide(size_t n, double d, double *x) { DK.divide(n, d, H(x)); }
static void d_clamp(size_t n, double lo, double hi, double *x) { DK.clamp(n, lo, hi, H(x)); }
static double d_sum(size_t n, const double *x) { return DK.sum(n, H(x)); }
static double d_sumsq(size_t n, const double *x) { return DK.sumsq(n, H(x)); }
static double d_absmax(size_t n, const double *x) { return DK.absmax(n, H(x)); }
static void d_take_backward(int64_t n, const int64_t *at, double *dx, const double *dy) {
  DK.take_backward(n, H(at), H(dx), H(dy));
}
static void d_unary_forward(fsU_unary op, size_t n, const double *x, double *y, double p0, double p1) {
  DK.unary_forward(op, n, H(x), H(y), p0, p1);
}
static void d_unary_backward(fsU_unary op, size_t n, double *dx, const double *dy, const double *x, const double *y,
                             double p0, double p1) {
  DK.unary_backward(op, n, H(dx), H(dy), H(x), H(y), p0, p1);
}
static void d_binary_forward(fsU_binary op, const fsU_bcast *bc, const double *a, const double *b, double *out) {
  DK.binary_forward(op, bc, H(a), H(b), H(out));
}
static void d_binary_backward(fsU_binary op, const fsU_bcast *bc, double *da, double *db, const double *dout,
                              const double *a, const double *b, const double *out) {
  DK.binary_backward(op, bc, H(da), H(db), H(dout), H(a), H(b), H(out));
}
static void d_sum_dim_forward(int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  DK.sum_dim_forward(O, L, I, H(x), H(y));
}
static void d_sum_dim_backward(int64_t O, int64_t L, int64_t I, double *dx, const double *dy) {
  DK.sum_dim_backward(O, L, I, H(dx), H(dy));
}
static void d_softmax_forward(bool lg, int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  DK.softmax_forward(lg, O, L, I, H(x), H(y));
}
static void d_softmax_backward(bool lg, int64_t O, int64_t L, int64_t I, double *dx, const double *dy,
                               const double *y) {
  DK.softmax_backward(lg, O, L, I, H(dx), H(dy), H(y));
}
static void d_logsumexp_forward(int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  DK.logsumexp_forward(O, L, I, H(x), H(y));
}
static void d_logsumexp_backward(int64_t O, int64_t L, int64_t I, double *dx, const double *dy, const double *x,
                                 const double *y) {
  DK.logsumexp_backward(O, L, I, H(dx), H(dy), H(x), H(y));
}
static void d_cumsum_forward(int64_t O, int64_t L, int64_t I, const double *x, double *y) {
  DK.cumsum_forward(O, L, I, H(x), H(y));
}
static void d_cumsum_backward(int64_t O, int64_t L, int64_t I, double *dx, const double *dy) {
  DK.cumsum_backward(O, L, I, H(dx), H(dy));
}
static int d_linear_forward(double *o, const double *x, const double *W, const double *b, int64_t N, int64_t Cn,
                            int64_t OC) {
  return DK.linear_forward(H(o), H(x), H(W), H(b), N, Cn, OC);
}
static int d_linear_backward(double *dx, double *dW, double *db, const double *dout, const double *x,
                             const double *W, int64_t N, int64_t Cn, int64_t OC) {
  return DK.linear_backward(H(dx), H(dW), H(db), H(dout), H(x), H(W), N, Cn, OC);
}
static void d_act_forward(fsN_act a, double *o, const double *x, size_t n) { DK.act_forward(a, H(o), H(x), n); }
static void d_act_backward(fsN_act a, double *dx, const double *dout, const double *x, const double *o, size_t n) {
  DK.act_backward(a, H(dx), H(dout), H(x), H(o), n);
}
static void d_embedding_forward(double *o, const int64_t *idx, const double *W, int64_t N, int64_t Dm) {
  DK.embedding_forward(H(o), H(idx), H(W), N, Dm);
}
static void d_embedding_backward(double *dW, const double *dout, const int64_t *idx, int64_t N, int64_t Dm) {
  DK.embedding_backward(H(dW), H(dout), H(idx), N, Dm);
}
static void d_posemb_forward(double *o, const double *x, const double *W, int64_t B, int64_t T, int64_t Dm) {
  DK.posemb_forward(H(o), H(x), H(W), B, T, Dm);
}
static void d_posemb_backward(double *dx, double *dW, const double *dout, int64_t B, int64_t T, int64_t Dm) {
  DK.posemb_backward(H(dx), H(dW), H(dout), B, T, Dm);
}
static void d_layernorm_forward(double *o, double *mean, double *rstd, const double *x, const double *w,
                                const double *b, int64_t N, int64_t Cn, double eps) {
  DK.layernorm_forward(H(o), H(mean), H(rstd), H(x), H(w), H(b), N, Cn, eps);
}
static void d_layernorm_backward(double *dx, double *dw, double *db, const double *dout, const double *x,
                                 const double *w, const double *mean, const double *rstd, int64_t N, int64_t Cn) {
  DK.layernorm_backward(H(dx), H(dw), H(db), H(dout), H(x), H(w), H(mean), H(rstd), N, Cn);
}
static int d_attention_forward(double *o, double *att, const double *x, int64_t B, int64_t T, int64_t Cn,
                               int64_t NH) {
  return DK.attention_forward(H(o), H(att), H(x), B, T, Cn, NH);
}
static int d_attention_backward(double *dx, const double *dout, const double *x, const double *att, int64_t B,
                                int64_t T, int64_t Cn, int64_t NH) {
  return DK.attention_backward(H(dx), H(dout), H(x), H(att), B, T, Cn, NH);
}
static double d_cross_entropy_forward(const double *l, const int64_t *t, int64_t N, int64_t Cn) {
  return DK.cross_entropy_forward(H(l), H(t), N, Cn);
}
static void d_cross_entropy_backward(double *dl, const double *l, const int64_t *t, int64_t N, int64_t Cn,
                                     double dloss) {
  DK.cross_entropy_backward(H(dl), H(l), H(t), N, Cn, dloss);
}
static void d_sgd_update(const fsB_update *u, double *p, const double *g, double *buf) {
  DK.sgd_update(u, H(p), H(g), H(buf));
}
static void d_adam_update(const fsB_update *u, double *p, const double *g, double *m, double *v, double *vmax) {
  DK.adam_update(u, H(p), H(g), H(m), H(v), H(vmax));
}

static void d_where_forward(const fsU_bcast *bc, const int64_t *cond, const double *a, const double *b, double *out) {
  DK.where_forward(bc, H(cond), H(a), H(b), H(out));
}
static void d_where_backward(const fsU_bcast *bc, const int64_t *cond, double *da, double *db, const double *dout) {
  DK.where_backward(bc, H(cond), H(da), H(db), H(dout));
}
static void d_extreme_forward(bool mx, int64_t O, int64_t L, int64_t I, const double *x, double *y, int64_t *idx) {
  DK.extreme_forward(mx, O, L, I, H(x), H(y), H(idx));
}
static void d_extreme_backward(int64_t O, int64_t L, int64_t I, double *dx, const double *dy, const int64_t *idx) {
  DK.extreme_backward(O, L, I, H(dx), H(dy), H(idx));
}
static int d_topk_forward(bool lg, int64_t O, int64_t L, int64_t I, int64_t Kn, const double *x, double *y,
                          int64_t *idx) {
  return DK.topk_forward(lg, O, L, I, Kn, H(x), H(y), H(idx));
}
static void d_topk_backward(int64_t O, int64_t L, int64_t I, int64_t Kn, double *dx, const double *dy,
                            const int64_t *idx) {
  DK.topk_backward(O, L, I, Kn, H(dx), H(dy), H(idx));
}
static void d_dropout_forward(double *o, const double *x, size_t n, double p, uint64_t key) {
  DK.dropout_forward(H(o), H(x), n, p, key);
}
static void d_dropout_backward(double *dx, const double *dout, size_t n, double p, uint64_t key) {
  DK.dropout_backward(H(dx), H(dout), n, p, key);
}
static void d_ploss_forward(fsN_ploss op, double param, const double *pw, int64_t n_pw, double *o, const double *x,
                            const double *y, size_t n) {
  DK.ploss_forward(op, param, H(pw), n_pw, H(o), H(x), H(y), n);
}
static void d_ploss_backward(fsN_ploss op, double param, const double *pw, int64_t n_pw, double *dx, double *dy,
                             const double *g, const double *x, const double *y, size_t n) {
  DK.ploss_backward(op, param, H(pw), n_pw, H(dx), H(dy), H(g), H(x), H(y), n);
}
static void d_rmsprop_update(const fsB_update *u, double *p, const double *g, double *sq, double *ga, double *buf) {
  DK.rmsprop_update(u, H(p), H(g), H(sq), H(ga), H(buf));
}
static void d_adagrad_update(const fsB_update *u, double *p, const double *g, double *sum) {
  DK.adagrad_update(u, H(p), H(g), H(sum));
}
static void d_adadelta_update(const fsB_update *u, double *p, const double *g, double *sq, double *acc) {
  DK.adadelta_update(u, H(p), H(g), H(sq), H(acc));
}

/* convolutions, pooling and the normalizations (f64_cnn_kernels.h); the
 * geometry is host memory and passes as it is */
#define DC (*fsB_f64_cpu.cnn)
static int d_conv2d_forward(double *o, const double *x, const double *W, const double *b, const fsN_conv *g) {
  return DC.conv2d_forward(H(o), H(x), H(W), H(b), g);
}
static int d_conv2d_backward(double *dx, double *dW, double *db, const double *dout, const double *x,
                             const double *W, const fsN_conv *g) {
  return DC.conv2d_backward(H(dx), H(dW), H(db), H(dout), H(x), H(W), g);
}
static void d_chanbias_forward(double *o, const double *b, int64_t N, int64_t Cn, int64_t P) {
  DC.chanbias_forward(H(o), H(b), N, Cn, P);
}
static void d_chanbias_backward(double *db, const double *dy, int64_t N, int64_t Cn, int64_t P) {
  DC.chanbias_backward(H(db), H(dy), N, Cn, P);
}
static void d_maxpool2d_forward(double *o, int64_t *idx, const double *x, const fsN_conv *g) {
  DC.maxpool2d_forward(H(o), H(idx), H(x), g);
}
static void d_maxpool2d_backward(double *dx, const double *dout, const int64_t *idx, const fsN_conv *g) {
  DC.maxpool2d_backward(H(dx), H(dout), H(idx), g);
}
static void d_avgpool2d_forward(double *o, const double *x, int64_t NC, const fsN_avgwin *w) {
  DC.avgpool2d_forward(H(o), H(x), NC, w);
}
static void d_avgpool2d_backward(double *dx, const double *dout, int64_t NC, const fsN_avgwin *w) {
  DC.avgpool2d_backward(H(dx), H(dout), NC, w);
}
static void d_batchnorm_forward(double *o, double *mean, double *rstd, const double *x, const double *w,
                                const double *b, double *rm, double *rv, int64_t N, int64_t Cn, int64_t S,
                                bool training, double momentum, double eps) {
  DC.batchnorm_forward(H(o), H(mean), H(rstd), H(x), H(w), H(b), H(rm), H(rv), N, Cn, S, training, momentum, eps);
}
static void d_batchnorm_backward(double *dx, double *dw, double *db, const double *dout, const double *x,
                                 const double *w, const double *mean, const double *rstd, int64_t N, int64_t Cn,
                                 int64_t S, bool training) {
  DC.batchnorm_backward(H(dx), H(dw), H(db), H(dout), H(x), H(w), H(mean), H(rstd), N, Cn, S, training);
}
static void d_groupnorm_forward(double *o, double *mean, double *rstd, const double *x, const double *w,
                                const double *b, int64_t N, int64_t Cn, int64_t S, int64_t G, double eps) {
  DC.groupnorm_forward(H(o), H(mean), H(rstd), H(x), H(w), H(b), N, Cn, S, G, eps);
}
static void d_groupnorm_backward(double *dx, double *dw, double *db, const double *dout, const double *x,
                                 const double *w, const double *mean, const double *rstd, int64_t N, int64_t Cn,
                                 int64_t S, int64_t G) {
  DC.groupnorm_backward(H(dx), H(dw), H(db), H(dout), H(x), H(w), H(mean), H(rstd), N, Cn, S, G);
}
static void d_rmsnorm_forward(double *o, double *rstd, const double *x, const double *w, int64_t M, int64_t Dm,
                              double eps) {
  DC.rmsnorm_forward(H(o), H(rstd), H(x), H(w), M, Dm, eps);
}
static void d_rmsnorm_backward(double *dx, double *dw, const double *dout, const double *x, const double *w,
                               const double *rstd, int64_t M, int64_t Dm) {
  DC.rmsnorm_backward(H(dx), H(dw), H(dout), H(x), H(w), H(rstd), M, Dm);
}

#define F(f) .f = d_##f
static const fsB_f64_cnn emu_f64_cnn = {
  F(conv2d_forward), F(conv2d_backward), F(chanbias_forward), F(chanbias_backward), F(maxpool2d_forward),
  F(maxpool2d_backward), F(avgpool2d_forward), F(avgpool2d_backward), F(batchnorm_forward), F(batchnorm_backward),
  F(groupnorm_forward), F(groupnorm_backward), F(rmsnorm_forward), F(rmsnorm_backward),
};

static const fsB_f64_kernels emu_f64 = {
  F(gemm), F(axpy), F(shift), F(scale), F(divide), F(clamp), F(sum), F(sumsq), F(absmax), F(take_backward),
  F(unary_forward), F(unary_backward), F(binary_forward), F(binary_backward), F(sum_dim_forward),
  F(sum_dim_backward), F(softmax_forward), F(softmax_backward), F(logsumexp_forward), F(logsumexp_backward),
  F(cumsum_forward), F(cumsum_backward), F(linear_forward), F(linear_backward),
  F(act_forward), F(act_backward), F(embedding_forward), F(embedding_backward), F(posemb_forward),
  F(posemb_backward), F(layernorm_forward), F(layernorm_backward), F(attention_forward), F(attention_backward),
  F(cross_entropy_forward), F(cross_entropy_backward), F(sgd_update), F(adam_update), F(where_forward),
  F(where_backward), F(extreme_forward), F(extreme_backward), F(topk_forward),
  F(topk_backward), F(dropout_forward), F(dropout_backward),
  F(ploss_forward), F(ploss_backward), F(rmsprop_update), F(adagrad_update), F(adadelta_update),
  .cnn = &emu_f64_cnn,
};

const fsB_backend fsB_emu_cuda = {
  .name = "cuda (emulated)",
  E(alloc), E(free), E(zero), E(copy), E(from_host), E(to_host), E(sync), E(fill),
  E(fill_uniform), E(fill_normal), E(gemm), E(binary), E(axpy), E(scale), E(clamp), E(sum),
  E(sumsq), E(absmax), E(sgd_update), E(adam_update), E(rmsprop_update), E(adagrad_update),
  E(adadelta_update),
  .nn = &emu_nn, .ops = &emu_ops, .f64 = &emu_f64, E(convert), .low = &emu_low,
};
