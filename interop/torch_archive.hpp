// State dicts saved by PyTorch's torch.save (the zip archive format, PyTorch >= 1.6): the
// archive is opened with LibTorch's own reader (caffe2::serialize::PyTorchStreamReader), and its
// data.pkl is interpreted here by a small pickle machine that knows only what a state dict
// needs (dicts, OrderedDicts, tuples, lists, numbers, strings, and tensors rebuilt from the
// archive's storages). LibTorch's own unpickler turns an OrderedDict into None, so it cannot
// return a state dict; and nothing in a file read here is ever executed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "interop/tensors.hpp"

namespace icl::interop {

struct TorchSaveContents {
  NamedTensors tensors;
  // Where the state dict was: "" (the file is the state dict) or "model_state_dict" (Garg et
  // al.'s training script saves {"model_state_dict": ..., "optimizer_state_dict": ...,
  // "train_step": ...}).
  std::string key;
  std::optional<std::int64_t> train_step;  // the file's "train_step", when it says
};

// Every tensor comes back contiguous, as float32 (float, double, half, bfloat16 storages) or as
// it is (uint8, bool, int32, int64). Throws core::InputError (setting `field`) naming the pickle
// offset, the tensor or the storage record for a file that is not such an archive, a pickle
// that uses anything but the opcodes and classes of a state dict, a storage that is missing or
// whose size does not match, or a tensor view that runs past its storage.
TorchSaveContents ReadTorchSave(const std::string& path, const std::string& field);

}  // namespace icl::interop
