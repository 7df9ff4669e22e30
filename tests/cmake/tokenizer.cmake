# Tokenizer checks beyond GoogleTest: `kiln tokenize` against an independent
# Python byte-level BPE reference (tests/tools/bpe_reference.py) and Debian's
# python3-sentencepiece, on special-token text, long words, '#' code and
# non-NFC input.
add_test(NAME tokenizer_python_reference
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/tools/tokenizer_reference_test.py $<TARGET_FILE:kiln_cli>
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(tokenizer_python_reference PROPERTIES LABELS "tokenizer;python" TIMEOUT 600)
