sim-obj/src/nn/embedding.o: /work/main/src/nn/embedding.c \
 /usr/include/smpi/smpi_helpers.h src/nn/transformer.h src/core/rng.h \
 src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/nn/transformer.h:
src/core/rng.h:
src/core/hd.h:
