# The library people build on: libhqekv.so (SONAME libhqekv.so.<ABI version>)
# and libhqekv.a, both made of the objects of the modules the C API
# (include/hqekv/hqekv.h, src/capi/) needs; install() rules with the exported
# targets hqekv::hqekv (shared) and hqekv::hqekv_static, hqekvConfig.cmake +
# version file for find_package(hqekv), and hqekv.pc for pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The SONAME follows the C API's ABI version (bumped only on an incompatible
# change); the file version is ABI.API.PATCH (API: bumped when calls are added).
file(STRINGS ${PROJECT_SOURCE_DIR}/include/hqekv/hqekv.h _api_line REGEX "^#define HQEKV_API_VERSION ")
string(REGEX REPLACE ".*HQEKV_API_VERSION ([0-9]+).*" "\\1" HQEKV_API_VERSION "${_api_line}")
file(STRINGS ${PROJECT_SOURCE_DIR}/include/hqekv/hqekv.h _abi_line REGEX "^#define HQEKV_ABI_VERSION ")
string(REGEX REPLACE ".*HQEKV_ABI_VERSION ([0-9]+).*" "\\1" HQEKV_ABI_VERSION "${_abi_line}")

target_include_directories(hqekv_capi PUBLIC ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(hqekv_capi PRIVATE HQEKV_VERSION_STRING="${PROJECT_VERSION}")

# The modules in the library: hqekv_capi and every hqekv_* module it reaches
# through the DEPS of hqekv_module() (CMakeLists.txt), so a new module below
# capi joins without an edit here.
function(hqekv_module_closure out)
  set(todo hqekv_capi)
  set(seen "")
  while(todo)
    list(POP_FRONT todo t)
    if(t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(deps ${t} LINK_LIBRARIES)
    foreach(d ${deps})
      if(d MATCHES "^hqekv_[a-z]+$" AND TARGET ${d})
        list(APPEND todo ${d})
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()
hqekv_module_closure(HQEKV_LIBRARY_TARGETS)
set(_objs "")
foreach(t ${HQEKV_LIBRARY_TARGETS})
  list(APPEND _objs $<TARGET_OBJECTS:${t}>)
endforeach()

set(_public_include $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

add_library(hqekv_shared SHARED ${_objs})
set_target_properties(hqekv_shared PROPERTIES OUTPUT_NAME hqekv EXPORT_NAME hqekv
                      VERSION ${HQEKV_ABI_VERSION}.${HQEKV_API_VERSION}.${PROJECT_VERSION_PATCH} SOVERSION ${HQEKV_ABI_VERSION}
                      LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/hqekv.map)
target_include_directories(hqekv_shared INTERFACE ${_public_include})
target_link_libraries(hqekv_shared PRIVATE hwy::hwy Threads::Threads)
# Only hqekv_* is exported (the sources are built with hidden visibility too).
target_link_options(hqekv_shared PRIVATE -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/hqekv.map
                    -Wl,--exclude-libs,ALL)
# Every symbol resolved inside the library, except in clang's sanitized tree:
# there the sanitizer runtime is linked into each executable (which exports
# it), not into shared libraries, so the library leaves those calls open.
if(NOT (HQEKV_SANITIZE AND CMAKE_CXX_COMPILER_ID MATCHES "Clang"))
  target_link_options(hqekv_shared PRIVATE -Wl,--no-undefined)
endif()

add_library(hqekv_static STATIC ${_objs})
set_target_properties(hqekv_static PROPERTIES OUTPUT_NAME hqekv EXPORT_NAME hqekv_static)
target_include_directories(hqekv_static INTERFACE ${_public_include})
target_compile_definitions(hqekv_static INTERFACE HQEKV_STATIC_DEFINE)
# A C program linking the static library needs the C++ runtime too.
target_link_libraries(hqekv_static INTERFACE hwy::hwy Threads::Threads stdc++ m)

add_library(hqekv::hqekv ALIAS hqekv_shared)
add_library(hqekv::hqekv_static ALIAS hqekv_static)

install(TARGETS hqekv_shared hqekv_static EXPORT hqekvTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS hqekv RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/hqekv DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/hqekv)
install(EXPORT hqekvTargets NAMESPACE hqekv:: DESTINATION ${_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hqekvConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/hqekvConfig.cmake INSTALL_DESTINATION ${_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hqekvConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/hqekvConfig.cmake ${PROJECT_BINARY_DIR}/hqekvConfigVersion.cmake
        DESTINATION ${_cmake_dir})

# hqekv.pc, relocatable: the prefix is found from the .pc file's own place, so
# `cmake --install build --prefix DIR` works for any DIR.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(HQEKV_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(HQEKV_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _up /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
  string(REGEX REPLACE "/$" "" _up "${_up}")
  set(HQEKV_PC_PREFIX "\${pcfiledir}/${_up}")
  set(HQEKV_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(HQEKV_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(HQEKV_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/hqekv.pc.in ${PROJECT_BINARY_DIR}/hqekv.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/hqekv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
