sim-obj/src/graph/topology.o: /work/main/src/graph/topology.c \
 /usr/include/smpi/smpi_helpers.h src/graph/topology.h src/core/error.h \
 src/core/parse.h
/usr/include/smpi/smpi_helpers.h:
src/graph/topology.h:
src/core/error.h:
src/core/parse.h:
