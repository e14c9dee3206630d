// iclprobe import --format garg: a GPT-2-style learner made and run by a plain PyTorch program
// (tests/fixtures/garg/make_garg_fixture.py) is reproduced by the imported checkpoint; hostile
// safetensors files and torch.save archives are refused with one line naming the tensor or offset.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/hdf5.hpp"
#include "learners/checkpoint.hpp"
#include "tests/test_util.hpp"

using namespace icl;
using test::CountLines;
using test::RunIclprobe;
using test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string Fixture(const std::string& name) {
  return std::string(ICL_FIXTURES) + "/garg/" + name;
}

torch::Tensor ReadDoubles(const h5::File& f, const std::string& name) {
  const h5::Dataset ds = f.OpenDataset(name);
  std::vector<double> v = ds.ReadAll<double>();
  const h5::Dims dims = ds.dims();
  return torch::from_blob(v.data(), std::vector<std::int64_t>(dims.begin(), dims.end()),
                          torch::kDouble)
      .clone();
}

// A safetensors file from a header (JSON) and data bytes.
void WriteSafetensors(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    f.put(static_cast<char>((n >> (8 * i)) & 0xff));
  f << header << data;
}

// Pickle pieces (protocol 2) for hand-made torch.save archives.
std::string Le32(std::uint32_t v) {
  std::string b(4, '\0');
  for (int i = 0; i < 4; ++i)
    b[std::size_t(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return b;
}
std::string PStr(const std::string& s) {
  return "X" + Le32(std::uint32_t(s.size())) + s;
}
std::string PInt(std::int32_t i) {
  return "J" + Le32(static_cast<std::uint32_t>(i));
}
std::string PInts(const std::vector<std::int32_t>& v) {
  std::string p = "(";
  for (auto i : v)
    p += PInt(i);
  return p + "t";
}
// _rebuild_tensor_v2(storage(float, key, numel), offset, size, stride, False, {})
std::string PTensor(const std::string& key, std::int32_t numel, std::int32_t offset,
                    const std::vector<std::int32_t>& size,
                    const std::vector<std::int32_t>& stride) {
  return "ctorch._utils\n_rebuild_tensor_v2\n((" + PStr("storage") + "ctorch\nFloatStorage\n" +
         PStr(key) + PStr("cpu") + PInt(numel) + "tQ" + PInt(offset) + PInts(size) + PInts(stride) +
         "\x89}tR";
}
// {name: value-pickle, ...} as a torch.save archive with the given storage records.
void WriteTorchSave(const std::string& path, const std::string& items,
                    const std::map<std::string, std::string>& records, bool stop = true) {
  const std::string pkl = "\x80\x02}(" + items + "u" + (stop ? "." : "");
  caffe2::serialize::PyTorchStreamWriter w(path);
  w.writeRecord("data.pkl", pkl.data(), pkl.size());
  for (const auto& [name, bytes] : records)
    w.writeRecord(name, bytes.data(), bytes.size());
  w.writeEndOfFile();
}

// The first half of a fixture file: refused with one line saying `says`, exit 2, no output.
void ExpectHalfOfFixtureRefused(const TempDir& tmp, const std::string& fixture,
                                const std::string& says) {
  const std::string all = test::ReadFile(Fixture(fixture));
  const std::string in = tmp / ("cut-" + fixture), out = tmp / "o.h5";
  std::ofstream(in, std::ios::binary) << all.substr(0, all.size() / 2);
  const auto r = RunIclprobe("import --format garg " + in + " --heads 2 --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace

// The reference is PyTorch's float32 forward of the same weights on the same prompts; the
// imported model computes the same sums in another order (its input projection multiplies a
// zero coordinate, the attention's q, k, v come from one fused product), so the two agree to
// float32 rounding accumulated over 2 blocks of width 32: relative ~1e-6 on values of order 1,
// far inside the required 1e-5.
TEST(Import, GargSafetensorsReproducesThePyTorchForward) {
  TempDir tmp;
  const std::string out = tmp / "garg.h5";
  const auto r = RunIclprobe("import --format garg " + Fixture("model.safetensors") +
                             " --heads 2 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  learners::CheckpointInfo info;
  learners::Transformer model = learners::LoadCheckpoint(out, &info);
  model->eval();
  EXPECT_EQ(info.model.d, 5);
  EXPECT_EQ(info.model.n_max, 11);
  EXPECT_EQ(info.model.layers, 2);
  EXPECT_EQ(info.model.hidden, 32);
  EXPECT_EQ(info.train.task.d, 5);

  const h5::File ref = h5::File::Open(Fixture("reference.h5"));
  const torch::Tensor x = ReadDoubles(ref, "x").to(torch::kFloat);  // [B, n, d]
  const torch::Tensor y = ReadDoubles(ref, "y").to(torch::kFloat);  // [B, n]
  const std::int64_t B = x.size(0), n = x.size(1), d = x.size(2);
  // iclprobe's token layout, built here independently: x-token [0, x], y-token [y, 0_d].
  torch::Tensor tokens = torch::zeros({B, 2 * n, d + 1});
  tokens.slice(1, 0, 2 * n, 2).slice(2, 1, d + 1).copy_(x);
  tokens.slice(1, 1, 2 * n, 2).select(2, 0).copy_(y);
  torch::NoGradGuard no_grad;
  const auto run = model->Run(tokens, {/*hidden_states=*/true, /*attention=*/false});
  const torch::Tensor want_pred = ReadDoubles(ref, "predictions");
  EXPECT_LT((run.predictions.to(torch::kDouble) - want_pred).abs().max().item<double>(), 1e-5);
  const torch::Tensor want_hidden = ReadDoubles(ref, "hidden");  // [L + 1, B, 2n, H]
  ASSERT_EQ(run.hidden.size(), 3u);
  for (std::size_t l = 0; l < run.hidden.size(); ++l)
    EXPECT_LT((run.hidden[l].to(torch::kDouble) - want_hidden[l]).abs().max().item<double>(), 1e-5)
        << "state " << l;
  // The file names its origin.
  EXPECT_EQ(h5::File::Open(out).GetString("imported_from"), Fixture("model.safetensors"));
  // And the rest of the pipeline runs on it.
  const auto cmp =
      RunIclprobe("compare -c " + out +
                  " --learners ols,ridge:0.1 --prompts 50 --ilwd-prompts 5 --threads 1 --quiet");
  EXPECT_EQ(cmp.exit_code, 0) << cmp.err;
}

TEST(Import, ShapesAndOptionsThatContradictTheTensorsAreRefused) {
  TempDir tmp;
  const std::string in = Fixture("model.safetensors");
  auto refused = [&](const std::string& args, const std::string& says) {
    const std::string out = tmp / "o.h5";
    const auto r = RunIclprobe("import --format garg " + args + " --out " + out);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  };
  refused(in + " --heads 2 --d 4", "'_read_in.weight' has shape [32, 5]");
  refused(in + " --heads 3", "3 heads do not divide");
  refused(in + " --heads 2 --n 12", "'_backbone.wpe.weight' has shape [22, 32]");
  refused(in, "--heads: required");
  refused(in + " --heads 2 --format other", "--format");
  refused(in + " --heads 2 --d-effective 6",
          "--d-effective: 6 exceeds the learner's input dimension d = 5");
  refused(in + " --heads 2 --d-effective 0", "--d-effective: expected a positive count");
}

// Hostile safetensors: each a one-line error naming the tensor or the offset, exit 2, no file.
TEST(Import, HostileSafetensorsAreRefused) {
  TempDir tmp;
  auto refused = [&](const std::string& header, const std::string& data, const std::string& says) {
    const std::string in = tmp / "bad.safetensors", out = tmp / "o.h5";
    WriteSafetensors(in, header, data);
    const auto r = RunIclprobe("import --format garg " + in + " --heads 2 --out " + out);
    EXPECT_EQ(r.exit_code, 2) << header;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  };
  const std::string four_floats(16, '\0');
  refused(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,20]}})", four_floats,
          "tensor 'a': data_offsets [0, 20) lie outside the 16 bytes");
  refused(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", four_floats,
          "tensor 'a': shape [3] of F32 needs 12 bytes");
  refused(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      std::string(12, '\0'), "tensor 'b' starts at data offset 4, expected 8");
  refused(R"({"a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", std::string(4, '\0'),
          "tensor 'a': dtype F8_E4M3 cannot be read");
  refused(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", four_floats,
          "missing tensor '_read_in.weight'");
  refused("not json at all", "", "header is not JSON");
  // Sizes of 2^63 and 2^64 - 1 beside a zero (no bytes needed): read as signed they were
  // negative sizes, and LibTorch's own message reached the user.
  for (const std::string size : {"9223372036854775808", "18446744073709551615"})
    refused(R"({"a":{"dtype":"F32","shape":[)" + size + R"(,0],"data_offsets":[0,0]}})", "",
            "tensor 'a': shape has a dimension of " + size);
  // Truncated: the fixture cut in the middle of its data.
  ExpectHalfOfFixtureRefused(tmp, "model.safetensors", "lie outside");
  // A tensor holding NaN.
  {
    const float nan = std::nanf("");
    std::string data(16, '\0');
    std::memcpy(data.data() + 4, &nan, 4);
    refused(R"({"_read_in.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", data,
            "'_read_in.weight' holds values that are not finite");
  }
}

// torch.save archives (LibTorch's zip reader, iclprobe's pickle machine): the wrapped dict of
// Garg et al.'s training script and a bare nn.Module state dict (with its _metadata, pickled
// with BUILD) give exactly the tensors of the safetensors file, so the same checkpoint.
TEST(Import, GargTorchSaveGivesTheSafetensorsWeights) {
  TempDir tmp;
  auto import = [&](const std::string& fixture, const std::string& extra = "") {
    const std::string out = tmp / (fixture + ".h5");
    const auto r = RunIclprobe("import --format garg " + Fixture(fixture) + " --heads 2 " + extra +
                               " --out " + out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  };
  const std::string st = import("model.safetensors"), wrapped = import("state.pt"),
                    bare = import("model.pt", "--d-effective 3");
  learners::CheckpointInfo info_bare;
  const auto ref = learners::LoadCheckpoint(st);
  for (const std::string& path : {wrapped, bare}) {
    const auto got = learners::LoadCheckpoint(path, path == bare ? &info_bare : nullptr);
    const auto want_params = ref->named_parameters();
    const auto got_params = got->named_parameters();
    ASSERT_EQ(want_params.size(), got_params.size());
    for (const auto& p : want_params)
      EXPECT_TRUE(torch::equal(p.value(), got_params[p.key()])) << path << " " << p.key();
  }
  EXPECT_EQ(h5::File::Open(wrapped).GetInt("imported_train_step"), 1234);
  EXPECT_FALSE(h5::File::Open(bare).HasAttr("imported_train_step"));
  EXPECT_NE(h5::File::Open(wrapped).GetString("imported_format").find("model_state_dict"),
            std::string::npos);
  // --d-effective is the imported task's, and extract samples it: x beyond it is zero.
  EXPECT_EQ(info_bare.train.task.d_effective, 3);
  const std::string acts = tmp / "acts.h5";
  const auto ex = RunIclprobe("extract -c " + bare + " -o " + acts + " -N 8 --threads 1 --quiet");
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  const torch::Tensor x = ReadDoubles(h5::File::Open(acts), "prompts/x");  // [N, n, d]
  EXPECT_EQ(x.slice(2, 3, 5).abs().max().item<double>(), 0.0);
  EXPECT_GT(x.slice(2, 0, 3).abs().min().item<double>(), 0.0);
}

// Hostile torch.save archives: each a one-line error naming what does not fit, exit 2, no file.
TEST(Import, HostileTorchSaveArchivesAreRefused) {
  TempDir tmp;
  int case_no = 0;
  auto refused = [&](const std::string& items, const std::map<std::string, std::string>& records,
                     const std::string& says, bool stop = true) {
    const std::string in = tmp / ("bad" + std::to_string(case_no++) + ".pt"), out = tmp / "o.h5";
    WriteTorchSave(in, items, records, stop);
    const auto r = RunIclprobe("import --format garg " + in + " --heads 2 --out " + out);
    EXPECT_EQ(r.exit_code, 2) << says;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  };
  const std::string four_floats(16, '\0');
  // The control: a well-formed archive is read, and fails only for lacking Garg's tensors.
  refused(PStr("a") + PTensor("0", 4, 0, {2, 2}, {2, 1}), {{"data/0", four_floats}},
          "missing tensor '_read_in.weight'");
  refused(PStr("a") + PTensor("0", 4, 1, {2, 2}, {2, 1}), {{"data/0", four_floats}},
          "tensor 'a': its view (offset 1, shape [2, 2]) runs past its storage of 4 elements");
  refused(PStr("a") + PTensor("0", 4, 0, {2, 2}, {2, 1}), {{"data/0", std::string(12, '\0')}},
          "tensor 'a': storage 'data/0' holds 12 bytes, 4 elements of 4 bytes expected");
  refused(PStr("a") + PTensor("7", 4, 0, {2, 2}, {2, 1}), {{"data/0", four_floats}},
          "tensor 'a': storage record 'data/7' is missing");
  refused(PStr("a") + PInt(3), {}, "'a' is an int, not a tensor");
  refused(PStr("a") + "cos\nsystem\n", {},
          "refers to os.system, which is not part of a state dict");
  refused(PStr("a") + PInt(3), {}, "the pickle ends early", /*stop=*/false);
  refused(PStr("a") + "h\x05", {}, "memo entry 5 read before it was written");
  // Truncated: the fixture cut in half is no longer a zip archive LibTorch can open.
  ExpectHalfOfFixtureRefused(tmp, "model.pt", "not a readable torch.save archive");
}

// Inputs that crashed the importer before commit a67d39f. Each is refused
// with one line, exit 2 (a crash would be 128 + the signal), and no output.
TEST(Import, DeepNestingZeroWidthsAndHugeViewsAreRefusedNotCrashed) {
  TempDir tmp;
  int case_no = 0;
  auto refused = [&](const std::string& items, const std::map<std::string, std::string>& records,
                     const std::string& says) {
    const std::string in = tmp / ("deep" + std::to_string(case_no++) + ".pt"), out = tmp / "o.h5";
    WriteTorchSave(in, items, records);
    const auto r = RunIclprobe("import --format garg " + in + " --heads 2 --out " + out);
    EXPECT_EQ(r.exit_code, 2) << says << "\n" << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  };
  // One int inside 10^6 one-item tuples (TUPLE1) and inside 10^6 lists (EMPTY_LIST, APPEND
  // each inside the next): the tear-down of either used to overflow the stack (SIGSEGV).
  const std::size_t million = 1000000;
  refused(PStr("a") + PInt(1) + std::string(million, '\x85'), {}, "nested more than 64 deep");
  // [[[...[1]...]]]: 10^6 empty lists on the stack, the int, then 10^6 APPENDs, each putting
  // the top item into the list below it.
  const std::string lists =
      PStr("a") + std::string(million, ']') + PInt(1) + std::string(million, 'a');
  refused(lists, {}, "nested more than 64 deep");
  // A zero-width learner: `size % H` divided by zero (SIGFPE).
  refused(PStr("_read_in.weight") + PTensor("0", 0, 0, {0, 3}, {3, 1}), {{"data/0", ""}},
          "tensor '_read_in.weight' has shape [0, 3], expected [H, d] with the width H");
  // A four-element storage viewed with stride 0 as 2^31 elements (8 GiB when made contiguous).
  refused(PStr("a") + PTensor("0", 4, 0, {65536, 32768}, {0, 0}),
          {{"data/0", std::string(16, '\0')}},
          "tensor 'a': its view (shape [65536, 32768]) has 2147483648 elements");
  // Within that bound, a stride-0 view of 2^26 elements over a storage of 4: refused before
  // the copy, which took a minute.
  refused(PStr("a") + PTensor("0", 4, 0, {8192, 8192}, {0, 0}),
          {{"data/0", std::string(16, '\0')}},
          "has 67108864 elements, more than the 4 of its storage");
}

TEST(Import, ASafetensorsEmptyTensorAtASharedOffsetIsNotAGap) {
  TempDir tmp;
  const std::string in = tmp / "e.safetensors", out = tmp / "o.h5";
  // "b" is empty and starts where "a" starts; listed after it, it used to sort before or after
  // it at random and be called an overlap. Read right, the file fails only for lacking Garg's
  // tensors.
  WriteSafetensors(
      in,
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})",
      std::string(16, '\0'));
  const auto r = RunIclprobe("import --format garg " + in + " --heads 2 --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing tensor '_read_in.weight'"), std::string::npos) << r.err;
  // A zero-width safetensors learner is refused for its width, not for its offsets.
  WriteSafetensors(in, R"({"_read_in.weight":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})",
                   "");
  const auto z = RunIclprobe("import --format garg " + in + " --heads 2 --out " + out);
  EXPECT_EQ(z.exit_code, 2);
  EXPECT_NE(z.err.find("expected [H, d] with the width H"), std::string::npos) << z.err;
}

// 200,000 keys: a linear search per key made this quadratic (178 s). The dict is read (and then
// refused for lacking Garg's tensors) under a timeout that only a quadratic reader would hit.
TEST(Import, AStateDictOfManyKeysIsReadInLinearTime) {
  TempDir tmp;
  std::string items;
  for (int i = 0; i < 200000; ++i)
    items += PStr("k" + std::to_string(i)) + PInt(i);
  const std::string in = tmp / "many.pt", out = tmp / "o.h5";
  WriteTorchSave(in, items, {});
  const auto r = test::RunShell("timeout 60 '" + test::IclprobeBin() + "' import --format garg " +
                                in + " --heads 2 --out " + out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("'k0' is an int, not a tensor"), std::string::npos) << r.err;
}
