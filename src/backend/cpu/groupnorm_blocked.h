/* GroupNorm on channel-blocked activations, for one block size: included by
 * backend/cpu/groupnorm.c once per size with L (the lanes of a block, 8 or 16) and
 * GN_FN / GN_BODY (names carrying L) defined. */
typedef float GN_VF __attribute__((vector_size(4 * L), aligned(4)));
typedef int GN_VI __attribute__((vector_size(4 * L), aligned(4)));
#define GN_SPLAT(a) ((GN_VF){ 0 } + (float)(a))
#define ld(p) (*(const GN_VF *)(p))
#define st(p, v) (*(GN_VF *)(p) = (v))

/* ---- channel-blocked layout -------------------------------------------------
 * One sample's (C/16, HW, 16) values: the sixteen channels of a block sit side
 * by side, so every loop below runs over one block's HW pixels with the sixteen
 * lanes as one GN_VF and per-lane constants (the group of lane l is that of
 * channel L cb + l). Per-channel sums are taken in float over GN_CHUNK pixels
 * at a time and gathered in double, as precise as the plain kernel's
 * eight-lane sums. */

/* The gradient reaching the GroupNorm: dy, masked by the ReLU's output y (y > 0;
 * NULL: no ReLU). */
#define GN_DY(dy, y, i)                                                                  \
    ((y) ? (GN_VF)((GN_VI)ld((dy) + (i)) & (ld((y) + (i)) > GN_SPLAT(0.0f)))              \
         : ld((dy) + (i)))

/* out[l] += a[l] */
#define gather(out, a)                                                                   \
    do {                                                                                 \
        const GN_VF a_ = (a);                                                             \
        for (int l_ = 0; l_ < L; l_++)                                                   \
            (out)[l_] += a_[l_];                                                         \
    } while (0)

/* out[l] = sum_j (v[j][l] - c[l]) (sq: its square) over the block's HW pixels */
DT_KERNEL_BODY void GN_BODY(gn_blk_sums)(const float *v, int HW, const float *c, int sq, double *out)
{
    const GN_VF cv = ld(c);
    for (int l = 0; l < L; l++)
        out[l] = 0.0;
    for (int j0 = 0; j0 < HW; j0 += GN_CHUNK) {
        const int j1 = j0 + GN_CHUNK < HW ? j0 + GN_CHUNK : HW;
        GN_VF a = GN_SPLAT(0.0f), b = GN_SPLAT(0.0f);
        if (sq) {
            int j = j0;
            for (; j + 2 <= j1; j += 2) { // two chains: the add latency, not the loads, bounds one
                const GN_VF d0 = ld(v + (size_t)j * L) - cv, d1 = ld(v + (size_t)(j + 1) * L) - cv;
                a += d0 * d0;
                b += d1 * d1;
            }
            for (; j < j1; j++) {
                const GN_VF d = ld(v + (size_t)j * L) - cv;
                a += d * d;
            }
        } else {
            int j = j0;
            for (; j + 2 <= j1; j += 2) {
                a += ld(v + (size_t)j * L) - cv;
                b += ld(v + (size_t)(j + 1) * L) - cv;
            }
            for (; j < j1; j++)
                a += ld(v + (size_t)j * L) - cv;
        }
        gather(out, a + b);
    }
}
DT_KERNEL_VARIANTS(GN_FN(gn_blk_sums), (const float *v, int HW, const float *c, int sq, double *out), (v, HW, c, sq, out));

/* sdy[l] = sum_j g, sdyx[l] = sum_j g (x - m[l]) over the block's pixels, g the
 * gradient dy masked by the ReLU output y (NULL: no ReLU) */
DT_KERNEL_BODY void GN_BODY(gn_blk_grad_sums)(const float *x, const float *y, const float *dy, int HW,
                                       const float *m, double *sdy, double *sdyx)
{
    const GN_VF mv = ld(m);
    for (int l = 0; l < L; l++)
        sdy[l] = sdyx[l] = 0.0;
    for (int j0 = 0; j0 < HW; j0 += GN_CHUNK) {
        const int j1 = j0 + GN_CHUNK < HW ? j0 + GN_CHUNK : HW;
        GN_VF a = GN_SPLAT(0.0f), c = GN_SPLAT(0.0f);
        for (int j = j0; j < j1; j++) {
            const GN_VF g = GN_DY(dy, y, (size_t)j * L);
            a += g;
            c += g * (ld(x + (size_t)j * L) - mv);
        }
        gather(sdy, a);
        gather(sdyx, c);
    }
}
DT_KERNEL_VARIANTS(GN_FN(gn_blk_grad_sums), (const float *x, const float *y, const float *dy, int HW, const float *m, double *sdy, double *sdyx), (x, y, dy, HW, m, sdy, sdyx));

/* y = [relu](x a + sh [+ skip]) over the block's pixels */
DT_KERNEL_BODY void GN_BODY(gn_blk_affine)(const float *x, int HW, const float *a, const float *sh,
                                    const float *skip, int relu, float *y)
{
    const GN_VF av = ld(a), sv = ld(sh), zero = GN_SPLAT(0.0f);
    for (int j = 0; j < HW; j++) {
        GN_VF v = ld(x + (size_t)j * L) * av + sv;
        if (skip)
            v += ld(skip + (size_t)j * L);
        if (relu) // v < 0 ? 0 : v, so a NaN passes through as in the plain ReLU
            v = (GN_VF)((GN_VI)v & ~(v < zero));
        st(y + (size_t)j * L, v);
    }
}
DT_KERNEL_VARIANTS(GN_FN(gn_blk_affine), (const float *x, int HW, const float *a, const float *sh, const float *skip, int relu, float *y), (x, HW, a, sh, skip, relu, y));

/* With g the masked gradient (GN_DY): dskip += g, and
 * dx += k1 g - k2 (x - m) + k0 over the block's pixels; a fresh buffer is
 * written instead (GN_FRESH_DX, GN_FRESH_SKIP), not read. */
DT_KERNEL_BODY void GN_BODY(gn_blk_dx)(const float *x, const float *y, const float *dy, int HW,
                                const float *k0, const float *k1, const float *k2,
                                const float *m, float *dx, float *dskip, int fresh)
{
    const GN_VF v0 = ld(k0), v1 = ld(k1), v2 = ld(k2), vm = ld(m), zero = GN_SPLAT(0.0f);
    const int dx_fresh = fresh & GN_FRESH_DX, skip_fresh = fresh & GN_FRESH_SKIP;
    for (int j = 0; j < HW; j++) {
        const size_t i = (size_t)j * L;
        const GN_VF g = GN_DY(dy, y, i);
        if (dskip)
            st(dskip + i, (skip_fresh ? zero : ld(dskip + i)) + g);
        if (dx)
            st(dx + i, (dx_fresh ? zero : ld(dx + i)) + (v1 * g - v2 * (ld(x + i) - vm) + v0));
    }
}
DT_KERNEL_VARIANTS(GN_FN(gn_blk_dx), (const float *x, const float *y, const float *dy, int HW, const float *k0, const float *k1, const float *k2, const float *m, float *dx, float *dskip, int fresh), (x, y, dy, HW, k0, k1, k2, m, dx, dskip, fresh));

/* Samples are independent: with compute.threads > 1 they are shared out. */
static void GN_FN(groupnorm_forward_blocked)(int B, int C, int HW, int G, const float *x,
                                      const float *gamma, const float *beta, const float *skip,
                                      int relu, float *y, float *mean, float *rstd)
{
    const int Cg = C / G, CB = C / L;
    const double n = (double)Cg * HW;
#pragma omp parallel for if (B > 1 && (size_t)C * HW >= DT_PAR_CHUNK / 4) schedule(static)
    for (int b = 0; b < B; b++) {
        double cs[C];
        float m[G], rs[G];
        float lane[L] __attribute__((aligned(4 * L)));
        const size_t off = (size_t)b * C * HW;
        const float *xs = x + off;
        // two passes, the second about the group mean (see the plain kernel)
        for (int l = 0; l < L; l++)
            lane[l] = 0.0f;
        for (int cb = 0; cb < CB; cb++)
            DT_KERNEL(GN_FN(gn_blk_sums))(xs + (size_t)cb * HW * L, HW, lane, 0, cs + cb * L);
        for (int g = 0; g < G; g++) {
            double s = 0.0;
            for (int c = 0; c < Cg; c++)
                s += cs[g * Cg + c];
            m[g] = n > 0.0 ? (float)(s / n) : 0.0f;
        }
        for (int cb = 0; cb < CB; cb++) {
            for (int l = 0; l < L; l++)
                lane[l] = m[(cb * L + l) / Cg];
            DT_KERNEL(GN_FN(gn_blk_sums))(xs + (size_t)cb * HW * L, HW, lane, 1, cs + cb * L);
        }
        for (int g = 0; g < G; g++) {
            double ss = 0.0;
            for (int c = 0; c < Cg; c++)
                ss += cs[g * Cg + c];
            rs[g] = (float)(1.0 / sqrt((n > 0.0 ? ss / n : 0.0) + GN_EPS));
            mean[(size_t)b * G + g] = m[g];
            rstd[(size_t)b * G + g] = rs[g];
        }
        for (int cb = 0; cb < CB; cb++) {
            float a[L] __attribute__((aligned(4 * L))), sh[L] __attribute__((aligned(4 * L)));
            for (int l = 0; l < L; l++) {
                const int c = cb * L + l, g = c / Cg;
                a[l] = rs[g] * gamma[c];
                sh[l] = beta[c] - m[g] * a[l];
            }
            const size_t o = off + (size_t)cb * HW * L;
            DT_KERNEL(GN_FN(gn_blk_affine))(x + o, HW, a, sh, skip ? skip + o : NULL, relu, y + o);
        }
    }
}

/* Per sample in parallel: the channel sums and dx; then dgamma and dbeta are
 * summed over the samples in order, so the result does not depend on how
 * many threads ran. */
static void GN_FN(groupnorm_backward_blocked)(int B, int C, int HW, int G, const float *x,
                                       const float *gamma, const float *mean,
                                       const float *rstd, const float *y, const float *dy,
                                       float *dx, float *dskip, int fresh, float *dgamma,
                                       float *dbeta)
{
    const int Cg = C / G, CB = C / L;
    const double n = (double)Cg * HW;
    double *part = dt_malloc(2 * (size_t)B * C * sizeof *part); // (B, 2, C): sdy, sdyx
#pragma omp parallel for if (B > 1 && (size_t)C * HW >= DT_PAR_CHUNK / 4) schedule(static)
    for (int b = 0; b < B; b++) {
        double *sdy = part + 2 * (size_t)b * C, *sdyx = sdy + C;
        double sum_gd[G], sum_gdx[G];
        float lane[L] __attribute__((aligned(4 * L)));
        const size_t off = (size_t)b * C * HW;
        const float *m = mean + (size_t)b * G, *rs = rstd + (size_t)b * G;
        for (int cb = 0; cb < CB; cb++) {
            for (int l = 0; l < L; l++)
                lane[l] = m[(cb * L + l) / Cg];
            const size_t o = off + (size_t)cb * HW * L;
            DT_KERNEL(GN_FN(gn_blk_grad_sums))(x + o, y ? y + o : NULL, dy + o, HW, lane, sdy + cb * L,
                             sdyx + cb * L);
        }
        for (int g = 0; g < G; g++)
            sum_gd[g] = sum_gdx[g] = 0.0;
        for (int c = 0; c < C; c++) {
            const int g = c / Cg;
            sdyx[c] *= rs[g]; // sum dy xhat
            sum_gd[g] += gamma[c] * sdy[c];
            sum_gdx[g] += gamma[c] * sdyx[c];
        }
        if ((!dx && !dskip) || n == 0.0)
            continue;
        for (int cb = 0; cb < CB; cb++) {
            float k0[L] __attribute__((aligned(4 * L))), k1[L] __attribute__((aligned(4 * L)));
            float k2[L] __attribute__((aligned(4 * L))), ml[L] __attribute__((aligned(4 * L)));
            for (int l = 0; l < L; l++) {
                const int c = cb * L + l, g = c / Cg;
                const float mgd = (float)(sum_gd[g] / n), mgdx = (float)(sum_gdx[g] / n);
                k1[l] = rs[g] * gamma[c];
                k2[l] = rs[g] * rs[g] * mgdx;
                k0[l] = -rs[g] * mgd;
                ml[l] = m[g];
            }
            const size_t o = off + (size_t)cb * HW * L;
            DT_KERNEL(GN_FN(gn_blk_dx))(x + o, y ? y + o : NULL, dy + o, HW, k0, k1, k2, ml, dx ? dx + o : NULL,
                      dskip ? dskip + o : NULL, fresh);
        }
    }
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            if (dgamma)
                dgamma[c] += (float)part[(2 * (size_t)b + 1) * C + c];
            if (dbeta)
                dbeta[c] += (float)part[2 * (size_t)b * C + c];
        }
    free(part);
}

#undef GN_SPLAT
#undef ld
#undef st
#undef GN_DY
#undef gather
