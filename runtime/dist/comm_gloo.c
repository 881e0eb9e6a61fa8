/* comm_gloo.c -- the collectives between the hosts of a cpu run across
 * nodes, over Gloo's TCP transport (Debian's libgloo, the engine PyTorch's
 * CPU DDP uses); built only when configure found libgloo-dev.
 *
 * The fsCC_ops table lives here, in C; Gloo itself is C++ and sits behind
 * gloo_shim.h (its other half, gloo_shim.cc), a module loaded on first use
 * from next to the program, then from the installed package's library
 * directory (FS_GLOO_MODULE names another): linked, libgloo and libstdc++
 * would cost every start of the program about 10 ms, `check` included.
 *
 * Semantics as the shm transport's (comm.h): bfloat16 is reduced in float32
 * and rounded once at the end, `mean` is the sum divided by the world size
 * (int64: truncated), max and min propagate NaN, int64 sums wrap.  Gloo's
 * ring reduces in its own fixed order, so every rank gets the same bits and
 * reruns reproduce them, but shm and gloo sums of float32 need not be
 * bitwise equal.  Gloo does not compare the ranks' calls: a mismatched call
 * ends in a timeout or a size error, not in the shm transport's message. */
#define _GNU_SOURCE
#include "config.h"
#include "comm.h"
#include "backend.h"
#include "gloo_shim.h"
#include "rendezvous.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MODULE "fabricscript-gloo.so"
#define CHUNK ((size_t)1 << 22) /* elements per reduction call: bounds the staging buffer */
#define ENDPOINTS (2 * FSCC_MAX_WORLD + 8) /* a rank's sockets: Gloo's pairs, the rendezvous */
#define ENDPOINT_LEN 64

typedef char endpoint[ENDPOINT_LEN]; /* "[ip]:port" */

#define SHIM_FNS(X) X(fsCC_glooshim_open) X(fsCC_glooshim_all_reduce) X(fsCC_glooshim_all_gather) \
  X(fsCC_glooshim_broadcast) X(fsCC_glooshim_barrier) X(fsCC_glooshim_close) X(fsCC_glooshim_owner)
#define FN_PTR(f) __typeof__(f) *f;
static struct { SHIM_FNS(FN_PTR) } L;

/* The module: FS_GLOO_MODULE (that one only), else beside the running
 * program (a build tree), else where `make install` put it. */
static void *open_module(void) {
  char paths[2][PATH_MAX + 64], why[1024] = "";
  int n = 0;
  const char *env = getenv("FS_GLOO_MODULE");
  if (env && *env) snprintf(paths[n++], sizeof paths[0], "%s", env);
  else {
    char here[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", here, sizeof here - 1);
    char *slash = k > 0 ? (here[k] = 0, strrchr(here, '/')) : NULL;
    if (slash) {
      *slash = 0;
      snprintf(paths[n++], sizeof paths[0], "%s/" MODULE, here);
    }
    snprintf(paths[n++], sizeof paths[0], "%s/" MODULE, FS_PKGLIBDIR);
  }
  for (int i = 0; i < n; i++) {
    void *h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    size_t used = strlen(why);
    snprintf(why + used, sizeof why - used, "%s%s", used ? "; " : "", dlerror());
  }
  fsT_seterr("gloo: cannot load the module " MODULE " (%s)", why);
  return NULL;
}

/* Resolve every function once; the module stays loaded for the process. */
static int load(void) {
  static int state; /* 0: not tried, 1: loaded, -1: failed (message kept) */
  static char why[1200];
  if (state == 0) {
    void *h = open_module();
    const char *missing = NULL;
#define FN_LOAD(f) if (h && !(*(void **)&L.f = dlsym(h, #f))) missing = #f;
    SHIM_FNS(FN_LOAD)
    if (h && missing) fsT_seterr("gloo: %s is not in the module " MODULE, missing);
    state = h && !missing ? 1 : -1;
    snprintf(why, sizeof why, "%s", fsT_error());
  }
  if (state < 0) fsT_seterr("%s", why);
  return state > 0 ? 0 : -1;
}

typedef struct gloo_comm {
  fsCC_comm base;
  fsCC_glooshim *g;
  endpoint *ends;        /* world * ENDPOINTS: every rank's local socket addresses */
  int local_world;       /* ranks per node, to name a lost rank's node; 0: unknown */
  bool emulated;         /* buffers are fsB_emu_cuda pointers */
} gloo_comm;

static unsigned char *host(const gloo_comm *s, const void *p) {
  return s->emulated ? fsB_emu_host(p) : (unsigned char *)p;
}

/* The rank a failed call's message names.  Gloo prints the far end of the
 * connection that broke: on the side that connected, the peer's listening
 * address, which the peer published (the module looks it up); on the side
 * that accepted, the peer's own socket, one of the endpoints every rank
 * published when the communicator opened.  This Gloo prints ports in
 * network byte order: both orders are tried. */
static int owner(const gloo_comm *s, const char *err) {
  int r = L.fsCC_glooshim_owner(s->g, err);
  char ip[ENDPOINT_LEN], name[ENDPOINT_LEN + 16];
  unsigned port;
  for (const char *p = strchr(err, '['); r < 0 && p; p = strchr(p + 1, '[')) {
    if (sscanf(p, "[%63[^]]]:%u", ip, &port) != 2 || port > 0xffff) continue;
    for (int k = 0; r < 0 && k < 2; k++) {
      snprintf(name, sizeof name, "[%s]:%u", ip, k ? (port >> 8) | ((port & 0xff) << 8) : port);
      for (int q = 0; r < 0 && q < s->base.world; q++)
        for (int i = 0; q != s->base.rank && i < ENDPOINTS && s->ends[q * ENDPOINTS + i][0]; i++)
          if (!strcmp(name, s->ends[q * ENDPOINTS + i])) r = q;
    }
  }
  return r;
}

/* The failure, naming the rank (and node) that went away when Gloo's
 * message tells which. */
static int failed(const gloo_comm *s, const char *what, const char *err) {
  int r = owner(s, err);
  if (r >= 0 && s->local_world > 0)
    fsT_seterr("%s: lost rank %d (node %d): it died or left the run (gloo: %s)", what, r,
               r / s->local_world, err);
  else if (r >= 0)
    fsT_seterr("%s: lost rank %d: it died or left the run (gloo: %s)", what, r, err);
  else if (strstr(err, "Timed out"))
    fsT_seterr("%s: timed out after %g s: a rank stopped answering (gloo: %s)", what, s->base.timeout, err);
  else
    fsT_seterr("%s: gloo: %s", what, err);
  return -1;
}

/* This process's TCP endpoints, ENDPOINTS at most (out is zeroed). */
static void own_endpoints(endpoint *out) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent *e; d && n < ENDPOINTS && (e = readdir(d));) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char ip[ENDPOINT_LEN - 10], port[8]; /* "[", "]:", 5 digits and NUL fit */
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == dirfd(d) || getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
        (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
        getnameinfo((struct sockaddr *)&ss, len, ip, sizeof ip, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
      continue;
    snprintf(out[n++], ENDPOINT_LEN, "[%s]:%s", ip, port);
  }
  if (d) closedir(d);
}

/* --- reductions through a float32 (int64) staging buffer ----------------- */

/* A position in the concatenation of several buffers. */
typedef struct cursor {
  const fsCC_buf *bufs;
  int b;
  size_t o;
} cursor;

/* Copies n elements between the buffers at the cursor (which advances) and
 * staging, converting bfloat16 to and from float32. */
static void move(const gloo_comm *s, cursor *cu, fs_dtype dt, void *staging, size_t n, bool in, bool device) {
  size_t es = fsT_dtype_size(dt), done = 0;
  while (done < n) {
    while (cu->bufs[cu->b].count == cu->o) {
      cu->b++;
      cu->o = 0;
    }
    size_t m = cu->bufs[cu->b].count - cu->o;
    if (m > n - done) m = n - done;
    unsigned char *p = (device ? host(s, cu->bufs[cu->b].data) : (unsigned char *)cu->bufs[cu->b].data) + cu->o * es;
    if (dt == FS_BF16) {
      float *f = (float *)staging + done;
      uint16_t *h = (uint16_t *)p;
      for (size_t i = 0; i < m; i++) {
        if (in) f[i] = fsT_bf16_to_f32(h[i]);
        else h[i] = fsT_f32_to_bf16(f[i]);
      }
    } else {
      unsigned char *st = (unsigned char *)staging + done * es;
      memcpy(in ? st : p, in ? p : st, m * es);
    }
    cu->o += m;
    done += m;
  }
}

/* bufs (host memory, or the device's when `device`) reduced in place. */
static int reduce_bufs(gloo_comm *s, const fsCC_buf *bufs, int nb, fs_dtype dt, fsCC_op op, bool device,
                       const char *what) {
  size_t count = 0;
  for (int i = 0; i < nb; i++) count += bufs[i].count;
  if (count == 0) return 0;
  size_t per = count < CHUNK ? count : CHUNK;
  bool i64 = dt == FS_I64, f64 = dt == FS_F64;
  void *staging = malloc(per * (i64 || f64 ? 8 : sizeof(float)));
  if (!staging) {
    fsT_seterr("%s: out of memory for %zu elements of staging", what, per);
    return -1;
  }
  fsCC_gloo_red red = op == FSCC_MAX ? FSCC_GLOO_MAX : op == FSCC_MIN ? FSCC_GLOO_MIN : FSCC_GLOO_SUM;
  cursor in = {bufs, 0, 0}, out = {bufs, 0, 0};
  char err[FSCC_GLOO_ERR];
  int rc = 0;
  for (size_t off = 0; rc == 0 && off < count; off += per) {
    size_t n = count - off < per ? count - off : per;
    move(s, &in, dt, staging, n, true, device);
    fsCC_gloo_kind kind = i64 ? FSCC_GLOO_I64 : f64 ? FSCC_GLOO_F64 : FSCC_GLOO_F32;
    if (L.fsCC_glooshim_all_reduce(s->g, staging, n, kind, red, err) < 0) {
      rc = failed(s, what, err);
      break;
    }
    for (size_t i = 0; op == FSCC_MEAN && i < n; i++) {
      if (i64) ((int64_t *)staging)[i] /= s->base.world;
      else if (f64) ((double *)staging)[i] /= s->base.world;
      else ((float *)staging)[i] /= (float)s->base.world;
    }
    move(s, &out, dt, staging, n, false, device);
  }
  free(staging);
  return rc;
}

static int gl_all_reduce(fsCC_comm *c, const fsCC_buf *bufs, int n, fs_dtype dt, fsCC_op op) {
  return reduce_bufs((gloo_comm *)c, bufs, n, dt, op, true, "all_reduce");
}

/* The whole send buffer reduced on a copy, this rank's block kept: twice the
 * traffic of a true reduce-scatter, for FSDP's gradients (emulated cuda
 * across nodes; Fabric refuses FSDP on cpu). */
static int gl_reduce_scatter(fsCC_comm *c, const void *send, void *recv, size_t count, fs_dtype dt,
                             fsCC_op op) {
  gloo_comm *s = (gloo_comm *)c;
  size_t es = fsT_dtype_size(dt), total = count * (size_t)c->world;
  unsigned char *copy = malloc(total ? total * es : 1);
  if (!copy) {
    fsT_seterr("reduce_scatter: out of memory for %zu elements", total);
    return -1;
  }
  memcpy(copy, host(s, send), total * es);
  int rc = reduce_bufs(s, &(fsCC_buf){copy, total}, 1, dt, op, false, "reduce_scatter");
  if (rc == 0) memcpy(host(s, recv), copy + (size_t)c->rank * count * es, count * es);
  free(copy);
  return rc;
}

static int gl_all_gather(fsCC_comm *c, const void *send, void *recv, size_t count, fs_dtype dt) {
  gloo_comm *s = (gloo_comm *)c;
  size_t bytes = count * fsT_dtype_size(dt);
  if (bytes == 0) return 0;
  unsigned char *out = host(s, recv), *mine = out + (size_t)c->rank * bytes;
  const unsigned char *in = host(s, send);
  if (in != mine) memmove(mine, in, bytes);
  char err[FSCC_GLOO_ERR];
  return L.fsCC_glooshim_all_gather(s->g, out, bytes, err) < 0 ? failed(s, "all_gather", err) : 0;
}

static int gl_broadcast(fsCC_comm *c, void *buf, size_t count, fs_dtype dt, int root) {
  gloo_comm *s = (gloo_comm *)c;
  size_t bytes = count * fsT_dtype_size(dt);
  char err[FSCC_GLOO_ERR];
  if (bytes == 0) return 0;
  return L.fsCC_glooshim_broadcast(s->g, host(s, buf), bytes, root, err) < 0 ? failed(s, "broadcast", err) : 0;
}

static int gl_barrier(fsCC_comm *c) {
  gloo_comm *s = (gloo_comm *)c;
  char err[FSCC_GLOO_ERR];
  return L.fsCC_glooshim_barrier(s->g, err) < 0 ? failed(s, "barrier", err) : 0;
}

static void gl_destroy(fsCC_comm *c) {
  gloo_comm *s = (gloo_comm *)c;
  L.fsCC_glooshim_close(s->g);
  free(s->ends);
  free(s);
}

static const fsCC_ops gloo_ops = {
    .name = "gloo",
    .all_reduce = gl_all_reduce,
    .all_gather = gl_all_gather,
    .reduce_scatter = gl_reduce_scatter,
    .broadcast = gl_broadcast,
    .barrier = gl_barrier,
    .destroy = gl_destroy,
};

static int exchange(void *rv, const void *mine, void *all, size_t n) {
  return fsLN_rdzv_allgather(rv, mine, all, n);
}

fsCC_comm *fsCC_gloo_open(fsLN_rdzv *rv, const fsCC_config *cfg) {
  /* every rank learns whether all have the module before any opens a device */
  unsigned char loaded = load() == 0, all[FSCC_MAX_WORLD];
  char why[1200];
  snprintf(why, sizeof why, "%s", fsT_error());
  if (fsLN_rdzv_allgather(rv, &loaded, all, 1) < 0) return NULL;
  for (int r = 0; r < cfg->world; r++)
    if (!all[r]) {
      if (r == cfg->rank) fsT_seterr("%s", why);
      else fsT_seterr("gloo: rank %d could not load the module " MODULE, r);
      return NULL;
    }
  /* a peer that died must fail the collective, not kill this rank with
   * SIGPIPE (Python, and so PyTorch's ranks, ignore it too) */
  signal(SIGPIPE, SIG_IGN);
  char addr[NI_MAXHOST], err[FSCC_GLOO_ERR];
  fsLN_rdzv_local_addr(rv, addr, sizeof addr);
  const char *iface = getenv("GLOO_SOCKET_IFNAME"); /* torch's variable: bind this interface instead */
  gloo_comm *s = calloc(1, sizeof *s);
  endpoint *ends = s ? calloc((size_t)cfg->world * ENDPOINTS, sizeof *ends) : NULL;
  if (!ends) {
    fsT_seterr("gloo: out of memory");
    free(s);
    return NULL;
  }
  s->ends = ends;
  fsCC_init_base(&s->base, &gloo_ops, cfg, cfg->emulated_cuda ? FS_DEV_CUDA : FS_DEV_CPU);
  s->local_world = cfg->local_world;
  s->emulated = cfg->emulated_cuda;
  s->g = L.fsCC_glooshim_open(cfg->rank, cfg->world, addr, iface && *iface ? iface : NULL,
                              (long)(s->base.timeout * 1000), exchange, rv, err);
  if (!s->g && !err[0]) { /* the rendezvous failed: its own message, no further exchange */
    gl_destroy(&s->base);
    return NULL;
  }
  /* every rank publishes its endpoints, a failed one too (none), so that
   * the exchanges stay in step */
  endpoint mine[ENDPOINTS];
  memset(mine, 0, sizeof mine);
  if (s->g) own_endpoints(mine);
  else fsT_seterr("gloo: %s", err);
  snprintf(why, sizeof why, "%s", fsT_error());
  if (fsLN_rdzv_allgather(rv, mine, s->ends, sizeof mine) < 0 || !s->g) {
    if (!s->g) fsT_seterr("%s", why);
    gl_destroy(&s->base);
    return NULL;
  }
  return &s->base;
}
