/* Lists of (group, collective number): where a rank stopped in each of its
 * groups when it left, and the GroupSeq messages that carry them and a
 * heartbeat's completed and verified collectives (proto/c10d.proto). */
#include "group/group_seqs.h"

#include <stdlib.h>
#include <string.h>

c10d_status c10di_seqs_put(c10di_seqs *s, const char *group, uint64_t seq)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i].group, group) == 0) {
            s->v[i].seq = seq;
            return C10D_OK;
        }
    c10di_group_seq *grown = realloc(s->v, (s->n + 1) * sizeof *grown);
    if (!grown)
        return c10di_error(C10D_ENOMEM, "out of memory");
    s->v = grown;
    if (!(s->v[s->n].group = strdup(group)))
        return c10di_error(C10D_ENOMEM, "out of memory");
    s->v[s->n++].seq = seq;
    return C10D_OK;
}

int c10di_seqs_get(const c10di_seqs *s, const char *group, uint64_t *seq)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (strcmp(s->v[i].group, group) == 0) {
            *seq = s->v[i].seq;
            return 1;
        }
    return 0;
}

void c10di_seqs_clear(c10di_seqs *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].group);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

c10d_status c10di_seqs_from_pb(c10di_seqs *s, C10dpb__GroupSeq *const *pb, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        c10d_status st = c10di_seqs_put(s, pb[i]->group, pb[i]->seq);
        if (st != C10D_OK)
            return st;
    }
    return C10D_OK;
}

C10dpb__GroupSeq **c10di_seqs_pb(const c10di_seqs *s, c10di_seqs_pb_mem *mem)
{
    mem->msgs = calloc(s->n ? s->n : 1, sizeof *mem->msgs);
    mem->ptrs = calloc(s->n ? s->n : 1, sizeof *mem->ptrs);
    if (!mem->msgs || !mem->ptrs) {
        c10di_seqs_pb_free(mem);
        return NULL;
    }
    for (size_t i = 0; i < s->n; i++) {
        C10dpb__GroupSeq init = C10DPB__GROUP_SEQ__INIT;
        mem->msgs[i] = init;
        mem->msgs[i].group = s->v[i].group;
        mem->msgs[i].seq = s->v[i].seq;
        mem->ptrs[i] = &mem->msgs[i];
    }
    return mem->ptrs;
}

void c10di_seqs_pb_free(c10di_seqs_pb_mem *mem)
{
    free(mem->msgs);
    free(mem->ptrs);
    mem->msgs = NULL;
    mem->ptrs = NULL;
}
