// Reading and checking activations files.
#include "extract/activations.hpp"
#include "data/errors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/hdf5.hpp"
#include "data/json.hpp"
#include "data/prompt_io.hpp"
#include "extract/activations_schema.hpp"

namespace icl::extract {

std::string LayerName(int layer) {
  return fmt::format("layer_{:02d}", layer);
}

ActivationsInfo ReadActivationsInfo(const std::string& path) {
  const h5::File f = h5::File::Open(path);
  data::CheckFormat(f, kActivationsFormat);
  ActivationsInfo a;
  a.path = path;
  a.model =
      learners::ModelConfig::FromJson(f.GetString("model_config"), "'" + path + "' model_config");
  a.task = data::TaskConfig::FromJson(f.GetString("task_config"), "'" + path + "' task_config");
  const std::int64_t seed = f.GetInt("seed");
  a.seed = static_cast<std::uint64_t>(seed);
  a.prompts = f.GetInt("prompts");
  if (a.prompts < 1)
    throw std::invalid_argument("'" + path + "': attribute 'prompts' is " +
                                std::to_string(a.prompts) + ", expected a positive count");
  const std::int64_t done = f.GetInt("n_complete");
  if (done != a.prompts)
    throw std::invalid_argument("'" + path + "' is incomplete: " + std::to_string(done) + " of " +
                                std::to_string(a.prompts) +
                                " prompts; finish it with iclprobe extract {resume}");
  a.checkpoint_sha256 = f.GetString("checkpoint_sha256");
  const std::string pos = f.GetString("positions");
  if (pos != "all" && pos != "y")
    throw std::invalid_argument("'" + path + "': unknown positions '" + pos + "'");
  a.positions = pos == "all" ? Positions::kAll : Positions::kY;
  a.positions_per_prompt = a.positions == Positions::kAll ? 2 * a.task.n : a.task.n;
  for (const std::int64_t l : f.GetIntList("layers")) {
    if (l < 0 || l > a.model.layers)
      throw std::invalid_argument("'" + path + "': attribute 'layers' lists state " +
                                  std::to_string(l) + "; the model has states 0.." +
                                  std::to_string(a.model.layers));
    a.layers.push_back(static_cast<int>(l));
  }
  if (a.layers.empty() || !std::is_sorted(a.layers.begin(), a.layers.end()) ||
      std::adjacent_find(a.layers.begin(), a.layers.end()) != a.layers.end())
    throw std::invalid_argument("'" + path +
                                "': attribute 'layers' must list stored states once each, "
                                "ascending");
  const hsize_t N = a.prompts, T = a.positions_per_prompt, H = a.model.hidden, n = a.task.n,
                d = a.task.d;
  for (int l : a.layers)
    f.OpenDataset(schema::Hidden(l)).ExpectDims({N, T, H});
  f.OpenDataset(schema::kPredictions).ExpectDims({N, n});
  f.OpenDataset(schema::kPromptsX).ExpectDims({N, n, d});
  for (const auto& name : f.OpenGroup("targets").Members()) {
    const h5::Dataset t = f.OpenDataset("targets/" + name);
    const auto dims = t.dims();
    // A target is per k ([N, n, ...]) unless it says per_k = 0 (like w: [N, ...], every k alike).
    const bool per_k = !t.HasAttr("per_k") || t.GetInt("per_k") != 0;
    const bool ok =
        per_k ? dims.size() >= 2 && dims[0] == N && dims[1] == n : !dims.empty() && dims[0] == N;
    if (!ok)
      throw std::invalid_argument("'" + path + "': /targets/" + name + " should have dims [" +
                                  std::to_string(N) +
                                  (per_k ? ", " + std::to_string(n) + ", ...] (per k)" : ", ...]"));
    a.targets.push_back(name);
    a.target_per_k.push_back(per_k);
  }
  return a;
}

}  // namespace icl::extract
