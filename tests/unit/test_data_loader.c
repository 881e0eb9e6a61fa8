/* test_data_loader.c -- batching, seeded shuffling, DistributedSampler. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dataset.h"
#include "loader.h"

static void random_set(fsS_dataset *ds, int64_t n) {
  char *err = NULL;
  int64_t shape[2] = {2, 3};
  assert_int_equal(fsS_random(ds, n, 2, shape, 5, 9, &err), 0);
}

static void test_batches_stack_items(void **state) {
  fsS_dataset ds;
  fsDL_loader L;
  char *err = NULL;
  random_set(&ds, 10);
  assert_int_equal(fsDL_init(&L, &ds, 4, false, false, 0, &err), 0);
  assert_int_equal(fsDL_len(&L), 3);
  int64_t sizes[3] = {4, 4, 2};
  size_t item = 0;
  for (int b = 0; b < 3; b++) {
    assert_int_equal(fsDL_next(&L, &err), 1);
    assert_int_equal(L.x.dtype, FS_F32);
    assert_int_equal(L.x.ndim, 3);
    assert_int_equal(L.x.shape[0], sizes[b]);
    assert_int_equal(L.x.shape[1], 2);
    assert_int_equal(L.x.shape[2], 3);
    assert_int_equal(L.y.ndim, 1);
    assert_int_equal(L.y.shape[0], sizes[b]);
    for (int64_t k = 0; k < sizes[b]; k++, item++) {
      float x[6];
      int64_t y;
      fsS_get(&ds, item, 0, x, &y, NULL);
      assert_memory_equal((float *)L.x.data + 6 * k, x, sizeof x);
      assert_int_equal(((int64_t *)L.y.data)[k], y);
    }
  }
  assert_int_equal(fsDL_next(&L, &err), 0);
  fsDL_start(&L, 1); /* a new epoch starts over */
  assert_int_equal(fsDL_next(&L, &err), 1);
  assert_int_equal(fsDL_index(&L, 0), 0);
  fsDL_free(&L);

  assert_int_equal(fsDL_init(&L, &ds, 4, false, true, 0, &err), 0);
  assert_int_equal(fsDL_len(&L), 2);
  assert_int_equal(fsDL_next(&L, &err), 1);
  assert_int_equal(fsDL_next(&L, &err), 1);
  assert_int_equal(fsDL_next(&L, &err), 0); /* the short last batch is dropped */
  fsDL_free(&L);
}

/* order[k] = index of sample k in the epoch; checks it is a permutation. */
static void epoch_order(fsDL_loader *L, uint64_t epoch, size_t *order) {
  size_t n = L->ds->len;
  char *seen = calloc(n, 1);
  fsDL_start(L, epoch);
  for (size_t k = 0; k < n; k++) {
    order[k] = fsDL_index(L, k);
    assert_true(order[k] < n);
    assert_false(seen[order[k]]);
    seen[order[k]] = 1;
  }
  free(seen);
}

static void test_shuffle_is_seeded_per_epoch(void **state) {
  fsS_dataset ds;
  fsDL_loader a, b;
  char *err = NULL;
  random_set(&ds, 50);
  assert_int_equal(fsDL_init(&a, &ds, 8, true, false, 1234, &err), 0);
  assert_int_equal(fsDL_init(&b, &ds, 8, true, false, 1234, &err), 0);
  size_t e0[50], e1[50], again[50];
  epoch_order(&a, 0, e0);
  epoch_order(&a, 1, e1);
  epoch_order(&b, 0, again);
  assert_memory_equal(e0, again, sizeof e0);
  assert_memory_not_equal(e0, e1, sizeof e0);
  /* seed + epoch: seed 1235 epoch 0 is seed 1234 epoch 1 */
  fsDL_free(&b);
  assert_int_equal(fsDL_init(&b, &ds, 8, true, false, 1235, &err), 0);
  epoch_order(&b, 0, again);
  assert_memory_equal(e1, again, sizeof e1);
  size_t fixed = 0;
  for (size_t k = 0; k < 50; k++) fixed += e0[k] == k;
  assert_true(fixed < 10);
  /* The batches follow the order. */
  fsDL_start(&a, 0);
  assert_int_equal(fsDL_next(&a, &err), 1);
  float x[6];
  int64_t y;
  fsS_get(&ds, e0[3], 0, x, &y, NULL);
  assert_memory_equal((float *)a.x.data + 18, x, sizeof x);
  /* Pass k is epoch k: b's (seed 1235) passes 0 and 1 are a's epochs 1 and 2. */
  size_t pass[50], want[50];
  for (uint64_t k = 0; k < 2; k++) {
    fsDL_iter(&b);
    for (size_t i = 0; i < 50; i++) pass[i] = fsDL_index(&b, i);
    epoch_order(&a, k + 1, want);
    assert_memory_equal(pass, want, sizeof pass);
  }
  fsDL_free(&a);
  fsDL_free(&b);
}

/* PyTorch's DistributedSampler, written out: the padded (or cut) index list
 * for (n, world, drop_last) and the rank's slice of it. */
static size_t reference_slice(size_t n, size_t world, size_t rank, int drop_last,
                              const size_t *perm, size_t *out) {
  size_t num = drop_last && n % world ? (n - world) / world + ((n - world) % world != 0)
                                      : (n + world - 1) / world;
  if (drop_last && n < world) num = 0;
  size_t total = num * world, *list = malloc((total + 1) * sizeof *list), len = 0;
  for (size_t i = 0; i < n && len < total; i++) list[len++] = perm[i];
  while (len < total) list[len] = list[len - n], len++; /* indices += indices[:padding] */
  size_t k = 0;
  for (size_t i = rank; i < total; i += world) out[k++] = list[i];
  free(list);
  return k;
}

static void test_distributed_sampler(void **state) {
  const size_t sizes[] = {1, 3, 7, 10, 11, 12, 13};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
    for (int world = 1; world <= 5; world++)
      for (int drop = 0; drop < 2; drop++)
        for (int shuffle = 0; shuffle < 2; shuffle++) {
          size_t n = sizes[si];
          fsS_dataset ds;
          random_set(&ds, (int64_t)n);
          size_t *covered = calloc(n, sizeof *covered), total = 0;
          size_t perm[16], got[16], want[16];
          for (int rank = 0; rank < world; rank++) {
            fsDL_loader L;
            char *err = NULL;
            assert_int_equal(fsDL_init(&L, &ds, 2, true, false, 0, &err), 0);
            assert_int_equal(fsDL_distribute(&L, rank, world, shuffle, 77, drop, &err), 0);
            fsDL_start(&L, 3);
            /* The full permutation of this epoch, as rank 0 of 1 sees it. */
            fsDL_loader one;
            assert_int_equal(fsDL_init(&one, &ds, 1, shuffle, false, 77, &err), 0);
            fsDL_start(&one, 3);
            for (size_t i = 0; i < n; i++) perm[i] = fsDL_index(&one, i);
            fsDL_free(&one);
            size_t k = reference_slice(n, (size_t)world, (size_t)rank, drop, perm, want);
            assert_int_equal(L.num_samples, k);
            for (size_t i = 0; i < k; i++) {
              got[i] = fsDL_index(&L, i);
              covered[got[i]]++;
            }
            assert_memory_equal(got, want, k * sizeof *got);
            assert_int_equal(fsDL_len(&L), (k + 1) / 2);
            size_t batches = 0;
            while (fsDL_next(&L, &err) == 1) batches++;
            assert_int_equal(batches, fsDL_len(&L));
            total += k;
            fsDL_free(&L);
          }
          /* Ranks cover every index (padding repeats some) or, dropping the
           * tail, see each index at most once. */
          for (size_t i = 0; i < n; i++) {
            if (!drop) assert_true(covered[i] >= 1);
            else assert_true(covered[i] <= 1);
          }
          if (!drop) assert_int_equal(total, (n + (size_t)world - 1) / (size_t)world * (size_t)world);
          else assert_int_equal(total, n / (size_t)world * (size_t)world);
          free(covered);
          fsS_free(&ds);
        }
}

static void test_distributed_disjoint_without_padding(void **state) {
  fsS_dataset ds;
  random_set(&ds, 12);
  int seen[12] = {0};
  for (int rank = 0; rank < 4; rank++) {
    fsDL_loader L;
    char *err = NULL;
    assert_int_equal(fsDL_init(&L, &ds, 3, true, false, 5, &err), 0);
    assert_int_equal(fsDL_distribute(&L, rank, 4, true, 5, false, &err), 0);
    assert_int_equal(fsDL_len(&L), 1);
    for (size_t k = 0; k < L.num_samples; k++) seen[fsDL_index(&L, k)]++;
    fsDL_free(&L);
  }
  for (int i = 0; i < 12; i++) assert_int_equal(seen[i], 1);
}

static void test_errors(void **state) {
  fsS_dataset ds;
  fsDL_loader L;
  char *err = NULL;
  random_set(&ds, 4);
  assert_int_equal(fsDL_init(&L, &ds, 0, false, false, 0, &err), -1);
  assert_string_equal(err, "DataLoader: batch_size must be a positive integer, not 0");
  free(err);
  assert_int_equal(fsDL_init(&L, &ds, 2, false, false, 0, &err), 0);
  assert_int_equal(fsDL_distribute(&L, 2, 2, false, 0, false, &err), -1);
  assert_string_equal(err, "DistributedSampler: invalid rank 2 for world size 2");
  free(err);
  fsDL_free(&L);
}

static void test_batch_larger_than_dataset(void **state) {
  fsS_dataset ds;
  fsDL_loader L;
  char *err = NULL;
  random_set(&ds, 5);
  assert_int_equal(fsDL_init(&L, &ds, (int64_t)1 << 50, false, false, 0, &err), 0);
  assert_int_equal(fsDL_len(&L), 1);
  assert_int_equal(fsDL_next(&L, &err), 1);
  assert_int_equal(L.x.shape[0], 5);
  assert_int_equal(fsDL_next(&L, &err), 0);
  fsDL_free(&L);
  assert_int_equal(fsDL_init(&L, &ds, (int64_t)1 << 50, false, true, 0, &err), 0);
  assert_int_equal(fsDL_len(&L), 0);
  assert_int_equal(fsDL_next(&L, &err), 0);
  fsDL_free(&L);
}

static void test_empty_dataset(void **state) {
  fsS_dataset ds;
  fsDL_loader L;
  char *err = NULL;
  random_set(&ds, 0);
  assert_int_equal(fsDL_init(&L, &ds, 2, true, false, 0, &err), 0);
  assert_int_equal(fsDL_len(&L), 0);
  assert_int_equal(fsDL_next(&L, &err), 0);
  assert_int_equal(fsDL_distribute(&L, 1, 3, true, 0, false, &err), 0);
  assert_int_equal(fsDL_len(&L), 0);
  assert_int_equal(fsDL_next(&L, &err), 0);
  fsDL_free(&L);
}

/* torch.Generator's engine: mt19937's reference first output for its default
 * seed, and torch 1.13's randperm/randint for seeds 42 and 3. */
static void test_torch_generator(void **state) {
  fsDL_mt g;
  fsDL_mt_seed(&g, 5489);
  assert_int_equal(fsDL_mt_u32(&g), 3499211612u);
  size_t p[10], want[10] = {2, 6, 1, 8, 4, 5, 0, 9, 3, 7};
  fsDL_mt_seed(&g, 42);
  fsDL_randperm(&g, 10, p);
  assert_memory_equal(p, want, sizeof p);
  size_t r[5], want_r[5] = {6, 8, 7, 7, 0}; /* torch.randint(10, (5,), generator=seed 3) */
  fsDL_mt_seed(&g, 3);
  fsDL_randint(&g, 10, 5, r);
  assert_memory_equal(r, want_r, sizeof r);
}

/* DataLoader(range(10), batch_size=4, shuffle=True, generator=seed 3): torch's
 * two epochs (each draws the iterator's base seed, randperm, randperm[:0]). */
static void test_generator_epochs_are_torch(void **state) {
  fsDL_loader L;
  fsDL_mt g;
  char *err = NULL;
  size_t want[2][10] = {{7, 4, 2, 9, 1, 5, 0, 8, 6, 3}, {1, 2, 0, 5, 9, 4, 8, 3, 6, 7}};
  assert_int_equal(fsDL_init_order(&L, 10, 4, true, false, 0, &err), 0);
  fsDL_mt_seed(&g, 3);
  L.gen = &g;
  for (int e = 0; e < 2; e++) {
    fsDL_iter(&L);
    for (size_t k = 0; k < 10; k++) assert_int_equal(fsDL_index(&L, k), want[e][k]);
  }
  fsDL_free(&L);
}

/* Worker threads: the same batches as without, for any worker count and
 * prefetch, also after an epoch left early and with a batch sampler's batches. */
static void test_workers_match(void **state) {
  fsS_dataset ds;
  char *err = NULL;
  random_set(&ds, 37);
  size_t ends[3] = {5, 6, 20}, pick[20];
  for (size_t k = 0; k < 20; k++) pick[k] = (k * 7) % 37;
  for (int mode = 0; mode < 2; mode++)
    for (int workers = 1; workers <= 4; workers++) {
      fsDL_loader a, b;
      assert_int_equal(fsDL_init(&a, &ds, 4, true, false, 9, &err), 0);
      assert_int_equal(fsDL_init(&b, &ds, 4, true, false, 9, &err), 0);
      assert_int_equal(fsDL_workers(&b, workers, workers % 2 + 1, &err), 0);
      fsDL_iter(&a);
      fsDL_iter(&b);
      assert_int_equal(fsDL_next(&b, &err), 1); /* leave this epoch early */
      for (uint64_t e = 0; e < 2; e++) {
        fsDL_iter(&a);
        fsDL_iter(&b);
        if (mode) {
          assert_int_equal(fsDL_set_samples(&a, pick, 20, ends, 3, &err), 0);
          assert_int_equal(fsDL_set_samples(&b, pick, 20, ends, 3, &err), 0);
        }
        int ra, rb, batches = 0;
        while ((ra = fsDL_next(&a, &err)) == 1) {
          rb = fsDL_next(&b, &err);
          assert_int_equal(rb, 1);
          assert_int_equal(a.x.shape[0], b.x.shape[0]);
          assert_memory_equal(a.x.data, b.x.data, (size_t)a.x.shape[0] * ds.x.bytes);
          assert_memory_equal(a.y.data, b.y.data, (size_t)a.y.shape[0] * ds.y.bytes);
          batches++;
        }
        assert_int_equal(ra, 0);
        assert_int_equal(fsDL_next(&b, &err), 0);
        assert_int_equal(batches, mode ? 3 : 10);
      }
      fsDL_free(&a);
      fsDL_free(&b);
    }
  fsS_free(&ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_batches_stack_items),
    cmocka_unit_test(test_torch_generator),
    cmocka_unit_test(test_generator_epochs_are_torch),
    cmocka_unit_test(test_workers_match),
    cmocka_unit_test(test_shuffle_is_seeded_per_epoch),
    cmocka_unit_test(test_distributed_sampler),
    cmocka_unit_test(test_distributed_disjoint_without_padding),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_batch_larger_than_dataset),
    cmocka_unit_test(test_empty_dataset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
