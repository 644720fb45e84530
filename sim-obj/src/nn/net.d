sim-obj/src/nn/net.o: /work/main/src/nn/net.c \
 /usr/include/smpi/smpi_helpers.h src/nn/net.h src/backend/backend.h \
 src/nn/net_plan.h src/core/error.h src/core/rng.h src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/nn/net.h:
src/backend/backend.h:
src/nn/net_plan.h:
src/core/error.h:
src/core/rng.h:
src/core/hd.h:
