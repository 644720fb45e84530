/* Scalar attributes of HDF5 objects, shared by the run record, the
 * checkpoints and dtrain-post. Writers abort through H5_CHECK (they run on
 * files dtrain creates); readers return -1 instead, because a damaged or
 * foreign file must be reported, not crash the program. */
#include "io/h5attr.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"

void h5attr_write_i64(hid_t obj, const char *name, int64_t value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    H5_CHECK(space);
    hid_t attr = H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(attr);
    H5_CHECK(H5Awrite(attr, H5T_NATIVE_INT64, &value));
    H5_CHECK(H5Aclose(attr));
    H5_CHECK(H5Sclose(space));
}

void h5attr_write_string(hid_t obj, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5_CHECK(type);
    H5_CHECK(H5Tset_size(type, H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
    hid_t space = H5Screate(H5S_SCALAR);
    H5_CHECK(space);
    hid_t attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(attr);
    H5_CHECK(H5Awrite(attr, type, &value));
    H5_CHECK(H5Aclose(attr));
    H5_CHECK(H5Sclose(space));
    H5_CHECK(H5Tclose(type));
}

int h5attr_read_i64(hid_t obj, const char *name, int64_t *value)
{
    if (H5Aexists(obj, name) <= 0)
        return dt_err_set("attribute '%s' is missing", name);
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    if (attr < 0)
        return dt_err_set("attribute '%s' cannot be opened", name);
    int rc = 0;
    hid_t ftype = H5Aget_type(attr), space = H5Aget_space(attr);
    hssize_t points = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    H5T_class_t cls = ftype >= 0 ? H5Tget_class(ftype) : H5T_NO_CLASS;
    size_t size = ftype >= 0 ? H5Tget_size(ftype) : 0;
    /* One value, read without HDF5's silent conversions: a float would be
     * truncated and an unsigned 64-bit value above INT64_MAX clipped, and a
     * wider dataspace would write past *value. */
    if (points != 1)
        rc = dt_err_set("attribute '%s' holds %lld values, expected one integer", name,
                        (long long)points);
    else if (cls != H5T_INTEGER || size < 1 || size > 8)
        rc = dt_err_set("attribute '%s' is not an integer of at most 64 bits (HDF5 type "
                        "class %d, %zu bytes)", name, (int)cls, size);
    else if (H5Tget_sign(ftype) == H5T_SGN_NONE) {
        uint64_t u;
        if (H5Aread(attr, H5T_NATIVE_UINT64, &u) < 0)
            rc = dt_err_set("attribute '%s' cannot be read", name);
        else if (u > (uint64_t)INT64_MAX)
            rc = dt_err_set("attribute '%s' %llu out of range, expected %lld..%lld", name,
                            (unsigned long long)u, (long long)INT64_MIN,
                            (long long)INT64_MAX);
        else
            *value = (int64_t)u;
    } else if (H5Aread(attr, H5T_NATIVE_INT64, value) < 0) {
        rc = dt_err_set("attribute '%s' cannot be read", name);
    }
    if (space >= 0)
        H5Sclose(space);
    if (ftype >= 0)
        H5Tclose(ftype);
    H5Aclose(attr);
    return rc;
}

int h5attr_read_string(hid_t obj, const char *name, char *out, size_t len)
{
    if (H5Aexists(obj, name) <= 0)
        return -1;
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    if (attr < 0)
        return -1;
    int rc = -1;
    hid_t ftype = H5Aget_type(attr), space = H5Aget_space(attr);
    /* one string: a wider dataspace would write past the buffers below */
    hssize_t points = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (space >= 0)
        H5Sclose(space);
    if (ftype >= 0 && points == 1 && H5Tget_class(ftype) == H5T_STRING) {
        hid_t mtype = H5Tcopy(H5T_C_S1);
        htri_t vlen = H5Tis_variable_str(ftype);
        /* No conversion exists between ASCII and UTF-8 strings. */
        H5T_cset_t cset = H5Tget_cset(ftype);
        if (mtype >= 0 && (cset < 0 || H5Tset_cset(mtype, cset) < 0)) {
            H5Tclose(mtype);
            mtype = -1;
        }
        if (mtype >= 0 && vlen > 0 && H5Tset_size(mtype, H5T_VARIABLE) >= 0) {
            char *s = NULL;
            if (H5Aread(attr, mtype, &s) >= 0 && s) {
                snprintf(out, len, "%s", s);
                H5free_memory(s);
                rc = 0;
            }
        } else if (mtype >= 0 && vlen == 0) {
            size_t sz = H5Tget_size(ftype);
            char *s = dt_calloc(sz + 1, 1);
            if (sz > 0 && H5Tset_size(mtype, sz + 1) >= 0 && H5Aread(attr, mtype, s) >= 0) {
                snprintf(out, len, "%s", s);
                rc = 0;
            }
            free(s);
        }
        if (mtype >= 0)
            H5Tclose(mtype);
    }
    if (ftype >= 0)
        H5Tclose(ftype);
    H5Aclose(attr);
    return rc;
}
