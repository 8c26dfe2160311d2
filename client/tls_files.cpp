#include <coalesce/client/tls_files.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <caf/actor_system_config.hpp>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

namespace coalesce {

namespace {

struct openssl_free {
  void operator()(SSL_CTX* x) const {
    SSL_CTX_free(x);
  }
  void operator()(EVP_PKEY* x) const {
    EVP_PKEY_free(x);
  }
  void operator()(X509_STORE_CTX* x) const {
    X509_STORE_CTX_free(x);
  }
  void operator()(BIO* x) const {
    BIO_free(x);
  }
};

template <class T>
using openssl_ptr = std::unique_ptr<T, openssl_free>;

/// What the passphrase callback saw: OpenSSL asks only for an encrypted key.
struct passphrase_request {
  const std::string* passphrase;
  bool asked = false;
};

/// Hands over the passphrase as CAF's callback does (cut to the buffer);
/// without one it answers none rather than let OpenSSL prompt on a terminal.
int answer_passphrase(char* buf, int size, int, void* user) {
  auto request = static_cast<passphrase_request*>(user);
  request->asked = true;
  if (request->passphrase->empty() || size <= 0)
    return 0;
  std::strncpy(buf, request->passphrase->c_str(), static_cast<size_t>(size));
  buf[size - 1] = '\0';
  return static_cast<int>(std::strlen(buf));
}

/// Names settings and their values in sentences: `openssl.key = /x/y`.
struct setting_names {
  const std::string& prefix;

  std::string name(const char* field) const {
    return prefix + field;
  }

  std::string named(const char* field, const std::string& value) const {
    return name(field) + " = " + value;
  }
};

std::string path_problem(const setting_names& names, const char* field,
                         const std::string& path, bool directory) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    return names.named(field, path)
           + (errno == ENOENT ? " does not exist"
                              : " cannot be read: " + std::string{std::strerror(errno)});
  if (directory ? !S_ISDIR(info.st_mode) : !S_ISREG(info.st_mode))
    return names.named(field, path)
           + (directory ? " is not a directory" : " is not a file");
  if (::access(path.c_str(), R_OK) != 0)
    return names.named(field, path) + " cannot be read";
  return {};
}

std::string paths_problem(const tls_files& files, const setting_names& names) {
  for (auto [field, path] : {std::pair{"certificate", &files.certificate},
                             std::pair{"key", &files.key},
                             std::pair{"cafile", &files.cafile}})
    if (!path->empty())
      if (auto problem = path_problem(names, field, *path, false);
          !problem.empty())
        return problem;
  if (!files.capath.empty())
    return path_problem(names, "capath", files.capath, true);
  return {};
}

/// Reads the key as OpenSSL would for CAF, telling a missing or wrong
/// passphrase apart from a file that holds no key.
std::string read_key(const tls_files& files, const setting_names& names,
                     openssl_ptr<EVP_PKEY>& key) {
  openssl_ptr<BIO> file{BIO_new_file(files.key.c_str(), "r")};
  if (!file)
    return names.named("key", files.key) + " cannot be read";
  passphrase_request request{&files.passphrase};
  key.reset(PEM_read_bio_PrivateKey(file.get(), nullptr, answer_passphrase,
                                    &request));
  if (key)
    return {};
  if (request.asked && files.passphrase.empty())
    return names.named("key", files.key) + " is encrypted and "
           + names.name("passphrase") + " is not set";
  if (request.asked)
    return names.name("passphrase") + " does not decrypt "
           + names.named("key", files.key);
  return names.named("key", files.key) + " holds no PEM private key";
}

/// The certificate against the trusted CAs, as the peer will check it.
std::string verify_certificate(SSL_CTX* ctx, const tls_files& files,
                               const setting_names& names) {
  openssl_ptr<X509_STORE_CTX> verification{X509_STORE_CTX_new()};
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx, &chain);
  if (!verification
      || X509_STORE_CTX_init(verification.get(), SSL_CTX_get_cert_store(ctx),
                             SSL_CTX_get0_certificate(ctx), chain)
           != 1)
    return "cannot set up the check of " + names.name("certificate");
  if (X509_verify_cert(verification.get()) == 1)
    return {};
  auto trusted = files.cafile.empty() ? names.named("capath", files.capath)
                                      : names.named("cafile", files.cafile);
  return names.named("certificate", files.certificate)
         + " does not verify against " + trusted + ": "
         + X509_verify_cert_error_string(
           X509_STORE_CTX_get_error(verification.get()));
}

/// Loads every file into a context with the calls CAF makes for each
/// connection (libcaf_openssl's session::create_ssl_context).
std::string load_files(const tls_files& files, const setting_names& names) {
  openssl_ptr<SSL_CTX> ctx{SSL_CTX_new(TLS_method())};
  if (!ctx)
    return "cannot create an OpenSSL context";
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), files.certificate.c_str())
      != 1)
    return names.named("certificate", files.certificate)
           + " holds no PEM certificate";
  openssl_ptr<EVP_PKEY> key;
  if (auto problem = read_key(files, names, key); !problem.empty())
    return problem;
  if (X509_check_private_key(SSL_CTX_get0_certificate(ctx.get()), key.get())
      != 1)
    return names.name("key") + " does not belong to "
           + names.name("certificate");
  if (SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1)
    return names.named("key", files.key) + " cannot be used with "
           + names.name("certificate");
  auto cafile = files.cafile.empty() ? nullptr : files.cafile.c_str();
  auto capath = files.capath.empty() ? nullptr : files.capath.c_str();
  if (SSL_CTX_load_verify_locations(ctx.get(), cafile, capath) != 1)
    return cafile != nullptr
             ? names.named("cafile", files.cafile) + " holds no PEM certificate"
             : names.named("capath", files.capath)
                 + " cannot be used as a CA directory";
  return verify_certificate(ctx.get(), files, names);
}

} // namespace

bool tls_files::any_set() const {
  return !certificate.empty() || !key.empty() || !passphrase.empty()
         || !cafile.empty() || !capath.empty();
}

tls_files tls_files_of(const caf::actor_system_config& cfg) {
  return {cfg.openssl_certificate, cfg.openssl_key, cfg.openssl_passphrase,
          cfg.openssl_cafile, cfg.openssl_capath};
}

void set_tls_files(caf::actor_system_config& cfg, const tls_files& files) {
  cfg.openssl_certificate = files.certificate;
  cfg.openssl_key = files.key;
  cfg.openssl_passphrase = files.passphrase;
  cfg.openssl_cafile = files.cafile;
  cfg.openssl_capath = files.capath;
}

std::string check_tls_files(const tls_files& files, const std::string& prefix) {
  setting_names names{prefix};
  if (!files.any_set())
    return {};
  if (files.certificate.empty() != files.key.empty())
    return names.name("certificate") + " and " + names.name("key")
           + " must be set together";
  if (files.certificate.empty())
    return names.name("certificate") + " and " + names.name("key")
           + " must be set: any openssl setting turns on mutual TLS";
  if (files.cafile.empty() && files.capath.empty())
    return names.name("cafile") + " is required for mutual TLS";
  if (auto problem = paths_problem(files, names); !problem.empty())
    return problem;
  auto problem = load_files(files, names);
  // What failed stays on this thread's OpenSSL error queue otherwise.
  ERR_clear_error();
  return problem;
}

} // namespace coalesce
