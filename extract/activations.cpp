// Reading and checking activations files.
#include "extract/activations.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/hdf5.hpp"
#include "data/prompt_io.hpp"

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
  a.seed = static_cast<std::uint64_t>(f.GetInt("seed"));
  a.prompts = f.GetInt("prompts");
  const std::int64_t done = f.GetInt("n_complete");
  if (done != a.prompts)
    throw std::invalid_argument("'" + path + "' is incomplete: " + std::to_string(done) + " of " +
                                std::to_string(a.prompts) +
                                " prompts; finish it with iclprobe extract --resume");
  a.checkpoint_sha256 = f.GetString("checkpoint_sha256");
  const std::string pos = f.GetString("positions");
  if (pos != "all" && pos != "y")
    throw std::invalid_argument("'" + path + "': unknown positions '" + pos + "'");
  a.positions = pos == "all" ? Positions::kAll : Positions::kY;
  a.positions_per_prompt = a.positions == Positions::kAll ? 2 * a.task.n : a.task.n;
  a.layers = nlohmann::json::parse(f.GetString("layers")).get<std::vector<int>>();
  const hsize_t N = a.prompts, T = a.positions_per_prompt, H = a.model.hidden, n = a.task.n,
                d = a.task.d;
  for (int l : a.layers)
    f.OpenDataset("hidden/" + LayerName(l)).ExpectDims({N, T, H});
  f.OpenDataset("predictions").ExpectDims({N, n});
  f.OpenDataset("prompts/x").ExpectDims({N, n, d});
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
