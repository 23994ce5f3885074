# Graph passes (src/passes): tests/passes/gen_cases.py writes small models with the rewrite each
# must or must not get (ONNX Runtime computes the expected outputs); tests/passes/check.py checks
# the rewritten graph (`anvil dump --opt-level 1`) and the numbers at --opt-level 0 and 1.
# Included from tests/CMakeLists.txt; anvil_run_cases is defined in ort.cmake.

set(ANVIL_PASSES_PYTHON ${PROJECT_SOURCE_DIR}/.venv/bin/python)
if(NOT EXISTS ${ANVIL_PASSES_PYTHON})
  add_test(NAME passes.skipped
           COMMAND ${CMAKE_COMMAND} -E echo "passes tests skipped: no ${ANVIL_PASSES_PYTHON}; run"
                   "scripts/setup.sh and re-configure")
  set_tests_properties(passes.skipped PROPERTIES SKIP_REGULAR_EXPRESSION "skipped")
  return()
endif()

set(ANVIL_PASSES_DIR ${CMAKE_BINARY_DIR}/passes)
add_test(NAME passes.gen COMMAND ${ANVIL_PASSES_PYTHON}
                                 ${CMAKE_CURRENT_SOURCE_DIR}/passes/gen_cases.py ${ANVIL_PASSES_DIR})
set_tests_properties(passes.gen PROPERTIES FIXTURES_SETUP passes_cases TIMEOUT 300)
add_test(NAME passes.check
         COMMAND ${ANVIL_PASSES_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/passes/check.py
                 $<TARGET_FILE:anvil> $<TARGET_FILE:anvil_run_cases> ${ANVIL_PASSES_DIR})
set_tests_properties(passes.check PROPERTIES FIXTURES_REQUIRED passes_cases TIMEOUT 300)
