#pragma once

namespace caf {
class actor_system_config;
} // namespace caf

namespace coalesce {

/// Registers every message type and the error renderer of coalesce with
/// `cfg`. Every node and client calls it once, before its `actor_system`
/// exists: types cross nodes only under the same registered names.
void register_message_types(caf::actor_system_config& cfg);

} // namespace coalesce
