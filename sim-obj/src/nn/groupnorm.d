sim-obj/src/nn/groupnorm.o: /work/main/src/nn/groupnorm.c \
 /usr/include/smpi/smpi_helpers.h src/nn/kernels_cpu.h \
 src/backend/backend.h src/core/error.h src/core/simd.h src/nn/layout.h
/usr/include/smpi/smpi_helpers.h:
src/nn/kernels_cpu.h:
src/backend/backend.h:
src/core/error.h:
src/core/simd.h:
src/nn/layout.h:
