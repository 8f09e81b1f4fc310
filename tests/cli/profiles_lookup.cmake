# The profiles shipped for a model (profiles/refmodel-4l/layer-bits.txt, the
# per-layer budgets hqekv:bits=B uses by default) are found next to the
# binary, not in the working directory: the same command gives the same KL
# wherever it starts, and that KL is not the one without the budgets.
set(_args ppl -m ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf
    -f ${PROJECT_SOURCE_DIR}/data/text/wiki.test.raw --ctx 256 --max-tokens 512 -t 1 --json)
add_test(NAME cli_profiles_found_from_any_dir COMMAND ${CMAKE_COMMAND} -DHQEKV=$<TARGET_FILE:hqekv>
         -DROOT=${PROJECT_SOURCE_DIR} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/profiles_lookup
         "-DARGS=${_args};--kv;hqekv:bits=4.6" "-DNOT_ARGS=${_args};--kv;hqekv:bits=4.6,shipped=0"
         -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/same_in_any_dir.cmake)
