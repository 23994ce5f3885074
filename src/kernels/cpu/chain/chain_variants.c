/* The chain family (being written): no variant yet. */
#include "kernels/kernels.h"

const kern_variant *const kern_family_chain[] = {NULL};
