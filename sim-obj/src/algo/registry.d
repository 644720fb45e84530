sim-obj/src/algo/registry.o: /work/main/src/algo/registry.c \
 /usr/include/smpi/smpi_helpers.h src/algo/algo.h src/io/checkpoint.h \
 /usr/include/smpi/mpi.h src/core/error.h src/io/config.h
/usr/include/smpi/smpi_helpers.h:
src/algo/algo.h:
src/io/checkpoint.h:
/usr/include/smpi/mpi.h:
src/core/error.h:
src/io/config.h:
