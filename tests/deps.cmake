# A configure that lacks required libraries names every one of them, with its Debian package and
# one apt-get line (cmake/deps.cmake, cmake/onnx_proto.cmake): tests/deps/check_missing.sh hides
# them. Only where Debian's multiarch folders are what it hides. Included from tests/CMakeLists.txt.
if(CMAKE_LIBRARY_ARCHITECTURE)
  add_test(NAME deps.missing_named
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/deps/check_missing.sh ${PROJECT_SOURCE_DIR}
                   ${CMAKE_CURRENT_BINARY_DIR}/deps-missing ${CMAKE_C_COMPILER}
                   ${CMAKE_LIBRARY_ARCHITECTURE})
  set_tests_properties(deps.missing_named PROPERTIES TIMEOUT 120)
endif()
