# Fixture of tests/cli/ppl_kld.cmake: writes a KL base file of 3 chunks of 64
# tokens with the bundled model, then a truncated and a corrupted copy.
# Usage: cmake -DHQEKV=<binary> -DTEXT=<file> -DDIR=<dir> -P kld_fixture.cmake
cmake_minimum_required(VERSION 3.25)
file(MAKE_DIRECTORY "${DIR}")
execute_process(COMMAND "${HQEKV}" ppl -f "${TEXT}" --ctx 64 --chunks 3 -t 1
                --kl-divergence-base "${DIR}/base.kld"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "3 chunks, 96 scored positions, top-64 of 512 tokens")
  message(FATAL_ERROR "base run failed (${rc}): ${out}${err}")
endif()
if(NOT out MATCHES "\\[1\\][0-9.]+,\\[2\\][0-9.]+,\\[3\\][0-9.]+,.*Final estimate: PPL = [0-9.]+ \\+/- [0-9.]+")
  message(FATAL_ERROR "no per-chunk progress or final estimate: ${out}")
endif()
file(SIZE "${DIR}/base.kld" size)
math(EXPR cut "${size} - 1000")
execute_process(COMMAND head -c ${cut} "${DIR}/base.kld" OUTPUT_FILE "${DIR}/truncated.kld")
file(COPY_FILE "${DIR}/base.kld" "${DIR}/corrupt.kld")
math(EXPR mid "${size} / 2")
execute_process(COMMAND sh -c "printf 'Z' | dd of='${DIR}/corrupt.kld' bs=1 seek=${mid} conv=notrunc 2>/dev/null"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not corrupt the copy")
endif()
message(STATUS "base ${size} bytes, truncated to ${cut}, byte ${mid} changed")
