#include "coalesce/node/backfill_service.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <spdlog/spdlog.h>

#include "coalesce/actors/remote_pager.hpp"

namespace coalesce {

pager_actor spawn_node_remote_pager(caf::actor_system& sys,
                                    const scheduler_options& options) {
  // validate() refused an address that does not parse.
  auto where = *parse_node_address(options.remote_pager);
  // The same connector as connect_node's, so that one process never mixes
  // plain and TLS links.
  auto connector = sys.has_openssl_manager()
                     ? sys.openssl_manager().actor_handle()
                     : sys.middleman().actor_handle();
  spdlog::info("scheduler: paging room history from the node at {}",
               options.remote_pager);
  return spawn_remote_pager(sys,
                            caf::actor_cast<node_connector_actor>(connector),
                            std::move(where), options.pager_timeout);
}

} // namespace coalesce
