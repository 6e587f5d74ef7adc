/* Just enough JSON output for c10d-ctl --json: strings escaped per RFC 8259,
 * binary values as base64. */
#ifndef C10D_CTL_JSON_H
#define C10D_CTL_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Writes s (n bytes) as a JSON string literal. */
void json_string(FILE *f, const char *s, size_t n);
/* 1 if the bytes are UTF-8 text that reads well as a JSON string. */
int json_is_text(const void *v, size_t n);
/* Writes the bytes as a base64 JSON string literal. */
void json_base64(FILE *f, const void *v, size_t n);
/* Writes "name": and the value as text or, for binary, as "name_base64":. */
void json_value_field(FILE *f, const char *name, const void *v, size_t n);

#endif
