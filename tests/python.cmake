# The Python package (python/): its pytest suite against this build's libanvil.so and anvil tool
# (python.api: the C API's bindings; python.torch: anvil.torch, skipped where torch is absent),
# and `pip install ./python` into a fresh virtual environment, whose installed copy then passes
# the core suite (python.package). Included from tests/CMakeLists.txt.

set(ANVIL_PY ${PROJECT_SOURCE_DIR}/.venv/bin/python)
if(NOT TARGET anvil_shared OR NOT EXISTS ${ANVIL_PY})
  add_test(NAME python.skipped
           COMMAND ${CMAKE_COMMAND} -E echo "python tests skipped: needs libanvil.so"
                   "(ANVIL_SHARED) and ${ANVIL_PY} (scripts/setup.sh)")
  set_tests_properties(python.skipped PROPERTIES SKIP_REGULAR_EXPRESSION "skipped")
  return()
endif()

set(_py_env "ANVIL_LIBRARY=$<TARGET_FILE:anvil_shared>" "ANVIL_TOOL=$<TARGET_FILE:anvil>"
            "PYTHONPATH=${PROJECT_SOURCE_DIR}/python" "ANVIL_TUNING_DB=off")
add_test(NAME python.api
         COMMAND ${CMAKE_COMMAND} -E env ${_py_env}
                 ${ANVIL_PY} -m pytest -q -p no:cacheprovider
                 ${PROJECT_SOURCE_DIR}/python/tests/test_core.py)
add_test(NAME python.torch
         COMMAND ${CMAKE_COMMAND} -E env ${_py_env}
                 ${ANVIL_PY} -m pytest -q -p no:cacheprovider -rs
                 ${PROJECT_SOURCE_DIR}/python/tests/test_torch.py)
set_tests_properties(python.api python.torch PROPERTIES TIMEOUT 900)

# the package as a user installs it: a copy of the working tree without .venv, pip install into a
# fresh venv (build requirements from PyPI), a release build of its own (about 2 min on 2 busy
# cores with ccache warm, 6 cold), then the core tests against the installed copy
add_test(NAME python.package
         COMMAND ${PROJECT_SOURCE_DIR}/python/tests/check_package.sh
                 ${CMAKE_BINARY_DIR}/python-package)
set_tests_properties(python.package PROPERTIES TIMEOUT 1800)
