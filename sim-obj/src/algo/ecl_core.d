sim-obj/src/algo/ecl_core.o: /work/main/src/algo/ecl_core.c \
 /usr/include/smpi/smpi_helpers.h src/algo/ecl_core.h \
 /usr/include/smpi/mpi.h src/comm/swap.h src/graph/egraph.h \
 src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/algo/ecl_core.h:
/usr/include/smpi/mpi.h:
src/comm/swap.h:
src/graph/egraph.h:
src/core/error.h:
