/* loader.h -- DataLoader: batches of a data set in order or shuffled, on one
 * rank or on each rank of a DistributedSampler.
 *
 * One epoch visits num_samples indices. Without a sampler, num_samples = n
 * and index k is perm[k]. With DistributedSampler(rank, world, drop_last)
 * PyTorch's semantics hold: num_samples = n / world when drop_last (the tail
 * is dropped), else ceil(n / world) and the list is padded by repeating it
 * from its start; rank r takes positions r, r + world, ...: index k of rank r
 * is perm[(r + k * world) % n] in both cases.
 *
 * perm is the identity, or when shuffling a Fisher-Yates permutation drawn
 * from the rng.h stream keyed by seed + epoch (fsR_bits), as
 * DistributedSampler seeds torch.Generator with seed + epoch: every epoch
 * has its own order and reruns repeat it. The orders are not torch's. */
#ifndef FS_LOADER_H
#define FS_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "dataset.h"

/* A batch: the items stacked along a new first dimension. */
typedef struct fsDL_batch {
  fs_dtype dtype;
  int ndim;
  int64_t shape[FS_MAX_RANK]; /* shape[0] = items in this batch */
  void *data;                 /* owned by the loader; valid until the next call */
} fsDL_batch;

typedef struct fsDL_loader {
  const fsS_dataset *ds; /* borrowed: must outlive the loader */
  size_t batch_size;
  bool shuffle, drop_last;
  uint64_t seed;
  int rank, world;       /* sampler; 0 of 1 without one */
  size_t num_samples;    /* indices per epoch on this rank */
  size_t *perm;          /* ds->len entries once shuffling was asked for */
  size_t pos;            /* next sample of the epoch */
  uint64_t passes;       /* fsDL_iter calls so far */
  fsDL_batch x, y;
} fsDL_loader;

int fsDL_init(fsDL_loader *L, const fsS_dataset *ds, int64_t batch_size, bool shuffle,
              bool drop_last, uint64_t seed, char **err);
/* Switches to DistributedSampler mode (what setup_dataloaders does); the
 * loader's batch_size and drop_last still batch this rank's part. */
int fsDL_distribute(fsDL_loader *L, int rank, int world, bool shuffle, uint64_t seed,
                    bool drop_last, char **err);
void fsDL_free(fsDL_loader *L);

/* Batches per epoch: len(dataloader). */
size_t fsDL_len(const fsDL_loader *L);
/* Starts an epoch: draws its order (seed + epoch) and rewinds. */
void fsDL_start(fsDL_loader *L, uint64_t epoch);
/* Starts the next pass over the loader (`for batch in loader`): pass k is
 * epoch k, as a PyTorch DataLoader reshuffles on every iteration and
 * Fabric's wrapper calls sampler.set_epoch with its iteration count. */
void fsDL_iter(fsDL_loader *L);
/* The data set index of sample k < num_samples of the current epoch. */
size_t fsDL_index(const fsDL_loader *L, size_t k);
/* Fills L->x and L->y with the next batch; false when the epoch is done. */
bool fsDL_next(fsDL_loader *L);

#endif
