/* test_fsdp.c -- FSDP full shard against the plain module: the shards hold
 * the plain model's initial values (from meta, on 1 and on 2-3 forked
 * ranks), forward gives the same output bits, and after backward each
 * rank's shard gradient is its slice of the plain model's gradient (the
 * mean of W equal gradients: exact for W = 1, 2, within rounding for 3),
 * or with reduce_dtype float16 (16-mixed, the loss scaled so that three
 * ranks' plain sum would overflow) torch's arithmetic in _Float16: each
 * rank's gradient rounded and divided by the predivide factor (1, 2, 2 for
 * W = 1, 2, 3), summed rank by rank, divided by W / factor, bit for bit;
 * reset_parameters refills the shards with the same values. */
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "autograd.h"
#include "cctest.h"
#include "comm.h"
#include "fsdp.h"
#include "module.h"

enum { SEED = 77, IN = 5, B = 4 };

/* Flatten-free MLP: Linear(5, 7), ReLU, repeat 2 of Linear(7, 7), Linear(7, 3, bias=False). */
static fs_module *build(void) {
  fs_module *root = fsM_sequential(), *body = fsM_sequential();
  if (!root || !body) return NULL;
  if (fsM_append(root, "fc1", fsM_linear(IN, 7, true)) < 0 || fsM_append(root, NULL, fsM_activation(FSM_RELU)) < 0 ||
      fsM_append(body, NULL, fsM_linear(7, 7, true)) < 0 || fsM_append(root, "h", fsM_repeat(2, body)) < 0 ||
      fsM_append(root, "out", fsM_linear(7, 3, false)) < 0) {
    fsM_release(root);
    return NULL;
  }
  return root;
}

static fs_tensor *input(void) {
  int64_t shape[2] = {B, IN};
  fs_tensor *x = fsT_new(FS_F32, FS_DEV_CPU, 2, shape);
  for (int i = 0; x && i < B * IN; i++) fsT_f32(x)[i] = (float)((i * 7) % 11) / 11.0f - 0.4f;
  return x;
}

/* sum(y) * scale: the loss both sides differentiate (scale: a gradient
 * scaler's, 1 for the float32 reduce). */
static fs_tensor *loss_of(fs_tensor *y, double scale) {
  fs_tensor *sum = fsG_sum(y), *loss = sum ? fsG_binary_scalar(FSB_MUL, sum, scale, false, false) : NULL;
  fsT_release(sum);
  return loss;
}

/* The plain model, materialized, after one forward and backward of loss_of(model(x), scale). */
static fs_module *plain_trained(fs_tensor **y, double scale) {
  fs_module *m = build();
  fs_tensor *x = input();
  if (!m || !x || fsM_materialize(m, FS_DEV_CPU, SEED) < 0) return NULL;
  *y = fsM_forward(m, x);
  fs_tensor *loss = *y ? loss_of(*y, scale) : NULL;
  int rc = loss ? fsG_backward(loss) : -1;
  fsT_release(loss);
  fsT_release(x);
  return rc == 0 ? m : NULL;
}

static bool close(const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (fabsf(a[i] - b[i]) > 1e-6f * fabsf(b[i])) return false;
  return true;
}

/* torch's FSDP reduce of W ranks' equal float16 gradients g: divided by the
 * predivide factor, summed as NCCL's ring adds (rounding each sum), the
 * rest of W divided out. */
static bool reduced_f16(const float *got, const float *g, int64_t n, int world) {
  int pre = world == 1 ? 1 : 2;
  for (int64_t i = 0; i < n; i++) {
    _Float16 h = (_Float16)((float)(_Float16)g[i] / (float)pre), acc = h;
    for (int r = 1; r < world; r++) acc = (_Float16)((float)acc + (float)h);
    _Float16 want = (_Float16)((float)acc / ((float)world / (float)pre));
    if (got[i] != (float)want) return false;
  }
  return true;
}

/* The float16 reduce's loss scale: the largest gradient becomes about 3e4,
 * so that three ranks' sum overflows float16 unless predivided by 2 (their
 * sum is then 1.5 times it: finite) */
enum { F16_SCALE = 16384 };

/* Runs the same step through fsSH over comm (NULL: one rank), gradients
 * reduced in reduce (FS_F32; FS_F16 with the loss scaled by F16_SCALE),
 * and compares this rank's shards with the plain model's slices; 0 when
 * all agree. */
static int compare(fsCC_comm *comm, fs_dtype reduce) {
  fs_tensor *py = NULL;
  double scale = reduce == FS_F16 ? F16_SCALE : 1.0;
  fs_module *plain = plain_trained(&py, scale), *m = build();
  fsSH_model *s = m ? fsSH_wrap(m, NULL, comm, FS_DEV_CPU, SEED) : NULL;
  fsM_release(m);
  CC_CHECK(plain && s);
  s->reduce_dtype = reduce;
  fsM_param *pp;
  int64_t np = fsM_parameters(plain, &pp);
  CC_CHECK(np == s->nall && s->nunits == 4);
  for (int64_t i = 0; i < np; i++) { /* initial values, slice by slice */
    int64_t first, count, at;
    int u = fsSH_param_slice(s, i, &first, &count, &at);
    CC_CHECK(s->all[i].t->data == NULL); /* no storage outside a gathered unit */
    CC_CHECK(!memcmp(fsT_f32(s->units[u].flat) + at, fsT_f32(pp[i].t) + first, (size_t)count * 4));
  }
  fs_tensor *x = input();
  fs_tensor *y = fsSH_forward(s, x);
  CC_CHECK(y && !memcmp(y->data, py->data, fsT_nbytes(py)));
  fs_tensor *loss = loss_of(y, scale);
  CC_CHECK(loss && fsG_backward(loss) == 0 && fsSH_backward_done(s, true) == 0);
  float largest = 0;
  for (int64_t i = 0; i < np; i++)
    for (int64_t e = 0; e < pp[i].t->numel; e++) largest = fmaxf(largest, fabsf(fsT_f32(pp[i].t->grad)[e]));
  CC_CHECK(reduce == FS_F32 || (largest > 65504.0f / 3 && largest < 65504.0f / 1.5f));
  for (int64_t i = 0; i < np; i++) { /* gradients: mean over ranks of equal grads */
    int64_t first, count, at;
    int u = fsSH_param_slice(s, i, &first, &count, &at);
    CC_CHECK(s->units[u].flat->grad && s->all[i].t->grad == NULL);
    const float *got = fsT_f32(s->units[u].flat->grad) + at, *g = fsT_f32(pp[i].t->grad) + first;
    CC_CHECK(reduce == FS_F16 ? reduced_f16(got, g, count, s->world) : close(got, g, count));
  }
  for (int k = 0; k < s->nunits; k++) { /* padding stays zero */
    fsSH_unit *u = &s->units[k];
    int64_t lo = (int64_t)s->rank * u->shard;
    for (int64_t e = u->n - lo > 0 ? u->n - lo : 0; e < u->shard; e++)
      CC_CHECK(fsT_f32(u->flat)[e] == 0 && fsT_f32(u->flat->grad)[e] == 0);
  }
  fsM_params_free(pp, np);
  fsT_release(loss);
  fsT_release(y);
  fsT_release(x);
  fsT_release(py);
  fsSH_free(s);
  fsM_release(plain);
  return 0;
}

static void test_one_rank(void **state) {
  (void)state;
  assert_int_equal(compare(NULL, FS_F32), 0);
}

static int body(fsLN_rdzv *rv, void *arg) {
  fsCC_config cfg = {.staging = 4096};
  fsCC_comm *c = fsCC_connect(rv, FSCC_SHM, &cfg);
  CC_CHECK(c);
  int rc = compare(c, *(const fs_dtype *)arg);
  fsCC_destroy(c);
  return rc;
}

static void test_two_and_three_ranks(void **state) {
  (void)state;
  fs_dtype f32 = FS_F32;
  assert_int_equal(cc_fork_rdzv(2, body, &f32), 0);
  assert_int_equal(cc_fork_rdzv(3, body, &f32), 0);
}

static void test_float16_reduce(void **state) {
  (void)state;
  fs_dtype f16 = FS_F16;
  assert_int_equal(compare(NULL, FS_F16), 0);
  assert_int_equal(cc_fork_rdzv(2, body, &f16), 0);
  assert_int_equal(cc_fork_rdzv(3, body, &f16), 0);
}

/* reset_parameters on the shards gives the initial values again */
static void test_reset(void **state) {
  (void)state;
  fs_module *plain = build(), *m = build();
  assert_int_equal(fsM_materialize(plain, FS_DEV_CPU, SEED), 0);
  fsSH_model *s = fsSH_wrap(m, NULL, NULL, FS_DEV_CPU, SEED);
  fsM_release(m);
  assert_non_null(s);
  for (int k = 0; k < s->nunits; k++) memset(s->units[k].flat->data, 0, fsT_nbytes(s->units[k].flat));
  assert_int_equal(fsSH_reset_parameters(s, SEED), 0);
  fsM_param *pp;
  int64_t np = fsM_parameters(plain, &pp);
  for (int64_t i = 0; i < np; i++) {
    int64_t first, count, at;
    int u = fsSH_param_slice(s, i, &first, &count, &at);
    assert_memory_equal(fsT_f32(s->units[u].flat) + at, fsT_f32(pp[i].t) + first, (size_t)count * 4);
  }
  fsM_params_free(pp, np);
  fsSH_free(s);
  fsM_release(plain);
}

static void test_unit_sizes(void **state) {
  (void)state;
  fs_module *m = build();
  fsSH_layout L;
  assert_int_equal(fsSH_layout_of(m, NULL, &L), 0);
  assert_int_equal(L.n, 4);
  assert_int_equal(L.numel[0], 7 * IN + 7);
  assert_int_equal(L.numel[1], 56);
  assert_int_equal(L.numel[2], 56);
  assert_int_equal(L.numel[3], 21);
  for (int k = 0; k < L.n; k++) assert_false(L.held[k]);
  assert_int_equal(fsSH_layout_gathered(&L, 2), 56); /* the largest unit, padded */
  fsSH_layout_free(&L);
  fsM_release(m);
}

/* A script class's root (a hook that is never run) for the policy's units. */
static void no_release(fsM_custom *c) { (void)c; }
static fsM_custom hook = {"Net", NULL, no_release};
/* ModuleWrapPolicy({Linear}): look everywhere, wrap the Linears */
static int wraps_linear(fs_module *m, bool recurse, int64_t nonwrapped, void *ud) {
  (void)nonwrapped;
  return recurse || m->kind == *(fsM_kind *)ud;
}

/* Net: emb Embedding(5, 4), stack Sequential(Linear(4, 4), Linear(4, 4)),
 * norm LayerNorm(4); with tie, stack.0's weight is stack.1's. */
static fs_module *custom_net(bool tie) {
  fs_module *root = fsM_custom_new(&hook), *stack = fsM_sequential();
  assert_non_null(root);
  assert_non_null(stack);
  assert_int_equal(fsM_append(stack, NULL, fsM_linear(4, 4, true)), 0);
  assert_int_equal(fsM_append(stack, NULL, fsM_linear(4, 4, true)), 0);
  assert_int_equal(fsM_set_child(root, "emb", fsM_embedding(5, 4)), 0);
  assert_int_equal(fsM_set_child(root, "stack", stack), 0);
  assert_int_equal(fsM_set_child(root, "norm", fsM_layernorm(4, 1e-5)), 0);
  if (tie) assert_int_equal(fsM_tie_param(stack->kids[0], 0, stack->kids[1]->params[0]), 0);
  return root;
}

static void test_policy_units(void **state) {
  (void)state;
  fsM_kind linear = FSM_LINEAR;
  fsSH_policy pol = {wraps_linear, &linear};
  fs_module *m = custom_net(false);
  fsSH_layout L;
  assert_int_equal(fsSH_layout_of(m, &pol, &L), 0);
  assert_int_equal(L.n, 3); /* stack.0, stack.1, the root's */
  assert_ptr_equal(L.m[0], m->kids[1]->kids[0]);
  assert_ptr_equal(L.m[1], m->kids[1]->kids[1]);
  assert_ptr_equal(L.m[2], m);
  assert_int_equal(L.numel[0], 20);
  assert_int_equal(L.numel[1], 20);
  assert_int_equal(L.numel[2], 20 + 8);
  assert_false(L.held[0]);
  assert_true(L.held[2]);
  assert_int_equal(fsSH_layout_gathered(&L, 3), 30 + 21); /* 28 and 20 padded to 3 ranks */
  fsSH_layout_free(&L);
  /* without the policy: emb, stack, norm */
  assert_int_equal(fsSH_layout_of(m, NULL, &L), 0);
  assert_int_equal(L.n, 3);
  assert_int_equal(L.numel[1], 40);
  assert_int_equal(fsSH_layout_gathered(&L, 2), 40);
  fsSH_layout_free(&L);
  fsM_release(m);
  /* stack.0's weight tied to stack.1's: the two units hold it, so it goes to the root's unit */
  m = custom_net(true);
  assert_int_equal(fsSH_layout_of(m, &pol, &L), 0);
  assert_int_equal(L.n, 3);
  assert_int_equal(L.numel[0], 4);  /* stack.0's bias */
  assert_int_equal(L.numel[1], 4);  /* stack.1's bias */
  assert_int_equal(L.numel[2], 28 + 16);
  fsSH_layout_free(&L);
  fsM_release(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_one_rank),
    cmocka_unit_test(test_two_and_three_ranks),
    cmocka_unit_test(test_float16_reduce),
    cmocka_unit_test(test_reset),
    cmocka_unit_test(test_unit_sizes),
    cmocka_unit_test(test_policy_units),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
