# `hqekv run` chat mode, special tokens and stop conditions (issue 14) on the
# bundled stories260K model (no chat template, no special tokens: the chat
# markers are spelled out as text, which is what a template override on such a
# model means).
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)

hqekv_cli_success(NAME cli_run_chat_override ARGS run --chat --chat-template chatml --system "Be brief." -p hi
  -n 3 --temp 0 -t 1
  REGEX "prompt [0-9]+ tok, generated 3 tok")
hqekv_cli_failure(NAME cli_err_run_chat_no_template ARGS run --chat -p hi -n 1
  MSG "has no tokenizer.chat_template; name a format with --chat-template")
hqekv_cli_failure(NAME cli_err_run_chat_unknown ARGS run --chat --chat-template vicuna -p hi -n 1
  MSG "unknown template 'vicuna' (supported: chatml, llama3, phi3, gemma, llama2, mistral")
hqekv_cli_failure(NAME cli_err_run_system_without_chat ARGS run --system x -p hi -n 1
  MSG "--system and --chat-template need --chat")
# Greedy story: "--stop ." ends it at the first full stop, well before -n 200.
hqekv_cli_success(NAME cli_run_stop_string ARGS run -p "Once upon a time" -n 200 --temp 0 -t 1 --stop .
  REGEX "generated ([0-9]|[1-9][0-9]) tok")
