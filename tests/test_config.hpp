#pragma once

#include <caf/actor_system_config.hpp>

#include <coalesce/messages/registration.hpp>

namespace coalesce::test {

/// The config every test system uses: coalesce's types registered as a node
/// registers them, so a message that reaches a test prints and compares as
/// it would on a node.
struct test_config : caf::actor_system_config {
  test_config() {
    register_message_types(*this);
  }
};

} // namespace coalesce::test
