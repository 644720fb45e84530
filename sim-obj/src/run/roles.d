sim-obj/src/run/roles.o: /work/main/src/run/roles.c \
 /usr/include/smpi/smpi_helpers.h src/run/roles.h /usr/include/smpi/mpi.h \
 src/io/config.h src/io/deck.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/run/roles.h:
/usr/include/smpi/mpi.h:
src/io/config.h:
src/io/deck.h:
src/core/error.h:
