// The safetensors format (Hugging Face): reading every tensor of a file, checked.
#pragma once

#include <string>

#include "interop/tensors.hpp"

namespace icl::interop {

// A .safetensors file: an 8-byte little-endian header length, a JSON header {name: {dtype,
// shape, data_offsets [begin, end)}, optional __metadata__}, then the tensors' little-endian
// bytes, contiguous, in offset order, covering the data exactly. Every tensor is returned as
// float32 (F32, F64, F16, BF16) or as it is (U8, BOOL, I32, I64). Throws core::InputError (setting
// `field`) naming the tensor or the offset for a short file, a header that is not such JSON, a
// dtype it cannot read, offsets that overlap, leave gaps or run past the data, or a byte count
// that does not match the shape.
NamedTensors ReadSafetensors(const std::string& path, const std::string& field);

}  // namespace icl::interop
