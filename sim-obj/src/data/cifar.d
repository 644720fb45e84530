sim-obj/src/data/cifar.o: /work/main/src/data/cifar.c \
 /usr/include/smpi/smpi_helpers.h src/data/data.h src/core/rng.h \
 src/core/hd.h src/core/error.h src/core/parse.h
/usr/include/smpi/smpi_helpers.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/core/error.h:
src/core/parse.h:
