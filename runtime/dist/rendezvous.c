/* rendezvous.c -- star-shaped TCP rendezvous; every socket is non-blocking
 * and every send, receive, accept and connect waits with poll() against one
 * deadline, so a silent or dead peer becomes an error, never a hang.
 *
 * Wire format: a frame is a 16-byte header (magic, sequence number, payload
 * length; big-endian) and the payload.  Joining: a rank sends frame 0 with
 * (rank, world); rank 0 answers every rank with an empty frame 0 once all
 * have joined.  Exchange k is frame k both ways. */
#define _GNU_SOURCE
#include "config.h"
#include "rendezvous.h"
#include "comm.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RV_MAGIC 0x46535256u /* "FSRV" */
#define HELLO_WAIT 5.0       /* seconds a connecting stranger may stay silent */

struct fsLN_rdzv {
  int rank, world;
  double timeout;
  uint32_t seq;
  int fd[FSCC_MAX_WORLD]; /* rank 0: fd[r] to rank r; others: fd[0] to rank 0 */
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wait for `ev` on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short ev, double deadline) {
  for (;;) {
    double left = deadline - now();
    if (left <= 0) return 0;
    struct pollfd p = {fd, ev, 0};
    int r = poll(&p, 1, left > 1e6 ? 1000000000 : (int)(left * 1000) + 1);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

static int nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Move n bytes; `who` names the peer in errors. */
static int xfer(int fd, void *buf, size_t n, bool out, double deadline, const char *who) {
  unsigned char *p = buf;
  while (n) {
    ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k == 0 || errno == ECONNRESET || errno == EPIPE) {
      fsT_seterr("rendezvous: %s closed the connection (it exited or crashed)", who);
      return -1;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      fsT_seterr("rendezvous: %s: %s", who, strerror(errno));
      return -1;
    }
    int w = wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
    if (w <= 0) {
      fsT_seterr("rendezvous: timed out waiting for %s", who);
      return -1;
    }
  }
  return 0;
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int send_frame(int fd, uint32_t seq, const void *buf, size_t n, double deadline,
                      const char *who) {
  unsigned char h[16];
  put32(h, RV_MAGIC);
  put32(h + 4, seq);
  put32(h + 8, (uint32_t)((uint64_t)n >> 32));
  put32(h + 12, (uint32_t)n);
  if (xfer(fd, h, sizeof h, true, deadline, who) < 0) return -1;
  return n ? xfer(fd, (void *)buf, n, true, deadline, who) : 0;
}

/* Receive frame `seq` of exactly n bytes. */
static int recv_frame(int fd, uint32_t seq, void *buf, size_t n, double deadline, const char *who) {
  unsigned char h[16];
  if (xfer(fd, h, sizeof h, false, deadline, who) < 0) return -1;
  uint64_t len = (uint64_t)get32(h + 8) << 32 | get32(h + 12);
  if (get32(h) != RV_MAGIC) {
    fsT_seterr("rendezvous: %s does not speak the fabricscript rendezvous protocol", who);
    return -1;
  }
  if (get32(h + 4) != seq || len != n) {
    fsT_seterr("rendezvous: %s sent exchange #%u of %llu bytes where #%u of %zu was expected "
                "(ranks disagree on the calls)", who, get32(h + 4), (unsigned long long)len, seq, n);
    return -1;
  }
  return n ? xfer(fd, buf, n, false, deadline, who) : 0;
}

static struct addrinfo *resolve(const char *addr, int port, bool passive) {
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = passive ? AI_PASSIVE : 0}, *ai;
  int rc = getaddrinfo(addr, ps, &hints, &ai);
  if (rc) {
    fsT_seterr("rendezvous: cannot resolve MASTER_ADDR %s: %s", addr, gai_strerror(rc));
    return NULL;
  }
  return ai;
}

int fsLN_rdzv_listen(const char *addr, int *port) {
  struct addrinfo *ai = resolve(addr, *port, true);
  if (!ai) return -1;
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0), one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, FSCC_MAX_WORLD) < 0 ||
      nonblocking(fd) < 0) {
    fsT_seterr("rendezvous: cannot listen on %s:%d: %s", addr, *port, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    return -1;
  }
  freeaddrinfo(ai);
  struct sockaddr_storage sa;
  socklen_t len = sizeof sa;
  getsockname(fd, (struct sockaddr *)&sa, &len);
  *port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                         : ((struct sockaddr_in *)&sa)->sin_port);
  return fd;
}

/* Rank 0: accept until every rank has said hello; strangers are dropped. */
static int accept_all(fsLN_rdzv *rv, int lfd, const char *addr, int port, double deadline) {
  for (int joined = 1; joined < rv->world;) {
    if (wait_fd(lfd, POLLIN, deadline) <= 0) {
      char who[256] = "";
      size_t k = 0;
      for (int r = 1; r < rv->world && k + 16 < sizeof who; r++)
        if (rv->fd[r] < 0) k += (size_t)snprintf(who + k, sizeof who - k, "%s%d", k ? ", " : "", r);
      fsT_seterr("rendezvous: timed out after %g s on %s:%d waiting for rank(s) %s to join",
                  rv->timeout, addr, port, who);
      return -1;
    }
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) continue;
    unsigned char hello[8];
    double hd = now() + HELLO_WAIT < deadline ? now() + HELLO_WAIT : deadline;
    if (recv_frame(fd, 0, hello, sizeof hello, hd, "a connecting process") < 0) {
      close(fd);
      continue;
    }
    int r = (int)get32(hello), w = (int)get32(hello + 4);
    if (w != rv->world || r < 1 || r >= rv->world || rv->fd[r] >= 0) {
      if (w != rv->world)
        fsT_seterr("rendezvous: rank %d joined with WORLD_SIZE=%d, rank 0 has %d", r, w, rv->world);
      else
        fsT_seterr("rendezvous: a process joined as rank %d of %d, which is %s", r, w,
                    r < 1 || r >= w ? "not a joining rank" : "already taken");
      close(fd);
      return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    rv->fd[r] = fd;
    joined++;
  }
  for (int r = 1; r < rv->world; r++) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", r);
    if (send_frame(rv->fd[r], 0, NULL, 0, deadline, who) < 0) return -1;
  }
  return 0;
}

/* Other ranks: connect (rank 0 may not listen yet: retry), say hello, wait. */
static int join(fsLN_rdzv *rv, const char *addr, int port, double deadline) {
  struct addrinfo *ai = resolve(addr, port, false);
  if (!ai) return -1;
  int fd = -1, err = 0;
  while (fd < 0) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) err = errno;
    else if (wait_fd(fd, POLLOUT, deadline) <= 0) err = ETIMEDOUT;
    else {
      socklen_t len = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (!err) break;
    close(fd);
    fd = -1;
    if (now() > deadline) break;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  freeaddrinfo(ai);
  if (fd < 0) {
    fsT_seterr("rendezvous: rank %d cannot reach rank 0 at %s:%d within %g s: %s", rv->rank,
                addr, port, rv->timeout, strerror(err ? err : errno));
    return -1;
  }
  rv->fd[0] = fd;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  unsigned char hello[8];
  put32(hello, (uint32_t)rv->rank);
  put32(hello + 4, (uint32_t)rv->world);
  if (send_frame(fd, 0, hello, sizeof hello, deadline, "rank 0") < 0) return -1;
  return recv_frame(fd, 0, NULL, 0, deadline, "rank 0");
}

fsLN_rdzv *fsLN_rdzv_open(const char *addr, int port, int rank, int world, double timeout,
                          int listen_fd) {
  if (world < 1 || world > FSCC_MAX_WORLD || rank < 0 || rank >= world) {
    fsT_seterr("rendezvous: rank %d of world %d is out of range (world 1..%d)", rank, world,
                FSCC_MAX_WORLD);
    if (listen_fd >= 0) close(listen_fd);
    return NULL;
  }
  fsLN_rdzv *rv = calloc(1, sizeof *rv);
  if (!rv) {
    fsT_seterr("rendezvous: out of memory");
    if (listen_fd >= 0) close(listen_fd);
    return NULL;
  }
  rv->rank = rank;
  rv->world = world;
  rv->timeout = fsCC_timeout(timeout);
  for (int r = 0; r < FSCC_MAX_WORLD; r++) rv->fd[r] = -1;
  double deadline = now() + rv->timeout;
  int rc = 0;
  if (rank > 0) rc = join(rv, addr, port, deadline);
  else if (world > 1) {
    int lfd = listen_fd >= 0 ? listen_fd : fsLN_rdzv_listen(addr, &port);
    listen_fd = -1;
    rc = lfd < 0 ? -1 : accept_all(rv, lfd, addr, port, deadline);
    if (lfd >= 0) close(lfd);
  }
  if (listen_fd >= 0) close(listen_fd);
  if (rc < 0) {
    fsLN_rdzv_close(rv);
    return NULL;
  }
  return rv;
}

int fsLN_rdzv_rank(const fsLN_rdzv *rv) { return rv->rank; }
int fsLN_rdzv_world(const fsLN_rdzv *rv) { return rv->world; }

/* One exchange: every rank sends `up` bytes of mine to rank 0, which lays
 * them out at out + r * up (its own first) and sends `down` bytes of out to
 * every rank. */
static int exchange(fsLN_rdzv *rv, const void *mine, size_t up, void *out, size_t down) {
  double deadline = now() + rv->timeout;
  uint32_t seq = ++rv->seq;
  char who[32];
  if (rv->rank) {
    return send_frame(rv->fd[0], seq, mine, up, deadline, "rank 0") < 0 ||
           recv_frame(rv->fd[0], seq, out, down, deadline, "rank 0") < 0 ? -1 : 0;
  }
  if (up) memcpy(out, mine, up);
  for (int r = 1; r < rv->world; r++) {
    snprintf(who, sizeof who, "rank %d", r);
    if (recv_frame(rv->fd[r], seq, (unsigned char *)out + (size_t)r * up, up, deadline, who) < 0)
      return -1;
  }
  for (int r = 1; r < rv->world; r++) {
    snprintf(who, sizeof who, "rank %d", r);
    if (send_frame(rv->fd[r], seq, out, down, deadline, who) < 0) return -1;
  }
  return 0;
}

void fsLN_rdzv_local_addr(const fsLN_rdzv *rv, char *buf, size_t n) {
  int fd = rv->world > 1 ? rv->fd[rv->rank ? 0 : 1] : -1;
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ||
      getnameinfo((struct sockaddr *)&ss, len, buf, (socklen_t)n, NULL, 0, NI_NUMERICHOST) != 0)
    snprintf(buf, n, "127.0.0.1");
}

int fsLN_rdzv_allgather(fsLN_rdzv *rv, const void *mine, void *all, size_t n) {
  return exchange(rv, mine, n, all, (size_t)rv->world * n);
}

int fsLN_rdzv_broadcast(fsLN_rdzv *rv, void *blob, size_t n) {
  return exchange(rv, NULL, 0, blob, n);
}

int fsLN_rdzv_barrier(fsLN_rdzv *rv) { return exchange(rv, NULL, 0, NULL, 0); }

void fsLN_rdzv_close(fsLN_rdzv *rv) {
  if (!rv) return;
  for (int r = 0; r < FSCC_MAX_WORLD; r++)
    if (rv->fd[r] >= 0) close(rv->fd[r]);
  free(rv);
}
