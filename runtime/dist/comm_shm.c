/* comm_shm.c -- collectives between the processes of one host through one
 * shared-memory segment: a header (barrier, liveness, call descriptors) and
 * one staging slot per rank.  Every collective moves its buffers through the
 * slots chunk by chunk, so any size works with a fixed segment:
 *   write my slot -> barrier -> read the slots (reduce in rank order) -> barrier.
 * Waits spin briefly, then sleep on a futex; each wake checks the deadline,
 * the abort flag and whether the ranks it waits for are still alive. */
#define _GNU_SOURCE
#include "config.h"
#include "comm.h"
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x46534343u /* "FSCC" */
#define SHM_VERSION 1u
#define SHM_MIN_STAGING (8u * FSCC_MAX_WORLD) /* one int64 per rank per chunk */
#define SPINS 200

enum { K_ALL_REDUCE, K_ALL_GATHER, K_REDUCE_SCATTER, K_BROADCAST, K_BARRIER };
static const char *const kind_names[] = {"all_reduce", "all_gather", "reduce_scatter",
                                         "broadcast", "barrier"};

/* What a rank is calling; all ranks must agree before data moves. */
typedef struct shm_desc {
  uint64_t seq, count;
  uint32_t kind, dtype, op;
  int32_t root;
} shm_desc;

typedef struct shm_header {
  uint32_t magic, version;
  int32_t world;
  uint32_t staging;                      /* bytes per rank slot */
  _Atomic uint32_t arrived;              /* ranks in the current barrier */
  _Atomic uint32_t generation;           /* futex word: bumped as a barrier opens */
  _Atomic uint32_t sleepers;             /* ranks in FUTEX_WAIT: wake only if any */
  _Atomic int32_t aborted;               /* 1 + the rank that failed; 0: none */
  _Atomic int32_t pid[FSCC_MAX_WORLD];   /* 0 until the rank attaches, -1 once it left */
  _Atomic uint64_t passed[FSCC_MAX_WORLD]; /* barriers each rank reached */
  shm_desc desc[2][FSCC_MAX_WORLD];      /* by call parity: a slow reader of call
                                            k is safe from call k+1's writes */
} shm_header;

typedef struct shm_comm {
  fsCC_comm base;
  shm_header *h;
  unsigned char *slots;
  size_t map_bytes;
  uint64_t barriers, calls;              /* this rank's counts */
  bool emulated;                         /* buffers are fsB_emu_cuda pointers */
} shm_comm;

static size_t header_bytes(void) { return (sizeof(shm_header) + 4095) & ~(size_t)4095; }

static unsigned char *slot(shm_comm *s, int r) { return s->slots + (size_t)r * s->h->staging; }

/* A buffer's host address: emulated cuda memory is host memory behind
 * pointers the host cannot dereference (backend_emu.c). */
static unsigned char *host(const shm_comm *s, const void *p) {
  return s->emulated ? fsB_emu_host(p) : (unsigned char *)p;
}

/* --- waiting ---------------------------------------------------------------- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Alive and not a zombie: a dead rank whose parent has not reaped it yet
 * still answers kill(pid, 0). */
static bool alive(pid_t pid) {
  if (kill(pid, 0) < 0 && errno == ESRCH) return false;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return true;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')');
  return !(p && (p[2] == 'Z' || p[2] == 'X'));
}

/* Tell the peers to stop waiting for this rank. */
static int fail(shm_comm *s) {
  int32_t none = 0;
  atomic_compare_exchange_strong(&s->h->aborted, &none, s->base.rank + 1);
  return -1;
}

/* The ranks that have not reached barrier number `n`, as "1, 3". */
static void laggards(shm_comm *s, uint64_t n, char *buf, size_t len) {
  size_t k = 0;
  buf[0] = 0;
  for (int r = 0; r < s->base.world && k + 16 < len; r++)
    if (atomic_load(&s->h->passed[r]) < n)
      k += (size_t)snprintf(buf + k, len - k, "%s%d", k ? ", " : "", r);
}

static int wait_all(shm_comm *s, const char *what) {
  shm_header *h = s->h;
  int world = s->base.world;
  uint32_t gen = atomic_load(&h->generation);
  uint64_t n = ++s->barriers;
  atomic_store(&h->passed[s->base.rank], n);
  if (atomic_fetch_add(&h->arrived, 1) + 1 == (uint32_t)world) {
    atomic_store(&h->arrived, 0);
    atomic_fetch_add(&h->generation, 1);
    if (atomic_load(&h->sleepers))
      syscall(SYS_futex, &h->generation, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    return 0;
  }
  double deadline = now() + s->base.timeout;
  for (unsigned i = 0;; i++) {
    if (atomic_load(&h->generation) != gen) return 0;
    if (i < SPINS) {
      sched_yield();
      continue;
    }
    char why[400] = "";
    int32_t ab = atomic_load(&h->aborted);
    if (ab) snprintf(why, sizeof why, "rank %d failed, the collective is abandoned", ab - 1);
    for (int r = 0; r < world && !why[0]; r++) {
      pid_t pid = atomic_load(&h->pid[r]);
      if (r == s->base.rank) continue;
      if (pid < 0) snprintf(why, sizeof why, "rank %d has finished (it closed its communicator)", r);
      else if (pid > 0 && !alive(pid)) snprintf(why, sizeof why, "rank %d (pid %d) died", r, (int)pid);
    }
    if (!why[0] && now() > deadline) {
      char who[256];
      laggards(s, n, who, sizeof who);
      snprintf(why, sizeof why, "timed out after %g s waiting for rank(s) %s", s->base.timeout,
               who[0] ? who : "?");
    }
    if (why[0]) {
      /* a rank that is gone now may have passed this barrier first */
      if (atomic_load(&h->generation) != gen) return 0;
      fsT_seterr("%s: %s", what, why);
      return ab ? -1 : fail(s);
    }
    /* registered before FUTEX_WAIT rechecks the word: a waker that missed
     * the count has already bumped it, so the wait returns at once */
    struct timespec ts = {0, 20 * 1000 * 1000};
    atomic_fetch_add(&h->sleepers, 1);
    syscall(SYS_futex, &h->generation, FUTEX_WAIT, gen, &ts, NULL, 0);
    atomic_fetch_sub(&h->sleepers, 1);
  }
}

/* Publish this rank's call, meet the others, and check that all agree. */
static int begin(shm_comm *s, uint32_t kind, fs_dtype dt, fsCC_op op, size_t count, int root) {
  int32_t ab = atomic_load(&s->h->aborted);
  if (ab) {
    fsT_seterr("%s: rank %d failed earlier, the communicator is unusable", kind_names[kind], ab - 1);
    return -1;
  }
  uint64_t seq = ++s->calls;
  shm_desc *mine = &s->h->desc[seq & 1][s->base.rank];
  *mine = (shm_desc){.seq = seq, .count = count, .kind = kind, .dtype = dt, .op = op, .root = root};
  if (wait_all(s, kind_names[kind]) < 0) return -1;
  for (int r = 0; r < s->base.world; r++) {
    const shm_desc *d = &s->h->desc[seq & 1][r];
    if (d->seq == seq && d->kind == kind && d->dtype == (uint32_t)dt && d->count == count &&
        (kind == K_BROADCAST ? d->root == root : d->op == (uint32_t)op))
      continue;
    fsT_seterr("collective mismatch at call %llu: rank %d called %s(%zu x %s) but rank %d "
                "called %s(%llu x %s)",
                (unsigned long long)seq, s->base.rank, kind_names[kind], count,
                fsT_dtype_name(dt), r, d->kind <= K_BARRIER ? kind_names[d->kind] : "?",
                (unsigned long long)d->count, d->dtype <= FS_I64 ? fsT_dtype_name(d->dtype) : "?");
    return -1;
  }
  return 0;
}

/* --- reduction: element-wise over srcs in rank order ------------------------ */

static float f32_at(fs_dtype dt, const void *p, size_t i) {
  return dt == FS_F32 ? ((const float *)p)[i] : fsT_bf16_to_f32(((const uint16_t *)p)[i]);
}

static float f32_op(fsCC_op op, float a, float b) {
  if (op == FSCC_SUM || op == FSCC_MEAN) return a + b;
  if (isnan(a) || isnan(b)) return NAN;
  return op == FSCC_MAX ? (a > b ? a : b) : (a < b ? a : b);
}

static int64_t i64_op(fsCC_op op, int64_t a, int64_t b) {
  if (op == FSCC_SUM || op == FSCC_MEAN) return (int64_t)((uint64_t)a + (uint64_t)b); /* wraps */
  return op == FSCC_MAX ? (a > b ? a : b) : (a < b ? a : b);
}

/* float64 (64-true): accumulated in double, in rank order */
static double f64_op(fsCC_op op, double a, double b) {
  if (op == FSCC_SUM || op == FSCC_MEAN) return a + b;
  if (isnan(a) || isnan(b)) return NAN;
  return op == FSCC_MAX ? (a > b ? a : b) : (a < b ? a : b);
}

static void reduce(fs_dtype dt, fsCC_op op, int nsrc, const void *const *src, size_t n, void *out) {
  for (size_t i = 0; i < n; i++) {
    if (dt == FS_F64) {
      double acc = ((const double *)src[0])[i];
      for (int r = 1; r < nsrc; r++) acc = f64_op(op, acc, ((const double *)src[r])[i]);
      ((double *)out)[i] = op == FSCC_MEAN ? acc / nsrc : acc;
      continue;
    }
    if (dt == FS_I64) {
      int64_t acc = ((const int64_t *)src[0])[i];
      for (int r = 1; r < nsrc; r++) acc = i64_op(op, acc, ((const int64_t *)src[r])[i]);
      ((int64_t *)out)[i] = op == FSCC_MEAN ? acc / nsrc : acc;
      continue;
    }
    float acc = f32_at(dt, src[0], i);
    for (int r = 1; r < nsrc; r++) acc = f32_op(op, acc, f32_at(dt, src[r], i));
    if (op == FSCC_MEAN) acc /= (float)nsrc;
    if (dt == FS_F32) ((float *)out)[i] = acc;
    else ((uint16_t *)out)[i] = fsT_f32_to_bf16(acc);
  }
}

/* --- the collectives ---------------------------------------------------------- */

/* The next piece, at most *n elements, of the buffers' concatenation at the
 * cursor (buffer *b, element *o), which moves past it; *n becomes its size. */
static unsigned char *piece(const shm_comm *s, const fsCC_buf *bufs, int *b, size_t *o, size_t es,
                            size_t *n) {
  while (bufs[*b].count == *o) {
    ++*b;
    *o = 0;
  }
  unsigned char *p = host(s, bufs[*b].data) + *o * es;
  if (*n > bufs[*b].count - *o) *n = bufs[*b].count - *o;
  *o += *n;
  return p;
}

static int shm_all_reduce(fsCC_comm *c, const fsCC_buf *bufs, int nb, fs_dtype dt, fsCC_op op) {
  shm_comm *s = (shm_comm *)c;
  size_t es = fsT_dtype_size(dt), per = s->h->staging / es, count = 0;
  const void *src[FSCC_MAX_WORLD];
  for (int i = 0; i < nb; i++) count += bufs[i].count;
  if (begin(s, K_ALL_REDUCE, dt, op, count, 0) < 0) return -1;
  int b = 0;
  size_t o = 0;
  for (size_t off = 0; off < count; off += per) {
    size_t n = count - off < per ? count - off : per;
    int b2 = b;
    size_t o2 = o;
    for (size_t k = 0, m; k < n; k += m) {
      m = n - k;
      unsigned char *p = piece(s, bufs, &b2, &o2, es, &m);
      memcpy(slot(s, c->rank) + k * es, p, m * es);
    }
    if (wait_all(s, "all_reduce") < 0) return -1;
    for (size_t k = 0, m; k < n; k += m) {
      m = n - k;
      unsigned char *p = piece(s, bufs, &b, &o, es, &m);
      for (int r = 0; r < c->world; r++) src[r] = slot(s, r) + k * es;
      reduce(dt, op, c->world, src, m, p);
    }
    if (wait_all(s, "all_reduce") < 0) return -1;
  }
  return 0;
}

static int shm_all_gather(fsCC_comm *c, const void *send, void *recv, size_t count, fs_dtype dt) {
  shm_comm *s = (shm_comm *)c;
  size_t es = fsT_dtype_size(dt), per = s->h->staging / es;
  const unsigned char *in = host(s, send);
  unsigned char *out = host(s, recv);
  if (begin(s, K_ALL_GATHER, dt, 0, count, 0) < 0) return -1;
  for (size_t off = 0; off < count; off += per) {
    size_t n = count - off < per ? count - off : per;
    memcpy(slot(s, c->rank), in + off * es, n * es);
    if (wait_all(s, "all_gather") < 0) return -1;
    for (int r = 0; r < c->world; r++)
      memcpy(out + ((size_t)r * count + off) * es, slot(s, r), n * es);
    if (wait_all(s, "all_gather") < 0) return -1;
  }
  return 0;
}

static int shm_reduce_scatter(fsCC_comm *c, const void *send, void *recv, size_t count,
                              fs_dtype dt, fsCC_op op) {
  shm_comm *s = (shm_comm *)c;
  size_t es = fsT_dtype_size(dt), per = s->h->staging / es / (size_t)c->world;
  const void *src[FSCC_MAX_WORLD];
  const unsigned char *in = host(s, send);
  unsigned char *out = host(s, recv);
  if (begin(s, K_REDUCE_SCATTER, dt, op, count, 0) < 0) return -1;
  for (size_t off = 0; off < count; off += per) {
    size_t n = count - off < per ? count - off : per;
    /* my slot holds, for each destination rank, my part of its chunk */
    for (int r = 0; r < c->world; r++)
      memcpy(slot(s, c->rank) + (size_t)r * n * es, in + ((size_t)r * count + off) * es, n * es);
    if (wait_all(s, "reduce_scatter") < 0) return -1;
    for (int r = 0; r < c->world; r++) src[r] = slot(s, r) + (size_t)c->rank * n * es;
    reduce(dt, op, c->world, src, n, out + off * es);
    if (wait_all(s, "reduce_scatter") < 0) return -1;
  }
  return 0;
}

static int shm_broadcast(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, int root) {
  shm_comm *s = (shm_comm *)c;
  size_t es = fsT_dtype_size(dt), per = s->h->staging / es;
  if (begin(s, K_BROADCAST, dt, 0, count, root) < 0) return -1;
  for (size_t off = 0; off < count; off += per) {
    size_t n = count - off < per ? count - off : per;
    unsigned char *b = host(s, buf) + off * es;
    if (c->rank == root) memcpy(slot(s, root), b, n * es);
    if (wait_all(s, "broadcast") < 0) return -1;
    if (c->rank != root) memcpy(b, slot(s, root), n * es);
    if (wait_all(s, "broadcast") < 0) return -1;
  }
  return 0;
}

static int shm_barrier(fsCC_comm *c) {
  return begin((shm_comm *)c, K_BARRIER, FS_F32, 0, 0, 0);
}

static void shm_destroy(fsCC_comm *c) {
  shm_comm *s = (shm_comm *)c;
  if (s->h) {
    atomic_store(&s->h->pid[c->rank], -1); /* waiting for this rank is now an error */
    munmap(s->h, s->map_bytes);
  }
  free(s);
}

static const fsCC_ops shm_ops = {
    .name = "shm",
    .all_reduce = shm_all_reduce,
    .all_gather = shm_all_gather,
    .reduce_scatter = shm_reduce_scatter,
    .broadcast = shm_broadcast,
    .barrier = shm_barrier,
    .destroy = shm_destroy,
};

/* --- creating and attaching ------------------------------------------------ */

static int seg_error(const char *name, int fd, bool unlink_it) {
  fsT_seterr("shm segment %s: %s", name, strerror(errno));
  if (fd >= 0) close(fd);
  if (unlink_it) shm_unlink(name);
  return -1;
}

int fsCC_shm_create(const char *name, int world, size_t staging) {
  if (world < 1 || world > FSCC_MAX_WORLD) {
    fsT_seterr("shm: a world of %d is out of range (1..%d)", world, FSCC_MAX_WORLD);
    return -1;
  }
  staging = staging ? staging : FSCC_DEFAULT_STAGING;
  if (staging < SHM_MIN_STAGING || staging > UINT32_MAX / 2) {
    fsT_seterr("shm: staging of %zu bytes is outside %u..%u", staging, SHM_MIN_STAGING,
                UINT32_MAX / 2);
    return -1;
  }
  staging &= ~(size_t)63; /* slots stay cache-line and element aligned */
  size_t bytes = header_bytes() + (size_t)world * staging;
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return seg_error(name, -1, false);
  if (ftruncate(fd, (off_t)bytes) < 0) return seg_error(name, fd, true);
  shm_header *h = mmap(NULL, header_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (h == MAP_FAILED) return seg_error(name, fd, true);
  close(fd);
  h->world = world;
  h->staging = (uint32_t)staging;
  h->version = SHM_VERSION;
  atomic_store(&h->generation, 0); /* orders the fields above before magic */
  h->magic = SHM_MAGIC;
  munmap(h, header_bytes());
  return 0;
}

fsCC_comm *fsCC_shm_open(const char *name, const fsCC_config *cfg) {
  if (cfg->world < 1 || cfg->world > FSCC_MAX_WORLD || cfg->rank < 0 || cfg->rank >= cfg->world) {
    fsT_seterr("shm: rank %d of world %d is out of range (world 1..%d)", cfg->rank, cfg->world,
                FSCC_MAX_WORLD);
    return NULL;
  }
  int fd = shm_open(name, O_RDWR, 0600);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0) {
    seg_error(name, fd, false);
    return NULL;
  }
  if ((size_t)st.st_size < header_bytes()) {
    fsT_seterr("shm segment %s: %lld bytes is too small to be a fabricscript segment", name,
                (long long)st.st_size);
    close(fd);
    return NULL;
  }
  shm_comm *s = calloc(1, sizeof *s);
  void *p = s ? mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
  if (!s || p == MAP_FAILED) {
    fsT_seterr(s ? "shm segment %s: mmap: %s" : "shm segment %s: %s", name,
                s ? strerror(errno) : "out of memory");
    close(fd);
    free(s);
    return NULL;
  }
  close(fd);
  fsCC_init_base(&s->base, &shm_ops, cfg, cfg->emulated_cuda ? FS_DEV_CUDA : FS_DEV_CPU);
  shm_header *h = s->h = p;
  s->map_bytes = (size_t)st.st_size;
  s->emulated = cfg->emulated_cuda;
  s->slots = (unsigned char *)p + header_bytes();
  int32_t none = 0;
  if (h->magic != SHM_MAGIC || h->version != SHM_VERSION)
    fsT_seterr("shm segment %s is not a fabricscript segment (version %u)", name, SHM_VERSION);
  else if (h->world != cfg->world || s->map_bytes != header_bytes() + (size_t)h->world * h->staging)
    fsT_seterr("shm segment %s was made for %d ranks, this rank expects %d", name, h->world,
                cfg->world);
  else if (!atomic_compare_exchange_strong(&h->pid[cfg->rank], &none, (int32_t)getpid()))
    fsT_seterr(none < 0 ? "shm segment %s: rank %d has already been and left"
                         : "shm segment %s: rank %d is already attached", name, cfg->rank);
  else
    return &s->base;
  munmap(s->h, s->map_bytes);
  free(s);
  return NULL;
}
