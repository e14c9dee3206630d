// Results moving between ranks under mpirun: a byte serialiser of records, pooling weights and
// codelengths, and the gathering of the linear / MLP results on every rank.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dist.hpp"
#include "probes/runner_internal.hpp"

namespace icl::probes::detail {

namespace {

// A byte stream for results moving between ranks (same program, same machine type).
class Bytes {
 public:
  std::vector<std::uint8_t> data;
  void Put(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    data.insert(data.end(), b, b + n);
  }
  template <typename T>
  void Put(const T& v) {
    Put(&v, sizeof(T));
  }
  void Put(const std::string& s) {
    Put(std::uint64_t(s.size()));
    Put(s.data(), s.size());
  }
  void Put(const arma::vec& v) {
    Put(std::uint64_t(v.n_elem));
    Put(v.memptr(), v.n_elem * sizeof(double));
  }

  std::size_t at = 0;
  void Take(void* p, std::size_t n) {
    if (at + n > data.size()) throw std::logic_error("probe: truncated results from a rank");
    std::memcpy(p, data.data() + at, n);
    at += n;
  }
  template <typename T>
  void Take(T& v) {
    Take(&v, sizeof(T));
  }
  void Take(std::string& s) {
    std::uint64_t n = 0;
    Take(n);
    s.resize(n);
    Take(s.data(), n);
  }
  void Take(arma::vec& v) {
    std::uint64_t n = 0;
    Take(n);
    v.set_size(n);
    Take(v.memptr(), n * sizeof(double));
  }
};

// The fields that travel between ranks, listed once for writing and for reading.
template <class Io, class Record>
void RecordFields(Io&& io, Record& rec) {
  io(rec.target, rec.probe, rec.source, rec.layer, rec.k, rec.seed, rec.mse, rec.nmse, rec.r2,
     rec.lambda, rec.epochs, rec.sse, rec.sst, rec.code_bits, rec.uniform_bits);
}
template <class Io, class Code>
void CodeFields(Io&& io, Code& c) {
  io(c.target, c.probe, c.source, c.layer, c.k, c.seed, c.code.block_bits,
     c.code.uniform_block_bits, c.code.block_lambda, c.code.bits, c.code.uniform_bits);
}
template <class Io, class Alpha>
void AlphaFields(Io&& io, Alpha& a) {
  io(a.target, a.probe, a.source, a.layer, a.k, a.seed, a.alpha);
}

}  // namespace

// Under mpirun: the linear / MLP results of every rank on every rank (the ridge results are
// already the same everywhere).
void GatherGradientResults(ProbeOutput& out) {
  if (dist::Size() == 1) return;
  Bytes mine;
  auto put = [&mine](const auto&... v) { (mine.Put(v), ...); };
  std::vector<ProbeRecord> kept;
  for (const auto& rec : out.records) {
    if (rec.probe == FamilyName(Family::kRidge)) {
      kept.push_back(rec);
      continue;
    }
    mine.Put(std::uint8_t{0});
    RecordFields(put, rec);
  }
  for (const auto& a : out.alphas) {
    mine.Put(std::uint8_t{1});
    AlphaFields(put, a);
  }
  std::vector<ProbeOutput::Code> kept_codes;
  for (const auto& c : out.codes) {
    if (c.probe == FamilyName(Family::kRidge)) {
      kept_codes.push_back(c);
      continue;
    }
    mine.Put(std::uint8_t{2});
    CodeFields(put, c);
  }
  Bytes all;
  all.data = dist::Gather(mine.data);
  auto take = [&all](auto&... v) { (all.Take(v), ...); };
  out.records = std::move(kept);
  out.alphas.clear();
  out.codes = std::move(kept_codes);
  while (all.at < all.data.size()) {
    std::uint8_t kind = 0;
    all.Take(kind);
    if (kind == 0) {
      ProbeRecord rec;
      RecordFields(take, rec);
      out.records.push_back(std::move(rec));
    } else if (kind == 1) {
      ProbeOutput::Alpha a;
      AlphaFields(take, a);
      out.alphas.push_back(std::move(a));
    } else {
      ProbeOutput::Code c;
      CodeFields(take, c);
      out.codes.push_back(std::move(c));
    }
  }
}

}  // namespace icl::probes::detail
