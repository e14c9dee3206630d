// Checkpoint HDF5 I/O with shape and name checks.
#include "learners/checkpoint.hpp"

#include <fmt/format.h>
#include "core/errors.hpp"

#include <cmath>
#include <functional>
#include <set>
#include <stdexcept>

#include "core/hdf5.hpp"
#include "core/json.hpp"
#include "core/output.hpp"
#include "data/prompt_io.hpp"
#include "formats/header.hpp"

namespace icl::learners {

namespace {

std::string ShapeStr(const std::vector<hsize_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i)
    s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

h5::Dims DimsOf(const torch::Tensor& t) {
  h5::Dims d;
  for (auto s : t.sizes())
    d.push_back(static_cast<hsize_t>(s));
  if (d.empty()) d.push_back(1);
  return d;
}

namespace layout = checkpoint_layout;

// What a parameter's axes mean (checkpoint_layout's labels); a scalar is stored as [1].
std::vector<std::string> TensorLabels(const std::string& name, std::int64_t rank) {
  const std::string pos = layout::kPosEmbed;
  const bool positions =
      name.size() >= pos.size() && name.compare(name.size() - pos.size(), pos.size(), pos) == 0;
  if (rank == 0) return {"scalar"};
  if (rank == 1) return layout::kVectorLabels;
  if (rank == 2) return positions ? layout::kPositionLabels : layout::kWeightLabels;
  std::vector<std::string> labels;
  for (std::int64_t i = 0; i < rank; ++i)
    labels.push_back("axis_" + std::to_string(i));
  return labels;
}

void WriteTensor(h5::Group& g, const std::string& name, const torch::Tensor& t) {
  const auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  g.CreateDataset<float>(name, DimsOf(c), TensorLabels(name, c.dim()))
      .Write(c.data_ptr<float>(), c.numel());
}

// Reads dataset `name` of `g` into `dst` (float32, same shape), naming the object on mismatch.
void ReadTensorInto(const h5::Group& g, const std::string& name, torch::Tensor& dst,
                    const std::string& what) {
  if (!g.Exists(name))
    throw core::InputError("checkpoint '" + g.file() + "'", "",
                           "missing " + what + " '" + name + "'");
  const h5::Dataset ds = g.OpenDataset(name);
  if (ds.dims() != DimsOf(dst))
    throw core::InputError("checkpoint '" + g.file() + "'", "",
                           what + " '" + name + "' has shape " + ShapeStr(ds.dims()) +
                               ", the model expects " + ShapeStr(DimsOf(dst)));
  auto buf = torch::empty(dst.sizes(), torch::kFloat32);
  ds.Read(buf.data_ptr<float>(), buf.numel());
  // A NaN or infinite weight would make every prediction NaN, and NaN errors sort first.
  if (!torch::isfinite(buf).all().item<bool>())
    throw core::InputError("checkpoint '" + g.file() + "'", "",
                           what + " '" + name + "' holds NaN or infinite values");
  torch::NoGradGuard no_grad;
  dst.copy_(buf);
}

}  // namespace

CheckpointInfo ReadCheckpointInfo(const std::string& path) {
  const h5::File f = h5::File::Open(path);
  data::CheckFormat(f, kCheckpointFormat);
  CheckpointInfo info;
  info.path = path;
  info.model = ModelConfig::FromJson(f.GetString(layout::kModelConfig),
                                     "checkpoint '" + path + "' model_config");
  info.train = TrainConfig::FromJson(f.GetString(layout::kTrainConfig),
                                     "checkpoint '" + path + "' train_config");
  info.step = f.GetInt(layout::kStep);
  if (info.step < 0)
    throw core::InputError("checkpoint '" + path + "'", "",
                           "step " + std::to_string(info.step) + " is negative");
  info.has_train_state = f.Exists(layout::kTrainState);
  if (f.HasAttr(formats::kCreatedByAttr)) info.created_by = f.GetString(formats::kCreatedByAttr);
  if (info.train.task.d != info.model.d)
    throw core::InputError("checkpoint '" + path + "'", "",
                           "train task d=" + std::to_string(info.train.task.d) +
                               " differs from model d=" + std::to_string(info.model.d));
  if (info.train.task.n > info.model.n_max)
    throw core::InputError("checkpoint '" + path + "'", "",
                           "train task n=" + std::to_string(info.train.task.n) +
                               " exceeds the model's n_max=" + std::to_string(info.model.n_max));
  return info;
}

void CheckReadsTask(const CheckpointInfo& info, const data::TaskConfig& task) {
  if (info.model.d != task.d)
    throw core::InputError("checkpoint", "checkpoint",
                           "'" + info.path + "' has d=" + std::to_string(info.model.d) +
                               " but the prompts have d=" + std::to_string(task.d));
  if (task.n > info.model.n_max)
    throw core::InputError("checkpoint", "checkpoint",
                           "'" + info.path +
                               "' reads at most n=" + std::to_string(info.model.n_max) +
                               " examples but the prompts have n=" + std::to_string(task.n));
}

void SaveCheckpoint(const std::string& path, Transformer& model, const TrainConfig& train,
                    std::int64_t step, const AdamMoments* optimizer, const SaveOptions& options) {
  core::OutputOptions oo;
  oo.force = options.force;
  oo.inputs = options.inputs;
  oo.lock = options.lock;
  // Every reader refuses NaN or infinite parameters; a writer refuses them first, before any
  // file exists (construct with an overflowing step size, an import of infinities).
  for (const auto& p : model->named_parameters())
    if (!torch::isfinite(p.value()).all().item<bool>())
      throw core::InputError(
          "checkpoint '" + path + "'", "",
          "parameter '" + p.key() + "' would hold NaN or infinite values; nothing was written");
  core::AtomicOutput out(path, options.field, oo);
  h5::File f = h5::File::Create(out.temp_path(), /*truncate=*/true);
  data::WriteFormatAttrs(f, kCheckpointFormat);
  f.SetAttr(layout::kModelConfig, model->config.ToJson());
  f.SetAttr(layout::kTrainConfig, train.ToJson());
  f.SetAttr(layout::kTaskConfig, train.task.ToJson());
  f.SetAttr(layout::kStep, step);
  f.SetAttr(layout::kParameterCount, CountParameters(*model));
  {
    h5::Group params = f.CreateGroup(layout::kParams);
    params.SetAttr(layout::kDescription, std::string(layout::kParamsDescription));
    for (const auto& p : model->named_parameters())
      WriteTensor(params, p.key(), p.value());
  }
  if (optimizer) {
    h5::Group ts = f.CreateGroup(layout::kTrainState);
    ts.SetAttr(layout::kStep, step);
    ts.SetAttr(layout::kDescription, std::string(layout::kTrainStateDescription));
    const std::int64_t adam_step = optimizer->step;
    if (adam_step > 0) {  // no step taken yet: no moments
      h5::Group m1 = ts.CreateGroup(layout::kExpAvg), m2 = ts.CreateGroup(layout::kExpAvgSq);
      for (const auto& p : model->named_parameters()) {
        WriteTensor(m1, p.key(), optimizer->exp_avg.at(p.key()));
        WriteTensor(m2, p.key(), optimizer->exp_avg_sq.at(p.key()));
      }
    }
    ts.SetAttr(layout::kAdamStep, adam_step);
    if (options.loss_since_eval) {
      ts.SetAttr(layout::kLossSumSinceEval, options.loss_since_eval->sum);
      ts.SetAttr(layout::kLossStepsSinceEval, options.loss_since_eval->steps);
    }
  }
  if (options.extra) options.extra(f);
  f.Close();  // flushed, every error checked, fsync'ed
  out.Commit();
}

Transformer LoadCheckpoint(const std::string& path, CheckpointInfo* info_out) {
  CheckpointInfo info = ReadCheckpointInfo(path);
  Transformer model(info.model);
  const h5::File f = h5::File::Open(path);
  const h5::Group params = f.OpenGroup(layout::kParams);
  std::set<std::string> expected;
  for (auto& p : model->named_parameters()) {
    expected.insert(p.key());
    ReadTensorInto(params, p.key(), p.value(), "parameter");
  }
  for (const auto& name : params.Members())
    if (!expected.count(name))
      throw core::InputError(
          "checkpoint '" + path + "'", "",
          "unexpected parameter '" + name + "' for model_config " + info.model.ToJson());
  if (info_out) *info_out = info;
  return model;
}

AdamMoments LoadOptimizerState(const std::string& path, Transformer& model) {
  const h5::File f = h5::File::Open(path);
  if (!f.Exists(layout::kTrainState))
    throw core::InputError("checkpoint '" + path + "'", "",
                           "has no /train_state (shipped checkpoints leave it out); cannot resume");
  const h5::Group ts = f.OpenGroup(layout::kTrainState);
  AdamMoments m;
  m.step = ts.GetInt(layout::kAdamStep);
  // One AdamW step per training step: the optimizer's count, the state's step and the root's
  // step are one number. A crafted count would change every later update (the bias corrections
  // 1 - beta^t) without a visible error.
  const std::int64_t step = f.GetInt(layout::kStep);
  if (ts.GetInt(layout::kStep) != step || m.step != step)
    throw core::InputError(
        "checkpoint '" + path + "'", "",
        fmt::format("/train_state is of step {} with {} optimizer steps, but the checkpoint "
                    "is of step {}; it is not a state train wrote (start the run over)",
                    ts.GetInt(layout::kStep), m.step, step));
  if (m.step == 0) return m;
  const h5::Group m1 = ts.OpenGroup(layout::kExpAvg), m2 = ts.OpenGroup(layout::kExpAvgSq);
  for (auto& p : model->named_parameters()) {
    auto a = torch::zeros_like(p.value()), b = torch::zeros_like(p.value());
    ReadTensorInto(m1, p.key(), a, "optimizer moment");
    ReadTensorInto(m2, p.key(), b, "optimizer moment");
    if ((b < 0).any().item<bool>())  // a mean of squared gradients
      throw core::InputError(
          "checkpoint '" + path + "'", "",
          "optimizer moment '" + p.key() + "' of exp_avg_sq holds negative values");
    m.exp_avg[p.key()] = a;
    m.exp_avg_sq[p.key()] = b;
  }
  return m;
}

std::optional<LossSinceEval> LoadLossSinceEval(const std::string& path, std::int64_t step,
                                               std::int64_t eval_every) {
  const h5::File f = h5::File::Open(path);
  const h5::Group ts = f.OpenGroup(layout::kTrainState);
  const std::int64_t since = step % eval_every;
  if (!ts.HasAttr(layout::kLossStepsSinceEval)) {
    if (since == 0) return LossSinceEval{};
    return std::nullopt;
  }
  LossSinceEval l{ts.GetDouble(layout::kLossSumSinceEval), ts.GetInt(layout::kLossStepsSinceEval)};
  if (!std::isfinite(l.sum) || l.sum < 0 || l.steps != since)
    throw core::InputError(
        "checkpoint '" + path + "'", "",
        fmt::format("/train_state holds a training loss of {} over {} steps since the last "
                    "evaluation, but step {} is {} steps past one; it is not a state train wrote",
                    l.sum, l.steps, step, since));
  return l;
}

std::string RecipeDifference(const CheckpointInfo& a, const CheckpointInfo& b,
                             const std::vector<std::string>& free) {
  // The first key (depth first, in key order) whose values differ, "" when none.
  const std::function<std::string(const nlohmann::json&, const nlohmann::json&, const std::string&)>
      first = [&](const nlohmann::json& x, const nlohmann::json& y, const std::string& at) {
        if (x.is_object() && y.is_object()) {
          std::set<std::string> keys;
          for (const auto& [k, v] : x.items())
            keys.insert(k);
          for (const auto& [k, v] : y.items())
            keys.insert(k);
          for (const auto& k : keys) {
            const std::string where = at + (at.empty() ? "" : ".") + k;
            if (!x.contains(k) || !y.contains(k)) return where + ": set in one only";
            const std::string d = first(x[k], y[k], where);
            if (!d.empty()) return d;
          }
          return std::string();
        }
        return x == y ? std::string() : at + ": " + x.dump() + " vs " + y.dump();
      };
  nlohmann::json ma = core::json::Parse(a.model.ToJson(), a.path),
                 mb = core::json::Parse(b.model.ToJson(), b.path);
  ma.erase("kernels"), mb.erase("kernels");
  const std::string model = first(ma, mb, "");
  if (!model.empty()) return "model_config " + model;
  nlohmann::json ta = core::json::Parse(a.train.ToJson(), a.path),
                 tb = core::json::Parse(b.train.ToJson(), b.path);
  for (const auto& key : free)
    ta.erase(key), tb.erase(key);
  const std::string train = first(ta, tb, "");
  return train.empty() ? "" : "train_config " + train;
}

}  // namespace icl::learners
