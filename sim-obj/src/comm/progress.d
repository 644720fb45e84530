sim-obj/src/comm/progress.o: /work/main/src/comm/progress.c \
 /usr/include/smpi/smpi_helpers.h src/comm/progress.h src/core/error.h
/usr/include/smpi/smpi_helpers.h:
src/comm/progress.h:
src/core/error.h:
