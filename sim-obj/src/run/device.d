sim-obj/src/run/device.o: /work/main/src/run/device.c \
 /usr/include/smpi/smpi_helpers.h config.h src/run/device.h \
 /usr/include/smpi/mpi.h src/io/config.h src/comm/gpu_plan.h \
 src/graph/topology.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
config.h:
src/run/device.h:
/usr/include/smpi/mpi.h:
src/io/config.h:
src/comm/gpu_plan.h:
src/graph/topology.h:
src/core/error.h:
