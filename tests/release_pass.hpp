#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <caf/test/unit_test.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/node/key_release.hpp>
#include <coalesce/node/peer_watch.hpp>

/// What the replica suites share to drive a repair's release pass
/// (coalesce/node/key_release.hpp).
namespace coalesce::test {

/// A release pass of `repair` now: the keys it dropped and those it kept.
template <class Repair>
std::pair<uint64_t, uint64_t> release_pass_of(caf::actor_system& sys,
                                              const Repair& repair) {
  caf::scoped_actor self{sys};
  std::pair<uint64_t, uint64_t> result{0, 0};
  self->request(repair, std::chrono::seconds{30}, release_keys_atom::value)
    .receive(
      [&](uint64_t dropped, uint64_t kept) { result = {dropped, kept}; },
      [&](caf::error& err) { CAF_FAIL("release failed: " << sys.render(err)); });
  return result;
}

/// Tells `repair`, node `self` of its list, where its peers are: the
/// gateway of each node of its list by index.
template <class Repair>
void introduce_peers(const Repair& repair, std::size_t self,
                     const std::vector<node_actor>& gateways) {
  for (uint64_t p = 0; p < gateways.size(); ++p)
    if (p != self)
      caf::anon_send(repair, peer_up_atom::value, p, gateways[p]);
}

} // namespace coalesce::test
