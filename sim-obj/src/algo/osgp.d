sim-obj/src/algo/osgp.o: /work/main/src/algo/osgp.c \
 /usr/include/smpi/smpi_helpers.h src/algo/algo.h src/io/checkpoint.h \
 /usr/include/smpi/mpi.h src/core/error.h src/io/config.h \
 src/algo/gossip.h src/comm/transport.h src/backend/backend.h \
 src/graph/topology.h src/comm/progress.h src/run/trainer.h \
 src/data/data.h src/core/rng.h src/core/hd.h src/io/deck.h src/nn/net.h \
 src/optim/sgd.h
/usr/include/smpi/smpi_helpers.h:
src/algo/algo.h:
src/io/checkpoint.h:
/usr/include/smpi/mpi.h:
src/core/error.h:
src/io/config.h:
src/algo/gossip.h:
src/comm/transport.h:
src/backend/backend.h:
src/graph/topology.h:
src/comm/progress.h:
src/run/trainer.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/io/deck.h:
src/nn/net.h:
src/optim/sgd.h:
