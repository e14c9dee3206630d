// SHA-256 through OpenSSL's EVP interface, streaming the file in 1 MiB blocks.
#include "core/sha256.hpp"

#include "core/open_once.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

namespace icl::core {

namespace {

// The bytes of a file held open by this run (h5::OpenOnce), read with pread from offset 0 so
// that the reader's own position is untouched.
void HashDescriptor(int fd, const std::string& path, EVP_MD_CTX* ctx) {
  std::vector<unsigned char> buf(1 << 20);
  off_t at = 0;
  for (;;) {
    const ssize_t got = ::pread(fd, buf.data(), buf.size(), at);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw std::runtime_error("error reading '" + path + "' to hash it");
    if (got == 0) break;
    EVP_DigestUpdate(ctx, buf.data(), static_cast<std::size_t>(got));
    at += got;
  }
}

void HashStream(const std::string& path, EVP_MD_CTX* ctx) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error("cannot read '" + path + "' to hash it");
  std::vector<unsigned char> buf(1 << 20);
  std::size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), f.get())) > 0)
    EVP_DigestUpdate(ctx, buf.data(), got);
  if (std::ferror(f.get())) throw std::runtime_error("error reading '" + path + "' to hash it");
}

}  // namespace

std::string Sha256File(const std::string& path) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("sha256: cannot initialise OpenSSL digest");
  const int fd = h5::OpenDescriptor(path);
  if (fd >= 0)
    HashDescriptor(fd, path, ctx.get());
  else
    HashStream(path, ctx.get());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  return Hex(digest, len);
}

std::string Hex(const unsigned char* bytes, std::size_t n) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += hex[bytes[i] >> 4];
    out += hex[bytes[i] & 15];
  }
  return out;
}

struct Sha256::Impl {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  Reset();
}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::Reset() {
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("sha256: cannot initialise OpenSSL digest");
}

void Sha256::Update(const void* data, std::size_t bytes) {
  if (bytes) EVP_DigestUpdate(impl_->ctx.get(), data, bytes);
}

Sha256::Digest Sha256::Final() {
  Digest d{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx.get(), d.data(), &len);
  return d;
}

}  // namespace icl::core
