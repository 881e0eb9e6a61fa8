/* comm.h -- collectives across the ranks of one run, as one function table.
 *
 * A communicator (fsCC_comm) joins `world` processes; every rank calls the
 * same collectives in the same order with the same counts, dtypes and roots.
 * Three transports fill the table: shared memory between the processes of
 * one host (comm_shm.c, host buffers), NCCL (comm_nccl.c, CUDA device
 * buffers, built only with CUDA) and Gloo over TCP between the hosts of a
 * cpu run across nodes (comm_gloo.c, host buffers, built with libgloo).
 * DDP and FSDP call only fsCC_* below, so any transport serves every
 * caller.
 *
 * Counts are element counts.  all_gather and reduce_scatter move equal
 * per-rank blocks: the flat buffer holds world * count elements, rank r's
 * block at [r * count, (r + 1) * count).  A caller with n elements that do not
 * divide evenly pads to fsCC_padded(n, world) (FSDP pads each flat parameter
 * so; docs/distributed.md).  all_reduce and broadcast take any count.
 *
 * Determinism: shm reduces element-wise in rank order 0..world-1 (bfloat16 in
 * float32, rounded to nearest even once at the end), so every rank gets
 * bitwise the same result and reruns reproduce it.  NCCL is deterministic for
 * a fixed topology and NCCL version.
 *
 * Errors: -1 (or NULL) with a message in fsT_error() (per thread, the runtime's one message), also for
 * the rendezvous and the launcher.  A failed collective (timeout, dead peer,
 * mismatched call) leaves the communicator aborted: every rank's later calls
 * fail at once instead of waiting. */
#ifndef FS_COMM_H
#define FS_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include "tensor.h"

typedef enum fsCC_op { FSCC_SUM, FSCC_MEAN, FSCC_MAX, FSCC_MIN } fsCC_op;
typedef enum fsCC_transport { FSCC_SHM, FSCC_NCCL, FSCC_GLOO } fsCC_transport;

#define FSCC_MAX_WORLD 64
#define FSCC_DEFAULT_TIMEOUT 600.0          /* seconds; FS_COMM_TIMEOUT overrides */
#define FSCC_DEFAULT_STAGING (4u << 20)     /* shm bytes per rank */

typedef struct fsCC_config {
  int rank, world;
  int local_rank;        /* nccl: the CUDA device this rank uses */
  int local_world;       /* ranks per node (gloo names a lost rank's node); 0: unknown */
  double timeout;        /* seconds for every wait; <= 0: default */
  size_t staging;        /* shm: staging bytes per rank for fsCC_connect to create; 0: default */
  bool emulated_cuda;    /* shm, gloo: the buffers are fsB_emu_cuda pointers (host memory behind an offset) */
} fsCC_config;

typedef struct fsCC_comm fsCC_comm;

/* One of several buffers that a collective treats as one concatenation. */
typedef struct fsCC_buf {
  void *data;
  size_t count;
} fsCC_buf;

/* What a transport provides; arguments are already checked by the fsCC_*
 * wrappers (counts fit, dtype and op valid, root in range). */
typedef struct fsCC_ops {
  const char *name;
  int (*all_reduce)(fsCC_comm *c, const fsCC_buf *bufs, int n, fs_dtype dt, fsCC_op op);
  int (*all_gather)(fsCC_comm *c, const void *send, void *recv, size_t count, fs_dtype dt);
  int (*reduce_scatter)(fsCC_comm *c, const void *send, void *recv, size_t count,
                        fs_dtype dt, fsCC_op op);
  int (*broadcast)(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, int root);
  int (*barrier)(fsCC_comm *c);
  void (*destroy)(fsCC_comm *c);
} fsCC_ops;

struct fsCC_comm {
  const fsCC_ops *ops;
  int rank, world;
  fs_device device;      /* where buffers must live: cpu (shm, gloo) or cuda (nccl; emulated: shm, gloo) */
  double timeout;
  bool aborted;          /* a collective failed; every later call fails */
};

/* buf (count elements) becomes the reduction over ranks, in place. */
int fsCC_all_reduce(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, fsCC_op op);
/* The same over n buffers as one (DDP's gradients: one collective, no
 * bucket copies); ranks must agree on the total count only. */
int fsCC_all_reduce_bufs(fsCC_comm *c, const fsCC_buf *bufs, int n, fs_dtype dt, fsCC_op op);
/* recv (world * count) = every rank's send (count), in rank order. */
int fsCC_all_gather(fsCC_comm *c, const void *send, void *recv, size_t count, fs_dtype dt);
/* recv (count) = reduction over ranks of their send blocks [rank * count, +count). */
int fsCC_reduce_scatter(fsCC_comm *c, const void *send, void *recv, size_t count,
                        fs_dtype dt, fsCC_op op);
/* buf (count) on every rank = root's buf. */
int fsCC_broadcast(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, int root);
int fsCC_barrier(fsCC_comm *c);
void fsCC_destroy(fsCC_comm *c);                 /* NULL is a no-op */

/* Whole tensors on the communicator's device (data of numel elements). */
int fsCC_all_reduce_tensor(fsCC_comm *c, fs_tensor *t, fsCC_op op);
/* n tensors of one dtype in one collective (fsCC_all_reduce_bufs). */
int fsCC_all_reduce_tensors(fsCC_comm *c, fs_tensor *const *ts, int n, fsCC_op op);
int fsCC_broadcast_tensor(fsCC_comm *c, fs_tensor *t, int root);
/* A new tensor [world, *t.shape] of every rank's t (Fabric's all_gather). */
fs_tensor *fsCC_all_gather_tensor(fsCC_comm *c, fs_tensor *t);
/* all_reduce and broadcast of host buffers (flags, a norm, a file name)
 * whatever the transport: through a device copy where it takes device
 * buffers (NCCL, emulated cuda). */
int fsCC_all_reduce_host(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, fsCC_op op);
int fsCC_broadcast_host(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, int root);

/* Per-rank block of n elements over world ranks, and the padded total. */
static inline size_t fsCC_shard(size_t n, int world) { return (n + (size_t)world - 1) / (size_t)world; }
static inline size_t fsCC_padded(size_t n, int world) { return fsCC_shard(n, world) * (size_t)world; }

const char *fsCC_op_name(fsCC_op op);      /* "sum", "mean", "max", "min" */
/* "sum" "mean" "avg" "max" "min" (any case, Fabric's reduce_op names); -1 if unknown */
int fsCC_op_parse(const char *name);

/* Join the ranks of a rendezvous on a transport.  shm: rank 0 creates the
 * segment and sends its name, the others attach, and the name is unlinked
 * once all have it (nothing is left in /dev/shm, even after a crash).  nccl:
 * rank 0 makes the unique id and sends it.  cfg->rank and cfg->world are
 * taken from the rendezvous. */
typedef struct fsLN_rdzv fsLN_rdzv;
fsCC_comm *fsCC_connect(fsLN_rdzv *rv, fsCC_transport t, const fsCC_config *cfg);

/* Unlinks what fsCC_connect's segments created by process `creator` left in
 * /dev/shm (it crashed between creating and unlinking): the launcher calls
 * it for rank 0 once every rank has ended. */
void fsCC_shm_sweep(long creator);

/* The transports.  shm: fsCC_shm_create makes the segment (O_EXCL) for
 * `world` ranks with `staging` bytes each (0: default), attaching none; each
 * rank then attaches with fsCC_shm_open (cfg->staging is not used there).
 * nccl: id is an ncclUniqueId. */
int fsCC_shm_create(const char *name, int world, size_t staging);
fsCC_comm *fsCC_shm_open(const char *name, const fsCC_config *cfg);
#define FSCC_NCCL_ID_BYTES 128
int fsCC_nccl_unique_id(unsigned char id[FSCC_NCCL_ID_BYTES]);
fsCC_comm *fsCC_nccl_open(const unsigned char id[FSCC_NCCL_ID_BYTES], const fsCC_config *cfg);
/* gloo: every rank of the rendezvous calls it; the ranks swap their TCP
 * addresses through rv.  Without libgloo at build time, or without its
 * module at run time, it fails saying so. */
fsCC_comm *fsCC_gloo_open(fsLN_rdzv *rv, const fsCC_config *cfg);

/* seconds if > 0, else FS_COMM_TIMEOUT if set, else FSCC_DEFAULT_TIMEOUT */
double fsCC_timeout(double seconds);
/* For the transports: fill the common fields, resolving the timeout. */
void fsCC_init_base(fsCC_comm *c, const fsCC_ops *ops, const fsCC_config *cfg, fs_device dev);

#endif
