/* launch.c -- the launcher: joining an outside launcher's rank, or forking
 * local ranks and supervising them (output relay, failure, cleanup). */
#define _GNU_SOURCE
#include "config.h"
#include "launch.h"
#include "rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GRACE 2.0      /* seconds between SIGTERM and SIGKILL for the other ranks */
#define SETTLE 0.5     /* how long a rank's plain failure waits for a signalled one to show */
#define TICK_MS 20     /* how often the supervisor looks for ended ranks */
#define LINE_MAX_BYTES (1 << 16) /* longer lines are relayed in pieces */

/* --- joining: the launcher's variables --------------------------------------- */

/* An integer variable: 1 found, 0 absent, -1 malformed. */
static int env_int(const char *name, int *out) {
  const char *s = getenv(name);
  if (!s) return 0;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  /* SLURM_NTASKS_PER_NODE may read "2(x3)": the count comes first */
  if (end == s || errno || v < INT_MIN || v > INT_MAX ||
      (*end && strcmp(name, "SLURM_NTASKS_PER_NODE"))) {
    fsT_seterr("launch: %s=%s is not an integer", name, s);
    return -1;
  }
  *out = (int)v;
  return 1;
}

/* Each field from the first variable that is set, else its fallback. */
static int env_field(const char *a, const char *b, int fallback, int *out) {
  int f = env_int(a, out);
  if (f == 0 && b) f = env_int(b, out);
  if (f == 0) *out = fallback;
  return f < 0 ? -1 : 0;
}

/* Lightning's rule: an allocation's interactive shell is not a rank. */
static bool under_srun(void) {
  const char *job = getenv("SLURM_JOB_NAME");
  return getenv("SLURM_NTASKS") && getenv("SLURM_PROCID") &&
         !(job && (!strcmp(job, "bash") || !strcmp(job, "interactive")));
}

static int check_range(const char *what, int v, int lo, int hi) {
  if (v >= lo && v <= hi) return 0;
  fsT_seterr("launch: %s=%d is outside %d..%d", what, v, lo, hi);
  return -1;
}

int fsLN_detect(fsLN_env *env) {
  bool torchrun = getenv("RANK") && getenv("WORLD_SIZE");
  if (!torchrun && !under_srun()) return 0;
  memset(env, 0, sizeof *env);
  env->listen_fd = -1;
  const char *r = torchrun ? "RANK" : "SLURM_PROCID", *w = torchrun ? "WORLD_SIZE" : "SLURM_NTASKS";
  if (env_field(r, NULL, 0, &env->rank) < 0 || env_field(w, NULL, 1, &env->world_size) < 0 ||
      env_field(torchrun ? "LOCAL_RANK" : "SLURM_LOCALID", NULL, env->rank, &env->local_rank) < 0 ||
      env_field(torchrun ? "LOCAL_WORLD_SIZE" : "SLURM_NTASKS_PER_NODE", NULL, env->world_size,
                &env->local_world_size) < 0 ||
      env_field(torchrun ? "NODE_RANK" : "SLURM_NODEID", torchrun ? "GROUP_RANK" : NULL, 0,
                &env->node_rank) < 0)
    return -1;
  if (check_range(w, env->world_size, 1, FSCC_MAX_WORLD) < 0 ||
      check_range(r, env->rank, 0, env->world_size - 1) < 0 ||
      check_range("LOCAL_WORLD_SIZE", env->local_world_size, 1, env->world_size) < 0 ||
      check_range("LOCAL_RANK", env->local_rank, 0, env->local_world_size - 1) < 0 ||
      check_range("NODE_RANK", env->node_rank, 0, env->world_size - 1) < 0)
    return -1;
  const char *addr = getenv("MASTER_ADDR");
  if (!addr && env->local_world_size < env->world_size) {
    fsT_seterr("launch: a run over several nodes needs MASTER_ADDR");
    return -1;
  }
  snprintf(env->master_addr, sizeof env->master_addr, "%s", addr ? addr : "127.0.0.1");
  /* SLURM without MASTER_PORT: Lightning's port from the job id */
  const char *job = getenv("SLURM_JOB_ID");
  size_t jl = job ? strlen(job) : 0;
  int fallback = !torchrun && jl ? 15000 + atoi(job + (jl > 4 ? jl - 4 : 0)) : 0;
  if (env_field("MASTER_PORT", NULL, fallback, &env->master_port) < 0) return -1;
  if (env->world_size > 1 && check_range("MASTER_PORT", env->master_port, 1, 65535) < 0) return -1;
  return 1;
}

/* --- forking: the supervisor ---------------------------------------------------- */

typedef struct stream {
  int fd, dest, rank;
  char *buf;
  size_t len, cap;
} stream;

typedef struct sup {
  int n;
  int base;                      /* the global rank of local rank 0 (node_rank * n) */
  pid_t pid[FSCC_MAX_WORLD];
  int status[FSCC_MAX_WORLD];
  bool ended[FSCC_MAX_WORLD];
  stream s[2 * FSCC_MAX_WORLD];  /* stdout and stderr of ranks 1..n-1 */
  int ns;
  int failed;                    /* the first rank that failed, or -1 */
  int suspect;                   /* a rank that exited with an error, before failed is decided, or -1 */
  double settle_at;              /* when suspect becomes failed; 0: none */
  double kill_at;                /* when stragglers get SIGKILL; 0: not stopping */
  bool stopping;                 /* the others were sent SIGTERM */
} sup;

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void write_all(int fd, struct iovec *iov, int n) {
  while (n > 0) {
    ssize_t k = writev(fd, iov, n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return; /* our own output is gone: nothing to tell it */
    while (n > 0 && (size_t)k >= iov->iov_len) {
      k -= (ssize_t)iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + k;
      iov->iov_len -= (size_t)k;
    }
  }
}

static bool json_stderr; /* fsLN_json_stderr */

void fsLN_json_stderr(bool on) { json_stderr = on; }

/* A rank's stderr line that is not a JSON diagnostic (a raw message, a
 * sanitizer's report), as one: the shape of interp/lang/diag.c's JSON lines
 * (docs/diagnostics.schema.json), severity note, rule "output". */
static void relay_as_json(int dest, int rank, const char *s, size_t n) {
  size_t cap = 6 * n + 256, k = 0;
  char *out = malloc(cap);
  if (!out) return;
  k += (size_t)snprintf(out, cap, "{\"version\":1,\"file\":null,\"line\":null,\"column\":null,"
                        "\"column_utf16\":null,\"end\":null,\"severity\":\"note\",\"rule\":\"output\","
                        "\"message\":\"");
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') { out[k++] = '\\'; out[k++] = (char)c; }
    else if (c < 0x20 || c == 0x7f || c >= 0x80) k += (size_t)snprintf(out + k, cap - k, "\\u%04x", c < 0x80 ? c : 0xfffd);
    else out[k++] = (char)c;
  }
  k += (size_t)snprintf(out + k, cap - k, "\",\"notes\":[],\"help\":null,\"fix\":[],\"rank\":%d}\n", rank);
  struct iovec iov[1] = {{out, k}};
  write_all(dest, iov, 1);
  free(out);
}

/* Write out the complete lines (all of it at EOF), each with its prefix; on
 * stderr under fsLN_json_stderr, each line a JSON object instead. */
static void relay(stream *st, bool eof) {
  size_t start = 0;
  char prefix[32];
  int pl = snprintf(prefix, sizeof prefix, "[rank %d] ", st->rank);
  for (size_t i = 0; i < st->len; i++) {
    if (st->buf[i] != '\n' && !(eof && i + 1 == st->len)) continue;
    bool nl = st->buf[i] == '\n';
    size_t n = i + (nl ? 0 : 1) - start;
    if (json_stderr && st->dest == 2 && !(n > 0 && st->buf[start] == '{' && st->buf[start + n - 1] == '}')) {
      relay_as_json(st->dest, st->rank, st->buf + start, n);
    } else if (json_stderr && st->dest == 2) { /* a rank's diagnostic, "rank" in it */
      struct iovec iov[2] = {{st->buf + start, n}, {"\n", 1}};
      write_all(st->dest, iov, 2);
    } else {
      struct iovec iov[3] = {{prefix, (size_t)pl}, {st->buf + start, i + 1 - start}, {"\n", 1}};
      write_all(st->dest, iov, nl ? 2 : 3);
    }
    start = i + 1;
  }
  memmove(st->buf, st->buf + start, st->len - start);
  st->len -= start;
}

/* 0: read some; 1: the stream ended; 2: nothing there now. */
static int pump(stream *st) {
  if (st->cap - st->len < 4096) {
    char *b = realloc(st->buf, st->cap * 2 + 4096);
    if (!b) return 2; /* try again next tick */
    st->buf = b;
    st->cap = st->cap * 2 + 4096;
  }
  ssize_t k = read(st->fd, st->buf + st->len, st->cap - st->len);
  if (k < 0 && errno == EINTR) return 0;
  if (k < 0 && errno == EAGAIN) return 2;
  if (k > 0) {
    st->len += (size_t)k;
    relay(st, st->len > LINE_MAX_BYTES); /* a runaway line is cut, not hoarded */
    return 0;
  }
  relay(st, true);
  close(st->fd);
  st->fd = -1;
  return 1;
}

static void stop_all(sup *s, int sig) {
  for (int r = 0; r < s->n; r++)
    if (!s->ended[r]) kill(s->pid[r], sig);
}

/* Which rank failed first.  A rank killed by a signal is the cause; a rank
 * that exited with an error may only be reporting that another died (its
 * collective saw the peer vanish before the supervisor reaped the peer), so
 * such a failure waits SETTLE seconds for a signalled rank to show before it
 * is taken, and only then are the others stopped. */
static void reap(sup *s) {
  for (int r = 0; r < s->n; r++) {
    if (s->ended[r] || waitpid(s->pid[r], &s->status[r], WNOHANG) != s->pid[r]) continue;
    s->ended[r] = true;
    int st = s->status[r];
    if ((WIFEXITED(st) && WEXITSTATUS(st) == 0) || s->failed >= 0) continue;
    if (WIFSIGNALED(st)) s->failed = r;
    else if (s->suspect < 0) {
      s->suspect = r;
      s->settle_at = now() + SETTLE;
    }
  }
  if (s->failed < 0 && s->suspect >= 0 && now() >= s->settle_at) s->failed = s->suspect;
  if (s->failed < 0 || s->stopping) return;
  s->stopping = true;
  stop_all(s, SIGTERM);
  s->kill_at = now() + GRACE;
}

static int outcome(sup *s) {
  int r = s->failed >= 0 ? s->failed : s->suspect; /* every rank ended before suspect settled */
  if (r < 0) return 0;
  int st = s->status[r];
  if (WIFSIGNALED(st))
    fsT_seterr("rank %d (pid %d) was killed by signal %d (%s); the other ranks were stopped", s->base + r,
                (int)s->pid[r], WTERMSIG(st), strsignal(WTERMSIG(st)));
  else
    fsT_seterr("rank %d (pid %d) exited with status %d; the other ranks were stopped", s->base + r,
                (int)s->pid[r], WEXITSTATUS(st));
  return WIFEXITED(st) && WEXITSTATUS(st) == 1 ? 1 : 3;
}

static int supervise(sup *s) {
  struct sigaction sa = {.sa_handler = on_signal}, old[3];
  const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
  stop_signal = 0;
  int running = s->n, forwarded = 0;
  while (running > 0) {
    struct pollfd p[2 * FSCC_MAX_WORLD];
    int np = 0, map[2 * FSCC_MAX_WORLD];
    for (int i = 0; i < s->ns; i++)
      if (s->s[i].fd >= 0) {
        p[np] = (struct pollfd){s->s[i].fd, POLLIN, 0};
        map[np++] = i;
      }
    if (poll(p, (nfds_t)np, TICK_MS) > 0)
      for (int i = 0; i < np; i++)
        if (p[i].revents) pump(&s->s[map[i]]);
    if (stop_signal && !forwarded) {
      forwarded = stop_signal;
      stop_all(s, stop_signal);
    }
    reap(s);
    if (s->kill_at > 0 && now() > s->kill_at) {
      stop_all(s, SIGKILL);
      s->kill_at = 0;
    }
    running = 0;
    for (int r = 0; r < s->n; r++) running += !s->ended[r];
  }
  /* the ranks are gone: what they wrote is in the pipes; take it all */
  for (int i = 0; i < s->ns; i++) {
    while (s->s[i].fd >= 0 && !pump(&s->s[i])) {}
    if (s->s[i].fd >= 0) { /* held open by someone else: keep what came */
      relay(&s->s[i], true);
      close(s->s[i].fd);
    }
  }
  for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
  for (int i = 0; i < s->ns; i++) free(s->s[i].buf);
  fsCC_shm_sweep((long)s->pid[0]);
  return outcome(s);
}

static void export_env(const fsLN_env *e) {
  char v[32];
  const struct { const char *name; int value; } vars[] = {
      {"RANK", e->rank},
      {"WORLD_SIZE", e->world_size},
      {"LOCAL_RANK", e->local_rank},
      {"LOCAL_WORLD_SIZE", e->local_world_size},
      {"NODE_RANK", e->node_rank},
      {"GROUP_RANK", e->node_rank},
      {"MASTER_PORT", e->master_port},
  };
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    snprintf(v, sizeof v, "%d", vars[i].value);
    setenv(vars[i].name, v, 1);
  }
  setenv("MASTER_ADDR", e->master_addr, 1);
}

/* In the child: the rank's output, environment and rendezvous socket. */
static void become_rank(sup *s, const int *wr, int r, pid_t parent, int lfd, fsLN_env *env) {
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* the supervisor's death ends the ranks */
  if (getppid() != parent) _exit(3);
  if (r > 0) {
    dup2(wr[2 * (r - 1)], 1);
    dup2(wr[2 * (r - 1) + 1], 2);
  }
  /* whole lines, as printed: rank 0's and the relayed ones never split */
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 0; i < s->ns; i++) {
    close(s->s[i].fd);
    close(wr[i]);
  }
  env->local_rank = r;
  env->rank = s->base + r;
  free(s);
  env->spawned = true;
  env->listen_fd = r == 0 ? lfd : -1;
  if (r && lfd >= 0) close(lfd);
  export_env(env);
}

static void close_pipes(sup *s, const int *wr) {
  for (int i = 0; i < s->ns; i++) {
    close(s->s[i].fd);
    close(wr[i]);
  }
}

/* Forks this node's n ranks.  Node 0 binds the rendezvous socket first (at
 * env's address and port; port 0: the kernel picks), so that no rank of any
 * node can find the port taken; rank 0 inherits it. */
static fsLN_role spawn(int n, fsLN_env *env, int *status) {
  int port = env->master_port, lfd = -1, wr[2 * FSCC_MAX_WORLD];
  if (env->node_rank == 0 && (lfd = fsLN_rdzv_listen(env->master_addr, &port)) < 0) return FSLN_ERROR;
  env->master_port = port;
  sup *s = calloc(1, sizeof *s);
  if (!s) {
    fsT_seterr("launch: out of memory");
    if (lfd >= 0) close(lfd);
    return FSLN_ERROR;
  }
  s->n = n;
  s->base = env->node_rank * n;
  s->failed = s->suspect = -1;
  for (int r = 1; r < n; r++)
    for (int k = 0; k < 2; k++) {
      int p[2];
      if (pipe2(p, O_CLOEXEC) < 0) {
        fsT_seterr("launch: pipe: %s", strerror(errno));
        close_pipes(s, wr);
        free(s);
        if (lfd >= 0) close(lfd);
        return FSLN_ERROR;
      }
      s->s[s->ns] = (stream){.fd = p[0], .dest = 1 + k, .rank = s->base + r};
      wr[s->ns++] = p[1];
    }
  fflush(NULL); /* or every rank repeats what the parent had buffered */
  pid_t parent = getpid();
  for (int r = 0; r < n; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      become_rank(s, wr, r, parent, lfd, env);
      return FSLN_RANK;
    }
    if (pid < 0) {
      fsT_seterr("launch: cannot start rank %d: %s", r, strerror(errno));
      s->n = r;
      stop_all(s, SIGKILL);
      for (int q = 0; q < r; q++) waitpid(s->pid[q], NULL, 0);
      close_pipes(s, wr);
      free(s);
      if (lfd >= 0) close(lfd);
      return FSLN_ERROR;
    }
    s->pid[r] = pid;
  }
  if (lfd >= 0) close(lfd);
  for (int i = 0; i < s->ns; i++) {
    close(wr[i]);
    fcntl(s->s[i].fd, F_SETFL, O_NONBLOCK);
  }
  *status = supervise(s);
  free(s);
  return FSLN_SUPERVISOR;
}

int fsLN_node_env(int devices, int num_nodes, fsLN_env *env) {
  if (num_nodes < 1 || devices > FSCC_MAX_WORLD / num_nodes) {
    fsT_seterr("launch: num_nodes=%d x devices=%d is outside 1..%d ranks", num_nodes, devices, FSCC_MAX_WORLD);
    return -1;
  }
  *env = (fsLN_env){.world_size = devices * num_nodes, .local_world_size = devices, .listen_fd = -1};
  const char *addr = getenv("MASTER_ADDR");
  /* one host: loopback, the port picked by the kernel (no race) */
  snprintf(env->master_addr, sizeof env->master_addr, "%s",
           num_nodes > 1 && addr && *addr ? addr : "127.0.0.1");
  if (num_nodes == 1) return 0;
  if (env_field("NODE_RANK", "GROUP_RANK", 0, &env->node_rank) < 0 ||
      check_range("NODE_RANK", env->node_rank, 0, num_nodes - 1) < 0)
    return -1;
  int f = env_int("MASTER_PORT", &env->master_port);
  if (f == 0)
    fsT_seterr("launch: num_nodes=%d: start this script on every node with the same MASTER_PORT "
               "(and MASTER_ADDR, node 0's address) and NODE_RANK=0..%d", num_nodes, num_nodes - 1);
  return f <= 0 || check_range("MASTER_PORT", env->master_port, 1, 65535) < 0 ? -1 : 0;
}

fsLN_role fsLN_launch(int devices, int num_nodes, fsLN_env *env, int *status) {
  int d = fsLN_detect(env);
  if (d < 0) return FSLN_ERROR;
  if (d > 0) {
    if (devices > 0 && devices != env->local_world_size) {
      fsT_seterr("launch: the launcher started %d process(es) on this node (LOCAL_WORLD_SIZE) "
                  "but the script asks for devices=%d", env->local_world_size, devices);
      return FSLN_ERROR;
    }
    return FSLN_RANK;
  }
  if (devices < 1 || devices > FSCC_MAX_WORLD) {
    fsT_seterr("launch: devices=%d is outside 1..%d", devices, FSCC_MAX_WORLD);
    return FSLN_ERROR;
  }
  if (fsLN_node_env(devices, num_nodes, env) < 0) return FSLN_ERROR;
  return env->world_size == 1 ? FSLN_RANK : spawn(devices, env, status);
}

fsCC_comm *fsLN_connect(fsLN_env *env, fsCC_transport t, const fsCC_config *cfg) {
  int lfd = env->listen_fd;
  env->listen_fd = -1;
  if (t == FSCC_SHM && env->local_world_size != env->world_size) {
    fsT_seterr("the shm transport joins the ranks of one host, but this run spans %d nodes",
                env->world_size / env->local_world_size);
    if (lfd >= 0) close(lfd);
    return NULL;
  }
  fsCC_config k = *cfg;
  k.local_rank = env->local_rank;
  k.local_world = env->local_world_size;
  fsLN_rdzv *rv = fsLN_rdzv_open(env->master_addr, env->master_port, env->rank, env->world_size,
                                 cfg->timeout, lfd);
  if (!rv) return NULL;
  fsCC_comm *c = fsCC_connect(rv, t, &k);
  fsLN_rdzv_close(rv);
  return c;
}
