sim-obj/src/core/vec.o: /work/main/src/core/vec.c \
 /usr/include/smpi/smpi_helpers.h src/core/vec.h
/usr/include/smpi/smpi_helpers.h:
src/core/vec.h:
