/* A fork-join thread pool for intra-op parallelism. Kernels split an index range with
 * op_parallel_for (ops.h), which hands it to core_pool_run here. The range is cut into one
 * contiguous chunk per thread, and the calling thread and the workers claim chunks from a shared
 * counter: a worker that is slow to wake (asleep, or its CPU taken by another process) leaves
 * its chunk to whoever is free first instead of being waited for. On 2 vCPUs with a busy loop
 * beside (alternating old/new, medians): EfficientNet-B0 at 2 threads 14.1 -> 12.0 ms,
 * MobileNetV3-small 3.05 -> 1.73 ms (its 1-thread time: ~2.0); level on a quiet machine. A
 * 1-thread pool is exactly the serial loop.
 *
 * Waiting is spin-then-sleep: after a job a worker polls for the next one for CORE_POOL_SPIN_NS
 * before sleeping on a condition variable, and the caller polls for the workers' completion as long
 * before it sleeps. A model runs one node after another, each a job of tens of microseconds to
 * milliseconds; a futex wake-up per node costs ~10-50 us, which on a small model (MobileNetV2:
 * ~100 nodes in ~15 ms) was a tenth of the run. Bounding the spin keeps an idle session from
 * burning a core that another process on a small shared machine needs. */
#include "core.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#define CORE_POOL_SPIN_NS 100000
#define CORE_POOL_YIELD_NS 5000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Polls *flag while (*flag == value) == equal, for at most CORE_POOL_SPIN_NS, yielding the CPU
 * between polls after the first CORE_POOL_YIELD_NS. The yield is for a worker that the OS started
 * on the CPU of the thread it waits for (new threads start beside their parent, and two threads
 * that take turns to run look balanced to the scheduler): pure spinning there holds the CPU the
 * other needs for a whole time slice. MobileNetV2 at 2 threads ran its first 6-9 inferences in
 * 10-27 ms each, with the yield in 8.7-9.6 ms (one thread's speed) until the threads are apart and
 * it runs in 4.3-4.5 ms as before; on separate CPUs, with nothing else to run, the yield returns at
 * once. */
static void spin_while(const _Atomic uint64_t *flag, uint64_t value, bool equal) {
    uint64_t t0 = core_now_ns();
    for (unsigned i = 1; (atomic_load_explicit(flag, memory_order_acquire) == value) == equal;
         i++) {
        cpu_relax();
        if (!(i & 63)) {
            const uint64_t dt = core_now_ns() - t0;
            if (dt > CORE_POOL_SPIN_NS) return;
            if (dt > CORE_POOL_YIELD_NS) sched_yield();
        }
    }
}

struct core_pool {
    int threads;
    pthread_t *workers;
    pthread_mutex_t mu; /* for sleeping only: the wake and done condition variables */
    pthread_cond_t wake, done;
    /* The current job's fields, published as a seqlock: seq is odd while the caller writes them
     * and 2 * job + 2 once job's are complete, so a worker reads them without a lock and keeps
     * them only if seq held still. With a lock, a worker coming out of its spin and the caller
     * publishing the next job met on it, and a small job became a trip through the kernel. */
    _Atomic uint64_t seq;
    _Atomic(core_range_fn) fn;
    _Atomic(void *) arg;
    _Atomic size_t n;
    _Atomic int chunks;      /* number of chunks the job is split into (<= threads) */
    _Atomic int joiners;     /* workers 1..joiners-1 may take part (the job's thread limit) */
    _Atomic uint64_t job_id; /* incremented per job so workers know a new job arrived */
    /* The next chunk to claim, tagged with its job: the job number in the high 32 bits, the
     * chunk in the low ones. A worker that read an old job's fields and got there late finds
     * another tag and claims nothing, so a new job never waits for late workers to leave. */
    _Atomic uint64_t claim;
    _Atomic int finished; /* chunks of the current job done */
    _Atomic int sleepers; /* workers waiting on wake (the caller signals only if there are) */
    _Atomic bool stop;    /* job_id is bumped with it so spinners notice */
};

static void spin_until_finished(core_pool *p, int chunks);

typedef struct {
    core_pool *pool;
    int index; /* 1..threads-1 */
} worker_arg;

static void chunk_range(size_t n, int chunks, int i, size_t *b, size_t *e) {
    size_t base = n / (size_t)chunks, rem = n % (size_t)chunks;
    *b = (size_t)i * base + ((size_t)i < rem ? (size_t)i : rem);
    *e = *b + base + ((size_t)i < rem ? 1 : 0);
}

/* Polls until all chunks of the job are done, for at most CORE_POOL_SPIN_NS (as spin_while). */
static void spin_until_finished(core_pool *p, int chunks) {
    uint64_t t0 = core_now_ns();
    for (unsigned i = 1; atomic_load_explicit(&p->finished, memory_order_acquire) < chunks; i++) {
        cpu_relax();
        if (!(i & 63)) {
            const uint64_t dt = core_now_ns() - t0;
            if (dt > CORE_POOL_SPIN_NS) return;
            if (dt > CORE_POOL_YIELD_NS) sched_yield();
        }
    }
}

/* Claims and runs chunks of the current job until none is left; returns after the last. The
 * thread that finishes the job's last chunk wakes the caller if it sleeps. */
static void run_chunks(core_pool *pool, uint64_t job, core_range_fn fn, void *arg, size_t n,
                       int chunks) {
    uint64_t v = atomic_load_explicit(&pool->claim, memory_order_acquire);
    for (;;) {
        if (v >> 32 != (job & 0xffffffffu) || (int)(v & 0xffffffffu) >= chunks) return;
        if (!atomic_compare_exchange_weak_explicit(&pool->claim, &v, v + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        const int c = (int)(v & 0xffffffffu);
        v++;
        size_t b, e;
        chunk_range(n, chunks, c, &b, &e);
        if (b < e) fn(arg, b, e);
        if (atomic_fetch_add_explicit(&pool->finished, 1, memory_order_acq_rel) + 1 == chunks) {
            /* Under the lock, so the caller cannot miss it between its check and its wait. */
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

static void *worker_main(void *p) {
    worker_arg *wa = p;
    core_pool *pool = wa->pool;
    int index = wa->index;
    free(wa);
    uint64_t seen = 0;
    for (;;) {
        spin_while(&pool->job_id, seen, true);
        const uint64_t id = atomic_load(&pool->job_id);
        if (id == seen) {
            /* Asleep until a job comes: sleepers is raised before job_id is checked again, and
             * the caller stores job_id before it reads sleepers (both sequentially consistent),
             * so either the caller sees a sleeper and wakes it or the check sees the job. */
            pthread_mutex_lock(&pool->mu);
            atomic_fetch_add(&pool->sleepers, 1);
            while (!atomic_load(&pool->stop) && atomic_load(&pool->job_id) == seen)
                pthread_cond_wait(&pool->wake, &pool->mu);
            atomic_fetch_sub(&pool->sleepers, 1);
            pthread_mutex_unlock(&pool->mu);
            continue;
        }
        if (atomic_load(&pool->stop)) return NULL;
        seen = id;
        const uint64_t s1 = atomic_load_explicit(&pool->seq, memory_order_acquire);
        if (s1 != 2 * id + 2) continue; /* a later job is being written: this one is over */
        core_range_fn fn = atomic_load_explicit(&pool->fn, memory_order_relaxed);
        void *arg = atomic_load_explicit(&pool->arg, memory_order_relaxed);
        const size_t n = atomic_load_explicit(&pool->n, memory_order_relaxed);
        const int chunks = atomic_load_explicit(&pool->chunks, memory_order_relaxed);
        const int joiners = atomic_load_explicit(&pool->joiners, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&pool->seq, memory_order_relaxed) != s1 || index >= joiners)
            continue;
        run_chunks(pool, id, fn, arg, n, chunks);
    }
}

anvil_status core_pool_create(int threads, core_pool **out) {
    *out = NULL;
    if (threads < 1) threads = 1;
    core_pool *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    p->threads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (threads > 1) {
        p->workers = core_calloc((size_t)threads - 1, sizeof(pthread_t));
        if (!p->workers) {
            core_pool_free(p);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
        for (int i = 1; i < threads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (wa) {
                wa->pool = p;
                wa->index = i;
            }
            if (!wa || pthread_create(&p->workers[i - 1], NULL, worker_main, wa) != 0) {
                free(wa);
                p->threads = i; /* only workers 1..i-1 exist */
                core_pool_free(p);
                return core_err(ANVIL_ERR_OUT_OF_MEMORY, "could not start thread %d of %d", i,
                                threads);
            }
        }
    }
    *out = p;
    return ANVIL_OK;
}

void core_pool_free(core_pool *p) {
    if (!p) return;
    if (p->workers) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, true);
        atomic_fetch_add(&p->job_id, 1);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i < p->threads; i++) pthread_join(p->workers[i - 1], NULL);
        free(p->workers);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}

int core_pool_threads(const core_pool *p) {
    return p ? p->threads : 1;
}

void core_pool_run(core_pool *p, size_t n, core_range_fn fn, void *arg) {
    core_pool_run_upto(p, 0, n, fn, arg);
}

void core_pool_run_upto(core_pool *p, int max_threads, size_t n, core_range_fn fn, void *arg) {
    if (n == 0) return;
    int threads = p ? p->threads : 1;
    if (max_threads > 0 && max_threads < threads) threads = max_threads;
    if (threads == 1 || n == 1) {
        fn(arg, 0, n);
        return;
    }
    int chunks = (size_t)threads < n ? threads : (int)n;
    /* One caller at a time (fn must not call back into the pool), so job_id is ours to bump. */
    const uint64_t job = atomic_load_explicit(&p->job_id, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->seq, 2 * job + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->chunks, chunks, memory_order_relaxed);
    atomic_store_explicit(&p->joiners, threads, memory_order_relaxed);
    atomic_store_explicit(&p->seq, 2 * job + 2, memory_order_release);
    atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (job & 0xffffffffu) << 32, memory_order_release);
    atomic_store(&p->job_id, job);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    /* The caller claims chunks like any worker: a chunk whose worker has not woken yet (asleep,
     * or its CPU taken by another process on a shared machine) runs here instead of being
     * waited for. */
    run_chunks(p, job, fn, arg, n, chunks);
    spin_until_finished(p, chunks);
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->finished) < chunks) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
