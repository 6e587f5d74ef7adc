/* A member's state in words (member_state.h). */
#include "member_state.h"

#include <string.h>

static const char *const words[] = {
    [C10DC_MEMBER_UNKNOWN] = "unknown",
    [C10DC_MEMBER_ALIVE] = "alive",
    [C10DC_MEMBER_LEFT] = "left",
    [C10DC_MEMBER_DEAD] = "dead",
};

const char *c10dc_member_state_word(int state)
{
    if (state < 0 || state >= (int)(sizeof words / sizeof *words))
        return words[C10DC_MEMBER_UNKNOWN];
    return words[state];
}

int c10dc_member_state_of_word(const char *word)
{
    for (int i = C10DC_MEMBER_ALIVE; word && i < (int)(sizeof words / sizeof *words); i++)
        if (strcmp(word, words[i]) == 0)
            return i;
    return C10DC_MEMBER_UNKNOWN;
}
