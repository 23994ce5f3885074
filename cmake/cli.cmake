# The anvil CLI's extra dependency: cJSON (Debian libcjson-dev) for `anvil bench --json`, found by
# cmake/deps.cmake.
target_include_directories(anvil PRIVATE ${ANVIL_CJSON_INCLUDE})
target_link_libraries(anvil PRIVATE ${ANVIL_CJSON_LIB})
