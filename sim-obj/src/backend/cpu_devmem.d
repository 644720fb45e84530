sim-obj/src/backend/cpu_devmem.o: /work/main/src/backend/cpu_devmem.c \
 /usr/include/smpi/smpi_helpers.h config.h src/backend/backend.h \
 src/core/error.h
/usr/include/smpi/smpi_helpers.h:
config.h:
src/backend/backend.h:
src/core/error.h:
