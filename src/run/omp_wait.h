/* How this rank's OpenMP threads wait between parallel regions, chosen once
 * per process before libgomp reads its environment.
 *
 * libgomp's waiting threads spin (GOMP_SPINCOUNT, 300,000 polls by default)
 * before they sleep on a futex. Where the rank's threads have cores of their
 * own, spinning is what makes two threads pay: an idle 2-core Zen 4,
 * resnet20_gn at two threads, batch 32, ran 1,150-1,190 img/s in bf16 and
 * ~1,000 in fp32 spinning against 785 and 785 passive (a futex wake for each
 * of the step's hundreds of regions). Where they share cores with other
 * threads, spinning holds a core the thread being waited for needs: with one
 * busy process beside it, the same runs fell to 100-400 img/s spinning and
 * kept 620 / 435 passive (bench/RESULTS.md §17).
 *
 * So dtrain keeps libgomp's default (spin, then sleep) where the rank owns
 * at least two CPUs and sets OMP_WAIT_POLICY = passive where it does not;
 * a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is left alone. A rank
 * owns SLURM_CPUS_PER_TASK CPUs inside a Slurm allocation that gives it
 * (Slurm hands those out exclusively; srun binds each task to them), else
 * the CPUs of its affinity mask shared among the ranks the launcher put on
 * its node (MPI_LOCALNRANKS from MPICH's mpiexec, OMPI_COMM_WORLD_LOCAL_SIZE,
 * or the largest count of SLURM_STEP_TASKS_PER_NODE). */
#ifndef DT_RUN_OMP_WAIT_H
#define DT_RUN_OMP_WAIT_H

/* The CPUs one rank owns: cpus_in_mask CPUs in its affinity mask; the
 * launcher's variables as getenv gives them (NULL where unset). */
int omp_wait_cpus_owned(int cpus_in_mask, const char *slurm_cpus_per_task,
                        const char *mpi_localnranks, const char *ompi_local_size,
                        const char *slurm_step_tasks_per_node);

/* Before anything reads OpenMP's environment (first thing in main): where
 * omp_wait_spin says passive and the user set no policy, set
 * OMP_WAIT_POLICY = passive and execute the program again (DTRAIN_OMP_REEXEC
 * stops a second round). Returns only where nothing was to be done or the
 * re-execution failed (the run goes on with libgomp's default). */
void omp_wait_setup(char **argv);

#endif
