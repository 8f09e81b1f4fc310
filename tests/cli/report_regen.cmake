# Every committed report (docs/results/*/report.md) has its results.json and
# `hqekv eval --report-only` regenerates report.md and report.html from it
# byte for byte (issue 17): committed numbers can be diffed and re-rendered.
file(GLOB _reports LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/docs/results/*)
foreach(dir ${_reports})
  if(NOT IS_DIRECTORY ${dir} OR NOT EXISTS ${dir}/report.md)
    continue()
  endif()
  get_filename_component(name ${dir} NAME)
  add_test(NAME report_regen_${name}
           COMMAND ${CMAKE_COMMAND} -DHQEKV=$<TARGET_FILE:hqekv> -DDIR=${dir}
                   -DWORK=${CMAKE_CURRENT_BINARY_DIR}/report_regen/${name}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/report_regen_check.cmake)
endforeach()
