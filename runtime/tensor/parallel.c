/* parallel.c -- the worker threads of the cpu kernels (blas.h): a kernel
 * cuts its work into parts and fsB_parallel runs them on these workers and
 * on the calling thread.  Users: the bfloat16 GEMM's packing and tiles
 * (gemm_bf16.c), the convolutions' images and the normalization's and
 * pooling's channels (cnn.c), the fused attention's (batch, head) pairs
 * (nn_typed.h, nn.c), the bfloat16 activations' blocks (autograd.c) and
 * the elementwise ops, sums and optimizer updates (backend_cpu.c, nn.c).
 *
 * Invariant: a part runs as it would on the calling thread -- with the
 * caller's GEMM operand type (blas.h), and with OpenBLAS held to one thread
 * while parts run in parallel (the cores are already busy with parts) --
 * so a kernel whose parts write disjoint memory computes the same bits
 * whichever thread takes which part, and whatever the thread count. */
#define _POSIX_C_SOURCE 200809L /* sysconf, clock_gettime */
#include "blas.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
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
 * own thread.
 *
 * A call costs no system call when the threads are awake: the caller
 * publishes it in `work` (its generation and the parts not yet taken), the
 * threads take parts by compare-and-swap on `work` and count them done in
 * `pending`.  Between calls a worker, and the caller waiting for the last
 * part, spin for SPIN_NS and then sleep on a condition variable, which
 * the other side signals only when `sleepers` or `waiting` says someone
 * sleeps.  A worker stops spinning as soon as OpenBLAS starts a product
 * outside the parts (`rest`): OpenBLAS's own threads want the cores then.
 * The slow paths, errors and the OpenBLAS hold take `lock`.
 *
 * SPIN_NS: in a bf16-mixed Fashion-MNIST epoch at 2 threads 92% of the
 * calls come within 10 us of the previous one's end (the median 0.4 us),
 * and on a paravirtualized machine a futex wake and the switch to the
 * woken thread cost more than many parts.  Longer spins caught few more
 * calls and, with the cores shared with other processes, took their turns
 * (the epoch's median wall time 0.90 s at 50 us, 0.81 s at 10 us, at load
 * 2.5). */
#define SPIN_NS 10000

static struct {
  pthread_mutex_t lock, busy;
  pthread_cond_t work_cv, done_cv;
  /* generation << 32 | parts not yet taken; a part taken with the
   * generation its thread joined, so a late thread never takes a part of
   * the next call */
  _Atomic uint64_t work;
  atomic_int pending;   /* parts not yet done */
  atomic_int sleepers;  /* workers asleep (or about to be) on work_cv */
  atomic_bool waiting;  /* the caller asleep (or about to be) on done_cv */
  atomic_bool rest;     /* OpenBLAS runs a product with its threads: workers sleep */
  atomic_bool blas_held; /* a part held OpenBLAS to one thread */
  int blas_threads;      /* its count before, restored when the call ends */
  fsB_part_fn fn;        /* the call's, written before `work` publishes it */
  void *ctx;
  fs_dtype gemm; /* the caller's GEMM operand type (blas.h) */
  int nparts, workers;
  int failed;     /* the lowest part that failed, or nparts */
  char err[512];  /* its fsT_error */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .busy = PTHREAD_MUTEX_INITIALIZER,
          .work_cv = PTHREAD_COND_INITIALIZER, .done_cv = PTHREAD_COND_INITIALIZER};

/* this thread runs a part of a call in parallel (OpenBLAS is held there) */
static _Thread_local bool in_part;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins up to SPIN_NS for done(arg); whether it came. */
static bool spin_for(bool (*done)(const void *), const void *arg) {
  int64_t end = 0;
  for (unsigned i = 0;; i++) {
    if (done(arg)) return true;
    cpu_relax();
    if (i % 64 == 63) { /* the clock every 64 pauses: a few microseconds */
      int64_t t = now_ns();
      if (!end) end = t + SPIN_NS;
      else if (t >= end) return false;
    }
  }
}

/* seq_cst loads (plain loads on x86): with the stores and swaps on the
 * other side they make the sleepers/waiting handshakes below */
static bool gen_moved(const void *gen) {
  return (uint32_t)(atomic_load(&pool.work) >> 32) != *(const uint32_t *)gen;
}

static bool work_or_rest(const void *gen) { return atomic_load(&pool.rest) || gen_moved(gen); }

static bool all_done(const void *unused) {
  (void)unused;
  return atomic_load(&pool.pending) == 0;
}

/* A part of generation gen not yet taken, or -1.  After the swap the call
 * cannot end before this part is done, so its fields are the call's. */
static int take(uint32_t gen) {
  uint64_t w = atomic_load_explicit(&pool.work, memory_order_acquire);
  while ((uint32_t)(w >> 32) == gen && (uint32_t)w > 0)
    if (atomic_compare_exchange_weak_explicit(&pool.work, &w, w - 1, memory_order_acq_rel, memory_order_acquire))
      return pool.nparts - (int)(uint32_t)w;
  return -1;
}

/* Takes and runs the parts of generation gen until none is left. */
static void take_parts(uint32_t gen, int worker) {
  for (int i; (i = take(gen)) >= 0;) {
    fs_dtype old = fsB_set_gemm_operands(pool.gemm);
    int rc = pool.fn(pool.ctx, i, worker);
    fsB_set_gemm_operands(old);
    if (rc) {
      pthread_mutex_lock(&pool.lock);
      if (i < pool.failed) {
        pool.failed = i;
        snprintf(pool.err, sizeof pool.err, "%s", fsT_error());
      }
      pthread_mutex_unlock(&pool.lock);
    }
    /* the last part done wakes the caller if it sleeps (seq_cst: either it
     * sees pending at 0 or this sees waiting) */
    if (atomic_fetch_sub(&pool.pending, 1) == 1 && atomic_load(&pool.waiting)) {
      pthread_mutex_lock(&pool.lock);
      pthread_cond_signal(&pool.done_cv);
      pthread_mutex_unlock(&pool.lock);
    }
  }
}

static void *pool_worker(void *arg) {
  int worker = (int)(intptr_t)arg;
  in_part = true;
  uint32_t gen = (uint32_t)(atomic_load(&pool.work) >> 32);
  for (;;) {
    spin_for(work_or_rest, &gen);
    if (!gen_moved(&gen)) {
      pthread_mutex_lock(&pool.lock);
      atomic_fetch_add(&pool.sleepers, 1);
      while (!gen_moved(&gen)) pthread_cond_wait(&pool.work_cv, &pool.lock);
      atomic_fetch_sub(&pool.sleepers, 1);
      pthread_mutex_unlock(&pool.lock);
    }
    gen = (uint32_t)(atomic_load_explicit(&pool.work, memory_order_acquire) >> 32);
    take_parts(gen, worker);
  }
  return NULL;
}

/* A forked child (ranks started with fork, a script's launch) has none of
 * the workers: it starts its own. */
static void pool_after_fork(void) {
  pthread_mutex_init(&pool.lock, NULL);
  pthread_mutex_init(&pool.busy, NULL);
  pthread_cond_init(&pool.work_cv, NULL);
  pthread_cond_init(&pool.done_cv, NULL);
  atomic_store(&pool.pending, 0);
  atomic_store(&pool.sleepers, 0);
  atomic_store(&pool.waiting, false);
  atomic_store(&pool.blas_held, false);
  atomic_store(&pool.rest, false);
  pool.workers = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { pthread_atfork(NULL, NULL, pool_after_fork); }

void fsB_blas_starts(void) {
  if (!in_part) {
    if (!atomic_load_explicit(&pool.rest, memory_order_relaxed)) atomic_store(&pool.rest, true);
    return;
  }
  if (atomic_load_explicit(&pool.blas_held, memory_order_acquire)) return;
  pthread_mutex_lock(&pool.lock);
  if (!atomic_load(&pool.blas_held)) {
    pool.blas_threads = fsB_set_blas_threads(1);
    atomic_store(&pool.blas_held, true);
  }
  pthread_mutex_unlock(&pool.lock);
}

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
  while (pool.workers < threads - 1) {
    pthread_t tid;
    if (pthread_create(&tid, NULL, pool_worker, (void *)(intptr_t)(pool.workers + 1)) != 0) break;
    pthread_detach(tid);
    pool.workers++;
  }
  pool.fn = fn;
  pool.ctx = ctx;
  pool.gemm = fsB_gemm_operands();
  pool.nparts = pool.failed = nparts;
  atomic_store_explicit(&pool.pending, nparts, memory_order_relaxed);
  if (atomic_load_explicit(&pool.rest, memory_order_relaxed)) atomic_store(&pool.rest, false);
  uint32_t gen = (uint32_t)(atomic_load(&pool.work) >> 32) + 1;
  /* seq_cst: either a worker going to sleep sees the new generation or this sees it in sleepers */
  atomic_store(&pool.work, (uint64_t)gen << 32 | (uint32_t)nparts);
  if (atomic_load(&pool.sleepers)) {
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.work_cv);
    pthread_mutex_unlock(&pool.lock);
  }
  bool was_in_part = in_part;
  in_part = true;
  take_parts(gen, 0);
  in_part = was_in_part;
  if (!spin_for(all_done, NULL)) {
    pthread_mutex_lock(&pool.lock);
    atomic_store(&pool.waiting, true);
    while (!all_done(NULL)) pthread_cond_wait(&pool.done_cv, &pool.lock);
    atomic_store(&pool.waiting, false);
    pthread_mutex_unlock(&pool.lock);
  }
  int failed = pool.failed < nparts;
  if (failed) fsT_seterr("%s", pool.err);
  if (atomic_load(&pool.blas_held)) {
    if (pool.blas_threads > 0) fsB_set_blas_threads(pool.blas_threads);
    atomic_store(&pool.blas_held, false);
  }
  pthread_mutex_unlock(&pool.busy);
  return failed ? -1 : 0;
}
