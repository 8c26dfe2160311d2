#include "messages/registration.hpp"

#include <caf/actor_system_config.hpp>

#include "messages/errc.hpp"
#include "messages/node_stats.hpp"
#include "messages/secret_buffer_stats.hpp"
#include "messages/secret_entry.hpp"

namespace coalesce {

void register_message_types(caf::actor_system_config& cfg) {
  // add_message_type<T> also registers std::vector<T>.
  cfg.add_message_type<secret_key>("coalesce.secret_key");
  cfg.add_message_type<secret_entry>("coalesce.secret_entry");
  cfg.add_message_type<secret_write>("coalesce.secret_write");
  cfg.add_message_type<secret_lookup>("coalesce.secret_lookup");
  cfg.add_message_type<stored_secret>("coalesce.stored_secret");
  cfg.add_message_type<secret_buffer_stats>("coalesce.secret_buffer_stats");
  cfg.add_message_type<node_stats>("coalesce.node_stats");
  cfg.add_error_category(errc_category, render_errc);
}

} // namespace coalesce
