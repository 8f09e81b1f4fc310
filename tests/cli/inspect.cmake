# `hqekv inspect`: the bundled model, and a missing file (clear error, exit 1).
add_test(NAME cli_inspect_default COMMAND hqekv inspect)
set_tests_properties(cli_inspect_default PROPERTIES PASS_REGULAR_EXPRESSION "llama.*292,?800")
add_test(NAME cli_inspect_missing COMMAND hqekv inspect -m /nonexistent/model.gguf)
set_tests_properties(cli_inspect_missing PROPERTIES WILL_FAIL TRUE)
