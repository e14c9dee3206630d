// Out-of-distribution prompts (Garg et al.'s evaluation battery, docs/paper.md
// "Garg et al.'s learners"): a shift of the context examples and, separately, of the query whose
// label is predicted after k examples. The algorithms a learner might run separate most where
// prompts leave the training distribution.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace icl::data {

enum class ShiftKind {
  kSame,          // query only: the query is the next context example (the default)
  kNone,          // x ~ N(0, I), the training distribution
  kSkewed,        // x ~ N(0, S): eigenvalues of S proportional to 1/(i + 1), trace d, fixed basis
  kScale,         // x scaled by `scale`
  kHalfSubspace,  // x in a fixed `dims`-dimensional subspace (default d / 2, rounded down)
  kOrthant,       // every coordinate of x of sign `sign`
  kOrthogonal,    // query only: orthogonal to the span of the k context examples
  kYScale,        // context only: every label scaled by `scale` (as if w were)
};

struct Shift {
  ShiftKind kind = ShiftKind::kNone;
  double scale = 1;  // kScale, kYScale
  int dims = 0;      // kHalfSubspace; 0: d / 2
  int sign = 1;      // kOrthant: +1 or -1

  // The spec it parses from: none, same, skewed, scale:S, half-subspace[:M], orthant[:+|-],
  // orthogonal, y-scale:S.
  std::string Spec() const;
  bool IsIdentity() const { return kind == ShiftKind::kNone || kind == ShiftKind::kSame; }
  int Dims(int d) const { return dims > 0 ? dims : d / 2; }
  // Throws core::InputError (module "task", setting `field`) when the shift is not one of its
  // role (query: none | same | skewed | scale | half-subspace | orthant | orthogonal; context:
  // none | skewed | scale | half-subspace | orthant | y-scale) or out of range for d: a scale
  // must be positive and finite (at most 1e6), a half-subspace in 1..d - 1.
  void Validate(bool query, int d, const std::string& field) const;
};
bool operator==(const Shift& a, const Shift& b);

// Parses a spec (Shift::Spec); throws core::InputError (module "task", setting `field`) naming
// what was expected. Ranges that depend on d are Validate's.
Shift ParseShift(const std::string& spec, const std::string& field);

// Removes from v (length d) its components along the m orthonormal vectors stored one after
// another in `basis` (m * d values), one at a time (modified Gram-Schmidt); returns the
// squared norm of what is left.
double ProjectOut(int d, const double* basis, int m, double* v);

// The fixed orthonormal basis of the skewed and half-subspace shifts for dimension d: d x d
// column-major (column i = basis vector i), Gram-Schmidt of a Gaussian matrix drawn from its
// own stream, so it is the same on every machine and for every prompt.
std::vector<double> ShiftBasis(int d);

// x = the shift of z ~ N(0, I_d) (both length d; `basis` from ShiftBasis). Not for kSame,
// kOrthogonal or kYScale, which need the context (kYScale leaves x as z).
void ShiftX(const Shift& shift, int d, const std::vector<double>& basis, const double* z,
            double* x);

}  // namespace icl::data
