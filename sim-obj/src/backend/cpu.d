sim-obj/src/backend/cpu.o: /work/main/src/backend/cpu.c \
 /usr/include/smpi/smpi_helpers.h config.h src/backend/backend.h \
 src/core/error.h src/core/vec.h src/nn/cuda/sgd.h src/core/hd.h \
 src/nn/kernels_cpu.h src/optim/sgd.h src/sim/sim.h \
 /usr/include/smpi/mpi.h src/io/config.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h
/usr/include/smpi/smpi_helpers.h:
config.h:
src/backend/backend.h:
src/core/error.h:
src/core/vec.h:
src/nn/cuda/sgd.h:
src/core/hd.h:
src/nn/kernels_cpu.h:
src/optim/sgd.h:
src/sim/sim.h:
/usr/include/smpi/mpi.h:
src/io/config.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:
