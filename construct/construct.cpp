// The RAW compiler: layout, scheduling of ops into blocks, and the weights of each primitive.
#include "construct/construct.hpp"

#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/spec.hpp"

namespace icl::construct {

namespace {

// GELU(tanh) is even-part quadratic near 0: g(z) + g(-z) = z tanh(k (z + 0.044715 z^3)) with
// k = sqrt(2/pi), = k z^2 (1 - 0.1675 z^2 + O(z^4)). So with a scale s, a^2 is read as
// (g(s a) + g(-s a)) / (k s^2), relative error 0.1675 (s a)^2, and a b = ((a+b)^2 - (a-b)^2) / 4.
constexpr double kGeluCurvature = 0.7978845608028654;  // sqrt(2 / pi)
// s (|a| + |b|) stays below this. The truncation terms of the two squares leave
// a b - 0.1675 s^2 ((a+b)^4 - (a-b)^4) / 4 = a b (1 - 2 * 0.1675 s^2 (a^2 + b^2)): a relative
// error of at most 2 * 0.1675 * 0.02^2 = 1.34e-4.
constexpr double kMulReach = 0.02;
// mov: the score of the wanted position exceeds every other by this, so the attention weight off
// it is at most 2 n_max exp(-40) < 1e-15.
constexpr double kMovSharpness = 40.0;

double GeluTanh(double z) {
  return 0.5 * z * (1.0 + std::tanh(kGeluCurvature * (z + 0.044715 * z * z * z)));
}

using learners::BlockImpl;

void SetMov(BlockImpl& b, const Layout& L, const Op& op, int n_max, int H) {
  torch::NoGradGuard no_grad;
  auto w = b.attn->in_proj_weight;  // [3H, H]: query, key, value
  const Rows pos = L["pos"], a = L[op.a], out = L[op.out];
  const double scale = std::sqrt(double(H));  // undoes the attention's 1 / sqrt(head_dim)
  if (op.kind == Op::kMov)
    for (int t = 0; t < 2 * n_max; ++t) {
      if (t + op.offset >= 0) w[pos.begin + t + op.offset][pos.begin + t] = kMovSharpness * scale;
      w[H + pos.begin + t][pos.begin + t] = 1.0;
    }
  // kMean: query and key zero, so every position up to t gets weight 1 / (t + 1).
  for (int j = 0; j < a.size; ++j) {
    w[2 * H + a.begin + j][a.begin + j] = 1.0;
    b.attn->out_proj->weight[out.begin + j][a.begin + j] = 1.0;
  }
}

// Writes one product a*b (rows ra, rb) into row o with coefficient c, through MLP units
// unit..unit+3: g(s(a+b)) + g(-s(a+b)) - g(s(a-b)) - g(-s(a-b)) = k s^2 * 4ab.
void SetProduct(BlockImpl& b, int ra, int rb, int o, int unit, double s, double c) {
  auto w1 = b.fc1->weight, w2 = b.fc2->weight;  // [U, H], [H, U]
  const double back = c / (4.0 * kGeluCurvature * s * s);
  const double sign_a[4] = {1, -1, 1, -1}, sign_b[4] = {1, -1, -1, 1}, sign_out[4] = {1, 1, -1, -1};
  for (int u = 0; u < 4; ++u) {
    w1[unit + u][ra] = sign_a[u] * s;
    w1[unit + u][rb] = w1[unit + u][rb].item<double>() + sign_b[u] * s;  // b may be a's own row
    w2[o][unit + u] = sign_out[u] * back;
  }
}

// MLP units an op needs.
int UnitsOf(const Layout& L, const Op& op) {
  if (op.kind == Op::kAff) return 2 * L[op.out].size;
  if (op.form == Op::kOuter) return 4 * L[op.a].size * L[op.b].size;
  return 4 * L[op.a].size;
}

// mul from MLP units [unit, unit + UnitsOf(op)).
void SetMul(BlockImpl& b, const Layout& L, const Op& op, int unit) {
  torch::NoGradGuard no_grad;
  const Rows a = L[op.a], bb = L[op.b], out = L[op.out];
  const double s = kMulReach / op.range;
  switch (op.form) {
    case Op::kElementwise:
      if (bb.size != a.size && bb.size != 1)
        throw std::logic_error("construct: mul needs rows of equal size or a scalar");
      if (out.size != a.size && out.size != 1)
        throw std::logic_error("construct: mul writes a.size rows or their sum in one row");
      for (int j = 0; j < a.size; ++j)
        SetProduct(b, a.begin + j, bb.size == 1 ? bb.begin : bb.begin + j,
                   out.size == 1 ? out.begin : out.begin + j, unit + 4 * j, s, op.coefficient);
      return;
    case Op::kOuter:
      if (out.size != a.size * bb.size)
        throw std::logic_error("construct: an outer product writes |a| * |b| rows");
      for (int i = 0; i < a.size; ++i)
        for (int j = 0; j < bb.size; ++j)
          SetProduct(b, a.begin + i, bb.begin + j, out.begin + i * bb.size + j,
                     unit + 4 * (i * bb.size + j), s, op.coefficient);
      return;
    case Op::kMatVec:
      if (a.size != out.size * bb.size)
        throw std::logic_error("construct: matvec needs |a| = |out| * |b|");
      for (int i = 0; i < out.size; ++i)
        for (int j = 0; j < bb.size; ++j)
          SetProduct(b, a.begin + i * bb.size + j, bb.begin + j, out.begin + i,
                     unit + 4 * (i * bb.size + j), s, op.coefficient);
      return;
  }
}

// aff from MLP units [unit, unit + 2 |out|). GELU(tanh) is exactly linear in its odd part:
// g(z) - g(-z) = z/2 (1 + tanh u) + z/2 (1 - tanh u) = z for every z, so one unit pair per
// output row carries (matrix * a)_i without approximation; the bias goes into fc2's bias.
void SetAff(BlockImpl& b, const Layout& L, const Op& op, int unit) {
  torch::NoGradGuard no_grad;
  const Rows a = L[op.a], out = L[op.out];
  if (!op.matrix.empty() && op.matrix.size() != std::size_t(out.size) * a.size)
    throw std::logic_error("construct: aff matrix must be |out| x |a|");
  if (op.matrix.empty() && a.size != out.size)
    throw std::logic_error("construct: aff without a matrix needs |a| = |out|");
  if (!op.bias.empty() && op.bias.size() != std::size_t(out.size))
    throw std::logic_error("construct: aff bias must have |out| entries");
  auto w1 = b.fc1->weight, w2 = b.fc2->weight;
  for (int i = 0; i < out.size; ++i) {
    for (int j = 0; j < a.size; ++j) {
      const double m =
          op.matrix.empty() ? (i == j ? op.coefficient : 0.0) : op.matrix[i * a.size + j];
      w1[unit + 2 * i][a.begin + j] = m;
      w1[unit + 2 * i + 1][a.begin + j] = -m;
    }
    w2[out.begin + i][unit + 2 * i] = 1.0;
    w2[out.begin + i][unit + 2 * i + 1] = -1.0;
    if (!op.bias.empty())
      b.fc2->bias[out.begin + i] = b.fc2->bias[out.begin + i].item<double>() + op.bias[i];
  }
}

const char* KindName(Op::Kind k) {
  switch (k) {
    case Op::kMov:
      return "mov";
    case Op::kMean:
      return "mean";
    case Op::kMul:
      return "mul";
    case Op::kAff:
      return "aff";
  }
  return "?";
}

// Places ops into sublayers: in program order, one op per sublayer unless it is `parallel` with
// the one before; attention precedes the MLP within a block. Returns the blocks used and fills
// c.op_sublayer; MLP ops get consecutive unit ranges within their block.
int Schedule(Construction& c, std::vector<int>& first_unit, int& max_units) {
  int block = 1, units = 0;
  bool attn_used = false, mlp_used = false;
  max_units = 0;
  c.op_sublayer.clear();
  first_unit.clear();
  for (std::size_t i = 0; i < c.ops.size(); ++i) {
    const Op& op = c.ops[i];
    const bool attention = op.kind == Op::kMov || op.kind == Op::kMean;
    if (op.parallel) {
      if (i == 0 || (c.op_sublayer.back().second == "attention") != attention)
        throw std::logic_error("construct: a parallel op must share its sublayer's kind");
      if (attention && (op.kind == Op::kMov || c.ops[i - 1].kind == Op::kMov))
        throw std::logic_error("construct: mov needs its attention sublayer to itself");
    } else if (attention) {
      if (attn_used || mlp_used) ++block, mlp_used = false;
      attn_used = true;
    } else {
      if (mlp_used) ++block, attn_used = false;
      mlp_used = true;
      units = 0;
    }
    first_unit.push_back(attention ? 0 : units);
    if (!attention) units += UnitsOf(c.layout, op);
    max_units = std::max(max_units, units);
    c.op_sublayer.emplace_back(block, attention ? "attention" : "mlp");
  }
  return block;
}

}  // namespace

Op Mov(const std::string& a, const std::string& out, int offset) {
  Op op;
  op.kind = Op::kMov;
  op.a = a, op.out = out, op.offset = offset;
  return op;
}

Op Mean(const std::string& a, const std::string& out) {
  Op op;
  op.kind = Op::kMean;
  op.a = a, op.out = out;
  return op;
}

Op Mul(const std::string& a, const std::string& b, const std::string& out, double coefficient,
       double range, Op::Form form) {
  Op op;
  op.kind = Op::kMul;
  op.a = a, op.b = b, op.out = out, op.coefficient = coefficient, op.range = range;
  op.form = form;
  return op;
}

Op Aff(const std::string& a, const std::string& out, double coefficient) {
  Op op;
  op.kind = Op::kAff;
  op.a = a, op.out = out, op.coefficient = coefficient;
  return op;
}

Op Parallel(Op op) {
  op.parallel = true;
  return op;
}

Rows Layout::Add(const std::string& name, int size) {
  Rows r{width_, size};
  entries_.emplace_back(name, r);
  width_ += size;
  return r;
}

Rows Layout::operator[](const std::string& name) const {
  for (const auto& [n, r] : entries_)
    if (n == name) return r;
  throw std::logic_error("construct: no row range named '" + name + "'");
}

double GeluProduct(double a, double b, double scale) {
  const float s = static_cast<float>(scale);
  auto g = [](float z) { return static_cast<float>(GeluTanh(z)); };
  const float p = static_cast<float>(a) + static_cast<float>(b),
              m = static_cast<float>(a) - static_cast<float>(b);
  const float sum = g(s * p) + g(-s * p) - g(s * m) - g(-s * m);
  return sum / (4.0 * kGeluCurvature * double(s) * double(s));
}

std::vector<std::string> ProgramNames() {
  return {"gd", "gd:K"};
}

int ParseGdSteps(const std::string& program) {
  const core::Spec p = core::ParseSpec(program);
  const auto steps = p.args.empty() ? std::optional<long long>(1) : p.Integer(0, 1, kMaxGdSteps);
  if (p.text != program || p.name != "gd" || p.args.size() > 1 || !steps)
    throw core::InputError("construct", "program",
                           "expected gd or gd:K with K an integer in 1.." +
                               std::to_string(kMaxGdSteps) + " (GD steps), got '" + program + "'");
  return static_cast<int>(*steps);
}

void Assemble(Construction& c, int d, int n_max) {
  std::vector<int> first_unit;
  int max_units = 0;
  const int blocks = Schedule(c, first_unit, max_units);
  const int width = c.layout.width();
  c.model.d = d;
  c.model.n_max = n_max;
  c.model.layers = blocks;
  c.model.hidden = width;
  c.model.heads = 1;
  c.model.mlp_ratio = std::max(1, (max_units + width - 1) / width);
  c.model.norm = "none";
  c.model.kernels = 1;  // LibTorch's GELU: the compiled weights are checked against it
}

Construction GdProgram(int d, int n_max, double alpha, int steps) {
  if (d < 1) throw core::InputError("construct", "d", "must be positive");
  if (n_max < 1) throw core::InputError("construct", "n", "must be positive");
  if (!(alpha > 0) || !std::isfinite(alpha))
    throw core::InputError("construct", "alpha", "must be a positive number");
  if (steps < 1 || steps > kMaxGdSteps)
    throw core::InputError("construct", "program",
                           "steps must be in 1.." + std::to_string(kMaxGdSteps));
  Construction c;
  c.program = steps == 1 ? "gd" : "gd:" + std::to_string(steps);
  c.alpha = alpha;
  c.steps = steps;
  const bool multi = steps > 1;
  Layout& L = c.layout;
  L.Add("x", d);            // x_i at its x-token (embedding)
  L.Add("y", 1);            // y_i at its y-token (embedding)
  L.Add("pos", 2 * n_max);  // one-hot position (embedding)
  L.Add("count", 1);        // t + 1, the number of positions up to t (embedding)
  L.Add("xprev", d);        // x of the previous position: x_i at the y-token of example i
  L.Add("yx", d);           // y_i x_i at the y-token of example i, 0 at x-tokens
  L.Add("mean_yx", d);      // mean over positions <= t of yx
  L.Add("xty", d);          // X_k^T y_k: sum over the examples up to t
  if (multi) {
    L.Add("xx", d * d);       // x_i x_i^T (row-major) at the x-token of example i
    L.Add("mean_xx", d * d);  // its mean over positions <= t
    L.Add("xtx", d * d);      // X_k^T X_k at the y-token of example k
    L.Add("w", d);            // the GD iterate w_t at the y-token of example k
    L.Add("wprev", d);        // w_K of the previous position: at the x-token of example k+1
  }
  L.Add("pred", 1);  // the prediction at the x-token of example k+1
  // Bounds on |a| + |b| of each product for prompts of x ~ N(0, I), w ~ N(0, I): generous, so
  // that products stay in the GELU's quadratic range (see kMulReach). |x_j| <= 6 covers every
  // draw of N(0, 1) in 1e8 (P(|z| > 6) = 2e-9).
  const double xy_range = 10.0 + 6.0 * std::sqrt(double(d));
  const double mean_range = 2.0 * n_max + xy_range;
  const double pred1_range = 10.0 + xy_range * n_max;
  // Entries of X^T X are at most sum_i x_ij^2, a chi-square with <= n degrees of freedom, below
  // 5 n but for a 1e-8 fraction (and a product 3x past its range is still within 1.2e-3). GD
  // iterates stay within |1 - (1 - 2 alpha l)^t| / l of w_OLS's component per eigenvalue l,
  // which for 2 alpha l < 2 is at most twice its size, and never more than 2 alpha t |X^T y|
  // (below: |X^T y| <= n xy_range).
  const double xx_range = 12.0, mean_xx_range = 2.0 * n_max + 36.0;
  const double w_range = 10.0 + std::min(2.0 * alpha * steps * n_max * xy_range, 50.0);
  const double matvec_range = 5.0 * n_max + w_range;
  const double pred_range = 10.0 + w_range;
  c.ops.push_back(Mov("x", "xprev", -1));
  c.ops.push_back(Mul("xprev", "y", "yx", 1, xy_range));
  // x x^T from the x-token itself: the mov above falls back to the position itself at t = 0,
  // so xprev there is x_1, which must not enter X^T X.
  if (multi) c.ops.push_back(Parallel(Mul("x", "x", "xx", 1, xx_range, Op::kOuter)));
  c.ops.push_back(Mean("yx", "mean_yx"));
  if (multi) c.ops.push_back(Parallel(Mean("xx", "mean_xx")));
  c.ops.push_back(Mul("mean_yx", "count", "xty", 1, mean_range));
  if (!multi) {
    // One step: the prediction 2 alpha x^T X^T y straight from xty (w_1 = 2 alpha X^T y).
    c.ops.push_back(Mul("x", "xty", "pred", 2.0 * alpha, pred1_range));
  } else {
    c.ops.push_back(Parallel(Mul("mean_xx", "count", "xtx", 1, mean_xx_range)));
    // w_1 = w_0 - 2 alpha (X^T X w_0 - X^T y) = 2 alpha X^T y, from the same mean and count.
    c.ops.push_back(Parallel(Mul("mean_yx", "count", "w", 2.0 * alpha, mean_range)));
    for (int t = 2; t <= steps; ++t) {
      // w_t = w_{t-1} + 2 alpha X^T y - 2 alpha X^T X w_{t-1}: aff and matvec mul in one MLP,
      // both reading w_{t-1} and adding into the rows w.
      c.ops.push_back(Aff("xty", "w", 2.0 * alpha));
      c.ops.push_back(Parallel(Mul("xtx", "w", "w", -2.0 * alpha, matvec_range, Op::kMatVec)));
    }
    // At the x-token of example k+1, xx holds the query's own x x^T: the prediction takes w_K
    // from the y-token before it.
    c.ops.push_back(Mov("w", "wprev", -1));
    c.ops.push_back(Mul("x", "wprev", "pred", 1, pred_range));
  }
  Assemble(c, d, n_max);
  const int blocks = c.model.layers;
  c.quantities = {
      {"x", 0, "x", "x-tokens", "x_i at the x-token of example i"},
      {"yx", 1, "yx", "y-tokens", "y_k x_k at the y-token of example k"},
      {"xty", 2, "xty", "y-tokens",
       "X_k^T y_k, the moment vector after k examples, at the y-token of example k (and at the "
       "next x-token)"},
  };
  if (multi) {
    c.quantities.push_back({"xtx", 2, "xtx", "y-tokens",
                            "X_k^T X_k (row-major) at the y-token of example k (at the next "
                            "x-token it includes that token's own x x^T)"});
    for (int t = 1; t <= steps; ++t)
      c.quantities.push_back({"w_" + std::to_string(t), t + 1, "w", "y-tokens",
                              "the GD iterate w_" + std::to_string(t) +
                                  " on the first k examples, at the y-token of example k"});
    c.quantities.push_back(
        {"wprev", blocks, "wprev", "x-tokens",
         "w_" + std::to_string(steps) + " of the first k examples, at the x-token of example k+1"});
  }
  c.quantities.push_back({"pred", blocks, "pred", "x-tokens",
                          multi ? "x_{k+1}^T w_" + std::to_string(steps) +
                                      ", the prediction at the x-token of example k+1"
                                : "2 alpha x_{k+1}^T X_k^T y_k, one GD step's prediction, at "
                                  "the x-token of example k+1"});
  return c;
}

learners::Transformer Compile(const Construction& c) {
  torch::manual_seed(0);
  learners::Transformer m(c.model);
  torch::NoGradGuard no_grad;
  for (auto& p : m->parameters())
    p.zero_();
  const int d = c.model.d, n_max = c.model.n_max, H = c.model.hidden;
  const Layout& L = c.layout;
  // Embedding: token [y or 0, x or 0] -> rows x, y; positions -> one-hot and count.
  for (int j = 0; j < d; ++j)
    m->input_proj->weight[L["x"].begin + j][1 + j] = 1.0;
  m->input_proj->weight[L["y"].begin][0] = 1.0;
  for (int t = 0; t < 2 * n_max; ++t) {
    m->pos_embed[t][L["pos"].begin + t] = 1.0;
    m->pos_embed[t][L["count"].begin] = double(t + 1);
  }
  Construction scheduled = c;
  std::vector<int> first_unit;
  int max_units = 0;
  Schedule(scheduled, first_unit, max_units);
  if (max_units > c.model.hidden * c.model.mlp_ratio)
    throw std::logic_error("construct: the program needs more MLP units than the model has");
  for (std::size_t i = 0; i < c.ops.size(); ++i) {
    auto& block = *(*m->blocks)[scheduled.op_sublayer[i].first - 1]->as<learners::Block>();
    switch (c.ops[i].kind) {
      case Op::kMul:
        SetMul(block, L, c.ops[i], first_unit[i]);
        break;
      case Op::kAff:
        SetAff(block, L, c.ops[i], first_unit[i]);
        break;
      default:
        SetMov(block, L, c.ops[i], n_max, H);
    }
  }
  for (const auto& [name, rows] : L.entries())
    if (name == "pred") m->readout->weight[0][rows.begin] = 1.0;
  return m;
}

void WriteConstruction(const std::string& path, const Construction& c,
                       const learners::SaveOptions& options) {
  learners::Transformer m = Compile(c);
  learners::TrainConfig train;
  train.task.d = c.model.d;
  train.task.n = c.model.n_max;
  train.steps = 0;
  train.seed = 0;
  learners::SaveOptions o = options;
  o.extra = [&c](h5::File& f) {
    h5::Group g = f.CreateGroup("construction");
    g.SetAttr("program", c.program);
    g.SetAttr("alpha", c.alpha);
    g.SetAttr("steps", c.steps);
    g.SetAttr("description",
              std::string("weights written by iclprobe construct: layout/<name> = [first row, "
                          "rows]; quantities/<name> attrs layer (hidden state index), rows, "
                          "positions, meaning"));
    {
      h5::Group layout = g.CreateGroup("layout");
      for (const auto& [name, r] : c.layout.entries())
        layout.SetAttr(name, std::vector<std::int64_t>{r.begin, r.size});
    }
    {
      h5::Group q = g.CreateGroup("quantities");
      for (const auto& x : c.quantities) {
        h5::Group e = q.CreateGroup(x.name);
        e.SetAttr("layer", x.layer);
        const Rows r = c.layout[x.rows];
        e.SetAttr("rows", std::vector<std::int64_t>{r.begin, r.size});
        e.SetAttr("positions", x.positions);
        e.SetAttr("meaning", x.meaning);
      }
    }
    {
      std::vector<std::string> ops;
      for (std::size_t i = 0; i < c.ops.size(); ++i) {
        const Op& op = c.ops[i];
        const char* kind = KindName(op.kind);
        ops.push_back(std::string(kind) + "(" + op.a + (op.b.empty() ? "" : ", " + op.b) + ") -> " +
                      op.out + " @ block " + std::to_string(c.op_sublayer[i].first) + " " +
                      c.op_sublayer[i].second);
      }
      g.SetAttr("ops", ops);
    }
  };
  learners::SaveCheckpoint(path, m, train, 0, nullptr, o);
}

std::optional<ConstructionRecord> ReadConstruction(const std::string& checkpoint) {
  const h5::File f = h5::File::Open(checkpoint);
  if (!f.Exists("construction")) return std::nullopt;
  const std::string where = "'" + checkpoint + "': /construction";
  const h5::Group g = f.OpenGroup("construction");
  ConstructionRecord r;
  r.program = g.GetString("program");
  r.alpha = g.GetDouble("alpha");
  r.steps = static_cast<int>(g.GetInt("steps"));
  const learners::CheckpointInfo info = learners::ReadCheckpointInfo(checkpoint);
  const std::int64_t width = info.model.hidden;
  auto rows = [&](const std::vector<std::int64_t>& v, const std::string& what) {
    if (v.size() != 2 || v[0] < 0 || v[1] < 1 || v[0] + v[1] > width)
      throw core::InputError(where, "",
                             what + " should be [first row, rows] inside the " +
                                 std::to_string(width) + " rows of the residual stream");
    return Rows{static_cast<int>(v[0]), static_cast<int>(v[1])};
  };
  const h5::Group layout = g.OpenGroup("layout");
  for (const auto& name : layout.AttrNames())
    r.layout[name] = rows(layout.GetIntList(name), "layout/" + name);
  const h5::Group q = g.OpenGroup("quantities");
  for (const auto& name : q.Members()) {
    const h5::Group e = q.OpenGroup(name);
    ConstructionRecord::Entry x;
    x.name = name;
    x.layer = static_cast<int>(e.GetInt("layer"));
    if (x.layer < 0 || x.layer > info.model.layers)
      throw core::InputError(where, "",
                             "quantity " + name + " lies in state " + std::to_string(x.layer) +
                                 " of a model with states 0.." + std::to_string(info.model.layers));
    x.rows = rows(e.GetIntList("rows"), "quantities/" + name + " rows");
    x.positions = e.GetString("positions");
    x.meaning = e.GetString("meaning");
    r.quantities.push_back(std::move(x));
  }
  r.ops = g.GetStringList("ops");
  return r;
}

}  // namespace icl::construct
