#include "url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the host and the port are in url: the host's len bytes from *host;
 * *port the port's text, or NULL when there is none. */
static void parse(const char *url, const char **host, size_t *len, const char **port)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *end;
    if (*p == '[') {
        p++;
        end = strchr(p, ']');
        *port = end && end[1] == ':' ? end + 2 : NULL;
    } else {
        end = strrchr(p, ':');
        *port = end ? end + 1 : NULL;
    }
    *host = p;
    *len = end ? (size_t)(end - p) : strlen(p);
}

int c10dc_url_is_tcp(const char *url)
{
    const char *scheme_end = strstr(url, "://"), *tcp = strstr(url, "tcp");
    return scheme_end && tcp && tcp < scheme_end;
}

int c10dc_url_split(const char *url, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *h, *p;
    size_t len;
    parse(url, &h, &len, &p);
    if (!p)
        return -1;
    snprintf(port, portlen, "%s", p);
    snprintf(host, hostlen, "%.*s", (int)len, h);
    return 0;
}

void c10dc_url_host(const char *url, char *out, size_t outlen)
{
    const char *h, *p;
    size_t len;
    parse(url, &h, &len, &p);
    snprintf(out, outlen, "%.*s", (int)len, h);
}

long c10dc_url_port(const char *url)
{
    const char *h, *p;
    size_t len;
    parse(url, &h, &len, &p);
    if (!p)
        return -1;
    char *end;
    long port = strtol(p, &end, 10);
    return end == p || *end || port < 1 || port > 65535 ? -1 : port;
}

int c10dc_url_list_next(const char **list, const char **elem, size_t *len)
{
    const char *p = *list;
    if (!p)
        return 0;
    const char *comma = strchr(p, ',');
    *elem = p;
    *len = comma ? (size_t)(comma - p) : strlen(p);
    *list = comma ? comma + 1 : NULL;
    return 1;
}
