sim-obj/src/algo/easgd.o: /work/main/src/algo/easgd.c \
 /usr/include/smpi/smpi_helpers.h src/algo/algo.h src/io/checkpoint.h \
 /usr/include/smpi/mpi.h src/core/error.h src/io/config.h \
 src/comm/transport.h src/backend/backend.h src/run/trainer.h \
 src/data/data.h src/core/rng.h src/core/hd.h src/io/deck.h src/nn/net.h \
 src/optim/sgd.h
/usr/include/smpi/smpi_helpers.h:
src/algo/algo.h:
src/io/checkpoint.h:
/usr/include/smpi/mpi.h:
src/core/error.h:
src/io/config.h:
src/comm/transport.h:
src/backend/backend.h:
src/run/trainer.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/io/deck.h:
src/nn/net.h:
src/optim/sgd.h:
