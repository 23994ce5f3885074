# Optimized kernel sources. Files are compiled for baseline x86-64 except those whose name ends
# in an ISA suffix, which get that ISA's flags; the runtime only calls into them after checking
# the CPU (kern_applies), so the shipped build never depends on -march=native.
#   *_avx2.c    AVX2 + FMA (+ F16C)
#   *_avx512.c  AVX-512 F/BW/VL/DQ (+ AVX2/FMA)
# and, for the extensions whose instructions only a few files use (the peak loops, peak.h; the bf16 GEMM tiles):
#   *_avx512bf16.c  AVX-512 + AVX512-BF16
#   *_avx512vnni.c  AVX-512 + AVX512-VNNI
#   *_avx512fp16.c  AVX-512 + AVX512-FP16, with ANVIL_CC_AVX512FP16 defined
#   *_avxvnni.c     AVX2 + AVX-VNNI (no AVX-512 flag, so only the VEX encoding can come out), with
#                   ANVIL_CC_AVXVNNI defined
#   *_amx.c         AMX-TILE, AMX-BF16 and AMX-INT8, with ANVIL_CC_AMX defined
# The last three only where the compiler knows the flags; without them the file compiles for the
# baseline and, seeing no ANVIL_CC_* definition, to a stub that says the build lacks the ISA.
# Vendor files (src/kernels/vendor) compile to nothing unless their ANVIL_HAVE_* is defined.
# Vendor libraries (cmake/vendor.cmake) and SLEEF (cmake/sleef.cmake) add their sources, libraries
# and ANVIL_HAVE_* definitions to the same three lists.
file(GLOB_RECURSE ANVIL_KERNEL_SOURCES CONFIGURE_DEPENDS src/kernels/cpu/*.c src/kernels/vendor/*.c)
set(ANVIL_KERNEL_LIBS "")
set(ANVIL_KERNEL_DEFS "")

set(ANVIL_FLAGS_AVX2 -mavx2 -mfma -mf16c)
set(ANVIL_FLAGS_AVX512 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c)
include(CheckCCompilerFlag)
check_c_compiler_flag(-mavx512fp16 ANVIL_CC_AVX512FP16)
check_c_compiler_flag(-mavxvnni ANVIL_CC_AVXVNNI)
check_c_compiler_flag("-mamx-tile -mamx-bf16 -mamx-int8" ANVIL_CC_AMX)
# Under the sanitizers the kernel files compile at a lower optimization level (appended, so it
# overrides the build type's -O2): the micro-kernels are unrolled register tiles instantiated per
# tile shape, and the sanitizers' instrumentation of them is what the optimizer chokes on.
#   ANVIL_SANITIZE (GCC): -O1. gemm_avx512.c took 336 s of CPU at -O2, 14.6 s at -O1; the kernel
#     tests run the same code under the same checks, only less optimized.
#   ANVIL_FUZZ (clang): -O0. Clang took 690 s at -O1 (2.1 s at -O0). The fuzz target links only
#     the loader library (no kernel), so this matters only when all targets are built there.
set(ANVIL_KERNEL_OPT "")
if(ANVIL_FUZZ)
  set(ANVIL_KERNEL_OPT -O0)
elseif(ANVIL_SANITIZE)
  set(ANVIL_KERNEL_OPT -O1)
endif()
foreach(f ${ANVIL_KERNEL_SOURCES})
  if(f MATCHES "_avx512\\.c$")
    set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${ANVIL_FLAGS_AVX512};${ANVIL_KERNEL_OPT}")
  elseif(f MATCHES "_avx512bf16\\.c$")
    set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
                                                "${ANVIL_FLAGS_AVX512};-mavx512bf16;${ANVIL_KERNEL_OPT}")
  elseif(f MATCHES "_avx512vnni\\.c$")
    set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
                                                "${ANVIL_FLAGS_AVX512};-mavx512vnni;${ANVIL_KERNEL_OPT}")
  elseif(f MATCHES "_avx512fp16\\.c$" AND ANVIL_CC_AVX512FP16)
    set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
                                                "${ANVIL_FLAGS_AVX512};-mavx512fp16;${ANVIL_KERNEL_OPT}"
                                                COMPILE_DEFINITIONS ANVIL_CC_AVX512FP16)
  elseif(f MATCHES "_avxvnni\\.c$" AND ANVIL_CC_AVXVNNI)
    set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
                                                "${ANVIL_FLAGS_AVX2};-mavxvnni;${ANVIL_KERNEL_OPT}"
                                                COMPILE_DEFINITIONS ANVIL_CC_AVXVNNI)
  elseif(f MATCHES "_amx\\.c$" AND ANVIL_CC_AMX)
    set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
                                                "${ANVIL_FLAGS_AVX512};-mavx512bf16;-mamx-tile;-mamx-bf16;-mamx-int8;${ANVIL_KERNEL_OPT}"
                                                COMPILE_DEFINITIONS ANVIL_CC_AMX)
  elseif(f MATCHES "_avx2\\.c$")
    set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${ANVIL_FLAGS_AVX2};${ANVIL_KERNEL_OPT}")
  elseif(ANVIL_KERNEL_OPT)
    set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${ANVIL_KERNEL_OPT}")
  endif()
endforeach()

include(${CMAKE_CURRENT_LIST_DIR}/vendor.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/sleef.cmake OPTIONAL)
