sim-obj/src/run/finite.o: /work/main/src/run/finite.c \
 /usr/include/smpi/smpi_helpers.h src/run/finite.h
/usr/include/smpi/smpi_helpers.h:
src/run/finite.h:
