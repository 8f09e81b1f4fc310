# The docs' path check (scripts/check_docs.py): the tree passes, and a planted
# doc that names a missing file, a path outside the repository and a symbol
# its file does not hold is caught, each as "file:line: what".
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME docs_check COMMAND ${CMAKE_COMMAND} -DCMD=${Python3_EXECUTABLE}
  "-DARGS=${PROJECT_SOURCE_DIR}/scripts/check_docs.py;--root;${PROJECT_SOURCE_DIR}"
  "-DREGEX=named in [0-9]+ Markdown files exist" -P ${CMAKE_CURRENT_LIST_DIR}/expect_success.cmake.in)
add_test(NAME docs_check_catches_missing_path COMMAND ${CMAKE_COMMAND}
  -DPYTHON=${Python3_EXECUTABLE} -DSRC=${PROJECT_SOURCE_DIR} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/docs-mutant
  -P ${PROJECT_SOURCE_DIR}/tests/cli/scripts/docs_mutant.cmake)

# Every shell block of README.md and docs/*.md is run with the build's hqekv
# on PATH (scripts/run_doc_snippets.py --commands), or says why not: a
# `snippet: skip REASON` marker or the CTest that covers it. Outputs are not
# pinned; exit codes and the blocks' `expect:` lines are.
file(GLOB _doc_pages ${PROJECT_SOURCE_DIR}/docs/*.md)
add_test(NAME docs_commands
         COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/run_doc_snippets.py --commands
                 ${PROJECT_SOURCE_DIR}/README.md ${_doc_pages} --build $<TARGET_FILE_DIR:hqekv>
                 --work ${CMAKE_CURRENT_BINARY_DIR}/docs-commands)
set_tests_properties(docs_commands PROPERTIES LABELS "docs;no_sanitize" TIMEOUT 900)
