# The layers are enforced by the build (cmake/KilnTargets.cmake): a file of
# an area that includes a header of an area above it does not compile. Each
# case compiles tests/layering/area_probe.cc as a file of one area twice:
#   layering_<area>_sees_<lower>   includes a header of an area it uses and
#                                  must build (the positive control: the
#                                  probe and the area's flags are sound);
#   layering_<area>_blind_to_<upper>  includes a header of an area above it
#                                  and must fail with "file not found" for
#                                  that header, not for any other reason.
# The probes are outside the default build; each test builds its probe in
# this build tree, so the tests take turns (RESOURCE_LOCK).

# kiln_layering_case(AREA LOWER_HEADER UPPER_HEADER)
function(kiln_layering_case area lower upper)
  string(REGEX REPLACE "/.*" "" lower_area ${lower})
  string(REGEX REPLACE "/.*" "" upper_area ${upper})
  set(probe ${PROJECT_SOURCE_DIR}/tests/layering/area_probe.cc)
  set(sees kiln_layering_probe_${area}_sees_${lower_area})
  set(blind kiln_layering_probe_${area}_blind_to_${upper_area})
  kiln_area_probe(${sees} ${area} ${probe} "KILN_PROBE_HEADER=\"${lower}\"")
  kiln_area_probe(${blind} ${area} ${probe} "KILN_PROBE_HEADER=\"${upper}\"")
  add_test(NAME layering_${area}_sees_${lower_area}
    COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target ${sees})
  add_test(NAME layering_${area}_blind_to_${upper_area}
    COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target ${blind})
  # GCC: "fatal error: compiler/bind.h: No such file or directory";
  # clang: "fatal error: 'compiler/bind.h' file not found".
  string(REPLACE "." "\\." upper_regex ${upper})
  set_tests_properties(layering_${area}_blind_to_${upper_area} PROPERTIES
    PASS_REGULAR_EXPRESSION "${upper_regex}'?:? (No such file or directory|file not found)")
  set_tests_properties(layering_${area}_sees_${lower_area} layering_${area}_blind_to_${upper_area}
    PROPERTIES LABELS layering RESOURCE_LOCK kiln_build_tree TIMEOUT 600)
endfunction()

# The backend runs what the compiler made; it must not know the compiler.
kiln_layering_case(backend format/weight_store.h compiler/compiled_model.h)
# The block formats are the bottom of the numeric stack: no backend in them.
kiln_layering_case(quant core/half.h backend/backend.h)
# The tokenizer renders chat templates but knows nothing of the engine.
kiln_layering_case(tokenizer jinja/interpreter.h engine/llm_engine.h)
# Grammars see the tokenizer's vocabulary; the engine that samples under them is above.
kiln_layering_case(grammar tokenizer/tokenizer.h engine/llm_engine.h)
# The ONNX front end feeds the compiler; it knows nothing of the LLM engine.
kiln_layering_case(onnx compiler/bind.h engine/llm_engine.h)
# The vision pipelines run models through the ONNX session; they know nothing of the LLM engine.
kiln_layering_case(vision onnx/onnx_session.h engine/llm_engine.h)
# The router forwards to servers over HTTP and uses the server's HTTP pieces;
# the command line above it is out of its sight.
kiln_layering_case(router server/http_listener.h cli/commands.h)
# The UCX KV connector implements the engine's interface and sees nothing
# of the server that uses it.
if(UCX_FOUND)
  kiln_layering_case(disagg engine/kv_connector.h server/api_server.h)
endif()
# The engine runs a split model through the Collective interface and the
# hook in its options; the MPI side (src/parallel) is above it.
if(TARGET kiln_parallel)
  kiln_layering_case(engine backend/collective.h parallel/tensor_parallel.h)
endif()
