# The ONNX importer's extra tests. The bad-model corpus itself is checked by the unit tests
# test_onnx_import (importer level) and test_bad_models (public API), which the unit glob in
# tests/CMakeLists.txt already registers; this file adds the libFuzzer target and `fuzz.replay`
# (the fuzz seeds and tests/fuzz/regressions run once through the target, in every build).
#
# With -DANVIL_FUZZ=ON (needs CC=clang): builds tests/fuzz/fuzz_load.c with libFuzzer, compiles
# the loader library with coverage instrumentation so the fuzzer can steer through it, and registers
# `fuzz.load`, a 60 s run seeded with tests/bad_models and the valid models in tests/unit/data.
# New inputs it finds go to <build>/fuzz_load_corpus; crashes to <build>/tests/crash-*.

if(ANVIL_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ANVIL_FUZZ=ON needs clang for libFuzzer; configure with CC=clang "
                        "(compiler here: ${CMAKE_C_COMPILER_ID})")
  endif()
  # Coverage instrumentation for what the fuzzer can reach: the loader library, which is all
  # that fuzz_load links (so this configuration compiles no kernel).
  target_compile_options(anvil_loader PRIVATE -fsanitize=fuzzer-no-link)
  add_executable(fuzz_load ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_load.c)
  target_compile_options(fuzz_load PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_load PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_load PRIVATE anvil_loader)
  set(ANVIL_FUZZ_CORPUS ${CMAKE_BINARY_DIR}/fuzz_load_corpus)
  file(MAKE_DIRECTORY ${ANVIL_FUZZ_CORPUS})
  add_test(NAME fuzz.load
           COMMAND fuzz_load -max_total_time=60 -rss_limit_mb=2048 -timeout=10
                   -print_final_stats=1 ${ANVIL_FUZZ_CORPUS}
                   ${CMAKE_CURRENT_SOURCE_DIR}/bad_models ${CMAKE_CURRENT_SOURCE_DIR}/unit/data)
  set_tests_properties(fuzz.load PROPERTIES TIMEOUT 300 LABELS fuzz)
endif()

# Every build: replay the fuzz seeds and tests/fuzz/regressions/load (inputs that once crashed or
# hung the loader) through the fuzz target without libFuzzer; under ANVIL_SANITIZE this catches
# memory errors on exactly the inputs the fuzzer starts from. The other parsers' fuzz targets are
# in tests/fuzz.cmake.
if(NOT ANVIL_FUZZ)
  add_executable(fuzz_load_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_load.c
                                  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.c)
  target_link_libraries(fuzz_load_replay PRIVATE anvil_loader)
  add_test(NAME fuzz.replay
           COMMAND fuzz_load_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/regressions/load
                   ${CMAKE_CURRENT_SOURCE_DIR}/bad_models ${CMAKE_CURRENT_SOURCE_DIR}/unit/data)
  set_tests_properties(fuzz.replay PROPERTIES TIMEOUT 120)
else()
  # Files, not the folder: libFuzzer runs named files once each, while a folder would be taken as
  # the corpus to add new inputs to (in the source tree).
  file(GLOB _load_regressions CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/regressions/load/*)
  add_test(NAME fuzz.replay COMMAND fuzz_load ${_load_regressions})
  set_tests_properties(fuzz.replay PROPERTIES TIMEOUT 120)
endif()
