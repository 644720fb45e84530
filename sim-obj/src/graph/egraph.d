sim-obj/src/graph/egraph.o: /work/main/src/graph/egraph.c \
 /usr/include/smpi/smpi_helpers.h src/graph/egraph.h src/core/error.h \
 src/core/parse.h src/core/rng.h src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/graph/egraph.h:
src/core/error.h:
src/core/parse.h:
src/core/rng.h:
src/core/hd.h:
