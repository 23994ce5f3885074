# Training (src/autodiff, src/train, `anvil train`): tests/train/digits.py trains a small
# CNN on scikit-learn's digits to >= 97% test accuracy and checks the exported model against
# ONNX Runtime; tests/train/check_cli.py resumes from checkpoints and feeds bad input;
# tests/train/check_grads.py checks every gradient rule against finite differences
# (and PyTorch's autograd where torch is installed). Included from tests/CMakeLists.txt.

set(ANVIL_TRAIN_PYTHON ${PROJECT_SOURCE_DIR}/.venv/bin/python)
if(NOT EXISTS ${ANVIL_TRAIN_PYTHON})
  add_test(NAME train.skipped
           COMMAND ${CMAKE_COMMAND} -E echo "train tests skipped: no ${ANVIL_TRAIN_PYTHON}; run"
                   "scripts/setup.sh and re-configure")
  set_tests_properties(train.skipped PROPERTIES SKIP_REGULAR_EXPRESSION "skipped")
  return()
endif()

add_test(NAME train.digits
         COMMAND ${ANVIL_TRAIN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/train/digits.py
                 $<TARGET_FILE:anvil> ${CMAKE_BINARY_DIR}/train_digits)
set_tests_properties(train.digits PROPERTIES TIMEOUT 600 FIXTURES_SETUP train_digits)
# The same training in mixed precision (bf16 products, fp32 master weights): still >= 97%.
add_test(NAME train.digits_bf16
         COMMAND ${ANVIL_TRAIN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/train/digits.py
                 $<TARGET_FILE:anvil> ${CMAKE_BINARY_DIR}/train_digits_bf16 --precision bf16)
set_tests_properties(train.digits_bf16 PROPERTIES TIMEOUT 600)
add_test(NAME train.cli
         COMMAND ${ANVIL_TRAIN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/train/check_cli.py
                 $<TARGET_FILE:anvil> ${CMAKE_BINARY_DIR}/train_digits)
set_tests_properties(train.cli PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED train_digits)

add_test(NAME train.grads
         COMMAND ${ANVIL_TRAIN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/train/check_grads.py
                 $<TARGET_FILE:anvil> ${CMAKE_BINARY_DIR}/train_grads)
set_tests_properties(train.grads PROPERTIES TIMEOUT 600)

# 20 SGD and 20 AdamW steps against PyTorch's (skips with a message where torch is absent)
add_test(NAME train.torch COMMAND ${ANVIL_TRAIN_PYTHON} ${PROJECT_SOURCE_DIR}/bench/train_torch.py
                                  --check --anvil $<TARGET_FILE:anvil>)
set_tests_properties(train.torch PROPERTIES TIMEOUT 600 SKIP_REGULAR_EXPRESSION "^skipped")
