sim-obj/src/run/trainer.o: /work/main/src/run/trainer.c \
 /usr/include/smpi/smpi_helpers.h config.h src/run/trainer.h \
 /usr/include/smpi/mpi.h src/algo/algo.h src/io/checkpoint.h \
 src/core/error.h src/io/config.h src/comm/transport.h \
 src/backend/backend.h src/data/data.h src/core/rng.h src/core/hd.h \
 src/io/deck.h src/nn/net.h src/optim/sgd.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h \
 src/core/build_info.h src/io/runlog.h src/models/models.h \
 src/run/roles.h src/run/finite.h src/run/stop.h src/core/watchdog.h \
 src/sim/sim.h
/usr/include/smpi/smpi_helpers.h:
config.h:
src/run/trainer.h:
/usr/include/smpi/mpi.h:
src/algo/algo.h:
src/io/checkpoint.h:
src/core/error.h:
src/io/config.h:
src/comm/transport.h:
src/backend/backend.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/io/deck.h:
src/nn/net.h:
src/optim/sgd.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:
src/core/build_info.h:
src/io/runlog.h:
src/models/models.h:
src/run/roles.h:
src/run/finite.h:
src/run/stop.h:
src/core/watchdog.h:
src/sim/sim.h:
