# `hqekv chat` (issue 14): multi-turn through a pipe on stories260K with the
# chatml override (the model has no template), and its input errors.
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)

add_test(NAME cli_chat_pipe_three_turns
         COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:hqekv>
                 -DMODEL=${PROJECT_SOURCE_DIR}/models/stories260K.gguf
                 -DWORK=${CMAKE_CURRENT_BINARY_DIR}/cli_chat
                 -P ${CMAKE_CURRENT_LIST_DIR}/scripts/chat_check.cmake)
hqekv_cli_failure(NAME cli_err_chat_unknown_template ARGS chat --chat-template vicuna -t 1
  MSG "unknown template 'vicuna' (supported: chatml")
hqekv_cli_failure(NAME cli_err_chat_no_template ARGS chat -t 1
  MSG "has no tokenizer.chat_template; name a format with --chat-template")
hqekv_cli_failure(NAME cli_err_chat_missing_model ARGS chat -m no/such/model.gguf --chat-template chatml
  MSG "no/such/model.gguf")

# Renderings vs @huggingface/jinja on transcribed real templates (skipped, 77,
# without npm or the registry).
add_test(NAME chat_template_vs_jinja
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/tokenizer/chat_template_ref.sh $<TARGET_FILE:hqekv>
                 ${PROJECT_SOURCE_DIR}/tests/data/chat_templates ${CMAKE_BINARY_DIR}/jinja-ref)
# Not in the sanitized tree: the Jinja engine runs there in test_tokenizer (Jinja.*, against
# the committed renderings) and under fuzz_chat; this adds the npm reference.
set_tests_properties(chat_template_vs_jinja PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                                                       LABELS no_sanitize)
# The committed @huggingface/jinja renderings that test_tokenizer checks the
# Jinja engine against, regenerated and compared (skipped, 77, without npm).
add_test(NAME chat_template_expected_current
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/tokenizer/chat_template_expected.sh
                 ${PROJECT_SOURCE_DIR}/tests/data/chat_templates ${CMAKE_BINARY_DIR}/jinja-ref)
set_tests_properties(chat_template_expected_current PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                                                               LABELS no_sanitize)
