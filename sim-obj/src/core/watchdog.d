sim-obj/src/core/watchdog.o: /work/main/src/core/watchdog.c \
 /usr/include/smpi/smpi_helpers.h src/core/watchdog.h \
 /usr/include/smpi/mpi.h
/usr/include/smpi/smpi_helpers.h:
src/core/watchdog.h:
/usr/include/smpi/mpi.h:
