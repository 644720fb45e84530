sim-obj/src/nn/add.o: /work/main/src/nn/add.c \
 /usr/include/smpi/smpi_helpers.h src/nn/kernels_cpu.h \
 src/backend/backend.h src/core/simd.h
/usr/include/smpi/smpi_helpers.h:
src/nn/kernels_cpu.h:
src/backend/backend.h:
src/core/simd.h:
