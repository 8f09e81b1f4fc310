# The module layering (scripts/check_layers.py): the tree passes, and a
# planted wrong-way include (quant including eval) is caught with a message
# that names the file and line.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME layer_check COMMAND ${CMAKE_COMMAND} -DCMD=${Python3_EXECUTABLE}
  "-DARGS=${PROJECT_SOURCE_DIR}/scripts/check_layers.py;--root;${PROJECT_SOURCE_DIR}"
  "-DREGEX=includes match CMakeLists.txt" -P ${CMAKE_CURRENT_LIST_DIR}/expect_success.cmake.in)
add_test(NAME layer_check_catches_wrong_include COMMAND ${CMAKE_COMMAND}
  -DPYTHON=${Python3_EXECUTABLE} -DSRC=${PROJECT_SOURCE_DIR} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layer-mutant
  -P ${PROJECT_SOURCE_DIR}/tests/cli/scripts/layer_mutant.cmake)
