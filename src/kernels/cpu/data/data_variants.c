/* The data family: fast data-movement kernels (Resize / Upsample, Pad, Concat, Split, Slice,
 * Gather, Expand, Tile). Each file holds one op group; this table lists them, best first per op
 * (the planner runs the first that applies). */
#include "data.h"

const kern_variant *const kern_family_data[] = {
    &data_resize_nearest,      &data_resize_linear_f32, &data_upsample_nearest,
};
