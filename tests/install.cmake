# The installed copy, used the way a C program outside the project uses it (cmake/install.cmake;
# the checks are tests/install/check.sh). Included from tests/CMakeLists.txt.
#   install.tree                `cmake --install` of this build into a temporary prefix; the
#                               files are there, the SONAME, the pkg-config prefix, bin/anvil runs
#   install.exports             libanvil.so exports exactly the functions of include/anvil.h,
#                               and ldd finds every library it needs
#   install.consumer.pkgconfig  tests/install/consumer.c built with
#                               `cc $(pkg-config --cflags --libs anvil)`, run (skipped without
#                               pkg-config)
#   install.consumer.cmake      the same program built by tests/install/CMakeLists.txt with
#                               find_package(anvil), against anvil::anvil and anvil::anvil_static
# Only with libanvil.so (ANVIL_SHARED), and not under the sanitizers: a program built outside the
# project would not load their runtimes.
if(NOT ANVIL_SHARED OR ANVIL_SANITIZE OR ANVIL_FUZZ)
  return()
endif()

set(_inst_dir ${CMAKE_CURRENT_BINARY_DIR}/install-test)
set(_inst_env
  "BUILD=${CMAKE_BINARY_DIR}" "PREFIX=${_inst_dir}/prefix" "LIBDIR=${CMAKE_INSTALL_LIBDIR}"
  "SOVERSION=${PROJECT_VERSION_MAJOR}" "CC=${CMAKE_C_COMPILER}" "CMAKE=${CMAKE_COMMAND}"
  "MODEL=${CMAKE_CURRENT_SOURCE_DIR}/unit/data/api_small.onnx"
  "SRC=${CMAKE_CURRENT_SOURCE_DIR}/install" "HEADER=${PROJECT_SOURCE_DIR}/include/anvil.h"
  "ANVIL_TUNING_DB=off")
set(_inst_check ${CMAKE_CURRENT_SOURCE_DIR}/install/check.sh)

add_test(NAME install.tree COMMAND ${_inst_check} tree)
set_tests_properties(install.tree PROPERTIES FIXTURES_SETUP anvil_installed
                     ENVIRONMENT "${_inst_env};WORK=${_inst_dir}/tree")
foreach(mode exports consumer.pkgconfig consumer.cmake)
  string(REGEX REPLACE "^consumer\\." "" _inst_mode ${mode})
  add_test(NAME install.${mode} COMMAND ${_inst_check} ${_inst_mode})
  set_tests_properties(install.${mode} PROPERTIES FIXTURES_REQUIRED anvil_installed
                       ENVIRONMENT "${_inst_env};WORK=${_inst_dir}/${_inst_mode}"
                       SKIP_REGULAR_EXPRESSION "SKIP: ")
endforeach()
