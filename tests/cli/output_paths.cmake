# One output-path rule for every CLI writer (tests/cli/scripts/output_paths.sh
# holds the table of target kinds and what each must become).
foreach(w bench ppl_kld_base calibrate gen_synthetic prompt_cache eval_report pareto_report)
  add_test(NAME cli_output_path_rule_${w}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/scripts/output_paths.sh $<TARGET_FILE:hqekv>
                   ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/output_paths ${w})
  set_tests_properties(cli_output_path_rule_${w} PROPERTIES TIMEOUT 300)
endforeach()
