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
    return core_status_name(s);
}
