// probes.h5, the output of a probing run, has one owner: this file holds its format name,
// layout, writer (with the tidy CSV) and reader. Layout (format_version 1):
//   root attrs: format, format_version, created_by, activations(_sha256), checkpoint_sha256,
//     model_config, task_config, probe_config (JSON), sources, controls, layers, ks, seeds
//   /metrics/<target>/<probe>/<source>/{mse,nmse,r2}  [layer index, k index, seed]
//   /selectivity/<target>/<probe>/<control>            R2(model) - R2(control), same shape
//   /ridge/<target>/<source>/{weights [L,K,S,p,m], intercept [L,K,S,m], lambda [L,K,S],
//     loo_mse [L,K,S,lambdas]}
//   /alpha/<target>/<probe>/<source>                   pooling weights [L,K,S,T]
//   /splits/seed_<s>                                   role of each prompt (0 train, 1 val, 2 test)
#pragma once

#include <armadillo>
#include <map>
#include <ostream>
#include <string>
#include <vector>

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
  const arma::cube* Find(const std::string& target, const std::string& probe,
                         const std::string& source, const std::string& metric) const;
};

// Reads and checks a probes file: names plain, shapes as the attributes say, every score
// finite; throws std::invalid_argument naming the file and the object.
ProbeResults ReadProbesFile(const std::string& path);

// The tidy CSV: target,probe,source,layer,k,seed,mse,nmse,r2.
void WriteProbesCsv(std::ostream& os, const ProbeOutput& out);
// `sha256` maps each input path (activations and controls) to its SHA-256; missing ones are
// computed here (the CLI computes them on another thread while the probes run).
void WriteProbesFile(const std::string& path, const ProbeRequest& request, const ProbeOutput& out,
                     const std::map<std::string, std::string>& sha256 = {});

}  // namespace icl::probes
