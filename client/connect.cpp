#include <coalesce/client/connect.hpp>

#include <set>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <coalesce/client/tls_transport.hpp>
#include <coalesce/messages/errc.hpp>

namespace coalesce {

namespace {

caf::error unreachable(std::string sentence) {
  return make_error(errc::node_unreachable, std::move(sentence));
}

/// CAF gives no reason for a failed handshake; the likely ones are named.
std::string handshake_refused(caf::actor_system& sys, const std::string& where) {
  if (sys.has_openssl_manager())
    return "the TLS handshake with " + where
           + " failed: the node refused this client's certificate, or this "
             "client does not trust the node's (not signed by its CA file)";
  return "the node at " + where
         + " closed the connection during the handshake: it may require "
           "mutual TLS (a certificate, key and CA file)";
}

} // namespace

caf::io::middleman_actor connector(caf::actor_system& sys) {
  if (sys.has_openssl_manager())
    return tls_middleman(sys);
  return sys.middleman().actor_handle();
}

caf::expected<node_actor>
node_answered(caf::actor_system& sys, const std::string& where,
              caf::strong_actor_ptr handle,
              const std::set<std::string>& interface) {
  if (handle == nullptr)
    return unreachable("no node is published at " + where);
  if (!sys.assignable<node_actor>(interface))
    return unreachable("the peer at " + where
                       + " is not a coalesce node of this version");
  return caf::actor_cast<node_actor>(std::move(handle));
}

caf::error connect_failed(caf::actor_system& sys, const std::string& where,
                          const caf::error& err, caf::timespan timeout) {
  if (err == caf::sec::request_timeout)
    return unreachable("the node at " + where
                       + " did not answer the connection within "
                       + caf::deep_to_string(timeout));
  if (err == caf::sec::disconnect_during_handshake)
    return unreachable(handshake_refused(sys, where));
  return unreachable("cannot connect to the node at " + where + ": "
                     + sys.render(err));
}

caf::expected<node_actor> connect_node(caf::actor_system& sys,
                                       const std::string& host, uint16_t port,
                                       caf::timespan timeout) {
  auto where = host + ":" + std::to_string(port);
  caf::expected<node_actor> result{caf::error{}};
  caf::scoped_actor self{sys};
  self
    ->request(connector(sys), timeout, caf::connect_atom::value, host, port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& handle,
          const std::set<std::string>& interface) {
        result = node_answered(sys, where, std::move(handle), interface);
      },
      [&](caf::error& err) {
        result = connect_failed(sys, where, err, timeout);
      });
  return result;
}

std::string unreachable_sentence(caf::actor_system& sys,
                                 const caf::error& err) {
  if (err.category() == errc_category
      && err.code() == static_cast<uint8_t>(errc::node_unreachable)
      && err.context().match_elements<std::string>())
    return err.context().get_as<std::string>(0);
  return sys.render(err);
}

} // namespace coalesce
