/* The vendor family's variant list (see kernels.h: families): oneDNN, OpenBLAS and BLIS, each
 * present only when the build found the library. */
#include "kernels/kernels.h"

const kern_variant *const kern_family_vendor[] = {
    NULL,
};
