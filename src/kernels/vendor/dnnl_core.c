/* oneDNN's loader, engine and the helpers of the dnnl_* variants (dnnl_impl.h says what each
 * does). */
#ifdef ANVIL_HAVE_DNNL

#include "dnnl_impl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* oneDNN is loaded with dlopen when the first dnnl_* node is prepared, not linked, for the sake
 * of OpenMP's idle threads. libgomp reads its wait policy once, when it is loaded, and by default
 * a worker spins for milliseconds after each parallel region (about 300k pause instructions) before
 * it sleeps. On a 2-core machine that took the second core from anvil's own pool for whatever ran
 * after a oneDNN convolution: Whisper's encoder at 2 threads ran its FFN GEMMs on one core in
 * about half the runs, 60-69 ms end to end, 48 ms with the policy passive (AMD Zen 4). So unless
 * the user set OMP_WAIT_POLICY or libgomp is already in the process, it is set to PASSIVE before
 * libgomp loads with oneDNN; an idle worker then sleeps at once and costs a futex wake per
 * region. The calls go through vendor_dnnl_lib, filled by dlsym. */

dk_lib_t vendor_dnnl_lib;

dnnl_engine_t vendor_dnnl_engine;
static dnnl_status_t dk_engine_status = dnnl_runtime_error;
static pthread_once_t dk_engine_once = PTHREAD_ONCE_INIT;

#ifdef ANVIL_DNNL_LINKED
/* Sanitizer builds link oneDNN and libgomp instead (cmake/vendor.cmake): LeakSanitizer's scan at
 * exit crashed ("Tracer caught signal 11") in every process whose libgomp threads came with a
 * dlopen'ed library (GCC 12). Their OpenMP waits by its default policy; speed is not their
 * point. */
extern void omp_set_num_threads(int n);
extern int omp_get_max_threads(void);

static bool lib_load(void) {
#define DNNL_ADDR(f) vendor_dnnl_lib.f = f;
    DNNL_FUNCS(DNNL_ADDR)
#undef DNNL_ADDR
    vendor_dnnl_lib.omp_set_num_threads = omp_set_num_threads;
    vendor_dnnl_lib.omp_get_max_threads = omp_get_max_threads;
    return true;
}
#else
static bool lib_load(void) {
    /* OMP_WAIT_POLICY is OpenMP's own variable (anvil's are read by src/api/env.c only) */
    void *gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (gomp)
        dlclose(gomp);
    else if (!getenv("OMP_WAIT_POLICY"))
        setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
    void *h = dlopen(ANVIL_DNNL_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(vendor_dnnl_lib.error, sizeof vendor_dnnl_lib.error, "%s", dlerror());
        return false;
    }
    const char *missing = NULL;
#define DNNL_SYM(f)                                                                                \
    if (!(*(void **)&vendor_dnnl_lib.f = dlsym(h, #f))) missing = #f;
    DNNL_FUNCS(DNNL_SYM)
#undef DNNL_SYM
    if (!(*(void **)&vendor_dnnl_lib.omp_set_num_threads = dlsym(h, "omp_set_num_threads")))
        missing = "omp_set_num_threads";
    if (!(*(void **)&vendor_dnnl_lib.omp_get_max_threads = dlsym(h, "omp_get_max_threads")))
        missing = "omp_get_max_threads";
    if (missing) {
        snprintf(vendor_dnnl_lib.error, sizeof vendor_dnnl_lib.error,
                 "%s lacks %s (oneDNN 2.x on OpenMP is needed)", ANVIL_DNNL_PATH, missing);
        return false;
    }
    return true;
}
#endif

/* The CPU vendor_dnnl_engine lives for the whole process (oneDNN engines are shared, thread-safe
 * handles).
 */
static void dk_engine_init(void) {
    if (lib_load())
        dk_engine_status = vendor_dnnl_lib.dnnl_engine_create(&vendor_dnnl_engine, dnnl_cpu, 0);
}

anvil_status vendor_dnnl_fail(const ir_node *n, const char *what, dnnl_status_t st) {
    if (st == dnnl_out_of_memory)
        return core_err(ANVIL_ERR_OUT_OF_MEMORY, "%s: oneDNN ran out of memory in %s",
                        ir_node_label(n), what);
    return core_err(ANVIL_ERR_UNSUPPORTED,
                    "%s: oneDNN failed in %s (dnnl_status %d); this node cannot run on a dnnl_* "
                    "variant, use another variant",
                    ir_node_label(n), what, (int)st);
}

/* A descriptor of `rank` dims laid out inside a dense row-major tensor of dims `full` (the same
 * rank): a channel slice of an NCHW tensor. */
dnnl_status_t vendor_dnnl_md_slice(dnnl_memory_desc_t *md, int rank, const int64_t *dims,
                                   const int64_t *full) {
    dnnl_dims_t d, s;
    int64_t step = 1;
    for (int i = rank - 1; i >= 0; i--) {
        d[i] = dims[i];
        s[i] = step;
        step *= full[i] > 0 ? full[i] : 1;
    }
    return vendor_dnnl_lib.dnnl_memory_desc_init_by_strides(md, rank, d, dnnl_f32, s);
}

/* Dense row-major descriptor of `rank` dims. */
dnnl_status_t vendor_dnnl_md_plain(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
    return vendor_dnnl_md_slice(md, rank, dims, dims);
}

/* A 2-D descriptor of a rows x cols matrix stored row-major, or transposed (stored cols x rows)
 * when `trans`. */
dnnl_status_t vendor_dnnl_md_matrix(dnnl_memory_desc_t *md, int64_t rows, int64_t cols,
                                    bool trans) {
    dnnl_dims_t d = {rows, cols}, s = {trans ? 1 : cols, trans ? rows : 1};
    return vendor_dnnl_lib.dnnl_memory_desc_init_by_strides(md, 2, d, dnnl_f32, s);
}

dnnl_status_t vendor_dnnl_md_any_as(dnnl_memory_desc_t *md, int rank, const int64_t *dims,
                                    dnnl_data_type_t dt) {
    dnnl_dims_t d;
    for (int i = 0; i < rank; i++) d[i] = dims[i];
    return vendor_dnnl_lib.dnnl_memory_desc_init_by_tag(md, rank, d, dt, dnnl_format_tag_any);
}

dnnl_status_t vendor_dnnl_md_any(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
    return vendor_dnnl_md_any_as(md, rank, dims, dnnl_f32);
}

void vendor_dnnl_state_release(void *p) {
    dk_state *s = p;
    if (!s) return;
    if (s->prim) vendor_dnnl_lib.dnnl_primitive_destroy(s->prim);
    if (s->src_reorder) vendor_dnnl_lib.dnnl_primitive_destroy(s->src_reorder);
    if (s->dst_reorder) vendor_dnnl_lib.dnnl_primitive_destroy(s->dst_reorder);
    if (s->stream) vendor_dnnl_lib.dnnl_stream_destroy(s->stream);
    free(s->wei_packed);
    free(s->bias_packed);
    free(s->src_tmp);
    free(s->dst_tmp);
    free(s->scratch);
    free(s);
}

void *vendor_dnnl_alloc_md(const dnnl_memory_desc_t *md) {
    size_t bytes = vendor_dnnl_lib.dnnl_memory_desc_get_size(md);
    return core_aligned_alloc(64, bytes ? (bytes + 63) / 64 * 64 : 64);
}

/* Runs a reorder from (from_md, from) to (to_md, to) once, on the current OpenMP setting. */
anvil_status vendor_dnnl_reorder_once(const ir_node *n, dnnl_stream_t stream,
                                      const dnnl_memory_desc_t *from_md, const void *from,
                                      const dnnl_memory_desc_t *to_md, void *to) {
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t m_from = NULL, m_to = NULL;
    anvil_status st = ANVIL_OK;
    dnnl_status_t ds = vendor_dnnl_lib.dnnl_reorder_primitive_desc_create(
        &pd, from_md, vendor_dnnl_engine, to_md, vendor_dnnl_engine, NULL);
    if (ds == dnnl_success) ds = vendor_dnnl_lib.dnnl_primitive_create(&prim, pd);
    if (ds == dnnl_success)
        ds = vendor_dnnl_lib.dnnl_memory_create(&m_from, from_md, vendor_dnnl_engine, (void *)from);
    if (ds == dnnl_success)
        ds = vendor_dnnl_lib.dnnl_memory_create(&m_to, to_md, vendor_dnnl_engine, to);
    if (ds == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, m_from}, {DNNL_ARG_TO, m_to}};
        ds = vendor_dnnl_lib.dnnl_primitive_execute(prim, stream, 2, args);
    }
    if (ds == dnnl_success) ds = vendor_dnnl_lib.dnnl_stream_wait(stream);
    if (ds != dnnl_success) st = vendor_dnnl_fail(n, "a weight reorder", ds);
    if (m_from) vendor_dnnl_lib.dnnl_memory_destroy(m_from);
    if (m_to) vendor_dnnl_lib.dnnl_memory_destroy(m_to);
    if (prim) vendor_dnnl_lib.dnnl_primitive_destroy(prim);
    if (pd) vendor_dnnl_lib.dnnl_primitive_desc_destroy(pd);
    return st;
}

/* Creates the primitive of op_desc with attr, records the descriptors it takes, and prepacks
 * constant weights given in the user layout wei_user_md. */
anvil_status vendor_dnnl_finish_prepare(const ir_node *n, dk_state *s, const void *op_desc,
                                        dnnl_primitive_attr_t attr,
                                        const_dnnl_primitive_desc_t hint,
                                        const dnnl_memory_desc_t *wei_user_md,
                                        const void *wei_value) {
    dnnl_primitive_desc_t pd = NULL;
    DNNL_TRY(
        n, "creating the primitive descriptor",
        vendor_dnnl_lib.dnnl_primitive_desc_create(&pd, op_desc, attr, vendor_dnnl_engine, hint));
    s->src_md = *vendor_dnnl_lib.dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    s->wei_md = *vendor_dnnl_lib.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    s->dst_md = *vendor_dnnl_lib.dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (s->has_bias)
        s->bias_md = *vendor_dnnl_lib.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
    const dnnl_memory_desc_t *scratch =
        vendor_dnnl_lib.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (scratch && vendor_dnnl_lib.dnnl_memory_desc_get_size(scratch) > 0) {
        s->scratch_md = *scratch;
        if (!(s->scratch = vendor_dnnl_alloc_md(scratch))) {
            vendor_dnnl_lib.dnnl_primitive_desc_destroy(pd);
            return ANVIL_ERR_OUT_OF_MEMORY;
        }
    }
    dnnl_status_t ds = vendor_dnnl_lib.dnnl_primitive_create(&s->prim, pd);
    vendor_dnnl_lib.dnnl_primitive_desc_destroy(pd);
    DNNL_TRY(n, "creating the primitive", ds);
    if (wei_value) {
        if (!(s->wei_packed = vendor_dnnl_alloc_md(&s->wei_md))) return ANVIL_ERR_OUT_OF_MEMORY;
        CORE_TRY(vendor_dnnl_reorder_once(n, s->stream, wei_user_md, wei_value, &s->wei_md,
                                          s->wei_packed));
    }
    return ANVIL_OK;
}

/* Sets OpenMP's thread count for this thread; returns the previous one for
 * vendor_dnnl_threads_restore. */
int vendor_dnnl_threads_set(int n) {
    int saved = vendor_dnnl_lib.omp_get_max_threads();
    if (saved != n) vendor_dnnl_lib.omp_set_num_threads(n);
    return saved;
}

void vendor_dnnl_threads_restore(int saved, int n) {
    if (saved != n) vendor_dnnl_lib.omp_set_num_threads(saved);
}

anvil_status vendor_dnnl_state_new(const kern_node *kn, dk_state **out) {
    pthread_once(&dk_engine_once, dk_engine_init);
    if (vendor_dnnl_lib.error[0])
        return core_err(ANVIL_ERR_UNSUPPORTED,
                        "%s: the dnnl_* variants cannot load oneDNN (%s); install libdnnl2 or "
                        "force another variant",
                        ir_node_label(kn->node), vendor_dnnl_lib.error);
    if (dk_engine_status != dnnl_success)
        return vendor_dnnl_fail(kn->node, "creating the CPU vendor_dnnl_engine", dk_engine_status);
    dk_state *s = core_calloc(1, sizeof *s);
    if (!s) return ANVIL_ERR_OUT_OF_MEMORY;
    s->threads = kn->threads > 0 ? kn->threads : 1;
    dnnl_status_t ds = vendor_dnnl_lib.dnnl_stream_create(&s->stream, vendor_dnnl_engine,
                                                          dnnl_stream_default_flags);
    if (ds != dnnl_success) {
        free(s);
        return vendor_dnnl_fail(kn->node, "creating a stream", ds);
    }
    *out = s;
    return ANVIL_OK;
}

anvil_status vendor_dnnl_execute(const ir_node *n, dnnl_stream_t stream, dnnl_primitive_t prim,
                                 const dk_exec_arg *a, int na) {
    dnnl_memory_t mem[5] = {0};
    dnnl_exec_arg_t args[5] = {{0}};
    dnnl_status_t ds = dnnl_success;
    for (int i = 0; i < na && ds == dnnl_success; i++) {
        ds = vendor_dnnl_lib.dnnl_memory_create(&mem[i], a[i].md, vendor_dnnl_engine,
                                                (void *)a[i].data);
        args[i].arg = a[i].arg;
        args[i].memory = mem[i];
    }
    if (ds == dnnl_success) ds = vendor_dnnl_lib.dnnl_primitive_execute(prim, stream, na, args);
    if (ds == dnnl_success) ds = vendor_dnnl_lib.dnnl_stream_wait(stream);
    for (int i = 0; i < na; i++)
        if (mem[i]) vendor_dnnl_lib.dnnl_memory_destroy(mem[i]);
    return ds == dnnl_success ? ANVIL_OK : vendor_dnnl_fail(n, "executing a primitive", ds);
}

/* ---- dnnl_matmul: MatMul and Gemm
 * ---------------------------------------------------------------- */

#endif
