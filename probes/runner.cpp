// The probing run: streaming passes over each layer, ridge and gradient probes, outputs.
#include "probes/runner.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "core/dist.hpp"
#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/names.hpp"
#include "core/sha256.hpp"
#include "core/version.hpp"
#include "data/prompt_io.hpp"
#include "probes/data_access.hpp"
#include "probes/uncertainty.hpp"

namespace icl::probes {

namespace fs = std::filesystem;

std::string FamilyName(Family f) {
  switch (f) {
    case Family::kRidge:
      return "ridge";
    case Family::kLinear:
      return "linear";
    case Family::kMlp:
      return "mlp";
  }
  return "?";
}

std::string QueryTargetName(const std::string& target) {
  return target + kQuerySuffix;
}

std::pair<std::string, ProbeAt> SplitTargetName(const std::string& stored) {
  const std::string suffix = kQuerySuffix;
  if (stored.size() > suffix.size() &&
      stored.compare(stored.size() - suffix.size(), suffix.size(), suffix) == 0)
    return {stored.substr(0, stored.size() - suffix.size()), ProbeAt::kQuery};
  return {stored, ProbeAt::kState};
}

std::vector<ProbeAt> ParseProbeAt(const std::string& name) {
  if (name == "state") return {ProbeAt::kState};
  if (name == "query") return {ProbeAt::kQuery};
  if (name == "both") return {ProbeAt::kState, ProbeAt::kQuery};
  throw core::InputError("probe", "at",
                         "expected state, query or both, got '" + name.substr(0, 80) + "'");
}

bool ParsePooling(const std::string& name) {
  if (name == "attention" || name == "position") return name == "attention";
  throw core::InputError("probe", "pooling",
                         "expected attention or position, got '" + name.substr(0, 80) + "'");
}

int ProbePosition(const extract::ActivationsInfo& info, int k, ProbeAt at) {
  if (at == ProbeAt::kState) return AfterKPosition(info, k);
  if (info.positions != extract::Positions::kAll || k >= info.task.n)
    throw std::logic_error("probe: a query position that PlanProbes should have refused");
  return 2 * k;  // x-token of example k+1: x_1 y_1 ... x_k y_k x_{k+1}
}

std::string SourceName(const std::string& path) {
  return fs::path(path).stem().string();
}

std::string ProbeRequest::ToJson() const {
  std::vector<std::string> fam;
  for (auto f : families)
    fam.push_back(FamilyName(f));
  std::vector<std::string> at_names;
  for (auto a : at)
    at_names.push_back(a == ProbeAt::kState ? "state" : "query");
  nlohmann::json j = {
      {"activations", activations},
      {"controls", controls},
      {"targets", targets},
      {"probes", fam},
      {"seeds", seeds},
      {"shuffle_control", shuffle_control},
      {"lambdas", std::vector<double>(lambdas.begin(), lambdas.end())},
      {"lambda_selection", "exact leave-one-out on the training split"},
      {"split", split},
      {"seed", seed},
      {"pooling", pooled ? "attention" : "position"},
      {"at", at_names},
      {"mlp_hidden", gradient.mlp_hidden},
      {"mlp_gelu", "tanh approximation, fused float32 kernel (learners/gelu.hpp)"},
      {"lr", gradient.lr},
      {"batch", gradient.batch},
      {"max_epochs", gradient.max_epochs},
      {"patience", gradient.patience},
      {"layers", layers},
      {"ks", ks},
      {"codelength", codelength ? nlohmann::json{{"fractions", codelength_fractions},
                                                 {"precision", codelength_precision},
                                                 {"code",
                                                  "online (prequential): block 0 by "
                                                  "N(mean, variance) of block 0, block "
                                                  "i by the Bayesian ridge predictive "
                                                  "fitted on blocks 0..i-1"}}
                                : nlohmann::json()},
      {"standardize", "features by training mean/std; ridge intercept unpenalised"},
      {"bootstrap",
       {{"replicates", bootstrap},
        {"seed", seed},
        {"level", kConfidence},
        {"interval", "percentile, over the test prompts of each seed's split"}}}};
  return j.dump();
}

void ProbeRequest::Validate() const {
  auto fail = [](const std::string& field, const std::string& text) {
    throw core::InputError("probe", field, text);
  };
  if (activations.empty()) fail("activations", "required (a file from extract)");
  if (seeds < 1) fail("seeds", "must be at least 1");
  if (bootstrap < 100 || bootstrap > 100000)
    fail("bootstrap", "must be 100..100000 replicates, got " + std::to_string(bootstrap));
  if (max_prompts < 0) fail("max_prompts", "must be 0 (all) or a positive count");
  if (targets.empty()) fail("targets", "at least one target is needed");
  for (const auto& t : targets)
    if (!core::IsPlainName(t)) fail("targets", "'" + t.substr(0, 80) + "' is not a plain name");
  if (families.empty()) fail("probes", "at least one probe family is needed");
  if (at.empty() || at.size() > 2 || (at.size() == 2 && at[0] == at[1]))
    fail("at", "expected state, query or both");
  for (const auto& t : targets)
    if (SplitTargetName(t).second == ProbeAt::kQuery)
      fail("targets", "'" + t.substr(0, 80) + "' ends in '" + kQuerySuffix +
                          "', the suffix of a target probed at the query; name the target and "
                          "pass {at} query");
  if (lambdas.is_empty() || !lambdas.is_finite() || lambdas.min() < 0)
    fail("lambdas", "must be finite non-negative penalties");
  double sum = 0;
  for (double f : split) {
    if (!(f >= 0 && f <= 1)) fail("split", "each fraction must be in [0, 1]");
    sum += f;
  }
  if (std::abs(sum - 1) > 1e-9) fail("split", "the fractions must sum to 1");
  if (block_rows < 1) fail("block_rows", "must be positive");
  if (ridge_keep_bytes < 0) fail("ridge_keep_bytes", "must be >= 0");
  if (codelength) {
    CodelengthBlockEnds(codelength_fractions, 1 << 30);  // order and range (sizes: PlanProbes)
    if (!(lambdas.max() > 0))
      fail("lambdas",
           "the codelength chooses its penalty by the evidence, which needs a "
           "penalty > 0 in the grid");
    if (!(codelength_precision > 0 && codelength_precision <= 1))
      fail("codelength", "the precision must be in (0, 1]");
  }
  auto positive = [&](const std::string& field, double v) {
    if (!(v > 0) || !std::isfinite(v))
      fail(field, "must be a positive finite number, got " + fmt::format("{}", v));
  };
  positive("mlp_hidden", gradient.mlp_hidden);
  if (gradient.mlp_hidden > kMaxMlpHidden)
    fail("mlp_hidden", fmt::format("at most {} units (the MLP probe's width), got {}",
                                   kMaxMlpHidden, gradient.mlp_hidden));
  positive("lr", gradient.lr);
  positive("epochs", gradient.max_epochs);
  positive("patience", gradient.patience);
  positive("batch", gradient.batch);
}

namespace {

// The checks of a plan against its sources' descriptions, and the defaults they resolve.
void CheckPlan(ProbePlan& plan) {
  ProbeRequest& r = plan.request;
  std::vector<extract::ActivationsInfo>& infos = plan.infos;
  const auto& main = infos[0];
  std::set<std::string> names = {"model", "shuffled"};
  for (std::size_t i = 1; i < infos.size(); ++i) {
    const auto& c = infos[i];
    auto mismatch = [&](const std::string& what, const std::string& a, const std::string& b) {
      throw core::InputError("probe", "control",
                             "'" + c.path + "' has " + what + " " + b + " but '" + main.path +
                                 "' has " + a + "; controls must match the main file's shapes");
    };
    if (c.model.hidden != main.model.hidden)
      mismatch("hidden", std::to_string(main.model.hidden), std::to_string(c.model.hidden));
    if (c.model.layers != main.model.layers)
      mismatch("layers", std::to_string(main.model.layers), std::to_string(c.model.layers));
    if (c.task.d != main.task.d)
      mismatch("d", std::to_string(main.task.d), std::to_string(c.task.d));
    if (c.task.n != main.task.n)
      mismatch("n", std::to_string(main.task.n), std::to_string(c.task.n));
    if (c.positions != main.positions) mismatch("positions", "another layout", "its layout");
    // Model and control are compared prompt by prompt (paired intervals): the same prompts.
    if (c.seed != main.seed)
      throw core::InputError("probe", "control",
                             "'" + c.path + "' was extracted on prompts of seed " +
                                 std::to_string(c.seed) + " but '" + main.path + "' on seed " +
                                 std::to_string(main.seed) +
                                 "; extract the control with the main file's prompt seed");
    if (c.prompts != main.prompts && (r.max_prompts <= 0 || c.prompts < r.max_prompts))
      throw core::InputError(
          "probe", "control",
          "'" + c.path + "' has " + std::to_string(c.prompts) + " prompts but '" + main.path +
              "' has " + std::to_string(main.prompts) +
              "; controls must hold the same prompts (or pass {max-prompts} at most the smaller)");
    // The paired intervals need the very same prompts, which the prompts themselves vouch for:
    // a seed attribute can be edited without changing any digest.
    const std::int64_t paired =
        std::min(c.prompts, r.max_prompts > 0 ? std::min<std::int64_t>(r.max_prompts, main.prompts)
                                              : main.prompts);
    if (plan.memory.empty() &&
        extract::PromptsDigest(c.path, paired) != extract::PromptsDigest(main.path, paired))
      throw core::InputError("probe", "control",
                             "'" + c.path + "' holds other prompts than '" + main.path +
                                 "' (their /prompts differ among the first " +
                                 std::to_string(paired) +
                                 "); extract the control with the main file's task, seed and "
                                 "prompt count");
    if (!core::IsPlainName(SourceName(c.path)))
      throw core::InputError("probe", "control",
                             "the file name of '" + c.path +
                                 "' names its source in the outputs and must be plain (letters, "
                                 "digits, _ . -, at most 64); rename the file");
    if (!names.insert(SourceName(c.path)).second)
      throw core::InputError("probe", "control",
                             "two sources are named '" + SourceName(c.path) + "'; rename a file");
  }
  if (r.max_prompts > 0) {
    if (r.max_prompts > main.prompts)
      throw core::InputError("probe", "max_prompts",
                             std::to_string(r.max_prompts) + " is more than the " +
                                 std::to_string(main.prompts) + " prompts of '" + main.path + "'");
    // Every file is probed on its first max_prompts prompts (prompt i depends only on the seed
    // and i, so these are the same prompts in every file).
    for (auto& info : infos)
      info.prompts = r.max_prompts;
  }
  for (const auto& info : infos)
    for (const auto& t : r.targets)
      if (std::find(info.targets.begin(), info.targets.end(), t) == info.targets.end()) {
        std::string have;
        for (const auto& x : info.targets)
          have += (have.empty() ? "" : ", ") + x;
        throw core::InputError("probe", "targets",
                               "'" + t + "' is not in '" + info.path + "' (it has " + have + ")");
      }
  if (r.layers.empty()) r.layers = main.layers;
  for (const auto& info : infos)
    for (int l : r.layers)
      if (std::find(info.layers.begin(), info.layers.end(), l) == info.layers.end())
        throw core::InputError(
            "probe", "layers",
            "layer " + std::to_string(l) + " is not stored in '" + info.path + "'");
  const bool query = std::find(r.at.begin(), r.at.end(), ProbeAt::kQuery) != r.at.end();
  if (query && main.positions != extract::Positions::kAll)
    throw core::InputError("probe", "at",
                           "query reads the x-token of example k+1, but '" + main.path +
                               "' was extracted with positions y (y-tokens only); extract it "
                               "again with positions all");
  // The query after k examples is the x-token of example k+1: none after the last example.
  const int k_max = query ? main.task.n - 1 : main.task.n;
  if (r.ks.empty())
    for (int k = 1; k <= k_max; ++k)
      r.ks.push_back(k);
  for (int k : r.ks) {
    if (query && k == main.task.n)
      throw core::InputError("probe", "k",
                             "k=" + std::to_string(k) + " = n has no query token (no example " +
                                 std::to_string(k + 1) + "); with {at} query use k < n");
    if (k < 1 || k > main.task.n)
      throw core::InputError("probe", "k",
                             std::to_string(k) + " is outside 1.." + std::to_string(main.task.n));
  }
  for (const auto& info : infos) {
    const auto roles = SplitPrompts(info.prompts, r.split, r.seed);  // throws on an empty part
    const auto n_train = RoleIndices(roles, Role::kTrain).n_elem;
    if (r.codelength) CodelengthBlockEnds(r.codelength_fractions, std::int64_t(n_train));
    if (r.lambdas.min() == 0 &&
        std::find(r.families.begin(), r.families.end(), Family::kRidge) != r.families.end() &&
        n_train <= arma::uword(info.model.hidden))
      throw core::InputError("probe", "lambdas",
                             "0 is in the grid but '" + info.path + "' has " +
                                 std::to_string(n_train) + " training prompts for " +
                                 std::to_string(info.model.hidden) +
                                 " features; use lambdas > 0 or more prompts");
  }
}

}  // namespace

ProbePlan PlanProbes(const ProbeRequest& request) {
  request.Validate();
  ProbePlan plan;
  plan.request = request;
  plan.infos.push_back(extract::ReadActivationsInfo(request.activations));
  for (const auto& c : request.controls)
    plan.infos.push_back(extract::ReadActivationsInfo(c));
  CheckPlan(plan);
  return plan;
}

ProbePlan PlanProbesInMemory(const ProbeRequest& request,
                             std::vector<extract::ActivationsInfo> infos,
                             std::vector<std::shared_ptr<const MemorySource>> memory) {
  request.Validate();
  if (infos.empty() || infos.size() != memory.size() || infos.size() != request.controls.size() + 1)
    throw std::logic_error("probe: one description and one memory source per source");
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const auto& info = infos[i];
    const MemorySource* m = memory[i].get();
    if (!m) throw std::logic_error("probe: a memory source is missing");
    for (int l : info.layers) {
      const auto it = m->hidden.find(l);
      if (it == m->hidden.end() || !it->second.data ||
          it->second.stride < std::int64_t(info.positions_per_prompt) * info.model.hidden)
        throw std::logic_error("probe: memory source '" + info.path + "' lacks layer " +
                               std::to_string(l) + " in the described shape");
    }
    for (const auto& t : info.targets) {
      const auto it = m->targets.find(t);
      if (it == m->targets.end() || int(it->second.values.size()) != info.task.n)
        throw std::logic_error("probe: memory source '" + info.path + "' lacks target " + t);
      for (const auto& v : it->second.values)
        if (v.n_rows != it->second.dims || std::int64_t(v.n_cols) < info.prompts)
          throw std::logic_error("probe: memory target " + t + " of the wrong shape");
    }
  }
  ProbePlan plan;
  plan.request = request;
  plan.infos = std::move(infos);
  plan.memory = std::move(memory);
  CheckPlan(plan);
  return plan;
}

arma::fmat MemorySource::Read(int layer, std::int64_t rows, std::int64_t start,
                              std::int64_t count) const {
  const Layer& l = hidden.at(layer);
  arma::fmat out(rows, count, arma::fill::none);
  for (std::int64_t j = 0; j < count; ++j)
    std::memcpy(out.colptr(j), l.data + (start + j) * l.stride, sizeof(float) * rows);
  return out;
}

namespace {

// Target `name` of source `i`: from memory where the plan holds its sources there, else read
// from its file.
Target PlanTarget(const ProbePlan& plan, std::size_t i, const std::string& name) {
  if (plan.memory.empty()) return LoadTarget(plan.infos[i], name);
  return plan.memory[i]->targets.at(name);
}

std::uint64_t SplitSeed(std::uint64_t base, int s) {
  return base * 1000003ULL + std::uint64_t(s);
}

// A target variant probed on one source: the real targets, or (shuffle control) targets
// permuted across training prompts, one permutation per seed.
struct Variant {
  std::string target;  // as stored: the target's name, with kQuerySuffix when probed at the query
  ProbeAt at;
  const Target* values;
  std::vector<std::vector<arma::mat>> shuffled;  // [seed][k-1], empty when not shuffled
  const arma::mat& Y(int seed, int k) const {
    return shuffled.empty() ? values->values[k - 1] : shuffled[seed][k - 1];
  }
};

// One source probed: its file, the prompts' roles per seed, and the target variants.
struct SourceData {
  std::string name;
  const extract::ActivationsInfo* info;
  const MemorySource* memory = nullptr;  // the source's states when the plan holds them
  std::vector<std::vector<Role>> roles;  // [seed][prompt]
  std::vector<arma::uvec> train, val, test;
  // Codelength: per seed, the code block of each training prompt (-1 for the other prompts).
  std::vector<std::vector<int>> code_block;
  std::vector<Target> targets;
  std::vector<Variant> variants;
};

// The run's shared state: the plan, the pool and the results, filled from the workers through
// the thread-safe Record / Keep / Advance.
class ProbeRun {
 public:
  ProbeRun(const ProbePlan& plan, core::ThreadPool& pool,
           const std::function<void(double, double)>& progress)
      : plan(plan), r(plan.request), infos(plan.infos), pool(pool), progress_(progress) {}

  const ProbePlan& plan;
  const ProbeRequest& r;
  const std::vector<extract::ActivationsInfo>& infos;
  core::ThreadPool& pool;
  ProbeOutput out;
  double total = 0;  // progress units: (source, layer, k, family)

  void Record(const SourceData& src, int layer, const std::string& target, Family f, int k, int s,
              const Errors& e, double lambda, int epochs, const Codelength* code = nullptr) {
    if (!(e.sst > 0))
      throw core::InputError("'" + src.info->path + "'", "",
                             "target " + target + " has zero variance on the test split at k=" +
                                 std::to_string(k) + "; nMSE is undefined");
    if (e.row_sse.n_elem != src.test[s].n_elem || e.row_sst.n_elem != src.test[s].n_elem)
      throw std::logic_error("probe: per-prompt test errors of the wrong length");
    ProbeRecord rec{target,   FamilyName(f), src.name, layer,  k,         s,        e.Mse(),
                    e.Nmse(), e.R2(),        lambda,   epochs, e.row_sse, e.row_sst};
    if (code) rec.code_bits = code->bits, rec.uniform_bits = code->uniform_bits;
    std::lock_guard<std::mutex> lock(m_);
    out.records.push_back(std::move(rec));
  }
  void Keep(ProbeOutput::Ridge x) {
    std::lock_guard<std::mutex> lock(m_);
    out.ridge.push_back(std::move(x));
  }
  void Keep(ProbeOutput::Alpha x) {
    std::lock_guard<std::mutex> lock(m_);
    out.alphas.push_back(std::move(x));
  }
  void Keep(ProbeOutput::Code x) {
    std::lock_guard<std::mutex> lock(m_);
    out.codes.push_back(std::move(x));
  }
  void Advance(double units) {
    std::lock_guard<std::mutex> lock(m_);
    done_ += units;
    if (progress_) progress_(done_, total);
  }

 private:
  std::function<void(double, double)> progress_;
  std::mutex m_;
  double done_ = 0;
};

// What the probes of one (source, layer) share; `read(start, count)` gives rows [start,
// start + count) of the layer as a (T * H) x count block.
struct LayerJob {
  ProbeRun& run;
  const SourceData& src;
  int layer;
  std::function<arma::fmat(std::int64_t, std::int64_t)> read;
};

// Streams this rank's rows of the layer in blocks of r.block_rows, calling f(r0, count, block)
// with the block as stored (float32; the workers convert the positions they use). With more
// than one worker the next block is read on a thread of its own while the workers process this
// one: reading is serial, and was a third of a ridge run's time. The blocks and their order are
// the same either way.
template <class F>
void StreamBlocks(const LayerJob& job, const dist::Range& share, F&& f) {
  const std::int64_t step = job.run.r.block_rows;
  auto read = [&job, &share, step](std::int64_t r0) {
    return job.read(r0, std::min<std::int64_t>(step, share.hi - r0));
  };
  const bool ahead = job.run.pool.size() > 1;
  std::future<arma::fmat> next;  // joined by its destructor when f throws
  if (ahead && share.lo < share.hi) next = std::async(std::launch::async, read, share.lo);
  for (std::int64_t r0 = share.lo; r0 < share.hi; r0 += step) {
    const arma::fmat block = ahead ? next.get() : read(r0);
    if (ahead && r0 + step < share.hi) next = std::async(std::launch::async, read, r0 + step);
    f(r0, std::min<std::int64_t>(step, share.hi - r0), block);
  }
}

// Rows [row0, row0 + rows) of the columns col0 + cols of a float block, as doubles: one pass, in
// place of a submatrix copy, a column selection and a conversion (the same values).
arma::mat GatherColumns(const arma::fmat& block, arma::uword row0, arma::uword rows,
                        const arma::uvec& cols, arma::uword col0 = 0) {
  arma::mat x(rows, cols.n_elem, arma::fill::none);
  for (arma::uword j = 0; j < cols.n_elem; ++j) {
    const float* from = block.colptr(col0 + cols(j)) + row0;
    double* to = x.colptr(j);
    for (arma::uword i = 0; i < rows; ++i)
      to[i] = from[i];
  }
  return x;
}

// Ridge probes of one layer: pass 1 streams the training statistics of every (k, seed) and
// target; the lambda sweep follows from one eigendecomposition each; pass 2 streams the
// leave-one-out and held-out errors.
void RidgeOverLayer(const LayerJob& job) {
  const ProbeRequest& r = job.run.r;
  core::ThreadPool& pool = job.run.pool;
  const auto& info = *job.src.info;
  const auto& variants = job.src.variants;
  const auto& roles = job.src.roles;
  const auto& test = job.src.test;
  const std::int64_t N = info.prompts;
  const int H = info.model.hidden, K = r.ks.size(), S = r.seeds, V = variants.size();
  // Pass 1: training sufficient statistics per (k, seed) and position, and per target variant.
  const int A = r.at.size();
  auto at_index = [&](int v) {
    return int(std::find(r.at.begin(), r.at.end(), variants[v].at) - r.at.begin());
  };
  std::vector<FeatureStats> fstats(K * S * A);
  std::vector<TargetStats> tstats(K * S * V);
  for (int i = 0; i < K * S; ++i) {
    for (int a = 0; a < A; ++a)
      fstats[i * A + a].Init(H);
    for (int v = 0; v < V; ++v)
      tstats[i * V + v].Init(H, variants[v].values->dims);
  }
  // Codelength: the same statistics per code block (kept apart, so that the probes' own sums
  // are those of a run without it).
  const int B = r.codelength ? int(r.codelength_fractions.size()) : 0;
  std::vector<FeatureStats> code_f(K * S * A * B);
  std::vector<TargetStats> code_t(K * S * V * B);
  for (int i = 0; i < K * S; ++i)
    for (int b = 0; b < B; ++b) {
      for (int a = 0; a < A; ++a)
        code_f[(i * A + a) * B + b].Init(H);
      for (int v = 0; v < V; ++v)
        code_t[(i * V + v) * B + b].Init(H, variants[v].values->dims);
    }
  // Per seed, the block's rows of a role: positions in the block and prompt indices.
  struct Rows {
    arma::uvec loc, glob;
  };
  auto split_block = [&](std::int64_t r0, std::int64_t cnt, Role role) {
    std::vector<Rows> out(S);
    for (int s = 0; s < S; ++s) {
      std::vector<arma::uword> loc, glob;
      for (std::int64_t j = 0; j < cnt; ++j)
        if (roles[s][r0 + j] == role) loc.push_back(j), glob.push_back(r0 + j);
      out[s] = {arma::uvec(loc), arma::uvec(glob)};
    }
    return out;
  };
  // Under mpirun each rank streams its own share of the rows; the statistics are summed over
  // ranks, and every rank then holds the same probes (rank 0 writes them).
  // A rank that fails reading its rows (a damaged file, a NaN) stops every rank.
  const dist::Range share = dist::Share(N);
  // The probed positions of this rank's rows, kept for pass 2 when they fit (ridge_keep_bytes):
  // then the file is read once. Pass 2 sees the same floats in the same blocks either way.
  const std::int64_t here = share.hi - share.lo;
  const bool keep = static_cast<double>(K) * A * H * here * sizeof(float) <=
                    static_cast<double>(r.ridge_keep_bytes);
  std::vector<arma::fmat> kept(keep ? K * A : 0);
  for (auto& m : kept)
    m.set_size(H, here);
  dist::Together([&] {
    StreamBlocks(job, share, [&](std::int64_t r0, std::int64_t cnt, const arma::fmat& block) {
      if (keep)
        pool.For(K * A, [&](std::int64_t i) {
          const int pos = ProbePosition(info, r.ks[i / A], r.at[i % A]);
          kept[i].cols(r0 - share.lo, r0 - share.lo + cnt - 1) =
              block.rows(pos * H, pos * H + H - 1);
        });
      const auto train_rows = split_block(r0, cnt, Role::kTrain);
      pool.For(K * S, [&](std::int64_t i) {
        const int k = r.ks[i / S], s = i % S;
        const auto& [loc, glob] = train_rows[s];
        if (loc.is_empty()) return;
        for (std::size_t a = 0; a < r.at.size(); ++a) {
          const int pos = ProbePosition(info, k, r.at[a]);
          const arma::mat x = GatherColumns(block, pos * H, H, loc);
          fstats[i * A + a].Add(x);
          for (int v = 0; v < V; ++v)
            if (variants[v].at == r.at[a]) tstats[i * V + v].Add(x, variants[v].Y(s, k).cols(glob));
          // Training rows come in prompt order, so each code block is a run of them.
          for (arma::uword j0 = 0; B > 0 && j0 < loc.n_elem;) {
            const int b = job.src.code_block[s][glob(j0)];
            arma::uword j1 = j0 + 1;
            while (j1 < loc.n_elem && job.src.code_block[s][glob(j1)] == b)
              ++j1;
            const arma::span run(j0, j1 - 1);
            code_f[(i * A + a) * B + b].Add(x.cols(run));
            for (int v = 0; v < V; ++v)
              if (variants[v].at == r.at[a])
                code_t[(i * V + v) * B + b].Add(x.cols(run),
                                                variants[v].Y(s, k).cols(glob.subvec(run)));
            j0 = j1;
          }
        }
      });
    });
  });
  SumOverRanks(fstats, tstats);
  std::vector<Codelength> codes(B > 0 ? K * S * V : 0);
  if (B > 0) {
    SumOverRanks(code_f, code_t);
    CodelengthOptions co;
    co.lambdas = r.lambdas.elem(arma::find(r.lambdas > 0));
    co.precision = r.codelength_precision;
    pool.For(K * S * V, [&](std::int64_t iv) {
      const int i = int(iv) / V, v = int(iv) % V;
      const auto f0 = code_f.begin() + (i * A + at_index(v)) * B;
      const auto t0 = code_t.begin() + (i * V + v) * B;
      codes[iv] = RidgeCodelength(std::vector<FeatureStats>(f0, f0 + B),
                                  std::vector<TargetStats>(t0, t0 + B), co);
    });
  }
  std::vector<RidgeProbe> probes;
  probes.reserve(K * S * V);
  for (int i = 0; i < K * S * V; ++i)
    probes.emplace_back(r.lambdas);
  pool.For(K * S, [&](std::int64_t i) {
    for (int a = 0; a < A; ++a) {
      RidgeProbe base(r.lambdas);
      base.Prepare(fstats[i * A + a]);
      for (int v = 0; v < V; ++v)
        if (at_index(v) == a) {
          probes[i * V + v] = base;
          probes[i * V + v].Begin(tstats[i * V + v]);
        }
    }
  });
  // Pass 2: leave-one-out errors on training rows, held-out errors on test rows. `states(ki, a)`
  // gives where the block's states at position a after k = ks[ki] examples lie: a float matrix,
  // its first row and the column of the block's first prompt (H rows, one column per prompt).
  struct StatesAt {
    const arma::fmat* m;
    arma::uword row0, col0;
  };
  const auto pass2 = [&](std::int64_t r0, std::int64_t cnt, const auto& states) {
    const auto train_rows = split_block(r0, cnt, Role::kTrain);
    const auto test_rows = split_block(r0, cnt, Role::kTest);
    pool.For(K * S, [&](std::int64_t i) {
      const int ki = int(i) / S, k = r.ks[ki], s = i % S;
      const auto& [tl, tg] = train_rows[s];
      const auto& [hl, hg] = test_rows[s];
      for (int a = 0; a < A; ++a) {
        const StatesAt at = states(ki, a);
        const arma::mat train = GatherColumns(*at.m, at.row0, H, tl, at.col0);
        const arma::mat held = GatherColumns(*at.m, at.row0, H, hl, at.col0);
        for (int v = 0; v < V; ++v) {
          if (at_index(v) != a) continue;
          const arma::mat& y = variants[v].Y(s, k);
          if (!tl.is_empty()) probes[i * V + v].AccumulateLoo(train, y.cols(tg));
          if (!hl.is_empty())
            probes[i * V + v].AccumulateHeldOut(held, variants[v].values->values[k - 1].cols(hg));
        }
      }
    });
  };
  dist::Together([&] {
    if (keep) {
      for (std::int64_t r0 = share.lo; r0 < share.hi; r0 += r.block_rows) {
        const std::int64_t cnt = std::min<std::int64_t>(r.block_rows, share.hi - r0);
        pass2(r0, cnt, [&](int ki, int a) {
          return StatesAt{&kept[ki * A + a], 0, arma::uword(r0 - share.lo)};
        });
      }
      return;
    }
    StreamBlocks(job, share, [&](std::int64_t r0, std::int64_t cnt, const arma::fmat& block) {
      pass2(r0, cnt, [&](int ki, int a) {
        const int pos = ProbePosition(info, r.ks[ki], r.at[a]);
        return StatesAt{&block, arma::uword(pos) * H, 0};
      });
    });
  });
  for (auto& p : probes)
    p.CombineRanks();
  for (int i = 0; i < K * S; ++i) {
    const int k = r.ks[i / S], s = i % S;
    for (int v = 0; v < V; ++v) {
      RidgeProbe& p = probes[i * V + v];
      p.Select();
      // Test error against the real targets (the shuffle control is fit on permuted ones).
      const arma::mat yt = variants[v].values->values[k - 1].cols(test[s]);
      arma::mat c = yt;
      c.each_col() -= arma::vec(arma::mean(yt, 1));
      Errors e;
      e.sse = p.held_out_sse();
      e.row_sse = p.held_out_row_sse();
      e.row_sst = arma::sum(arma::square(c), 0).t();
      e.sst = arma::accu(e.row_sst);
      e.rows = yt.n_cols;
      e.dims = yt.n_rows;
      const Codelength* code = B > 0 ? &codes[i * V + v] : nullptr;
      job.run.Record(job.src, job.layer, variants[v].target, Family::kRidge, k, s, e, p.lambda(), 0,
                     code);
      if (code)
        job.run.Keep(ProbeOutput::Code{variants[v].target, job.src.name, job.layer, k, s, *code});
      job.run.Keep(ProbeOutput::Ridge{variants[v].target, job.src.name, job.layer, k, s, p.lambda(),
                                      p.weights(), p.intercept(), p.loo_mse(), p.feature_scale()});
    }
  }
  job.run.Advance(K);
}

// The layer's states, streamed into memory block by block: [N, T, H] float32.
torch::Tensor LayerStates(const LayerJob& job) {
  const extract::ActivationsInfo& info = *job.src.info;
  const std::int64_t N = info.prompts, rows = job.run.r.block_rows;
  const int H = info.model.hidden, T = info.positions_per_prompt;
  auto states = LargeEmpty({N, T, H});
  for (std::int64_t r0 = 0; r0 < N; r0 += rows) {
    const std::int64_t cnt = std::min<std::int64_t>(rows, N - r0);
    const arma::fmat block = job.read(r0, cnt);
    std::memcpy(states[r0].data_ptr<float>(), block.memptr(), sizeof(float) * block.n_elem);
  }
  return states;
}

// One linear / MLP fit: (k, seed, target, family) of a layer.
struct GradientTask {
  int ki, s, v;
  Family f;
};

std::vector<GradientTask> GradientTasks(const LayerJob& job, const std::vector<Family>& gradient) {
  std::vector<GradientTask> tasks;
  for (int ki = 0; ki < int(job.run.r.ks.size()); ++ki)
    for (int s = 0; s < job.run.r.seeds; ++s)
      for (int v = 0; v < int(job.src.variants.size()); ++v)
        for (auto f : gradient)
          tasks.push_back({ki, s, v, f});
  return tasks;
}

// One (k, seed, target, family) for several layers [j0, j1) of a group, fitted together as one
// batched model (their seed is the same: it depends on k and the seed index, not the layer).
// Runs on one thread: the result does not depend on what runs beside it.
void RunGradientTask(const std::deque<LayerJob>& jobs, const std::vector<torch::Tensor>& states,
                     std::size_t j0, std::size_t j1, const GradientTask& t) {
  const LayerJob& job = jobs[j0];
  const ProbeRequest& r = job.run.r;
  const auto& info = *job.src.info;
  const auto& variants = job.src.variants;
  const auto& test = job.src.test;
  const int T = info.positions_per_prompt, S = r.seeds, V = variants.size();
  const int k = r.ks[t.ki], pos = ProbePosition(info, k, variants[t.v].at);
  // Pooled probes see the states up to and including the one read (after k examples, or the
  // query's x-token).
  std::vector<torch::Tensor> x;
  for (std::size_t j = j0; j < j1; ++j)
    x.push_back(r.pooled ? states[j].slice(1, 0, pos + 1) : states[j].select(1, pos));
  GradientProbeOptions o = r.gradient;
  o.mlp = t.f == Family::kMlp;
  o.pooled = r.pooled;
  o.seed = SplitSeed(r.seed, t.s) * 31 + k;
  // Fit on (possibly shuffled) training targets; test against the real ones.
  arma::mat y = variants[t.v].Y(t.s, k);
  y.cols(test[t.s]) = variants[t.v].values->values[k - 1].cols(test[t.s]);
  const std::vector<GradientFit> fits =
      FitGradientProbes(x, y, job.src.train[t.s], job.src.val[t.s], test[t.s], o);
  std::vector<Codelength> codes;
  if (r.codelength) {
    CodelengthOptions co;
    co.lambdas = r.lambdas.elem(arma::find(r.lambdas > 0));
    co.precision = r.codelength_precision;
    const arma::uvec& train = job.src.train[t.s];  // prompt order
    codes = GradientCodelengths(x, y, train, job.src.val[t.s],
                                CodelengthBlockEnds(r.codelength_fractions, train.n_elem), o, co);
  }
  for (std::size_t j = j0; j < j1; ++j) {
    const GradientFit& fit = fits[j - j0];
    const Codelength* code = codes.empty() ? nullptr : &codes[j - j0];
    job.run.Record(job.src, jobs[j].layer, variants[t.v].target, t.f, k, t.s, fit.test, -1,
                   fit.epochs, code);
    if (code)
      job.run.Keep(ProbeOutput::Code{variants[t.v].target, job.src.name, jobs[j].layer, k, t.s,
                                     *code, FamilyName(t.f)});
    if (r.pooled) {
      arma::vec alpha(T, arma::fill::zeros);
      alpha.head(fit.alpha.n_elem) = fit.alpha;
      job.run.Keep(ProbeOutput::Alpha{variants[t.v].target, FamilyName(t.f), job.src.name,
                                      jobs[j].layer, k, t.s, alpha});
    }
    job.run.Advance(1.0 / (S * V));  // S * V probes make one (layer, k, family) unit
  }
}

// A byte stream for results moving between ranks (same program, same machine type).
class Bytes {
 public:
  std::vector<std::uint8_t> data;
  void Put(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    data.insert(data.end(), b, b + n);
  }
  template <typename T>
  void Put(const T& v) {
    Put(&v, sizeof(T));
  }
  void Put(const std::string& s) {
    Put(std::uint64_t(s.size()));
    Put(s.data(), s.size());
  }
  void Put(const arma::vec& v) {
    Put(std::uint64_t(v.n_elem));
    Put(v.memptr(), v.n_elem * sizeof(double));
  }

  std::size_t at = 0;
  void Take(void* p, std::size_t n) {
    if (at + n > data.size()) throw std::logic_error("probe: truncated results from a rank");
    std::memcpy(p, data.data() + at, n);
    at += n;
  }
  template <typename T>
  void Take(T& v) {
    Take(&v, sizeof(T));
  }
  void Take(std::string& s) {
    std::uint64_t n = 0;
    Take(n);
    s.resize(n);
    Take(s.data(), n);
  }
  void Take(arma::vec& v) {
    std::uint64_t n = 0;
    Take(n);
    v.set_size(n);
    Take(v.memptr(), n * sizeof(double));
  }
};

// The fields that travel between ranks, listed once for writing and for reading.
template <class Io, class Record>
void RecordFields(Io&& io, Record& rec) {
  io(rec.target, rec.probe, rec.source, rec.layer, rec.k, rec.seed, rec.mse, rec.nmse, rec.r2,
     rec.lambda, rec.epochs, rec.sse, rec.sst, rec.code_bits, rec.uniform_bits);
}
template <class Io, class Code>
void CodeFields(Io&& io, Code& c) {
  io(c.target, c.probe, c.source, c.layer, c.k, c.seed, c.code.block_bits,
     c.code.uniform_block_bits, c.code.block_lambda, c.code.bits, c.code.uniform_bits);
}
template <class Io, class Alpha>
void AlphaFields(Io&& io, Alpha& a) {
  io(a.target, a.probe, a.source, a.layer, a.k, a.seed, a.alpha);
}

// Under mpirun: the linear / MLP results of every rank on every rank (the ridge results are
// already the same everywhere).
void GatherGradientResults(ProbeOutput& out) {
  if (dist::Size() == 1) return;
  Bytes mine;
  auto put = [&mine](const auto&... v) { (mine.Put(v), ...); };
  std::vector<ProbeRecord> kept;
  for (const auto& rec : out.records) {
    if (rec.probe == FamilyName(Family::kRidge)) {
      kept.push_back(rec);
      continue;
    }
    mine.Put(std::uint8_t{0});
    RecordFields(put, rec);
  }
  for (const auto& a : out.alphas) {
    mine.Put(std::uint8_t{1});
    AlphaFields(put, a);
  }
  std::vector<ProbeOutput::Code> kept_codes;
  for (const auto& c : out.codes) {
    if (c.probe == FamilyName(Family::kRidge)) {
      kept_codes.push_back(c);
      continue;
    }
    mine.Put(std::uint8_t{2});
    CodeFields(put, c);
  }
  Bytes all;
  all.data = dist::Gather(mine.data);
  auto take = [&all](auto&... v) { (all.Take(v), ...); };
  out.records = std::move(kept);
  out.alphas.clear();
  out.codes = std::move(kept_codes);
  while (all.at < all.data.size()) {
    std::uint8_t kind = 0;
    all.Take(kind);
    if (kind == 0) {
      ProbeRecord rec;
      RecordFields(take, rec);
      out.records.push_back(std::move(rec));
    } else if (kind == 1) {
      ProbeOutput::Alpha a;
      AlphaFields(take, a);
      out.alphas.push_back(std::move(a));
    } else {
      ProbeOutput::Code c;
      CodeFields(take, c);
      out.codes.push_back(std::move(c));
    }
  }
}

// The prompts' roles for every seed, the targets, and (shuffle control) the targets permuted
// across training prompts.
SourceData PrepareSource(ProbeRun& run, const std::string& name, std::size_t info_index,
                         bool shuffled) {
  const ProbeRequest& r = run.r;
  SourceData src;
  src.name = name;
  src.info = &run.infos[info_index];
  if (!run.plan.memory.empty()) src.memory = run.plan.memory[info_index].get();
  const std::int64_t N = src.info->prompts;
  for (int s = 0; s < r.seeds; ++s) {
    src.roles.push_back(SplitPrompts(N, r.split, SplitSeed(r.seed, s)));
    src.train.push_back(RoleIndices(src.roles[s], Role::kTrain));
    src.val.push_back(RoleIndices(src.roles[s], Role::kVal));
    src.test.push_back(RoleIndices(src.roles[s], Role::kTest));
    if (r.codelength) {
      const auto ends = CodelengthBlockEnds(r.codelength_fractions, src.train[s].n_elem);
      std::vector<int> block(N, -1);
      int b = 0;
      for (arma::uword j = 0; j < src.train[s].n_elem; ++j) {
        while (std::int64_t(j) >= ends[b])
          ++b;
        block[src.train[s](j)] = b;
      }
      src.code_block.push_back(std::move(block));
      if (name == "model") run.out.code_block_ends.push_back(ends);
    }
    if (name == "model") {
      std::vector<std::uint8_t> r8(N);
      for (std::int64_t i = 0; i < N; ++i)
        r8[i] = static_cast<std::uint8_t>(src.roles[s][i]);
      run.out.roles.push_back(std::move(r8));
    }
  }
  for (const auto& t : r.targets)
    src.targets.push_back(PlanTarget(run.plan, info_index, t));
  for (const auto& t : src.targets)  // src.targets no longer grows: the pointers stay valid
    for (ProbeAt at : r.at) {
      Variant v{at == ProbeAt::kQuery ? QueryTargetName(t.name) : t.name, at, &t, {}};
      if (shuffled) {
        v.shuffled.resize(r.seeds);
        for (int s = 0; s < r.seeds; ++s) {
          data::Rng rng(SplitSeed(r.seed, s), /*stream=*/0x5a0f);
          arma::uvec perm = src.train[s];
          for (arma::uword i = perm.n_elem - 1; i > 0; --i)
            std::swap(perm(i), perm(rng.NextU64() % (i + 1)));
          for (int k = 1; k <= src.info->task.n; ++k) {
            arma::mat y = t.values[k - 1];
            y.cols(src.train[s]) = t.values[k - 1].cols(perm);
            v.shuffled[s].push_back(std::move(y));
          }
        }
      }
      src.variants.push_back(std::move(v));
    }
  return src;
}

// The linear / MLP fits of a group of layers: each (k, seed, target, family) one batched model
// over the group's layers, spread over the pool (split into as many layer batches as keep
// every thread busy).
void GradientOverLayers(ProbeRun& run, const std::deque<LayerJob>& jobs,
                        const std::vector<Family>& gradient) {
  std::vector<torch::Tensor> states;
  dist::Together([&] {
    for (const LayerJob& job : jobs)
      states.push_back(LayerStates(job));
  });
  const std::vector<GradientTask> per_layer = GradientTasks(jobs[0], gradient);
  const std::size_t parts = std::min<std::size_t>(
      jobs.size(), std::max<std::size_t>(1, std::size_t(run.pool.size()) / per_layer.size()));
  // Under mpirun the fits go round-robin to the ranks (each fit runs whole on one rank, so its
  // result does not depend on the rank count); their results are gathered after the run.
  std::vector<std::tuple<std::size_t, std::size_t, GradientTask>> tasks;
  std::size_t task_index = 0;
  for (std::size_t p = 0; p < parts; ++p)
    for (const GradientTask& t : per_layer)
      if (task_index++ % std::size_t(dist::Size()) == std::size_t(dist::Rank()))
        tasks.emplace_back(p * jobs.size() / parts, (p + 1) * jobs.size() / parts, t);
  dist::Together([&] {
    run.pool.For(tasks.size(), [&](std::int64_t i) {
      const auto& [j0, j1, t] = tasks[std::size_t(i)];
      RunGradientTask(jobs, states, j0, j1, t);
    });
  });
}

// Layers go in groups: ridge probes layer by layer (each spreads its (k, seed) work over the
// pool), then the group's linear / MLP fits. Memory: the states of one group's layers, up to
// ~1 GiB (at least as many layers as threads).
void ProbeSource(ProbeRun& run, const SourceData& src) {
  const ProbeRequest& r = run.r;
  const bool ridge =
      std::find(r.families.begin(), r.families.end(), Family::kRidge) != r.families.end();
  std::vector<Family> gradient;
  for (auto f : r.families)
    if (f != Family::kRidge) gradient.push_back(f);
  const extract::ActivationsInfo& info = *src.info;
  const double layer_bytes = 4.0 * info.prompts * info.positions_per_prompt * info.model.hidden;
  const std::size_t group =
      gradient.empty() ? 1
                       : std::max<std::size_t>(
                             run.pool.size(), static_cast<std::size_t>(1073741824.0 / layer_bytes));
  for (std::size_t g0 = 0; g0 < r.layers.size(); g0 += group) {
    const std::size_t g1 = std::min(r.layers.size(), g0 + group);
    std::deque<HiddenReader> readers;
    std::deque<LayerJob> jobs;
    for (std::size_t li = g0; li < g1; ++li) {
      std::function<arma::fmat(std::int64_t, std::int64_t)> read;
      if (src.memory) {
        const std::int64_t rows = std::int64_t(info.positions_per_prompt) * info.model.hidden;
        read = [&src, layer = r.layers[li], rows](std::int64_t start, std::int64_t count) {
          return src.memory->Read(layer, rows, start, count);
        };
      } else {
        const HiddenReader& reader = readers.emplace_back(info, r.layers[li]);
        read = [&reader](std::int64_t start, std::int64_t count) {
          return reader.Read(start, count);
        };
      }
      jobs.push_back(LayerJob{run, src, r.layers[li], std::move(read)});
      if (ridge) RidgeOverLayer(jobs.back());
    }
    if (!gradient.empty()) GradientOverLayers(run, jobs, gradient);
  }
}

// Intervals: every record of a seed is resampled with the same draws of its test prompts.
void AddIntervals(ProbeOutput& out, const ProbeRequest& r) {
  if (out.records.empty()) return;
  const Bootstrap boot(out.records[0].sse.n_elem, r.seeds, r.bootstrap, r.seed);
  for (auto& rec : out.records) {
    const Interval i = PercentileInterval(boot.R2(rec.seed, rec.sse, rec.sst));
    rec.r2_lo = i.lo, rec.r2_hi = i.hi;
    rec.nmse_lo = 1.0 - i.hi, rec.nmse_hi = 1.0 - i.lo;
  }
}

// A stable order: target, probe, source, layer, k, seed as requested.
void SortRecords(ProbeOutput& out, const ProbeRequest& r) {
  auto index_of = [](const auto& v, const auto& x) {
    return std::find(v.begin(), v.end(), x) - v.begin();
  };
  std::vector<std::string> fam;
  for (auto f : r.families)
    fam.push_back(FamilyName(f));
  auto key = [&](const ProbeRecord& a) {
    return std::make_tuple(index_of(r.targets, a.target), index_of(fam, a.probe),
                           index_of(out.sources, a.source), index_of(r.layers, a.layer),
                           index_of(r.ks, a.k), a.seed);
  };
  std::sort(out.records.begin(), out.records.end(),
            [&](const ProbeRecord& a, const ProbeRecord& b) { return key(a) < key(b); });
}

// The ceiling of w on the main file (ProbeOutput::ceilings), where it is known: the file's
// w_ridge is the Bayes posterior mean (lambda = sigma^2 / tau^2 on the training distribution of
// w and x), and w varies.
void AddCeilings(ProbeOutput& out, const ProbePlan& plan) {
  const ProbeRequest& r = plan.request;
  const extract::ActivationsInfo& info = plan.infos[0];
  const data::TaskConfig& task = info.task;
  const bool bayes = info.ridge_lambda >= 0 && std::abs(info.ridge_lambda - task.BayesLambda()) <=
                                                   1e-12 * (1 + task.BayesLambda());
  if (std::find(r.targets.begin(), r.targets.end(), "w") == r.targets.end() || !bayes ||
      task.fixed_w || task.context_shift.kind != data::ShiftKind::kNone ||
      std::find(info.targets.begin(), info.targets.end(), "w_ridge") == info.targets.end())
    return;
  const Target w = PlanTarget(plan, 0, "w"), wb = PlanTarget(plan, 0, "w_ridge");
  arma::mat c(r.ks.size(), r.seeds);
  for (int s = 0; s < r.seeds; ++s) {
    const arma::uvec test =
        RoleIndices(SplitPrompts(info.prompts, r.split, SplitSeed(r.seed, s)), Role::kTest);
    for (std::size_t ki = 0; ki < r.ks.size(); ++ki) {
      const arma::mat wt = w.values[r.ks[ki] - 1].cols(test);
      const arma::mat centred = wt.each_col() - arma::vec(arma::mean(wt, 1));
      const double sst = arma::accu(arma::square(centred));
      c(ki, s) = 1 - arma::accu(arma::square(wt - wb.values[r.ks[ki] - 1].cols(test))) / sst;
    }
  }
  for (ProbeAt at : r.at)
    out.ceilings[at == ProbeAt::kQuery ? QueryTargetName("w") : "w"] = c;
}

// ProbeOutput::target_map_r2 on the main file: each target against each other target, per k.
void AddTargetMaps(ProbeOutput& out, const ProbePlan& plan) {
  const ProbeRequest& r = plan.request;
  const extract::ActivationsInfo& info = plan.infos[0];
  const std::size_t T = r.targets.size();
  if (T < 2) return;
  const auto roles = SplitPrompts(info.prompts, r.split, SplitSeed(r.seed, 0));
  const arma::uvec train = RoleIndices(roles, Role::kTrain), test = RoleIndices(roles, Role::kTest);
  std::vector<Target> targets;
  for (const auto& t : r.targets)
    targets.push_back(PlanTarget(plan, 0, t));
  out.target_map_r2.set_size(T, T, r.ks.size());
  for (std::size_t ki = 0; ki < r.ks.size(); ++ki)
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < T; ++j) {
        if (i == j) {
          out.target_map_r2(i, j, ki) = 1;
          continue;
        }
        const arma::mat& a = targets[i].values[r.ks[ki] - 1];
        const arma::mat& b = targets[j].values[r.ks[ki] - 1];
        // Least squares with an intercept on [1; a]: a tiny ridge keeps duplicated entries (the
        // symmetric X'X) and constant ones (w_ols of one example is a multiple of x_1) solvable.
        auto design = [&](const arma::uvec& rows) {
          arma::mat x(a.n_rows + 1, rows.n_elem, arma::fill::ones);
          x.rows(1, a.n_rows) = a.cols(rows);
          return x;
        };
        const arma::mat xt = design(train), xs = design(test);
        arma::mat g = xt * xt.t();
        g.diag() += 1e-9 * (1 + arma::trace(g) / double(g.n_rows));
        const arma::mat coef = arma::solve(g, arma::mat(xt * b.cols(train).t()),
                                           arma::solve_opts::likely_sympd);  // (m_a + 1) x m_b
        const arma::mat bt = b.cols(test);
        const arma::mat centred = bt.each_col() - arma::vec(arma::mean(bt, 1));
        const double sst = arma::accu(arma::square(centred));
        out.target_map_r2(i, j, ki) =
            sst > 0 ? 1 - arma::accu(arma::square(bt - coef.t() * xs)) / sst : arma::datum::nan;
      }
}

}  // namespace

ProbeOutput RunProbes(const ProbePlan& plan, core::ThreadPool& pool,
                      const std::function<void(double, double)>& progress) {
  const ProbeRequest& r = plan.request;
  // (The program keeps BLAS and torch serial meanwhile; libraries do not set thread counts.)
  ProbeRun run(plan, pool, progress);
  run.out.layers = r.layers;
  run.out.ks = r.ks;
  run.out.seeds = r.seeds;
  struct Source {
    std::string name;
    std::size_t info;
    bool shuffled;
  };
  std::vector<Source> sources = {{"model", 0, false}};
  for (std::size_t i = 1; i < plan.infos.size(); ++i)
    sources.push_back({SourceName(plan.infos[i].path), i, false});
  if (r.shuffle_control) sources.push_back({"shuffled", 0, true});
  for (const auto& s : sources)
    run.out.sources.push_back(s.name);
  run.total = double(sources.size()) * r.layers.size() * r.ks.size() * r.families.size();
  for (const auto& s : sources)
    ProbeSource(run, PrepareSource(run, s.name, s.info, s.shuffled));
  GatherGradientResults(run.out);
  AddCeilings(run.out, plan);
  AddTargetMaps(run.out, plan);
  AddIntervals(run.out, r);
  SortRecords(run.out, r);
  return std::move(run.out);
}

}  // namespace icl::probes
