# `hqekv eval --suite quick` on the bundled model, end to end (every policy of
# the quick suite through the real engine), asserting sanity only: the fp16
# cache equals the reference (KL 0, agreement 1) and KV memory is monotone in
# the budget within each policy family. The checks live in
# scripts/eval_quick_check.cmake (a subfolder, so the *.cmake glob of
# tests/CMakeLists.txt does not include it as a test file).
add_test(NAME eval_quick
         COMMAND ${CMAKE_COMMAND} -DHQEKV=$<TARGET_FILE:hqekv> -DOUT=${CMAKE_CURRENT_BINARY_DIR}/eval_quick_out
                 -P ${CMAKE_CURRENT_LIST_DIR}/scripts/eval_quick_check.cmake)
set_tests_properties(eval_quick PROPERTIES TIMEOUT 900)
