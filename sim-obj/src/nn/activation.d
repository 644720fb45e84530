sim-obj/src/nn/activation.o: /work/main/src/nn/activation.c \
 /usr/include/smpi/smpi_helpers.h src/nn/kernels_cpu.h \
 src/backend/backend.h src/core/simd.h src/nn/cuda/activation.h \
 src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/nn/kernels_cpu.h:
src/backend/backend.h:
src/core/simd.h:
src/nn/cuda/activation.h:
src/core/hd.h:
