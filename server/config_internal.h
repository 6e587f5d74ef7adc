/* What the command line's two files share; others see config.h:
 *
 *   config_options.c  the options, each written once in one table (its
 *                     names, its --help text, how its argument is taken
 *                     and its range), the options that take theirs with a
 *                     function of their own, and --help made from it
 *   config.c          the parser made from the table: getopt's lists,
 *                     the defaults, each argument taken into its field,
 *                     and the checks across options once all are parsed
 *
 * Adding an option is a row in config_options.c; config.c changes only
 * for a new way of taking an argument or a new check across options. */
#ifndef C10DS_CONFIG_INTERNAL_H
#define C10DS_CONFIG_INTERNAL_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>

/* What the command line says beyond c10ds_config's fields, until the
 * checks across options at the end (NULL: not given). */
typedef struct c10ds_parse_state {
    const char *listen, *db, *token_file;
} c10ds_parse_state;

/* How an option takes its argument. */
typedef enum {
    C10DS_TAKE_TEXT,    /* a copy into a char * field */
    C10DS_TAKE_KEPT,    /* argv's own string, into a c10ds_parse_state field */
    C10DS_TAKE_NUMBER,  /* a decimal in [min, max] into an unsigned or int field */
    C10DS_TAKE_OWN,     /* its own function (own) */
    C10DS_TAKE_HEADING, /* no option: a heading in --help (help) */
} c10ds_take_kind;

/* 0 to go on, 1 to exit 0 (--help, --version), -1 on a usage error (said). */
typedef int (*c10ds_take_fn)(c10ds_config *cfg, c10ds_parse_state *st, const char *arg);

/* One option: its names, its text in --help and how it is taken, each
 * written once. help's lines are "\n"-separated; one that starts with
 * "\n" begins below the option's name (a long name and argument). */
typedef struct c10ds_opt_spec {
    const char *name;
    char letter;     /* its short form, or 0 */
    const char *arg; /* its argument's name in --help; NULL: it takes none */
    const char *help;
    c10ds_take_kind take;
    size_t at;       /* TEXT, NUMBER: the field's offset in c10ds_config; KEPT: in the state */
    size_t width;    /* NUMBER: the field's size, 4 or 8 */
    uint64_t min, max;
    uint64_t def;    /* NUMBER: its default; 0: none, or one made from others after parsing */
    c10ds_take_fn own;
} c10ds_opt_spec;

/* Every option, in --help's order (config_options.c): noptions of them,
 * at most C10DS_CONFIG_MAX_OPTIONS (the size of getopt's lists). */
#define C10DS_CONFIG_MAX_OPTIONS 64
extern const c10ds_opt_spec c10ds_config_options[];
extern const size_t c10ds_config_noptions;

#endif
