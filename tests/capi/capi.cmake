# Tests of the C API and the installed library (included from
# tests/CMakeLists.txt; the C++ suite tests/capi/*_test.cc is test_capi):
#   capi_c_api         tests/capi/c_api_test.c, C99 against libhqekv.so: bad
#                      input, quantizer, KV store, and greedy text + KV bytes
#                      equal to `hqekv run --temp 0 -n 20 -t 1`;
#   capi_example_kivi  examples/c/generate.c equals `hqekv run` under kivi:nominal_bits=2;
#   capi_abi_symbols   `nm -D libhqekv.so` exports only hqekv_*, SONAME versioned;
#   capi_install       (label `install`, not under HQEKV_SANITIZE) cmake --install
#                      into a temporary prefix, then examples/c/generate.c built
#                      out of tree with find_package(hqekv) (shared and static)
#                      and with pkg-config, each run and compared with the CLI.
set(_model ${PROJECT_SOURCE_DIR}/models/stories260K.gguf)

add_executable(c_api_test ${CMAKE_CURRENT_LIST_DIR}/c_api_test.c)
set_target_properties(c_api_test PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(c_api_test PRIVATE -pedantic-errors -Werror)
target_link_libraries(c_api_test PRIVATE hqekv_shared m)

add_executable(example_generate ${PROJECT_SOURCE_DIR}/examples/c/generate.c)
set_target_properties(example_generate PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(example_generate PRIVATE -pedantic-errors -Werror)
target_link_libraries(example_generate PRIVATE hqekv_shared)

set(_compare ${CMAKE_CURRENT_LIST_DIR}/compare_with_run.cmake)
add_test(NAME capi_c_api COMMAND ${CMAKE_COMMAND}
  "-DRUN=$<TARGET_FILE:hqekv>;run;-m;${_model};--temp;0;-n;20;-t;1"
  "-DOTHER=$<TARGET_FILE:c_api_test>;${_model}" -P ${_compare})
add_test(NAME capi_example_kivi COMMAND ${CMAKE_COMMAND}
  "-DRUN=$<TARGET_FILE:hqekv>;run;-m;${_model};-p;Once upon a time;--temp;0;-n;40;-t;1;--kv;kivi:nominal_bits=2"
  "-DOTHER=$<TARGET_FILE:example_generate>;${_model};Once upon a time;40;kivi:nominal_bits=2" -P ${_compare})
# Context shift (hqekv_context_set_shift): 200 tokens in a 64-position
# context equal `hqekv run`'s, text and KV bytes, under fp16 and streaming.
add_executable(c_api_shift_test ${CMAKE_CURRENT_LIST_DIR}/c_api_shift_test.c)
set_target_properties(c_api_shift_test PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(c_api_shift_test PRIVATE -pedantic-errors -Werror)
target_link_libraries(c_api_shift_test PRIVATE hqekv_shared)
foreach(_kv fp16 streaming:bits=4)
  string(REGEX REPLACE "[:=]" "_" _name "${_kv}")
  add_test(NAME capi_context_shift_${_name} COMMAND ${CMAKE_COMMAND}
    "-DRUN=$<TARGET_FILE:hqekv>;run;-m;${_model};--ctx;64;--temp;0;-n;200;-t;1;--kv;${_kv}"
    "-DOTHER=$<TARGET_FILE:c_api_shift_test>;${_model};64;200;${_kv}" -P ${_compare})
endforeach()
add_test(NAME capi_abi_symbols COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:hqekv_shared>
  -DSONAME=$<TARGET_SONAME_FILE_NAME:hqekv_shared> -P ${CMAKE_CURRENT_LIST_DIR}/abi_check.cmake)

if(NOT HQEKV_SANITIZE)
  add_test(NAME capi_install COMMAND ${CMAKE_COMMAND}
    -DBUILD=${PROJECT_BINARY_DIR} -DSRC=${PROJECT_SOURCE_DIR} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/install-test
    -DLIBDIR=${CMAKE_INSTALL_LIBDIR} -DMODEL=${_model} -DCLI=$<TARGET_FILE:hqekv>
    "-DPYTHON=${PYTHON_EXECUTABLE}" "-DPYDIR=${HQEKV_PYTHON_DIR}"
    -P ${CMAKE_CURRENT_LIST_DIR}/install_test.cmake)
  set_tests_properties(capi_install PROPERTIES LABELS "install;no_sanitize" TIMEOUT 120)
endif()

# KV state save/load through the C API (tests/capi/c_state_test.c).
add_executable(c_state_test ${CMAKE_CURRENT_LIST_DIR}/c_state_test.c)
set_target_properties(c_state_test PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(c_state_test PRIVATE -pedantic-errors -Werror)
target_link_libraries(c_state_test PRIVATE hqekv_shared)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/state-test)
add_test(NAME capi_state COMMAND c_state_test ${_model} ${CMAKE_CURRENT_BINARY_DIR}/state-test)

# Hostile arguments through the C API (tests/capi/c_hardening_test.c):
# non-finite inputs, counts past their bounds, output paths.
add_executable(c_hardening_test ${CMAKE_CURRENT_LIST_DIR}/c_hardening_test.c)
set_target_properties(c_hardening_test PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(c_hardening_test PRIVATE -pedantic-errors -Werror)
target_link_libraries(c_hardening_test PRIVATE hqekv_shared m)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/hardening-test)
add_test(NAME capi_hardening COMMAND c_hardening_test ${_model} ${CMAKE_CURRENT_BINARY_DIR}/hardening-test)

# Many sequences in one context (tests/capi/c_batch_test.c): 4 sequences under 2 KV
# policies through one hqekv_decode_batch per step equal 4 single-sequence runs.
add_executable(c_batch_test ${CMAKE_CURRENT_LIST_DIR}/c_batch_test.c)
set_target_properties(c_batch_test PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(c_batch_test PRIVATE -pedantic-errors -Werror)
target_link_libraries(c_batch_test PRIVATE hqekv_shared m)
add_test(NAME capi_batch_sequences COMMAND c_batch_test ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf)

# Embeddings, the log callback and hqekv_seq_keep (tests/capi/c_embed_log_test.c).
add_executable(c_embed_log_test ${CMAKE_CURRENT_LIST_DIR}/c_embed_log_test.c)
set_target_properties(c_embed_log_test PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(c_embed_log_test PRIVATE -pedantic-errors -Werror)
target_link_libraries(c_embed_log_test PRIVATE hqekv_shared m)
add_test(NAME capi_embeddings_log COMMAND c_embed_log_test ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf)

# ABI: programs built against API version 1's header (tests/capi/abi_v1, the
# header as released at version 1) run on today's library: the batch test
# and the C example, compiled against the old header, linked to the new
# libhqekv.so, must pass as they do against the new header.
foreach(_old c_batch_test example_generate)
  if(_old STREQUAL "example_generate")
    set(_src ${PROJECT_SOURCE_DIR}/examples/c/generate.c)
  else()
    set(_src ${CMAKE_CURRENT_LIST_DIR}/${_old}.c)
  endif()
  add_executable(${_old}_v1 ${_src})
  set_target_properties(${_old}_v1 PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(${_old}_v1 PRIVATE -pedantic-errors -Werror)
  target_include_directories(${_old}_v1 BEFORE PRIVATE ${CMAKE_CURRENT_LIST_DIR}/abi_v1)
  target_link_libraries(${_old}_v1 PRIVATE hqekv_shared m)
endforeach()
add_test(NAME capi_abi_v1_batch COMMAND c_batch_test_v1 ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf)
add_test(NAME capi_abi_v1_example COMMAND ${CMAKE_COMMAND}
  "-DRUN=$<TARGET_FILE:hqekv>;run;-m;${_model};-p;Once upon a time;--temp;0;-n;40;-t;1;--kv;kivi:nominal_bits=2"
  "-DOTHER=$<TARGET_FILE:example_generate_v1>;${_model};Once upon a time;40;kivi:nominal_bits=2" -P ${_compare})
