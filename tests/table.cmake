# The op table's file column (src/ir/ops.def): every row names the src/ops file that defines its
# op_impl, checked on the library's own objects with nm. Included from tests/CMakeLists.txt.
find_package(Python3 COMPONENTS Interpreter)
find_program(ANVIL_NM nm)
if(Python3_Interpreter_FOUND AND ANVIL_NM)
  add_test(NAME ops.table_files
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/ops/check_table_files.py
                   ${PROJECT_SOURCE_DIR}/src/ir/ops.def $<TARGET_OBJECTS:anvil_loader>)
endif()
