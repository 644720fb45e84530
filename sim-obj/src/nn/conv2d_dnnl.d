sim-obj/src/nn/conv2d_dnnl.o: /work/main/src/nn/conv2d_dnnl.c \
 /usr/include/smpi/smpi_helpers.h config.h src/nn/kernels_cpu.h \
 src/backend/backend.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
config.h:
src/nn/kernels_cpu.h:
src/backend/backend.h:
src/core/error.h:
