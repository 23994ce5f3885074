/* Version and status names. */
#include "core/core.h"

#define ANVIL_STR2(x) #x
#define ANVIL_STR(x) ANVIL_STR2(x)

const char *anvil_version(void) {
    return ANVIL_STR(ANVIL_VERSION_MAJOR) "." ANVIL_STR(ANVIL_VERSION_MINOR) "." ANVIL_STR(
        ANVIL_VERSION_PATCH);
}

const char *anvil_last_error(void) {
    return core_err_message();
}

const char *anvil_status_name(anvil_status s) {
    switch (s) {
    case ANVIL_OK:
        return "ANVIL_OK";
    case ANVIL_ERR_INVALID_ARGUMENT:
        return "ANVIL_ERR_INVALID_ARGUMENT";
    case ANVIL_ERR_INVALID_MODEL:
        return "ANVIL_ERR_INVALID_MODEL";
    case ANVIL_ERR_UNSUPPORTED:
        return "ANVIL_ERR_UNSUPPORTED";
    case ANVIL_ERR_SHAPE:
        return "ANVIL_ERR_SHAPE";
    case ANVIL_ERR_OUT_OF_MEMORY:
        return "ANVIL_ERR_OUT_OF_MEMORY";
    case ANVIL_ERR_IO:
        return "ANVIL_ERR_IO";
    case ANVIL_ERR_LIMIT:
        return "ANVIL_ERR_LIMIT";
    case ANVIL_ERR_RUNTIME:
        return "ANVIL_ERR_RUNTIME";
    case ANVIL_ERR_INTERNAL:
        return "ANVIL_ERR_INTERNAL";
    }
    return "ANVIL_ERR_UNKNOWN";
}
