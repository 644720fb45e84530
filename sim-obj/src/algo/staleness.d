sim-obj/src/algo/staleness.o: /work/main/src/algo/staleness.c \
 /usr/include/smpi/smpi_helpers.h src/algo/staleness.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/algo/staleness.h:
src/core/error.h:
