/* The control plane's framing (common/frame.h) byte for byte: a u32
 * length, the u64 request id, little endian. */
#include "frame.h"

#include "check_main.h"

#include <check.h>
#include <stdint.h>
#include <string.h>

START_TEST(frame_header_is_length_then_request_id_little_endian)
{
    uint8_t h[C10DC_FRAME_HDR];
    c10dc_frame_header(h, 0x0102030405060708ull, 0x1234);
    /* length counts the request id (8) and the body */
    const uint8_t want[C10DC_FRAME_HDR] = {0x3c, 0x12, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1};
    ck_assert_int_eq(memcmp(h, want, sizeof want), 0);
    ck_assert_uint_eq(c10dc_get_u32(h), 0x1234 + 8);
    ck_assert_uint_eq(c10dc_get_u64(h + 4), 0x0102030405060708ull);
    /* an empty body is a frame of 8 */
    c10dc_frame_header(h, 1, 0);
    ck_assert_uint_eq(c10dc_get_u32(h), 8);
    /* the largest body a u32 length allows */
    c10dc_frame_header(h, UINT64_MAX, 0xfffffff7u);
    ck_assert_uint_eq(c10dc_get_u32(h), 0xffffffffu);
    ck_assert_uint_eq(c10dc_get_u64(h + 4), UINT64_MAX);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("frame");
    TCase *tc = tcase_create("wire");
    tcase_add_test(tc, frame_header_is_length_then_request_id_little_endian);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
