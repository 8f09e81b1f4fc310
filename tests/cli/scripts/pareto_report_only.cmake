# `hqekv study pareto` end to end on the bundled model (tests/cli/pareto.cmake):
# a run writes results.json, report.md and an SVG, one plain progress line
# per cell (stderr is not a terminal: no \r); a second run reuses every cell;
# --report-only then regenerates report.md and the SVG byte for byte.
# -DCMD=hqekv -DROOT=<source dir> -DDIR=<scratch dir>
file(REMOVE_RECURSE "${DIR}")
set(args study pareto -m ${ROOT}/models/stories260K.gguf
    -f ${ROOT}/data/text/tinystories_val_subset.txt --kv fp16 --kv kivi:nominal_bits=2,residual=32
    --kv hqekv:bits=0.5 --prefill 32 --max-tokens 64 --ctx 64 -t 1 -o ${DIR})
execute_process(COMMAND ${CMD} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run: exit ${rc}\n${out}\n${err}")
endif()
string(FIND "${err}" "\r" cr)
if(NOT cr EQUAL -1)
  message(FATAL_ERROR "non-terminal progress contains \\r:\n${err}")
endif()
foreach(line "[1/3] " "[2/3] " "[3/3] " "not measurable: ")
  string(FIND "${err}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "progress lacks '${line}':\n${err}")
  endif()
endforeach()
set(svg ${DIR}/pareto-tinystories_val_subset.svg)
foreach(f ${DIR}/results.json ${DIR}/report.md ${svg})
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "${f} was not written")
  endif()
endforeach()
file(READ ${DIR}/report.md md1)
file(READ ${svg} svg1)
if(NOT md1 MATCHES "## Target check" OR NOT md1 MATCHES "kivi:nominal_bits=2,residual=32")
  message(FATAL_ERROR "report.md lacks the target check or a spec:\n${md1}")
endif()

execute_process(COMMAND ${CMD} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "\\| cached" hits "${err}")
list(LENGTH hits n)
if(NOT rc EQUAL 0 OR NOT n EQUAL 2)
  message(FATAL_ERROR "second run: exit ${rc}, ${n} cached cells (want 2 + 1 not measurable):\n${err}")
endif()

file(REMOVE ${DIR}/report.md ${svg})
execute_process(COMMAND ${CMD} study pareto --report-only -o ${DIR} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "--report-only: exit ${rc}\n${out}\n${err}")
endif()
file(READ ${DIR}/report.md md2)
file(READ ${svg} svg2)
if(NOT md1 STREQUAL md2 OR NOT svg1 STREQUAL svg2)
  message(FATAL_ERROR "--report-only output differs from the run's")
endif()
message(STATUS "pareto: run, cached re-run and byte-identical --report-only")
