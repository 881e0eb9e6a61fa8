/* rendezvous.h -- a small TCP meeting point at MASTER_ADDR:MASTER_PORT.
 *
 * Rank 0 listens; every other rank connects (retrying until the timeout) and
 * says who it is.  fsLN_rdzv_open returns once all `world` ranks have joined,
 * so opening is itself a barrier.  The connections stay open: they carry
 * small blobs (the shm segment name, the NCCL unique id) and barriers, and a
 * closed one tells a waiting rank that a peer died.  Every exchange goes
 * through rank 0 (a star) and is framed with a sequence number and a length,
 * so ranks that call different exchanges fail with an error, never garbage.
 * Errors: -1 / NULL and fsT_error() (comm.h). */
#ifndef FS_RENDEZVOUS_H
#define FS_RENDEZVOUS_H

#include <stddef.h>

typedef struct fsLN_rdzv fsLN_rdzv;

/* A listening socket on addr:*port (0: the kernel picks; *port gets it), for a
 * launcher that must know the port before rank 0 exists.  -1 on failure. */
int fsLN_rdzv_listen(const char *addr, int *port);

/* Join the rendezvous.  Rank 0 listens on addr:port itself, or on listen_fd
 * when it is >= 0 (from fsLN_rdzv_listen; the rendezvous takes it over and
 * closes it).  timeout (seconds; <= 0: fsCC_timeout) bounds the join and
 * every later exchange. */
fsLN_rdzv *fsLN_rdzv_open(const char *addr, int port, int rank, int world, double timeout,
                          int listen_fd);
int fsLN_rdzv_rank(const fsLN_rdzv *rv);
int fsLN_rdzv_world(const fsLN_rdzv *rv);

/* This host's numeric address as the other ranks reach it: the local end of
 * the connection to rank 0 (rank 0: of one from rank 1); "127.0.0.1" in a
 * world of one.  What a transport binds its own sockets to (gloo). */
void fsLN_rdzv_local_addr(const fsLN_rdzv *rv, char *buf, size_t n);

/* all (world * n bytes) = every rank's `mine` (n bytes), in rank order. */
int fsLN_rdzv_allgather(fsLN_rdzv *rv, const void *mine, void *all, size_t n);
/* blob (n bytes) on every rank = rank 0's blob. */
int fsLN_rdzv_broadcast(fsLN_rdzv *rv, void *blob, size_t n);
int fsLN_rdzv_barrier(fsLN_rdzv *rv);
void fsLN_rdzv_close(fsLN_rdzv *rv);   /* NULL is a no-op */

#endif
