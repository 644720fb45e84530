#include <limits.h>
#include <stdlib.h>

#include "comm/transport.h"
#include "core/watchdog.h"
#include "core/error.h"
#ifdef DTRAIN_SIM
#include "sim/sim.h"
#endif

/* MPI counts are int: messages above this many floats go in pieces. */
#define CHUNK ((size_t)1 << 30)

#ifdef DTRAIN_SIM
/* The simulator's vectors are shared by every simulated rank and their
 * contents do not matter (core/vec.h), but SMPI's collectives would still
 * move and add them for real, nearly all the wall time of a large allreduce
 * simulation (32 ranks, 25.6 M floats, 2 steps: 34.7 s of 35):
 * - MPI_IN_PLACE: SMPI copies the vector into a zeroed private buffer and
 *   the algorithm copies it back; SimGrid 3.32 skips no copy between shared
 *   buffers. Passed as its own send buffer, the copy is onto itself, which
 *   the C library's memmove skips;
 * - MPI_SUM: SMPI adds for real; a commutative operator that adds nothing
 *   leaves its choice of algorithm (it asks only whether the operator
 *   commutes) and every message as they were.
 * Simulated times are those of a real sum (8 ranks, eth10g: 0.461208 s per
 * iteration, 32 ranks 0.479145 s); 32 ranks take 0.4 s of wall. Globals
 * are per simulated rank (SMPI privatizes them). */
static void sim_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)in, (void)inout, (void)len, (void)type;
}

static MPI_Op vec_sum(void)
{
    static MPI_Op op = MPI_OP_NULL;
    if (op == MPI_OP_NULL)
        MPI_CHECK(MPI_Op_create(sim_sum, 1, &op));
    return op;
}

static const void *in_place(const float *buf)
{
    return buf;
}
#else
static MPI_Op vec_sum(void) { return MPI_SUM; }
static const void *in_place(const float *buf) { (void)buf; return MPI_IN_PLACE; }
#endif

static void mpi_allreduce_sum(dt_transport *t, float *buf, size_t n)
{
    watchdog_phase("a collective (allreduce over the group)", -1);
    for (size_t off = 0; off < n; off += CHUNK) {
        int cnt = (int)(n - off < CHUNK ? n - off : CHUNK);
        MPI_CHECK(MPI_Allreduce(in_place(buf + off), buf + off, cnt, MPI_FLOAT, vec_sum(), t->comm));
    }
}

static void mpi_reduce_sum(dt_transport *t, float *buf, size_t n, int root)
{
    watchdog_phase("a collective (reduce to rank %d)", root);
    for (size_t off = 0; off < n; off += CHUNK) {
        int cnt = (int)(n - off < CHUNK ? n - off : CHUNK);
        MPI_CHECK(MPI_Reduce(t->rank == root ? in_place(buf + off) : buf + off, buf + off, cnt,
                             MPI_FLOAT, vec_sum(), root, t->comm));
    }
}

static void mpi_bcast(dt_transport *t, float *buf, size_t n, int root)
{
    watchdog_phase("a collective (broadcast from rank %d)", root);
    for (size_t off = 0; off < n; off += CHUNK) {
        int cnt = (int)(n - off < CHUNK ? n - off : CHUNK);
        MPI_CHECK(MPI_Bcast(buf + off, cnt, MPI_FLOAT, root, t->comm));
    }
}

static void add_request(dt_request *r, MPI_Request q)
{
    if (r->n == (int)(sizeof r->req / sizeof r->req[0]))
        DT_FATAL("transport: more than %d pieces in one request", r->n);
    r->req[r->n++] = q;
}

/* n floats of buf to (recv 0) or from (recv 1) peer, in pieces of at most
 * piece floats (one, empty, where n is 0), each a request added to r */
static void post_pieces(dt_transport *t, float *buf, size_t n, int peer, int tag, size_t piece,
                        int recv, dt_request *r)
{
    for (size_t off = 0; off == 0 || off < n; off += piece) {
        MPI_Request q;
        int cnt = (int)(n - off < piece ? n - off : piece);
        if (recv)
            MPI_CHECK(MPI_Irecv(buf + off, cnt, MPI_FLOAT, peer, tag, t->comm, &q));
        else
            MPI_CHECK(MPI_Isend(buf + off, cnt, MPI_FLOAT, peer, tag, t->comm, &q));
        add_request(r, q);
    }
}

static void mpi_isend(dt_transport *t, const float *buf, size_t n, int peer, int tag,
                      dt_request *r)
{
    r->n = 0;
    r->peer = peer;
    r->recv = 0;
    post_pieces(t, (float *)buf, n, peer, tag, CHUNK, 0, r); /* only read */
}

static void mpi_irecv(dt_transport *t, float *buf, size_t n, int peer, int tag, dt_request *r)
{
    r->n = 0;
    r->peer = peer;
    r->recv = 1;
    post_pieces(t, buf, n, peer, tag, CHUNK, 1, r);
}

#ifdef DTRAIN_SIM
enum { TAG_SIM_GATHER = 0x51a7 };

/* SMPI's default bandwidth and latency factors (smpi/bw-factor,
 * smpi/lat-factor) change with the message size up to 65,472 bytes and are
 * constant above: one message per rank in place of per-peer messages of at
 * least this many bytes keeps every factor, hence the simulated time. */
#define SIM_LINKS_MIN_BYTES 65472
/* SMPI 3.32 takes a send whose size in bytes, cast to int, is under
 * smpi/send-is-detached-thresh as a small one and copies it into a buffer
 * of its own: a message of 2 GiB or more (negative as an int) is copied,
 * 2.3 GB a rank at 512 ranks of top-k codes. Pieces stay below 2 GiB. */
#define SIM_PIECE ((size_t)INT_MAX / sizeof(float))

int transport_sim_links(dt_transport *t, const float *send, size_t nsend, float *recv,
                        size_t nrecv, size_t each, int tag, dt_request *r)
{
    if (!sim_config()->gather_links || t->size < 2 || each * sizeof(float) < SIM_LINKS_MIN_BYTES)
        return 0;
    const int next = (t->rank + 1) % t->size, prev = (t->rank + t->size - 1) % t->size;
    r->n = 0;
    r->peer = -1;
    r->recv = 1;
    post_pieces(t, recv, nrecv, prev, tag, SIM_PIECE, 1, r);
    post_pieces(t, (float *)send, nsend, next, tag, SIM_PIECE, 0, r); /* only read */
    return 1;
}
#endif

/* One MPI_Iallgather per CHUNK floats of each rank's part: piece j of every
 * rank lands at recv + r n + j CHUNK, through a receive type of cnt floats
 * whose extent is n floats (rank r's piece starts r such extents in). */
static void mpi_iallgather(dt_transport *t, const float *send, size_t n, float *recv,
                           dt_request *r)
{
#ifdef DTRAIN_SIM
    /* sim.gather = links: (size - 1) n floats from recv to the next rank, into
     * recv + n of the next rank (every rank's recv holds size n floats; what
     * send holds is not sent, as the contents mean nothing here) */
    if (transport_sim_links(t, recv, (size_t)(t->size - 1) * n, recv + n,
                            (size_t)(t->size - 1) * n, n, TAG_SIM_GATHER, r))
        return;
#endif
    r->n = 0;
    r->peer = -1;
    r->recv = 1;
    for (size_t off = 0; off == 0 || off < n; off += CHUNK) {
        MPI_Request q;
        int cnt = (int)(n - off < CHUNK ? n - off : CHUNK);
        if (n <= CHUNK) {
            MPI_CHECK(MPI_Iallgather(send, cnt, MPI_FLOAT, recv, cnt, MPI_FLOAT, t->comm, &q));
        } else {
            MPI_Datatype piece, strided;
            MPI_CHECK(MPI_Type_contiguous(cnt, MPI_FLOAT, &piece));
            MPI_CHECK(MPI_Type_create_resized(piece, 0, (MPI_Aint)(n * sizeof(float)), &strided));
            MPI_CHECK(MPI_Type_commit(&strided));
            MPI_CHECK(MPI_Iallgather(send + off, cnt, MPI_FLOAT, recv + off, 1, strided, t->comm,
                                     &q));
            /* freed now, released by MPI when the operation completes */
            MPI_CHECK(MPI_Type_free(&strided));
            MPI_CHECK(MPI_Type_free(&piece));
        }
        add_request(r, q);
    }
}

static void mpi_waitall(dt_transport *t, dt_request *r, int count)
{
    (void)t;
    MPI_Status st[8];
    for (int i = 0; i < count; i++) {
        if (r[i].peer < 0)
            watchdog_phase("a collective (all-gather over the group)", -1);
        else
            watchdog_phase(r[i].recv ? "a message from rank %d" : "rank %d to receive a message",
                           r[i].peer);
        MPI_CHECK(MPI_Waitall(r[i].n, r[i].req, st));
        r[i].n = 0;
    }
}

static void mpi_barrier(dt_transport *t)
{
    watchdog_phase("a collective (barrier)", -1);
    MPI_CHECK(MPI_Barrier(t->comm));
}

dt_transport *transport_mpi_create(MPI_Comm comm)
{
    dt_transport *t = dt_calloc(1, sizeof *t);
    t->name = "mpi";
    MPI_CHECK(MPI_Comm_dup(comm, &t->comm));
    MPI_CHECK(MPI_Comm_rank(t->comm, &t->rank));
    MPI_CHECK(MPI_Comm_size(t->comm, &t->size));
    t->allreduce_sum = mpi_allreduce_sum;
    t->reduce_sum = mpi_reduce_sum;
    t->bcast = mpi_bcast;
    t->isend = mpi_isend;
    t->irecv = mpi_irecv;
    t->iallgather = mpi_iallgather;
    t->waitall = mpi_waitall;
    t->barrier = mpi_barrier;
    return t;
}

void transport_free(dt_transport *t)
{
    if (!t)
        return;
    if (t->destroy)
        t->destroy(t);
    MPI_CHECK(MPI_Comm_free(&t->comm));
    free(t);
}
