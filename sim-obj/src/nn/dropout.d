sim-obj/src/nn/dropout.o: /work/main/src/nn/dropout.c \
 /usr/include/smpi/smpi_helpers.h src/nn/kernels_cpu.h \
 src/backend/backend.h src/core/rng.h src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/nn/kernels_cpu.h:
src/backend/backend.h:
src/core/rng.h:
src/core/hd.h:
