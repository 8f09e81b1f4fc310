# Copies what scripts/check_layers.py reads into ${WORK}, plants
# `#include "eval/run/cell.h"` in src/quant/format.cc (a lower layer including a
# higher one), and requires the check to fail naming that file and line.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(COPY ${SRC}/src ${SRC}/tests ${SRC}/CMakeLists.txt DESTINATION ${WORK})
file(COPY ${SRC}/docs/CONTRIBUTING.md DESTINATION ${WORK}/docs)
file(READ ${WORK}/src/quant/format.cc text)
file(WRITE ${WORK}/src/quant/format.cc "#include \"eval/run/cell.h\"\n${text}")
execute_process(COMMAND ${PYTHON} ${SRC}/scripts/check_layers.py --root ${WORK}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "the layer check passed a planted wrong-way include: ${out}")
endif()
string(FIND "${err}" "src/quant/format.cc:1: includes \"eval/...\" but hqekv_quant does not depend on hqekv_eval" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the layer check failed without naming the planted include: ${err}")
endif()
message(STATUS "caught (exit ${rc}): ${err}")
file(REMOVE_RECURSE ${WORK})
