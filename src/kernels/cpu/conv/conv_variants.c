/* The conv family's variant list (see kernels.h: families). */
#include "kernels/kernels.h"

const kern_variant *const kern_family_conv[] = {
    NULL,
};
