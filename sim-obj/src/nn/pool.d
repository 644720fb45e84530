sim-obj/src/nn/pool.o: /work/main/src/nn/pool.c \
 /usr/include/smpi/smpi_helpers.h src/nn/kernels_cpu.h \
 src/backend/backend.h src/nn/layout.h
/usr/include/smpi/smpi_helpers.h:
src/nn/kernels_cpu.h:
src/backend/backend.h:
src/nn/layout.h:
