# `hqekv inspect`: the bundled model, and a missing file (clear error, exit 1).
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)
hqekv_cli_success(NAME cli_inspect_default ARGS inspect REGEX "llama.*292,?800")
hqekv_cli_failure(NAME cli_inspect_missing ARGS inspect -m /nonexistent/model.gguf MSG "'/nonexistent/model.gguf' does not exist")
