/* The vendor family's variant list (see kernels.h: families): oneDNN, OpenBLAS and BLIS, each
 * present only when the build found the library (cmake/vendor.cmake). They come after anvil's own
 * families in the registry's cascade, so they are the default only where no anvil kernel
 * applies; the tuner and users force them by name. Within the family: oneDNN, then BLIS, then
 * OpenBLAS, the order of their 1024^3 sgemm speed on AMD Zen 4 (1 thread, median of 5: 19.7,
 * 20.5 and 21.1 ms); BLIS also keeps its thread count per call, OpenBLAS only globally. */
#include "kernels/kernels.h"

#ifdef ANVIL_HAVE_DNNL
extern const kern_variant vendor_dnnl_matmul, vendor_dnnl_gemm, vendor_dnnl_conv,
    vendor_dnnl_conv_nchw, vendor_dnnl_conv_split, vendor_dnnl_deconv, vendor_dnnl_conv_grad_w,
    vendor_dnnl_conv_split_bf16;
#endif
#ifdef ANVIL_HAVE_OPENBLAS
extern const kern_variant vendor_openblas_matmul, vendor_openblas_gemm;
#endif
#ifdef ANVIL_HAVE_BLIS
extern const kern_variant vendor_blis_matmul, vendor_blis_gemm;
#endif

const kern_variant *const kern_family_vendor[] = {
#ifdef ANVIL_HAVE_DNNL
    &vendor_dnnl_matmul,
    &vendor_dnnl_gemm,
    &vendor_dnnl_conv,
    &vendor_dnnl_conv_nchw,
    &vendor_dnnl_conv_split,
    &vendor_dnnl_conv_split_bf16,
    &vendor_dnnl_deconv,
    &vendor_dnnl_conv_grad_w,
#endif
#ifdef ANVIL_HAVE_BLIS
    &vendor_blis_matmul,
    &vendor_blis_gemm,
#endif
#ifdef ANVIL_HAVE_OPENBLAS
    &vendor_openblas_matmul,
    &vendor_openblas_gemm,
#endif
    NULL,
};
