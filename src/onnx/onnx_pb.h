/* Field types that src/onnx/onnx.options asks nanopb to use for onnx.proto's callback fields.
 * The generated onnx.pb.h includes this header before it declares its message structs; it is
 * private to src/onnx.
 *
 * Every callback field of a generated message goes through onnx_pb_callback (decode.c), which
 * fills these structs. They hold no pointers to heap memory, so nanopb may copy, move or zero
 * the messages that contain them without leaking anything. */
#ifndef ANVIL_ONNX_PB_H
#define ANVIL_ONNX_PB_H

#include <pb.h>

#include <stddef.h>
#include <stdint.h>

/* A length-delimited field left in place in the input: data points into the buffer being
 * decoded (borrowed from it, never copied) and size is its length. If the field occurs several
 * times, data/size describe the last occurrence and count says how many there were. Used for
 * TensorProto.raw_data, serialized subgraphs (AttributeProto.g) and fields anvil only needs to
 * detect (sparse tensors, type protos, string data). */
typedef struct onnx_pb_bytes {
    const uint8_t *data;
    size_t size;
    uint32_t count;
} onnx_pb_bytes;

/* A repeated field whose elements live in a growable array owned by the decode context
 * (onnx_pb_ctx in onnx_internal.h). slot is 0 while the field is absent, otherwise 1 + the index
 * of the array in the context. */
typedef struct onnx_pb_list {
    uint32_t slot;
} onnx_pb_list;

/* nanopb field callback for every callback field of the generated ONNX messages. */
bool onnx_pb_callback(pb_istream_t *istream, pb_ostream_t *ostream, const pb_field_t *field);

#endif
