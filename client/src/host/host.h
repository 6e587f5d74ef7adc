/* The host backend's insides: links to peers (shared memory on one host,
 * TCP across hosts), the one progress loop that moves bytes both ways at
 * once, and the collective algorithms built on it. */
#ifndef C10DI_HOST_H
#define C10DI_HOST_H

#include "backend/backend.h"

#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Two channels per pair of ranks, so that a user's tagged send/recv never
 * interleaves with a collective's bytes. */
enum { CH_COLL = 0, CH_P2P = 1, CH_COUNT = 2 };

/* A single-producer single-consumer byte ring in shared memory. */
typedef struct c10di_ring_hdr {
    _Atomic uint64_t head; /* bytes ever written (producer) */
    char pad1[56];
    _Atomic uint64_t tail; /* bytes ever read (consumer) */
    char pad2[56];
} c10di_ring_hdr;

typedef struct c10di_ring {
    c10di_ring_hdr *hdr;
    uint8_t *data;
    size_t cap; /* a power of two */
} c10di_ring;

typedef struct c10di_link {
    int shm;                      /* 1: shared memory, 0: TCP */
    c10di_ring out[CH_COUNT];     /* shm: in the peer's segment */
    c10di_ring in[CH_COUNT];      /* shm: in ours */
    /* TCP; -1 until linked. Atomic: a thread that receives for a posted
     * receive reads them while the group's own thread may be linking
     * another peer (both under link_mu when they write). */
    atomic_int fd[CH_COUNT];
    int slot, their_slot;         /* shm: this peer's rings in our segment; ours in its */
    char host[64];
    int pid;
    char addr[64]; /* TCP: where to dial it (known once port is set) */
    int port;      /* 0: its endpoint not fetched yet */
} c10di_link;

typedef struct c10di_unexpected {
    struct c10di_unexpected *next;
    int src, tag;
    size_t len;
    void *data; /* in the same allocation, after it */
} c10di_unexpected;

/* The p2p message a peer is sending this rank, as far as it was read
 * (p2p.c): its frame, then its bytes, into the receive it was matched to,
 * or kept (`data`, then `unexpected` once whole), or dropped (a receive
 * of another size, or one cancelled while its message came). */
typedef struct c10di_p2p_partial {
    uint8_t frame[16]; /* p2p.c's frame: magic, tag, length */
    size_t got;        /* bytes of frame read */
    int placed;        /* the frame was read and a destination chosen */
    c10di_recv *to;    /* the receive it goes to (NULL: kept or dropped) */
    c10di_unexpected *kept; /* or kept, for a receive posted later */
    uint8_t *dst;      /* where its bytes go (NULL: dropped) */
    size_t done;       /* bytes of data read */
} c10di_p2p_partial;

/* Connections being admitted at once (host.h, tcp.c): a stranger's
 * beyond it evicts the oldest, whose deadline is nearest. */
#define C10DI_ADMITTING 8

typedef struct c10di_host {
    const c10di_be_ctx *ctx; /* the group it serves */
    int n, me;
    uint32_t group_hash; /* in every collective's header: a stray group's bytes are refused */
    c10di_link *links;
    /* our shared-memory segment: every peer's incoming rings */
    char shm_published[96]; /* the name peers are told (made at connect) */
    char shm_name[96];      /* the segment made, until unlinked */
    void *seg;
    size_t seg_len, cap[CH_COUNT];
    void **peer_seg;
    size_t *peer_seg_len;
    int listen_fd; /* open for the group's life: TCP links are made at first use */
    /* Accepted connections whose hello has not come whole yet (tcp.c):
     * read without waiting, each given HELLO_DEADLINE_MS, at most
     * C10DI_ADMITTING of them (link_mu). A stranger's silent socket never
     * holds up a peer's link behind it. */
    struct c10di_admitting {
        int fd;
        size_t got;
        uint8_t hello[16];
        int64_t deadline_ms;
    } admitting[C10DI_ADMITTING];
    int n_admitting;
    char addr[64];
    int port;
    uint64_t cookie; /* admission: in every link's hello (the group's secret) */
    /* Making TCP links (dialling a peer, taking one from the listener):
     * the group's own thread and a thread that receives for a posted
     * receive may both need one. Never held while waiting for a peer. */
    pthread_mutex_t link_mu;
    /* The receiving side of the p2p channel (p2p.c): read by whichever
     * thread makes progress (a receive's wait, a send waiting for room,
     * the world's progress thread), one at a time under p2p_mu. */
    pthread_mutex_t p2p_mu;
    c10di_recv *recvs, *recvs_tail; /* posted, no message matched yet, in post order */
    c10di_unexpected *unexpected;   /* p2p messages received before their recv */
    c10di_p2p_partial *partial;     /* per peer */
    uint8_t *sink;                  /* where dropped bytes are read to */
    atomic_int posted;  /* receives posted and not ended (matched ones included) */
    atomic_int waiting; /* threads waiting in c10di_host_recv_wait */
    void *scratch;
    size_t scratch_cap;
    int in_xfer; /* a c10di_xfer is under way on this group (announce's nesting test) */
    void *shadow; /* a joined rank's identity and discard buffers (shadow.c) */
    uint64_t *heard_joined; /* per peer: the `joined` its headers said last (xfer.c) */
    size_t shadow_cap;
} c10di_host;

/* shm.c. A segment holds the rings of this rank's peers on its host
 * only (slots 0..nlocal-1, in rank order), sized by their number. */
void c10di_shm_caps(int nlocal, size_t cap[CH_COUNT]);
c10d_status c10di_shm_create(c10di_host *h, const char *name, int nlocal);
/* Maps peer's segment (made by the peer at its own connect: waited for
 * until the group's deadline) and links to it through the slots. */
c10d_status c10di_shm_attach(c10di_host *h, int peer, const char *name, const c10di_coll *setup);
void c10di_shm_detach(c10di_host *h);
ssize_t c10di_ring_write(c10di_ring *r, const void *p, size_t len);
ssize_t c10di_ring_read(c10di_ring *r, void *p, size_t len);
/* Bytes that can be written now (producer side). */
size_t c10di_ring_room(c10di_ring *r);
/* Copies up to len readable bytes without consuming them. */
ssize_t c10di_ring_peek(c10di_ring *r, void *p, size_t len);

/* host_backend.c: what peer's endpoint says (host, pid, TCP address),
 * into its link. */
c10d_status c10di_host_learn(c10di_host *h, int peer, const ProtobufCBinaryData *ep);

/* tcp.c. TCP links are made when first needed: of a pair the higher rank
 * dials (fetching the peer's endpoint from the coordinator the first
 * time) and the lower takes it on its listener, so a rank links to the
 * peers its algorithms use, not to all N. */
c10d_status c10di_tcp_listen(c10di_host *h);
/* Both channels to peer connected (a no-op for itself and shared memory).
 * Waits until c's deadline or a loss the check hook reports; while it
 * waits it takes other peers' connections and, for a p2p send, reads
 * what peers send this rank (an isend ring goes on). */
c10d_status c10di_tcp_link(c10di_host *h, int peer, const c10di_coll *c);
/* Takes, without waiting, the connections queued on the listener; 1 if
 * any was taken. Nothing if another thread is making a link. */
int c10di_tcp_accept_ready(c10di_host *h);
/* Adds to fds (room for at least 1 + C10DI_ADMITTING) what a wait for a
 * peer's link should poll: the listener and the sockets being admitted;
 * returns how many. */
int c10di_tcp_admission_fds(c10di_host *h, struct pollfd *fds);
/* 1 if both channels to peer are up (or it needs none). */
int c10di_tcp_linked(const c10di_host *h, int peer);
void c10di_tcp_close(c10di_host *h);
/* Asked between the slices of a connect's wait; not C10D_OK ends it. */
typedef c10d_status (*c10di_dial_check)(void *arg);
c10d_status c10di_tcp_dial(const struct sockaddr_storage *sa, socklen_t salen, const char *who,
                           c10di_dial_check check, void *arg, int *fd);

/* xfer.c: sends slen bytes to `to` while receiving rlen bytes from
 * `from` on channel ch (-1 = no peer), until both are done; fails with
 * C10D_EPEERLOST / C10D_ETIMEDOUT through the check hook. */
c10d_status c10di_xfer(c10di_host *h, const c10di_coll *c, int ch, int to, const void *sbuf,
                       size_t slen, int from, void *rbuf, size_t rlen);
/* Join (docs/join.md): whether a peer has begun collective seq, read from
 * the header at the front of its collective channel without consuming it
 * (*found; then *out).
 * Headers of later collectives are passed over (another peer's comes
 * first); anything else is C10D_EDESYNC, a closed link C10D_EPEERLOST. */
c10d_status c10di_host_peek(c10di_host *h, uint64_t seq, int *found, c10di_peeked *out);
/* c's header alone to peer `to`, which waits in join_end for a header and
 * so learns what it cannot take part in (or a monitored barrier to meet).
 * Best effort. */
void c10di_host_announce(c10di_host *h, const c10di_coll *c, int to);
/* Reads up to len bytes from peer on channel ch without waiting: how many
 * (0: none yet), -1 if the link closed. */
ssize_t c10di_try_read(c10di_host *h, int peer, int ch, void *buf, size_t len);
/* Scratch memory owned by h, at least len bytes (valid until the next call). */
void *c10di_scratch(c10di_host *h, size_t len);

/* algos.c */
c10d_status c10di_host_run(c10di_host *h, const c10di_coll *c);
c10d_status c10di_host_barrier(c10di_host *h, const c10di_coll *c);

/* shadow.c: a joined rank's part in c (c->shadow), with its own buffers */
c10d_status c10di_host_shadow(c10di_host *h, const c10di_coll *c);

/* p2p.c: tagged send/recv. Receives are matched as MPI matches them: a
 * message goes to the earliest posted receive that names its sender (or
 * any) and its tag, else it is kept until one is posted. */
c10d_status c10di_p2p_init(c10di_host *h);
c10d_status c10di_host_send(c10di_host *h, const c10di_coll *c);
/* A sync recv (c->root a peer or C10DI_ANY_SOURCE, which becomes the
 * sender): posted behind the posted ones, then waited for until c's
 * deadline. */
c10d_status c10di_host_recv(c10di_host *h, c10di_coll *c);
/* The backend ops of posted receives (backend.h). */
c10d_status c10di_host_recv_post(c10di_host *h, c10di_recv *r);
c10d_status c10di_host_recv_wait(c10di_host *h, c10di_recv *r, const c10di_coll *probe,
                                 int64_t until_ms);
int c10di_host_recv_progress(c10di_host *h);
int c10di_host_recv_cancel(c10di_host *h, c10di_recv *r);
void c10di_host_recv_abort(c10di_host *h, c10d_status st, const char *msg);
/* While a send waits for room: reads what peers are sending this rank,
 * without waiting (1: bytes moved); nothing if another thread is at it. */
int c10di_p2p_drain(c10di_host *h);
void c10di_p2p_free(c10di_host *h);

#endif
