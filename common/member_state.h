/* common/member_state.h — a member's state in words, one table for the
 * coordinator and the library. The numbers are proto's MemberState
 * (c10d.proto) and the public c10d_member_state (c10d/jobs.h): each side
 * checks its own enum against these at compile time. The words are what
 * SQLite's members.state holds (server/groups/groups.c converts there, and only
 * there), what c10d_member_state_name() returns and what c10d-ctl prints. */
#ifndef C10DC_MEMBER_STATE_H
#define C10DC_MEMBER_STATE_H

enum {
    C10DC_MEMBER_UNKNOWN = 0, /* a peer sent none (or one newer than this table) */
    C10DC_MEMBER_ALIVE = 1,
    C10DC_MEMBER_LEFT = 2,
    C10DC_MEMBER_DEAD = 3,
};

/* "alive", "left", "dead"; "unknown" for any other number. */
const char *c10dc_member_state_word(int state);
/* The number of a word (as stored), C10DC_MEMBER_UNKNOWN if it is none. */
int c10dc_member_state_of_word(const char *word);

#endif
