/* Test utility: compare checkpoint files.
 *   ckcmp same A.h5 B.h5 [DATASET...]   bit-for-bit equality of datasets
 *   ckcmp close A.h5 B.h5 TOL          params of A (every rank row) vs row 0
 *                                      of B within max-abs TOL (relative to max|B|)
 *   ckcmp replicas A.h5                every rank's params row identical
 *   ckcmp finite A.h5                  params and momentum hold no NaN or Inf
 *   ckcmp attr F.h5 NAME               print the root string attribute NAME
 *                                      (e.g. run.h5's resume_skipped)
 *   ckcmp sum A.h5 B.h5 TOL            the sum over ranks of params in A equals B's
 *                                      within max-abs TOL (relative to max|sum B|), and
 *                                      B's rows are not all equal (something to mix)
 *   ckcmp all A B [NAME:OFF:LEN...]    the same dataset names in A and B, each equal byte
 *                                      for byte, except bytes OFF..OFF+LEN-1 of every row
 *                                      of dataset NAME (e.g. state:24:8, the wall clock of
 *                                      the resume blob), and the same root attributes
 *   ckcmp row0 OLD NEW DATASET [FROM]  every row of NEW's DATASET equals OLD's row 0 bit for bit
 *                                      (of OLD's dataset FROM if given, e.g. params from a
 *                                      leader's array)
 *   ckcmp mean OLD NEW DATASET [FROM]  every row of NEW's DATASET equals the mean of OLD's rows
 *                                      (in double, row order, rounded to float) bit for bit
 *   ckcmp zero F DATASET               every element of F's DATASET is 0 (and it has some)
 *   ckcmp tiles F DATASET OF           each row of F's DATASET is whole copies of the same row
 *                                      of F's dataset OF (at least one), then zeros
 *   ckcmp debias OLD NEW TOL           push-sum: every row of NEW's params is sum x / sum w
 *                                      of OLD's rows (params, push_sum_weight) within
 *                                      relative TOL, and NEW's weights are all 1
 *   ckcmp statesum F OFF               print the sum over rows of the int64 at byte OFF of
 *                                      each row of F's state dataset (e.g. samples drawn)
 *   ckcmp attri F NAME                 print the root integer attribute NAME
 * Exit 0 on success, 1 with a message otherwise. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5attr.h"

static float *read2d(const char *path, const char *name, hsize_t dims[2])
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        fprintf(stderr, "ckcmp: cannot open %s\n", path);
        exit(1);
    }
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) {
        fprintf(stderr, "ckcmp: %s has no dataset %s\n", path, name);
        exit(1);
    }
    hid_t s = H5Dget_space(d);
    if (H5Sget_simple_extent_ndims(s) != 2 || H5Sget_simple_extent_dims(s, dims, NULL) < 0) {
        fprintf(stderr, "ckcmp: %s:%s is not 2-D\n", path, name);
        exit(1);
    }
    float *buf = malloc(dims[0] * dims[1] * sizeof *buf);
    if (!buf || H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        fprintf(stderr, "ckcmp: cannot read %s:%s\n", path, name);
        exit(1);
    }
    H5Sclose(s);
    H5Dclose(d);
    H5Fclose(f);
    return buf;
}

/* ckcmp all: the names of a file's root datasets, or of its root attributes. */
typedef struct names {
    int n;
    char name[64][64];
} names;

static herr_t add_link(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)g, (void)info;
    names *l = data;
    if (l->n < 64)
        snprintf(l->name[l->n++], sizeof l->name[0], "%s", name);
    return 0;
}

static herr_t add_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    return add_link(loc, name, NULL, data) + 0 * (info != NULL);
}

/* The raw bytes of dataset (or attribute, attr set) name, in its file type's
 * size; *rows and *row_bytes get its shape as (first dimension, the rest). */
static unsigned char *read_raw(hid_t f, const char *name, int attr, size_t *rows,
                               size_t *row_bytes, char *type_desc, size_t tlen)
{
    hid_t obj = attr ? H5Aopen(f, name, H5P_DEFAULT) : H5Dopen2(f, name, H5P_DEFAULT);
    if (obj < 0)
        return NULL;
    hid_t ft = attr ? H5Aget_type(obj) : H5Dget_type(obj);
    hid_t sp = attr ? H5Aget_space(obj) : H5Dget_space(obj);
    hsize_t dims[8] = { 1 };
    int nd = H5Sget_simple_extent_ndims(sp);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    if (attr && H5Tget_class(ft) == H5T_STRING) { /* the text, not its pointer */
        H5Tclose(ft);
        H5Sclose(sp);
        H5Aclose(obj);
        char *text = calloc(4096, 1);
        h5attr_read_string(f, name, text, 4096);
        *rows = 1;
        *row_bytes = 4096;
        snprintf(type_desc, tlen, "string");
        return (unsigned char *)text;
    }
    hid_t mt = H5Tget_native_type(ft, H5T_DIR_ASCEND);
    size_t el = H5Tget_size(mt), total = 1;
    for (int i = 0; i < nd; i++)
        total *= dims[i];
    *rows = nd > 0 ? dims[0] : 1;
    *row_bytes = total * el / (*rows ? *rows : 1);
    snprintf(type_desc, tlen, "class %d size %zu rank %d", (int)H5Tget_class(ft), el, nd);
    unsigned char *buf = calloc(total ? total * el : 1, 1);
    herr_t rc = attr ? H5Aread(obj, mt, buf) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    H5Tclose(mt);
    H5Tclose(ft);
    H5Sclose(sp);
    attr ? H5Aclose(obj) : H5Dclose(obj);
    if (rc < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* ckcmp all: 0 if A and B hold the same datasets and root attributes, equal
 * byte for byte outside the ignored ranges. */
static int compare_all(const char *pa, const char *pb, int nign, char **ign)
{
    hid_t fa = H5Fopen(pa, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(pb, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fa < 0 || fb < 0) {
        fprintf(stderr, "ckcmp: cannot open %s\n", fa < 0 ? pa : pb);
        return 1;
    }
    int bad = 0, compared = 0;
    for (int attr = 0; attr < 2; attr++) {
        names la = { 0 }, lb = { 0 };
        if (attr) {
            H5Aiterate2(fa, H5_INDEX_NAME, H5_ITER_INC, NULL, add_attr, &la);
            H5Aiterate2(fb, H5_INDEX_NAME, H5_ITER_INC, NULL, add_attr, &lb);
        } else {
            H5Literate(fa, H5_INDEX_NAME, H5_ITER_INC, NULL, add_link, &la);
            H5Literate(fb, H5_INDEX_NAME, H5_ITER_INC, NULL, add_link, &lb);
        }
        const char *what = attr ? "attribute" : "dataset";
        if (la.n != lb.n) {
            fprintf(stderr, "ckcmp: %s holds %d %ss, %s %d\n", pa, la.n, what, pb, lb.n);
            bad = 1;
        }
        for (int i = 0; i < la.n && i < lb.n; i++) {
            if (strcmp(la.name[i], lb.name[i]) != 0) {
                fprintf(stderr, "ckcmp: %s %s in %s, %s in %s\n", what, la.name[i], pa,
                        lb.name[i], pb);
                bad = 1;
                continue;
            }
            size_t ra, rb, ba, bb;
            char ta[64], tb[64];
            unsigned char *a = read_raw(fa, la.name[i], attr, &ra, &ba, ta, sizeof ta);
            unsigned char *b = read_raw(fb, lb.name[i], attr, &rb, &bb, tb, sizeof tb);
            if (!a || !b || ra != rb || ba != bb || strcmp(ta, tb) != 0) {
                fprintf(stderr, "ckcmp: %s %s: unreadable, or its shape or type differs\n", what,
                        la.name[i]);
                bad = 1;
            } else {
                for (int k = 0; k < nign && !attr; k++) { /* NAME:OFF:LEN */
                    char nm[64];
                    size_t off, len;
                    if (sscanf(ign[k], "%63[^:]:%zu:%zu", nm, &off, &len) == 3 &&
                        !strcmp(nm, la.name[i]))
                        for (size_t r = 0; r < ra; r++)
                            for (size_t j = off; j < off + len && j < ba; j++)
                                a[r * ba + j] = b[r * bb + j] = 0;
                }
                size_t diff = 0;
                for (size_t j = 0; j < ra * ba; j++)
                    diff += a[j] != b[j];
                if (diff) {
                    fprintf(stderr, "ckcmp: %s %s differs between %s and %s (%zu bytes)\n", what,
                            la.name[i], pa, pb, diff);
                    bad = 1;
                } else {
                    printf("%s %s: %zu x %zu bytes identical\n", what, la.name[i], ra, ba);
                    compared++;
                }
            }
            free(a);
            free(b);
        }
    }
    H5Fclose(fa);
    H5Fclose(fb);
    return bad || compared == 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "all"))
        return compare_all(argv[2], argv[3], argc - 4, argv + 4);
    if (argc >= 4 && !strcmp(argv[1], "same")) {
        const char *def[] = { "params", "momentum" };
        int n = argc > 4 ? argc - 4 : 2;
        for (int k = 0; k < n; k++) {
            const char *name = argc > 4 ? argv[4 + k] : def[k];
            hsize_t da[2], db[2];
            float *a = read2d(argv[2], name, da), *b = read2d(argv[3], name, db);
            if (da[0] != db[0] || da[1] != db[1] ||
                memcmp(a, b, da[0] * da[1] * sizeof *a) != 0) {
                size_t diff = 0;
                for (size_t i = 0; da[0] == db[0] && da[1] == db[1] && i < da[0] * da[1]; i++)
                    diff += a[i] != b[i];
                fprintf(stderr, "ckcmp: %s differs between %s and %s (%zu elements)\n", name,
                        argv[2], argv[3], diff);
                return 1;
            }
            printf("%s: %llu x %llu identical\n", name, (unsigned long long)da[0],
                   (unsigned long long)da[1]);
            free(a);
            free(b);
        }
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "close")) {
        hsize_t da[2], db[2];
        float *a = read2d(argv[2], "params", da), *b = read2d(argv[3], "params", db);
        if (da[1] != db[1]) {
            fprintf(stderr, "ckcmp: parameter counts differ\n");
            return 1;
        }
        double tol = atof(argv[4]), worst = 0, scale = 0;
        for (size_t i = 0; i < db[1]; i++)
            scale = fmax(scale, fabs(b[i]));
        for (size_t r = 0; r < da[0]; r++)
            for (size_t i = 0; i < da[1]; i++)
                worst = fmax(worst, fabs((double)a[r * da[1] + i] - b[i]));
        printf("max |A - B| = %.3g (max |B| = %.3g)\n", worst, scale);
        free(a);
        free(b);
        return worst <= tol * scale ? 0 : 1;
    }
    if (argc == 3 && !strcmp(argv[1], "replicas")) {
        hsize_t d[2];
        float *a = read2d(argv[2], "params", d);
        for (size_t r = 1; r < d[0]; r++)
            if (memcmp(a, a + r * d[1], d[1] * sizeof *a) != 0) {
                fprintf(stderr, "ckcmp: rank %zu's parameters differ from rank 0's\n", r);
                return 1;
            }
        printf("%llu replicas identical\n", (unsigned long long)d[0]);
        free(a);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "finite")) {
        const char *names[] = { "params", "momentum" };
        for (int k = 0; k < 2; k++) {
            hsize_t d[2];
            float *a = read2d(argv[2], names[k], d);
            for (size_t i = 0; i < d[0] * d[1]; i++)
                if (!isfinite(a[i])) {
                    fprintf(stderr, "ckcmp: %s:%s[%zu] = %g\n", argv[2], names[k], i, a[i]);
                    return 1;
                }
            free(a);
        }
        printf("params and momentum finite\n");
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "attr")) {
        hid_t f = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
        char text[4096];
        if (f < 0 || h5attr_read_string(f, argv[3], text, sizeof text) != 0) {
            fprintf(stderr, "ckcmp: %s has no readable string attribute %s\n", argv[2], argv[3]);
            return 1;
        }
        H5Fclose(f);
        printf("%s\n", text);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "sum")) {
        hsize_t da[2], db[2];
        float *a = read2d(argv[2], "params", da), *b = read2d(argv[3], "params", db);
        if (da[0] != db[0] || da[1] != db[1]) {
            fprintf(stderr, "ckcmp: shapes differ\n");
            return 1;
        }
        double tol = atof(argv[4]), worst = 0, scale = 0, spread = 0;
        for (size_t i = 0; i < da[1]; i++) {
            double sa = 0, sb = 0; /* in double: the rank order of a float sum is arbitrary */
            for (size_t r = 0; r < da[0]; r++) {
                sa += a[r * da[1] + i];
                sb += b[r * db[1] + i];
                spread = fmax(spread, fabs((double)b[r * db[1] + i] - b[i]));
            }
            worst = fmax(worst, fabs(sa - sb));
            scale = fmax(scale, fabs(sb));
        }
        printf("max |sum A - sum B| = %.3g (max |sum B| = %.3g), rows of B differ by up to "
               "%.3g\n", worst, scale, spread);
        free(a);
        free(b);
        if (spread == 0) {
            fprintf(stderr, "ckcmp: every rank of %s holds the same parameters: the sum "
                            "tests nothing\n", argv[3]);
            return 1;
        }
        return worst <= tol * scale ? 0 : 1;
    }
    if ((argc == 5 || argc == 6) && (!strcmp(argv[1], "row0") || !strcmp(argv[1], "mean"))) {
        hsize_t da[2], db[2];
        float *a = read2d(argv[2], argv[argc - 1], da), *b = read2d(argv[3], argv[4], db);
        if (da[1] != db[1]) {
            fprintf(stderr, "ckcmp: %s has %llu columns in %s, %llu in %s\n", argv[4],
                    (unsigned long long)da[1], argv[2], (unsigned long long)db[1], argv[3]);
            return 1;
        }
        float *want = malloc((da[1] ? da[1] : 1) * sizeof *want);
        for (size_t i = 0; i < da[1]; i++) {
            if (!strcmp(argv[1], "row0")) {
                want[i] = a[i];
                continue;
            }
            double s = 0;
            for (size_t r = 0; r < da[0]; r++)
                s += (double)a[r * da[1] + i];
            want[i] = (float)(s / (double)da[0]);
        }
        size_t bad = 0;
        for (size_t r = 0; r < db[0]; r++)
            bad += memcmp(b + r * db[1], want, db[1] * sizeof *want) != 0;
        free(want);
        free(a);
        free(b);
        if (bad)
            fprintf(stderr, "ckcmp: %zu of %llu rows of %s in %s differ from the %s of %s\n",
                    bad, (unsigned long long)db[0], argv[4], argv[3],
                    !strcmp(argv[1], "row0") ? "row 0" : "row mean", argv[2]);
        return bad ? 1 : 0;
    }
    if (argc == 4 && !strcmp(argv[1], "zero")) {
        hsize_t d[2];
        float *a = read2d(argv[2], argv[3], d);
        size_t nz = 0, all = (size_t)(d[0] * d[1]);
        for (size_t i = 0; i < all; i++)
            nz += a[i] != 0.0f;
        free(a);
        if (nz || !all)
            fprintf(stderr, "ckcmp: %zu of %zu elements of %s in %s are not 0\n", nz, all,
                    argv[3], argv[2]);
        return nz || !all ? 1 : 0;
    }
    if (argc == 5 && !strcmp(argv[1], "tiles")) {
        hsize_t dt[2], dof[2];
        float *a = read2d(argv[2], argv[3], dt), *o = read2d(argv[2], argv[4], dof);
        const size_t n = (size_t)dof[1];
        int bad = dt[0] != dof[0] || n == 0 || dt[1] % n != 0;
        for (size_t r = 0; r < dt[0] && !bad; r++) {
            size_t copies = 0, zeros = 0;
            for (size_t b = 0; b < dt[1] / n; b++) {
                const float *blk = a + r * dt[1] + b * n;
                int zero = 1;
                for (size_t i = 0; i < n; i++)
                    zero &= blk[i] == 0.0f;
                if (!zeros && !memcmp(blk, o + r * n, n * sizeof *blk))
                    copies++;
                else if (zero)
                    zeros++;
                else
                    bad = 1;
            }
            bad |= copies == 0;
        }
        free(a);
        free(o);
        if (bad)
            fprintf(stderr, "ckcmp: the rows of %s in %s are not copies of %s's, then zeros\n",
                    argv[3], argv[2], argv[4]);
        return bad;
    }
    if (argc == 5 && !strcmp(argv[1], "debias")) {
        hsize_t dx[2], dw[2], nx[2], nw[2];
        float *x = read2d(argv[2], "params", dx), *w = read2d(argv[2], "push_sum_weight", dw);
        float *y = read2d(argv[3], "params", nx), *v = read2d(argv[3], "push_sum_weight", nw);
        double tol = atof(argv[4]), worst = 0, scale = 0, sw = 0;
        for (size_t r = 0; r < dw[0]; r++)
            sw += w[r];
        for (size_t i = 0; i < dx[1]; i++) {
            double s = 0;
            for (size_t r = 0; r < dx[0]; r++)
                s += x[r * dx[1] + i];
            for (size_t r = 0; r < nx[0]; r++)
                worst = fmax(worst, fabs(y[r * nx[1] + i] - s / sw));
            scale = fmax(scale, fabs(s / sw));
        }
        int ones = 1;
        for (size_t r = 0; r < nw[0]; r++)
            ones &= v[r] == 1.0f;
        printf("max |new - sum x / sum w| = %.3g (max |sum x / sum w| = %.3g); weights 1: %s\n",
               worst, scale, ones ? "yes" : "no");
        return worst <= tol * scale && ones && nx[1] == dx[1] ? 0 : 1;
    }
    if (argc == 4 && !strcmp(argv[1], "statesum")) {
        hid_t f = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
        size_t rows, rb;
        char desc[64];
        unsigned char *st = f >= 0 ? read_raw(f, "state", 0, &rows, &rb, desc, sizeof desc) : NULL;
        size_t off = (size_t)atoll(argv[3]);
        if (!st || off + 8 > rb) {
            fprintf(stderr, "ckcmp: %s has no state dataset with 8 bytes at %zu\n", argv[2], off);
            return 1;
        }
        long long sum = 0;
        for (size_t r = 0; r < rows; r++) {
            long long v;
            memcpy(&v, st + r * rb + off, sizeof v);
            sum += v;
        }
        printf("%lld\n", sum);
        free(st);
        H5Fclose(f);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "attri")) {
        hid_t f = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
        int64_t v;
        if (f < 0 || h5attr_read_i64(f, argv[3], &v) != 0) {
            fprintf(stderr, "ckcmp: %s has no readable integer attribute %s\n", argv[2], argv[3]);
            return 1;
        }
        H5Fclose(f);
        printf("%lld\n", (long long)v);
        return 0;
    }
    fprintf(stderr, "usage: ckcmp same A B [DATASET...] | close A B TOL | replicas A | "
                    "finite A | sum A B TOL | attr F NAME | all A B [NAME:OFF:LEN...] | "
                    "row0 OLD NEW DATASET [FROM] | mean OLD NEW DATASET [FROM] | zero F DATASET | "
                    "tiles F DATASET OF | debias OLD NEW TOL | statesum F OFF | attri F NAME\n");
    return 2;
}
