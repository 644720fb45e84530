sim-obj/src/nn/linear.o: /work/main/src/nn/linear.c \
 /usr/include/smpi/smpi_helpers.h src/nn/kernels_cpu.h \
 src/backend/backend.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h
/usr/include/smpi/smpi_helpers.h:
src/nn/kernels_cpu.h:
src/backend/backend.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:
