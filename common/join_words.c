/* The messages of a join region, worded once (join_words.h). */
#include "join_words.h"

#include <stdio.h>

void c10dc_join_list_start(c10dc_join_list *l, char *buf, size_t cap)
{
    *l = (c10dc_join_list){buf, cap, 0, 0};
    if (cap)
        buf[0] = '\0';
}

int c10dc_join_list_add(c10dc_join_list *l, const char *who, uint64_t after)
{
    /* room for one more name, else the list is as long as it gets */
    if (l->named > 8 || l->off + 64 >= l->cap)
        return 0;
    if (l->named++ == 8) {
        snprintf(l->buf + l->off, l->cap - l->off, " and others");
        return 0;
    }
    int n = snprintf(l->buf + l->off, l->cap - l->off, "%s%s joined after %s#%llu",
                     l->named > 1 ? ", " : "", who, l->named > 1 ? "" : "collective ",
                     (unsigned long long)after);
    if (n > 0)
        l->off += (size_t)n < l->cap - l->off ? (size_t)n : l->cap - l->off - 1;
    return 1;
}

void c10dc_join_unshadowable_report(char *buf, size_t cap, const char *group, const char *job,
                                    uint64_t seq, const char *caller, const c10dc_fp *fp,
                                    const char *why, const char *joined)
{
    char f[160];
    snprintf(buf, cap,
             "join in group %s (job %s) at collective #%llu: %s called %s, "
             "which %s; %s (out of inputs). Only all_reduce, reduce, reduce_scatter, barrier and "
             "broadcast from an active rank can run while a member has joined",
             group, job, (unsigned long long)seq, caller, c10dc_fp_format(fp, f, sizeof f), why,
             joined);
}

char *c10dc_join_never_matched(char *buf, size_t cap, uint64_t after, int send)
{
    snprintf(buf, cap, "joined after collective #%llu (out of inputs) and will never %s it",
             (unsigned long long)after, send ? "receive" : "send");
    return buf;
}

const char *c10dc_join_unshadowable(const c10dc_fp *fp, int root_joined)
{
    switch ((c10dc_kind)fp->kind) {
    case C10DC_ALL_REDUCE:
    case C10DC_REDUCE_SCATTER:
    case C10DC_BARRIER:
    case C10DC_MONITORED_BARRIER:
        return NULL;
    case C10DC_BROADCAST:
    case C10DC_REDUCE:
        return root_joined ? "is rooted at a rank that joined" : NULL;
    case C10DC_ALL_GATHER:
    case C10DC_GATHER:
    case C10DC_SCATTER:
    case C10DC_ALL_TO_ALL:
        return "needs data from (or for) every member, and a joined rank has none";
    case C10DC_SEND:
    case C10DC_RECV:
    case C10DC_KIND_COUNT:
        break;
    }
    return "is not a collective a joined rank can shadow";
}
