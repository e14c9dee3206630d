// e^z in float32 from IEEE operations only, inlined into the fused GELU's and attention's
// loops (each compiled for several instruction sets with the same bits): internal to learners/.
#pragma once

#include <cstdint>
#include <cstring>

namespace icl::learners {

// e^z: z = n ln2 + r with n = round(z / ln2) and |r| <= ln2 / 2; e^r from the minimax polynomial
// of Cephes' expf, 2^n from the exponent bits. ln2 is split in two parts so that n ln2 is
// subtracted exactly. The rounding uses the 1.5 * 2^23 trick, which needs round-to-nearest
// (the default) and no reassociation (no -ffast-math).
inline __attribute__((always_inline)) float ExpKernel(float z) {
  // Clamped to [-87, 87], and a NaN read as 0, so that the conversion to an integer below is
  // always defined (n in [-126, 126]).
  z = z < -87.0f ? -87.0f : (z > 87.0f ? 87.0f : z);
  z = z == z ? z : 0.0f;
  constexpr float kLog2e = 1.44269504088896341f, kRound = 12582912.0f;
  const float n = (z * kLog2e + kRound) - kRound;
  const float r = (z - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * (r * r) + r + 1.0f;
  // n in [-126, 126]: 2^n is a normal float with exponent bits n + 127 (in 1..253).
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return er * scale;
}

}  // namespace icl::learners
