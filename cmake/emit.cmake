# The source files `anvil compile` copies into the libraries it emits (src/emit/emit.c), embedded
# in anvil as byte arrays by tools/embed/embed.c, so that an installed anvil emits the very files
# it was built from. An emitter that needs a file missing here fails with an error naming it
# (the emit tests compile every emitted library, so such a gap shows there).
set(ANVIL_EMIT_FILES
  core/core_hw.h core/core_copy.h core/hw.c core/pool.c ir/ir_act.h kernels/kern_isa.h
  emit/shim/core.h emit/shim/kernels.h emit/shim/krt.c emit/shim/run_main.h
  kernels/cpu/gemm/gemm.h kernels/cpu/gemm/gemm.c kernels/cpu/gemm/gemm_epilogue.h
  kernels/cpu/gemm/gemm_ukernel.h kernels/cpu/gemm/gemm_avx512.c kernels/cpu/gemm/gemm_avx2.c
  kernels/cpu/gemm/gemm_avx512bf16.c kernels/cpu/gemm/gemm_avx512fp16.c
  kernels/cpu/gemm/gemm_pairs_avx512.h
  kernels/cpu/gemm/gemm_vec_avx512.h
  kernels/cpu/eltwise/eltwise_act.h kernels/cpu/eltwise/eltwise_exp.h
  kernels/cpu/eltwise/eltwise_vec_avx512.h kernels/cpu/eltwise/eltwise_vec_avx2.h
  kernels/cpu/eltwise/eltwise.h kernels/cpu/eltwise/eltwise_run.c
  kernels/cpu/eltwise/eltwise_avx512.c kernels/cpu/eltwise/eltwise_avx2.c
  kernels/cpu/eltwise/eltwise_simd.h
  ops/chain_op.h kernels/cpu/chain/chain.h kernels/cpu/chain/chain_run.c
  kernels/cpu/chain/chain_simd.h kernels/cpu/chain/chain_avx512.c kernels/cpu/chain/chain_avx2.c
  kernels/cpu/conv/conv_layout.h kernels/cpu/conv/conv_layout.c kernels/cpu/conv/conv_vec_avx512.h kernels/cpu/conv/conv_vec_avx2.h kernels/cpu/conv/conv_rows_tmpl.h kernels/cpu/conv/conv_sc_tmpl.h kernels/cpu/conv/conv_sc_avx512.c kernels/cpu/conv/conv_sc_avx2.c)

# The attention, data-movement, math and reduce families' run-time halves.
list(APPEND ANVIL_EMIT_FILES
  ops/sdpa_geom.h kernels/cpu/attn/attn.h kernels/cpu/attn/attn_run.c kernels/cpu/attn/attn_tmpl.h
  kernels/cpu/attn/attn_avx512.c kernels/cpu/attn/attn_avx2.c kernels/cpu/attn/attn_avx512bf16.c
  kernels/cpu/attn/attn_avx512fp16.c
  kernels/cpu/attn/attn_vec_avx512.h
  kernels/cpu/data/data_move.h kernels/cpu/data/data_move.c kernels/cpu/data/data_resize.h
  kernels/cpu/data/data_resize_run.c kernels/cpu/data/data_resize_avx512.c
  kernels/cpu/math/mathk.h kernels/cpu/math/math_run.c kernels/cpu/math/math_avx512.c kernels/cpu/math/math_avx2.c
  kernels/cpu/reduce/reduce_run.h kernels/cpu/reduce/reduce_run.c kernels/cpu/reduce/reduce_simd.h
  kernels/cpu/reduce/reduce_avx512.c kernels/cpu/reduce/reduce_avx2.c)

# The conv family's direct, Winograd and channels-last run-time halves and their ISA kernels.
list(APPEND ANVIL_EMIT_FILES
  kernels/cpu/conv/conv_nhwc_run.c kernels/cpu/conv/conv_direct_run.c kernels/cpu/conv/conv_dwx.h
  kernels/cpu/conv/conv_dw_tmpl.h kernels/cpu/conv/conv_dwn_tmpl.h kernels/cpu/conv/conv_dwx_tmpl.h
  kernels/cpu/conv/conv_dw_avx512.c kernels/cpu/conv/conv_dw_avx2.c kernels/cpu/conv/conv_scn_avx512.c
  kernels/cpu/conv/conv_gcn_avx512.c
  kernels/cpu/conv/conv_wino_run.c kernels/cpu/conv/conv_wino_tmpl.h kernels/cpu/conv/conv_wino_vec_tmpl.h
  kernels/cpu/conv/conv_wino_avx512.c kernels/cpu/conv/conv_wino_avx2.c)

# Back-to-back fusion (anvil.GemmPair, anvil.ConvPair).
list(APPEND ANVIL_EMIT_FILES kernels/cpu/pair/pair.h kernels/cpu/pair/pair_run.c)

# The general depthwise variants' ISA kernels (dwconv_nchw_<isa>, dwconv_nhwc_<isa>; their run
# is in conv_direct_run.c).
list(APPEND ANVIL_EMIT_FILES kernels/cpu/conv/conv_dwx_avx512.c kernels/cpu/conv/conv_dwx_avx2.c)

add_executable(anvil_embed tools/embed/embed.c)
set(_emit_deps "")
foreach(f ${ANVIL_EMIT_FILES})
  list(APPEND _emit_deps ${CMAKE_CURRENT_SOURCE_DIR}/src/${f})
endforeach()
add_custom_command(
  OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/emit_files.c
  COMMAND anvil_embed ${CMAKE_CURRENT_BINARY_DIR}/emit_files.c ${CMAKE_CURRENT_SOURCE_DIR}/src
          ${ANVIL_EMIT_FILES}
  DEPENDS anvil_embed ${_emit_deps}
  COMMENT "Embedding the sources anvil compile emits")
target_sources(anvil_static PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/emit_files.c)
