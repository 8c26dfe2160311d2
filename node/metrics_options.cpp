// The metrics' settings: registration with CAF's config and validation.

#include <coalesce/node/metrics_options.hpp>

#include <caf/config_option_adder.hpp>
#include <caf/make_config_option.hpp>

#include <coalesce/actors/option_text.hpp>

namespace coalesce {

void metrics_options::add_to(caf::config_option_adder& adder) {
  adder.add(port, "metrics-port",
            described("HTTP port of the Prometheus metrics on the node's host "
                      "(0: off)",
                      port));
}

std::string metrics_options::validate(const std::string& group,
                                      uint16_t node_port) const {
  // Whether the port can be bound is known only at start-up, which then
  // fails naming the key.
  if (port != 0 && port == node_port)
    return option_key(group, "metrics-port") + " = " + std::to_string(port)
           + " must differ from " + option_key(group, "port");
  return {};
}

} // namespace coalesce
