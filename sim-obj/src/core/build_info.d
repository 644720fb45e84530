sim-obj/src/core/build_info.o: /work/main/src/core/build_info.c \
 /usr/include/smpi/smpi_helpers.h config.h src/core/build_info.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h \
 /usr/include/smpi/mpi.h
/usr/include/smpi/smpi_helpers.h:
config.h:
src/core/build_info.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:
/usr/include/smpi/mpi.h:
