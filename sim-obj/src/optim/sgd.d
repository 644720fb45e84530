sim-obj/src/optim/sgd.o: /work/main/src/optim/sgd.c \
 /usr/include/smpi/smpi_helpers.h src/optim/sgd.h src/core/error.h \
 src/core/vec.h src/nn/cuda/sgd.h src/core/hd.h
/usr/include/smpi/smpi_helpers.h:
src/optim/sgd.h:
src/core/error.h:
src/core/vec.h:
src/nn/cuda/sgd.h:
src/core/hd.h:
