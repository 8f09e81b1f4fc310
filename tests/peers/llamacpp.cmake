# hqekv against the real llama.cpp (node-llama-cpp's CPU build from npm):
# logits within a KL bound and equal greedy ids on small synthetic GGUFs of
# real attention shapes, in the weight types hqekv reads (skipped with a
# message when npm cannot install the package). 26 files (phi3, gemma2, gemma3 included):
# 900 s leaves room on a loaded machine. COST (here and on tokenizer_parity_hf, seconds
# on a quiet machine) makes a fresh ctest start the two long peers tests first: they share
# one npm folder (RESOURCE_LOCK), and started last they ran one after the other at the end.
find_program(NODE_EXE node)
if(NODE_EXE)
  add_test(NAME peers_llamacpp_parity
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/llamacpp_parity.sh $<TARGET_FILE:hqekv>
                   ${CMAKE_BINARY_DIR}/peers_llamacpp ${CMAKE_BINARY_DIR}/llamacpp_node)
  set_tests_properties(peers_llamacpp_parity PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77
                                                        RESOURCE_LOCK llamacpp_node COST 300
                                                        LABELS "peers;no_sanitize")
endif()
