# CLI tests of `hqekv study pareto` (included from tests/CMakeLists.txt):
# an end-to-end run with cache reuse and byte-identical --report-only
# (scripts/pareto_report_only.cmake), and bad input.
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)
set(_root ${PROJECT_SOURCE_DIR})

add_test(NAME cli_study_pareto_report_only
         COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:hqekv> -DROOT=${_root}
                 -DDIR=${CMAKE_CURRENT_BINARY_DIR}/pareto_cli_test
                 -P ${CMAKE_CURRENT_LIST_DIR}/scripts/pareto_report_only.cmake)

hqekv_cli_success(NAME cli_study_pareto_list_grid ARGS study pareto --list-grid
  REGEX "fp16\nfp8\nfp8:format=e5m2\nint8\n.*kivi:nominal_bits=4\n.*snapkv:bits=8\n.*hqekv:bits=3.4\n")

set(_tiny -m ${_root}/models/stories260K.gguf --prefill 32 --max-tokens 64 --ctx 64 -t 1
    -o ${CMAKE_CURRENT_BINARY_DIR}/pareto_cli_bad)
hqekv_cli_failure(NAME cli_err_study_pareto_unknown_spec
  ARGS study pareto ${_tiny} -f ${_root}/data/text/tinystories_val_subset.txt --kv fp16 --kv nonsense:x=1
  MSG "--kv 'nonsense:x=1': unknown KV policy 'nonsense'")
hqekv_cli_failure(NAME cli_err_study_pareto_missing_text
  ARGS study pareto ${_tiny} -f /nonexistent/text.txt
  MSG "/nonexistent/text.txt")
# An empty grid: `--kv` without a spec (a blank spec is the unit test's).
hqekv_cli_failure(NAME cli_err_study_pareto_empty_grid
  ARGS study pareto ${_tiny} -f ${_root}/data/text/tinystories_val_subset.txt --kv
  MSG "--kv: 1 required")
hqekv_cli_failure(NAME cli_err_study_pareto_report_only_without_results
  ARGS study pareto --report-only -o ${CMAKE_CURRENT_BINARY_DIR}/pareto_cli_none
  MSG "--report-only:")
# A user's report.md in the -o directory (no results.json beside it) is not
# replaced: the run is refused before any work.
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/pareto_cli_user_report)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/pareto_cli_user_report/report.md "my notes\n")
hqekv_cli_failure(NAME cli_output_path_rule_pareto_keeps_user_report
  ARGS study pareto -m ${_root}/models/stories260K.gguf --prefill 32 --max-tokens 64 --ctx 64 -t 1
       -f ${_root}/data/text/tinystories_val_subset.txt --kv fp16
       -o ${CMAKE_CURRENT_BINARY_DIR}/pareto_cli_user_report
  MSG "holds a report.md but no results.json")
