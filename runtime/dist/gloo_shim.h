/* gloo_shim.h -- the C face of gloo_shim.cc, the one C++ file: Gloo's TCP
 * context and collectives behind plain functions.
 *
 * gloo_shim.cc is built into its own loadable module (fabricscript-gloo.so,
 * linked with libgloo and libstdc++), which comm_gloo.c dlopens on first use:
 * linked into the program, those libraries would cost every start of
 * `fabricscript` about 10 ms.  The module knows nothing of tensors or fsCC_*:
 * it moves bytes, and reduces float32 or int64 elements; comm_gloo.c (the
 * other half) maps dtypes and ops onto it.  No C++ exception leaves the
 * module: each function catches and returns -1 (NULL) with the message in
 * err (FSCC_GLOO_ERR bytes). */
#ifndef FS_GLOO_SHIM_H
#define FS_GLOO_SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FSCC_GLOO_ERR 512

/* all (world * n bytes) = every rank's `mine` (n bytes), in rank order:
 * the rendezvous's allgather, through which the ranks swap addresses. */
typedef int (*fsCC_gloo_exchange)(void *arg, const void *mine, void *all, size_t n);

typedef enum fsCC_gloo_kind { FSCC_GLOO_F32, FSCC_GLOO_I64, FSCC_GLOO_F64 } fsCC_gloo_kind;
typedef enum fsCC_gloo_red { FSCC_GLOO_SUM, FSCC_GLOO_MAX, FSCC_GLOO_MIN } fsCC_gloo_red;

typedef struct fsCC_glooshim fsCC_glooshim;

/* Connects rank `rank` of `world` to every other rank: a TCP device bound to
 * host (an address of this machine) or to the interface iface when not
 * NULL, pairs swapped with one call of exchange.  Every rank calls exchange
 * exactly once, also when its device fails, so that no peer waits for it.
 * timeout_ms bounds the connection and every later collective. */
fsCC_glooshim *fsCC_glooshim_open(int rank, int world, const char *host, const char *iface,
                                  long timeout_ms, fsCC_gloo_exchange exchange, void *arg,
                                  char *err);
/* buf (count elements) = the reduction over ranks, in place. */
int fsCC_glooshim_all_reduce(fsCC_glooshim *g, void *buf, size_t count, fsCC_gloo_kind kind,
                             fsCC_gloo_red red, char *err);
/* buf holds world blocks of `bytes`; this rank's block is already in place. */
int fsCC_glooshim_all_gather(fsCC_glooshim *g, void *buf, size_t bytes, char *err);
int fsCC_glooshim_broadcast(fsCC_glooshim *g, void *buf, size_t bytes, int root, char *err);
int fsCC_glooshim_barrier(fsCC_glooshim *g, char *err);
void fsCC_glooshim_close(fsCC_glooshim *g);  /* NULL is a no-op */
/* The rank whose published pair address a failed call's message names (the
 * far end of the connection that broke), or -1. */
int fsCC_glooshim_owner(const fsCC_glooshim *g, const char *message);

#ifdef __cplusplus
}
#endif

#endif
