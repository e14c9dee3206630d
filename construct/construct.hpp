// construct/: transformers whose weights we write. A small compiler lowers a program of the
// paper's RAW operations (docs/paper.md "Constructions": mov, mean, mul, aff) over named row
// ranges of the hidden state to the weights of the same Transformer class `train` produces, and
// records which rows hold which quantity after which layer: ground truth for probes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/task.hpp"
#include "formats/schema.hpp"
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
  // |out| x |b| matrix row-major, out[i] += c sum_j a[i*|b| + j] b[j]; matmat: a, b and out
  // hold m x m matrices row-major (|a| = |b| = |out| = m^2), out[i*m + j] += c sum_l a[i*m + l]
  // b[l*m + j], 4 m^3 MLP units.
  enum Form { kElementwise, kOuter, kMatVec, kMatMat } form = kElementwise;
  bool parallel = false;  // runs in the same sublayer as the op before it (reads the same state)
  std::vector<double> matrix;  // aff: |out| x |a| row-major; empty = coefficient * identity
  std::vector<double> bias;    // aff: added to out; empty = zero. With no source a: a constant
};

// Builders for the ops (every field not named keeps its default).
Op Mov(const std::string& a, const std::string& out, int offset);
Op Mean(const std::string& a, const std::string& out);
Op Mul(const std::string& a, const std::string& b, const std::string& out, double coefficient,
       double range, Op::Form form = Op::kElementwise);
Op Aff(const std::string& a, const std::string& out, double coefficient);
// out += values at every position (an aff with no source: fc2's bias alone, no MLP units).
Op Constant(const std::string& out, std::vector<double> values);
// The same op, run in the sublayer of the op before it.
Op Parallel(Op op);

// Where a quantity can be read, and what it is.
struct Quantity {
  std::string name;       // e.g. "xty"
  int layer = 0;          // hidden state index: 0 = embedding, l = after block l
  std::string rows;       // the row range holding it
  std::string positions;  // where it holds: "y-tokens" (after k examples), "x-tokens", "all"
  std::string meaning;
  int last_layer = -1;  // the last state that still holds it (an iterate the next one
                        // overwrites lives in one state only); -1 = to the model's last state
};

// A program as the command line names it: gd, gd:K or newton:K:C[:LAMBDA].
struct Program {
  enum Kind { kGd, kNewton } kind = kGd;
  int steps = 1;
  double start = 0;   // newton: Y_0 = start * I
  double lambda = 0;  // newton: A = X^T X + lambda I
  std::string text;   // the canonical spelling, e.g. "newton:12:0.03:0.25"
};
constexpr int kMaxGdSteps = 16;
constexpr int kMaxNewtonSteps = 20;
// Parses a program; throws core::InputError (setting "program") saying what was expected.
Program ParseProgram(const std::string& program);

// What makes a construction look trained, each exact or with a stated error:
// - distractors: that many extra residual rows of prompt features nothing reads: random
//   projections of the current token's x and y (block 1), and squares and products of pairs of
//   them (block 2), of the size of the computed quantities (entries ~ N(0, 9) and their
//   products); per-token features, never running sums of x y, which would carry X'y linearly.
//   At most kMaxDistractorFactor times the program's own width.
// - decoy "xty": a second encoding M X_k^T y_k written at block 2 like X'y itself (a mean of
//   M y_i x_i times the count) with a fixed random invertible M (condition <= 4, from seed),
//   read by nothing: decodable, not used. An exact copy cannot be told from the used one by any
//   interchange between prompts (both move together: see intervene/das.hpp); decoy_noise sigma
//   writes M X_k^T y_k + sigma (R x)^2 instead (R a fixed random orthogonal map; x = x_k at the
//   y-token of example k, x_(k+1) at the next x-token), a copy that is still decodable and
//   unused but not collinear with X'y across prompts.
// - nuisance sigma: block 2 writes X'y + sigma (P x_k)^2 (elementwise; P a fixed random
//   orthogonal map, so each (P x_k)_j is N(0, 1)) into the rows xty at the y-token of example k,
//   and the next MLP subtracts the same product, computed by the same weights from the same
//   rows (bit-identical), before anything reads X'y: the stream after block 2 holds a
//   nonlinearly corrupted X'y while every later quantity is exact up to the float32 rounding of
//   one add and one subtract. The state's other linear copies of X'y must be corrupted too, or a
//   linear probe reads X'y from them: mean_yx (X'y / 2k, never read after block 2) carries
//   sigma / n (P' x_k)^2 with another P', and gd:K writes w_1 at block 3 instead of 2 (every
//   later block shifts by one); one-step gd's prediction moves to block 4.
// - context distractors q: features of the prompt, not of the token alone, that nothing reads,
//   so that the state has many independent directions as a trained learner's has (a random
//   few of them can then be erased at little cost; the token distractors above span at most the
//   token's quadratic features however many rows they take). Block 1 writes xx = x x^T of the
//   token's example (x at its x-token, xprev at its y-token) and u = U x (q random features);
//   block 2's attention takes v = V mean(xx) and s = S mean(xx) over the positions so far (q
//   random features of the prefix's second moments each) and its MLP writes u (.) v and
//   v (.) s. All are functions of the x's alone, never of y: with w ~ N(0, I) independent of X
//   they have no linear correlation with X'y or any other quantity linear in w. d^2 + 5q rows,
//   at most kMaxDistractorFactor times the program's own width.
struct Disguise {
  int distractors = 0;
  int context_distractors = 0;  // q
  std::string decoy;            // "" or "xty"
  double nuisance = 0;          // sigma >= 0
  double decoy_noise = 0;       // sigma >= 0 of the decoy's own nuisance (needs decoy)
  std::uint64_t seed = 1;       // the random maps of every disguise
};
constexpr int kMaxDistractorFactor = 4;
// The largest nuisance sigma whose removal gives X'y back: the xty rows hold X'y + sigma u^2 in
// float32 (u = (P x_k)_j ~ N(0, 1), u^2 < 30 but for a 4e-8 fraction), and subtracting the
// bit-identical product leaves X'y off by up to 2^-24 sigma u^2, the rounding of the sum. That
// must stay within the 1e-3 the product primitives already allow (1e-3 (|a b| + 1), tests/
// test_construct.cpp): sigma <= 1e-3 2^24 / 30 = 559. At sigma = 1e30 the rounding alone is
// 1e23 and the model no longer computes its program.
constexpr double kMaxNuisance = 1e-3 * 16777216.0 / 30.0;

struct Construction {
  std::string program;  // "gd"
  learners::ModelConfig model;
  Layout layout;
  std::vector<Op> ops;
  std::vector<std::pair<int, std::string>> op_sublayer;  // per op: (block, "attention"|"mlp")
  std::vector<Quantity> quantities;
  double alpha = 0;
  int steps = 1;
  double start = 0, lambda = 0;  // newton
  // A random orthogonal change of basis Q of the residual stream, folded into every weight
  // (every hidden state becomes Q h); nullopt = the axis-aligned layout.
  std::optional<std::uint64_t> rotation_seed;
  Disguise disguise;
  std::vector<double> decoy_map, nuisance_map, nuisance_map_mean;  // M, P, P' (d x d row-major)
  std::vector<double> decoy_noise_map;                             // R (d x d row-major)
};

// The `gd` program (docs/paper.md "Constructions", Theorem 1): `steps` steps of batch GD from
// w0 = 0 on the examples so far, w_{t+1} = w_t - 2 alpha (X_k^T X_k w_t - X_k^T y_k); the
// prediction at the x-token of example k+1 is x_{k+1}^T w_K (one step: 2 alpha x_{k+1}^T X_k^T
// y_k). Block 1: mov x_i to the y-token, multiply by y_i (and x_i x_i^T for K > 1); block 2:
// mean over positions, rescale by their number (X_k^T y_k, X_k^T X_k) and w_1 = 2 alpha X_k^T
// y_k; blocks 3..K+1: one GD step each (aff + matvec mul in one MLP); block K+2: the prediction.
Construction GdProgram(int d, int n_max, double alpha, int steps = 1,
                       const Disguise& disguise = {});

// The `newton:K:C[:LAMBDA]` program: K steps of Newton-Schulz on A = X_k^T X_k +
// lambda I from the fixed start Y_0 = C I, Y_t = Y_{t-1} (2 I - A Y_{t-1}), and the iterates
// w_t = Y_t X_k^T y_k; the same iteration as the classical learner newton:K:C:LAMBDA. It
// converges to A^{-1} (w_t to ridge:LAMBDA) when 0 < C lambda_max(A) < 2: then Y_t =
// A^{-1} (I - (I - C A)^(2^t)), whose eigenvalues lie in (0, min(1/lambda, 2^t C)], and
// A Y_t has eigenvalues in [0, 1] (t >= 1). Prompts outside that region are not clamped:
// their iterates leave the products' range and the prediction is meaningless; CountDivergent
// counts them. Blocks 1-2 as in gd:K (X^T y and X^T X, also at the x-token of example k+1),
// Y_0 a constant; then for t = 1..K two MLP-only blocks: P_t = A Y_{t-1} (block 2t+1) and
// Y_t = 2 Y_{t-1} - Y_{t-1} P_t (block 2t+2); w_t = Y_t X^T y one block later (beside P_{t+1})
// and the prediction x_{k+1}^T w_t one more block later (beside Y_{t+1}): 2K + 4 blocks.
Construction NewtonProgram(int d, int n_max, int steps, double start, double lambda,
                           const Disguise& disguise = {});

// The program a parsed spec names (alpha is gd's step size; newton ignores it).
Construction BuildProgram(const Program& program, int d, int n_max, double alpha,
                          const Disguise& disguise = {});

// (prompt, k) pairs of prompts drawn from `task` (seeded) for which the program's iteration
// does not converge: gd:K when 2 alpha lambda_max(X_k^T X_k) >= 2, newton when C
// lambda_max(A) >= 2 or A is singular (lambda = 0, k < d). k = 0..n-1, the prefixes whose
// prediction the model makes. One-step gd has no iteration and no such pairs.
struct DivergenceCount {
  std::int64_t pairs = 0, outside = 0, prompts = 0, prompts_outside = 0;
};
DivergenceCount CountDivergent(const Construction& c, const data::TaskConfig& task,
                               std::uint64_t seed, std::int64_t prompts);

// Folds a random orthogonal Q (Haar, from `seed`) into the model's weights so that every hidden
// state becomes Q h and the outputs are unchanged up to float rounding. The model must have no
// LayerNorm (LayerNorm does not commute with a rotation); throws core::InputError otherwise.
// Returns Q (H x H).
arma::mat RotateResidualStream(learners::Transformer& model, std::uint64_t seed);
// The orthogonal matrix RotateResidualStream uses (modified Gram-Schmidt, twice, of a matrix
// of data::Rng normals: the same bits on every machine).
arma::mat RandomOrthogonal(int size, std::uint64_t seed);

// Schedules c.ops into blocks and sets c.model (no LayerNorm, one head, H = the layout's width,
// MLP wide enough for the busiest block). The layout must start with the embedding's rows x [d],
// y [1], pos [2 n_max], count [1], which Compile fills.
void Assemble(Construction& c, int d, int n_max);

// Lowers the program to weights (every other weight zero), rotated when c.rotation_seed is set.
learners::Transformer Compile(const Construction& c);
// Throws core::InputError naming `field` (the setting whose value made them: "alpha",
// "program") when a weight Compile would write is not finite or is beyond float32's range
// (|w| > 3.4e38): a huge step size, start or penalty, or one whose product's GELU scale
// overflows. Compile writes float32 weights, so this runs before it.
void RequireFloat32Weights(const Construction& c, const std::string& field,
                           const std::string& value);

// Writes the model as an ordinary checkpoint plus a /construction group (layout, quantities,
// program), readable with h5py.
void WriteConstruction(const std::string& path, const Construction& c,
                       const learners::SaveOptions& options);

// The group WriteConstruction adds to a constructed learner's checkpoint, and its members.
namespace construction_layout {
inline constexpr const char* kGroup = "construction";
inline constexpr const char* kLayout = "layout";          // attributes <name> = [first row, rows]
inline constexpr const char* kQuantities = "quantities";  // one group per quantity
inline constexpr const char* kRotation = "rotation";      // Q [H, H], with rotation_seed
// The disguises' d x d maps (M, P, P', R), each stored only when its disguise is on.
inline constexpr const char* kDecoyMap = "decoy_map";
inline constexpr const char* kNuisanceMap = "nuisance_map";
inline constexpr const char* kNuisanceMapMean = "nuisance_map_mean";
inline constexpr const char* kDecoyNoiseMap = "decoy_noise_map";
inline const std::vector<std::string> kMapLabels = {"row", "column"};
inline const std::vector<std::string> kRotationLabels = {"stream", "basis"};
inline constexpr const char* kDescription =
    "weights written by iclprobe construct: layout/<name> = [first row, rows]; quantities/<name> "
    "attrs layer (the first hidden state that holds it), last_layer (the last), rows, positions, "
    "meaning. With rotation_seed, every state is Q h for the dataset rotation = Q [H, H]: the "
    "rows name coordinates of h = Q^T h', so quantity q is Q[:, rows]^T h'";
}  // namespace construction_layout

// The whole checkpoint format: learners::CheckpointSchema() and the /construction group this
// module writes into a constructed learner's checkpoint.
const formats::Schema& CheckpointSchema();

// What a checkpoint's /construction group says (WriteConstruction's record, read back).
struct ConstructionRecord {
  std::string program;
  double alpha = 0;
  int steps = 0;
  double start = 0, lambda = 0;                // newton
  std::optional<std::uint64_t> rotation_seed;  // the basis is /construction/rotation [H, H]
  arma::mat rotation;                          // Q (H x H); empty when not rotated
  int distractors = 0;
  int context_distractors = 0;  // q of Disguise (d^2 + 5q rows)
  std::string decoy;            // "" or the quantity with an unused copy ("xty")
  double nuisance = 0;
  double decoy_noise = 0;              // decoy_xty = M X'y + decoy_noise (R x_k)^2
  arma::mat decoy_map;                 // M (d x d): decoy_xty = M X'y
  std::map<std::string, Rows> layout;  // name -> rows of the residual stream
  struct Entry {
    std::string name, positions, meaning;
    int layer = 0;       // the hidden state that holds it
    int last_layer = 0;  // the last state that still holds it
    Rows rows;  // rows of the unrotated stream: after rotation the quantity is Q[:, rows]^T h
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

}  // namespace icl::construct
