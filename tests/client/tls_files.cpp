#define CAF_SUITE client.tls_files
#include <caf/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <coalesce/client/tls_files.hpp>

#include "temp_dir.hpp"

using namespace coalesce;

namespace {

/// One set of certificates from scripts/make-certs for the whole suite:
/// RSA key generation takes a while, and no test changes the files.
const coalesce::test::temp_dir& certs() {
  static coalesce::test::temp_dir dir;
  static bool made = [] {
    auto command = std::string{COALESCE_SOURCE_DIR} + "/scripts/make-certs "
                   + dir.path() + " >/dev/null";
    return std::system(command.c_str()) == 0;
  }();
  CAF_REQUIRE(made);
  return dir;
}

std::string cert(const std::string& name) {
  return certs().sub(name);
}

/// The node's own files, all valid.
tls_files node_files() {
  return {cert("node.pem"), cert("node-key.pem"), "", cert("ca.pem"), ""};
}

std::string write_file(const std::string& name, const std::string& text) {
  auto path = certs().sub(name);
  std::ofstream{path} << text;
  return path;
}

} // namespace

CAF_TEST(nothing set passes and leaves TLS off) {
  tls_files none;
  CAF_CHECK(!none.any_set());
  CAF_CHECK_EQUAL(check_tls_files(none), "");
}

CAF_TEST(a CA signed certificate with its key passes) {
  CAF_CHECK(node_files().any_set());
  CAF_CHECK_EQUAL(check_tls_files(node_files()), "");
  tls_files client{cert("client.pem"), cert("client-key.pem"), "",
                   cert("ca.pem"), ""};
  CAF_CHECK_EQUAL(check_tls_files(client), "");
}

CAF_TEST(an encrypted key passes with its passphrase) {
  tls_files client{cert("client.pem"), cert("client-encrypted-key.pem"),
                   "coalesce", cert("ca.pem"), ""};
  CAF_CHECK_EQUAL(check_tls_files(client), "");
}

CAF_TEST(a certificate without a key is refused) {
  auto files = node_files();
  files.key.clear();
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.certificate and openssl.key must be set together");
  files = node_files();
  files.certificate.clear();
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.certificate and openssl.key must be set together");
}

CAF_TEST(a CA file alone is refused since it turns on mutual TLS) {
  tls_files files;
  files.cafile = cert("ca.pem");
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.certificate and openssl.key must be set: any "
                  "openssl setting turns on mutual TLS");
}

CAF_TEST(a certificate without a CA file is refused) {
  auto files = node_files();
  files.cafile.clear();
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.cafile is required for mutual TLS");
}

CAF_TEST(a missing file is refused naming its key) {
  auto missing = certs().sub("nope.pem");
  auto files = node_files();
  files.certificate = missing;
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.certificate = " + missing + " does not exist");
  files = node_files();
  files.key = missing;
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.key = " + missing + " does not exist");
  files = node_files();
  files.cafile = missing;
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.cafile = " + missing + " does not exist");
  files = node_files();
  files.cafile.clear();
  files.capath = missing;
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.capath = " + missing + " does not exist");
}

CAF_TEST(a directory in place of a file is refused) {
  auto files = node_files();
  files.cafile = certs().path();
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.cafile = " + certs().path() + " is not a file");
}

CAF_TEST(an unreadable file is refused) {
  if (geteuid() == 0) {
    CAF_MESSAGE("root reads every file: nothing to check");
    return;
  }
  auto path = write_file("unreadable.pem", "x");
  chmod(path.c_str(), 0);
  auto files = node_files();
  files.key = path;
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.key = " + path + " cannot be read");
}

CAF_TEST(a file that is not PEM is refused naming its key) {
  auto junk = write_file("junk.pem", "not a certificate\n");
  auto files = node_files();
  files.certificate = junk;
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.certificate = " + junk + " holds no PEM certificate");
  files = node_files();
  files.key = junk;
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.key = " + junk + " holds no PEM private key");
  files = node_files();
  files.cafile = junk;
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.cafile = " + junk + " holds no PEM certificate");
}

CAF_TEST(a key and a certificate swapped are refused) {
  auto files = node_files();
  files.certificate = cert("node-key.pem");
  files.key = cert("node.pem");
  CAF_CHECK_EQUAL(check_tls_files(files), "openssl.certificate = "
                                            + cert("node-key.pem")
                                            + " holds no PEM certificate");
  files = node_files();
  files.key = cert("node.pem");
  CAF_CHECK_EQUAL(check_tls_files(files), "openssl.key = " + cert("node.pem")
                                            + " holds no PEM private key");
}

CAF_TEST(an encrypted key without its passphrase is refused) {
  tls_files files{cert("client.pem"), cert("client-encrypted-key.pem"), "",
                  cert("ca.pem"), ""};
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.key = " + cert("client-encrypted-key.pem")
                    + " is encrypted and openssl.passphrase is not set");
  files.passphrase = "wrong";
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.passphrase does not decrypt openssl.key = "
                    + cert("client-encrypted-key.pem"));
}

CAF_TEST(a key of another certificate is refused) {
  auto files = node_files();
  files.key = cert("client-key.pem");
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.key does not belong to openssl.certificate");
}

CAF_TEST(a certificate another CA signed is refused) {
  tls_files files{cert("rogue.pem"), cert("rogue-key.pem"), "",
                  cert("ca.pem"), ""};
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.certificate = " + cert("rogue.pem")
                    + " does not verify against openssl.cafile = "
                    + cert("ca.pem")
                    + ": unable to get local issuer certificate");
  // Trusting both CAs, the rogue peer's files are fine on its side: the
  // other side's CA refuses it.
  auto both = write_file("both-cas.pem", [] {
    std::ifstream ca{cert("ca.pem")}, rogue{cert("rogue-ca.pem")};
    return std::string{std::istreambuf_iterator<char>{ca}, {}}
           + std::string{std::istreambuf_iterator<char>{rogue}, {}};
  }());
  files.cafile = both;
  CAF_CHECK_EQUAL(check_tls_files(files), "");
}

CAF_TEST(a CA directory is checked as a directory) {
  auto files = node_files();
  files.cafile.clear();
  files.capath = cert("ca.pem");
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.capath = " + cert("ca.pem") + " is not a directory");
  // A directory without the CA's hashed name does not vouch for the node.
  files.capath = certs().path();
  CAF_CHECK_EQUAL(check_tls_files(files),
                  "openssl.certificate = " + cert("node.pem")
                    + " does not verify against openssl.capath = "
                    + certs().path()
                    + ": unable to get local issuer certificate");
}

CAF_TEST(the sentences name the settings with the caller prefix) {
  auto files = node_files();
  files.key = cert("client-key.pem");
  CAF_CHECK_EQUAL(check_tls_files(files, "--openssl-"),
                  "--openssl-key does not belong to --openssl-certificate");
  files = node_files();
  files.cafile.clear();
  CAF_CHECK_EQUAL(check_tls_files(files, "--openssl-"),
                  "--openssl-cafile is required for mutual TLS");
}
