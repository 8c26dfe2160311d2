#include "coalesce/node/services.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include "coalesce/actors/timeline_actors.hpp"
#include "coalesce/messages/errc.hpp"
#include "coalesce/storage/database.hpp"

namespace coalesce {

using std::chrono::steady_clock;

struct local_services::parts {
  caf::actor_system* sys = nullptr;
  std::shared_ptr<storage::database> db;
  secret_service secrets;
  timeline_actor timeline;
  scheduler_actor scheduler;
  std::optional<bool> stopped_with;
};

namespace {

/// Time left until `deadline`, at least one millisecond.
caf::timespan until(steady_clock::time_point deadline) {
  auto left = deadline - steady_clock::now();
  return std::max<caf::timespan>(
    std::chrono::duration_cast<caf::timespan>(left),
    std::chrono::milliseconds{1});
}

/// Seals and flushes the buffer; returns whether everything was written,
/// logging what was not.
bool drain_secrets(caf::scoped_actor& self, const secret_buffer_actor& buffer,
                   steady_clock::time_point deadline) {
  auto& sys = self->system();
  self->request(buffer, until(deadline), seal_atom::value)
    .receive([](ok_atom) {}, [](caf::error&) {});
  bool written = false;
  self->request(buffer, until(deadline), flush_atom::value)
    .receive([&](ok_atom) { written = true; },
             [&](caf::error& err) {
               spdlog::error("flushing the secret buffer failed: {}",
                             sys.render(err));
             });
  if (written) {
    spdlog::info("secret buffer flushed: every queued secret is durable");
    return true;
  }
  self->request(buffer, std::chrono::seconds{5}, stats_atom::value)
    .receive(
      [](secret_buffer_stats& st) {
        spdlog::error("{} secrets could not be written ({} pending, {} held "
                      "by waiting producers)",
                      st.pending + st.held_entries, st.pending,
                      st.held_entries);
      },
      [&](caf::error& err) {
        spdlog::error("the secret buffer does not answer; what it held is "
                      "unknown: {}",
                      sys.render(err));
      });
  return false;
}

} // namespace

local_services::local_services(std::unique_ptr<parts> state)
  : parts_(std::move(state)) {
  // nop
}

local_services::~local_services() {
  stop(std::chrono::seconds{30});
}

service_handles local_services::handles() const {
  return {parts_->secrets.buffer, parts_->timeline, parts_->scheduler};
}

const secret_buffer_actor& local_services::secret_buffer() const {
  return parts_->secrets.buffer;
}

const scheduler_actor& local_services::scheduler() const {
  return parts_->scheduler;
}

const timeline_actor& local_services::timeline() const {
  return parts_->timeline;
}

bool local_services::stop(caf::timespan deadline_in) {
  auto& p = *parts_;
  if (p.stopped_with)
    return *p.stopped_with;
  auto deadline = steady_clock::now() + deadline_in;
  caf::scoped_actor self{*p.sys};
  // In order: the scheduler answers its callers before the buffer seals, so
  // the last thing to finish is the write of what was queued.
  self->request(p.scheduler, until(deadline), shutdown_atom::value)
    .receive([](ok_atom) {}, [](caf::error&) {});
  auto written = drain_secrets(self, p.secrets.buffer, deadline);
  for (auto hdl : {caf::actor_cast<caf::actor>(p.scheduler),
                   caf::actor_cast<caf::actor>(p.timeline),
                   caf::actor_cast<caf::actor>(p.secrets.buffer)})
    caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
  self->wait_for(p.scheduler, p.timeline, p.secrets.buffer, p.secrets.drain,
                 p.secrets.reader);
  if (auto err = p.db->close()) {
    spdlog::error("closing the database failed: {}", p.sys->render(err));
    written = false;
  }
  p.stopped_with = written;
  return written;
}

caf::expected<std::unique_ptr<local_services>>
start_services(caf::actor_system& sys, const service_settings& settings) {
  if (auto problem = settings.validate(); !problem.empty())
    return make_error(errc::invalid_request, problem);
  auto mode = *storage::parse_durability(settings.durability);
  auto db = storage::database::open(
    {settings.db_path, mode, settings.file_system});
  if (!db)
    return std::move(db.error());
  spdlog::info("opened the database at {} (durability {})", settings.db_path,
               settings.durability);
  auto state = std::make_unique<local_services::parts>();
  state->sys = &sys;
  state->db = *db;
  state->secrets = spawn_secret_service(sys, *db, settings.secrets);
  state->timeline = sys.spawn<caf::detached>(timeline_store, *db);
  state->scheduler = spawn_backfill_scheduler(sys, state->timeline,
                                              settings.scheduler);
  return std::make_unique<local_services>(std::move(state));
}

caf::expected<service_handles> connect_services(caf::actor_system& sys,
                                                const std::string& host,
                                                uint16_t port,
                                                caf::timespan timeout) {
  auto node = connect_node(sys, host, port, timeout);
  if (!node)
    return std::move(node.error());
  return service_handles{*node, *node, *node};
}

} // namespace coalesce
