/* cctest.h -- running a function as several forked ranks, for the
 * collectives, rendezvous and launcher tests.  A rank reports failure with
 * its exit status (cmocka's asserts cannot leave a child); CC_CHECK prints
 * the failed condition and the runtime's last error, and fails the rank. */
#ifndef FS_CCTEST_H
#define FS_CCTEST_H

#include <stdio.h>
#include "tensor.h" /* fsT_error */

#define CC_CHECK(cond)                                                             \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: rank check failed: %s (runtime error: \"%s\")\n",    \
              __FILE__, __LINE__, #cond, fsT_error());                            \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

typedef int (*cc_rank_fn)(int rank, int world, void *arg);

/* Runs fn(rank, world, arg) in `world` child processes and waits for all;
 * returns how many did not exit with status 0. */
int cc_fork_ranks(int world, cc_rank_fn fn, void *arg);
/* The same, each rank first joining a loopback rendezvous (timeout 60 s). */
typedef struct fsLN_rdzv fsLN_rdzv;
int cc_fork_rdzv(int world, int (*fn)(fsLN_rdzv *rv, void *arg), void *arg);
/* A name for a test's shm segment, unique to this process and call. */
void cc_shm_name(char *buf, size_t len);
/* A free loopback TCP port (bound, then released). */
int cc_free_port(void);

/* Values every rank can compute for any rank: element i of rank r's
 * buffer as float32 and int64, and n of them from element base in dtype dt
 * (F32, BF16 rounded from the float32 value, else I64) into buf. */
float cc_fval(int r, size_t i);
int64_t cc_ival(int r, size_t i);
double cc_dval(int r, size_t i);
void cc_fill(fs_dtype dt, int r, void *buf, size_t n, size_t base);

#endif
