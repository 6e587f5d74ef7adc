/* A small JSON reader for tests that check c10d-ctl --json: parse, then
 * look values up, so a test asserts what the output means, not how its
 * bytes are laid out. Strict: a syntax error (or trailing garbage) is NULL. */
#ifndef C10D_TEST_JSON_READ_H
#define C10D_TEST_JSON_READ_H

#include <stddef.h>

typedef enum { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ } jv_type;

typedef struct jv {
    jv_type type;
    int boolean;
    double num;
    char *str;          /* JV_STR (unescaped; \u00XX only) */
    struct jv **items;  /* JV_ARR, JV_OBJ (values) */
    char **keys;        /* JV_OBJ */
    size_t n;
} jv;

jv *json_parse(const char *text);
void json_free(jv *v);
/* obj's member key, or NULL (also when obj is not an object). */
const jv *json_get(const jv *obj, const char *key);
/* A string member's text, or NULL. */
const char *json_str(const jv *obj, const char *key);

#endif
