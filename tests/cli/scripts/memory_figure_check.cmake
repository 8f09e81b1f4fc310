# `hqekv ppl --kv SPEC` and `hqekv calibrate --score SPEC` on the same text,
# window and prefill report the same memory figure (bits per original
# element at the same point of the protocol).
# Usage: cmake -DHQEKV=<binary> -DTEXT=<file> -DSPEC=<spec> -P memory_figure_check.cmake
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND "${HQEKV}" ppl -f "${TEXT}" --kv "${SPEC}" --prefill 100 --max-tokens 256 --ctx 256 -t 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ppl failed: ${out}${err}")
endif()
if(NOT out MATCHES "at end: KV [0-9.]+ [KM]iB, [0-9.]+x [a-zA-Z]+ than fp16, ([0-9.]+) bits/element")
  message(FATAL_ERROR "no end memory in: ${out}")
endif()
set(ppl_bits "${CMAKE_MATCH_1}")
# calibrate's windows carry a BOS; ppl's text starts with one too (stories260K): 256 tokens each.
execute_process(COMMAND "${HQEKV}" calibrate -f "${TEXT}" --tokens 255 --window 256 --prefill 100 -t 1 -q
                --score "${SPEC}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "calibrate failed: ${out}${err}")
endif()
string(REPLACE "+" "\\+" spec_re "${SPEC}")
if(NOT out MATCHES "${spec_re} +[0-9.]+ +([0-9.]+)")
  message(FATAL_ERROR "no true_bits column in: ${out}")
endif()
set(cal_bits "${CMAKE_MATCH_1}")
string(REGEX MATCH "^[0-9]+\\.[0-9]" c1 "${cal_bits}")
string(REGEX MATCH "^[0-9]+\\.[0-9]" p1 "${ppl_bits}")
if(NOT c1 STREQUAL p1)
  message(FATAL_ERROR "ppl reports ${ppl_bits} bits/element, calibrate ${cal_bits}")
endif()
message(STATUS "ppl ${ppl_bits}, calibrate ${cal_bits}")
