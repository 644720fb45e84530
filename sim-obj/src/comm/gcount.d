sim-obj/src/comm/gcount.o: /work/main/src/comm/gcount.c \
 /usr/include/smpi/smpi_helpers.h src/comm/gcount.h \
 /usr/include/smpi/mpi.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/comm/gcount.h:
/usr/include/smpi/mpi.h:
src/core/error.h:
