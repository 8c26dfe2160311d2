#include <coalesce/node/backfill_scheduler_service.hpp>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/remote_pager.hpp>
#include <coalesce/client/connect.hpp>

namespace coalesce {

pager_actor spawn_node_remote_pager(caf::actor_system& sys,
                                    const backfill_scheduler_options& options) {
  // validate() refused an address that does not parse.
  auto where = *parse_node_address(options.remote_pager);
  spdlog::info("scheduler: paging room history from the node at {}",
               options.remote_pager);
  return spawn_remote_pager(sys,
                            caf::actor_cast<node_connector_actor>(connector(sys)),
                            std::move(where), options.pager_timeout);
}

} // namespace coalesce
