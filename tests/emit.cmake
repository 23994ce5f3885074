# anvil compile (src/emit/emit.c): models written out as C libraries, built with nothing but
# cc -std=c11 -O2 -Wall -Werror and no anvil header or library, must compute what `anvil run`
# computes (tests/emit/check_emit.py). Under the sanitizers the emitter runs instrumented, on
# fewer random graphs. Included from tests/CMakeLists.txt; the fixtures come from ort.cmake.

set(ANVIL_EMIT_PY ${PROJECT_SOURCE_DIR}/.venv/bin/python)
set(ANVIL_EMIT_CHECK ${CMAKE_CURRENT_SOURCE_DIR}/emit/check_emit.py)
set(ANVIL_EMIT_WORK ${CMAKE_BINARY_DIR}/emit)
if(NOT EXISTS ${ANVIL_EMIT_PY})
  return()
endif()

if(ANVIL_SANITIZE)
  set(_emit_graphs 20)
else()
  set(_emit_graphs 150)
endif()

# Random graphs of GEMMs and elementwise ops: opt-level 0, 1 and the library agree.
add_test(NAME emit.random
         COMMAND ${ANVIL_EMIT_PY} ${ANVIL_EMIT_CHECK} $<TARGET_FILE:anvil> ${ANVIL_EMIT_WORK}/random
                 random ${_emit_graphs} --seed 1)
set_tests_properties(emit.random PROPERTIES TIMEOUT 900 LABELS emit)
# The same in bf16: the libraries run anvil's bf16 tiles and agree with `anvil run --precision
# bf16` (and fail where no graph got a bf16 tile on a CPU that has AVX512_BF16).
add_test(NAME emit.random_bf16
         COMMAND ${ANVIL_EMIT_PY} ${ANVIL_EMIT_CHECK} $<TARGET_FILE:anvil>
                 ${ANVIL_EMIT_WORK}/random_bf16 --precision bf16 random 16 --seed 2)
set_tests_properties(emit.random_bf16 PROPERTIES TIMEOUT 900 LABELS emit)
# The same in fp16 (its tiles, convs and attention where the CPU has AVX512-FP16).
add_test(NAME emit.random_fp16
         COMMAND ${ANVIL_EMIT_PY} ${ANVIL_EMIT_CHECK} $<TARGET_FILE:anvil>
                 ${ANVIL_EMIT_WORK}/random_fp16 --precision fp16 random 16 --seed 3)
set_tests_properties(emit.random_fp16 PROPERTIES TIMEOUT 900 LABELS emit)

# The generated ResNet-style CNN, the way a user builds it: its Makefile, its CMakeLists.txt,
# --embed-weights, and the runner's errors on a corrupt weights file and a wrong input shape.
add_test(NAME emit.make
         COMMAND sh -c "mkdir -p '${ANVIL_EMIT_WORK}' && '${ANVIL_EMIT_PY}' -c 'import onnx, numpy as np; from onnx import numpy_helper; \
np.save(\"${ANVIL_EMIT_WORK}/cnn_input.npy\", numpy_helper.to_array(onnx.load_tensor(\
\"${CMAKE_BINARY_DIR}/ort/models/resnet_small/test_data_set_0/input_0.pb\")))' && \
'${ANVIL_EMIT_PY}' '${ANVIL_EMIT_CHECK}' '$<TARGET_FILE:anvil>' '${ANVIL_EMIT_WORK}/make' make \
'${CMAKE_BINARY_DIR}/ort/models/resnet_small/model.onnx' 'input=${ANVIL_EMIT_WORK}/cnn_input.npy'")
set_tests_properties(emit.make PROPERTIES FIXTURES_REQUIRED ort_models TIMEOUT 900 LABELS emit)

# Every operator case and zoo model that can be emitted (the rest must be refused with exit code
# 13 and a message naming the nodes; the summary counts both).
add_test(NAME emit.cases
         COMMAND ${ANVIL_EMIT_PY} ${ANVIL_EMIT_CHECK} $<TARGET_FILE:anvil> ${ANVIL_EMIT_WORK}/cases
                 cases ${CMAKE_BINARY_DIR}/ort/cases ${CMAKE_BINARY_DIR}/ort/models
                 ${CMAKE_BINARY_DIR}/zoo)
set_tests_properties(emit.cases PROPERTIES FIXTURES_REQUIRED "ort_cases;ort_models;zoo_models"
                                           TIMEOUT 1800 LABELS emit)
