# kiln detect's head decode and NMS against an independent numpy decode of
# the same raw head output (tests/vision/ref_yolo_decode.py).
add_test(NAME vision_yolo_decode_reference
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/vision/ref_yolo_decode.py $<TARGET_FILE:kiln_cli>)
set_tests_properties(vision_yolo_decode_reference PROPERTIES LABELS "vision;python" TIMEOUT 120
  ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
