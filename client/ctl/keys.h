/* c10d-ctl's key-value commands: keys, get, set, del, add. Each returns
 * its exit code, after reporting a failure (output.h). */
#ifndef C10D_CTL_KEYS_H
#define C10D_CTL_KEYS_H

#include "args.h"

#include <c10d/c10d.h>

/* `keys [--job J] [PREFIX]`: all keys, those under PREFIX; with --job,
 * those of J's current run (under PREFIX in its store). */
int cmd_keys(c10d_store *s, const ctl_args *a, long long limit);
int cmd_get(c10d_store *s, const char *key, int wait);
/* A '-' value is read from stdin. */
int cmd_set(c10d_store *s, const char *key, const char *value);
int cmd_del(c10d_store *s, const char *key);
int cmd_add(c10d_store *s, const char *key, long long delta);

#endif
