sim-obj/src/data/partition.o: /work/main/src/data/partition.c \
 /usr/include/smpi/smpi_helpers.h src/data/data.h src/core/rng.h \
 src/core/hd.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/core/error.h:
