// SHA-256 of a file, hex encoded: how files made from a checkpoint or an activations file
// record exactly which one they came from.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

namespace icl::core {

// Throws std::runtime_error naming the file when it cannot be read.
std::string Sha256File(const std::string& path);

// Streaming SHA-256 (OpenSSL EVP).
class Sha256 {
 public:
  using Digest = std::array<unsigned char, 32>;
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void Update(const void* data, std::size_t bytes);
  Digest Final();  // the object can be reused after Reset()
  void Reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string Hex(const unsigned char* bytes, std::size_t n);

}  // namespace icl::core
