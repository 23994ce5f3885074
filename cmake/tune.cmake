# The tuning database's dependencies (src/tune, part of anvil_static): SQLite (Debian
# libsqlite3-dev) for the file, cJSON (libcjson-dev) for its JSON export (and for
# src/api/bench.c's JSON report, also in anvil_static).
find_library(SQLITE3_LIB sqlite3 REQUIRED)
find_path(SQLITE3_INCLUDE sqlite3.h)
if(NOT SQLITE3_INCLUDE)
  message(FATAL_ERROR "sqlite3.h not found: install libsqlite3-dev (needed by src/tune)")
endif()
find_library(ANVIL_TUNE_CJSON_LIB cjson)
find_path(ANVIL_TUNE_CJSON_INCLUDE cjson/cJSON.h)
if(NOT ANVIL_TUNE_CJSON_LIB OR NOT ANVIL_TUNE_CJSON_INCLUDE)
  message(FATAL_ERROR "cJSON not found: install libcjson-dev (needed by src/tune)")
endif()
target_include_directories(anvil_static PRIVATE ${SQLITE3_INCLUDE} ${ANVIL_TUNE_CJSON_INCLUDE})
target_link_libraries(anvil_static PUBLIC ${SQLITE3_LIB} ${ANVIL_TUNE_CJSON_LIB})
