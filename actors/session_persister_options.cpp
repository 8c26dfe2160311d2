// The session persister's settings: registration with CAF's config and
// validation, one place for each setting's key, description, default and
// rule.

#include <caf/config_option_adder.hpp>
#include <caf/make_config_option.hpp>

#include <coalesce/actors/option_text.hpp>
#include <coalesce/actors/session_persister.hpp>

namespace coalesce {

namespace {

/// Idle writers kept at most: each is a live actor with its state, and a
/// bound keeps a typo from reserving memory for billions.
constexpr std::size_t max_idle_writers = 1000000;

} // namespace

void session_persister_options::add_to(caf::config_option_adder& adder) {
  adder
    .add(max_blob, "persister-max-blob",
         described("largest session snapshot in bytes (> 0)", max_blob))
    .add(max_update, "persister-max-update",
         described("largest update payload in bytes (> 0)", max_update))
    .add(io_workers, "persister-io-workers",
         described("threads doing the persister's RocksDB calls (1..64)",
                   io_workers))
    .add(snapshot_timeout, "persister-snapshot-timeout",
         described("how long a session handle may take to answer a snapshot "
                   "(> 0)",
                   snapshot_timeout))
    .add(idle_writers, "persister-idle-writers",
         described("idle session writers kept warm for their sessions' next "
                   "requests (0..1000000)",
                   idle_writers));
}

std::string session_persister_options::validate(const std::string& group) const {
  if (max_blob == 0)
    return option_key(group, "persister-max-blob") + " = 0 must be positive";
  if (max_update == 0)
    return option_key(group, "persister-max-update") + " = 0 must be positive";
  if (io_workers == 0 || io_workers > 64)
    return option_key(group, "persister-io-workers") + " = "
           + std::to_string(io_workers) + " must lie between 1 and 64";
  if (snapshot_timeout.count() <= 0)
    return option_key(group, "persister-snapshot-timeout") + " = "
           + duration_text(snapshot_timeout) + " must be positive";
  if (idle_writers > max_idle_writers)
    return option_key(group, "persister-idle-writers") + " = "
           + std::to_string(idle_writers) + " must lie between 0 and "
           + std::to_string(max_idle_writers);
  return {};
}

} // namespace coalesce
