sim-obj/src/models/gpt.o: /work/main/src/models/gpt.c \
 /usr/include/smpi/smpi_helpers.h src/models/gpt.h src/nn/net.h \
 src/backend/backend.h src/core/error.h src/core/rng.h src/core/hd.h \
 src/nn/transformer.h
/usr/include/smpi/smpi_helpers.h:
src/models/gpt.h:
src/nn/net.h:
src/backend/backend.h:
src/core/error.h:
src/core/rng.h:
src/core/hd.h:
src/nn/transformer.h:
