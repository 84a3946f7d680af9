// See login_proof.h. The job key's public half becomes an EVP_PKEY from its wire blob
// (OpenSSL 3's EVP_PKEY_fromdata; RFC 8709 Ed25519, RFC 5656 ECDSA, RFC 4253 RSA), and the
// signature is verified with the digest libssh uses for each algorithm
// (pki_crypto.c, pki_digest_to_md; Ed25519 has none).
#include "nodessh/login_proof.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

namespace tmpi::nodessh {

namespace {

constexpr unsigned char kUserauthRequest = 50;  // SSH_MSG_USERAUTH_REQUEST, RFC 4252

struct WireReader {
  std::string_view in;
  bool ok = true;
  std::string str() {
    if (in.size() < 4) return ok = false, "";
    std::uint32_t size = 0;
    for (int i = 0; i < 4; ++i)
      size = size << 8 | static_cast<unsigned char>(in[static_cast<std::size_t>(i)]);
    in.remove_prefix(4);
    if (size > in.size()) return ok = false, "";
    std::string value(in.substr(0, size));
    in.remove_prefix(size);
    return value;
  }
  unsigned char byte() {
    if (in.empty()) return ok = false, 0;
    auto value = static_cast<unsigned char>(in[0]);
    in.remove_prefix(1);
    return value;
  }
};

using ParamBuild = std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)>;
using Params = std::unique_ptr<OSSL_PARAM, decltype(&OSSL_PARAM_free)>;
using Context = std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)>;
using Number = std::unique_ptr<BIGNUM, decltype(&BN_free)>;

EVP_PKEY* from_params(const char* type, OSSL_PARAM_BLD* build) {
  Params params(OSSL_PARAM_BLD_to_param(build), OSSL_PARAM_free);
  Context context(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr), EVP_PKEY_CTX_free);
  EVP_PKEY* key = nullptr;
  if (!params || !context || EVP_PKEY_fromdata_init(context.get()) != 1 ||
      EVP_PKEY_fromdata(context.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1)
    return nullptr;
  return key;
}

EVP_PKEY* public_key_of(const std::string& type, WireReader& r) {
  if (type == "ssh-ed25519") {
    std::string raw = r.str();
    if (!r.ok || raw.size() != 32) return nullptr;
    return EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                       reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
  }
  ParamBuild build(OSSL_PARAM_BLD_new(), OSSL_PARAM_BLD_free);
  if (!build) return nullptr;
  if (type.rfind("ecdsa-sha2-nistp", 0) == 0) {
    std::string curve = r.str();
    std::string point = r.str();
    const char* group = curve == "nistp256"   ? "P-256"
                        : curve == "nistp384" ? "P-384"
                        : curve == "nistp521" ? "P-521"
                                              : nullptr;
    if (!r.ok || group == nullptr || type != "ecdsa-sha2-" + curve) return nullptr;
    OSSL_PARAM_BLD_push_utf8_string(build.get(), OSSL_PKEY_PARAM_GROUP_NAME, group, 0);
    OSSL_PARAM_BLD_push_octet_string(build.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size());
    return from_params("EC", build.get());
  }
  if (type == "ssh-rsa") {
    std::string e = r.str();
    std::string n = r.str();
    if (!r.ok) return nullptr;
    Number exponent(
        BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()), static_cast<int>(e.size()), nullptr),
        BN_free);
    Number modulus(
        BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()), static_cast<int>(n.size()), nullptr),
        BN_free);
    if (!exponent || !modulus) return nullptr;
    OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_N, modulus.get());
    OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_E, exponent.get());
    return from_params("RSA", build.get());
  }
  return nullptr;
}

// The digest of `algorithm` for a key of `key_type`; false where the pair is not one libssh
// accepts (an RSA key signs with rsa-sha2-256 or -512, any other with its own name).
bool digest_of(const std::string& key_type, const std::string& algorithm, const EVP_MD*& md) {
  if (key_type == "ssh-rsa") {
    md = algorithm == "rsa-sha2-256" ? EVP_sha256() : algorithm == "rsa-sha2-512" ? EVP_sha512() : nullptr;
    return md != nullptr;
  }
  if (algorithm != key_type) return false;
  md = key_type == "ecdsa-sha2-nistp256"   ? EVP_sha256()
       : key_type == "ecdsa-sha2-nistp384" ? EVP_sha384()
       : key_type == "ecdsa-sha2-nistp521" ? EVP_sha512()
                                           : nullptr;
  return key_type == "ssh-ed25519" || md != nullptr;
}

}  // namespace

Expected<SignedLogin> parse_signed_login(std::string_view blob) {
  WireReader r{blob};
  SignedLogin login;
  login.session_id = r.str();
  const unsigned char message = r.byte();
  login.user = r.str();
  const std::string service = r.str();
  const std::string method = r.str();
  const unsigned char has_signature = r.byte();
  login.algorithm = r.str();
  login.key_blob = r.str();
  if (!r.ok || !r.in.empty())
    return make_error(Exit::kData, "the signed login is not a userauth request's shape");
  if (message != kUserauthRequest)
    return make_error(Exit::kData, "the signed bytes are not a userauth request");
  if (login.session_id.empty() || login.session_id.size() > 64)
    return make_error(Exit::kData, "a session id of {} bytes", login.session_id.size());
  if (service != "ssh-connection")
    return make_error(Exit::kData, "a login for another service than ssh-connection");
  if (method != "publickey" || has_signature != 1)
    return make_error(Exit::kData, "not a signed publickey login");
  return login;
}

void LoginVerifier::KeyFree::operator()(EVP_PKEY* key) const {
  EVP_PKEY_free(key);
}

Expected<LoginVerifier> LoginVerifier::for_job_key(std::string key_blob) {
  WireReader r{key_blob};
  LoginVerifier verifier;
  verifier.key_type_ = r.str();
  verifier.key_ = std::shared_ptr<EVP_PKEY>(public_key_of(verifier.key_type_, r), KeyFree{});
  if (!verifier.key_ || !r.in.empty())
    return make_error(Exit::kData, "a job key of type {} the monitor cannot verify",
                      verifier.key_type_.substr(0, 40));
  verifier.key_blob_ = std::move(key_blob);
  return verifier;
}

Expected<std::string> LoginVerifier::check(std::string_view blob, std::string_view signature) {
  TMPI_ASSIGN(SignedLogin login, parse_signed_login(blob));
  if (login.key_blob != key_blob_)
    return make_error(Exit::kData, "the signed login names another key than the job key");
  const EVP_MD* md = nullptr;
  if (!digest_of(key_type_, login.algorithm, md))
    return make_error(Exit::kData, "the algorithm {} does not go with the job key",
                      login.algorithm.substr(0, 40));
  if (seen_session_ids_.contains(login.session_id))
    return make_error(Exit::kData, "a session id already logged in");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!context || EVP_DigestVerifyInit(context.get(), nullptr, md, nullptr, key_.get()) != 1 ||
      EVP_DigestVerify(context.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(blob.data()),
                       blob.size()) != 1)
    return make_error(Exit::kData, "the signature is not the job key's");
  seen_session_ids_.insert(login.session_id);
  return login.user;
}

}  // namespace tmpi::nodessh
