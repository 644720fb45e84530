sim-obj/src/nn/layout.o: /work/main/src/nn/layout.c \
 /usr/include/smpi/smpi_helpers.h src/nn/layout.h
/usr/include/smpi/smpi_helpers.h:
src/nn/layout.h:
