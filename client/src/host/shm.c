/* Shared-memory links: each rank creates one segment holding the incoming
 * rings of every peer on its host; a peer writes into its ring there and
 * the owner reads. Rings are single-producer single-consumer, so the only
 * synchronisation is the release/acquire pair on head and tail.
 *
 * The segment is made after the rendezvous, when the rank knows which
 * peers share its host, and holds their rings only: sized for every
 * member, off-host ones included, it took ~10 MiB a rank at 8 ranks, more
 * than Docker's default 64 MiB /dev/shm holds for a host of them. */
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HDR sizeof(c10di_ring_hdr)

void c10di_shm_caps(int nlocal, size_t cap[CH_COUNT])
{
    /* Big rings for collectives (bandwidth), within ~32 MiB a rank. */
    size_t per = nlocal > 0 ? (size_t)(32u << 20) / (size_t)nlocal : (1u << 20);
    size_t c = 1u << 20;
    while (c > per && c > (64u << 10))
        c >>= 1;
    cap[CH_COLL] = c;
    cap[CH_P2P] = 256u << 10;
}

static size_t stride(const size_t cap[CH_COUNT])
{
    return 2 * HDR + cap[CH_COLL] + cap[CH_P2P];
}

static c10di_ring ring_at(void *seg, const size_t cap[CH_COUNT], int peer, int ch)
{
    uint8_t *base = (uint8_t *)seg + (size_t)peer * stride(cap);
    if (ch == CH_P2P)
        base += HDR + cap[CH_COLL];
    c10di_ring r = {(c10di_ring_hdr *)base, base + HDR, cap[ch]};
    return r;
}

c10d_status c10di_shm_create(c10di_host *h, const char *name, int nlocal)
{
    c10di_shm_caps(nlocal, h->cap);
    h->seg_len = (size_t)nlocal * stride(h->cap);
    snprintf(h->shm_name, sizeof h->shm_name, "%s", name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return c10di_error(C10D_EBACKEND, "cannot create shared memory %s: %s", name,
                           strerror(errno));
    /* Reserve the pages now: a full /dev/shm is an error here, not a
     * SIGBUS in the middle of a collective. */
    int rv = posix_fallocate(fd, 0, (off_t)h->seg_len);
    if (rv != 0) {
        close(fd);
        shm_unlink(name);
        h->shm_name[0] = '\0';
        return c10di_error(C10D_EBACKEND, "cannot reserve %zu bytes of shared memory for %s "
                           "(the rings of %d peers on this host): %s; /dev/shm is too small "
                           "(Docker's default is 64 MiB: --shm-size), or "
                           "C10D_HOST_TRANSPORT=tcp avoids it", h->seg_len, name, nlocal,
                           strerror(rv));
    }
    h->seg = mmap(NULL, h->seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (h->seg == MAP_FAILED) {
        h->seg = NULL;
        shm_unlink(name);
        h->shm_name[0] = '\0';
        return c10di_error(C10D_EBACKEND, "cannot map shared memory %s: %s", name,
                           strerror(errno));
    }
    return C10D_OK;
}

c10d_status c10di_shm_attach(c10di_host *h, int peer, const char *name, const c10di_coll *setup)
{
    /* The peer makes its segment at its own connect: wait until it exists
     * at its full size (mapped while still empty, a touch is a SIGBUS). */
    int fd;
    for (;;) {
        struct stat sb;
        if ((fd = shm_open(name, O_RDWR, 0)) >= 0 && fstat(fd, &sb) == 0 &&
            (size_t)sb.st_size >= h->seg_len)
            break;
        if (fd < 0 && errno != ENOENT)
            return c10di_error(C10D_EBACKEND, "cannot open rank %d's shared memory %s: %s",
                               peer, name, strerror(errno));
        if (fd >= 0)
            close(fd);
        c10d_status st = c10di_be_check(h->ctx, setup, peer);
        if (st != C10D_OK)
            return st;
        usleep(1000);
    }
    void *p = mmap(NULL, h->seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return c10di_error(C10D_EBACKEND, "cannot map rank %d's shared memory %s: %s", peer,
                           name, strerror(errno));
    h->peer_seg[peer] = p;
    h->peer_seg_len[peer] = h->seg_len;
    c10di_link *l = &h->links[peer];
    for (int ch = 0; ch < CH_COUNT; ch++) {
        l->out[ch] = ring_at(p, h->cap, l->their_slot, ch);
        l->in[ch] = ring_at(h->seg, h->cap, l->slot, ch);
    }
    l->shm = 1;
    return C10D_OK;
}

void c10di_shm_detach(c10di_host *h)
{
    for (int i = 0; h->peer_seg && i < h->n; i++)
        if (h->peer_seg[i])
            munmap(h->peer_seg[i], h->peer_seg_len[i]);
    if (h->seg)
        munmap(h->seg, h->seg_len);
    if (h->shm_name[0])
        shm_unlink(h->shm_name);
    h->seg = NULL;
    h->shm_name[0] = '\0';
}

size_t c10di_ring_room(c10di_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->hdr->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_acquire);
    return r->cap - (size_t)(head - tail);
}

ssize_t c10di_ring_write(c10di_ring *r, const void *p, size_t len)
{
    uint64_t head = atomic_load_explicit(&r->hdr->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_acquire);
    size_t room = r->cap - (size_t)(head - tail);
    size_t n = len < room ? len : room;
    if (!n)
        return 0;
    size_t at = (size_t)head & (r->cap - 1), first = r->cap - at < n ? r->cap - at : n;
    memcpy(r->data + at, p, first);
    memcpy(r->data, (const uint8_t *)p + first, n - first);
    atomic_store_explicit(&r->hdr->head, head + n, memory_order_release);
    return (ssize_t)n;
}

/* Copies up to len readable bytes into p; the read position is left to
 * the caller. */
static size_t ring_copy(c10di_ring *r, uint64_t tail, void *p, size_t len)
{
    uint64_t head = atomic_load_explicit(&r->hdr->head, memory_order_acquire);
    size_t avail = (size_t)(head - tail);
    size_t n = len < avail ? len : avail;
    if (!n)
        return 0;
    size_t at = (size_t)tail & (r->cap - 1), first = r->cap - at < n ? r->cap - at : n;
    memcpy(p, r->data + at, first);
    memcpy((uint8_t *)p + first, r->data, n - first);
    return n;
}

ssize_t c10di_ring_peek(c10di_ring *r, void *p, size_t len)
{
    return (ssize_t)ring_copy(r, atomic_load_explicit(&r->hdr->tail, memory_order_relaxed), p,
                              len);
}

ssize_t c10di_ring_read(c10di_ring *r, void *p, size_t len)
{
    uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_relaxed);
    size_t n = ring_copy(r, tail, p, len);
    if (n)
        atomic_store_explicit(&r->hdr->tail, tail + n, memory_order_release);
    return (ssize_t)n;
}
