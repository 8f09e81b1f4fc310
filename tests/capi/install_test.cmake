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

# The bundled models, texts and profiles under share/hqekv/, and the installed
# program finds its default model there (not in the source tree), run from
# a folder outside the repository.
foreach(f share/hqekv/models/stories260K.gguf share/hqekv/models/refmodel-4l.gguf
          share/hqekv/models/SOURCES.md share/hqekv/data/text/wiki.test.raw
          share/hqekv/profiles/refmodel-4l/hqekv-3.4-tpe16.json)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()
unset(ENV{HQEKV_MODEL})
unset(ENV{HQEKV_DATA_DIR})
execute_process(COMMAND ${prefix}/bin/hqekv inspect WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REAL_PATH ${prefix}/share/hqekv/models/stories260K.gguf installed_model)
if(NOT rc EQUAL 0 OR NOT out MATCHES "file: +${installed_model}\n")
  message(FATAL_ERROR "the installed hqekv did not default to ${installed_model} (${rc}):\n${out}\n${err}")
endif()

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
if(PYTHON AND EXISTS ${prefix}/${PYDIR}/hqekv)
  set(ENV{PYTHONPATH} ${prefix}/${PYDIR})
  run_checked(${PYTHON} -c "import hqekv\nprint(hqekv.Model('${MODEL}').context().generate('${prompt}', max_new=20))")
  if(NOT "${prompt}${last_out}" STREQUAL expected)
    message(FATAL_ERROR "the installed Python module printed [${prompt}${last_out}], hqekv run [${expected}]")
  endif()
  run_checked(${PYTHON} -c "import hqekv\nprint(hqekv.default_model('stories260K'))")
  file(REAL_PATH ${prefix}/share/hqekv/models/stories260K.gguf want)
  string(STRIP "${last_out}" got)
  file(REAL_PATH "${got}" got)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "the installed package's default_model() is [${got}], not ${want}")
  endif()
  message(STATUS "installed Python module: equal text, bundled model found under share/hqekv")
endif()
message(STATUS "find_package (shared, static) and pkg-config builds print: ${expected}")
