sim-obj/src/data/synthetic.o: /work/main/src/data/synthetic.c \
 /usr/include/smpi/smpi_helpers.h src/data/data.h src/core/rng.h \
 src/core/hd.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/data/data.h:
src/core/rng.h:
src/core/hd.h:
src/core/error.h:
