/* A fork-join thread pool for intra-op parallelism. Kernels split an index range with
 * op_parallel_for; the calling thread takes the first chunk and workers the rest, so a 1-thread
 * pool is exactly the serial loop. Workers sleep on a condition variable between jobs: the
 * executor runs nodes back to back, and spinning would steal the cores the kernels need on a small
 * shared machine. */
#include "runtime.h"

#include <pthread.h>
#include <stdlib.h>

struct rt_pool {
    int threads;
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* current job */
    op_range_fn fn;
    void *arg;
    size_t n;
    int chunks;      /* number of chunks the job is split into (<= threads) */
    uint64_t job_id; /* incremented per job so workers know a new job arrived */
    int pending;     /* worker chunks not finished yet */
    bool stop;
};

typedef struct {
    rt_pool *pool;
    int index; /* 1..threads-1 */
} worker_arg;

static void chunk_range(size_t n, int chunks, int i, size_t *b, size_t *e) {
    size_t base = n / (size_t)chunks, rem = n % (size_t)chunks;
    *b = (size_t)i * base + ((size_t)i < rem ? (size_t)i : rem);
    *e = *b + base + ((size_t)i < rem ? 1 : 0);
}

static void *worker_main(void *p) {
    worker_arg *wa = p;
    rt_pool *pool = wa->pool;
    int index = wa->index;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->stop && pool->job_id == seen) pthread_cond_wait(&pool->wake, &pool->mu);
        if (pool->stop) break;
        seen = pool->job_id;
        if (index >= pool->chunks) continue;
        op_range_fn fn = pool->fn;
        void *arg = pool->arg;
        size_t b, e;
        chunk_range(pool->n, pool->chunks, index, &b, &e);
        pthread_mutex_unlock(&pool->mu);
        if (b < e) fn(arg, b, e);
        pthread_mutex_lock(&pool->mu);
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

anvil_status rt_pool_create(int threads, rt_pool **out) {
    *out = NULL;
    if (threads < 1) threads = 1;
    rt_pool *p = core_calloc(1, sizeof *p);
    if (!p) return ANVIL_ERR_OUT_OF_MEMORY;
    p->threads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (threads > 1) {
        p->workers = core_calloc((size_t)threads - 1, sizeof(pthread_t));
        if (!p->workers) {
            rt_pool_free(p);
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
                rt_pool_free(p);
                return core_err(ANVIL_ERR_OUT_OF_MEMORY, "could not start thread %d of %d", i,
                                threads);
            }
        }
    }
    *out = p;
    return ANVIL_OK;
}

void rt_pool_free(rt_pool *p) {
    if (!p) return;
    if (p->workers) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
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

int rt_pool_threads(const rt_pool *p) {
    return p ? p->threads : 1;
}

int op_ctx_threads(const op_ctx *ctx) {
    return ctx ? rt_pool_threads(ctx->pool) : 1;
}

void op_parallel_for(op_ctx *ctx, size_t n, op_range_fn fn, void *arg) {
    rt_pool *p = ctx ? ctx->pool : NULL;
    if (n == 0) return;
    if (!p || p->threads == 1 || n == 1) {
        fn(arg, 0, n);
        return;
    }
    int chunks = (size_t)p->threads < n ? p->threads : (int)n;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->chunks = chunks;
    p->pending = chunks - 1;
    p->job_id++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    size_t b, e;
    chunk_range(n, chunks, 0, &b, &e);
    fn(arg, b, e);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
