# libanvil.so, the installable libanvil.a, and `cmake --install` (included from CMakeLists.txt
# once anvil_static and anvil_loader have all their link libraries).
#
# The build tree splits the library in two (anvil_loader below anvil_static, so that the fuzz
# configuration compiles no kernel). The installed copy is one library in both forms, each made
# from those two targets' own objects, so nothing is compiled twice:
#   anvil_shared   libanvil.so.X.Y.Z, SONAME libanvil.so.<major>, exporting exactly the public
#                  API (cmake/anvil.map). Only with ANVIL_SHARED, which compiles the objects -fPIC.
#   anvil_archive  libanvil.a holding the objects of both, so that a user links one archive, not
#                  two in the right order. It lies in <build>/dist/: the build tree's own
#                  libanvil.a is anvil_static alone.
# Both link ANVIL_LINK_DEPS, the libraries that anvil_static and anvil_loader link, read off those
# targets: a dependency added there reaches the shared library, the CMake package and the
# pkg-config file by itself. libanvil.so is linked with --no-undefined, so it loads on its own
# and every build proves the list complete. The generated onnx.pb.c is one of anvil_loader's
# sources (PIC with it); Debian's libprotobuf-nanopb.a is PIE code, which links into the .so
# because the version script makes its symbols local (no relocation against an exported one).
#
# Installed (GNUInstallDirs; relocatable: `cmake --install BUILD --prefix DIR`):
#   include/anvil.h  lib/libanvil.so*  lib/libanvil.a  bin/anvil
#   lib/pkgconfig/anvil.pc           Libs: -lanvil; Libs.private: the system libraries (--static)
#   lib/cmake/anvil/anvilConfig.cmake, anvilConfigVersion.cmake, anvilTargets*.cmake
#                                    find_package(anvil): anvil::anvil (libanvil.so),
#                                    anvil::anvil_static (libanvil.a and its system libraries)
# tests/install.cmake installs into a temporary prefix and builds a program against it both ways.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# ---- the libraries the objects need ------------------------------------------------------------
# Flattened into files and flags: anvil's own two libraries and INTERFACE targets are replaced by
# what they link, an imported library by its file; Threads::Threads stays (the package config
# finds it again). $<LINK_ONLY:x> is x.
function(_anvil_link_deps out)
  set(deps "")
  foreach(item ${ARGN})
    if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(item "${CMAKE_MATCH_1}")
    endif()
    if(item MATCHES "\\$<")
      message(FATAL_ERROR "cmake/install.cmake: cannot flatten the link item '${item}' of "
                          "anvil_static/anvil_loader for libanvil.so")
    endif()
    if(item STREQUAL "Threads::Threads" OR NOT TARGET ${item})
      list(APPEND deps "${item}")
      continue()
    endif()
    get_target_property(type ${item} TYPE)
    get_target_property(imported ${item} IMPORTED)
    if(imported AND NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(loc ${item} LOCATION)
      list(APPEND deps "${loc}")
    elseif(NOT imported AND NOT type STREQUAL "INTERFACE_LIBRARY"
           AND NOT item MATCHES "^anvil_(static|loader)$")
      # its objects would be missing from the installed libraries
      message(FATAL_ERROR "cmake/install.cmake: anvil_static links the library target '${item}', "
                          "which libanvil.so and the installed libanvil.a do not include")
    endif()
    get_target_property(sub ${item} INTERFACE_LINK_LIBRARIES)
    if(sub)
      _anvil_link_deps(sub_deps ${sub})
      list(APPEND deps ${sub_deps})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES deps)
  set(${out} "${deps}" PARENT_SCOPE)
endfunction()
_anvil_link_deps(ANVIL_LINK_DEPS anvil_static)

set(_anvil_objects $<TARGET_OBJECTS:anvil_loader> $<TARGET_OBJECTS:anvil_static>)
set(_anvil_includes $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

add_library(anvil_archive STATIC ${_anvil_objects})
set_target_properties(anvil_archive PROPERTIES OUTPUT_NAME anvil EXPORT_NAME anvil_static
  ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/dist LINKER_LANGUAGE C)
target_include_directories(anvil_archive INTERFACE ${_anvil_includes})
target_link_libraries(anvil_archive INTERFACE ${ANVIL_LINK_DEPS})
set(_anvil_install_libs anvil_archive)

if(ANVIL_SHARED)
  add_library(anvil_shared SHARED ${_anvil_objects})
  set_target_properties(anvil_shared PROPERTIES OUTPUT_NAME anvil EXPORT_NAME anvil
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR} LINKER_LANGUAGE C
    LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/anvil.map)
  target_link_options(anvil_shared PRIVATE
    "LINKER:--version-script=${CMAKE_CURRENT_LIST_DIR}/anvil.map" "LINKER:--no-undefined")
  target_include_directories(anvil_shared INTERFACE ${_anvil_includes})
  target_link_libraries(anvil_shared PRIVATE ${ANVIL_LINK_DEPS})
  list(APPEND _anvil_install_libs anvil_shared)
endif()

# ---- cmake --install ---------------------------------------------------------------------------
# The installed library and tool keep the link folders outside the system ones in their RUNPATH
# (CMake drops the build RPATH on install): cmake/vendor.cmake links the pthread BLIS from its own
# folder so that an OpenMP flavour chosen with update-alternatives is not loaded by accident.
set_target_properties(anvil ${_anvil_install_libs} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
set(_anvil_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/anvil)
install(FILES ${PROJECT_SOURCE_DIR}/include/anvil.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ${_anvil_install_libs} EXPORT anvilTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS anvil RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT anvilTargets NAMESPACE anvil:: DESTINATION ${_anvil_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/anvilConfig.cmake.in
  ${CMAKE_BINARY_DIR}/anvilConfig.cmake INSTALL_DESTINATION ${_anvil_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/anvilConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/anvilConfig.cmake ${CMAKE_BINARY_DIR}/anvilConfigVersion.cmake
  DESTINATION ${_anvil_cmake_dir})

# pkg-config: Libs.private in -l/-L form (-L only for folders outside the linker's own).
set(_pc_libs "")
foreach(d ${ANVIL_LINK_DEPS})
  if(d STREQUAL "Threads::Threads")
    list(APPEND _pc_libs -pthread)
  elseif(IS_ABSOLUTE "${d}")
    get_filename_component(_dir "${d}" DIRECTORY)
    get_filename_component(_name "${d}" NAME)
    if(_name MATCHES "^lib(.+)\\.(so|a)(\\.[0-9.]+)?$")
      if(NOT _dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
        list(APPEND _pc_libs "-L${_dir}")
      endif()
      list(APPEND _pc_libs "-l${CMAKE_MATCH_1}")
    else()
      list(APPEND _pc_libs "${d}")
    endif()
  elseif(d MATCHES "^-")
    list(APPEND _pc_libs "${d}")
  else()
    list(APPEND _pc_libs "-l${d}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _pc_libs)
string(JOIN " " ANVIL_PC_LIBS_PRIVATE ${_pc_libs})
foreach(_v LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_v}}")
    set(ANVIL_PC_${_v} "${CMAKE_INSTALL_${_v}}")
  else()
    set(ANVIL_PC_${_v} "\${prefix}/${CMAKE_INSTALL_${_v}}")
  endif()
endforeach()
# The prefix is only known when installing (`cmake --install --prefix` overrides the configured
# one), so the file is made in two steps: now with everything but the prefix (the placeholder
# replaces itself), then at install time, just before it is copied.
set(ANVIL_PC_PREFIX "@ANVIL_PC_PREFIX@")
configure_file(${CMAKE_CURRENT_LIST_DIR}/anvil.pc.in ${CMAKE_BINARY_DIR}/anvil.pc.in @ONLY)
install(CODE "set(ANVIL_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
configure_file(\"${CMAKE_BINARY_DIR}/anvil.pc.in\" \"${CMAKE_BINARY_DIR}/anvil.pc\" @ONLY)")
install(FILES ${CMAKE_BINARY_DIR}/anvil.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- the Python package (python/pyproject.toml: pip install ./python, scikit-build-core) --------
# The wheel takes only this component, inside the package: the library as one file under the name
# the ctypes loader looks for (python/anvil/_lib.py; a wheel holds no symlinks) and the tool
# (anvil.tune and anvil.bench run it).
if(SKBUILD)
  if(NOT ANVIL_SHARED)
    message(FATAL_ERROR "the Python package loads libanvil.so: configure with ANVIL_SHARED=ON")
  endif()
  install(FILES $<TARGET_FILE:anvil_shared> DESTINATION anvil RENAME libanvil.so
          COMPONENT python)
  install(TARGETS anvil RUNTIME DESTINATION anvil/bin COMPONENT python)
endif()
