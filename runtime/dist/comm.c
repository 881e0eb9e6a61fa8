/* comm.c -- the fsCC_* entry points: argument checks, then the transport's
 * table.  Checks live here once so that every transport trusts its input. */
#define _GNU_SOURCE
#include "config.h"
#include "comm.h"
#include "backend.h"
#include "rendezvous.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const op_names[] = {"sum", "mean", "max", "min"};

const char *fsCC_op_name(fsCC_op op) { return op_names[op]; }

int fsCC_op_parse(const char *name) {
  if (!strcasecmp(name, "avg")) return FSCC_MEAN;
  for (int i = 0; i < 4; i++)
    if (!strcasecmp(name, op_names[i])) return i;
  return -1;
}

double fsCC_timeout(double seconds) {
  const char *e = getenv("FS_COMM_TIMEOUT");
  return seconds > 0 ? seconds : e && atof(e) > 0 ? atof(e) : FSCC_DEFAULT_TIMEOUT;
}

void fsCC_init_base(fsCC_comm *c, const fsCC_ops *ops, const fsCC_config *cfg, fs_device dev) {
  c->ops = ops;
  c->rank = cfg->rank;
  c->world = cfg->world;
  c->device = dev;
  c->aborted = false;
  c->timeout = fsCC_timeout(cfg->timeout);
}

/* Common checks; `blocks` is how many count-sized blocks the largest buffer
 * holds, so that its byte size is known to fit. */
static int check(fsCC_comm *c, const char *what, const void *a, const void *b,
                 size_t count, size_t blocks, fs_dtype dt) {
  if (!c) {
    fsT_seterr("%s: no communicator (the run is not distributed)", what);
    return -1;
  }
  if (c->aborted) {
    fsT_seterr("%s: the communicator was aborted by an earlier failure", what);
    return -1;
  }
  if ((unsigned)dt > FS_I64 && dt != FS_F64) {
    fsT_seterr("%s: unknown dtype %d", what, (int)dt);
    return -1;
  }
  if (count > SIZE_MAX / blocks / fsT_dtype_size(dt)) {
    fsT_seterr("%s: %zu elements overflow the address space", what, count);
    return -1;
  }
  if (count && (!a || !b)) {
    fsT_seterr("%s: NULL buffer for %zu elements", what, count);
    return -1;
  }
  return 0;
}

static int check_op(const char *what, fsCC_op op) {
  if ((unsigned)op > FSCC_MIN) {
    fsT_seterr("%s: unknown reduce op %d", what, (int)op);
    return -1;
  }
  return 0;
}

/* A failed collective may leave peers mid-operation: never trust it again. */
static int done(fsCC_comm *c, int rc) {
  if (rc < 0) c->aborted = true;
  return rc;
}

/* The transport reads and writes the buffers on its own stream: the device's
 * queued work on them must be finished first. */
static int ready(fsCC_comm *c) {
  const fsB_backend *be = c->device == FS_DEV_CPU ? NULL : fsB_get(c->device);
  return be && be->sync() < 0 ? -1 : 0;
}

int fsCC_all_reduce(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, fsCC_op op) {
  return fsCC_all_reduce_bufs(c, &(fsCC_buf){buf, count}, 1, dt, op);
}

int fsCC_all_reduce_bufs(fsCC_comm *c, const fsCC_buf *bufs, int n, fs_dtype dt, fsCC_op op) {
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    if (check(c, "all_reduce", bufs[i].data, bufs[i].data, bufs[i].count, 1, dt) < 0) return -1;
    if (bufs[i].count > SIZE_MAX / fsT_dtype_size(dt) - total) {
      fsT_seterr("all_reduce: %d buffers overflow the address space", n);
      return -1;
    }
    total += bufs[i].count;
  }
  if (check(c, "all_reduce", c, c, 0, 1, dt) < 0 || check_op("all_reduce", op) < 0) return -1;
  return done(c, ready(c) < 0 ? -1 : c->ops->all_reduce(c, bufs, n, dt, op));
}

int fsCC_all_gather(fsCC_comm *c, const void *send, void *recv, size_t count, fs_dtype dt) {
  if (check(c, "all_gather", send, recv, count, c ? (size_t)c->world : 1, dt) < 0) return -1;
  return done(c, ready(c) < 0 ? -1 : c->ops->all_gather(c, send, recv, count, dt));
}

int fsCC_reduce_scatter(fsCC_comm *c, const void *send, void *recv, size_t count,
                        fs_dtype dt, fsCC_op op) {
  if (check(c, "reduce_scatter", send, recv, count, c ? (size_t)c->world : 1, dt) < 0 ||
      check_op("reduce_scatter", op) < 0)
    return -1;
  return done(c, ready(c) < 0 ? -1 : c->ops->reduce_scatter(c, send, recv, count, dt, op));
}

int fsCC_broadcast(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, int root) {
  if (check(c, "broadcast", buf, buf, count, 1, dt) < 0) return -1;
  if (root < 0 || root >= c->world) {
    fsT_seterr("broadcast: src=%d is not a rank of a world of %d", root, c->world);
    return -1;
  }
  return done(c, ready(c) < 0 ? -1 : c->ops->broadcast(c, buf, count, dt, root));
}

int fsCC_barrier(fsCC_comm *c) {
  if (check(c, "barrier", c, c, 0, 1, FS_F32) < 0) return -1;
  return done(c, ready(c) < 0 ? -1 : c->ops->barrier(c));
}

void fsCC_destroy(fsCC_comm *c) {
  if (c) c->ops->destroy(c);
}

static int check_tensor(fsCC_comm *c, const char *what, const fs_tensor *t) {
  if (c && t->device != c->device) {
    fsT_seterr("%s: the tensor is on %s but the %s communicator works on %s", what,
                fsT_device_name(t->device), c->ops->name, fsT_device_name(c->device));
    return -1;
  }
  return 0;
}

int fsCC_all_reduce_tensor(fsCC_comm *c, fs_tensor *t, fsCC_op op) {
  if (check_tensor(c, "all_reduce", t) < 0) return -1;
  return fsCC_all_reduce(c, t->data, (size_t)t->numel, t->dtype, op);
}

int fsCC_all_reduce_tensors(fsCC_comm *c, fs_tensor *const *ts, int n, fsCC_op op) {
  fsCC_buf *bufs = malloc((size_t)(n > 0 ? n : 1) * sizeof *bufs);
  if (!bufs) {
    fsT_seterr("all_reduce: out of memory");
    return -1;
  }
  int rc = 0;
  for (int i = 0; rc == 0 && i < n; i++) {
    rc = check_tensor(c, "all_reduce", ts[i]);
    if (rc == 0 && ts[i]->dtype != ts[0]->dtype) {
      fsT_seterr("all_reduce: tensor %d is %s, tensor 0 is %s (one dtype per call)", i,
                  fsT_dtype_name(ts[i]->dtype), fsT_dtype_name(ts[0]->dtype));
      rc = -1;
    }
    bufs[i] = (fsCC_buf){ts[i]->data, (size_t)ts[i]->numel};
  }
  if (rc == 0) rc = fsCC_all_reduce_bufs(c, bufs, n, n ? ts[0]->dtype : FS_F32, op);
  free(bufs);
  return rc;
}

int fsCC_broadcast_tensor(fsCC_comm *c, fs_tensor *t, int root) {
  if (check_tensor(c, "broadcast", t) < 0) return -1;
  return fsCC_broadcast(c, t->data, (size_t)t->numel, t->dtype, root);
}

/* A broadcast from root when bcast, else an all_reduce with op. */
static int host_collective(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, fsCC_op op,
                           bool bcast, int root) {
  bool staged = c && c->device != FS_DEV_CPU;
  fs_tensor *t = staged ? fsT_new(dt, c->device, 1, &(int64_t){(int64_t)count}) : NULL;
  void *d = staged ? (t ? t->data : NULL) : buf;
  size_t nb = count * fsT_dtype_size(dt);
  int rc = (staged && (!t || fsB_transfer(c->device, d, FS_DEV_CPU, buf, nb) < 0)) ? -1
           : bcast ? fsCC_broadcast(c, d, count, dt, root)
                   : fsCC_all_reduce(c, d, count, dt, op);
  if (rc == 0 && staged) rc = fsB_transfer(FS_DEV_CPU, buf, c->device, d, nb);
  fsT_release(t);
  return rc;
}

int fsCC_all_reduce_host(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, fsCC_op op) {
  return host_collective(c, buf, count, dt, op, false, 0);
}

int fsCC_broadcast_host(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, int root) {
  return host_collective(c, buf, count, dt, FSCC_SUM, true, root);
}

fs_tensor *fsCC_all_gather_tensor(fsCC_comm *c, fs_tensor *t) {
  if (check_tensor(c, "all_gather", t) < 0) return NULL;
  if (t->rank >= FS_MAX_RANK) {
    fsT_seterr("all_gather: a rank-%d tensor gathers to more than %d dimensions", t->rank,
                FS_MAX_RANK);
    return NULL;
  }
  int64_t shape[FS_MAX_RANK];
  shape[0] = c ? c->world : 1;
  memcpy(shape + 1, t->shape, (size_t)t->rank * sizeof *shape);
  fs_tensor *out = fsT_new(t->dtype, t->device, t->rank + 1, shape);
  if (!out) {
    fsT_seterr("all_gather: %s", fsT_error());
    return NULL;
  }
  if (fsCC_all_gather(c, t->data, out->data, (size_t)t->numel, t->dtype) < 0) {
    fsT_release(out);
    return NULL;
  }
  return out;
}

/* --- joining a transport through the rendezvous ---------------------------- */

#define SHM_PREFIX "fabricscript-" /* then the creator's pid, '-', a serial */

void fsCC_shm_sweep(long creator) {
  char prefix[64];
  int n = snprintf(prefix, sizeof prefix, SHM_PREFIX "%ld-", creator);
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, (size_t)n)) {
      char name[300];
      snprintf(name, sizeof name, "/%s", e->d_name);
      shm_unlink(name);
    }
  closedir(d);
}

/* Rank 0's setup result travels with its payload so that a failure there is
 * reported on every rank instead of leaving them waiting. */
typedef struct cc_hello {
  unsigned char ok;
  char shm_name[63];
  unsigned char nccl_id[FSCC_NCCL_ID_BYTES];
} cc_hello;

static const char *const transport_names[] = {"shm", "nccl", "gloo"};

static fsCC_comm *open_local(fsLN_rdzv *rv, const cc_hello *h, fsCC_transport t, const fsCC_config *cfg) {
  return t == FSCC_SHM    ? fsCC_shm_open(h->shm_name, cfg)
         : t == FSCC_NCCL ? fsCC_nccl_open(h->nccl_id, cfg)
                          : fsCC_gloo_open(rv, cfg);
}

fsCC_comm *fsCC_connect(fsLN_rdzv *rv, fsCC_transport t, const fsCC_config *cfg) {
  fsCC_config k = *cfg;
  k.rank = fsLN_rdzv_rank(rv);
  k.world = fsLN_rdzv_world(rv);
  cc_hello h;
  memset(&h, 0, sizeof h);
  fsCC_comm *c = NULL;
  if (k.rank == 0) {
    static unsigned serial;
    snprintf(h.shm_name, sizeof h.shm_name, "/" SHM_PREFIX "%ld-%u", (long)getpid(), serial++);
    h.ok = (t == FSCC_SHM    ? fsCC_shm_create(h.shm_name, k.world, k.staging)
            : t == FSCC_NCCL ? fsCC_nccl_unique_id(h.nccl_id)
                             : 0) == 0; /* gloo: every rank sets itself up in fsCC_gloo_open */
  }
  char why[512];
  snprintf(why, sizeof why, "%s", fsT_error());
  if (fsLN_rdzv_broadcast(rv, &h, sizeof h) < 0) goto fail;
  if (!h.ok) {
    if (k.rank) fsT_seterr("rank 0 could not set up the %s transport", transport_names[t]);
    else fsT_seterr("%s", why);
    goto fail;
  }
  c = open_local(rv, &h, t, &k);
  /* Every rank learns whether all joined; only then may the name go. */
  unsigned char mine = c != NULL, all[FSCC_MAX_WORLD];
  snprintf(why, sizeof why, "%s", fsT_error());
  if (fsLN_rdzv_allgather(rv, &mine, all, 1) < 0) goto fail;
  if (t == FSCC_SHM) { /* the name goes before any rank returns and may crash */
    if (k.rank == 0) shm_unlink(h.shm_name);
    if (fsLN_rdzv_barrier(rv) < 0) goto fail;
  }
  if (!all[k.rank]) { /* this rank's own reason first */
    fsT_seterr("%s", why);
    goto fail;
  }
  for (int r = 0; r < k.world; r++)
    if (!all[r]) {
      fsT_seterr("rank %d could not join the %s transport", r, transport_names[t]);
      goto fail;
    }
  return c;
fail:
  if (t == FSCC_SHM && k.rank == 0 && h.ok) shm_unlink(h.shm_name);
  fsCC_destroy(c);
  return NULL;
}

#ifndef FS_HAVE_GLOO
/* Without libgloo the gloo transport exists only to say so. */
fsCC_comm *fsCC_gloo_open(fsLN_rdzv *rv, const fsCC_config *cfg) {
  fsT_seterr("the gloo transport is not built (configure found no libgloo-dev): a cpu run across "
             "nodes needs it");
  return NULL;
}
#endif

#ifndef FS_HAVE_CUDA
/* Without CUDA the nccl transport exists only to say so. */
int fsCC_nccl_unique_id(unsigned char id[FSCC_NCCL_ID_BYTES]) {
  fsT_seterr("the nccl transport is not built (configure found no CUDA toolkit)");
  return -1;
}

fsCC_comm *fsCC_nccl_open(const unsigned char id[FSCC_NCCL_ID_BYTES], const fsCC_config *cfg) {
  fsCC_nccl_unique_id(NULL);
  return NULL;
}
#endif
