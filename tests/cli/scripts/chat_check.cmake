# `hqekv chat` driven through a pipe (stdin from a file): three turns, /reset,
# one more turn. Checks from the per-turn stderr lines: three answers before
# the reset; turn 2 prefills only its own tokens (the cache held turn 1's
# tokens, untouched, and grows by exactly prefilled + generated); the KV bytes
# grow across turns; /reset empties the cache (turn 4 starts from 0 and holds
# fewer bytes than turn 3).
# Usage: cmake -DCMD=hqekv -DMODEL=stories260K.gguf -DWORK=dir -P chat_check.cmake
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/turns.txt "Hello there\nTell me a story\nAnd then?\n/reset\nHi again\n/exit\nnever read\n")
execute_process(COMMAND ${CMD} chat -m ${MODEL} --chat-template chatml --system "Be brief."
                        -n 6 --temp 0 -t 1
                INPUT_FILE ${WORK}/turns.txt
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hqekv chat exited ${rc}:\n${err}")
endif()
string(REGEX MATCHALL "turn [0-9]+ \\| prefilled [0-9]+ tok \\(cache held [0-9]+\\) \\| generated [0-9]+ tok[^|]*\\| cache [0-9]+ tok[^(]*\\(([0-9]+) bytes held"
       lines "${err}")
list(LENGTH lines n)
if(NOT n EQUAL 4)
  message(FATAL_ERROR "expected 4 turn lines (3, /reset, 1; /exit ends), got ${n}:\n${err}")
endif()
foreach(i RANGE 3)
  list(GET lines ${i} l)
  string(REGEX MATCH "prefilled ([0-9]+) tok \\(cache held ([0-9]+)\\) \\| generated ([0-9]+) tok[^|]*\\| cache ([0-9]+) tok.*\\(([0-9]+) bytes held" _ "${l}")
  set(pre${i} ${CMAKE_MATCH_1})
  set(held${i} ${CMAKE_MATCH_2})
  set(gen${i} ${CMAKE_MATCH_3})
  set(cache${i} ${CMAKE_MATCH_4})
  set(bytes${i} ${CMAKE_MATCH_5})
endforeach()
# Three answers on stdout before the reset, one after.
string(REGEX MATCHALL "\n" newlines "${out}")
list(LENGTH newlines nl)
if(NOT nl EQUAL 4)
  message(FATAL_ERROR "expected 4 answer lines on stdout, got ${nl}:\n${out}")
endif()
if(NOT held0 EQUAL 0 OR NOT held1 EQUAL cache0 OR NOT held2 EQUAL cache1)
  message(FATAL_ERROR "the cache was not kept across turns (held ${held0}, ${held1}, ${held2}; "
                      "after ${cache0}, ${cache1}):\n${err}")
endif()
math(EXPR expect1 "${cache0} + ${pre1} + ${gen1}")
if(NOT cache1 EQUAL expect1 OR NOT pre1 LESS cache1)
  message(FATAL_ERROR "turn 2 prefilled ${pre1} tokens onto ${held1}; cache ${cache1}, expected "
                      "${expect1} (only the new turn's tokens):\n${err}")
endif()
if(NOT bytes2 GREATER bytes0)
  message(FATAL_ERROR "KV bytes did not grow: turn 1 ${bytes0}, turn 3 ${bytes2}:\n${err}")
endif()
if(NOT held3 EQUAL 0 OR NOT bytes3 LESS bytes2 OR NOT err MATCHES "conversation reset")
  message(FATAL_ERROR "/reset did not empty the cache (held ${held3}, ${bytes3} bytes vs "
                      "${bytes2}):\n${err}")
endif()
message(STATUS "chat: prefilled ${pre0}/${pre1}/${pre2}/${pre3}, bytes ${bytes0}/${bytes1}/${bytes2}/${bytes3}")
