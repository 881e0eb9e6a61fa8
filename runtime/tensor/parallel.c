/* parallel.c -- the worker threads of the cpu kernels (blas.h): a kernel
 * cuts its work into parts and fsB_parallel runs them on these workers and
 * on the calling thread.  Users: the bfloat16 GEMM's packing and tiles
 * (gemm_bf16.c), the convolutions' images and the normalization's and
 * pooling's channels (cnn.c), the fused attention's (batch, head) pairs
 * (nn_typed.h, nn.c) and the bfloat16 activations' blocks (autograd.c).
 *
 * Invariant: a part runs as it would on the calling thread -- with the
 * caller's bfloat16-operand setting, and with OpenBLAS held to one thread
 * while parts run in parallel (the cores are already busy with parts) --
 * so a kernel whose parts write disjoint memory computes the same bits
 * whichever thread takes which part, and whatever the thread count. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "blas.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "tensor.h"

/* OpenBLAS's thread count (OPENBLAS_NUM_THREADS, else the online CPUs), so
 * the kernels use the threads their GEMMs would. */
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static int nthreads;

static void read_threads(void) {
  const char *e = getenv("OPENBLAS_NUM_THREADS");
  long v = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
  nthreads = v < 1 ? 1 : v > FSB_MAX_THREADS ? FSB_MAX_THREADS : (int)v;
}

int fsB_threads(void) {
  pthread_once(&threads_once, read_threads);
  return nthreads;
}

/* Workers kept for the process, as OpenBLAS keeps its own: starting a
 * thread per call costs tens of microseconds, and kernels run thousands of
 * times an epoch.  One call at a time uses them (`busy`); a call from
 * another thread meanwhile, or from inside a part, runs its parts on its
 * own thread. */
static struct {
  pthread_mutex_t lock, busy;
  pthread_cond_t work, done;
  fsB_part_fn fn;
  void *ctx;
  bool bf16;
  int nparts, next, pending, workers;
  int failed;     /* the lowest part that failed, or nparts */
  char err[512];  /* its fsT_error */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, NULL, NULL, false, 0, 0, 0, 0, 0, ""};

/* Takes and runs parts until none is left; called and returns with the lock held. */
static void take_parts(int worker) {
  while (pool.next < pool.nparts) {
    int i = pool.next++;
    fsB_part_fn fn = pool.fn;
    void *ctx = pool.ctx;
    bool old = fsB_set_bf16_operands(pool.bf16);
    pthread_mutex_unlock(&pool.lock);
    int rc = fn(ctx, i, worker);
    fsB_set_bf16_operands(old);
    pthread_mutex_lock(&pool.lock);
    if (rc && i < pool.failed) {
      pool.failed = i;
      snprintf(pool.err, sizeof pool.err, "%s", fsT_error());
    }
    if (--pool.pending == 0) pthread_cond_signal(&pool.done);
  }
}

static void *pool_worker(void *arg) {
  int worker = (int)(intptr_t)arg;
  pthread_mutex_lock(&pool.lock);
  for (;;) {
    while (pool.next >= pool.nparts) pthread_cond_wait(&pool.work, &pool.lock);
    take_parts(worker);
  }
  return NULL;
}

/* A forked child (ranks started with fork, a script's launch) has none of
 * the workers: it starts its own. */
static void pool_after_fork(void) {
  pthread_mutex_init(&pool.lock, NULL);
  pthread_mutex_init(&pool.busy, NULL);
  pthread_cond_init(&pool.work, NULL);
  pthread_cond_init(&pool.done, NULL);
  pool.nparts = pool.next = pool.pending = pool.workers = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { pthread_atfork(NULL, NULL, pool_after_fork); }

static int run_here(int nparts, fsB_part_fn fn, void *ctx) {
  int rc = 0;
  char err[sizeof pool.err] = "";
  for (int i = 0; i < nparts; i++)
    if (fn(ctx, i, 0) && !rc) {
      rc = -1;
      snprintf(err, sizeof err, "%s", fsT_error());
    }
  if (rc) fsT_seterr("%s", err);
  return rc;
}

int fsB_parallel(int nparts, fsB_part_fn fn, void *ctx) {
  int threads = fsB_threads() < nparts ? fsB_threads() : nparts;
  if (threads < 2 || pthread_mutex_trylock(&pool.busy) != 0) return run_here(nparts, fn, ctx);
  pthread_once(&atfork_once, register_atfork);
  int blas_threads = fsB_set_blas_threads(1);
  pthread_mutex_lock(&pool.lock);
  while (pool.workers < threads - 1) {
    pthread_t tid;
    if (pthread_create(&tid, NULL, pool_worker, (void *)(intptr_t)(pool.workers + 1)) != 0) break;
    pthread_detach(tid);
    pool.workers++;
  }
  pool.fn = fn;
  pool.ctx = ctx;
  pool.bf16 = fsB_bf16_operands();
  pool.nparts = pool.pending = pool.failed = nparts;
  pool.next = 0;
  pthread_cond_broadcast(&pool.work);
  take_parts(0);
  while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.lock);
  int failed = pool.failed < nparts;
  if (failed) fsT_seterr("%s", pool.err);
  pool.nparts = 0;
  pthread_mutex_unlock(&pool.lock);
  if (blas_threads > 0) fsB_set_blas_threads(blas_threads);
  pthread_mutex_unlock(&pool.busy);
  return failed ? -1 : 0;
}
