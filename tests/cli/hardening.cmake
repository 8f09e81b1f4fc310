# Issue 19 hardening cases, one CTest test each (tests/cli/scripts/hardening.sh
# holds the cases and says what each checks): special files as inputs, output
# that cannot be written, and numbers that would start unbounded work.
set(_hardening_cases
  fifo_model devzero_model fifo_tokenizer fifo_profile devzero_profile fifo_prompt fifo_ppl_text
  devzero_ppl_text fifo_calib_text fifo_study_text fifo_results_json dir_results_json
  stdout_full_run stdout_full_ppl stdout_full_inspect stdout_full_policies stdout_full_help
  calibrate_full_disk gen_synthetic_full_disk eval_report_full_disk calibrate_unwritable_output
  threads_huge_run threads_huge_ppl threads_huge_eval threads_huge_calib threads_negative
  ctx_huge_ppl ctx_huge_run ctx_huge_eval
  calib_bits_nan calib_bits_zero calib_trials_zero calib_tokens_zero
  seed_negative seed_overflow threads_trailing ctx_hex_ppl temp_nan top_p_zero n_predict_negative
  spec_hex spec_inf eval_bits_inf calib_seed_garbage study_vectors_hex gen_layers_overflow
  sigterm_writer sigint_writer concurrent_writers
  prompt_cache_unwritable chat_endless_line chat_turn_past_ctx snapkv_keep_context_shift)
foreach(c ${_hardening_cases})
  add_test(NAME cli_hardening_${c}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/scripts/hardening.sh $<TARGET_FILE:hqekv> ${PROJECT_SOURCE_DIR}
                   ${CMAKE_CURRENT_BINARY_DIR}/hardening_out ${c})
  set_tests_properties(cli_hardening_${c} PROPERTIES TIMEOUT 300)
endforeach()
