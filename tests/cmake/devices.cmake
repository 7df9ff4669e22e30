# test_devices also tests the stand-in device's stream and memory directly.
if(TARGET test_devices)
  target_sources(test_devices PRIVATE ${PROJECT_SOURCE_DIR}/plugins/testaccel/worker_stream.cc
                                      ${PROJECT_SOURCE_DIR}/plugins/testaccel/poisoning_domain.cc)
  target_include_directories(test_devices PRIVATE ${PROJECT_SOURCE_DIR}/plugins)
endif()

# Plugins kiln must refuse, one defect each, for the loader's tests (in a
# folder of their own, away from KILN_BACKEND_PATH's). "valid" is the same
# source without a defect.
if(TARGET test_devices)
  foreach(fault valid no_entry abi_version name_clash struct_size missing_function unknown_op)
    set(target kiln_backend_fault_${fault})
    add_library(${target} MODULE ${PROJECT_SOURCE_DIR}/tests/unit/devices/plugins/faulty_plugin.c)
    string(TOUPPER ${fault} define)
    target_compile_definitions(${target} PRIVATE FAULT_${define})
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include)
    set_target_properties(${target} PROPERTIES PREFIX "lib" C_VISIBILITY_PRESET hidden
      LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/test_plugins)
    add_dependencies(test_devices ${target})
  endforeach()
endif()

# The out-of-tree example plugin against an installed kiln, and both
# plugins through the CLI (unsanitized only: a separately built library
# cannot load a sanitizer's runtime).
if(NOT KILN_SANITIZE)
  add_test(NAME backend_plugin_example
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/unit/devices/example_plugin_test.sh ${CMAKE_COMMAND}
            ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/../shared/models/tiny-qwen2)
  set_tests_properties(backend_plugin_example PROPERTIES LABELS "devices" TIMEOUT 600
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
endif()
