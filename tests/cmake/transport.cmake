# The transport benchmark (bench/transport) run under mpirun on small sizes,
# its figures checked in Python: transfers intact, reduced values right,
# timings sane. Only where MPI and mpirun are found (the benchmark is then
# built); as root (CI), mpirun needs --allow-run-as-root.
if(TARGET kiln_bench_transport AND MPIEXEC_EXECUTABLE)
  add_test(NAME transport_bench_mpirun
    COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/unit/bench/transport_check.py
            ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:kiln_bench_transport>
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  # Two ranks that poll for messages: two cores' worth while it runs.
  set_tests_properties(transport_bench_mpirun PROPERTIES LABELS "bench;python;mpi" TIMEOUT 300 PROCESSORS 2)
endif()
