/* Integers read from files, checked in their full width.
 *
 * A value read from a file (a rank in a graph file, a header field, a
 * checkpoint attribute) is parsed or held as int64_t and compared with its
 * allowed range before any narrowing cast, so 2^31, 2^32 or 2^63 written where
 * an int is expected is refused with a message rather than wrapped. Messages
 * follow one form: "<where>: <what> <value> out of range, expected
 * <lo>..<hi>", the value as written in the file. */
#ifndef DT_CORE_PARSE_H
#define DT_CORE_PARSE_H

#include <stdint.h>

/* One decimal integer at *s: blanks (space, tab) skipped, an optional sign,
 * then digits. Returns
 *    0  the value is in [lo, hi]: *v set, *s advanced past the digits;
 *    1  *s holds no integer (nothing set; the caller names its format);
 *   -1  after dt_err_set("FILE:LINE: WHAT N out of range, expected LO..HI")
 *       with N as written, however many digits it has.
 * file and line name the place for the message (line < 1: "FILE: ..."). */
int parse_int64(const char **s, int64_t lo, int64_t hi, const char *file, int64_t line,
                const char *what, int64_t *v);

/* A value already read in full width (a binary header, an HDF5 attribute):
 * 0 if v is in [lo, hi], else -1 after dt_err_set("WHERE: WHAT V out of
 * range, expected LO..HI"). */
int check_int64(int64_t v, int64_t lo, int64_t hi, const char *where, const char *what);

#endif
