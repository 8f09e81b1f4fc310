# Installs the build ${BUILD} into ${WORK}/prefix, then builds
# examples/c/generate.c out of tree three times -- find_package(hqekv) with
# hqekv::hqekv and hqekv::hqekv_static (tests/install_consumer/), and
# `cc ... $(pkg-config --cflags --libs hqekv)` -- and checks that each prints
# the text `hqekv run -p "Once upon a time" --temp 0 -n 20 -t 1` prints.
set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run_checked)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()

run_checked(${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
foreach(f include/hqekv/hqekv.h ${LIBDIR}/libhqekv.so ${LIBDIR}/libhqekv.a ${LIBDIR}/pkgconfig/hqekv.pc
          ${LIBDIR}/cmake/hqekv/hqekvConfig.cmake ${LIBDIR}/cmake/hqekv/hqekvConfigVersion.cmake bin/hqekv)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()

set(prompt "Once upon a time")
run_checked(${CLI} run -m ${MODEL} -p ${prompt} --temp 0 -n 20 -t 1)
set(expected "${last_out}")

# find_package(hqekv), shared and static.
run_checked(${CMAKE_COMMAND} -S ${SRC}/tests/install_consumer -B ${WORK}/consumer -DCMAKE_BUILD_TYPE=Release
            -DCMAKE_PREFIX_PATH=${prefix} -DEXAMPLE=${SRC}/examples/c/generate.c)
run_checked(${CMAKE_COMMAND} --build ${WORK}/consumer)
foreach(exe generate_shared generate_static)
  run_checked(${WORK}/consumer/${exe} ${MODEL} ${prompt} 20)
  if(NOT last_out STREQUAL expected)
    message(FATAL_ERROR "${exe} printed [${last_out}], hqekv run [${expected}]")
  endif()
endforeach()

# pkg-config.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
run_checked(pkg-config --cflags --libs hqekv)
string(STRIP "${last_out}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run_checked(cc -std=c99 -pedantic-errors -Wall -o ${WORK}/generate_pc ${SRC}/examples/c/generate.c ${flags}
            -Wl,-rpath,${prefix}/${LIBDIR})
run_checked(${WORK}/generate_pc ${MODEL} ${prompt} 20)
if(NOT last_out STREQUAL expected)
  message(FATAL_ERROR "the pkg-config build printed [${last_out}], hqekv run [${expected}]")
endif()
# The Python module, when built: importable from the prefix (no pip).
if(PYTHON AND EXISTS ${prefix}/${PYDIR})
  set(ENV{PYTHONPATH} ${prefix}/${PYDIR})
  run_checked(${PYTHON} -c "import hqekv\nprint(hqekv.Model('${MODEL}').context().generate('${prompt}', max_new=20))")
  if(NOT "${prompt}${last_out}" STREQUAL expected)
    message(FATAL_ERROR "the installed Python module printed [${prompt}${last_out}], hqekv run [${expected}]")
  endif()
  message(STATUS "installed Python module: equal text")
endif()
message(STATUS "find_package (shared, static) and pkg-config builds print: ${expected}")
