// trace.h5, the file `iclprobe trace` writes, and its tidy CSVs: the schema (names and shapes
// below), the writer and the reader, in one place.
//
// Root attributes: format (formats::kTraceFormat), format_version, created_by, readout
// (lens|ridge), task_config (JSON), seed (of the prompts), prompts_from ("" or the activations file
// scored), prompts, fit_prompts, bootstrap_replicates, level, ks, layers, model_layers, algorithms
// (specs, in order, at most kMaxTraceAlgorithms, each once), checkpoints, checkpoint_sha256,
// seeds (training seeds), activations (per learner; "" for a forward pass), the same four for
// controls (control_*; empty lists without controls), and similarity_rule (text).
// Datasets (row-major, dimension labels in brackets):
//   labels                 [prompt, k]                 y_{k+1}
//   readout_lambdas        [lambda]                    the ridge readout's grid
//   predictions            [seed, layer, prompt, k]    each learner's per-layer predictions
//   control_predictions    [control, layer, prompt, k] (only with controls)
//   trace/<spec>/learner/{spd, spd_lo, spd_hi, cos, cos_lo, cos_hi}     [layer, iterate]
//   trace/<spec>/learner/{best, best_lo, best_hi, best_spd, best_spd_lo, best_spd_hi, margin,
//                         margin_lo, margin_hi}                         [layer]
//   trace/<spec>/learner/{excess, excess_lo, excess_hi}                 [layer] (with controls)
//   trace/<spec>/control/...   the same as learner/ less excess (with controls)
// with attributes rate, rate_lo, rate_hi, log2_rate, log2_rate_lo, log2_rate_hi, rate_layers on
// each learner/ and control/ group and spec, family, steps on trace/<spec>.
#pragma once

#include <ostream>
#include <string>

#include "analysis/trace_run.hpp"
#include "formats/schemas.hpp"

namespace icl::analysis {

inline constexpr const char* kTraceFormat = formats::kTraceFormat;
inline constexpr int kMaxTraceAlgorithms = 64;

void WriteTraceFile(const std::string& path, const TraceResult& result);
// Reads and checks a trace file (format, shapes, ranges, the specs); the models are not loaded
// and the per-input predictions are read only when `predictions`. Throws core::InputError naming
// the file.
TraceResult ReadTraceFile(const std::string& path, bool predictions = false);

// Tidy CSVs: the similarity of every (algorithm, learner|control, layer, iterate); the best
// iterate per layer; the rate per algorithm.
void WriteTraceCsv(std::ostream& os, const TraceResult& result);
void WriteTraceLayersCsv(std::ostream& os, const TraceResult& result);
void WriteTraceRatesCsv(std::ostream& os, const TraceResult& result);
// A short summary on stdout: per algorithm the best iterate per layer and the rate.
void PrintTraceSummary(std::ostream& os, const TraceResult& result);

}  // namespace icl::analysis
