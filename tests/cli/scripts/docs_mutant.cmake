# Builds a small tree in ${WORK} (src/core/status.h, a doc naming it and five
# wrong things) and requires scripts/check_docs.py to fail naming each wrong
# thing with its file and line, and to pass the right ones.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/src/core ${WORK}/docs)
file(COPY ${SRC}/src/core/status.h DESTINATION ${WORK}/src/core)
file(WRITE ${WORK}/docs/guide.md
  "Errors: `src/core/status.h` (`Result`), also `core/status.h:3`.\n"
  "The table: `src/core/table.cc`.\n"
  "Harness: `../shared/anchors/`.\n"
  "Claim: `core/status.h` (`NoSuchTable`), link [x](../src/core/gone.h).\n"
  "```sh\nls `src/in/a/fence.h`\n```\n"
  "| what | where |\n|---|---|\n| errors | `src/core/status.h` |\n| a table | the table file |\n")
execute_process(COMMAND ${PYTHON} ${SRC}/scripts/check_docs.py --root ${WORK}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "the docs check passed a doc naming missing paths: ${out}")
endif()
foreach(want "docs/guide.md:2: src/core/table.cc missing"
             "docs/guide.md:3: ../shared/anchors/ is outside the repository"
             "docs/guide.md:4: NoSuchTable not found in src/core/status.h"
             "docs/guide.md:4: src/core/gone.h missing"
             "docs/guide.md:11: checklist row names no repository path")
  string(FIND "${err}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the docs check did not report '${want}': ${err}")
  endif()
endforeach()
foreach(wrong "guide.md:1:" "fence.h" "guide.md:10:")
  string(FIND "${err}" "${wrong}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "the docs check reported '${wrong}', which is right or fenced: ${err}")
  endif()
endforeach()
message(STATUS "caught (exit ${rc}): ${err}")
file(REMOVE_RECURSE ${WORK})
