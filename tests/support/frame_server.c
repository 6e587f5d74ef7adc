#include "frame_server.h"

#include "frame.h"

#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

void frame_server_serve(int fd, atomic_int *stop, frame_answer_fn answer, void *arg)
{
    uint8_t buf[1 << 16];
    size_t len = 0;
    while (!atomic_load(stop)) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0)
            continue;
        ssize_t r = read(fd, buf + len, sizeof buf - len);
        if (r <= 0)
            return;
        len += (size_t)r;
        size_t off = 0;
        while (len - off >= C10DC_FRAME_HDR &&
               len - off >= 4 + (size_t)c10dc_get_u32(buf + off)) {
            if (answer(fd, c10dc_get_u64(buf + off + 4), arg) != 0)
                return;
            off += 4 + c10dc_get_u32(buf + off);
        }
        memmove(buf, buf + off, len - off);
        len -= off;
    }
}
