/* oneDNN inside anvil's vendor variants: the library loaded once per process (dnnl_core.c),
 * its CPU engine, and the helpers every dnnl_* variant uses (dnnl_variants.c: MatMul, Gemm,
 * Conv; dnnl_train.c: ConvTranspose and the weight gradient anvil.ConvGradW). Private to
 * src/kernels/vendor. Pointers passed to the helpers are borrowed for the call unless a comment
 * says the state owns them. */
#ifndef ANVIL_KERNELS_VENDOR_DNNL_IMPL_H
#define ANVIL_KERNELS_VENDOR_DNNL_IMPL_H

#ifdef ANVIL_HAVE_DNNL

#include "vendor_common.h"

#include <oneapi/dnnl/dnnl.h>

/* The oneDNN entry points anvil calls, each through vendor_dnnl_lib (filled by dlsym, or by the
 * linker in sanitizer builds). */
#define DNNL_FUNCS(X)                                                                              \
    X(dnnl_dilated_convolution_backward_weights_desc_init)                                         \
    X(dnnl_dilated_convolution_forward_desc_init)                                                  \
    X(dnnl_dilated_deconvolution_forward_desc_init)                                                \
    X(dnnl_engine_create)                                                                          \
    X(dnnl_matmul_desc_init)                                                                       \
    X(dnnl_memory_create)                                                                          \
    X(dnnl_memory_desc_equal)                                                                      \
    X(dnnl_memory_desc_get_size)                                                                   \
    X(dnnl_memory_desc_init_by_strides)                                                            \
    X(dnnl_memory_desc_init_by_tag)                                                                \
    X(dnnl_memory_destroy)                                                                         \
    X(dnnl_post_ops_append_sum)                                                                    \
    X(dnnl_post_ops_create)                                                                        \
    X(dnnl_post_ops_destroy)                                                                       \
    X(dnnl_primitive_attr_create)                                                                  \
    X(dnnl_primitive_attr_destroy)                                                                 \
    X(dnnl_primitive_attr_set_output_scales)                                                       \
    X(dnnl_primitive_attr_set_post_ops)                                                            \
    X(dnnl_primitive_attr_set_scratchpad_mode)                                                     \
    X(dnnl_primitive_attr_set_fpmath_mode)                                                         \
    X(dnnl_primitive_create)                                                                       \
    X(dnnl_primitive_desc_create)                                                                  \
    X(dnnl_primitive_desc_destroy)                                                                 \
    X(dnnl_primitive_desc_query_md)                                                                \
    X(dnnl_primitive_destroy)                                                                      \
    X(dnnl_primitive_execute)                                                                      \
    X(dnnl_reorder_primitive_desc_create)                                                          \
    X(dnnl_stream_create)                                                                          \
    X(dnnl_stream_destroy)                                                                         \
    X(dnnl_stream_wait)

typedef struct dk_lib_t {
#define DNNL_PTR(f) __typeof__(f) *f;
    DNNL_FUNCS(DNNL_PTR)
#undef DNNL_PTR
    /* the OpenMP runtime's standard entry points (libgomp, loaded with oneDNN) */
    void (*omp_set_num_threads)(int n);
    int (*omp_get_max_threads)(void);
    char error[256]; /* why loading failed; empty when it did not */
} dk_lib_t;

extern dk_lib_t vendor_dnnl_lib;
/* The process's CPU engine (a shared, thread-safe handle); valid once vendor_dnnl_state_new
 * succeeded. */
extern dnnl_engine_t vendor_dnnl_engine;

/* An error status naming n and what failed in oneDNN. */
anvil_status vendor_dnnl_fail(const ir_node *n, const char *what, dnnl_status_t st);

#define DNNL_TRY(node, what, call)                                                                 \
    do {                                                                                           \
        dnnl_status_t dst_ = (call);                                                               \
        if (dst_ != dnnl_success) return vendor_dnnl_fail(node, what, dst_);                       \
    } while (0)

/* A descriptor of `rank` dims laid out inside a dense row-major tensor of dims `full` (the same
 * rank): a channel slice of an NCHW tensor. */
dnnl_status_t vendor_dnnl_md_slice(dnnl_memory_desc_t *md, int rank, const int64_t *dims,
                                   const int64_t *full);
/* Dense row-major descriptor of `rank` dims. */
dnnl_status_t vendor_dnnl_md_plain(dnnl_memory_desc_t *md, int rank, const int64_t *dims);
/* A 2-D descriptor of a rows x cols matrix stored row-major, or transposed (stored cols x rows)
 * when `trans`. */
dnnl_status_t vendor_dnnl_md_matrix(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, bool trans);
/* `rank` dims in the layout the primitive prefers (format "any"). */
dnnl_status_t vendor_dnnl_md_any(dnnl_memory_desc_t *md, int rank, const int64_t *dims);
/* The same with the data type dt (dnnl_bf16 for operands oneDNN is to read in bf16). */
dnnl_status_t vendor_dnnl_md_any_as(dnnl_memory_desc_t *md, int rank, const int64_t *dims,
                                    dnnl_data_type_t dt);

/* A reorder between plain [N, C, spatial...] fp32 (pixels dense) and a blocking of its channels
 * by blk (8 or 16; 0: none), run by anvil: the tensor's n, c and pixels per channel, and the
 * batch and channel strides of the plain layout, the batch and channel-block strides of the
 * blocked one, in elements. */
typedef struct dk_own_reorder {
    int blk;
    int64_t n, c, hw;
    size_t plain_n, plain_c, blk_n, blk_cb;
} dk_own_reorder;

/* What a prepared primitive needs at run time. Memories are created per run around the caller's
 * buffers (cheap handles), so the state holds no per-run pointers. */
typedef struct dk_state {
    bool trivial; /* empty output or K = 0: computed without oneDNN */
    int threads;
    dnnl_stream_t stream;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t src_md, wei_md, bias_md, dst_md; /* as the primitive takes them */
    bool has_bias;
    void *wei_packed;  /* constant weights reordered into wei_md (owned), or NULL */
    void *bias_packed; /* Gemm: beta * C as the bias (owned), or NULL */
    /* Conv with blocked activations: reorders between the plain user layout and the
     * primitive's, with their buffers (owned). */
    dnnl_memory_desc_t src_user_md, dst_user_md;
    dnnl_primitive_t src_reorder, dst_reorder;
    void *src_tmp, *dst_tmp;
    /* bf16 Conv: the same two reorders run by anvil (kernels/cpu/data/layout_blocked.h) where the
     * layouts are the plain one and a channel blocking (blk 0: oneDNN's reorder runs). */
    dk_own_reorder src_own, dst_own;
    /* MatMul / Gemm */
    vk_mm g;
    bool is_gemm, c_in_dst;
    /* Conv: where this primitive's slice of the node's tensors starts, in elements
     * (conv_prepare_part); 0 for a whole node. */
    size_t x_off, y_off, w_off, b_off;
    /* The primitive's own scratchpad (owned), when it was created in user scratchpad mode;
     * else NULL and oneDNN uses its per-process one. */
    dnnl_memory_desc_t scratch_md;
    void *scratch;
} dk_state;

/* A new state for kn (stream created, threads from kn), loading oneDNN on first use; *out owned
 * by the caller, freed by vendor_dnnl_state_release (which takes NULL). */
anvil_status vendor_dnnl_state_new(const kern_node *kn, dk_state **out);
void vendor_dnnl_state_release(void *p);
/* A 64-byte aligned buffer of md's size (free()). */
void *vendor_dnnl_alloc_md(const dnnl_memory_desc_t *md);
/* Runs a reorder from (from_md, from) to (to_md, to) once, on the current OpenMP setting. */
anvil_status vendor_dnnl_reorder_once(const ir_node *n, dnnl_stream_t stream,
                                      const dnnl_memory_desc_t *from_md, const void *from,
                                      const dnnl_memory_desc_t *to_md, void *to);
/* Creates the primitive of op_desc with attr (hint: a forward primitive descriptor for backward
 * ones, else NULL), records the descriptors it takes, and prepacks constant weights given in the
 * user layout wei_user_md (wei_value NULL: none). */
anvil_status vendor_dnnl_finish_prepare(const ir_node *n, dk_state *s, const void *op_desc,
                                        dnnl_primitive_attr_t attr,
                                        const_dnnl_primitive_desc_t hint,
                                        const dnnl_memory_desc_t *wei_user_md,
                                        const void *wei_value);
/* Sets OpenMP's thread count for this thread; returns the previous one for
 * vendor_dnnl_threads_restore. */
int vendor_dnnl_threads_set(int n);
void vendor_dnnl_threads_restore(int saved, int n);

/* Executes s->prim with up to 5 (arg, md, buffer) triples, creating the memory handles. */
typedef struct dk_exec_arg {
    int arg;
    const dnnl_memory_desc_t *md;
    const void *data;
} dk_exec_arg;
/* Executes prim with up to 5 (arg, md, buffer) triples, creating the memory handles. */
anvil_status vendor_dnnl_execute(const ir_node *n, dnnl_stream_t stream, dnnl_primitive_t prim,
                                 const dk_exec_arg *a, int na);

#endif
#endif
