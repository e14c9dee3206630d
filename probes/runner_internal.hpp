// What the parts of a probing run share (probes/runner.cpp, ridge_layer.cpp,
// gradient_layers.cpp, rank_results.cpp): the sources as probed, the run's shared state and
// one (source, layer)'s job. Not part of the library's interface.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "probes/data_access.hpp"
#include "probes/gradient.hpp"
#include "probes/runner.hpp"

namespace icl::probes::detail {

inline std::uint64_t SplitSeed(std::uint64_t base, int s) {
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
  const StatesInfo* info;
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
  const std::vector<StatesInfo>& infos;
  core::ThreadPool& pool;
  ProbeOutput out;
  double total = 0;  // progress units: (source, layer, k, family)

  void Record(const SourceData& src, int layer, const std::string& target, Family f, int k, int s,
              const Errors& e, double lambda, int epochs, const Codelength* code = nullptr) {
    if (!(e.sst > 0))
      throw core::InputError("'" + src.info->name + "'", "",
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

// Ridge probes of one layer (probes/ridge_layer.cpp).
void RidgeOverLayer(const LayerJob& job);

// The linear / MLP fits of a group of layers (probes/gradient_layers.cpp).
void GradientOverLayers(ProbeRun& run, const std::deque<LayerJob>& jobs,
                        const std::vector<Family>& gradient);

// Under mpirun: the linear / MLP results of every rank on every rank (probes/rank_results.cpp).
void GatherGradientResults(ProbeOutput& out);

}  // namespace icl::probes::detail
