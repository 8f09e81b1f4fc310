# llama.cpp's command-line habits (tests/cli/scripts/llama_flags.sh holds the
# cases and says what each checks).
set(_llama_flag_cases
  gpu_flags_warn flash_attn_bad_value system_prompt_and_conversation reverse_prompt_is_stop
  no_display_prompt json_only_json typo_flag_suggests typo_command_suggests typo_kv_suggests usage_error_exit_2
  runtime_error_exit_1 bench_kv_columns uncompressed_headline)
foreach(c ${_llama_flag_cases})
  add_test(NAME cli_llama_flags_${c}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/scripts/llama_flags.sh $<TARGET_FILE:hqekv>
                   ${PROJECT_SOURCE_DIR} ${c})
  set_tests_properties(cli_llama_flags_${c} PROPERTIES TIMEOUT 120)
endforeach()
