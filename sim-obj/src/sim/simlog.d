sim-obj/src/sim/simlog.o: /work/main/src/sim/simlog.c \
 /usr/include/smpi/smpi_helpers.h src/io/runlog.h /usr/include/smpi/mpi.h \
 src/core/error.h src/sim/sim.h src/io/config.h
/usr/include/smpi/smpi_helpers.h:
src/io/runlog.h:
/usr/include/smpi/mpi.h:
src/core/error.h:
src/sim/sim.h:
src/io/config.h:
