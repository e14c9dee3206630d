// construct/: transformers whose weights we write. A small compiler lowers a program of the
// paper's RAW operations (PAPER.md "Constructions": mov, mean, mul, aff) over named row ranges
// of the hidden state to the weights of the same Transformer class `train` produces, and records
// which rows hold which quantity after which layer: ground truth for probes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "learners/checkpoint.hpp"
#include "learners/transformer.hpp"

namespace icl::construct {

// Rows [begin, begin + size) of the hidden state.
struct Rows {
  int begin = 0, size = 0;
};

// Named row ranges, allocated in order.
class Layout {
 public:
  Rows Add(const std::string& name, int size);
  Rows operator[](const std::string& name) const;  // throws std::invalid_argument if unknown
  int width() const { return width_; }
  const std::vector<std::pair<std::string, Rows>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Rows>> entries_;
  int width_ = 0;
};

// One RAW instruction. Attention ops (mov, mean) fill a block's attention sublayer, MLP ops
// (mul) its MLP; each op writes rows that are zero before it (the residual stream adds).
struct Op {
  enum Kind { kMov, kMean, kMul } kind;
  std::string a, b, out;  // row-range names: sources a (and b for mul), destination out
  int offset = 0;         // mov: read position t + offset (offset <= 0)
  double coefficient =
      1;             // mul: out = coefficient * a (.) b, or its sum over rows when out has 1 row
  double range = 1;  // mul: a bound on |a| + |b|, which sets the GELU scale
};

// Where a quantity can be read, and what it is.
struct Quantity {
  std::string name;       // e.g. "xty"
  int layer = 0;          // hidden state index: 0 = embedding, l = after block l
  std::string rows;       // the row range holding it
  std::string positions;  // where it holds: "y-tokens" (after k examples), "x-tokens", "all"
  std::string meaning;
};

struct Construction {
  std::string program;  // "gd"
  learners::ModelConfig model;
  Layout layout;
  std::vector<Op> ops;
  std::vector<std::pair<int, std::string>> op_sublayer;  // per op: (block, "attention"|"mlp")
  std::vector<Quantity> quantities;
  double alpha = 0;
};

// The `gd` program (PAPER.md Theorem 1, one step from w0 = 0): the prediction at the x-token of
// example k+1 is 2 alpha x_{k+1}^T X_k^T y_k. Three blocks: mov x_i to the y-token and multiply
// by y_i; mean over positions and rescale by their number (X_k^T y_k, after block 2); multiply
// by the query and sum (the prediction, after block 3).
Construction GdProgram(int d, int n_max, double alpha);

// Lowers the program to weights (every other weight zero).
learners::Transformer Compile(const Construction& c);

// Writes the model as an ordinary checkpoint plus a /construction group (layout, quantities,
// program), readable with h5py.
void WriteConstruction(const std::string& path, const Construction& c,
                       const learners::SaveOptions& options);

// The GELU(tanh) product primitive on plain numbers, as the MLP computes it in float32: the
// reference the primitive tests and the error bound are stated against.
double GeluProduct(double a, double b, double scale);

// Programs iclprobe knows.
std::vector<std::string> ProgramNames();

}  // namespace icl::construct
