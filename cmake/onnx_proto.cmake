# The ONNX protobuf decoder, generated at build time by nanopb from onnx.proto.
#
# Sets, for the top-level CMakeLists.txt:
#   ANVIL_ONNX_PROTO_SOURCES  generated onnx.pb.c (and its header, so the build orders them first)
#   ANVIL_ONNX_PROTO_INCLUDE  folder of the generated onnx.pb.h
#   ANVIL_ONNX_PROTO_LIBS     anvil_onnx_proto: an interface target that links the Debian nanopb
#                             runtime, carries its compile definitions and the generation step
#
# onnx.proto is taken from, in order: the ANVIL_ONNX_PROTO cache variable, the pinned onnx wheel
# in the project's venv (.venv, scripts/setup.sh), the onnx package of the Python that drives the
# build (under `pip install ./python`, scikit-build-core's Python3_EXECUTABLE, whose isolated build
# environment has onnx from python/pyproject.toml's build requirements; otherwise the Python 3
# CMake finds, an active virtual environment first), the libonnx-dev package. src/onnx/onnx.options
# shapes the generated code (zero-copy weights, bounded nesting); src/onnx/onnx_pb.h declares the
# types it names. What is missing is recorded through cmake/deps.cmake (anvil_dep_missing).

# the onnx release whose onnx.proto anvil is built and tested with (also pinned by
# scripts/requirements.txt and python/pyproject.toml; python/tests/check_package.sh compares them)
set(ANVIL_ONNX_VERSION 1.22.0)
set(ANVIL_ONNX_PROTO "" CACHE FILEPATH "onnx.proto to generate the ONNX parser from (empty: search)")

set(_anvil_onnx_proto "")
set(_anvil_onnx_version "")
if(ANVIL_ONNX_PROTO)
  if(NOT EXISTS "${ANVIL_ONNX_PROTO}")
    message(FATAL_ERROR "ANVIL_ONNX_PROTO is set to '${ANVIL_ONNX_PROTO}', which does not exist")
  endif()
  set(_anvil_onnx_proto "${ANVIL_ONNX_PROTO}")
else()
  file(GLOB _anvil_venv_protos
       "${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/onnx/onnx.proto")
  if(_anvil_venv_protos)
    list(SORT _anvil_venv_protos)
    list(GET _anvil_venv_protos -1 _anvil_onnx_proto)
  endif()
  if(NOT _anvil_onnx_proto)
    if(NOT Python3_EXECUTABLE)
      find_package(Python3 COMPONENTS Interpreter QUIET)
    endif()
    if(Python3_EXECUTABLE)
      # find_spec locates the package without importing it (onnx's import loads numpy and its
      # C extension); the path and the version come back on two lines
      string(CONCAT _anvil_py_find
        "import importlib.util as u, importlib.metadata as m, os\n"
        "s = u.find_spec('onnx')\n"
        "if s and s.submodule_search_locations:\n"
        "    print(os.path.join(list(s.submodule_search_locations)[0], 'onnx.proto'))\n"
        "    print(m.version('onnx'))\n")
      execute_process(
        COMMAND "${Python3_EXECUTABLE}" -c "${_anvil_py_find}"
        RESULT_VARIABLE _anvil_py_rc
        OUTPUT_VARIABLE _anvil_py_out
        ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(_anvil_py_rc EQUAL 0 AND _anvil_py_out MATCHES "^([^\n]+)\n([^\n]+)$")
        if(EXISTS "${CMAKE_MATCH_1}")
          set(_anvil_onnx_proto "${CMAKE_MATCH_1}")
          set(_anvil_onnx_version "${CMAKE_MATCH_2}")
        endif()
      endif()
    endif()
  endif()
  if(NOT _anvil_onnx_proto AND EXISTS /usr/include/onnx/onnx.proto)
    set(_anvil_onnx_proto /usr/include/onnx/onnx.proto)
  endif()
  if(NOT _anvil_onnx_proto)
    if(Python3_EXECUTABLE)
      set(_anvil_py_hint "${Python3_EXECUTABLE} -m pip install onnx==${ANVIL_ONNX_VERSION}")
    else()
      set(_anvil_py_hint "python3 -m pip install onnx==${ANVIL_ONNX_VERSION} (no Python 3 found)")
    endif()
    anvil_dep_missing(""
      "onnx.proto, which anvil generates its ONNX parser from: none in the project's .venv, in "
      "the onnx package of the Python that builds, or from libonnx-dev. Either run "
      "scripts/setup.sh (it makes .venv), or ${_anvil_py_hint}, or pass "
      "-DANVIL_ONNX_PROTO=/path/to/onnx.proto (`pip install ./python` brings onnx itself)")
  endif()
endif()
if(_anvil_onnx_proto)
  if(_anvil_onnx_version)
    message(STATUS "ONNX parser from ${_anvil_onnx_proto} (onnx ${_anvil_onnx_version})")
    if(NOT _anvil_onnx_version VERSION_EQUAL ANVIL_ONNX_VERSION)
      message(WARNING "onnx.proto comes from onnx ${_anvil_onnx_version}; anvil is built and "
                      "tested with onnx ${ANVIL_ONNX_VERSION}'s (src/onnx/onnx.options names its "
                      "fields). -DANVIL_ONNX_PROTO=... picks another file.")
    endif()
  else()
    message(STATUS "ONNX parser from ${_anvil_onnx_proto}")
  endif()
endif()

# nanopb's generator is a Python script. Debian's starts with `#! /usr/bin/python3` and imports
# python3-protobuf and nanopb's own `proto` module from that Python's dist-packages, so it is run
# with the interpreter its first line names, and isolated from the environment (-E -s) when that
# works: under `pip install`, the build runs with PYTHONPATH pointing into pip's isolated build
# environment, whose packages (another protobuf, perhaps for another Python version) would
# otherwise reach the generator's Python. A generator that needs the environment runs as it is.
# Each way is tried with --version, which imports everything the generator needs.
find_program(ANVIL_NANOPB_GENERATOR NAMES nanopb_generator.py nanopb_generator)
set(ANVIL_NANOPB_COMMAND "")
if(NOT ANVIL_NANOPB_GENERATOR)
  anvil_dep_missing("nanopb;protobuf-compiler;python3-protobuf"
                    "nanopb's generator (nanopb_generator.py), which makes the ONNX parser")
else()
  set(_anvil_gen_ways "")
  file(STRINGS "${ANVIL_NANOPB_GENERATOR}" _anvil_gen_first LIMIT_COUNT 1 LIMIT_INPUT 400)
  if(_anvil_gen_first MATCHES "^#!(.+)$")
    separate_arguments(_anvil_gen_interp UNIX_COMMAND "${CMAKE_MATCH_1}")
    string(REPLACE ";" "|" _anvil_way "${_anvil_gen_interp};-E;-s;${ANVIL_NANOPB_GENERATOR}")
    list(APPEND _anvil_gen_ways "${_anvil_way}")
  endif()
  list(APPEND _anvil_gen_ways "${ANVIL_NANOPB_GENERATOR}")
  set(_anvil_gen_error "")
  foreach(_anvil_way IN LISTS _anvil_gen_ways)
    string(REPLACE "|" ";" _anvil_cmd "${_anvil_way}")
    execute_process(COMMAND ${_anvil_cmd} --version
                    RESULT_VARIABLE _anvil_gen_rc
                    OUTPUT_VARIABLE _anvil_gen_out
                    ERROR_VARIABLE _anvil_gen_err
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
    if(_anvil_gen_rc EQUAL 0)
      set(ANVIL_NANOPB_COMMAND ${_anvil_cmd})
      break()
    endif()
    if(NOT _anvil_gen_error)
      # the error's last line (a Python traceback ends with the exception)
      string(REGEX MATCH "[^\n]*$" _anvil_gen_error "${_anvil_gen_err}")
      if(NOT _anvil_gen_error)
        set(_anvil_gen_error "exit status ${_anvil_gen_rc}")
      endif()
    endif()
  endforeach()
  if(ANVIL_NANOPB_COMMAND)
    string(REPLACE ";" " " _anvil_cmd "${ANVIL_NANOPB_COMMAND}")
    message(STATUS "nanopb generator: ${_anvil_cmd} (${_anvil_gen_out})")
  else()
    anvil_dep_missing("python3-protobuf;protobuf-compiler"
                      "a working nanopb generator: ${ANVIL_NANOPB_GENERATOR} --version fails "
                      "(${_anvil_gen_error}), it needs Python's protobuf package for the "
                      "interpreter on its first line, and protoc")
  endif()
endif()
find_package(nanopb CONFIG QUIET)
if(NOT TARGET nanopb::protobuf-nanopb-static)
  anvil_dep_missing(libnanopb-dev
                    "the nanopb runtime (pb.h, libprotobuf-nanopb.a), which the ONNX parser links")
endif()
if(ANVIL_MISSING_DEPS)
  return() # the top level's anvil_deps_check() reports them
endif()

set(_anvil_pb_dir "${CMAKE_BINARY_DIR}/onnx_proto")
set(_anvil_pb_options "${PROJECT_SOURCE_DIR}/src/onnx/onnx.options")
set(ANVIL_ONNX_PROTO_SOURCES "${_anvil_pb_dir}/onnx.pb.c" "${_anvil_pb_dir}/onnx.pb.h")
set(ANVIL_ONNX_PROTO_INCLUDE "${_anvil_pb_dir}")

# The proto is copied next to the output first: nanopb names the file options by the proto's
# file name ("onnx.proto"), whatever folder it came from.
add_custom_command(
  OUTPUT ${ANVIL_ONNX_PROTO_SOURCES}
  COMMAND ${CMAKE_COMMAND} -E make_directory "${_anvil_pb_dir}"
  COMMAND ${CMAKE_COMMAND} -E copy "${_anvil_onnx_proto}" "${_anvil_pb_dir}/onnx.proto"
  COMMAND ${ANVIL_NANOPB_COMMAND} --quiet --error-on-unmatched -f "${_anvil_pb_options}"
          -I "${_anvil_pb_dir}" -D "${_anvil_pb_dir}" "${_anvil_pb_dir}/onnx.proto"
  DEPENDS "${_anvil_onnx_proto}" "${_anvil_pb_options}"
  COMMENT "Generating the ONNX protobuf decoder with nanopb"
  VERBATIM)
add_custom_target(anvil_onnx_proto_gen DEPENDS ${ANVIL_ONNX_PROTO_SOURCES})

# The Debian runtime is built with PB_ENABLE_MALLOC (it exports pb_release and calls realloc) and
# without PB_FIELD_32BIT (its field iterator uses 16-bit indices), so every file that includes
# pb.h must see exactly that, or the structures it shares with the library differ.
add_library(anvil_onnx_proto INTERFACE)
target_compile_definitions(anvil_onnx_proto INTERFACE PB_ENABLE_MALLOC=1)
target_link_libraries(anvil_onnx_proto INTERFACE nanopb::protobuf-nanopb-static)
add_dependencies(anvil_onnx_proto anvil_onnx_proto_gen)
set(ANVIL_ONNX_PROTO_LIBS anvil_onnx_proto)
