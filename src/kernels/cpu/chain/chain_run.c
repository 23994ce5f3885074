/* The chain family's run over a planned node (chain_state, chain.h): the cut of the output into
 * spans, the split across threads and the calls into the per-ISA tables. Shared by the runtime's
 * variants (chain_variants.c) and the libraries `anvil compile` emits, which copy this file: so
 * it uses only the shim-level API (op_ctx, op_parallel_for), neither the IR nor op_tensor. */
#include "chain.h"
#include "kernels/kernels.h"

/* Below this many elements a node runs on the calling thread: waking the pool costs more. */
#define CHAIN_PAR_MIN ((size_t)1 << 15)
/* Elements per parallel block. */
#define CHAIN_BLOCK ((size_t)4096)

typedef struct chain_job {
    const chain_state *s;
    const float *x;
    float *y;
    const float *const *data;
    size_t n;
} chain_job;

/* Elements [lo, hi) of the output: spans over which every used operand is one value or one
 * contiguous row (an expanded operand is copied into buf for its span). */
static void chain_range(const chain_job *j, size_t lo, size_t hi) {
    const chain_state *s = j->s;
    float buf[CHAIN_MAX_INPUTS][CHAIN_EXPAND];
    const float *opnd[CHAIN_MAX_INPUTS] = {0};
    size_t pos = lo;
    while (pos < hi) {
        size_t len = hi - pos;
        if (s->expand && len > CHAIN_EXPAND) len = CHAIN_EXPAND;
        for (int k = 1; k < s->n_in; k++) {
            const size_t c = s->c[k], inner = s->inner[k];
            switch (s->mode[k]) {
            case CHAIN_MODE_SCALAR:
                opnd[k] = j->data[k];
                break;
            case CHAIN_MODE_BLOCK: {
                const size_t q = pos / inner, left = (q + 1) * inner - pos;
                opnd[k] = j->data[k] + q % c;
                if (len > left) len = left;
                break;
            }
            case CHAIN_MODE_ROW: {
                const size_t at = pos % c;
                opnd[k] = j->data[k] + at;
                if (len > c - at) len = c - at;
                break;
            }
            default:
                break;
            }
        }
        for (int k = 1; k < s->n_in; k++) {
            if (s->mode[k] != CHAIN_MODE_EXPAND) continue;
            const size_t c = s->c[k], inner = s->inner[k];
            size_t at = (pos / inner) % c, run = pos % inner;
            for (size_t e = 0; e < len; e++) {
                buf[k][e] = j->data[k][at];
                if (++run == inner) {
                    run = 0;
                    if (++at == c) at = 0;
                }
            }
            opnd[k] = buf[k];
        }
        s->isa->span(&s->prog, j->y + pos, j->x + pos, len, opnd);
        pos += len;
    }
}

static void chain_chunk(void *arg, size_t begin, size_t end) {
    const chain_job *j = arg;
    const size_t lo = begin * CHAIN_BLOCK, hi = end * CHAIN_BLOCK < j->n ? end * CHAIN_BLOCK : j->n;
    chain_range(j, lo, hi);
}

void chain_exec(const chain_state *s, float *y, const float *x, size_t n, const float *const *data,
                op_ctx *ctx) {
    if (n == 0) return;
    chain_job j = {.s = s, .x = x, .y = y, .data = data, .n = n};
    const size_t blocks = (n + CHAIN_BLOCK - 1) / CHAIN_BLOCK;
    op_parallel_for(n >= CHAIN_PAR_MIN ? ctx : NULL, blocks, chain_chunk, &j);
}
