# The system libraries the build needs, looked for in one place so that a configure with several
# of them missing names them all at once, each with the Debian package that provides it and one
# `apt-get install` line for the lot (scripts/setup.sh installs every package the build and the
# tests use; `pip install ./python` needs the same build packages).
#
#   anvil_dep_missing(PACKAGES TEXT...)  records a missing dependency: PACKAGES, the Debian packages
#                                        that provide it ("" when TEXT says what to do), and TEXT
#                                        (pieces joined), what it is
#   anvil_deps_check()               fails the configure if anything was recorded
#
# Sets, for the rest of the build:
#   ZLIB::ZLIB                               .npz archives (src/api/npz.c)
#   ANVIL_SQLITE3_LIB, ANVIL_SQLITE3_INCLUDE the tuning database's file (src/tune)
#   ANVIL_CJSON_LIB, ANVIL_CJSON_INCLUDE     the tuning database's JSON export, the CLI's --json
# cmake/onnx_proto.cmake records nanopb and onnx.proto here too; the optional libraries (SLEEF,
# cmake/sleef.cmake; oneDNN, OpenBLAS and BLIS, cmake/vendor.cmake) only print what is absent.

set(ANVIL_MISSING_DEPS "")
set(ANVIL_MISSING_PACKAGES "")
macro(anvil_dep_missing packages)
  string(CONCAT _anvil_dep_text ${ARGN})
  string(REPLACE ";" "," _anvil_dep_text "${_anvil_dep_text}")
  list(APPEND ANVIL_MISSING_DEPS "${_anvil_dep_text}")
  list(APPEND ANVIL_MISSING_PACKAGES ${packages})
endmacro()

function(anvil_deps_check)
  if(NOT ANVIL_MISSING_DEPS)
    return()
  endif()
  string(REPLACE ";" "\n  - " _lines "${ANVIL_MISSING_DEPS}")
  set(_msg "anvil cannot be built, something it needs is missing:\n  - ${_lines}\n")
  if(ANVIL_MISSING_PACKAGES)
    list(REMOVE_DUPLICATES ANVIL_MISSING_PACKAGES)
    string(REPLACE ";" " " _pkgs "${ANVIL_MISSING_PACKAGES}")
    string(APPEND _msg "On Debian or Ubuntu, as root:\n  apt-get install ${_pkgs}\n")
  endif()
  string(APPEND _msg "(scripts/setup.sh installs every Debian package the build and the tests "
                     "need; README.md lists them.)")
  message(FATAL_ERROR "${_msg}")
endfunction()

find_package(ZLIB QUIET)
if(NOT TARGET ZLIB::ZLIB)
  anvil_dep_missing(zlib1g-dev "zlib (zlib.h, libz: .npz archives, src/api/npz.c)")
endif()

find_library(ANVIL_SQLITE3_LIB sqlite3)
find_path(ANVIL_SQLITE3_INCLUDE sqlite3.h)
if(NOT ANVIL_SQLITE3_LIB OR NOT ANVIL_SQLITE3_INCLUDE)
  anvil_dep_missing(libsqlite3-dev
                    "SQLite 3 (sqlite3.h, libsqlite3: the tuning database, src/tune)")
endif()

find_library(ANVIL_CJSON_LIB cjson)
find_path(ANVIL_CJSON_INCLUDE cjson/cJSON.h)
if(NOT ANVIL_CJSON_LIB OR NOT ANVIL_CJSON_INCLUDE)
  anvil_dep_missing(libcjson-dev "cJSON (cjson/cJSON.h, libcjson: JSON reports and the tuning "
                                 "database's export)")
endif()
