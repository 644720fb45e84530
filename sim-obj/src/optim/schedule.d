sim-obj/src/optim/schedule.o: /work/main/src/optim/schedule.c \
 /usr/include/smpi/smpi_helpers.h src/core/error.h src/optim/schedule.h \
 src/optim/sgd.h
/usr/include/smpi/smpi_helpers.h:
src/core/error.h:
src/optim/schedule.h:
src/optim/sgd.h:
