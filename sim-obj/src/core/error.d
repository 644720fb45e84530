sim-obj/src/core/error.o: /work/main/src/core/error.c \
 /usr/include/smpi/smpi_helpers.h src/core/error.h \
 /usr/include/smpi/mpi.h src/sim/sim.h src/io/config.h
/usr/include/smpi/smpi_helpers.h:
src/core/error.h:
/usr/include/smpi/mpi.h:
src/sim/sim.h:
src/io/config.h:
