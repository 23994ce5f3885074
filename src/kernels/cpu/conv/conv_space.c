/* The tuner's parameters of the GEMM-based convolutions (conv.h): which register tile their GEMMs
 * use and the GEMM's KC. Every variant describes its GEMMs through a view (conv_gemm_view) of its
 * own plan under a configuration, so the values listed and the rule checked are those of the
 * GEMMs it would really run.
 *
 * The tile's values are every tile the machine can run; the rule "tile usable" holds by
 * construction (a value hw cannot run is never listed, and conv_config_tile ignores one). The
 * default tile is listed too: its config with the default KC times like the all-zero one, but
 * with other KC values it is a distinct candidate. */
#include "conv.h"

const gemm_kernel *conv_config_tile(const kern_node *kn, const core_hw *hw) {
    return gemm_kernel_of_param(kern_param(kn, CONV_P_TILE), hw);
}

int conv_space_values(conv_view_fn view, const kern_node *kn, const core_hw *hw, int i,
                      int32_t *vals, int cap) {
    if (i == CONV_P_TILE) return gemm_tile_values(hw, vals, cap);
    conv_gemm_view v;
    if (i != CONV_P_KC || !view(kn, NULL, &v)) return 0;
    return gemm_kc_values(v.kdim, v.a_seg, vals, cap);
}

const char *conv_space_label(int i, int32_t v) {
    return i == CONV_P_TILE ? gemm_tile_label(v) : NULL;
}

/* As the GEMM's own rule (gemm_a_panel_fits_l1), on the deepest K block the variant's GEMMs run
 * with the configured tile. */
bool conv_rule_a_panel(conv_view_fn view, const kern_node *kn, const core_hw *hw,
                       const kern_config *c) {
    conv_gemm_view v;
    if (!view(kn, c, &v)) return true;
    return gemm_a_panel_fits_l1(v.k, gemm_kc_max(&v.blk, v.kdim, v.a_seg), hw);
}
