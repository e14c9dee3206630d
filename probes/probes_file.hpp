// probes.h5, the output of a probing run, has one owner: this file holds its format name,
// layout, writer (with the tidy CSV) and reader. Layout (format_version 1):
//   root attrs: format, format_version, created_by, activations, activations_digest (with
//     activations_digest_kind, _size, _mtime_ns; see InputRecord), checkpoint_sha256,
//     model_config, task_config, probe_config (JSON), sources, controls, layers, ks, seeds
//   /metrics/<target>/<probe>/<source>/{mse,nmse,r2}  [layer index, k index, seed]
//   /metrics/<target>/<probe>/<source>/{r2_lo,r2_hi,nmse_lo,nmse_hi}  95% bootstrap interval
//     over that seed's test prompts, same shape
//   /errors/<target>/<probe>/<source>/sse  [layer, k, seed, test prompt]: per-prompt squared
//     error (summed over the target's entries), test prompts in prompt order
//   /errors/<target>/sst  [k, seed, test prompt]: the same for the test mean (sum sse / sum sst
//     = nmse); files without /errors (older runs) carry no intervals
//   /selectivity/<target>/<probe>/<control>            R2(model) - R2(control), same shape
//   /ridge/<target>/<source>/{weights [L,K,S,p,m], intercept [L,K,S,m], lambda [L,K,S],
//     loo_mse [L,K,S,lambdas]}
//   /alpha/<target>/<probe>/<source>                   pooling weights [L,K,S,T]
//   /splits/seed_<s>                                   role of each prompt (0 train, 1 val, 2 test)
//   /ceilings/<target>  [k, seed]: for w (no function of the prompt), R2 of E[w | prompt] on the
//     seed's test prompts, the most any representation gives it; absent for other targets (1)
//   /codelength/<target>/<probe>/<source>/{bits, uniform_bits} [L,K,S] and {block_bits,
//     uniform_block_bits, block_lambda} [L,K,S,blocks]: online codelength (probe --codelength);
//     /codelength/block_ends [seed, block]; attrs fractions (JSON), precision
//   /target_maps/r2 [k, from, to]: test R2 of the affine map from one target to another (attr
//     targets: the names), where probe comparisons between targets can discriminate
//   A target read at the query (probe --at query: the x-token of example k+1) is named
//   <target>.query wherever a target name appears (probes::QueryTargetName).
#pragma once

#include <armadillo>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "probes/runner.hpp"

namespace icl::probes {

inline constexpr const char* kProbesFormat = "iclprobe-probes";

// The metrics of a probes.h5 file: [target][probe][source] -> cube (seed, k index, layer index).
struct ProbeResults {
  std::string path;
  int d = 0, n = 0, seeds = 1;
  std::vector<int> layers, ks;
  std::vector<std::string> targets, probes, sources;  // in file order; sources[0] == "model"
  std::map<std::string, arma::cube> metric;           // key "target/probe/source/metric"
  std::map<std::string, arma::mat>
      alpha;  // key "target/probe/source": positions x (layer*K + k) mean over seeds
  // Per-prompt test errors (when the file has them): key "target/probe/source" -> per
  // (layer index * K + k index) an n_test x seeds matrix; sst: key target -> per k index.
  std::map<std::string, std::vector<arma::mat>> sse;
  std::map<std::string, std::vector<arma::mat>> sst;
  arma::uword n_test = 0;
  int bootstrap = 1000;
  std::uint64_t bootstrap_seed = 0;
  std::string model_config, task_config;  // JSON, as stored
  std::string pooling;  // linear/MLP input, from probe_config: "attention", "position" or ""
  std::string checkpoint_sha256;  // of the checkpoint the activations came from
  double ridge_lambda = -1;       // lambda of the w_ridge target (-1: not recorded)
  // /ceilings: target -> K x S, the most R2 any representation can give it (only targets that
  // are not functions of the prompt, like w; every other target's ceiling is 1).
  std::map<std::string, arma::mat> ceilings;
  // /codelength: the schedule (empty when the file has none); the bits are in `metric` as
  // "target/probe/source/code_bits" and ".../uniform_bits".
  std::vector<double> code_fractions;
  // /target_maps: (from, to, k index) test R2 of the affine map between two targets (names in
  // target_map_names, targets as probed without the query suffix); empty when absent.
  arma::cube target_map_r2;
  std::vector<std::string> target_map_names;
  double code_precision = 0;
  // Learner targets of the activations: target name ("w_gd_0.05_3") -> spec.
  std::map<std::string, std::string> learner_targets;
  // The file these fields were read from, kept open: ReadRidgeReadout reads the weights from
  // the same file that passed the checks, never a file put at `path` since.
  std::shared_ptr<const h5::File> file;
  bool has_errors() const { return !sse.empty(); }
  const arma::cube* Find(const std::string& target, const std::string& probe,
                         const std::string& source, const std::string& metric) const;
  // nullptr when the file has no per-prompt errors for that probe.
  const arma::mat* Sse(const std::string& target, const std::string& probe,
                       const std::string& source, arma::uword layer_index,
                       arma::uword k_index) const;
  const arma::mat* Sst(const std::string& target, arma::uword k_index) const;
};

// Reads and checks a probes file: names plain, shapes as the attributes say, every score
// finite; throws core::InputError naming the file and the object.
ProbeResults ReadProbesFile(const std::string& path);
// The same checks on an open file (`path` names it in messages); the results keep it open.
ProbeResults ReadProbes(h5::File f, const std::string& path);

// One fitted ridge readout: target ~= weights^T h + intercept on the raw hidden state h (the
// state after k examples), and the training standard deviation of each hidden unit.
struct RidgeReadout {
  arma::mat weights;        // p x m
  arma::vec intercept;      // m
  arma::vec feature_scale;  // p; empty in files written before it was stored
  double lambda = 0;
};
// The ridge readout of (target, layer, k, seed) for `source` from a file that `ReadProbesFile`
// accepted, from its open file; throws core::InputError naming the file and what is missing or
// malformed (no ridge probe of that target, a layer or k the file lacks, non-finite weights).
RidgeReadout ReadRidgeReadout(const ProbeResults& file, const std::string& target, int layer, int k,
                              int seed = 0, const std::string& source = "model");

// The tidy CSV: target,probe,source,layer,k,seed,mse,nmse,r2,r2_lo,r2_hi,nmse_lo,nmse_hi.
void WriteProbesCsv(std::ostream& os, const ProbeOutput& out);
// How a probes file names the exact input it was fitted on. Files from extract carry a
// content digest (extract::ContentDigest): recorded after a cheap check that the file's
// attributes and row digests still match it, or, with verify_rows, after re-hashing every row
// against them. Older files get the SHA-256 of the whole file. Size and modification time let
// a later reader notice a change without hashing anything.
struct InputRecord {
  std::string digest, kind;  // kind: "content_sha256" or "file_sha256"
  std::int64_t size = 0, mtime_ns = 0;
};
InputRecord RecordInput(const std::string& path, bool verify_rows);

// `inputs` maps each input path (activations and controls) to its record; missing ones are
// computed here (the CLI computes them on another thread while the probes run).
void WriteProbesFile(const std::string& path, const ProbeRequest& request, const ProbeOutput& out,
                     const std::map<std::string, InputRecord>& inputs = {});
// The same file for sources held in memory (PlanProbesInMemory): `info` describes the main
// source (DescribeArrays: its model and task only by their shapes), and the inputs are recorded
// as "memory" (no digest).
void WriteProbesFile(const std::string& path, const ProbeRequest& request, const ProbeOutput& out,
                     const StatesInfo& info);

// A run's results as ReadProbesFile would give them from the file WriteProbesFile writes, with
// no file on disk: written to an in-memory HDF5 file by the same writer and read back by the
// same reader (so every analysis of probes files applies to them). `info` describes the main
// source (the runner's plan.infos[0]; its path names the results); inputs are recorded as
// "memory". Throws core::InputError as the reader does.
ProbeResults ProbeResultsInMemory(const ProbeRequest& request, const ProbeOutput& out,
                                  const StatesInfo& info);

}  // namespace icl::probes
