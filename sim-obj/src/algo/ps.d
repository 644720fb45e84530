sim-obj/src/algo/ps.o: /work/main/src/algo/ps.c \
 /usr/include/smpi/smpi_helpers.h src/algo/algo.h src/io/checkpoint.h \
 /usr/include/smpi/mpi.h src/core/error.h src/io/config.h \
 src/algo/compress.h src/algo/staleness.h src/core/vec.h src/io/runlog.h \
 src/run/roles.h src/io/deck.h src/run/stop.h src/run/trainer.h \
 src/comm/transport.h src/backend/backend.h src/data/data.h \
 src/core/rng.h src/core/hd.h src/nn/net.h src/optim/sgd.h
/usr/include/smpi/smpi_helpers.h:
src/algo/algo.h:
src/io/checkpoint.h:
/usr/include/smpi/mpi.h:
src/core/error.h:
src/io/config.h:
src/algo/compress.h:
src/algo/staleness.h:
src/core/vec.h:
src/io/runlog.h:
src/run/roles.h:
src/io/deck.h:
src/run/stop.h:
src/run/trainer.h:
src/comm/transport.h:
src/backend/backend.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/nn/net.h:
src/optim/sgd.h:
