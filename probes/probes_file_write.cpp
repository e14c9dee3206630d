// probes.h5: the writer (to a file or to memory, read back by the checked reader), the tidy CSV
// and the record naming each input.
#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/hdf5.hpp"
#include "core/sha256.hpp"
#include "data/prompt_io.hpp"
#include "extract/activations.hpp"
#include "extract/activations_schema.hpp"
#include "learners/model_config.hpp"
#include "probes/probes_file.hpp"
#include "probes/probes_schema.hpp"
#include "probes/uncertainty.hpp"

namespace icl::probes {

void WriteProbesCsv(std::ostream& os, const ProbeOutput& out) {
  // Runs with codelength add its two columns (empty for probes without a code).
  const bool coded = !out.codes.empty();
  os << "target,probe,source,layer,k,seed,mse,nmse,r2,r2_lo,r2_hi,nmse_lo,nmse_hi"
     << (coded ? ",code_bits,uniform_bits\n" : "\n");
  for (const auto& r : out.records) {
    os << fmt::format("{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}",
                      r.target, r.probe, r.source, r.layer, r.k, r.seed, r.mse, r.nmse, r.r2,
                      r.r2_lo, r.r2_hi, r.nmse_lo, r.nmse_hi);
    if (coded)
      os << (std::isfinite(r.code_bits)
                 ? fmt::format(",{:.10g},{:.10g}", r.code_bits, r.uniform_bits)
                 : std::string(","));
    os << "\n";
  }
}

InputRecord RecordInput(const std::string& path, bool verify_rows) {
  InputRecord r;
  const auto info = extract::ReadActivationsInfo(path);
  if (!info.content_sha256.empty()) {
    if (verify_rows)
      extract::VerifyRows(path, "verify-inputs");
    else
      extract::VerifyContentDigest(path, "activations");
    r.digest = info.content_sha256;
    r.kind = "content_sha256";
  } else {
    r.digest = core::Sha256File(path);
    r.kind = "file_sha256";
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    r.size = st.st_size;
    r.mtime_ns = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  return r;
}

namespace {

// Where a (layer, k) lies in the file's [layer, k, ...] datasets.
struct CellIndex {
  const ProbeOutput& out;
  std::ptrdiff_t Layer(int layer) const {
    return std::find(out.layers.begin(), out.layers.end(), layer) - out.layers.begin();
  }
  std::ptrdiff_t K(int k) const {
    return std::find(out.ks.begin(), out.ks.end(), k) - out.ks.begin();
  }
};

// The model and task a probes file records for its main source: an activations file's own, or,
// for arrays, what their shapes say (the state's width and the layers; n and d).
std::pair<learners::ModelConfig, data::TaskConfig> ConfigsOf(const StatesInfo& info) {
  if (info.file) return {info.file->model, info.file->task};
  learners::ModelConfig model;
  model.hidden = info.hidden;
  model.layers = info.model_layers;
  data::TaskConfig task;
  task.n = info.n;
  task.d = info.d;
  return {model, task};
}

// `info`: the main source's description; `record`: what names each input.
void WriteRootAttributes(h5::File& f, const ProbeRequest& req, const ProbeOutput& out,
                         const StatesInfo& info,
                         const std::function<InputRecord(const std::string&)>& record) {
  data::WriteFormatAttrs(f, kProbesFormat);
  f.SetAttr("activations", req.activations);
  const InputRecord a = record(req.activations);
  f.SetAttr("activations_digest", a.digest);
  f.SetAttr("activations_digest_kind", a.kind);
  f.SetAttr("activations_size", a.size);
  f.SetAttr("activations_mtime_ns", a.mtime_ns);
  f.SetAttr("checkpoint_sha256", info.file ? info.file->checkpoint_sha256 : std::string());
  if (info.file && info.file->ridge_lambda >= 0) f.SetAttr("ridge_lambda", info.file->ridge_lambda);
  if (info.file && !info.file->learner_targets.empty()) {
    nlohmann::json learners = nlohmann::json::object();
    for (const auto& spec : info.file->learner_targets)
      learners[extract::schema::LearnerTargetName(spec)] = spec;
    f.SetAttr("learner_targets", learners.dump());
  }
  const auto [model, task] = ConfigsOf(info);
  f.SetAttr("model_config", model.ToJson());
  f.SetAttr("task_config", task.ToJson());
  f.SetAttr("probe_config", req.ToJson());
  f.SetAttr("sources", out.sources);
  nlohmann::json controls = nlohmann::json::object();
  for (const auto& c : req.controls) {
    const InputRecord r = record(c);
    controls[SourceName(c)] = {{"path", c},
                               {"digest", r.digest},
                               {"digest_kind", r.kind},
                               {"size", r.size},
                               {"mtime_ns", r.mtime_ns}};
  }
  f.SetAttr("controls", controls.dump());
  f.SetAttr("layers", std::vector<std::int64_t>(out.layers.begin(), out.layers.end()));
  f.SetAttr("ks", std::vector<std::int64_t>(out.ks.begin(), out.ks.end()));
  f.SetAttr("seeds", out.seeds);
  f.SetAttr("metric_layout", std::string(schema::kMetricLayout));
  f.SetAttr("bootstrap_replicates", req.bootstrap);
  f.SetAttr("bootstrap_seed", static_cast<std::int64_t>(req.seed));
  f.SetAttr("confidence", kConfidence);
}

// /errors: the per-prompt test errors the intervals resample, and /metrics and /selectivity.
void WriteScores(h5::File& f, const ProbeOutput& out) {
  const hsize_t L = out.layers.size(), K = out.ks.size(), S = out.seeds;
  const CellIndex at{out};
  std::map<std::string, std::array<arma::cube, 7>> metrics;  // key target/probe/source
  const hsize_t n_test = out.records.empty() ? 0 : out.records[0].sse.n_elem;
  std::map<std::string, std::vector<double>> sse;  // key target/probe/source: [L, K, S, n]
  std::map<std::string, std::vector<double>> sst;  // key target: [K, S, n]
  for (const auto& r : out.records) {
    const std::string key = r.target + "/" + r.probe + "/" + r.source;
    auto& m = metrics[key];
    if (m[0].is_empty())
      for (auto& c : m)
        c.set_size(S, K, L), c.fill(arma::datum::nan);  // column-major S x K x L == [L, K, S]
    const double values[] = {r.mse, r.nmse, r.r2, r.r2_lo, r.r2_hi, r.nmse_lo, r.nmse_hi};
    for (int i = 0; i < 7; ++i)
      m[i](r.seed, at.K(r.k), at.Layer(r.layer)) = values[i];
    if (r.sse.n_elem != n_test || r.sst.n_elem != n_test)
      throw std::logic_error("probes file: records with different numbers of test prompts");
    auto& e = sse[key];
    if (e.empty()) e.assign(L * K * S * n_test, NAN);
    std::copy(r.sse.begin(), r.sse.end(),
              e.begin() + ((at.Layer(r.layer) * K + at.K(r.k)) * S + r.seed) * n_test);
    auto& t = sst[r.target];
    if (t.empty()) t.assign(K * S * n_test, NAN);
    std::copy(r.sst.begin(), r.sst.end(), t.begin() + (at.K(r.k) * S + r.seed) * n_test);
  }
  for (const auto& [key, e] : sse) {
    h5::Dataset d = f.CreateDataset<double>("errors/" + key + "/sse", {L, K, S, n_test},
                                            {"layer", "k", "seed", "test_prompt"});
    d.Write(e.data(), e.size());
    d.SetAttr("description", std::string(schema::kSseDescription));
  }
  for (const auto& [target, t] : sst) {
    h5::Dataset d = f.CreateDataset<double>("errors/" + target + "/sst", {K, S, n_test},
                                            {"k", "seed", "test_prompt"});
    d.Write(t.data(), t.size());
    d.SetAttr("description", std::string(schema::kSstDescription));
  }
  const std::vector<std::string>& cell = schema::kCellLabels;
  for (const auto& [key, m] : metrics) {
    for (std::size_t i = 0; i < schema::kMetricNames.size(); ++i)
      f.CreateDataset<double>("metrics/" + key + "/" + schema::kMetricNames[i], {L, K, S}, cell)
          .Write(m[i].memptr(), m[i].n_elem);
    // Selectivity of the model over each control: R2(model) - R2(control).
    const auto slash = key.rfind('/');
    const std::string base = key.substr(0, slash), source = key.substr(slash + 1);
    if (source != "model" && metrics.count(base + "/model")) {
      const arma::cube sel = metrics.at(base + "/model")[2] - m[2];
      f.CreateDataset<double>("selectivity/" + base + "/" + source, {L, K, S}, cell)
          .Write(sel.memptr(), sel.n_elem);
    }
  }
}

// /ridge: weights, intercepts, the chosen lambda and the leave-one-out curve of every fit.
void WriteRidge(h5::File& f, const ProbeRequest& req, const ProbeOutput& out) {
  const hsize_t L = out.layers.size(), K = out.ks.size(), S = out.seeds;
  const CellIndex at{out};
  std::map<std::string, std::vector<const ProbeOutput::Ridge*>> ridge;
  for (const auto& r : out.ridge)
    ridge[r.target + "/" + r.source].push_back(&r);
  for (const auto& [key, list] : ridge) {
    const hsize_t p = list[0]->weights.n_rows, m = list[0]->weights.n_cols,
                  nl = list[0]->loo_mse.n_elem;
    std::vector<double> w(L * K * S * p * m, NAN), b(L * K * S * m, NAN), lam(L * K * S, NAN),
        loo(L * K * S * nl, NAN), scale(L * K * S * p, NAN);
    for (const auto* r : list) {
      const std::size_t cell = (at.Layer(r->layer) * K + at.K(r->k)) * S + r->seed;
      const arma::mat wt = r->weights.t();  // m x p column-major == [p, m] row-major
      std::copy(wt.begin(), wt.end(), w.begin() + cell * p * m);
      std::copy(r->intercept.begin(), r->intercept.end(), b.begin() + cell * m);
      lam[cell] = r->lambda;
      std::copy(r->loo_mse.begin(), r->loo_mse.end(), loo.begin() + cell * nl);
      if (r->feature_scale.n_elem == p)
        std::copy(r->feature_scale.begin(), r->feature_scale.end(), scale.begin() + cell * p);
    }
    h5::Dataset dw = f.CreateDataset<double>("ridge/" + key + "/weights", {L, K, S, p, m},
                                             {"layer", "k", "seed", "feature", "output"});
    dw.Write(w.data(), w.size());
    dw.SetAttr("description", std::string(schema::kWeightsDescription));
    f.CreateDataset<double>("ridge/" + key + "/intercept", {L, K, S, m},
                            {"layer", "k", "seed", "output"})
        .Write(b.data(), b.size());
    f.CreateDataset<double>("ridge/" + key + "/lambda", {L, K, S}, {"layer", "k", "seed"})
        .Write(lam.data(), lam.size());
    f.CreateDataset<double>("ridge/" + key + "/loo_mse", {L, K, S, nl},
                            {"layer", "k", "seed", "lambda"})
        .Write(loo.data(), loo.size());
    h5::Dataset ds = f.CreateDataset<double>("ridge/" + key + "/feature_scale", {L, K, S, p},
                                             {"layer", "k", "seed", "feature"});
    ds.Write(scale.data(), scale.size());
    ds.SetAttr("description", std::string(schema::kFeatureScaleDescription));
  }
  if (!ridge.empty())
    f.OpenGroup("ridge").SetAttr(
        "lambdas",
        nlohmann::json(std::vector<double>(req.lambdas.begin(), req.lambdas.end())).dump());
}

// /splits: the prompt splits of the main file, so that others can reproduce the fits; /alpha:
// the pooling weights of gradient probes.
void WriteSplitsAndPooling(h5::File& f, const ProbeOutput& out) {
  for (std::size_t s = 0; s < out.roles.size(); ++s) {
    h5::Dataset d = f.CreateDataset<std::uint8_t>("splits/seed_" + std::to_string(s),
                                                  {hsize_t(out.roles[s].size())}, {"prompt"});
    d.Write(out.roles[s].data(), out.roles[s].size());
    d.SetAttr("description", std::string(schema::kSplitDescription));
  }
  const hsize_t L = out.layers.size(), K = out.ks.size(), S = out.seeds;
  const CellIndex at{out};
  std::map<std::string, std::vector<const ProbeOutput::Alpha*>> alphas;
  for (const auto& a : out.alphas)
    alphas[a.target + "/" + a.probe + "/" + a.source].push_back(&a);
  for (const auto& [key, list] : alphas) {
    const hsize_t T = list[0]->alpha.n_elem;
    std::vector<double> a(L * K * S * T, NAN);
    for (const auto* x : list) {
      const std::size_t cell = (at.Layer(x->layer) * K + at.K(x->k)) * S + x->seed;
      std::copy(x->alpha.begin(), x->alpha.end(), a.begin() + cell * T);
    }
    h5::Dataset da =
        f.CreateDataset<double>("alpha/" + key, {L, K, S, T}, {"layer", "k", "seed", "position"});
    da.Write(a.data(), a.size());
    da.SetAttr("description", std::string(schema::kAlphaDescription));
  }
}

// /codelength: each ridge probe's online codelength, its reference code and each block's bits,
// with the blocks' ends in training rows per seed.
void WriteCodelength(h5::File& f, const ProbeRequest& req, const ProbeOutput& out) {
  if (out.codes.empty()) return;
  const hsize_t L = out.layers.size(), K = out.ks.size(), S = out.seeds,
                B = req.codelength_fractions.size();
  const CellIndex at{out};
  std::map<std::string, std::vector<const ProbeOutput::Code*>> codes;
  for (const auto& c : out.codes)
    codes[c.target + "/" + c.probe + "/" + c.source].push_back(&c);
  const std::vector<std::string>& cell = schema::kCellLabels;
  const std::vector<std::string> cell_block = {"layer", "k", "seed", "block"};
  for (const auto& [key, list] : codes) {
    std::vector<double> bits(L * K * S, NAN), uniform(L * K * S, NAN), block(L * K * S * B, NAN),
        ublock(L * K * S * B, NAN), lam(L * K * S * B, NAN);
    for (const auto* c : list) {
      const std::size_t i = (at.Layer(c->layer) * K + at.K(c->k)) * S + c->seed;
      if (c->code.block_bits.n_elem != B) throw std::logic_error("probes file: blocks differ");
      bits[i] = c->code.bits;
      uniform[i] = c->code.uniform_bits;
      std::copy(c->code.block_bits.begin(), c->code.block_bits.end(), block.begin() + i * B);
      std::copy(c->code.uniform_block_bits.begin(), c->code.uniform_block_bits.end(),
                ublock.begin() + i * B);
      std::copy(c->code.block_lambda.begin(), c->code.block_lambda.end(), lam.begin() + i * B);
    }
    const std::string g = "codelength/" + key + "/";
    h5::Dataset db = f.CreateDataset<double>(g + "bits", {L, K, S}, cell);
    db.Write(bits.data(), bits.size());
    db.SetAttr("description", std::string(schema::kBitsDescription));
    h5::Dataset du = f.CreateDataset<double>(g + "uniform_bits", {L, K, S}, cell);
    du.Write(uniform.data(), uniform.size());
    du.SetAttr("description", std::string(schema::kUniformBitsDescription));
    f.CreateDataset<double>(g + "block_bits", {L, K, S, B}, cell_block)
        .Write(block.data(), block.size());
    f.CreateDataset<double>(g + "uniform_block_bits", {L, K, S, B}, cell_block)
        .Write(ublock.data(), ublock.size());
    h5::Dataset dl = f.CreateDataset<double>(g + "block_lambda", {L, K, S, B}, cell_block);
    dl.Write(lam.data(), lam.size());
    dl.SetAttr("description", std::string(schema::kBlockLambdaDescription));
  }
  std::vector<std::int64_t> ends;
  for (const auto& e : out.code_block_ends)
    ends.insert(ends.end(), e.begin(), e.end());
  h5::Dataset de =
      f.CreateDataset<std::int64_t>("codelength/block_ends", {S, B}, {"seed", "block"});
  de.Write(ends.data(), ends.size());
  de.SetAttr("description", std::string(schema::kBlockEndsDescription));
  h5::Group g = f.OpenGroup("codelength");
  g.SetAttr("fractions", nlohmann::json(req.codelength_fractions).dump());
  g.SetAttr("precision", req.codelength_precision);
  g.SetAttr("description", std::string(schema::kCodelengthDescription));
}

}  // namespace

namespace {

// Everything of a probes file but its creation, into `f`.
void WriteProbes(h5::File& f, const ProbeRequest& req, const ProbeOutput& out,
                 const StatesInfo& info,
                 const std::function<InputRecord(const std::string&)>& record) {
  WriteRootAttributes(f, req, out, info, record);
  WriteScores(f, out);
  WriteRidge(f, req, out);
  WriteSplitsAndPooling(f, out);
  WriteCodelength(f, req, out);
  if (!out.target_map_r2.is_empty()) {
    // Column-major (from, to, k) == row-major [k, to, from]; stored as [k, from, to].
    const hsize_t T = out.target_map_r2.n_rows, K = out.target_map_r2.n_slices;
    std::vector<double> v(K * T * T);
    for (hsize_t k = 0; k < K; ++k)
      for (hsize_t i = 0; i < T; ++i)
        for (hsize_t j = 0; j < T; ++j)
          v[(k * T + i) * T + j] = out.target_map_r2(i, j, k);
    h5::Dataset d = f.CreateDataset<double>("target_maps/r2", {K, T, T}, {"k", "from", "to"});
    d.Write(v.data(), v.size());
    d.SetAttr("targets", req.targets);
    d.SetAttr("description", std::string(schema::kTargetMapsDescription));
  }
  for (const auto& [target, c] : out.ceilings) {
    const arma::mat t = c.t();  // K x S -> row-major [k, seed]
    h5::Dataset ds =
        f.CreateDataset<double>("ceilings/" + target, {c.n_rows, c.n_cols}, {"k", "seed"});
    ds.Write(t.memptr(), t.n_elem);
    ds.SetAttr("description", std::string(schema::kCeilingDescription));
  }
}

}  // namespace

void WriteProbesFile(const std::string& path, const ProbeRequest& req, const ProbeOutput& out,
                     const std::map<std::string, InputRecord>& inputs) {
  h5::File f = h5::File::Create(path, /*truncate=*/true);
  WriteProbes(f, req, out, DescribeActivations(extract::ReadActivationsInfo(req.activations)),
              [&](const std::string& p) {
                const auto it = inputs.find(p);
                return it != inputs.end() ? it->second : RecordInput(p, false);
              });
  f.Close();
}

void WriteProbesFile(const std::string& path, const ProbeRequest& req, const ProbeOutput& out,
                     const StatesInfo& info) {
  h5::File f = h5::File::Create(path, /*truncate=*/true);
  WriteProbes(f, req, out, info, [](const std::string&) { return InputRecord{"", "memory"}; });
  f.Close();
}

ProbeResults ProbeResultsInMemory(const ProbeRequest& req, const ProbeOutput& out,
                                  const StatesInfo& info) {
  h5::File f = h5::File::CreateInMemory(info.name);
  WriteProbes(f, req, out, info, [](const std::string&) { return InputRecord{"", "memory"}; });
  return ReadProbes(std::move(f), info.name);
}

}  // namespace icl::probes
