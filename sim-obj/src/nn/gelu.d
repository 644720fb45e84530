sim-obj/src/nn/gelu.o: /work/main/src/nn/gelu.c \
 /usr/include/smpi/smpi_helpers.h src/nn/transformer.h src/core/rng.h \
 src/core/hd.h src/core/simd.h src/nn/fast_exp.h
/usr/include/smpi/smpi_helpers.h:
src/nn/transformer.h:
src/core/rng.h:
src/core/hd.h:
src/core/simd.h:
src/nn/fast_exp.h:
