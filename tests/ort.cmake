# Tests against ONNX Runtime: generated operator cases and ResNet-style models, run through the
# public API by anvil_run_cases, plus an end-to-end check of `anvil run`. The expected outputs are
# computed by ONNX Runtime from the project's virtual environment (scripts/setup.sh makes it).
# Included from tests/CMakeLists.txt.

add_executable(anvil_run_cases ${CMAKE_CURRENT_SOURCE_DIR}/tools/run_cases.c)
target_include_directories(anvil_run_cases PRIVATE ${PROJECT_SOURCE_DIR}/src
                                                   ${ANVIL_ONNX_PROTO_INCLUDE})
target_link_libraries(anvil_run_cases PRIVATE anvil_static)

set(ANVIL_VENV_PYTHON ${PROJECT_SOURCE_DIR}/.venv/bin/python)
set(ANVIL_ORT_DIR ${CMAKE_BINARY_DIR}/ort)

if(NOT EXISTS ${ANVIL_VENV_PYTHON})
  message(STATUS "ort tests: ${ANVIL_VENV_PYTHON} not found; run scripts/setup.sh to enable them")
  add_test(NAME ort.skipped
           COMMAND ${CMAKE_COMMAND} -E echo
                   "ort tests skipped: no ${ANVIL_VENV_PYTHON}; run scripts/setup.sh and re-configure")
  # 'echo' exits 0; report it as skipped rather than passed.
  set_tests_properties(ort.skipped PROPERTIES SKIP_REGULAR_EXPRESSION "skipped")
  return()
endif()

# Fixture setup: generate the cases and models into the build tree (each generator skips work
# that is already up to date).
add_test(NAME ort.gen_cases
         COMMAND ${ANVIL_VENV_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/ops/gen_cases.py
                 ${ANVIL_ORT_DIR}/cases)
add_test(NAME ort.gen_models
         COMMAND ${ANVIL_VENV_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/gen_resnet.py
                 ${ANVIL_ORT_DIR}/models/resnet_small --size small --batches 1)
add_test(NAME ort.gen_models_batch2
         COMMAND ${ANVIL_VENV_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/gen_resnet.py
                 ${ANVIL_ORT_DIR}/models/resnet_small_batch2 --size small --batches 2,1)
set_tests_properties(ort.gen_cases PROPERTIES FIXTURES_SETUP ort_cases TIMEOUT 600)
set_tests_properties(ort.gen_models ort.gen_models_batch2 PROPERTIES FIXTURES_SETUP ort_models
                                                                     TIMEOUT 300)

# Every operator case (tolerances: the ONNX suite's rtol 1e-3, atol 1e-7, unless a case's
# tolerance.txt says otherwise).
add_test(NAME ort.cases COMMAND anvil_run_cases --quiet ${ANVIL_ORT_DIR}/cases)
set_tests_properties(ort.cases PROPERTIES FIXTURES_REQUIRED ort_cases TIMEOUT 900)

# The ResNet-style CNN, batch 1, and batch 2 then 1 in one session (symbolic batch, re-planning).
add_test(NAME ort.resnet COMMAND anvil_run_cases ${ANVIL_ORT_DIR}/models)
set_tests_properties(ort.resnet PROPERTIES FIXTURES_REQUIRED ort_models TIMEOUT 900)

# `anvil run` writes .npy outputs that must match ONNX Runtime.
add_test(NAME ort.cli_run
         COMMAND ${ANVIL_VENV_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/models/check_cli_run.py
                 $<TARGET_FILE:anvil> ${ANVIL_ORT_DIR}/models/resnet_small
                 ${ANVIL_ORT_DIR}/cli_run)
set_tests_properties(ort.cli_run PROPERTIES FIXTURES_REQUIRED ort_models TIMEOUT 600)
