sim-obj/src/algo/gossip.o: /work/main/src/algo/gossip.c \
 /usr/include/smpi/smpi_helpers.h src/algo/gossip.h src/comm/transport.h \
 /usr/include/smpi/mpi.h src/backend/backend.h src/graph/topology.h \
 src/io/config.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/algo/gossip.h:
src/comm/transport.h:
/usr/include/smpi/mpi.h:
src/backend/backend.h:
src/graph/topology.h:
src/io/config.h:
src/core/error.h:
