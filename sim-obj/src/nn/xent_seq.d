sim-obj/src/nn/xent_seq.o: /work/main/src/nn/xent_seq.c \
 /usr/include/smpi/smpi_helpers.h src/nn/transformer.h src/core/rng.h \
 src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/nn/transformer.h:
src/core/rng.h:
src/core/hd.h:
