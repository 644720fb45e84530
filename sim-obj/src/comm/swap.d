sim-obj/src/comm/swap.o: /work/main/src/comm/swap.c \
 /usr/include/smpi/smpi_helpers.h src/comm/swap.h /usr/include/smpi/mpi.h \
 src/graph/egraph.h src/core/watchdog.h src/comm/progress.h \
 src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/comm/swap.h:
/usr/include/smpi/mpi.h:
src/graph/egraph.h:
src/core/watchdog.h:
src/comm/progress.h:
src/core/error.h:
