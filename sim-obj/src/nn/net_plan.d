sim-obj/src/nn/net_plan.o: /work/main/src/nn/net_plan.c \
 /usr/include/smpi/smpi_helpers.h src/nn/net_plan.h src/nn/net.h \
 src/backend/backend.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/nn/net_plan.h:
src/nn/net.h:
src/backend/backend.h:
src/core/error.h:
