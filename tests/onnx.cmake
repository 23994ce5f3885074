# The official ONNX backend node tests (the onnx package's conformance suite), run through the
# public API by anvil_run_cases (defined in ort.cmake). See tests/onnx/README.md.
# Included from tests/CMakeLists.txt.
#
#   onnx.conformance  runs every node test not in tests/onnx/excluded.tsv; fails when a test not in
#                     tests/onnx/expected_failures.tsv fails, or a listed one passes
#   onnx.excluded     re-classifies the suite and fails when excluded.tsv is out of date

set(ANVIL_ONNX_VENV_PYTHON ${PROJECT_SOURCE_DIR}/.venv/bin/python)
file(GLOB ANVIL_ONNX_NODE_DIR LIST_DIRECTORIES true
     ${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/onnx/backend/test/data/node)

if(NOT EXISTS ${ANVIL_ONNX_VENV_PYTHON} OR NOT ANVIL_ONNX_NODE_DIR)
  message(STATUS "onnx conformance: no venv with the onnx package; run scripts/setup.sh to enable it")
  add_test(NAME onnx.conformance.skipped
           COMMAND ${CMAKE_COMMAND} -E echo
                   "onnx conformance skipped: no ${ANVIL_ONNX_VENV_PYTHON} with onnx; run scripts/setup.sh and re-configure")
  set_tests_properties(onnx.conformance.skipped PROPERTIES SKIP_REGULAR_EXPRESSION "skipped")
  return()
endif()
list(GET ANVIL_ONNX_NODE_DIR 0 ANVIL_ONNX_NODE_DIR)

# One thread per session: the node tests are tiny, and the suite runs next to other tests.
add_test(NAME onnx.conformance
         COMMAND anvil_run_cases --quiet --threads 1
                 --exclude ${CMAKE_CURRENT_SOURCE_DIR}/onnx/excluded.tsv
                 --expect-fail ${CMAKE_CURRENT_SOURCE_DIR}/onnx/expected_failures.tsv
                 ${ANVIL_ONNX_NODE_DIR})
set_tests_properties(onnx.conformance PROPERTIES TIMEOUT 120)

add_test(NAME onnx.excluded
         COMMAND ${ANVIL_ONNX_VENV_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/onnx/classify.py
                 ${ANVIL_ONNX_NODE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/onnx_excluded.tsv)
add_test(NAME onnx.excluded_compare
         COMMAND ${CMAKE_COMMAND} -E compare_files ${CMAKE_CURRENT_SOURCE_DIR}/onnx/excluded.tsv
                 ${CMAKE_CURRENT_BINARY_DIR}/onnx_excluded.tsv)
set_tests_properties(onnx.excluded PROPERTIES FIXTURES_SETUP onnx_excluded TIMEOUT 120)
set_tests_properties(onnx.excluded_compare PROPERTIES FIXTURES_REQUIRED onnx_excluded)
