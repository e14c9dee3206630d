// A probing run: every requested probe family, for every target, layer, number of examples k
// and seed, on the main activations file and on each control (other files, and targets
// shuffled across training prompts). Produces tidy records plus fitted weights and pooling
// weights; writes probes.h5 and the CSV.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.hpp"
#include "extract/activations.hpp"
#include "probes/codelength.hpp"
#include "probes/data_access.hpp"
#include "probes/gradient_options.hpp"
#include "probes/ridge.hpp"
#include "probes/source.hpp"

namespace icl::probes {

enum class Family { kRidge, kLinear, kMlp };
std::string FamilyName(Family f);  // "ridge", "linear", "mlp"
// FamilyName's inverse; core::InputError (setting "probes") for any other name.
Family ParseFamily(const std::string& name);
// The families of a list setting's entries (core::SplitList's, or a Python list of names), in
// order; core::InputError (setting "probes") for an unknown name or an empty list.
std::vector<Family> ParseFamilies(const std::vector<std::string>& names);

// Where a probe reads the state after k examples: the y-token of example k (kState), or the
// x-token of example k+1 (kQuery), where the learner's prediction of y_{k+1} is read. A target
// probed at the query is stored under the name `<target>.query` (QueryTargetName).
enum class ProbeAt { kState, kQuery };
inline constexpr const char* kQuerySuffix = ".query";
std::string QueryTargetName(const std::string& target);
// "xty.query" -> {"xty", kQuery}; "xty" -> {"xty", kState}.
std::pair<std::string, ProbeAt> SplitTargetName(const std::string& stored);
// The row of the state a probe at `at` reads after k examples inside the (T * H) block layout;
// kQuery needs the x-tokens (positions "all") and k < n.
int ProbePosition(const StatesInfo& info, int k, ProbeAt at);
// The settings `at` ("state", "query" or "both": the positions read, in that order) and
// `pooling` ("attention": pooled, true; "position": the one state, false), as a request holds
// them; core::InputError naming the setting otherwise.
std::vector<ProbeAt> ParseProbeAt(const std::string& name);
bool ParsePooling(const std::string& name);

// The ridge penalty grid as a user writes it, on the command line or in the Python module:
// "LO:HI:COUNT" (COUNT values log-spaced from LO to HI, 0 < LO <= HI, COUNT 1..1000) or a comma
// list of numbers >= 0 (at most 1000); core::InputError (setting "lambdas") otherwise.
arma::vec ParseLambdaGrid(const std::string& text);
inline constexpr const char* kDefaultLambdaGrid = "1e-3:1e5:20";
// The train, validation and test fractions of a list of three numbers; core::InputError
// (setting "split") for another count. ProbeRequest::Validate checks their range and sum.
std::array<double, 3> SplitFractions(const std::vector<double>& fractions);

struct ProbeRequest {
  std::string activations;
  std::vector<std::string> controls;
  std::vector<std::string> targets = {"w_ols", "xty"};
  std::vector<Family> families = {Family::kRidge};
  int seeds = 1;
  bool shuffle_control = false;
  arma::vec lambdas = ParseLambdaGrid(kDefaultLambdaGrid);
  std::array<double, 3> split = {0.8, 0.1, 0.1};
  std::uint64_t seed = 0;
  bool pooled = true;             // gradient probes: attention pooling (false: the single state)
  GradientProbeOptions gradient;  // mlp / pooled / seed are set per probe
  std::vector<int> layers;        // empty: every stored layer
  std::vector<int> ks;            // empty: 1..n (1..n-1 when a probe reads the query)
  std::vector<ProbeAt> at = {ProbeAt::kState};  // each position probed, every target at each
  int block_rows = 2048;                        // rows per read
  // Ridge: a layer's probed positions (k x positions x H floats per prompt) are kept in memory
  // from the first pass for the second when they take at most this much, so the file is read
  // once; above it the layer is streamed twice. The probes are the same bits either way.
  std::int64_t ridge_keep_bytes = std::int64_t(1) << 30;
  int bootstrap = 1000;          // replicates of the bootstrap over test prompts
  std::int64_t max_prompts = 0;  // probe only the first this many prompts of every file; 0: all
  // Online codelength of every probe (probes/codelength.hpp; linear and MLP probes:
  // GradientCodelengths): the training rows cut at these fractions, each block coded by the
  // probe fitted on the blocks before it.
  bool codelength = false;
  // Other block ends than these are a setting of the codelength: Validate refuses them without it.
  std::vector<double> codelength_fractions = DefaultCodelengthFractions();
  double codelength_precision = 1e-3;  // each target entry to this fraction of its sd

  std::string ToJson() const;
  // The settings alone (counts, the grid, the split, names): throws core::InputError naming
  // the setting. PlanProbes() checks them against the files.
  void Validate() const;
};

// A request checked against its sources: defaults resolved (every stored layer, k = 1..n) and
// the sources' descriptions, the main source first, then the controls (with prompts cut to
// max_prompts where given).
struct MemorySource;
struct ProbePlan {
  ProbeRequest request;
  std::vector<StatesInfo> infos;
  // Sources held in memory (PlanProbesInMemory), in the order of infos; empty: files.
  std::vector<std::shared_ptr<const MemorySource>> memory;
};

// Validates the request, reads every file's description and checks the files against each
// other and the request before any work (throws core::InputError naming the file or setting).
ProbePlan PlanProbes(const ProbeRequest& request);

// Hidden states and targets of one source held in memory in place of an activations file (the
// Python module's arrays, read where they lie): per stored layer, prompt i's T * H floats (the
// column a file's HiddenReader gives) at data + i * stride; per target name its values per k
// (Target::values[k-1], m x N). The states stay the caller's and must outlive the run.
struct MemorySource {
  struct Layer {
    const float* data = nullptr;
    std::int64_t stride = 0;  // floats from one prompt's states to the next's
  };
  std::map<int, Layer> hidden;
  std::map<std::string, Target> targets;
  // Rows [start, start + count) of a layer as a (T * H) x count block.
  arma::fmat Read(int layer, std::int64_t rows, std::int64_t start, std::int64_t count) const;
};

// PlanProbes over sources in memory: `infos` describe them (DescribeArrays; name: the name
// messages and, for a control, the results use), `memory` holds them, main source first. The same
// checks, less the one only files can answer (that the controls hold the same prompts: with arrays,
// the caller's word). Throws std::logic_error when a source lacks a layer or target its info names.
ProbePlan PlanProbesInMemory(const ProbeRequest& request, std::vector<StatesInfo> infos,
                             std::vector<std::shared_ptr<const MemorySource>> memory);

struct ProbeRecord {
  std::string target, probe, source;
  int layer = 0, k = 0, seed = 0;
  double mse = 0, nmse = 0, r2 = 0;
  double lambda = -1;  // ridge only
  int epochs = 0;      // gradient probes only
  // Per test prompt of this seed's split (in prompt order): the probe's squared error and the
  // test mean's (the bootstrap resamples these; sum sse / sum sst = nmse).
  arma::vec sse, sst;
  // 95% percentile bootstrap intervals over this seed's test prompts.
  double r2_lo = 0, r2_hi = 0, nmse_lo = 0, nmse_hi = 0;
  // Online codelength of the training targets and the reference code's, in bits (ridge probes
  // of a run with codelength; NaN otherwise).
  double code_bits = arma::datum::nan, uniform_bits = arma::datum::nan;
};

struct ProbeOutput {
  std::vector<ProbeRecord> records;
  std::vector<std::string> sources;  // "model", control stems, "shuffled"
  std::vector<int> layers, ks;
  int seeds = 1;
  std::vector<std::vector<std::uint8_t>>
      roles;  // main file, per seed: 0 train, 1 validation, 2 test
  struct Ridge {
    std::string target, source;
    int layer, k, seed;
    double lambda;
    arma::mat weights;  // p x m on raw features
    arma::vec intercept;
    arma::vec loo_mse;
    arma::vec feature_scale;  // p: training standard deviation of each feature
  };
  std::vector<Ridge> ridge;
  struct Alpha {
    std::string target, probe, source;
    int layer, k, seed;
    arma::vec alpha;
  };
  std::vector<Alpha> alphas;
  // Codelength (request.codelength): per probe, each block's bits; per seed, the training
  // rows that end each block.
  struct Code {
    std::string target, source;
    int layer, k, seed;
    Codelength code;
    std::string probe = "ridge";  // the family: ridge, linear or mlp
  };
  std::vector<Code> codes;
  std::vector<std::vector<std::int64_t>> code_block_ends;  // [seed][block]
  // Per target name (as stored) that is not a function of the prompt (the true w): its ceiling
  // per (k, seed), R2 of E[w | prompt] = w_ridge(sigma^2 / tau^2) on that seed's test prompts,
  // the most any state can give. K x S. Targets that are functions of the prompt have ceiling 1.
  std::map<std::string, arma::mat> ceilings;
  // How far apart the targets are (request.targets, in order; two or more): (from, to, k index)
  // = test R2 of the least-squares affine map from target `from` to target `to`, fitted on the
  // training prompts of seed 0's split. Near 1 both ways: no probe comparison can tell them apart.
  arma::cube target_map_r2;
};

// Runs the plan: work is spread over (k, seed) and probes by the pool; results do not depend
// on its size.
ProbeOutput RunProbes(const ProbePlan& plan, core::ThreadPool& pool,
                      const std::function<void(double done, double total)>& progress = {});

// A run on arrays whose K axis carries labels other than 1..K (`labels[k-1]` for the run's k):
// its output, its request's ks and the description's n speak in those labels.
void RelabelKs(const std::vector<int>& labels, ProbeRequest& request, ProbeOutput& out,
               StatesInfo& info);

// The stem naming a control source: "acts_init" for "runs/acts_init.h5".
std::string SourceName(const std::string& path);

}  // namespace icl::probes
