# `ppl` honours tokenizer.ggml.add_bos_token (issue 14): a copy of refmodel-4l
# with the key flipped to false scores its text without BOS.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME cli_ppl_add_bos_false
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/scripts/add_bos_check.py
                 $<TARGET_FILE:hqekv> ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf
                 ${CMAKE_CURRENT_BINARY_DIR}/add-bos)
