#pragma once

#include <string>

#include <caf/fwd.hpp>

/// The files of mutual TLS, checked before CAF sees them. CAF's openssl
/// module aborts the process on a configuration mistake (a certificate
/// without a key in the actor system's constructor, an unreadable file at
/// the first handshake), and prompts on the terminal for the passphrase of
/// an encrypted key it was given none for; so the node and every client
/// check the files here first, and stop with the sentence instead.
namespace coalesce {

/// CAF's `openssl.*` settings (caf::actor_system_config::openssl_*): PEM
/// files, the passphrase of an encrypted key, the trusted CAs.
struct tls_files {
  std::string certificate;
  std::string key;
  std::string passphrase;
  std::string cafile;
  std::string capath;

  /// Setting any of them switches CAF to mutual TLS (both peers must
  /// present a certificate the other's CA signed).
  bool any_set() const;
};

/// The `openssl.*` settings of `cfg`.
tls_files tls_files_of(const caf::actor_system_config& cfg);

/// Sets `cfg`'s `openssl.*` settings to `files`; load
/// `caf::openssl::manager` as well for the system to use them.
void set_tls_files(caf::actor_system_config& cfg, const tls_files& files);

/// Checks what CAF would abort or prompt on, reading the files with the
/// calls CAF makes: the certificate and key are set together (and a CA file
/// or path with them), each file exists and parses as PEM (the key
/// decrypted with the passphrase), the key belongs to the certificate, and
/// the certificate verifies against the CAs (so it has not expired either).
/// Returns an empty string when nothing is set or everything holds,
/// otherwise one sentence naming the setting, spelled `prefix` + field:
/// `openssl.key` for the node's config keys, `--openssl-key` for the CLI's
/// flags.
std::string check_tls_files(const tls_files& files,
                            const std::string& prefix = "openssl.");

} // namespace coalesce
