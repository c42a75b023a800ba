/* quantize.c — `loom quantize` (not yet implemented). */
#include <stdio.h>

#include "cli/cli.h"

int loom_cli_quantize(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "loom %s: not implemented yet\n", argv[0]);
    return 1;
}
