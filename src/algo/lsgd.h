/* Leader SGD's leader choice, exposed for tests (algo/lsgd.c). */
#ifndef DT_ALGO_LSGD_H
#define DT_ALGO_LSGD_H

/* The rank in first .. first+count-1 with the lowest loss[rank]; a tie goes
 * to the lowest rank. */
int lsgd_leader(const double *loss, int first, int count);

#endif
