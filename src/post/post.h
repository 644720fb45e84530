/* dtrain-post's commands, one file each. Each returns 0, or -1 after
 * dt_err_set() (sample: the process's exit status). */
#ifndef DT_POST_POST_H
#define DT_POST_POST_H

/* NULL-terminated: csv, plot, summary, simplot, sample (post/commands.c) */
extern const char *const post_command_names[];

/* csv: DIR/train.csv, DIR/eval.csv and one CSV per series group of the
 * record at path (outdir NULL: the record's directory). */
int post_csv(const char *path, const char *outdir);
/* summary: one line per record of paths. */
int post_summary(char **paths, int npaths);
/* plot: the figure of the records of paths into out; keep_dir: write data
 * and script there and keep them (NULL: a temporary directory). */
int post_plot(char **paths, int npaths, const char *out, const char *keep_dir);
/* simplot: dtrain-sim records (sim.csv files) into out, keep_dir as plot. */
int post_simplot(char **paths, int npaths, const char *out, const char *keep_dir);
/* sample ARG [--prompt TEXT] [--tokens N] [--temperature X] [--seed S]:
 * argv holds the arguments after "sample"; returns the exit status. */
int post_sample_main(int argc, char **argv);

#endif
