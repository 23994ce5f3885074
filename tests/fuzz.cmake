# The fuzz targets of the parsers a user hands files to, besides the model loader (whose target,
# fuzz_load, is in tests/onnx_import.cmake), and of shape inference:
#   npy        .npy bytes -> npy_read_mem (src/api/npy.c)
#   npz        .npz bytes -> npz_read_mem (src/api/npz.c), each entry through the .npy parser
#   ckpt       checkpoint bytes -> train_ckpt_parse (the training checkpoint parser)
#   db_import  JSON text -> tune_db_import_json_text into an in-memory tuning database
#   graph      bytes that draw a small random graph -> op checks and shape inference
# Each target is tests/fuzz/fuzz_<name>.c, seeded with tests/fuzz/seeds/<name> (made by
# tests/fuzz/make_seeds.py with fixed seeds) and tests/fuzz/regressions/<name> (inputs that once
# crashed or hung it); tests/fuzz/dict/ holds libFuzzer dictionaries (npz uses npy's).
#
# With -DANVIL_FUZZ=ON: fuzz_<name> built with libFuzzer, and the ctest `fuzz.<name>`: a short
# run under ASan/UBSan (ANVIL_FUZZ_SECONDS_<name> seconds; new inputs go to
# <build>/fuzz_<name>_corpus, crashes to <build>/tests/crash-*). The targets link anvil_loader,
# plus (ckpt, db_import) anvil_fuzz_parsers: the checkpoint parser and the tuning database's two
# files compiled again for coverage, so the fuzz configuration still compiles no kernel.
# In every other build: fuzz_<name>_replay (the target without libFuzzer, tests/fuzz/replay_main.c)
# and the ctest `fuzz.replay.<name>`, which runs the seeds and regressions through it once.

set(ANVIL_FUZZ_TARGETS npy npz ckpt db_import graph)
set(ANVIL_FUZZ_SECONDS_npy 20)
set(ANVIL_FUZZ_SECONDS_npz 20)
set(ANVIL_FUZZ_SECONDS_ckpt 20)
set(ANVIL_FUZZ_SECONDS_db_import 20)
set(ANVIL_FUZZ_SECONDS_graph 30)
set(_fuzz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

if(ANVIL_FUZZ)
  # The checkpoint parser lives with the training sessions (src/train/ckpt.c).
  file(GLOB _fuzz_ckpt_src CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/train/*ckpt*.c)
  if(NOT _fuzz_ckpt_src)
    message(FATAL_ERROR "tests/fuzz.cmake: the checkpoint parser's source was not found")
  endif()
  add_library(anvil_fuzz_parsers STATIC ${_fuzz_ckpt_src} ${PROJECT_SOURCE_DIR}/src/tune/db.c
                                        ${PROJECT_SOURCE_DIR}/src/tune/db_import.c)
  target_include_directories(anvil_fuzz_parsers PRIVATE ${PROJECT_SOURCE_DIR}/src
                             ${ANVIL_ONNX_PROTO_INCLUDE} ${ANVIL_SQLITE3_INCLUDE}
                             ${ANVIL_CJSON_INCLUDE})
  target_compile_options(anvil_fuzz_parsers PRIVATE -fsanitize=fuzzer-no-link)
  target_link_libraries(anvil_fuzz_parsers PUBLIC anvil_loader ${ANVIL_SQLITE3_LIB}
                        ${ANVIL_CJSON_LIB} ZLIB::ZLIB)
endif()

foreach(name ${ANVIL_FUZZ_TARGETS})
  set(_src ${_fuzz_dir}/fuzz_${name}.c)
  set(_inputs ${_fuzz_dir}/seeds/${name})
  file(GLOB _regressions CONFIGURE_DEPENDS ${_fuzz_dir}/regressions/${name}/*)
  if(_regressions)
    list(APPEND _inputs ${_fuzz_dir}/regressions/${name})
  endif()
  if(name STREQUAL "ckpt" OR name STREQUAL "db_import")
    if(ANVIL_FUZZ)
      set(_lib anvil_fuzz_parsers)
    else()
      set(_lib anvil_static)
    endif()
  else()
    set(_lib anvil_loader)
  endif()
  if(ANVIL_FUZZ)
    set(_exe fuzz_${name})
    add_executable(${_exe} ${_src})
    target_compile_options(${_exe} PRIVATE -fsanitize=fuzzer)
    target_link_options(${_exe} PRIVATE -fsanitize=fuzzer)
    set(_corpus ${CMAKE_BINARY_DIR}/fuzz_${name}_corpus)
    file(MAKE_DIRECTORY ${_corpus})
    set(_dict ${_fuzz_dir}/dict/${name}.dict)
    if(name STREQUAL "npz")
      set(_dict ${_fuzz_dir}/dict/npy.dict)
    endif()
    set(_dict_arg "")
    if(EXISTS ${_dict})
      set(_dict_arg -dict=${_dict})
    endif()
    add_test(NAME fuzz.${name}
             COMMAND ${_exe} -max_total_time=${ANVIL_FUZZ_SECONDS_${name}} -rss_limit_mb=2048
                     -timeout=10 -print_final_stats=1 ${_dict_arg} ${_corpus} ${_inputs})
    set_tests_properties(fuzz.${name} PROPERTIES TIMEOUT 300 LABELS fuzz)
  else()
    set(_exe fuzz_${name}_replay)
    add_executable(${_exe} ${_src} ${_fuzz_dir}/replay_main.c)
    add_test(NAME fuzz.replay.${name} COMMAND ${_exe} ${_inputs})
    set_tests_properties(fuzz.replay.${name} PROPERTIES TIMEOUT 120)
  endif()
  target_include_directories(${_exe} PRIVATE ${PROJECT_SOURCE_DIR}/src ${ANVIL_ONNX_PROTO_INCLUDE})
  target_link_libraries(${_exe} PRIVATE ${_lib})
endforeach()
