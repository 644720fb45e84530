sim-obj/src/comm/gpu_plan.o: /work/main/src/comm/gpu_plan.c \
 /usr/include/smpi/smpi_helpers.h src/comm/gpu_plan.h \
 /usr/include/smpi/mpi.h src/graph/topology.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/comm/gpu_plan.h:
/usr/include/smpi/mpi.h:
src/graph/topology.h:
src/core/error.h:
