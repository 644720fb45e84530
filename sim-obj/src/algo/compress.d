sim-obj/src/algo/compress.o: /work/main/src/algo/compress.c \
 /usr/include/smpi/smpi_helpers.h src/algo/compress.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/algo/compress.h:
src/core/error.h:
