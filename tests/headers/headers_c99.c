/* Compiled with -std=c99 -pedantic -Werror: the public headers must stand
 * alone in the strictest C that users may build with. */
#include <c10d/c10d.h>

int c10d_headers_c99(void);
int c10d_headers_c99(void)
{
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    c10d_join_opts jo = C10D_JOIN_OPTS_INIT;
    c10d_check_opts co = C10D_CHECK_OPTS_INIT;
    c10d_data_plane dp = C10D_DATA_PLANE_INIT;
    return o.timeout_ms + (int)C10D_ETOOBIG + jo.divide_by_initial_world_size + co.timeout_ms +
           (int)dp.devices;
}
