// The RAW compiler: layout, scheduling of ops into blocks, and the weights of each primitive.
#include "construct/construct.hpp"

#include <cmath>
#include <stdexcept>

#include "data/hdf5.hpp"

namespace icl::construct {

namespace {

// GELU(tanh) is even-part quadratic near 0: g(z) + g(-z) = z tanh(k (z + 0.044715 z^3)) with
// k = sqrt(2/pi), = k z^2 (1 - 0.1675 z^2 + O(z^4)). So with a scale s, a^2 is read as
// (g(s a) + g(-s a)) / (k s^2), relative error 0.1675 (s a)^2, and a b = ((a+b)^2 - (a-b)^2) / 4.
constexpr double kGeluCurvature = 0.7978845608028654;  // sqrt(2 / pi)
// s |a + b| stays below this: relative truncation error <= 0.1675 * 0.02^2 = 6.7e-5.
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

void SetMul(BlockImpl& b, const Layout& L, const Op& op) {
  torch::NoGradGuard no_grad;
  const Rows a = L[op.a], bb = L[op.b], out = L[op.out];
  if (bb.size != a.size && bb.size != 1)
    throw std::invalid_argument("construct: mul needs rows of equal size or a scalar");
  if (out.size != a.size && out.size != 1)
    throw std::invalid_argument("construct: mul writes a.size rows or their sum in one row");
  const double s = kMulReach / op.range;
  const double back = op.coefficient / (4.0 * kGeluCurvature * s * s);
  auto w1 = b.fc1->weight, w2 = b.fc2->weight;  // [U, H], [H, U]
  for (int j = 0; j < a.size; ++j) {
    const int bj = bb.size == 1 ? bb.begin : bb.begin + j,
              o = out.size == 1 ? out.begin : out.begin + j;
    // Units 4j..4j+3: g(s(a+b)) + g(-s(a+b)) - g(s(a-b)) - g(-s(a-b)) = k s^2 * 4ab.
    const double sign_a[4] = {1, -1, 1, -1}, sign_b[4] = {1, -1, -1, 1},
                 sign_out[4] = {1, 1, -1, -1};
    for (int u = 0; u < 4; ++u) {
      const int unit = 4 * j + u;
      w1[unit][a.begin + j] = sign_a[u] * s;
      w1[unit][bj] = w1[unit][bj].item<double>() + sign_b[u] * s;  // b may be a's own row
      w2[o][unit] = sign_out[u] * back;
    }
  }
}

}  // namespace

Rows Layout::Add(const std::string& name, int size) {
  Rows r{width_, size};
  entries_.emplace_back(name, r);
  width_ += size;
  return r;
}

Rows Layout::operator[](const std::string& name) const {
  for (const auto& [n, r] : entries_)
    if (n == name) return r;
  throw std::invalid_argument("construct: no row range named '" + name + "'");
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
  return {"gd"};
}

Construction GdProgram(int d, int n_max, double alpha) {
  if (d < 1 || n_max < 1) throw std::invalid_argument("construct: d and n must be positive");
  if (!(alpha > 0) || !std::isfinite(alpha))
    throw std::invalid_argument("construct: alpha must be a positive number");
  Construction c;
  c.program = "gd";
  c.alpha = alpha;
  Layout& L = c.layout;
  L.Add("x", d);            // x_i at its x-token (embedding)
  L.Add("y", 1);            // y_i at its y-token (embedding)
  L.Add("pos", 2 * n_max);  // one-hot position (embedding)
  L.Add("count", 1);        // t + 1, the number of positions up to t (embedding)
  L.Add("xprev", d);        // x of the previous position: x_i at the y-token of example i
  L.Add("yx", d);           // y_i x_i at the y-token of example i, 0 at x-tokens
  L.Add("mean_yx", d);      // mean over positions <= t of yx
  L.Add("xty", d);          // X_k^T y_k: sum over the examples up to t
  L.Add("pred", 1);         // 2 alpha x^T X_k^T y_k at the x-token of example k+1
  // Bounds on |a| + |b| of each product for prompts of x ~ N(0, I), w ~ N(0, I): generous, so
  // that products stay in the GELU's quadratic range (see kMulReach).
  const double xy_range = 10.0 + 6.0 * std::sqrt(double(d));
  const double mean_range = 2.0 * n_max + xy_range;
  const double pred_range = 10.0 + xy_range * n_max;
  c.ops = {
      {Op::kMov, "x", "", "xprev", -1, 1, 1},
      {Op::kMul, "xprev", "y", "yx", 0, 1, xy_range},
      {Op::kMean, "yx", "", "mean_yx", 0, 1, 1},
      {Op::kMul, "mean_yx", "count", "xty", 0, 1, mean_range},
      {Op::kMul, "x", "xty", "pred", 0, 2.0 * alpha, pred_range},
  };
  // Schedule: one op per sublayer, in program order; attention comes before MLP in a block.
  int block = 1;
  bool attn_used = false, mlp_used = false;
  for (const auto& op : c.ops) {
    const bool attention = op.kind != Op::kMul;
    if (attention) {
      if (attn_used || mlp_used) ++block, mlp_used = false;
      attn_used = true;
    } else {
      if (mlp_used) ++block, attn_used = false;
      mlp_used = true;
    }
    c.op_sublayer.emplace_back(block, attention ? "attention" : "mlp");
  }
  c.model.d = d;
  c.model.n_max = n_max;
  c.model.layers = block;
  c.model.hidden = L.width();
  c.model.heads = 1;
  c.model.mlp_ratio = std::max(1, (4 * d + L.width() - 1) / L.width());
  c.model.norm = "none";
  c.quantities = {
      {"x", 0, "x", "x-tokens", "x_i at the x-token of example i"},
      {"yx", 1, "yx", "y-tokens", "y_k x_k at the y-token of example k"},
      {"xty", 2, "xty", "y-tokens",
       "X_k^T y_k, the moment vector after k examples, at the y-token of example k (and at the "
       "next x-token)"},
      {"pred", 3, "pred", "x-tokens",
       "2 alpha x_{k+1}^T X_k^T y_k, one GD step's prediction, at the x-token of example k+1"},
  };
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
  for (std::size_t i = 0; i < c.ops.size(); ++i) {
    auto& block = *(*m->blocks)[c.op_sublayer[i].first - 1]->as<learners::Block>();
    if (c.ops[i].kind == Op::kMul)
      SetMul(block, L, c.ops[i]);
    else
      SetMov(block, L, c.ops[i], n_max, H);
  }
  m->readout->weight[0][L["pred"].begin] = 1.0;
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
        const char* kind = op.kind == Op::kMov ? "mov" : op.kind == Op::kMean ? "mean" : "mul";
        ops.push_back(std::string(kind) + "(" + op.a + (op.b.empty() ? "" : ", " + op.b) + ") -> " +
                      op.out + " @ block " + std::to_string(c.op_sublayer[i].first) + " " +
                      c.op_sublayer[i].second);
      }
      g.SetAttr("ops", ops);
    }
  };
  learners::SaveCheckpoint(path, m, train, 0, nullptr, o);
}

}  // namespace icl::construct
