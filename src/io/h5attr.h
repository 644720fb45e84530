/* Scalar attributes of HDF5 objects (int64 and UTF-8 strings). */
#ifndef DT_IO_H5ATTR_H
#define DT_IO_H5ATTR_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

void h5attr_write_i64(hid_t obj, const char *name, int64_t value);
/* A variable-length UTF-8 string. */
void h5attr_write_string(hid_t obj, const char *name, const char *value);
/* One integer attribute of at most 64 bits, read in full width: 0, or -1
 * after dt_err_set("attribute 'NAME' ...": missing, not one value, not an
 * integer, or an unsigned value above INT64_MAX); callers prefix the file. */
int h5attr_read_i64(hid_t obj, const char *name, int64_t *value);
/* A variable- or fixed-length string into out (truncated to len); 0 or -1. */
int h5attr_read_string(hid_t obj, const char *name, char *out, size_t len);

#endif
