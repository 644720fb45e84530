/* The OpenMP waiting policy's share of CPUs (run/omp_wait.h): a rank spins
 * only where it owns two CPUs or more. */
#include "run/omp_wait.h"

#include "tap.h"

int main(void)
{
    /* alone on a 2-CPU mask: both are its own */
    CHECK(omp_wait_cpus_owned(2, NULL, NULL, NULL, NULL) == 2, "one rank, 2 CPUs: owns 2");
    /* mpiexec -n 2 on the same 2 CPUs: one each */
    CHECK(omp_wait_cpus_owned(2, NULL, "2", NULL, NULL) == 1, "MPI_LOCALNRANKS 2 on 2 CPUs: 1");
    CHECK(omp_wait_cpus_owned(16, NULL, "4", NULL, NULL) == 4, "MPI_LOCALNRANKS 4 on 16: 4");
    CHECK(omp_wait_cpus_owned(16, NULL, "3", NULL, NULL) == 5, "3 ranks on 16: 5 (rounded down)");
    CHECK(omp_wait_cpus_owned(16, NULL, NULL, "8", NULL) == 2, "Open MPI's local size 8 on 16: 2");
    CHECK(omp_wait_cpus_owned(16, NULL, "2", "8", NULL) == 8, "MPICH's count before Open MPI's");
    /* Slurm: cpus-per-task is the task's own, whether srun bound the mask to
     * it or mpiexec left the allocation's CPUs in every mask */
    CHECK(omp_wait_cpus_owned(2, "2", NULL, NULL, "4") == 2, "srun -c 2, mask bound to 2: owns 2");
    CHECK(omp_wait_cpus_owned(8, "2", "4", NULL, NULL) == 2, "mpiexec in sbatch -c 2: owns 2");
    CHECK(omp_wait_cpus_owned(1, "4", NULL, NULL, NULL) == 1, "-c 4 but a 1-CPU mask: 1");
    CHECK(omp_wait_cpus_owned(1, NULL, NULL, NULL, "4") == 0, "srun without -c, bound to 1 CPU");
    CHECK(omp_wait_cpus_owned(8, NULL, NULL, NULL, "2(x3),4") == 2,
          "SLURM_STEP_TASKS_PER_NODE 2(x3),4 on 8: the largest count, 4: 2");
    CHECK(omp_wait_cpus_owned(8, NULL, NULL, NULL, "3,1") == 2, "3,1 on 8: 2");
    /* what does not read counts as unset */
    CHECK(omp_wait_cpus_owned(8, "", "x", "0", "2(x") == 8, "unreadable variables ignored: 8");
    CHECK(omp_wait_cpus_owned(8, "-2", "2a", NULL, "") == 8, "negative or trailing text: 8");
    CHECK(omp_wait_cpus_owned(0, NULL, NULL, NULL, NULL) == 1, "an empty mask counts as one CPU");
    return tap_done();
}
