sim-obj/src/run/stop.o: /work/main/src/run/stop.c \
 /usr/include/smpi/smpi_helpers.h src/run/stop.h /usr/include/smpi/mpi.h \
 src/core/error.h src/run/trainer.h src/algo/algo.h src/io/checkpoint.h \
 src/io/config.h src/comm/transport.h src/backend/backend.h \
 src/data/data.h src/core/rng.h src/core/hd.h src/io/deck.h src/nn/net.h \
 src/optim/sgd.h
/usr/include/smpi/smpi_helpers.h:
src/run/stop.h:
/usr/include/smpi/mpi.h:
src/core/error.h:
src/run/trainer.h:
src/algo/algo.h:
src/io/checkpoint.h:
src/io/config.h:
src/comm/transport.h:
src/backend/backend.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/io/deck.h:
src/nn/net.h:
src/optim/sgd.h:
