// The schemas of the result files of the causal stages and of trace, each a
// Schema value (schema.hpp): the one place their format names, datasets,
// shapes, labels and attributes are written down. The stages' owners
// (intervene/, analysis/trace_file) write and read through them.
#pragma once

#include "formats/schema.hpp"

namespace icl::formats {

inline constexpr const char* kInterventionsFormat = "iclprobe-interventions";
inline constexpr const char* kSwapsFormat = "iclprobe-swaps";
inline constexpr const char* kErasureFormat = "iclprobe-erasure";
inline constexpr const char* kDasFormat = "iclprobe-das";
inline constexpr const char* kTraceFormat = "iclprobe-trace";

const Schema& InterventionsSchema();  // interventions.cpp
const Schema& SwapsSchema();          // swaps.cpp
const Schema& ErasureSchema();        // erasure.cpp
const Schema& DasSchema();            // das.cpp
const Schema& TraceSchema();          // trace.cpp

// Every schema above, for the documentation pages and their test.
std::vector<const Schema*> AllSchemas();

// A summary dataset (float64 over `shape`, labelled by `labels`). A name ending
// in _lo or _hi is an interval bound: its values may be NaN, which its
// attribute 'undefined' (kUndefinedBound) explains.
DatasetSpec SummaryData(const std::string& name, const std::vector<std::string>& shape,
                        const std::vector<std::string>& labels, const std::string& description,
                        const std::string& when = "");

// What the interval datasets of these schemas say in their attribute
// 'undefined'.
inline constexpr const char* kUndefinedBound =
    "NaN: undefined, a bootstrap resample of the pairs had no spread in the reference's values "
    "(too few pairs)";

}  // namespace icl::formats
