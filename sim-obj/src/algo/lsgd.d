sim-obj/src/algo/lsgd.o: /work/main/src/algo/lsgd.c \
 /usr/include/smpi/smpi_helpers.h src/algo/algo.h src/io/checkpoint.h \
 /usr/include/smpi/mpi.h src/core/error.h src/io/config.h src/algo/lsgd.h \
 src/comm/gcount.h src/io/runlog.h src/run/trainer.h src/comm/transport.h \
 src/backend/backend.h src/data/data.h src/core/rng.h src/core/hd.h \
 src/io/deck.h src/nn/net.h src/optim/sgd.h
/usr/include/smpi/smpi_helpers.h:
src/algo/algo.h:
src/io/checkpoint.h:
/usr/include/smpi/mpi.h:
src/core/error.h:
src/io/config.h:
src/algo/lsgd.h:
src/comm/gcount.h:
src/io/runlog.h:
src/run/trainer.h:
src/comm/transport.h:
src/backend/backend.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/io/deck.h:
src/nn/net.h:
src/optim/sgd.h:
