/* MPI_Allreduce against the exchanges it is made of, on the emulated cluster
 * (bench/network): the time of one MPI_Sendrecv of half and of the whole
 * vector with the neighbour (rank ^ 1), of an Isend/Irecv pair of the whole
 * vector, and of one MPI_Allreduce (in place, MPI_SUM) of the vector, 6 times
 * each; prints min and median on rank 0. The vector is the network
 * benchmark's mlp (10,510,346 floats). Even rank counts only.
 *
 *   mpicc -O2 -o /tmp/allreduce_probe bench/network/allreduce_probe.c
 *   (. bench/network/netns.sh; net_up 2 && net_shape 1gbit &&
 *    UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 MPIR_CVAR_NOLOCAL=1 \
 *    mpiexec -n 2 bench/network/netns-exec.sh /tmp/allreduce_probe; net_down)
 *
 * RESULTS.md, section 12b, has what it showed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t N = 10510346; float *a = calloc(N, 4), *b = calloc(N, 4);
    int peer = r ^ 1; enum { R = 6 }; double t[R];
    if (n % 2) { if (r == 0) fprintf(stderr, "allreduce_probe: an even number of ranks\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    const char *name[] = {"sendrecv N/2", "sendrecv N", "isend+irecv N", "allreduce N"};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < R; i++) {
            MPI_Barrier(MPI_COMM_WORLD); double t0 = MPI_Wtime();
            if (k == 0) MPI_Sendrecv(a, N/2, MPI_FLOAT, peer, 0, b, N/2, MPI_FLOAT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (k == 1) MPI_Sendrecv(a, N, MPI_FLOAT, peer, 0, b, N, MPI_FLOAT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (k == 2) { MPI_Request q[2]; MPI_Irecv(b, N, MPI_FLOAT, peer, 0, MPI_COMM_WORLD, &q[0]); MPI_Isend(a, N, MPI_FLOAT, peer, 0, MPI_COMM_WORLD, &q[1]); MPI_Waitall(2, q, MPI_STATUSES_IGNORE); }
            if (k == 3) MPI_Allreduce(MPI_IN_PLACE, a, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t[i] = MPI_Wtime() - t0;
        }
        qsort(t, R, sizeof t[0], cmp);
        if (r == 0) printf("%-14s min %.3f median %.3f s  (%.0f MB/s per direction at min)\n", name[k], t[0], t[R/2], (k == 0 ? N/2 : N) * 4.0 / t[0] / 1e6);
    }
    MPI_Finalize(); return 0;
}
