#include "anvil.h"
#include <stdio.h>
int main(void) {
    printf("anvil %s\n", anvil_version());
    return 0;
}
