#include "app/node_config.hpp"

#include <caf/config_option_adder.hpp>
#include <spdlog/common.h>

#include "messages/registration.hpp"
#include "storage/durability.hpp"

namespace coalesce {

node_config::node_config() {
  register_message_types(*this);
  opt_group{custom_options_, "coalesce"}
    .add(db_path, "db-path", "directory of the RocksDB database")
    .add(durability, "durability",
         "\"synced\" (fsync per batch) or \"buffered\" (no fsync)")
    .add(secrets_pending_limit, "secrets-pending-limit",
         "distinct pending secrets before producers wait (> 0)")
    .add(log_level, "log-level",
         "trace, debug, info, warn, error, critical or off")
    .add(host, "host", "address to accept connections on")
    .add(port, "port", "port to accept connections on (0: any free port)");
}

std::string validate(const node_config& cfg) {
  if (cfg.db_path.empty())
    return "coalesce.db-path must not be empty";
  if (!storage::parse_durability(cfg.durability))
    return "coalesce.durability must be \"synced\" or \"buffered\", got \""
           + cfg.durability + "\"";
  if (cfg.secrets_pending_limit == 0)
    return "coalesce.secrets-pending-limit must be positive, got 0";
  if (spdlog::level::from_str(cfg.log_level) == spdlog::level::off
      && cfg.log_level != "off")
    return "coalesce.log-level must be one of trace, debug, info, warn, "
           "error, critical, off; got \""
           + cfg.log_level + "\"";
  return {};
}

} // namespace coalesce
