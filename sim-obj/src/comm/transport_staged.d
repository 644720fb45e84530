sim-obj/src/comm/transport_staged.o: \
 /work/main/src/comm/transport_staged.c /usr/include/smpi/smpi_helpers.h \
 src/comm/transport.h /usr/include/smpi/mpi.h src/backend/backend.h \
 src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/comm/transport.h:
/usr/include/smpi/mpi.h:
src/backend/backend.h:
src/core/error.h:
