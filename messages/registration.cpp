#include <coalesce/messages/registration.hpp>

#include <caf/actor_system_config.hpp>

#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/node_interface.hpp>

namespace coalesce {

void register_message_types(caf::actor_system_config& cfg) {
  for_each_message_type([&](auto type) {
    cfg.add_message_type<typename decltype(type)::type>(type.name);
  });
  cfg.add_error_category(errc_category, render_errc);
}

} // namespace coalesce
