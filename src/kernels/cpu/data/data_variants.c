/* The data family: fast data-movement kernels (Resize / Upsample, Pad, Concat, Split, Slice,
 * Gather, Expand, Tile, ScatterND). Each file holds one op group; this table lists them, best first
 * per op (the planner runs the first that applies). */
#include "data.h"

/* One entry per line (clang-format off keeps it so, for readable diffs). */
// clang-format off
const kern_variant *const kern_family_data[] = {
    &data_resize_nearest,
    &data_resize_linear_f32_avx512,
    &data_resize_linear_f32,
    &data_upsample_nearest,
    &data_upsample_linear_f32_avx512,
    &data_upsample_linear_f32,
    &data_pad_rows,
    &data_concat_copy,
    &data_split_copy,
    &data_slice_copy,
    &data_gather_copy,
    &data_expand_copy,
    &data_tile_copy,
    &data_scatternd_add,
    NULL,
};
// clang-format on
