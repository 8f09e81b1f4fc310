# The module layering (scripts/check_layers.py): the tree passes, and a
# planted wrong-way include (quant including eval) is caught with a message
# that names the file and line.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME layer_check COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check_layers.py
  --root ${PROJECT_SOURCE_DIR})
set_tests_properties(layer_check PROPERTIES PASS_REGULAR_EXPRESSION "includes match CMakeLists.txt")
add_test(NAME layer_check_catches_wrong_include COMMAND ${CMAKE_COMMAND}
  -DPYTHON=${Python3_EXECUTABLE} -DSRC=${PROJECT_SOURCE_DIR} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/layer-mutant
  -P ${PROJECT_SOURCE_DIR}/tests/cli/scripts/layer_mutant.cmake)
