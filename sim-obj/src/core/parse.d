sim-obj/src/core/parse.o: /work/main/src/core/parse.c \
 /usr/include/smpi/smpi_helpers.h src/core/parse.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/core/parse.h:
src/core/error.h:
