/* cmd_inspect.c - `kiln inspect FILE|DIR`: placeholder until the safetensors reader lands. */
#include <stdio.h>

#include "cli/commands.h"

int kiln_cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kiln inspect: not built yet\n");
    return 70;
}
