#include <coalesce/node/list_check.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/node_interface.hpp>

namespace coalesce {

namespace {

using clock = std::chrono::steady_clock;

/// What is left of `peer_timeout` before `deadline` (a millisecond at
/// least: CAF takes no zero timeout).
caf::timespan bounded(caf::timespan peer_timeout, clock::time_point deadline) {
  auto left = std::chrono::duration_cast<caf::timespan>(deadline - clock::now());
  return std::max<caf::timespan>(std::min(peer_timeout, left),
                                 std::chrono::milliseconds{1});
}

/// Asks `node` until it answers or `deadline` passes: nothing, or why it
/// did not answer the last time.
std::optional<std::string> ask_until(caf::actor_system& sys,
                                     const node_endpoint& node,
                                     caf::timespan peer_timeout,
                                     caf::timespan retry,
                                     clock::time_point deadline) {
  for (;;) {
    std::string why;
    auto gateway = connect_node(sys, node.host, node.port,
                                bounded(peer_timeout, deadline));
    if (gateway) {
      caf::scoped_actor self{sys};
      self->request(*gateway, bounded(peer_timeout, deadline),
                    stats_atom::value)
        .receive([](node_stats&) {},
                 [&](caf::error& err) {
                   why = "did not answer a ping: " + sys.render(err);
                 });
      if (why.empty())
        return std::nullopt;
    } else {
      why = unreachable_sentence(sys, gateway.error());
    }
    if (clock::now() + retry >= deadline)
      return why;
    std::this_thread::sleep_for(retry);
  }
}

} // namespace

std::vector<std::string> unanswering_nodes(caf::actor_system& sys,
                                           const cluster_map& list,
                                           std::size_t self_index,
                                           caf::timespan peer_timeout,
                                           caf::timespan retry,
                                           caf::timespan limit) {
  auto deadline = clock::now() + limit;
  std::vector<std::optional<std::string>> why_not(list.size());
  std::vector<std::thread> askers;
  for (std::size_t i = 0; i < list.size(); ++i)
    if (i != self_index)
      askers.emplace_back([&, i] {
        why_not[i] = ask_until(sys, list.nodes()[i], peer_timeout, retry,
                               deadline);
      });
  for (auto& asker : askers)
    asker.join();
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < list.size(); ++i)
    if (why_not[i])
      missing.push_back(list.nodes()[i].text() + " (" + *why_not[i] + ")");
  return missing;
}

} // namespace coalesce
