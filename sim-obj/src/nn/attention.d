sim-obj/src/nn/attention.o: /work/main/src/nn/attention.c \
 /usr/include/smpi/smpi_helpers.h src/nn/transformer.h src/core/rng.h \
 src/core/hd.h /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h
/usr/include/smpi/smpi_helpers.h:
src/nn/transformer.h:
src/core/rng.h:
src/core/hd.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h:
