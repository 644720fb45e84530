/* The settings of a run: every key of the deck as a typed field of
 * dt_config, filled from a validated deck (io/deck_*.c; the key table is
 * io/deck_schema.c, each key documented in inputs/reference.ini). Named
 * apart from autoconf's config.h, which every .c file includes first. */
#ifndef DT_IO_SETTINGS_H
#define DT_IO_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#define DT_PATH_MAX 4096

typedef struct dt_config {
    struct {
        char output_dir[DT_PATH_MAX];
        uint64_t seed;
        int64_t epochs;
        int64_t max_steps;        /* 0: no limit beyond epochs */
        int64_t eval_every;       /* steps; 0: at the end of every epoch */
        int64_t log_every;        /* steps between /train rows and progress lines */
        int64_t checkpoint_every; /* steps; 0: only at the end and on a signal */
        int64_t checkpoint_keep;
        bool resume;
        bool overwrite;
        bool check_replicas;      /* verify identical replicas after every step */
        bool check_finite;        /* stop on NaN/Inf in the loss or parameters */
        int64_t stall_timeout;    /* seconds without progress before MPI_Abort; 0: off */
        int64_t test_delay_rank;  /* tests: this rank sleeps test_delay_ms per step */
        int64_t test_delay_ms;
        bool test_zero_gradients; /* tests: every local update is zero */
    } run;
    struct {
        char mode[32];
        char topology[32];        /* auto | exponential | ... (topology/topology.h) */
        int64_t peers;
        char graph_file[DT_PATH_MAX];
        int64_t overlap_tau;      /* osgp */
        char dpsgd_order[8];      /* cta | atc */
    } algorithm;
    struct {
        char name[32];
        char hidden[256];         /* mlp: comma-separated widths, e.g. "100" */
        char activation[16];      /* mlp: sigmoid | relu */
        int64_t gn_groups;        /* resnet*_gn: GroupNorm groups */
        int64_t n_layer;          /* gpt: transformer blocks */
        int64_t n_head;           /* gpt: attention heads; divides n_embd */
        int64_t n_embd;           /* gpt: embedding width C */
        int64_t block_size;       /* gpt: context length T */
        int64_t vocab_size;       /* gpt: V; 0: from the data (text: its bytes; tokens: 50257) */
        double dropout;           /* gpt: dropout probability, in [0, 1) */
    } model;
    struct {
        char name[32];            /* fashion-mnist | mnist | cifar10 | synthetic | text | tokens */
        char path[DT_PATH_MAX];
        char val_path[DT_PATH_MAX]; /* tokens: the validation token file */
        char partition[32];       /* iid | class-skew | blocks */
        int64_t samples_per_epoch;/* 0: the shard size */
        int64_t test_limit;       /* 0: whole test set */
        int64_t skew_classes;     /* class-skew: classes per rank */
        int64_t skew_shift;       /* class-skew: position shift per rank */
        int64_t block_count;      /* blocks: number of blocks */
        int64_t block_size;       /* blocks: samples per block */
        int64_t synthetic_train, synthetic_test;
        int64_t synthetic_classes, synthetic_channels, synthetic_height, synthetic_width;
        double synthetic_noise;
    } data;
    struct {
        char name[16];            /* sgd | adamw | muon (optim/) */
        double lr;
        int64_t batch_size;
        double momentum;
        bool nesterov;
        double weight_decay;
        bool lr_scaling;          /* lr * batch * ranks / 256 */
        double warmup_epochs;
        char decay_epochs[256];   /* comma-separated epochs, e.g. "30,60,80" */
        double decay_factor;
        double beta1, beta2, eps; /* adamw (and muon's AdamW part): moment decay rates,
                                   * denominator term */
        double adamw_lr;          /* muon: the AdamW part's rate at optim.lr's place */
        double clip_norm;         /* clip the gradient to this global L2 norm; 0: off */
        int64_t warmup_steps;     /* linear warmup over the first steps; 0: none */
        char schedule[16];        /* step (epochs: warmup_epochs, decay_epochs) | cosine */
        double min_lr;            /* cosine: the rate it decays to */
        int64_t decay_steps;      /* cosine: the step it reaches min_lr; 0: the run's total */
    } optim;
    struct {                      /* parameter-server modes (algo/ps.c) */
        int64_t servers;          /* ranks 0..servers-1 hold the model, sharded */
        bool supervisor;          /* the next rank evaluates every eval_seconds */
        int64_t fetch_every;      /* worker: steps between fetches of the model */
        int64_t push_every;       /* worker: steps whose gradients one push sums */
        char staleness[16];       /* none | adacomp */
        char compress[16];        /* none | topk | adacomp-chen */
        double ratio;             /* topk: fraction of each tensor sent */
        int64_t bin_conv, bin_fc; /* adacomp-chen: bin lengths (convolutions, the rest) */
        int64_t replicas;         /* ps-sync: gradients per global step; 0: all workers */
        double eval_seconds;      /* supervisor: seconds between evaluations; 0: run.eval_every */
    } ps;
    struct {                      /* algo/lsgd.c */
        int64_t group_size;       /* ranks per group; 0: the ranks of one node */
        double c_local, c_global; /* pull at a distributed step towards the leaders */
        double p_local, p_global; /* pull per local step (divided by the period) */
        int64_t tau_local, tau_global; /* local steps per rank between leader broadcasts */
        int64_t loss_window;      /* minibatch losses in the running mean */
    } lsgd;
    struct {                      /* algo/easgd.c */
        double beta;              /* moving rate of the center; alpha = beta / ranks */
        int64_t tau;              /* steps between elastic updates */
        char center[16];          /* replicated | root */
    } easgd;
    struct {                      /* algo/ecl.c */
        int64_t round;            /* K: steps of a swap cycle */
        bool sync;                /* lockstep swaps (reproducible) */
        uint64_t graph_seed;      /* topology = random */
        double mean_degree;       /* topology = random */
    } ecl;
    struct {                      /* algo/diloco.c */
        int64_t inner_steps;      /* H: local steps per outer step */
        double inner_time;        /* > 0: seconds per inner loop instead of H steps */
        double outer_lr;          /* outer SGD learning rate */
        double outer_momentum;    /* outer SGD momentum */
        bool nesterov;            /* outer SGD with Nesterov momentum */
        int64_t sync_steps;       /* K: first steps with averaged gradients */
        char precision[16];       /* fp32 | bf16 | int8 (the pseudo-gradient on the wire) */
        char error_feedback[8];   /* auto | true | false: keep the residual of the codes */
        double ef_decay;          /* beta: residual e <- beta e + delta before it is coded */
        char compress[16];        /* none | topk (sparse low-bit pseudo-gradient) */
        double density;           /* topk: share of each chunk sent */
        int64_t chunk;            /* topk: values per chunk */
        char bits[4];             /* topk: bits per value sent: 2 | 4 | 8 */
        int64_t delay;            /* 1: loop k's exchange is applied at the end of loop k + 1 */
        int64_t fragments;        /* P: streaming fragments of the flat vector */
        int64_t overlap;          /* inner steps a fragment's exchange stays in flight */
        double merge;             /* alpha: share of the local value kept at a merge */
        char outer_comm[16];      /* allreduce | sgp */
    } diloco;
    struct {
        char device[16];          /* cpu | cuda (run/device.c) */
        int64_t threads;          /* compute threads per rank */
        char kernels[16];         /* auto | dnnl | native (backend/cpu/cpu.c) */
        bool test_device_memory;  /* tests: backend/cpu_devmem.c */
        bool tf32;                /* cuBLAS fp32 GEMMs on TF32 tensor cores (cuda) */
        bool cuda_graphs;         /* image models' steps as CUDA graphs (nn/net_step.c) */
        char precision[8];        /* fp32 | bf16 (backend/backend.h: backend_with_precision) */
    } compute;
    struct {
        char transport[16];       /* mpi | nccl (comm/transport_*.c) */
        int64_t nccl_timeout;     /* s a NCCL operation may take before the job ends */
    } comm;
} dt_config;

#endif
