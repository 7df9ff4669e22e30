# The cli tests (tests/unit/cli/) test the `kiln` command's own files, which
# are not part of libkiln: they link its object library.
if(TARGET test_cli)
  target_link_libraries(test_cli PRIVATE kiln_cli_commands)
  # The engine flags start tensor parallelism where MPI is found.
  if(TARGET kiln_parallel)
    target_link_libraries(test_cli PRIVATE kiln_parallel)
  endif()
endif()
