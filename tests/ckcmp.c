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

int main(int argc, char **argv)
{
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
    fprintf(stderr, "usage: ckcmp same A B [DATASET...] | close A B TOL | replicas A | "
                    "finite A | sum A B TOL | attr F NAME\n");
    return 2;
}
