# `hqekv serve` end to end (each script starts and stops its own server on a
# free port): curl on the raw endpoints and bad input, a bounded concurrent
# load test (greedy under batching == alone, KV budget held), and the
# official `openai` npm client (skipped with a message when npm is offline).
find_program(CURL_EXE curl)
find_program(PYTHON3_EXE python3)
find_program(NODE_EXE node)
if(CURL_EXE)
  add_test(NAME server_e2e_curl
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/e2e.sh $<TARGET_FILE:hqekv>
                   ${PROJECT_SOURCE_DIR}/models/stories260K.gguf)
  set_tests_properties(server_e2e_curl PROPERTIES TIMEOUT 300)
endif()
if(PYTHON3_EXE)
  add_test(NAME server_load
           COMMAND ${PYTHON3_EXE} ${CMAKE_CURRENT_LIST_DIR}/load_test.py $<TARGET_FILE:hqekv>
                   ${PROJECT_SOURCE_DIR}/models/stories260K.gguf)
  set_tests_properties(server_load PROPERTIES TIMEOUT 300)
endif()
if(NODE_EXE)
  add_test(NAME server_openai_node
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/openai_node.sh $<TARGET_FILE:hqekv>
                   ${PROJECT_SOURCE_DIR}/models/stories260K.gguf ${CMAKE_BINARY_DIR}/server_node)
  set_tests_properties(server_openai_node PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
add_test(NAME server_run_prompt_cache
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/prompt_cache.sh $<TARGET_FILE:hqekv>
                 ${PROJECT_SOURCE_DIR}/models/stories260K.gguf)
# Hostile flags and clients (tests/server/hardening.sh): bounds checked before
# listening, Range / header flood / huge Content-Length / client profile paths
# refused, /health and normal requests still answered. Loopback, ~10 s.
if(CURL_EXE)
  add_test(NAME server_hardening
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/hardening.sh $<TARGET_FILE:hqekv>
                   ${PROJECT_SOURCE_DIR}/models/stories260K.gguf)
  set_tests_properties(server_hardening PROPERTIES TIMEOUT 120)
endif()
# What a llama-server / vLLM user expects (tests/server/llama_api.sh): busy
# port refused, Content-Type, unsupported parameters, n / seed / stop /
# logit_bias / penalties / echo, token prompts, /completion, /tokenize,
# /detokenize, /props, /apply-template, GET /slots, erase, CORS, request log,
# 503 past the connection cap. Loopback, ~20 s.
if(CURL_EXE AND PYTHON3_EXE)
  add_test(NAME server_llama_api
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/llama_api.sh $<TARGET_FILE:hqekv>
                   ${PROJECT_SOURCE_DIR}/models/stories260K.gguf)
  set_tests_properties(server_llama_api PROPERTIES TIMEOUT 180)
endif()
# Hostile connections (tests/server/connection_limits.py, one case per class):
# a slow header and a slow body are cut at their deadlines, a header flood
# after ~1 MiB, an abandoned non-streamed request is cancelled, and all the
# attacks together leave /health and short completions answering. Loopback,
# each case bounded (~5-15 s).
if(PYTHON3_EXE)
  foreach(case header_deadline body_deadline header_flood abandoned_request hostile_load)
    add_test(NAME server_conn_${case}
             COMMAND ${PYTHON3_EXE} ${CMAKE_CURRENT_LIST_DIR}/connection_limits.py
                     $<TARGET_FILE:hqekv> ${PROJECT_SOURCE_DIR}/models/stories260K.gguf ${case})
    set_tests_properties(server_conn_${case} PROPERTIES TIMEOUT 120)
  endforeach()
endif()
