#include "coalesce/messages/errc.hpp"

namespace coalesce {

std::string to_string(errc x) {
  switch (x) {
    case errc::invalid_secret_entry:
      return "invalid_secret_entry";
    case errc::storage_failed:
      return "storage_failed";
    case errc::corrupt_record:
      return "corrupt_record";
    case errc::service_stopped:
      return "service_stopped";
    case errc::node_shutting_down:
      return "node_shutting_down";
    case errc::unsupported_format:
      return "unsupported_format";
    case errc::not_permitted:
      return "not_permitted";
    case errc::invalid_request:
      return "invalid_request";
    case errc::queue_full:
      return "queue_full";
    case errc::unknown_ticket:
      return "unknown_ticket";
    case errc::service_shut_down:
      return "service_shut_down";
    case errc::await_replaced:
      return "await_replaced";
    case errc::node_unreachable:
      return "node_unreachable";
    case errc::session_deleted:
      return "session_deleted";
    case errc::handle_superseded:
      return "handle_superseded";
    case errc::handle_gone:
      return "handle_gone";
    case errc::not_found:
      return "not_found";
    case errc::snapshot_failed:
      return "snapshot_failed";
  }
  return "errc(" + std::to_string(static_cast<int>(x)) + ")";
}

std::string describe(errc x) {
  switch (x) {
    case errc::invalid_secret_entry:
      return "invalid secret entry";
    case errc::storage_failed:
      return "storage failed";
    case errc::corrupt_record:
      return "corrupt record in the database";
    case errc::service_stopped:
      return "the service stopped before answering";
    case errc::node_shutting_down:
      return "the node is shutting down";
    case errc::unsupported_format:
      return "the database has an unsupported format";
    case errc::not_permitted:
      return "the request is not permitted";
    case errc::invalid_request:
      return "invalid request";
    case errc::queue_full:
      return "the queue is full";
    case errc::unknown_ticket:
      return "unknown ticket";
    case errc::service_shut_down:
      return "the service is shut down";
    case errc::await_replaced:
      return "a later await for the same ticket replaced this one";
    case errc::node_unreachable:
      return "the node cannot be reached";
    case errc::session_deleted:
      return "the session was deleted";
    case errc::handle_superseded:
      return "the session handle was superseded by a newer one";
    case errc::handle_gone:
      return "no live handle of the session is left";
    case errc::not_found:
      return "not found";
    case errc::snapshot_failed:
      return "the session handle did not deliver a snapshot";
  }
  return to_string(x);
}

caf::error make_error(errc x) {
  return caf::error{static_cast<uint8_t>(x), errc_category};
}

caf::error make_error(errc x, std::string context) {
  return caf::error{static_cast<uint8_t>(x), errc_category,
                    caf::make_message(std::move(context))};
}

std::string render_errc(uint8_t code, caf::atom_value,
                        const caf::message& ctx) {
  auto result = describe(static_cast<errc>(code));
  if (ctx.match_elements<std::string>())
    result += ": " + ctx.get_as<std::string>(0);
  return result;
}

} // namespace coalesce
