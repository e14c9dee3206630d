// Mapping Garg et al.'s GPT-2 layout onto the iclprobe transformer.
#include "interop/garg.hpp"

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

ImportLayout ParseImportLayout(const std::string& name) {
  if (name == "garg") return ImportLayout::kGarg;
  throw core::InputError("import", "format", "expected garg, got '" + name + "'");
}

using learners::Block;

Transformer FromGarg(const NamedTensors& tensors, const GargShape& shape, const std::string& field,
                     ModelConfig* config) {
  auto fail = [&](const std::string& what) { throw core::InputError("import", field, what); };
  auto get = [&](const std::string& name) -> const torch::Tensor& {
    const auto it = tensors.find(name);
    if (it == tensors.end())
      fail("missing tensor '" + name + "' (Garg et al.'s GPT-2 layout expected)");
    if (!it->second.is_floating_point()) fail("tensor '" + name + "' is not floating point");
    if (!torch::isfinite(it->second).all().item<bool>())
      fail("tensor '" + name + "' holds values that are not finite");
    return it->second;
  };
  auto expect = [&](const std::string& name, std::vector<std::int64_t> want) {
    const torch::Tensor& t = get(name);
    if (std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()) != want)
      fail("tensor '" + name + "' has shape " + ShapeText(t) + ", expected " + ShapeText(want));
    return t;
  };
  const torch::Tensor& read_in = get("_read_in.weight");
  if (read_in.dim() != 2)
    fail("tensor '_read_in.weight' has shape " + ShapeText(read_in) + ", expected [H, d]");
  const std::int64_t H = read_in.size(0), d = read_in.size(1);
  if (H < 1 || d < 1)
    fail("tensor '_read_in.weight' has shape " + ShapeText(read_in) +
         ", expected [H, d] with the width H and the input dimension d at least 1");
  if (shape.d > 0 && shape.d != d)
    fail(fmt::format("d = {} was asked for, but tensor '_read_in.weight' has shape {} (d = {})",
                     shape.d, ShapeText(read_in), d));
  const torch::Tensor& wpe = get("_backbone.wpe.weight");
  if (wpe.dim() != 2 || wpe.size(1) != H || wpe.size(0) % 2 != 0 || wpe.size(0) < 2)
    fail("tensor '_backbone.wpe.weight' has shape " + ShapeText(wpe) +
         ", expected [2 n_positions, " + std::to_string(H) + "]");
  const std::int64_t n_positions = wpe.size(0) / 2;
  const std::int64_t n = shape.n > 0 ? shape.n : n_positions;
  if (n > n_positions)
    fail(
        fmt::format("n = {} examples need {} positions, but tensor '_backbone.wpe.weight' has "
                    "shape {} ({} examples at most)",
                    n, 2 * n, ShapeText(wpe), n_positions));
  if (shape.heads <= 0) fail("the number of heads is not stored in the tensors: give it");
  if (H % shape.heads != 0)
    fail(fmt::format("{} heads do not divide the width {} of tensor '_read_in.weight' {}",
                     shape.heads, H, ShapeText(read_in)));
  int layers = 0;
  while (tensors.count(fmt::format("_backbone.h.{}.ln_1.weight", layers)))
    ++layers;
  if (layers == 0) fail("missing tensor '_backbone.h.0.ln_1.weight' (no transformer blocks)");
  const torch::Tensor& c_fc = get("_backbone.h.0.mlp.c_fc.weight");
  if (c_fc.dim() != 2 || c_fc.size(0) != H || c_fc.size(1) % H != 0)
    fail("tensor '_backbone.h.0.mlp.c_fc.weight' has shape " + ShapeText(c_fc) + ", expected [" +
         std::to_string(H) + ", a multiple of " + std::to_string(H) + "]");
  const std::int64_t F = c_fc.size(1);

  // Every tensor is either used below or a known unused one.
  std::set<std::string> used = {
      "_read_in.weight",     "_read_in.bias",    "_backbone.wpe.weight", "_backbone.ln_f.weight",
      "_backbone.ln_f.bias", "_read_out.weight", "_read_out.bias"};
  static const std::regex ignorable(
      R"(_backbone\.wte\.weight|_backbone\.h\.\d+\.attn\.(bias|masked_bias))");
  for (int l = 0; l < layers; ++l)
    for (const char* s :
         {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
          "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
      used.insert(fmt::format("_backbone.h.{}.{}", l, s));
  for (const auto& [name, t] : tensors)
    if (!used.count(name) && !std::regex_match(name, ignorable))
      fail("unexpected tensor '" + name + "' (not part of Garg et al.'s GPT-2 layout)");

  ModelConfig c;
  c.d = static_cast<int>(d);
  c.n_max = static_cast<int>(n);
  c.layers = layers;
  c.hidden = static_cast<int>(H);
  c.heads = shape.heads;
  c.mlp_ratio = static_cast<int>(F / H);
  c.norm = "layer";
  c.kernels = 1;  // PyTorch's GELU made the published learner; LibTorch's is the same arithmetic
  c.Validate();
  Transformer model(c);
  torch::NoGradGuard no_grad;
  auto set = [&](torch::Tensor& dst, const torch::Tensor& src) { dst.copy_(src); };
  // Width-(d+1) tokens [0, x] and [y, 0_d]: column 0 multiplies y (read_in's first column),
  // columns 1..d multiply x (all of read_in).
  auto w_in = model->input_proj->weight;
  w_in.select(1, 0).copy_(read_in.select(1, 0));
  w_in.slice(1, 1, d + 1).copy_(read_in);
  set(model->input_proj->bias, expect("_read_in.bias", {H}));
  model->pos_embed.copy_(wpe.slice(0, 0, 2 * n));
  for (int l = 0; l < layers; ++l) {
    auto& b = *model->blocks[l]->as<Block>();
    const std::string p = fmt::format("_backbone.h.{}.", l);
    set(b.ln1->weight, expect(p + "ln_1.weight", {H}));
    set(b.ln1->bias, expect(p + "ln_1.bias", {H}));
    set(b.ln2->weight, expect(p + "ln_2.weight", {H}));
    set(b.ln2->bias, expect(p + "ln_2.bias", {H}));
    // Conv1D stores [in, out]; Linear and in_proj hold [out, in].
    b.attn->in_proj_weight.copy_(expect(p + "attn.c_attn.weight", {H, 3 * H}).t());
    set(b.attn->in_proj_bias, expect(p + "attn.c_attn.bias", {3 * H}));
    b.attn->out_proj->weight.copy_(expect(p + "attn.c_proj.weight", {H, H}).t());
    set(b.attn->out_proj->bias, expect(p + "attn.c_proj.bias", {H}));
    b.fc1->weight.copy_(expect(p + "mlp.c_fc.weight", {H, F}).t());
    set(b.fc1->bias, expect(p + "mlp.c_fc.bias", {F}));
    b.fc2->weight.copy_(expect(p + "mlp.c_proj.weight", {F, H}).t());
    set(b.fc2->bias, expect(p + "mlp.c_proj.bias", {H}));
  }
  set(model->final_ln->weight, expect("_backbone.ln_f.weight", {H}));
  set(model->final_ln->bias, expect("_backbone.ln_f.bias", {H}));
  set(model->readout->weight, expect("_read_out.weight", {1, H}));
  set(model->readout->bias, expect("_read_out.bias", {1}));
  if (config) *config = c;
  return model;
}

}  // namespace icl::interop
