# The tuning database's dependencies (src/tune, part of anvil_static): SQLite (Debian
# libsqlite3-dev) for the file, cJSON (libcjson-dev) for its JSON export and for the JSON reports
# of src/api (tune.c, bench.c). cmake/deps.cmake finds them (and names what is missing).
target_include_directories(anvil_static PRIVATE ${ANVIL_SQLITE3_INCLUDE} ${ANVIL_CJSON_INCLUDE})
target_link_libraries(anvil_static PUBLIC ${ANVIL_SQLITE3_LIB} ${ANVIL_CJSON_LIB})
