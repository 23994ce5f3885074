# The ONNX protobuf decoder, generated at build time by nanopb from onnx.proto.
#
# Sets, for the top-level CMakeLists.txt:
#   ANVIL_ONNX_PROTO_SOURCES  generated onnx.pb.c (and its header, so the build orders them first)
#   ANVIL_ONNX_PROTO_INCLUDE  folder of the generated onnx.pb.h
#   ANVIL_ONNX_PROTO_LIBS     anvil_onnx_proto: an interface target that links the Debian nanopb
#                             runtime, carries its compile definitions and the generation step
#
# onnx.proto is taken from, in order: the ANVIL_ONNX_PROTO cache variable, the pinned onnx wheel
# in the project's venv, the libonnx-dev package. src/onnx/onnx.options shapes the generated code
# (zero-copy weights, bounded nesting); src/onnx/onnx_pb.h declares the types it names.

set(ANVIL_ONNX_PROTO "" CACHE FILEPATH "onnx.proto to generate the ONNX parser from (empty: search)")

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
  elseif(EXISTS /usr/include/onnx/onnx.proto)
    set(_anvil_onnx_proto /usr/include/onnx/onnx.proto)
  else()
    message(FATAL_ERROR
      "onnx.proto not found. anvil generates its ONNX parser from it. Either create the venv "
      "(python3 -m venv .venv && .venv/bin/pip install onnx==1.22.0), install the Debian "
      "package libonnx-dev, or pass -DANVIL_ONNX_PROTO=/path/to/onnx.proto")
  endif()
endif()
message(STATUS "ONNX parser from ${_anvil_onnx_proto}")

find_program(ANVIL_NANOPB_GENERATOR NAMES nanopb_generator.py nanopb_generator)
if(NOT ANVIL_NANOPB_GENERATOR)
  message(FATAL_ERROR "nanopb_generator.py not found: install the Debian packages nanopb and "
                      "libnanopb-dev")
endif()
find_package(nanopb CONFIG QUIET)
if(NOT TARGET nanopb::protobuf-nanopb-static)
  message(FATAL_ERROR "the nanopb runtime library was not found: install libnanopb-dev")
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
  COMMAND ${ANVIL_NANOPB_GENERATOR} --quiet --error-on-unmatched -f "${_anvil_pb_options}"
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
