// Reading safetensors files, every offset and byte count checked.
#include "interop/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <vector>

#include "core/errors.hpp"

namespace icl::interop {

namespace {

struct DtypeInfo {
  torch::ScalarType type;
  std::size_t bytes;
};

// The safetensors dtypes iclprobe reads.
bool LookUpDtype(const std::string& name, DtypeInfo* out) {
  static const std::map<std::string, DtypeInfo> known = {
      {"F32", {torch::kFloat, 4}},     {"F64", {torch::kDouble, 8}}, {"F16", {torch::kHalf, 2}},
      {"BF16", {torch::kBFloat16, 2}}, {"U8", {torch::kUInt8, 1}},   {"BOOL", {torch::kBool, 1}},
      {"I32", {torch::kInt, 4}},       {"I64", {torch::kLong, 8}}};
  const auto it = known.find(name);
  if (it == known.end()) return false;
  *out = it->second;
  return true;
}

}  // namespace

NamedTensors ReadSafetensors(const std::string& path, const std::string& field) {
  auto fail = [&](const std::string& what) {
    throw core::InputError("import", field, "'" + path + "': " + what);
  };
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot be read");
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || size < 8) fail("too short for a safetensors file (no 8-byte header length)");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | len_bytes[i];
  if (header_len == 0 || header_len > 100'000'000 || header_len > size - 8)
    fail(fmt::format("header length {} does not fit a file of {} bytes (safetensors expected)",
                     header_len, size));
  std::string header(header_len, '\0');
  in.read(header.data(), std::streamsize(header_len));
  if (!in) fail("truncated header");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception&) {
    fail("the header is not JSON (not a safetensors file?)");
  }
  if (!j.is_object()) fail("the header is not a JSON object");
  const std::uint64_t data_size = size - 8 - header_len;
  struct Entry {
    std::string name;
    DtypeInfo dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& what) { fail("tensor '" + name + "': " + what); };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      bad("expected dtype, shape and data_offsets");
    if (!v["dtype"].is_string()) bad("dtype is not a string");
    Entry e;
    e.name = name;
    const std::string dtype = v["dtype"].get<std::string>();
    if (!LookUpDtype(dtype, &e.dtype))
      bad("dtype " + dtype + " cannot be read (F32, F64, F16, BF16, U8, BOOL, I32, I64)");
    if (!v["shape"].is_array() || v["shape"].size() > 8) bad("shape is not a list of sizes");
    double numel = 1;
    for (const auto& s : v["shape"]) {
      if (!s.is_number_unsigned()) bad("shape is not a list of sizes");
      // Read as unsigned: 2^63 and above would wrap to negative sizes. No learner's parameter
      // has a dimension of 2^28 or more (1 GiB of float32), even beside a zero one.
      const std::uint64_t size = s.get<std::uint64_t>();
      if (size >= (std::uint64_t(1) << 28))
        bad(fmt::format("shape has a dimension of {}, more than a learner's parameter can have",
                        size));
      e.shape.push_back(static_cast<std::int64_t>(size));
      numel *= double(e.shape.back());
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      bad("data_offsets is not a pair of offsets");
    e.begin = off[0].get<std::uint64_t>();
    e.end = off[1].get<std::uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      bad(fmt::format("data_offsets [{}, {}) lie outside the {} bytes of data", e.begin, e.end,
                      data_size));
    if (numel * double(e.dtype.bytes) != double(e.end - e.begin))
      bad(fmt::format("shape {} of {} needs {} bytes, data_offsets [{}, {}) give {}",
                      ShapeText(e.shape), dtype, numel * double(e.dtype.bytes), e.begin, e.end,
                      e.end - e.begin));
    entries.push_back(std::move(e));
  }
  // The tensors tile the data exactly: no overlap, no gap, nothing after the last.
  // By (begin, end): an empty tensor at the offset where another starts comes first, whatever
  // the header's order.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t at = 0;
  for (const auto& e : entries) {
    if (e.begin != at)
      fail(
          fmt::format("tensor '{}' starts at data offset {}, expected {} (offsets overlap or "
                      "leave a gap)",
                      e.name, e.begin, at));
    at = e.end;
  }
  if (at != data_size)
    fail(fmt::format("the tensors end at data offset {} but the file holds {} bytes of data", at,
                     data_size));
  NamedTensors out;
  for (const auto& e : entries) {
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype.type));
    in.seekg(std::streamoff(8 + header_len + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), std::streamsize(e.end - e.begin));
    if (!in) fail("tensor '" + e.name + "': cannot read its bytes (truncated file?)");
    if (t.is_floating_point()) t = t.to(torch::kFloat);
    out[e.name] = t;
  }
  return out;
}

}  // namespace icl::interop
