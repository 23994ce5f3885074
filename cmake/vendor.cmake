# Vendor libraries as kernel variants: oneDNN, OpenBLAS and BLIS (src/kernels/vendor).
#
# Each library is optional. When one is found its ANVIL_HAVE_* definition and link libraries are
# added to ANVIL_KERNEL_DEFS / ANVIL_KERNEL_LIBS (the vendor .c files are already globbed into
# ANVIL_KERNEL_SOURCES by kernels.cmake and compile to nothing without their definition), and
# the include directory it needs is set on its own source file only: OpenBLAS and BLIS both ship
# a cblas.h, so neither directory may be seen by the other's file. They are system include
# directories (-isystem) because blis.h does not compile warning-free under -Wall -Wextra.
#
# Debian installs the pthread flavours of OpenBLAS and BLIS in their own folders
# (/usr/lib/<arch>/openblas-pthread, .../blis-pthread); those are searched first so an OpenMP
# flavour selected through update-alternatives is not picked up by accident.
#
# Link order matters: libopenblas and libblis both export cblas_sgemm and sgemm_. anvil calls
# OpenBLAS through cblas_sgemm and BLIS only through its bli_-prefixed typed API, so OpenBLAS is
# linked first and its cblas_sgemm is the one the dynamic linker binds (the vendor test checks).
#
#   -DANVIL_VENDOR=OFF   builds without any of them.
option(ANVIL_VENDOR "Use oneDNN, OpenBLAS and BLIS as kernel variants when they are installed" ON)

set(_vendor_dir ${CMAKE_CURRENT_LIST_DIR}/../src/kernels/vendor)
get_filename_component(_vendor_dir ${_vendor_dir} ABSOLUTE)
set(_multiarch ${CMAKE_LIBRARY_ARCHITECTURE})

if(NOT ANVIL_VENDOR)
  message(STATUS "anvil vendor: disabled (ANVIL_VENDOR=OFF)")
  return()
endif()

# ---- OpenBLAS (pthread flavour) ------------------------------------------------------------------
find_path(ANVIL_OPENBLAS_INCLUDE openblas_config.h
  PATH_SUFFIXES ${_multiarch}/openblas-pthread openblas-pthread openblas)
find_library(ANVIL_OPENBLAS_LIB NAMES openblas
  PATHS /usr/lib/${_multiarch}/openblas-pthread NO_DEFAULT_PATH)
if(NOT ANVIL_OPENBLAS_LIB)
  find_library(ANVIL_OPENBLAS_LIB NAMES openblas PATH_SUFFIXES openblas-pthread)
endif()
if(ANVIL_OPENBLAS_INCLUDE AND ANVIL_OPENBLAS_LIB)
  # Loaded with dlopen when an openblas_sgemm variant is first prepared, not linked: the pthread
  # OpenBLAS starts a worker per core as soon as it is loaded, and that worker spins for about
  # 100 ms, taking the second core from anvil's own threads in every process (seen with perf).
  get_filename_component(_openblas_real ${ANVIL_OPENBLAS_LIB} REALPATH)
  list(APPEND ANVIL_KERNEL_DEFS ANVIL_HAVE_OPENBLAS "ANVIL_OPENBLAS_PATH=\"${_openblas_real}\"")
  list(APPEND ANVIL_KERNEL_LIBS ${CMAKE_DL_LIBS})
  set_source_files_properties(${_vendor_dir}/openblas_variants.c
    PROPERTIES COMPILE_OPTIONS "-isystem;${ANVIL_OPENBLAS_INCLUDE}")
  message(STATUS "anvil vendor: OpenBLAS found (${ANVIL_OPENBLAS_LIB})")
else()
  message(STATUS "anvil vendor: OpenBLAS not found (Debian: apt-get install "
                 "libopenblas-pthread-dev); variant openblas_sgemm absent")
endif()

# ---- BLIS (pthread flavour) ----------------------------------------------------------------------
find_path(ANVIL_BLIS_INCLUDE blis.h
  PATH_SUFFIXES ${_multiarch}/blis-pthread blis-pthread blis)
find_library(ANVIL_BLIS_LIB NAMES blis
  PATHS /usr/lib/${_multiarch}/blis-pthread NO_DEFAULT_PATH)
if(NOT ANVIL_BLIS_LIB)
  find_library(ANVIL_BLIS_LIB NAMES blis PATH_SUFFIXES blis-pthread)
endif()
if(ANVIL_BLIS_INCLUDE AND ANVIL_BLIS_LIB)
  list(APPEND ANVIL_KERNEL_DEFS ANVIL_HAVE_BLIS)
  list(APPEND ANVIL_KERNEL_LIBS ${ANVIL_BLIS_LIB})
  set_source_files_properties(${_vendor_dir}/blis_variants.c
    PROPERTIES COMPILE_OPTIONS "-isystem;${ANVIL_BLIS_INCLUDE}")
  message(STATUS "anvil vendor: BLIS found (${ANVIL_BLIS_LIB})")
else()
  message(STATUS "anvil vendor: BLIS not found (Debian: apt-get install libblis-pthread-dev); "
                 "variant blis_sgemm absent")
endif()

# ---- oneDNN --------------------------------------------------------------------------------------
# Debian's libdnnl is built on the OpenMP runtime (libgomp): the variants set the OpenMP thread
# count around each call. It is loaded with dlopen when a dnnl_* node is first prepared, not
# linked, so that OpenMP's wait policy can still be set before libgomp loads (dnnl_variants.c). A oneDNN built on another runtime
# (TBB, threadpool) is not used: its thread count could not be held to the session's.
find_path(ANVIL_DNNL_INCLUDE oneapi/dnnl/dnnl.h)
find_library(ANVIL_DNNL_LIB NAMES dnnl)
find_library(ANVIL_GOMP_LIB NAMES gomp libgomp.so.1)
set(_dnnl_omp FALSE)
if(ANVIL_DNNL_INCLUDE AND EXISTS ${ANVIL_DNNL_INCLUDE}/oneapi/dnnl/dnnl_config.h)
  file(STRINGS ${ANVIL_DNNL_INCLUDE}/oneapi/dnnl/dnnl_config.h _dnnl_rt
    REGEX "^#define DNNL_CPU_RUNTIME ")
  if(_dnnl_rt MATCHES "DNNL_RUNTIME_OMP")
    set(_dnnl_omp TRUE)
  endif()
endif()
if(ANVIL_DNNL_INCLUDE AND ANVIL_DNNL_LIB AND ANVIL_GOMP_LIB AND _dnnl_omp)
  get_filename_component(_dnnl_real ${ANVIL_DNNL_LIB} REALPATH)
  list(APPEND ANVIL_KERNEL_DEFS ANVIL_HAVE_DNNL "ANVIL_DNNL_PATH=\"${_dnnl_real}\"")
  list(APPEND ANVIL_KERNEL_LIBS ${CMAKE_DL_LIBS})
  if(ANVIL_SANITIZE OR ANVIL_FUZZ)
    # LeakSanitizer crashes at exit on the threads of a dlopen'ed libgomp (dnnl_variants.c)
    list(APPEND ANVIL_KERNEL_DEFS ANVIL_DNNL_LINKED)
    list(APPEND ANVIL_KERNEL_LIBS ${ANVIL_DNNL_LIB} ${ANVIL_GOMP_LIB})
  endif()
  message(STATUS "anvil vendor: oneDNN found (${ANVIL_DNNL_LIB}, OpenMP runtime)")
elseif(ANVIL_DNNL_INCLUDE AND ANVIL_DNNL_LIB)
  message(STATUS "anvil vendor: oneDNN found but not built on OpenMP (or libgomp missing); "
                 "variants dnnl_* absent")
else()
  message(STATUS "anvil vendor: oneDNN not found (Debian: apt-get install libdnnl-dev); "
                 "variants dnnl_* absent")
endif()
