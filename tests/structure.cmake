# Checks on the code's structure, made on the libraries' own objects with nm. Included from
# tests/CMakeLists.txt.
#   ops.table_files  every row of src/ir/ops.def names the src/ops file that defines its op_impl
#   layers.calls     calls between layers only go down (ARCHITECTURE.md), the anvil tool's
#                    included
#   layers.prefixes  every global of src/kernels carries its folder's prefix (ARCHITECTURE.md)
find_package(Python3 COMPONENTS Interpreter)
find_program(ANVIL_NM nm)
if(Python3_Interpreter_FOUND AND ANVIL_NM)
  add_test(NAME ops.table_files
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/ops/check_table_files.py
                   ${PROJECT_SOURCE_DIR}/src/ir/ops.def $<TARGET_OBJECTS:anvil_loader>)
  add_test(NAME layers.calls
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_layers.py
                   $<TARGET_OBJECTS:anvil_loader> $<TARGET_OBJECTS:anvil_static>
                   $<TARGET_OBJECTS:anvil>)
  add_test(NAME layers.prefixes
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_prefixes.py
                   $<TARGET_OBJECTS:anvil_static>)
endif()
