# Redis + 3 `hqekv serve` replicas + HAProxy on loopback (tests/scale_out/scale_out_test.py):
# the shared KV tier across replicas and its faults. Skipped (exit 77) without
# redis-server / haproxy (apt-get install redis-server haproxy) or without hiredis.
if(HIREDIS_FOUND)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_FOUND)
    add_test(NAME scale_out_redis_haproxy
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/scale_out_test.py
                     $<TARGET_FILE:hqekv> ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf)
    set_tests_properties(scale_out_redis_haproxy PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                                                            LABELS scale_out)
  endif()
endif()

# Two replicas sharing --kv-store dir:PATH (needs nothing but Python).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME scale_out_dir_store
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/dir_store_test.py
                   $<TARGET_FILE:hqekv> ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf)
  set_tests_properties(scale_out_dir_store PROPERTIES TIMEOUT 180 LABELS scale_out)
endif()
