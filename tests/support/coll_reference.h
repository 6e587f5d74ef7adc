/* The reference the collectives battery checks against
 * (support/coll_battery.c), computed locally: typed element access
 * (16-bit floats: exact for the small integers used here; results
 * compared with a tolerance), each rank's inputs, and what each reduce op
 * makes of them. */
#ifndef C10D_TEST_COLL_REFERENCE_H
#define C10D_TEST_COLL_REFERENCE_H

#include <c10d/c10d.h>
#include <stdint.h>

/* Element i of b, a buffer of dt, set from a double; read as one. */
void set_elem(c10d_dtype dt, void *b, int64_t i, double v);
double get_elem(c10d_dtype dt, const void *b, int64_t i);

/* Rank r's input element i for an op. */
double val(c10d_reduce_op op, int r, int64_t i);
/* The reduction over ranks 0..n-1 of element i, as the dtype holds it. */
double expect(c10d_dtype dt, c10d_reduce_op op, int n, int64_t i);
/* got is want: exactly for integers, within the dtype's tolerance for
 * floats. */
int close_enough(c10d_dtype dt, double got, double want);
/* n zeroed elements of dt (room for one when n is 0), for free(). */
void *alloc_t(c10d_dtype dt, int64_t n);

#endif
