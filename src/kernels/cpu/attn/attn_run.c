/* The run-time half of the attention variants (attn.h): the jobs of one node split into one
 * contiguous range per thread, each with its own slice of the workspace. Consecutive jobs share a
 * (batch, head), so a thread's k and v stay in its cache across its query blocks. Called by
 * attn_variants.c's run and by the libraries `anvil compile` emits, so both compute the same; it
 * uses only what src/emit/shim offers. */
#include "attn.h"
#include "kernels/kernels.h"

#include <string.h>

typedef struct attn_run_job {
    const attn_state *s;
    const attn_prob *p;
    float *ws;
    size_t slots;
} attn_run_job;

static void attn_slot(void *arg, size_t begin, size_t end) {
    const attn_run_job *j = arg;
    const attn_state *s = j->s;
    const int64_t per_bh = s->qblocks, heads = s->p.g.heads;
    for (size_t slot = begin; slot < end; slot++) {
        float *ws = j->ws + slot * s->ws_floats;
        const int64_t lo = (int64_t)(slot * (size_t)s->jobs / j->slots);
        const int64_t hi = (int64_t)((slot + 1) * (size_t)s->jobs / j->slots);
        for (int64_t t = lo; t < hi; t++) {
            const int64_t bh = t / per_bh, qb = t % per_bh;
            if (qb < s->wide)
                s->isa->block(j->p, bh / heads, bh % heads, qb * s->isa->mb, ws);
            else
                s->isa->block_narrow(j->p, bh / heads, bh % heads,
                                     s->wide * s->isa->mb + (qb - s->wide) * s->isa->narrow, ws);
        }
    }
}

void attn_exec(const attn_state *s, const float *q, const float *k, const float *v,
               const float *mask, const bool *keep, float *o, size_t out_numel, float *ws,
               op_ctx *ctx) {
    if (s->jobs == 0) return;
    if (s->p.g.sk == 0) {
        memset(o, 0, out_numel * sizeof(float));
        return;
    }
    attn_prob p = s->p;
    p.q = q + p.g.off[0];
    p.k = k + p.g.off[1];
    p.v = v + p.g.off[2];
    p.mask = p.g.has_mask ? mask : NULL;
    p.keep = p.g.has_keep ? keep : NULL;
    p.o = o;
    size_t slots = (size_t)op_ctx_threads(ctx);
    if (slots > (size_t)s->threads) slots = (size_t)s->threads;
    if (slots > (size_t)s->jobs) slots = (size_t)s->jobs;
    attn_run_job j = {.s = s, .p = &p, .ws = ws, .slots = slots};
    op_parallel_for(slots > 1 ? ctx : NULL, slots, attn_slot, &j);
}
