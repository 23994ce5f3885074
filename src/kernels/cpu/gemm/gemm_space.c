/* What the GEMM offers a tuner (see gemm.h): the candidate values of its blocking and tile
 * parameters, and the cache checks its rules share with the GEMM-based convolutions.
 *
 * The candidates are few on purpose. The tuner times the cross product, so each list keeps one
 * value per behaviour of the driver: KC values at or past K (or past an indirect A's segment,
 * whose blocks the driver evens out) run the same blocks, as do MC and NC values past M and N.
 * The steps are coarse (x4 for MC and NC, about x1.5 for KC) because the driver's speed is flat
 * near its optimum; the default (0) is timed besides them anyway. */
#include "gemm.h"

static int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

/* Appends v to the ascending list vals[0..*n) unless it is there (or the list is full). */
static void add_sorted(int32_t *vals, int *n, int cap, int64_t v) {
    if (v <= 0 || v > INT32_MAX) return;
    int i = 0;
    while (i < *n && vals[i] < v) i++;
    if ((i < *n && vals[i] == v) || *n >= cap) return;
    for (int j = *n; j > i; j--) vals[j] = vals[j - 1];
    vals[i] = (int32_t)v;
    (*n)++;
}

/* The depth of the blocks KC = c gives: the driver cuts a segment into ceil(seg / c) equal
 * pieces (gemm_kc_max), and otherwise takes c as it is, clipped to K. */
static int64_t kc_effect(int64_t kdim, int64_t a_seg, int64_t c) {
    gemm_blocking b = {0, c < kdim ? c : kdim, 0};
    return gemm_kc_max(&b, kdim, a_seg);
}

int gemm_kc_values(int64_t kdim, int64_t a_seg, int32_t *vals, int cap) {
    static const int64_t cand[] = {128, 256, 384, 512, 768, 1024, 1536, 2048};
    int n = 0;
    if (kdim <= 0) kdim = 1;
    int64_t seen[sizeof cand / sizeof *cand + 1];
    int n_seen = 0;
    /* K itself (or the segment) is the one value that stands for all those past it */
    const int64_t whole = a_seg > 0 && a_seg < kdim ? a_seg : kdim;
    for (size_t i = 0; i <= sizeof cand / sizeof *cand && n < cap; i++) {
        const int64_t c = i < sizeof cand / sizeof *cand && cand[i] < whole ? cand[i] : whole;
        const int64_t e = kc_effect(kdim, a_seg, c);
        bool dup = false;
        for (int j = 0; j < n_seen; j++) dup |= seen[j] == e;
        if (dup) continue;
        seen[n_seen++] = e;
        add_sorted(vals, &n, cap, c);
        if (c == whole) break;
    }
    return n;
}

/* Multiples of unit in `steps`, the default's cap `big` and `part`, clipped to dim rounded up to
 * whole units. */
static int block_values(int64_t unit, int64_t dim, const int64_t *steps, int n_steps, int64_t big,
                        int64_t part, int32_t *vals, int cap) {
    const int64_t all = round_up(dim > 0 ? dim : 1, unit);
    int n = 0;
    for (int i = 0; i < n_steps; i++)
        add_sorted(vals, &n, cap, steps[i] * unit < all ? steps[i] * unit : all);
    if (big > 0) add_sorted(vals, &n, cap, big < all ? big : all);
    if (part > 0)
        add_sorted(vals, &n, cap, round_up(part, unit) < all ? round_up(part, unit) : all);
    return n;
}

int gemm_mc_values(const gemm_kernel *k, int64_t m, int64_t part, int32_t *vals, int cap) {
    static const int64_t steps[] = {4, 16, 64};
    /* and the default's 960 rows, for the long-MC end that repacks B least */
    return block_values(k->mr, m, steps, 3, 960 / k->mr * k->mr, part, vals, cap);
}

int gemm_nc_values(const gemm_kernel *k, int64_t n, int64_t part, int32_t *vals, int cap) {
    static const int64_t steps[] = {1, 4, 16};
    return block_values(k->nr, n, steps, 3, 0, part, vals, cap);
}

static int tile_count(void) {
    int n = 0;
    while (gemm_kernels[n]) n++;
    return n;
}

const gemm_kernel *gemm_kernel_of_param(int32_t v, const core_hw *hw) {
    if (v <= 0 || v > tile_count()) return NULL;
    const gemm_kernel *k = gemm_kernels[v - 1];
    return gemm_kernel_usable(k, hw) ? k : NULL;
}

int gemm_tile_values(const core_hw *hw, int32_t *vals, int cap) {
    int n = 0;
    for (int i = 0; gemm_kernels[i] && n < cap; i++)
        if (gemm_kernel_usable(gemm_kernels[i], hw)) vals[n++] = i + 1;
    return n;
}

const char *gemm_tile_label(int32_t v) {
    return v > 0 && v <= tile_count() ? gemm_kernels[v - 1]->name : NULL;
}

size_t gemm_l1_bytes(const core_hw *hw) {
    return hw->l1d_bytes ? hw->l1d_bytes : (size_t)32 << 10;
}

size_t gemm_l2_bytes(const core_hw *hw) {
    return hw->l2_bytes ? hw->l2_bytes : (size_t)1 << 20;
}

size_t gemm_l3_bytes(const core_hw *hw) {
    if (hw->l3_bytes) return hw->l3_bytes;
    return ((size_t)2 << 20) * (size_t)(hw->physical_cores > 0 ? hw->physical_cores : 1);
}

/* The micro-kernel reads its A micro-panel once per B panel of the block (NC / NR times): if it
 * does not stay in L1 every one of those reads comes from L2. The whole L1 is the limit here,
 * where the default takes three quarters (B's micro-panels stream through the rest): values
 * between the two are worth timing, values past it are not. */
bool gemm_a_panel_fits_l1(const gemm_kernel *k, int64_t kc_max, const core_hw *hw) {
    return (size_t)k->mr * (size_t)gemm_slots(k, kc_max) * sizeof(float) <= gemm_l1_bytes(hw);
}
