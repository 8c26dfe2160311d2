#include <coalesce/node/services.hpp>

#include <chrono>
#include <optional>
#include <utility>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>

namespace coalesce {

using std::chrono::steady_clock;

struct local_services::parts {
  caf::actor_system* sys = nullptr;
  std::shared_ptr<storage::database> db;
  hosted_services services;
  std::optional<bool> stopped_with;
  bool stopped_cleanly_before = false;
};

namespace {

constexpr auto service_count = std::tuple_size_v<hosted_services>;

/// Calls `f` with every hosted service, in start order.
template <class F>
void in_start_order(hosted_services& services, F&& f) {
  std::apply([&](auto&... service) { (f(service), ...); }, services);
}

/// Calls `f` with every hosted service, last started first.
template <class F, std::size_t... Is>
void in_stop_order(hosted_services& services, F&& f,
                   std::index_sequence<Is...>) {
  (f(std::get<service_count - 1 - Is>(services)), ...);
}

template <class F>
void in_stop_order(hosted_services& services, F&& f) {
  in_stop_order(services, f, std::make_index_sequence<service_count>{});
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
  service_handles result;
  in_start_order(parts_->services,
                 [&](const auto& service) { service.add_handles(result); });
  return result;
}

std::shared_ptr<storage::database> local_services::database() const {
  return parts_->db;
}

bool local_services::stopped_cleanly_before() const {
  return parts_->stopped_cleanly_before;
}

const hosted_services& local_services::hosted() const {
  return parts_->services;
}

bool local_services::stop(caf::timespan deadline_in) {
  auto& p = *parts_;
  if (p.stopped_with)
    return *p.stopped_with;
  auto deadline = steady_clock::now() + deadline_in;
  caf::scoped_actor self{*p.sys};
  // Last started first: a service answers the callers it holds before the
  // services it writes through stop, so the last thing to finish is the
  // write of what was queued.
  bool written = true;
  in_stop_order(p.services, [&](const auto& service) {
    written = service.wind_down(self, deadline) && written;
  });
  in_stop_order(p.services, [&](const auto& service) {
    for (const auto& actor : service.to_exit())
      caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  });
  in_stop_order(p.services, [&](const auto& service) {
    for (const auto& actor : service.to_wait_for())
      self->wait_for(actor);
  });
  if (written)
    if (auto err = p.db->mark_clean_stop()) {
      spdlog::error("marking the clean stop failed: {}", p.sys->render(err));
      written = false;
    }
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
  auto clean = (*db)->take_clean_stop_mark();
  if (!clean)
    return std::move(clean.error());
  auto state = std::make_unique<local_services::parts>();
  state->sys = &sys;
  state->db = *db;
  state->stopped_cleanly_before = *clean;
  in_start_order(state->services, [&](auto& service) {
    service.start(sys, state->db, settings, state->services);
  });
  return std::make_unique<local_services>(std::move(state));
}

caf::expected<service_handles> connect_services(caf::actor_system& sys,
                                                const std::string& host,
                                                uint16_t port,
                                                caf::timespan timeout) {
  auto node = connect_node(sys, host, port, timeout);
  if (!node)
    return std::move(node.error());
  service_handles result;
  for_each_service([&](auto service) {
    using requests = typename decltype(service)::requests;
    result.*decltype(service)::handle = caf::actor_cast<requests>(*node);
  });
  return result;
}

} // namespace coalesce
