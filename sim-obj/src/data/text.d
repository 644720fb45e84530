sim-obj/src/data/text.o: /work/main/src/data/text.c \
 /usr/include/smpi/smpi_helpers.h src/data/tokens.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/data/tokens.h:
src/core/error.h:
