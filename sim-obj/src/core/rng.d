sim-obj/src/core/rng.o: /work/main/src/core/rng.c \
 /usr/include/smpi/smpi_helpers.h src/core/rng.h src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/core/rng.h:
src/core/hd.h:
