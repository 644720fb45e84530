sim-obj/src/data/tokens.o: /work/main/src/data/tokens.c \
 /usr/include/smpi/smpi_helpers.h src/data/tokens.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/data/tokens.h:
src/core/error.h:
