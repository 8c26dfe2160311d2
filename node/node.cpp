#include <coalesce/node/node.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/manager.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/client/connect.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/node/build_info.hpp>
#include <coalesce/node/cluster_list.hpp>
#include <coalesce/node/list_check.hpp>
#include <coalesce/node/metrics.hpp>
#include <coalesce/node/pause_watch.hpp>
#include <coalesce/node/peer_watch.hpp>
#include <coalesce/node/secret_buffer_service.hpp>
#include <coalesce/node/secret_replicas.hpp>
#include <coalesce/node/secret_sync.hpp>
#include <coalesce/node/services.hpp>
#include <coalesce/node/serving_lists.hpp>
#include <coalesce/node/session_persister_service.hpp>
#include <coalesce/node/session_replicas.hpp>
#include <coalesce/node/session_sync.hpp>
#include <coalesce/node/timeline_replicas.hpp>
#include <coalesce/node/timeline_service.hpp>
#include <coalesce/node/timeline_sync.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/secret_store.hpp>

namespace coalesce {

namespace {

/// Logs the node's counters every `interval` until it is told to stop.
caf::behavior stats_reporter(caf::event_based_actor* self, node_actor gateway,
                             caf::timespan interval) {
  self->delayed_send(self, interval, caf::tick_atom::value);
  return {
    [=](caf::tick_atom) {
      self->request(gateway, std::chrono::seconds{10}, stats_atom::value)
        .then(
          [](node_stats& stats) {
            spdlog::info("stats: {}", flat_fields(stats));
          },
          [self](caf::error& err) {
            spdlog::warn("stats: no answer from the gateway: {}",
                         self->system().render(err));
          });
      self->delayed_send(self, interval, caf::tick_atom::value);
    },
  };
}

/// The list this node serves under: its configured one, against the one it
/// stored (coalesce/node/cluster_list.hpp), stored when it changed;
/// `changed` tells whether it replaced a stored one, so that the node
/// catches up (`catches_up_after_change`), `passes` how many passes its
/// catch-ups make (`catch_up_passes`). A change is refused, the stored
/// list kept, unless every other node of the new list answers a ping
/// within `max_peer_silence` (operating.md, "Changing the list").
caf::expected<cluster_map> settle_list(caf::actor_system& sys,
                                       storage::database& db,
                                       const cluster_map& configured,
                                       const node_settings& settings,
                                       bool& changed, int& passes) {
  auto stored = db.stored_cluster_list();
  if (!stored)
    return std::move(stored.error());
  auto settled = settle_cluster_list(configured, *stored);
  if (!settled)
    return std::move(settled.error());
  if (settled->changed && !settled->previous.empty()) {
    const auto& list = settled->record.list;
    const auto& cluster = settings.cluster;
    auto limit = cluster.max_peer_silence();
    spdlog::info("coalesce.cluster changes the list from {} to {}: asking "
                 "every other node of the new list for an answer first "
                 "(within {})",
                 settled->previous, list.text(), caf::deep_to_string(limit));
    auto missing = unanswering_nodes(
      sys, list, *list.index_of({settings.host, settings.port}),
      cluster.peer_timeout, cluster.watch_settings().ping_interval, limit);
    if (!missing.empty()) {
      std::string named;
      for (const auto& x : missing)
        named += (named.empty() ? "" : "; ") + x;
      return make_error(
        errc::invalid_request,
        "coalesce.cluster changes the list from " + settled->previous + " to "
          + list.text()
          + ", but not every node of the new list answered within "
          + caf::deep_to_string(limit) + ": " + named
          + ". Nothing changed: the stored list stays version "
          + std::to_string(list.version() - 1)
          + ". Start those nodes first (a joining node starts first, with the "
            "new list and an empty directory), or start this node with its "
            "old list");
    }
  }
  passes = catch_up_passes(*settled);
  if (settled->changed) {
    if (auto err = db.store_cluster_list(encode_cluster_list(settled->record)))
      return err;
    changed = catches_up_after_change(*settled);
    if (settled->previous.empty())
      spdlog::info("cluster list {} stored", settled->record.list.text());
    else if (settled->dropped_nodes)
      spdlog::warn("cluster list changed from {} to {}: a node left, so this "
                   "node may keep keys it did not: it catches up from every "
                   "peer before serving reads (the nodes that hold them hand "
                   "them off)",
                   settled->previous, settled->record.list.text());
    else
      spdlog::warn("cluster list changed from {} to {}: nodes joined (they "
                   "take over some of this node's keys; it gains none, but "
                   "catches up from every peer before serving reads: what "
                   "they took under the old list while it was down must "
                   "reach the new list's replicas)",
                   settled->previous, settled->record.list.text());
  }
  return std::move(settled->record.list);
}

void stop_gateway(caf::actor_system& sys, const node_actor& gateway) {
  caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
  caf::scoped_actor self{sys};
  self->wait_for(gateway);
}

/// Opens the gateway's port: through coalesce's TLS transport when the
/// system loaded the openssl module (client/tls_transport.hpp says why not
/// CAF's).
caf::expected<uint16_t> publish_gateway(caf::actor_system& sys,
                                        const node_actor& gateway,
                                        const node_settings& settings) {
  if (!sys.has_openssl_manager())
    return sys.middleman().publish(gateway, settings.port,
                                   settings.host.c_str(), true);
  caf::expected<uint16_t> port{caf::error{}};
  caf::scoped_actor self{sys};
  self
    ->request(connector(sys), std::chrono::seconds{30},
              caf::publish_atom::value, settings.port,
              caf::actor_cast<caf::strong_actor_ptr>(gateway),
              sys.message_types(gateway), settings.host, true)
    .receive([&](uint16_t opened) { port = opened; },
             [&](caf::error& err) { port = std::move(err); });
  return port;
}

/// Closes the gateway's port.
void unpublish_gateway(caf::actor_system& sys, const node_actor& gateway,
                       uint16_t port) {
  caf::scoped_actor self{sys};
  self
    ->request(connector(sys), std::chrono::seconds{5},
              caf::unpublish_atom::value, gateway.address(), port)
    .receive([] {}, [](caf::error&) {});
}

/// The next signal of `signals`; with `ticking`, 0 when none came within
/// a pause_watch tick.
int next_signal(const sigset_t& signals, bool ticking) {
  if (!ticking) {
    int signal = 0;
    sigwait(&signals, &signal);
    return signal;
  }
  using namespace std::chrono;
  auto tick = duration_cast<nanoseconds>(pause_watch::tick_interval).count();
  timespec timeout{static_cast<time_t>(tick / 1'000'000'000),
                   static_cast<long>(tick % 1'000'000'000)};
  auto signal = sigtimedwait(&signals, nullptr, &timeout);
  return signal < 0 ? 0 : signal; // EAGAIN (the tick) or EINTR
}

/// Watches CAF's BASP broker, which carries every connection of the node
/// (its peers' and its clients'). CAF 0.17.6 stops it for good on an
/// exception while it decodes a message (when no BASP worker is free it
/// decodes itself: docs/operating.md, "Known limits of CAF 0.17"), and a
/// node without it serves nobody while it looks alive. The watch says so
/// in the log, sets `lost` and sends the process SIGTERM: the node stops
/// as if told to, writing what it holds, with a failed status for its
/// supervisor to restart it.
caf::actor watch_basp_broker(caf::actor_system& sys,
                             std::shared_ptr<std::atomic<bool>> lost) {
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(
    caf::atom("BASP"));
  return sys.spawn([broker, lost](caf::event_based_actor* self) {
    self->monitor(broker);
    self->set_down_handler([self, lost](const caf::down_msg& msg) {
      spdlog::critical("the node stops: CAF's BASP broker, which carries "
                       "every connection to peers and clients, stopped ({}); "
                       "a restart starts another (see \"Known limits of CAF "
                       "0.17\" in docs/operating.md)",
                       to_string(msg.reason));
      lost->store(true);
      kill(getpid(), SIGTERM);
      self->quit();
    });
    // Only the down message matters; a behavior keeps the actor alive.
    return caf::behavior{[](ok_atom) {}};
  });
}

} // namespace

int run_node(caf::actor_system& sys, const node_settings& settings,
             const sigset_t& signals, const node_events& events) {
  spdlog::info("coalesce-node {} (commit {})", build_version(), build_commit());
  auto services = start_services(sys, settings.services);
  if (!services) {
    spdlog::critical("cannot start the services on coalesce.db-path = "
                     "\"{}\": {}",
                     settings.services.db_path, sys.render(services.error()));
    return EXIT_FAILURE;
  }
  auto& local = **services;
  auto cluster = settings.cluster.map();
  auto clustered = cluster.size() > 1;
  // Whether this start replaced the stored list: this node catches up
  // before it serves reads, as after a crash (catches_up_after_change).
  bool list_changed = false;
  int passes = 1;
  if (clustered) {
    auto settled = settle_list(sys, *local.database(), cluster, settings,
                               list_changed, passes);
    if (!settled) {
      spdlog::critical("cannot start under coalesce.cluster on "
                       "coalesce.db-path = "
                       "\"{}\": {}",
                       settings.services.db_path, sys.render(settled.error()));
      local.stop(settings.shutdown_timeout);
      return EXIT_FAILURE;
    }
    cluster = std::move(*settled);
  }
  auto self_index
    = clustered ? *cluster.index_of({settings.host, settings.port}) : 0;
  std::vector<std::string> addresses;
  for (const auto& node : cluster.nodes())
    addresses.push_back(node.text());
  auto counters = clustered
                    ? std::make_shared<peer_counters>(std::move(addresses),
                                                      cluster.version())
                    : nullptr;
  auto handles = local.handles();
  // What the peer watch learns of the lists its peers serve under, which
  // the coordinators count majorities by while the list changes.
  auto lists = clustered ? std::make_shared<serving_lists>(
                             cluster.size() - 1,
                             settings.cluster.max_peer_silence())
                         : nullptr;
  secret_replicas_actor replicas;
  secret_sync_actor repair;
  if (settings.cluster.replicates_secrets()) {
    auto buffer = local.service<secret_buffer_service>().actors().buffer;
    auto empty = storage::secrets_empty(*local.database());
    if (!empty) {
      spdlog::critical("cannot read the secrets on coalesce.db-path = "
                       "\"{}\": {}",
                       settings.services.db_path, sys.render(empty.error()));
      local.stop(settings.shutdown_timeout);
      return EXIT_FAILURE;
    }
    auto catch_up = !local.stopped_cleanly_before() || list_changed;
    replicas = spawn_secret_replicas(sys, buffer,
                                     {cluster, self_index,
                                      settings.cluster.replicas,
                                      settings.cluster.peer_timeout, counters,
                                      catch_up,
                                      settings.cluster.sync_timeout(), lists});
    repair = spawn_secret_sync(
      sys, local.database(), buffer, caf::actor_cast<caf::actor>(replicas),
      {cluster, self_index, settings.cluster.replicas,
       settings.cluster.sync_timeout(),
       settings.cluster.anti_entropy_interval, settings.cluster.peer_timeout,
       catch_up, nullptr, counters, list_changed, lists, passes, *empty});
    handles.secret_buffer = caf::actor_cast<secret_buffer_requests>(replicas);
  }
  replicated_sessions sessions;
  session_sync_actor session_repair;
  if (settings.cluster.replicates_sessions()) {
    std::vector<session_replica_io_actor> io;
    for (const auto& x : local.service<session_persister_service>().actors().io)
      io.push_back(caf::actor_cast<session_replica_io_actor>(x));
    // Set before anything serves a read: the repair clears it once caught up.
    auto catch_up = !local.stopped_cleanly_before() || list_changed;
    auto catching_up = std::make_shared<std::atomic<bool>>(catch_up);
    sessions = start_replicated_sessions(
      sys, io,
      {cluster, self_index, settings.cluster.replicas,
       settings.cluster.peer_timeout, counters, catching_up, lists},
      settings.services.session_persister);
    session_repair = spawn_session_sync(
      sys, local.database(), io, {},
      {cluster, self_index, settings.cluster.replicas,
       settings.cluster.sync_timeout(), settings.cluster.anti_entropy_interval,
       settings.cluster.peer_timeout, catch_up, catching_up, counters,
       list_changed, lists, passes});
    handles.session_persister = sessions.persister;
  }
  replicated_rooms rooms;
  timeline_sync_actor room_repair;
  if (settings.cluster.replicates_rooms()) {
    auto store = local.service<timeline_service>().replica_store();
    auto catch_up = !local.stopped_cleanly_before() || list_changed;
    auto catching_up = std::make_shared<std::atomic<bool>>(catch_up);
    rooms = start_replicated_rooms(
      sys, store,
      {cluster, self_index, settings.cluster.replicas,
       settings.cluster.peer_timeout, counters, catching_up, lists},
      settings.services.backfill_scheduler);
    room_repair = spawn_timeline_sync(
      sys, local.database(), store, {},
      {cluster, self_index, settings.cluster.replicas,
       settings.cluster.sync_timeout(), settings.cluster.anti_entropy_interval,
       settings.cluster.peer_timeout, catch_up, catching_up, counters,
       list_changed, lists, passes});
    handles.timeline = caf::actor_cast<timeline_requests>(rooms.coordinator);
    handles.backfill_scheduler = rooms.scheduler;
  }
  replica_endpoints endpoints;
  endpoints.secret_sync = caf::actor_cast<secret_sync_requests>(repair);
  endpoints.session_replicas = sessions.endpoint;
  endpoints.session_sync
    = caf::actor_cast<session_listing_requests>(session_repair);
  endpoints.room_replicas = rooms.endpoint;
  endpoints.room_sync = caf::actor_cast<room_listing_requests>(room_repair);
  if (lists)
    endpoints.uncounted = uncounted_check(cluster, lists);
  auto gateway = spawn_node_gateway(
    sys, handles, settings.cluster.foreign_owner(cluster, self_index),
    counters, std::move(endpoints));
  // The repairs' scans read the database that stopping the services closes.
  auto stop_repairs = [&] {
    for (auto x : {caf::actor_cast<caf::actor>(repair),
                   caf::actor_cast<caf::actor>(session_repair),
                   caf::actor_cast<caf::actor>(room_repair)})
      if (x) {
        caf::anon_send_exit(x, caf::exit_reason::user_shutdown);
        caf::scoped_actor self{sys};
        self->wait_for(x);
      }
  };
  auto tls = sys.has_openssl_manager();
  auto port = publish_gateway(sys, gateway, settings);
  if (!port) {
    spdlog::critical("cannot listen on coalesce.host:coalesce.port = {}:{}: "
                     "{}",
                     settings.host, settings.port, sys.render(port.error()));
    stop_gateway(sys, gateway);
    stop_repairs();
    rooms.stop(sys, settings.shutdown_timeout);
    sessions.stop(sys, settings.shutdown_timeout);
    local.stop(settings.shutdown_timeout);
    return EXIT_FAILURE;
  }
  spdlog::info("listening on {}:{}{}", settings.host, *port,
               tls ? " (mutual TLS)" : "");
  auto metrics = start_metrics(sys, gateway, local.database(), settings.host,
                               settings.metrics);
  if (!metrics) {
    spdlog::critical("{}", sys.render(metrics.error()));
    unpublish_gateway(sys, gateway, *port);
    stop_gateway(sys, gateway);
    stop_repairs();
    rooms.stop(sys, settings.shutdown_timeout);
    sessions.stop(sys, settings.shutdown_timeout);
    local.stop(settings.shutdown_timeout);
    return EXIT_FAILURE;
  }
  if (*metrics)
    spdlog::info("metrics on {}", (*metrics)->address());
  auto network_lost = std::make_shared<std::atomic<bool>>(false);
  auto broker_watch = watch_basp_broker(sys, network_lost);
  if (events.ready)
    events.ready(settings.host + ":" + std::to_string(*port));
  caf::actor reporter;
  if (settings.stats_interval.count() > 0)
    reporter = sys.spawn(stats_reporter, gateway, settings.stats_interval);
  std::vector<caf::actor> subscribers;
  if (replicas)
    subscribers = {caf::actor_cast<caf::actor>(replicas),
                   caf::actor_cast<caf::actor>(repair)};
  for (const auto& x : sessions.subscribers())
    subscribers.push_back(x);
  if (session_repair)
    subscribers.push_back(caf::actor_cast<caf::actor>(session_repair));
  for (const auto& x : rooms.subscribers())
    subscribers.push_back(x);
  if (room_repair)
    subscribers.push_back(caf::actor_cast<caf::actor>(room_repair));
  caf::actor watch;
  if (clustered)
    watch = spawn_peer_watch(sys, cluster, self_index,
                             settings.cluster.watch_settings(), counters,
                             subscribers, lists);

  std::optional<pause_watch> pauses;
  if (lists)
    pauses.emplace(lists, pause_watch::clock::now());
  int signal = 0;
  for (;;) {
    signal = next_signal(signals, pauses.has_value());
    if (pauses && signal != SIGCONT)
      pauses->tick(pause_watch::clock::now());
    if (signal == 0)
      continue;
    if (signal == SIGCONT) {
      if (pauses)
        pauses->continued(pause_watch::clock::now());
      continue;
    }
    if (signal != SIGHUP)
      break;
    spdlog::info("received SIGHUP: ignored, the node goes on (it logs to "
                 "stdout and reads its config file only at start; SIGTERM "
                 "stops it)");
  }
  // Before the middleman stops with the actor system, after this returns.
  caf::anon_send_exit(broker_watch, caf::exit_reason::user_shutdown);
  spdlog::info("received {}, shutting down within {}",
               signal == SIGINT ? "SIGINT" : "SIGTERM",
               caf::deep_to_string(settings.shutdown_timeout));
  if (events.stopping)
    events.stopping();
  if (reporter)
    caf::anon_send_exit(reporter, caf::exit_reason::user_shutdown);
  if (watch)
    caf::anon_send_exit(watch, caf::exit_reason::user_shutdown);
  metrics->reset();
  // One deadline for the whole shutdown.
  auto deadline = std::chrono::steady_clock::now() + settings.shutdown_timeout;
  {
    caf::scoped_actor self{sys};
    self->request(gateway, settings.shutdown_timeout, shutdown_atom::value)
      .receive([](ok_atom) {}, [](caf::error&) {});
  }
  stop_repairs();
  auto left = [&] {
    return std::max<caf::timespan>(
      std::chrono::duration_cast<caf::timespan>(
        deadline - std::chrono::steady_clock::now()),
      std::chrono::milliseconds{1});
  };
  // Before the services: their writes go through the services' actors.
  rooms.stop(sys, left());
  auto sessions_written = sessions.stop(sys, left());
  auto written = local.stop(left()) && sessions_written;
  unpublish_gateway(sys, gateway, *port);
  stop_gateway(sys, gateway);
  if (replicas)
    caf::anon_send_exit(replicas, caf::exit_reason::user_shutdown);

  auto status = written && !network_lost->load() ? EXIT_SUCCESS : EXIT_FAILURE;
  spdlog::info("stopped ({}{})",
               written ? "everything written" : "NOT everything was written",
               network_lost->load() ? "; its connections were lost" : "");
  return status;
}

} // namespace coalesce
