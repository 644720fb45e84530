sim-obj/src/io/deck.o: /work/main/src/io/deck.c \
 /usr/include/smpi/smpi_helpers.h src/io/deck.h /usr/include/smpi/mpi.h \
 src/io/config.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/io/deck.h:
/usr/include/smpi/mpi.h:
src/io/config.h:
src/core/error.h:
