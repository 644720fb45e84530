sim-obj/src/data/windows.o: /work/main/src/data/windows.c \
 /usr/include/smpi/smpi_helpers.h src/data/tokens.h src/core/error.h \
 src/core/rng.h src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/data/tokens.h:
src/core/error.h:
src/core/rng.h:
src/core/hd.h:
