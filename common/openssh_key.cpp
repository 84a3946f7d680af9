// See openssh_key.h. The blob is built in one std::string, each field appended in the order
// PROTOCOL.key gives; every buffer that held private bytes is wiped before it is freed.
#include "common/openssh_key.h"

#include <sodium.h>

#include <fmt/format.h>

namespace tmpi {

namespace {

constexpr std::string_view kKeyType = "ssh-ed25519";
constexpr std::size_t kArmourLine = 70;  // sshkey.c: sshbuf_dtob64 wraps at 70 columns

void put_u32(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((value >> shift) & 0xff);
}

void put_string(std::string& out, std::string_view bytes) {
  put_u32(out, static_cast<std::uint32_t>(bytes.size()));
  out += bytes;
}

template <std::size_t N>
std::string_view as_bytes(const std::array<unsigned char, N>& data) {
  return {reinterpret_cast<const char*>(data.data()), N};
}

// A buffer of private bytes, wiped when it goes out of scope.
struct WipedString {
  std::string text;
  WipedString() = default;
  WipedString(const WipedString&) = delete;
  WipedString& operator=(const WipedString&) = delete;
  ~WipedString() { sodium_memzero(text.data(), text.size()); }
};

void put_private_section(std::string& out, const Ed25519Material& key, std::string_view comment) {
  WipedString section;
  section.text.reserve(256);  // no reallocation leaves a copy of the key behind unwiped
  put_u32(section.text, key.check);
  put_u32(section.text, key.check);
  put_string(section.text, kKeyType);
  put_string(section.text, as_bytes(key.public_key));
  put_string(section.text, as_bytes(key.private_key));
  put_string(section.text, comment);
  // sshkey_private_to_blob2: "padding" bytes 1, 2, 3, ... up to the cipher's block size.
  for (unsigned char pad = 1; section.text.size() % kOpenSshBlockSize != 0; ++pad)
    section.text += static_cast<char>(pad);
  put_string(out, section.text);
}

std::string armoured(std::string_view blob) {
  WipedString base64;
  base64.text.resize(sodium_base64_ENCODED_LEN(blob.size(), sodium_base64_VARIANT_ORIGINAL));
  sodium_bin2base64(base64.text.data(), base64.text.size(),
                    reinterpret_cast<const unsigned char*>(blob.data()), blob.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  base64.text.pop_back();  // the terminating NUL
  std::string out = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
  for (std::size_t at = 0; at < base64.text.size(); at += kArmourLine) {
    out.append(base64.text, at, kArmourLine);
    out += '\n';
  }
  out += "-----END OPENSSH PRIVATE KEY-----\n";
  return out;
}

}  // namespace

std::string openssh_ed25519_public_blob(const std::array<unsigned char, 32>& public_key) {
  std::string out;
  put_string(out, kKeyType);
  put_string(out, as_bytes(public_key));
  return out;
}

std::string openssh_ed25519_public_line(const std::array<unsigned char, 32>& public_key,
                                        std::string_view comment) {
  std::string blob = openssh_ed25519_public_blob(public_key);
  std::string base64(sodium_base64_ENCODED_LEN(blob.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(base64.data(), base64.size(), reinterpret_cast<const unsigned char*>(blob.data()),
                    blob.size(), sodium_base64_VARIANT_ORIGINAL);
  base64.pop_back();  // the terminating NUL
  return fmt::format("{} {} {}", kKeyType, base64, comment);
}

std::string openssh_ed25519_private_key(const Ed25519Material& key, std::string_view comment) {
  WipedString blob;
  blob.text.reserve(512);
  blob.text.append("openssh-key-v1", sizeof "openssh-key-v1");  // with its NUL
  put_string(blob.text, "none");                                // ciphername
  put_string(blob.text, "none");                                // kdfname
  put_string(blob.text, "");                                    // kdfoptions
  put_u32(blob.text, 1);                                        // number of keys
  put_string(blob.text, openssh_ed25519_public_blob(key.public_key));
  put_private_section(blob.text, key, comment);
  return armoured(blob.text);
}

Expected<std::string> new_openssh_ed25519_private_key(std::string_view comment) {
  if (sodium_init() < 0) {
    return make_error(Exit::kSoftware,
                      "libsodium could not initialise (no source of randomness): no key made");
  }
  Ed25519Material key;
  crypto_sign_keypair(key.public_key.data(), key.private_key.data());
  randombytes_buf(&key.check, sizeof key.check);
  std::string text = openssh_ed25519_private_key(key, comment);
  sodium_memzero(key.private_key.data(), key.private_key.size());
  return text;
}

}  // namespace tmpi
