#include "internal.h"
#include "version.h"

#include <stdlib.h>

void c10d_free(void *p)
{
    free(p);
}

const char *c10d_version(void)
{
    return C10D_VERSION_STRING;
}
