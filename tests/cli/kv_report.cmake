# `hqekv run --kv-report`: per-layer tier histograms of a compressed cache.
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)
hqekv_cli_success(NAME cli_run_kv_report ARGS run --kv hqekv:nominal_bits=2 -n 200 --temp 0 -t 1 --kv-report
  REGEX "layer 4: kept [0-9]+ \\| K fp16=[0-9]+ .*u2=[0-9]+.*total: [0-9]+ B")
