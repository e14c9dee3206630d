// The RAW compiler: layout, scheduling of ops into blocks, and the weights of each primitive.
#include "construct/construct.hpp"

#include <cmath>
#include <limits>
#include <sstream>
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

// m for rows that hold an m x m matrix.
int SideOf(int size) {
  const int m = static_cast<int>(std::lround(std::sqrt(double(size))));
  if (m * m != size) throw std::logic_error("construct: matmat needs square matrices");
  return m;
}

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
  // kMean: query and key zero, so every position up to t gets weight 1 / (t + 1). The values
  // are a's rows; the output map is the identity, or op.matrix (|out| x |a|) for a mean of M a.
  if (!op.matrix.empty() && op.matrix.size() != std::size_t(out.size) * a.size)
    throw std::logic_error("construct: a mean's matrix must be |out| x |a|");
  if (op.matrix.empty() && out.size != a.size)
    throw std::logic_error("construct: a mean without a matrix needs |a| = |out|");
  for (int j = 0; j < a.size; ++j)
    w[2 * H + a.begin + j][a.begin + j] = 1.0;
  for (int i = 0; i < out.size; ++i)
    for (int j = 0; j < a.size; ++j)
      b.attn->out_proj->weight[out.begin + i][a.begin + j] =
          op.matrix.empty() ? (i == j ? 1.0 : 0.0) : op.matrix[std::size_t(i) * a.size + j];
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
  if (op.kind == Op::kAff) return op.a.empty() ? 0 : 2 * L[op.out].size;
  if (op.form == Op::kOuter) return 4 * L[op.a].size * L[op.b].size;
  if (op.form == Op::kMatMat) return 4 * L[op.a].size * SideOf(L[op.a].size);
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
    case Op::kMatMat: {
      const int m = SideOf(a.size);
      if (bb.size != a.size || out.size != a.size)
        throw std::logic_error("construct: matmat needs |a| = |b| = |out| = m^2");
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < m; ++j)
          for (int l = 0; l < m; ++l)
            SetProduct(b, a.begin + i * m + l, bb.begin + l * m + j, out.begin + i * m + j,
                       unit + 4 * ((i * m + j) * m + l), s, op.coefficient);
      return;
    }
  }
}

// aff from MLP units [unit, unit + 2 |out|). GELU(tanh) is exactly linear in its odd part:
// g(z) - g(-z) = z/2 (1 + tanh u) + z/2 (1 - tanh u) = z for every z, so one unit pair per
// output row carries (matrix * a)_i without approximation; the bias goes into fc2's bias.
void SetAff(BlockImpl& b, const Layout& L, const Op& op, int unit) {
  torch::NoGradGuard no_grad;
  const Rows out = L[op.out];
  if (op.a.empty()) {  // a constant: the bias alone
    if (op.bias.size() != std::size_t(out.size))
      throw std::logic_error("construct: a constant needs |out| values");
    for (int i = 0; i < out.size; ++i)
      b.fc2->bias[out.begin + i] = b.fc2->bias[out.begin + i].item<double>() + op.bias[i];
    return;
  }
  const Rows a = L[op.a];
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

Op Constant(const std::string& out, std::vector<double> values) {
  Op op;
  op.kind = Op::kAff;
  op.out = out, op.bias = std::move(values);
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

void RequireFloat32Weights(const Construction& c, const std::string& field,
                           const std::string& value) {
  const double max = std::numeric_limits<float>::max();
  auto check = [&](double w, std::size_t i) {
    if (std::isfinite(w) && std::fabs(w) <= max) return;
    std::ostringstream os;
    os << "'" << value.substr(0, 80) << "' makes a weight of " << KindName(c.ops[i].kind)
       << " into " << c.ops[i].out << " " << w
       << ", beyond what float32 weights hold (|w| <= 3.4e38); choose a smaller value";
    throw core::InputError("construct", field, os.str());
  };
  for (std::size_t i = 0; i < c.ops.size(); ++i) {
    const Op& op = c.ops[i];
    check(op.coefficient, i);
    for (double m : op.matrix)
      check(m, i);
    for (double b : op.bias)
      check(b, i);
    if (op.kind == Op::kMul) {  // SetMul's GELU scale s and its way back c / (4 k s^2)
      const double s = kMulReach / op.range;
      check(s, i);
      check(op.coefficient / (4.0 * kGeluCurvature * s * s), i);
    }
  }
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
  if (c.rotation_seed) RotateResidualStream(m, *c.rotation_seed);
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
    namespace cl = construction_layout;
    h5::Group g = f.CreateGroup(cl::kGroup);
    g.SetAttr("program", c.program);
    g.SetAttr("alpha", c.alpha);
    g.SetAttr("steps", c.steps);
    g.SetAttr("start", c.start);
    g.SetAttr("lambda", c.lambda);
    g.SetAttr("description", std::string(cl::kDescription));
    g.SetAttr("distractors", c.disguise.distractors);
    g.SetAttr("context_distractors", c.disguise.context_distractors);
    g.SetAttr("decoy", c.disguise.decoy);
    g.SetAttr("nuisance", c.disguise.nuisance);
    g.SetAttr("decoy_noise", c.disguise.decoy_noise);
    g.SetAttr("disguise_seed", static_cast<std::int64_t>(c.disguise.seed));
    for (const auto& [name, map] :
         {std::pair{cl::kDecoyMap, &c.decoy_map}, std::pair{cl::kNuisanceMap, &c.nuisance_map},
          std::pair{cl::kNuisanceMapMean, &c.nuisance_map_mean},
          std::pair{cl::kDecoyNoiseMap, &c.decoy_noise_map}}) {
      if (map->empty()) continue;
      const hsize_t d = hsize_t(c.model.d);
      h5::Dataset ds = g.CreateDataset<double>(name, {d, d}, cl::kMapLabels);
      ds.Write(map->data(), map->size());
    }
    if (c.rotation_seed) {
      g.SetAttr("rotation_seed", static_cast<std::int64_t>(*c.rotation_seed));
      const arma::mat q = RandomOrthogonal(c.model.hidden, *c.rotation_seed);
      const arma::mat rows = q.t();  // row-major [H, H] of Q is Q^T column-major
      h5::Dataset ds = g.CreateDataset<double>(
          cl::kRotation, {hsize_t(q.n_rows), hsize_t(q.n_cols)}, cl::kRotationLabels);
      ds.Write(rows.memptr(), rows.n_elem);
    }
    {
      h5::Group layout = g.CreateGroup(cl::kLayout);
      for (const auto& [name, r] : c.layout.entries())
        layout.SetAttr(name, std::vector<std::int64_t>{r.begin, r.size});
    }
    {
      h5::Group q = g.CreateGroup(cl::kQuantities);
      for (const auto& x : c.quantities) {
        h5::Group e = q.CreateGroup(x.name);
        e.SetAttr("layer", x.layer);
        e.SetAttr("last_layer", x.last_layer < 0 ? c.model.layers : x.last_layer);
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
  namespace cl = construction_layout;
  if (!f.Exists(cl::kGroup)) return std::nullopt;
  const std::string where = "'" + checkpoint + "': /construction";
  const h5::Group g = f.OpenGroup(cl::kGroup);
  ConstructionRecord r;
  r.program = g.GetString("program");
  r.alpha = g.GetDouble("alpha");
  r.steps = static_cast<int>(g.GetInt("steps"));
  if (g.HasAttr("start")) r.start = g.GetDouble("start");
  if (g.HasAttr("distractors")) r.distractors = static_cast<int>(g.GetInt("distractors"));
  if (g.HasAttr("context_distractors"))
    r.context_distractors = static_cast<int>(g.GetInt("context_distractors"));
  if (g.HasAttr("decoy")) r.decoy = g.GetString("decoy");
  if (g.HasAttr("nuisance")) r.nuisance = g.GetDouble("nuisance");
  if (g.HasAttr("decoy_noise")) r.decoy_noise = g.GetDouble("decoy_noise");
  if (!r.decoy.empty()) {
    const h5::Dataset ds = g.OpenDataset(cl::kDecoyMap);
    const learners::CheckpointInfo shape = learners::ReadCheckpointInfo(checkpoint);
    ds.ExpectDims({hsize_t(shape.model.d), hsize_t(shape.model.d)});
    r.decoy_map = arma::mat(shape.model.d, shape.model.d);
    ds.Read(r.decoy_map.memptr(), r.decoy_map.n_elem);
    if (!r.decoy_map.is_finite())
      throw core::InputError(where, "", "decoy_map holds NaN or infinite values");
    arma::inplace_trans(r.decoy_map);  // row-major on disk
  }
  if (g.HasAttr("lambda")) r.lambda = g.GetDouble("lambda");
  const learners::CheckpointInfo info = learners::ReadCheckpointInfo(checkpoint);
  const std::int64_t width = info.model.hidden;
  if (g.HasAttr("rotation_seed")) {
    const std::int64_t seed = g.GetInt("rotation_seed");
    if (seed < 0)
      throw core::InputError(where, "",
                             "rotation_seed should be >= 0, got " + std::to_string(seed));
    r.rotation_seed = static_cast<std::uint64_t>(seed);
    const h5::Dataset ds = g.OpenDataset(cl::kRotation);
    ds.ExpectDims({hsize_t(width), hsize_t(width)});
    arma::mat rows(width, width);
    ds.Read(rows.memptr(), rows.n_elem);
    // Checked before the orthogonality test: arma's max() passes over NaN, so a NaN entry would
    // reach the SVDs of das and erase.
    if (!rows.is_finite())
      throw core::InputError(where, "", "rotation holds NaN or infinite values");
    r.rotation = rows.t();
    const double off = arma::abs(r.rotation.t() * r.rotation - arma::eye(width, width)).max();
    if (!(off < 1e-9))
      throw core::InputError(
          where, "", "rotation is not orthogonal (|Q^T Q - I| = " + std::to_string(off) + ")");
  }
  auto rows = [&](const std::vector<std::int64_t>& v, const std::string& what) {
    if (v.size() != 2 || v[0] < 0 || v[1] < 1 || v[0] + v[1] > width)
      throw core::InputError(where, "",
                             what + " should be [first row, rows] inside the " +
                                 std::to_string(width) + " rows of the residual stream");
    return Rows{static_cast<int>(v[0]), static_cast<int>(v[1])};
  };
  const h5::Group layout = g.OpenGroup(cl::kLayout);
  for (const auto& name : layout.AttrNames())
    r.layout[name] = rows(layout.GetIntList(name), "layout/" + name);
  const h5::Group q = g.OpenGroup(cl::kQuantities);
  for (const auto& name : q.Members()) {
    const h5::Group e = q.OpenGroup(name);
    ConstructionRecord::Entry x;
    x.name = name;
    x.layer = static_cast<int>(e.GetInt("layer"));
    if (x.layer < 0 || x.layer > info.model.layers)
      throw core::InputError(where, "",
                             "quantity " + name + " lies in state " + std::to_string(x.layer) +
                                 " of a model with states 0.." + std::to_string(info.model.layers));
    x.last_layer = e.HasAttr("last_layer") ? static_cast<int>(e.GetInt("last_layer")) : x.layer;
    if (x.last_layer < x.layer || x.last_layer > info.model.layers)
      throw core::InputError(
          where, "",
          "quantity " + name + " has last_layer " + std::to_string(x.last_layer) + ", expected " +
              std::to_string(x.layer) + ".." + std::to_string(info.model.layers));
    x.rows = rows(e.GetIntList("rows"), "quantities/" + name + " rows");
    x.positions = e.GetString("positions");
    x.meaning = e.GetString("meaning");
    r.quantities.push_back(std::move(x));
  }
  r.ops = g.GetStringList("ops");
  return r;
}

}  // namespace icl::construct
