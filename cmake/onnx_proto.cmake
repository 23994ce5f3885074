# Placeholder until the ONNX importer lands: defines the variables the top-level file uses.
set(ANVIL_ONNX_PROTO_SOURCES "")
set(ANVIL_ONNX_PROTO_INCLUDE "")
set(ANVIL_ONNX_PROTO_LIBS "")
