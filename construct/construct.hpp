// construct/: transformers whose weights we write. A small compiler lowers a program of the
// paper's RAW operations (PAPER.md "Constructions": mov, mean, mul, aff) over named row ranges
// of the hidden state to the weights of the same Transformer class `train` produces, and records
// which rows hold which quantity after which layer: ground truth for probes.
#pragma once

#include <map>
#include <optional>
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
  Rows operator[](
      const std::string& name) const;  // throws std::logic_error if unknown (a compiler bug)
  int width() const { return width_; }
  const std::vector<std::pair<std::string, Rows>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Rows>> entries_;
  int width_ = 0;
};

// One RAW instruction. Attention ops (mov, mean) fill a block's attention sublayer, MLP ops
// (mul, aff) its MLP. An op adds its result to the rows `out` (the residual stream adds): into
// rows that are zero before it, or, as a GD step does, onto their current value.
struct Op {
  enum Kind { kMov, kMean, kMul, kAff } kind = kMov;
  std::string a, b, out;  // row-range names: sources a (and b for mul), destination out
  int offset = 0;         // mov: read position t + offset (offset <= 0)
  // mul: out += coefficient * a (.) b (b may be one row, broadcast), or its sum over rows when
  // out has 1 row. aff: out += coefficient * a, or matrix * a when matrix is given.
  double coefficient = 1;
  double range = 1;  // mul: a bound on |a| + |b|, which sets the GELU scale
  // mul forms: elementwise (above); outer: out[i*|b| + j] += c a[i] b[j]; matvec: a holds a
  // |out| x |b| matrix row-major, out[i] += c sum_j a[i*|b| + j] b[j].
  enum Form { kElementwise, kOuter, kMatVec } form = kElementwise;
  bool parallel = false;  // runs in the same sublayer as the op before it (reads the same state)
  std::vector<double> matrix;  // aff: |out| x |a| row-major; empty = coefficient * identity
  std::vector<double> bias;    // aff: added to out; empty = zero
};

// Builders for the ops (every field not named keeps its default).
Op Mov(const std::string& a, const std::string& out, int offset);
Op Mean(const std::string& a, const std::string& out);
Op Mul(const std::string& a, const std::string& b, const std::string& out, double coefficient,
       double range, Op::Form form = Op::kElementwise);
Op Aff(const std::string& a, const std::string& out, double coefficient);
// The same op, run in the sublayer of the op before it.
Op Parallel(Op op);

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
  int steps = 1;
};

// The `gd` program (PAPER.md Theorem 1): `steps` steps of batch GD from w0 = 0 on the examples
// so far, w_{t+1} = w_t - 2 alpha (X_k^T X_k w_t - X_k^T y_k); the prediction at the x-token of
// example k+1 is x_{k+1}^T w_K (one step: 2 alpha x_{k+1}^T X_k^T y_k). Block 1: mov x_i to the
// y-token, multiply by y_i (and x_i x_i^T for K > 1); block 2: mean over positions, rescale by
// their number (X_k^T y_k, X_k^T X_k) and w_1 = 2 alpha X_k^T y_k; blocks 3..K+1: one GD step
// each (aff + matvec mul in one MLP); block K+2: the prediction.
Construction GdProgram(int d, int n_max, double alpha, int steps = 1);

// Parses "gd" or "gd:K" (K steps, 1 <= K <= kMaxGdSteps); throws core::InputError naming
// what was expected.
int ParseGdSteps(const std::string& program);
constexpr int kMaxGdSteps = 16;

// Schedules c.ops into blocks and sets c.model (no LayerNorm, one head, H = the layout's width,
// MLP wide enough for the busiest block). The layout must start with the embedding's rows x [d],
// y [1], pos [2 n_max], count [1], which Compile fills.
void Assemble(Construction& c, int d, int n_max);

// Lowers the program to weights (every other weight zero).
learners::Transformer Compile(const Construction& c);

// Writes the model as an ordinary checkpoint plus a /construction group (layout, quantities,
// program), readable with h5py.
void WriteConstruction(const std::string& path, const Construction& c,
                       const learners::SaveOptions& options);

// What a checkpoint's /construction group says (WriteConstruction's record, read back).
struct ConstructionRecord {
  std::string program;
  double alpha = 0;
  int steps = 0;
  std::map<std::string, Rows> layout;  // name -> rows of the residual stream
  struct Entry {
    std::string name, positions, meaning;
    int layer = 0;  // the hidden state that holds it
    Rows rows;
  };
  std::vector<Entry> quantities;
  std::vector<std::string> ops;  // "mul(a, b) -> out @ block 2 mlp"
};
// The record of a constructed checkpoint, or nullopt for a checkpoint without one (a trained
// learner). Throws naming the file for a record that does not fit together.
std::optional<ConstructionRecord> ReadConstruction(const std::string& checkpoint);

// The GELU(tanh) product primitive on plain numbers, as the MLP computes it in float32: the
// reference the primitive tests and the error bound are stated against.
double GeluProduct(double a, double b, double scale);

// Programs iclprobe knows.
std::vector<std::string> ProgramNames();

}  // namespace icl::construct
