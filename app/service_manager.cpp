#include "service_manager.hpp"

#include <string>

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

namespace coalesce {

node_events service_manager_events() {
  node_events events;
  events.ready = [](const std::string& address) {
    auto status = "READY=1\nSTATUS=listening on " + address;
    auto told = sd_notify(0, status.c_str());
    if (told > 0)
      spdlog::info("told the service manager the node is ready");
    else if (told < 0)
      spdlog::warn("could not tell the service manager the node is ready "
                   "(NOTIFY_SOCKET): error {}",
                   -told);
  };
  events.stopping = [] { sd_notify(0, "STOPPING=1\nSTATUS=shutting down"); };
  return events;
}

} // namespace coalesce
