# SLEEF (vectorized, ULP-accurate libm) for the eltwise kernels' exp/tanh/erf/log1p. Optional:
# without it the build still works and the variants that need a vector transcendental are left
# out of the eltwise family (ANVIL_HAVE_SLEEF undefined). -DANVIL_SLEEF=OFF forces that build.
option(ANVIL_SLEEF "Use SLEEF for vectorized transcendental functions when found" ON)
if(ANVIL_SLEEF)
  find_path(SLEEF_INCLUDE_DIR sleef.h)
  find_library(SLEEF_LIBRARY sleef)
  if(SLEEF_INCLUDE_DIR AND SLEEF_LIBRARY)
    message(STATUS "SLEEF: ${SLEEF_LIBRARY}")
    list(APPEND ANVIL_KERNEL_LIBS ${SLEEF_LIBRARY})
    list(APPEND ANVIL_KERNEL_DEFS ANVIL_HAVE_SLEEF=1)
    include_directories(${SLEEF_INCLUDE_DIR})
  else()
    message(STATUS "SLEEF: not found, the vector exp/tanh/erf eltwise variants are left out "
                   "(Debian: apt-get install libsleef-dev)")
  endif()
endif()
