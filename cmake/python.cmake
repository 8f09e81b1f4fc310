# Finds pybind11 and a Python interpreter that has numpy and pytest (Debian:
# python3-pybind11 pybind11-dev python3-numpy python3-pytest python3-dev),
# then builds python/ (the `hqekv` extension module and its pytest).
# Without them, no bindings: the rest of the project does not need Python.
if(NOT PYTHON_EXECUTABLE)
  # The first python3 that can import numpy: a python3 earlier on PATH (pyenv,
  # a venv) may lack the Debian packages that /usr/bin/python3 sees.
  find_program(_py_path python3)
  foreach(py ${_py_path} /usr/bin/python3)
    if(EXISTS ${py})
      execute_process(COMMAND ${py} -c "import numpy, pytest" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(PYTHON_EXECUTABLE ${py} CACHE FILEPATH "Python interpreter of the bindings")
        break()
      endif()
    endif()
  endforeach()
endif()
if(NOT PYTHON_EXECUTABLE)
  message(STATUS "hqekv: no python3 with numpy and pytest (Debian: python3-numpy python3-pytest): "
                 "no Python bindings")
  return()
endif()
# Chosen first: loading pybind11's config looks the interpreter up.
find_package(pybind11 CONFIG QUIET)
if(NOT pybind11_FOUND)
  message(STATUS "hqekv: pybind11 not found (Debian: pybind11-dev python3-pybind11): no Python bindings")
  return()
endif()
add_subdirectory(${PROJECT_SOURCE_DIR}/python ${PROJECT_BINARY_DIR}/python)
