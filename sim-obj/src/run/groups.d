sim-obj/src/run/groups.o: /work/main/src/run/groups.c \
 /usr/include/smpi/smpi_helpers.h src/run/groups.h \
 /usr/include/smpi/mpi.h src/io/deck.h src/io/config.h src/run/trainer.h \
 src/algo/algo.h src/io/checkpoint.h src/core/error.h \
 src/comm/transport.h src/backend/backend.h src/data/data.h \
 src/core/rng.h src/core/hd.h src/nn/net.h src/optim/sgd.h
/usr/include/smpi/smpi_helpers.h:
src/run/groups.h:
/usr/include/smpi/mpi.h:
src/io/deck.h:
src/io/config.h:
src/run/trainer.h:
src/algo/algo.h:
src/io/checkpoint.h:
src/core/error.h:
src/comm/transport.h:
src/backend/backend.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/nn/net.h:
src/optim/sgd.h:
