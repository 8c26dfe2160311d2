#pragma once

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

} // namespace coalesce::test
