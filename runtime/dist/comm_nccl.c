/* comm_nccl.c -- the collectives on CUDA device buffers through NCCL (built
 * only with CUDA).  The communicator is non-blocking (config.blocking = 0) so
 * that initialization and every collective can be waited for against the
 * deadline: a dead or absent peer ends in ncclCommAbort and an error instead
 * of a hang.  Work runs on one stream per communicator; each call returns
 * after its stream has drained, as the shm transport does.
 *
 * cudart and NCCL are loaded on first use (dlopen): linked, NCCL alone adds
 * about 12 ms to every start of the program, `check` included. */
#define _GNU_SOURCE
#include "config.h"
#include "comm.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h declares f() */
#include <cuda_runtime.h>
#include <nccl.h>
#pragma GCC diagnostic pop
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(sizeof(ncclUniqueId) == FSCC_NCCL_ID_BYTES, "ncclUniqueId size");

#define CUDA_FNS(X) X(cudaGetDeviceCount) X(cudaSetDevice) X(cudaGetErrorString) \
  X(cudaStreamCreateWithFlags) X(cudaStreamQuery) X(cudaStreamDestroy) X(cudaMalloc) X(cudaFree)
#define NCCL_FNS(X) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommGetAsyncError) \
  X(ncclCommAbort) X(ncclCommFinalize) X(ncclCommDestroy) X(ncclGetErrorString) X(ncclGetLastError) \
  X(ncclAllReduce) X(ncclAllGather) X(ncclReduceScatter) X(ncclBroadcast) X(ncclGroupStart) \
  X(ncclGroupEnd)
#define FN_PTR(f) __typeof__(f) *f;
static struct { CUDA_FNS(FN_PTR) NCCL_FNS(FN_PTR) } L;

static void *open_lib(const char *name) {
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) fsT_seterr("nccl: cannot load %s: %s", name, dlerror());
  return h;
}

/* Resolve every function once; the libraries stay loaded for the process. */
static int load(void) {
  static int state; /* 0: not tried, 1: loaded, -1: failed (message kept) */
  static char why[512];
  if (state == 0) {
    char cu_name[32], nc_name[32];
    snprintf(cu_name, sizeof cu_name, "libcudart.so.%d", CUDART_VERSION / 1000);
    snprintf(nc_name, sizeof nc_name, "libnccl.so.%d", NCCL_MAJOR);
    void *cu = open_lib(cu_name), *nc = cu ? open_lib(nc_name) : NULL, *h;
    const char *missing = NULL;
#define FN_LOAD(f) if (!(*(void **)&L.f = dlsym(h, #f))) missing = #f;
    if ((h = cu)) { CUDA_FNS(FN_LOAD) }
    if ((h = nc)) { NCCL_FNS(FN_LOAD) }
    if (nc && missing) fsT_seterr("nccl: %s is not in %s or %s", missing, cu_name, nc_name);
    state = nc && !missing ? 1 : -1;
    snprintf(why, sizeof why, "%s", fsT_error());
  }
  if (state < 0) fsT_seterr("%s", why);
  return state > 0 ? 0 : -1;
}

typedef struct nccl_comm {
  fsCC_comm base;
  ncclComm_t nc;
  cudaStream_t stream;
  int *scratch;          /* device int for barriers */
} nccl_comm;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(void) {
  struct timespec ts = {0, 100 * 1000};
  nanosleep(&ts, NULL);
}

/* Poll the communicator until it leaves ncclInProgress (init, or a call
 * being enqueued) and, with a stream, until that stream drained. */
static int settle(nccl_comm *s, ncclResult_t rc, bool drain, const char *what) {
  double deadline = now() + s->base.timeout;
  while (rc == ncclInProgress || rc == ncclSuccess) {
    ncclResult_t async = ncclSuccess;
    L.ncclCommGetAsyncError(s->nc, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      rc = async;
      break;
    }
    if (async == ncclSuccess) {
      if (!drain) return 0;
      cudaError_t q = L.cudaStreamQuery(s->stream);
      if (q == cudaSuccess) return 0;
      if (q != cudaErrorNotReady) {
        fsT_seterr("nccl %s: %s", what, L.cudaGetErrorString(q));
        L.ncclCommAbort(s->nc);
        s->nc = NULL;
        return -1;
      }
    }
    if (now() > deadline) {
      fsT_seterr("nccl %s: timed out after %g s (a rank died or never joined)", what,
                  s->base.timeout);
      L.ncclCommAbort(s->nc);
      s->nc = NULL;
      return -1;
    }
    nap();
  }
  fsT_seterr("nccl %s: %s%s%s", what, L.ncclGetErrorString(rc),
              L.ncclGetLastError(s->nc)[0] ? ": " : "", L.ncclGetLastError(s->nc));
  L.ncclCommAbort(s->nc);
  s->nc = NULL;
  return -1;
}

/* float64: 64-true's gradients under DDP, reduced in double as torch's
 * NCCL reduces a double tensor */
static ncclDataType_t type_of(fs_dtype dt) {
  return dt == FS_F32    ? ncclFloat32
         : dt == FS_BF16 ? ncclBfloat16
         : dt == FS_F64  ? ncclFloat64
         : dt == FS_BOOL ? ncclUint8
                         : ncclInt64;
}

static ncclRedOp_t op_of(fsCC_op op) {
  return op == FSCC_SUM ? ncclSum : op == FSCC_MEAN ? ncclAvg : op == FSCC_MAX ? ncclMax : ncclMin;
}

/* One group: NCCL fuses the buffers' reductions into one launch. */
static int nc_all_reduce(fsCC_comm *c, const fsCC_buf *bufs, int n, fs_dtype dt, fsCC_op op) {
  nccl_comm *s = (nccl_comm *)c;
  ncclResult_t rc = L.ncclGroupStart();
  for (int i = 0; i < n && (rc == ncclSuccess || rc == ncclInProgress); i++)
    if (bufs[i].count)
      rc = L.ncclAllReduce(bufs[i].data, bufs[i].data, bufs[i].count, type_of(dt), op_of(op), s->nc,
                           s->stream);
  ncclResult_t end = L.ncclGroupEnd();
  return settle(s, rc == ncclSuccess || rc == ncclInProgress ? end : rc, true, "all_reduce");
}

static int nc_all_gather(fsCC_comm *c, const void *send, void *recv, size_t count, fs_dtype dt) {
  nccl_comm *s = (nccl_comm *)c;
  return settle(s, L.ncclAllGather(send, recv, count, type_of(dt), s->nc, s->stream), true,
                "all_gather");
}

static int nc_reduce_scatter(fsCC_comm *c, const void *send, void *recv, size_t count,
                             fs_dtype dt, fsCC_op op) {
  nccl_comm *s = (nccl_comm *)c;
  return settle(s, L.ncclReduceScatter(send, recv, count, type_of(dt), op_of(op), s->nc, s->stream),
                true, "reduce_scatter");
}

static int nc_broadcast(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, int root) {
  nccl_comm *s = (nccl_comm *)c;
  return settle(s, L.ncclBroadcast(buf, buf, count, type_of(dt), root, s->nc, s->stream), true,
                "broadcast");
}

static int nc_barrier(fsCC_comm *c) {
  nccl_comm *s = (nccl_comm *)c;
  return settle(s, L.ncclAllReduce(s->scratch, s->scratch, 1, ncclInt32, ncclSum, s->nc, s->stream),
                true, "barrier");
}

static void nc_destroy(fsCC_comm *c) {
  nccl_comm *s = (nccl_comm *)c;
  /* finalize waits for the peers (settle aborts on timeout), then frees */
  if (s->nc && settle(s, L.ncclCommFinalize(s->nc), false, "finalize") == 0)
    L.ncclCommDestroy(s->nc);
  if (s->scratch) L.cudaFree(s->scratch);
  if (s->stream) L.cudaStreamDestroy(s->stream);
  free(s);
}

static const fsCC_ops nccl_ops = {
    .name = "nccl",
    .all_reduce = nc_all_reduce,
    .all_gather = nc_all_gather,
    .reduce_scatter = nc_reduce_scatter,
    .broadcast = nc_broadcast,
    .barrier = nc_barrier,
    .destroy = nc_destroy,
};

int fsCC_nccl_unique_id(unsigned char id[FSCC_NCCL_ID_BYTES]) {
  if (load() < 0) return -1;
  ncclUniqueId u;
  ncclResult_t rc = L.ncclGetUniqueId(&u);
  if (rc != ncclSuccess) {
    fsT_seterr("nccl: cannot make a unique id: %s", L.ncclGetErrorString(rc));
    return -1;
  }
  memcpy(id, &u, sizeof u);
  return 0;
}

/* 35 (no driver) and 100 (no device) both mean: no CUDA device here. */
static int pick_device(int local_rank) {
  int n = 0;
  cudaError_t e = L.cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    fsT_seterr("nccl: no CUDA device (%s)", e == cudaSuccess ? "none visible" : L.cudaGetErrorString(e));
    return -1;
  }
  if (local_rank < 0 || local_rank >= n) {
    fsT_seterr("nccl: local rank %d has no CUDA device (%d visible)", local_rank, n);
    return -1;
  }
  e = L.cudaSetDevice(local_rank);
  if (e != cudaSuccess) {
    fsT_seterr("nccl: cudaSetDevice(%d): %s", local_rank, L.cudaGetErrorString(e));
    return -1;
  }
  return 0;
}

fsCC_comm *fsCC_nccl_open(const unsigned char id[FSCC_NCCL_ID_BYTES], const fsCC_config *cfg) {
  if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world) {
    fsT_seterr("nccl: rank %d of world %d is out of range", cfg->rank, cfg->world);
    return NULL;
  }
  if (load() < 0 || pick_device(cfg->local_rank) < 0) return NULL;
  nccl_comm *s = calloc(1, sizeof *s);
  if (!s) {
    fsT_seterr("nccl: out of memory");
    return NULL;
  }
  fsCC_init_base(&s->base, &nccl_ops, cfg, FS_DEV_CUDA);
  cudaError_t e = L.cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = L.cudaMalloc((void **)&s->scratch, sizeof *s->scratch);
  if (e != cudaSuccess) {
    fsT_seterr("nccl: %s", L.cudaGetErrorString(e));
    nc_destroy(&s->base);
    return NULL;
  }
  ncclUniqueId u;
  memcpy(&u, id, sizeof u);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t rc = L.ncclCommInitRankConfig(&s->nc, cfg->world, u, cfg->rank, &config);
  if (rc != ncclSuccess && rc != ncclInProgress) {
    fsT_seterr("nccl: ncclCommInitRank: %s", L.ncclGetErrorString(rc));
    if (s->nc) L.ncclCommAbort(s->nc);
    s->nc = NULL;
    nc_destroy(&s->base);
    return NULL;
  }
  if (settle(s, rc, false, "init") < 0) {
    nc_destroy(&s->base);
    return NULL;
  }
  return &s->base;
}
