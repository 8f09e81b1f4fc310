# `hqekv run --kv-report`: per-layer tier histograms of a compressed cache.
add_test(NAME cli_run_kv_report COMMAND hqekv run --kv hqekv:nominal_bits=2 -n 200 --temp 0 -t 1 --kv-report)
set_tests_properties(cli_run_kv_report PROPERTIES
  PASS_REGULAR_EXPRESSION "layer 4: kept [0-9]+ \\| K fp16=[0-9]+ .*u2=[0-9]+.*total: [0-9]+ B")
