sim-obj/src/dtrain.o: /work/main/src/dtrain.c \
 /usr/include/smpi/smpi_helpers.h /usr/include/smpi/mpi.h \
 /work/main/src/algo/algo.h src/io/checkpoint.h src/core/error.h \
 src/io/config.h /work/main/src/core/build_info.h \
 /work/main/src/core/error.h /work/main/src/core/parse.h \
 /work/main/src/io/deck.h /work/main/src/models/models.h \
 src/backend/backend.h src/nn/net.h /work/main/src/run/device.h \
 /work/main/src/run/groups.h src/io/deck.h src/run/trainer.h \
 src/algo/algo.h src/comm/transport.h src/data/data.h src/core/rng.h \
 src/core/hd.h src/optim/sgd.h /work/main/src/run/roles.h \
 /work/main/src/run/stop.h /work/main/src/run/trainer.h \
 /work/main/src/sim/sim.h
/usr/include/smpi/smpi_helpers.h:
/usr/include/smpi/mpi.h:
/work/main/src/algo/algo.h:
src/io/checkpoint.h:
src/core/error.h:
src/io/config.h:
/work/main/src/core/build_info.h:
/work/main/src/core/error.h:
/work/main/src/core/parse.h:
/work/main/src/io/deck.h:
/work/main/src/models/models.h:
src/backend/backend.h:
src/nn/net.h:
/work/main/src/run/device.h:
/work/main/src/run/groups.h:
src/io/deck.h:
src/run/trainer.h:
src/algo/algo.h:
src/comm/transport.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/optim/sgd.h:
/work/main/src/run/roles.h:
/work/main/src/run/stop.h:
/work/main/src/run/trainer.h:
/work/main/src/sim/sim.h:
