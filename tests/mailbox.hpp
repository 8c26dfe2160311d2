#pragma once

#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/message.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/test/unit_test.hpp>

namespace coalesce::test {

/// Takes the next message out of `who`'s mailbox: the reply to its
/// request. Fails when nothing arrived, so a missing answer is a failure,
/// never a hang (under the test coordinator, replies are delivered by
/// running the scheduler, not by waiting).
inline caf::message next_message(caf::scoped_actor& who) {
  if (who->mailbox().empty())
    CAF_FAIL("no reply arrived");
  auto element = who->dequeue();
  CAF_REQUIRE(element != nullptr);
  return element->move_content_to_message();
}

/// The next reply of `who`'s mailbox as a `T`; fails on an error (rendered
/// by `sys`) or on a reply of another type.
template <class T>
T next_reply(caf::actor_system& sys, caf::scoped_actor& who) {
  auto msg = next_message(who);
  if (msg.match_elements<caf::error>())
    CAF_FAIL("unexpected error: " << sys.render(msg.get_as<caf::error>(0)));
  if (!msg.match_elements<T>())
    CAF_FAIL("unexpected reply: " << to_string(msg));
  return msg.get_as<T>(0);
}

/// The next reply of `who`'s mailbox, which must be an error.
inline caf::error next_error(caf::scoped_actor& who) {
  auto msg = next_message(who);
  if (!msg.match_elements<caf::error>())
    CAF_FAIL("expected an error, got " << to_string(msg));
  return msg.get_as<caf::error>(0);
}

} // namespace coalesce::test
