/* The vendor family's variant list (see kernels.h: families): oneDNN, OpenBLAS and BLIS, each
 * present only when the build found the library (cmake/vendor.cmake). They come after anvil's own
 * families in the registry's cascade, so they are the default only where no anvil kernel
 * applies; the tuner and users force them by name. Within the family: oneDNN, then BLIS, then
 * OpenBLAS, the order of their 1024^3 sgemm speed on AMD Zen 4 (1 thread, median of 5: 19.7,
 * 20.5 and 21.1 ms); BLIS also keeps its thread count per call, OpenBLAS only globally. */
#include "kernels/kernels.h"

#ifdef ANVIL_HAVE_DNNL
extern const kern_variant kern_dnnl_matmul, kern_dnnl_gemm, kern_dnnl_conv, kern_dnnl_conv_nchw,
    kern_dnnl_conv_split, kern_dnnl_deconv, kern_dnnl_conv_grad_w;
#endif
#ifdef ANVIL_HAVE_OPENBLAS
extern const kern_variant kern_openblas_matmul, kern_openblas_gemm;
#endif
#ifdef ANVIL_HAVE_BLIS
extern const kern_variant kern_blis_matmul, kern_blis_gemm;
#endif

const kern_variant *const kern_family_vendor[] = {
#ifdef ANVIL_HAVE_DNNL
    &kern_dnnl_matmul,
    &kern_dnnl_gemm,
    &kern_dnnl_conv,
    &kern_dnnl_conv_nchw,
    &kern_dnnl_conv_split,
    &kern_dnnl_deconv,
    &kern_dnnl_conv_grad_w,
#endif
#ifdef ANVIL_HAVE_BLIS
    &kern_blis_matmul,
    &kern_blis_gemm,
#endif
#ifdef ANVIL_HAVE_OPENBLAS
    &kern_openblas_matmul,
    &kern_openblas_gemm,
#endif
    NULL,
};
