sim-obj/src/nn/xent.o: /work/main/src/nn/xent.c \
 /usr/include/smpi/smpi_helpers.h src/nn/kernels_cpu.h \
 src/backend/backend.h src/core/error.h src/nn/cuda/xent.h src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/nn/kernels_cpu.h:
src/backend/backend.h:
src/core/error.h:
src/nn/cuda/xent.h:
src/core/hd.h:
