#include "node_client.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>

#include <caf/io/all.hpp>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/errc.hpp>

namespace coalesce {

int fail(const cli_failure& failure) {
  std::cerr << "coalesce-cli: " << failure.sentence << '\n';
  return failure.code;
}

int usage(const std::string& sentence) {
  return fail({exit_usage, sentence});
}

std::optional<caf::timespan> parse_duration(const std::string& text) {
  // The config file's own parser: "5" is an integer there, not a duration.
  auto value = caf::config_value::parse(text);
  if (!value)
    return std::nullopt;
  auto duration = caf::get_if<caf::timespan>(&*value);
  if (duration == nullptr || duration->count() <= 0)
    return std::nullopt;
  return *duration;
}

std::optional<cli_failure> connect_node(caf::actor_system& sys,
                                        const std::string& host, uint16_t port,
                                        caf::timespan timeout,
                                        node_actor& result) {
  auto connected = coalesce::connect_node(sys, host, port, timeout);
  if (!connected)
    return cli_failure{exit_unreachable,
                       unreachable_sentence(sys, connected.error())};
  result = std::move(*connected);
  return std::nullopt;
}

cli_failure classify(caf::actor_system& sys, const caf::error& err,
                     const std::string& where, caf::timespan timeout) {
  // A cluster client's answer for a node it could not reach names the node.
  if (err.category() == errc_category
      && err.code() == static_cast<uint8_t>(errc::node_unreachable))
    return {exit_unreachable, unreachable_sentence(sys, err)};
  if (err.category() == errc_category)
    return {exit_node_error, "the node at " + where + " refused: "
                               + sys.render(err)};
  if (err == caf::sec::request_timeout)
    return {exit_unreachable, "the node at " + where
                                + " did not answer within "
                                + caf::deep_to_string(timeout)};
  return {exit_unreachable,
          "lost the node at " + where + ": " + sys.render(err)};
}

namespace {

struct pipeline_state {
  static inline const char* name = "queue_pipeline";
  node_actor node;
  caf::timespan timeout;
  std::shared_ptr<std::atomic<uint64_t>> progress;
  std::shared_ptr<queue_report> report;
  std::vector<std::vector<secret_entry>> batches;
  std::size_t next = 0;
  std::size_t outstanding = 0;
};

using pipeline_actor = caf::stateful_actor<pipeline_state>;

/// Sends the next batch, or quits once every batch was answered. A plain
/// function over the actor's state: a callback holding itself would leak.
void send_next(pipeline_actor* self) {
  using clock = std::chrono::steady_clock;
  auto& st = self->state;
  if (st.next == st.batches.size()) {
    if (st.outstanding == 0)
      self->quit();
    return;
  }
  auto batch = std::move(st.batches[st.next++]);
  auto size = batch.size();
  st.report->entries_sent += size;
  st.report->requests += 1;
  st.outstanding += 1;
  auto started = clock::now();
  self->request(st.node, st.timeout, queue_atom::value, std::move(batch))
    .then(
      [self, size, started](ok_atom) {
        auto& st = self->state;
        st.report->latencies_us.push_back(
          std::chrono::duration<double, std::micro>(clock::now() - started)
            .count());
        st.report->entries_acknowledged += size;
        *st.progress += size;
        st.outstanding -= 1;
        send_next(self);
      },
      [self](caf::error& err) {
        auto& st = self->state;
        st.report->errors += 1;
        if (!st.report->first_error)
          st.report->first_error = err;
        st.outstanding -= 1;
        // A node that is gone or refuses will not serve the rest either.
        st.next = st.batches.size();
        send_next(self);
      });
}

caf::behavior queue_pipeline(pipeline_actor* self, node_actor node,
                             std::vector<std::vector<secret_entry>> batches,
                             std::size_t window, caf::timespan timeout,
                             std::shared_ptr<std::atomic<uint64_t>> progress,
                             std::shared_ptr<queue_report> report) {
  auto& st = self->state;
  st.node = std::move(node);
  st.timeout = timeout;
  st.progress = std::move(progress);
  st.report = std::move(report);
  st.batches = std::move(batches);
  for (std::size_t i = 0; i < std::max<std::size_t>(window, 1); ++i)
    send_next(self);
  return {[](caf::unit_t) {}};
}

} // namespace

caf::actor spawn_queue_pipeline(caf::actor_system& sys, node_actor node,
                                std::vector<std::vector<secret_entry>> batches,
                                std::size_t window, caf::timespan timeout,
                                std::shared_ptr<std::atomic<uint64_t>> progress,
                                std::shared_ptr<queue_report> report) {
  return sys.spawn(queue_pipeline, std::move(node), std::move(batches), window,
                   timeout, std::move(progress), std::move(report));
}

void await_queue_pipeline(caf::actor_system& sys, const caf::actor& pipeline,
                          const std::atomic<uint64_t>& progress,
                          uint64_t total, bool show_progress) {
  caf::scoped_actor self{sys};
  self->monitor(pipeline);
  bool done = false;
  auto draw = [&] {
    if (!show_progress)
      return;
    auto acknowledged = progress.load();
    auto fraction = total == 0 ? 1.0 : double(acknowledged) / total;
    int filled = static_cast<int>(fraction * 40);
    std::fprintf(stderr, "\r[%s%s] %3d%% %llu/%llu entries",
                 std::string(filled, '#').c_str(),
                 std::string(40 - filled, ' ').c_str(),
                 static_cast<int>(fraction * 100),
                 static_cast<unsigned long long>(acknowledged),
                 static_cast<unsigned long long>(total));
  };
  while (!done) {
    self->receive([&](caf::down_msg&) { done = true; },
                  caf::after(std::chrono::milliseconds{200}) >> draw);
  }
  draw();
  if (show_progress)
    std::fputc('\n', stderr);
}

std::optional<cli_failure> stats_of_node(session& s, const std::string& host,
                                         uint16_t port, node_stats& result) {
  node_address address;
  address.host = host;
  address.port = port;
  address.timeout = s.address.timeout;
  session one{s.sys, address};
  auto failed = connect_node(s.sys, host, port, one.timeout(), one.node);
  if (!failed)
    failed = one.ask(result, stats_atom::value);
  return failed;
}

} // namespace coalesce
