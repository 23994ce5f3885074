/* The rnn family (being written): no variant yet, so its ops run the reference kernel. */
#include "kernels/kernels.h"

const kern_variant *const kern_family_rnn[] = {NULL};
