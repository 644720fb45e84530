sim-obj/src/sim/sim.o: /work/main/src/sim/sim.c \
 /usr/include/smpi/smpi_helpers.h src/sim/sim.h /usr/include/smpi/mpi.h \
 src/io/config.h src/core/build_info.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/sim/sim.h:
/usr/include/smpi/mpi.h:
src/io/config.h:
src/core/build_info.h:
src/core/error.h:
