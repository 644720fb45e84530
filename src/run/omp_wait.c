/* The OpenMP waiting policy of a rank (run/omp_wait.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "run/omp_wait.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

/* A positive count from a variable: the whole string a decimal number in
 * 1..INT_MAX; 0 where unset or anything else. */
static int count_of(const char *s)
{
    if (!s || !*s)
        return 0;
    char *end;
    long v = strtol(s, &end, 10);
    return *end == '\0' && v > 0 && v <= INT_MAX ? (int)v : 0;
}

/* SLURM_STEP_TASKS_PER_NODE: "2(x3),1" - the largest task count of a node
 * (this node's is not named; the largest is the cautious share); 0 where
 * it does not read. */
static int max_tasks_per_node(const char *s)
{
    if (!s || !*s)
        return 0;
    int most = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > INT_MAX)
            return 0;
        if (v > most)
            most = (int)v;
        s = end;
        if (*s == '(') { // "(xN)": N nodes with this count
            while (*s && *s != ')')
                s++;
            if (*s != ')')
                return 0;
            s++;
        }
        if (*s == ',')
            s++;
        else if (*s)
            return 0;
    }
    return most;
}

int omp_wait_cpus_owned(int cpus_in_mask, const char *slurm_cpus_per_task,
                        const char *mpi_localnranks, const char *ompi_local_size,
                        const char *slurm_step_tasks_per_node)
{
    if (cpus_in_mask < 1)
        cpus_in_mask = 1;
    const int per_task = count_of(slurm_cpus_per_task);
    if (per_task)
        return per_task < cpus_in_mask ? per_task : cpus_in_mask;
    int local = count_of(mpi_localnranks);
    if (!local)
        local = count_of(ompi_local_size);
    if (!local)
        local = max_tasks_per_node(slurm_step_tasks_per_node);
    if (!local)
        local = 1;
    return cpus_in_mask / local;
}

/* 1 where this process's OpenMP threads should spin (libgomp's default),
 * 0 where they should wait passively; from the process's affinity mask and
 * environment. */
static int omp_wait_spin(void)
{
    cpu_set_t set;
    int cpus = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cpus = CPU_COUNT(&set);
    if (cpus < 1) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cpus = n > 0 && n < INT_MAX ? (int)n : 1;
    }
    return omp_wait_cpus_owned(cpus, getenv("SLURM_CPUS_PER_TASK"), getenv("MPI_LOCALNRANKS"),
                               getenv("OMPI_COMM_WORLD_LOCAL_SIZE"),
                               getenv("SLURM_STEP_TASKS_PER_NODE")) >= 2;
}

void omp_wait_setup(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv("DTRAIN_OMP_REEXEC"))
        return;
    if (omp_wait_spin())
        return;
    // the binary's own path, so the process keeps its name ("dtrain", not "exe")
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0 || (size_t)len >= sizeof self - 1)
        return;
    self[len] = '\0';
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0 || setenv("DTRAIN_OMP_REEXEC", "1", 1) != 0)
        return;
    execv(self, argv);
    // not re-executed: run on with the default policy
}
