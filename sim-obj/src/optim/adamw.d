sim-obj/src/optim/adamw.o: /work/main/src/optim/adamw.c \
 /usr/include/smpi/smpi_helpers.h src/optim/adamw.h src/core/error.h \
 src/core/simd.h src/core/vec.h
/usr/include/smpi/smpi_helpers.h:
src/optim/adamw.h:
src/core/error.h:
src/core/simd.h:
src/core/vec.h:
