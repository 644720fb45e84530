sim-obj/src/models/models.o: /work/main/src/models/models.c \
 /usr/include/smpi/smpi_helpers.h src/models/models.h \
 src/backend/backend.h src/io/config.h src/nn/net.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/models/models.h:
src/backend/backend.h:
src/io/config.h:
src/nn/net.h:
src/core/error.h:
