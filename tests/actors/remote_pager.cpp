#define CAF_SUITE actors.remote_pager
#include <caf/test/dsl.hpp>

#include <coalesce/actors/remote_pager.hpp>

#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <coalesce/actors/backfill_scheduler.hpp>
#include <coalesce/actors/timeline_actors.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>

#include "mailbox.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

/// What the stand-in for the middleman answers a connect with, chosen by
/// the test: the handle of "the other node" (a real timeline actor over
/// real RocksDB, standing in for the remote gateway, which forwards the
/// same pager messages to its timeline), a refusal, or silence.
struct connector_script {
  strong_actor_ptr target;
  std::set<std::string> interface;
  error refusal;
  bool silent = false;
  /// Every connect asked for: (host, port).
  std::vector<std::pair<std::string, uint16_t>> asked;
  /// The connects left unanswered while silent.
  std::vector<typed_response_promise<node_id, strong_actor_ptr,
                                     std::set<std::string>>>
    held;
};

using open_atom = atom_constant<atom("open")>;

/// The stand-in's own message: answer the held connects with the target
/// (promises are delivered from inside their actor, hence a message).
using stand_in_actor = node_connector_actor::extend<reacts_to<open_atom>>;

stand_in_actor::behavior_type
stand_in_connector(stand_in_actor::pointer self,
                   std::shared_ptr<connector_script> script) {
  return {
    [self, script](open_atom) {
      for (auto& held : std::exchange(script->held, {}))
        held.deliver(self->node(), script->target, script->interface);
    },
    [self, script](connect_atom, std::string& host, uint16_t port)
      -> result<node_id, strong_actor_ptr, std::set<std::string>> {
      script->asked.emplace_back(host, port);
      if (script->refusal)
        return script->refusal;
      if (script->silent) {
        auto promise = self->make_response_promise<node_id, strong_actor_ptr,
                                                   std::set<std::string>>();
        script->held.push_back(promise);
        return promise;
      }
      return {self->node(), script->target, script->interface};
    },
  };
}

timeline_event event(const std::string& id) {
  return timeline_event{id, "m.room.message", 100, "body of " + id};
}

using ids = std::vector<std::string>;

constexpr auto pager_timeout = std::chrono::seconds{2};

const node_address other_node{"10.0.0.2", 4301};

struct remote_pager_fixture : test_coordinator_fixture<test_config> {
  temp_dir dir;
  std::shared_ptr<storage::database> db;
  /// The other node's timeline.
  timeline_actor remote_timeline;
  std::shared_ptr<connector_script> script
    = std::make_shared<connector_script>();
  stand_in_actor connector;
  pager_actor pager;
  backfill_scheduler_actor scheduler;

  remote_pager_fixture() {
    auto opened = storage::database::open(
      {dir.sub("db"), storage::durability::synced, nullptr});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
    start_remote_timeline();
    connector = sys.spawn(stand_in_connector, script);
    pager = spawn_remote_pager(sys, connector, other_node, pager_timeout);
    backfill_scheduler_options options;
    options.pager_timeout = pager_timeout;
    scheduler = spawn_backfill_scheduler(sys, pager, options);
    sched.run();
  }

  ~remote_pager_fixture() override {
    // The remote pager's own connect timeout answered the held connects'
    // requests; nobody waits for them.
    script->held.clear();
    anon_send_exit(scheduler, exit_reason::kill);
    anon_send_exit(pager, exit_reason::kill);
    anon_send_exit(connector, exit_reason::kill);
    anon_send_exit(remote_timeline, exit_reason::kill);
    sched.run();
  }

  /// A timeline actor over the database, which the connector hands out.
  void start_remote_timeline() {
    remote_timeline = sys.spawn(timeline_store, db);
    script->target = actor_cast<strong_actor_ptr>(remote_timeline);
    script->interface = sys.message_types<timeline_actor>();
  }

  void append(const std::string& room, const ids& event_ids) {
    std::vector<timeline_event> events;
    for (auto& id : event_ids)
      events.push_back(event(id));
    self->send(remote_timeline, append_atom::value, room, events);
    sched.run();
    next_reply<uint64_t>(sys, self);
  }

  backfill_ticket enqueue(const std::string& room, uint32_t max_batches) {
    backfill_request request;
    request.room = room;
    request.batch_size = 2;
    request.max_batches = max_batches;
    self->send(scheduler, enqueue_atom::value, request);
    sched.run();
    return next_reply<backfill_ticket>(sys, self);
  }

  backfill_result finished(backfill_ticket ticket) {
    self->send(scheduler, await_atom::value, ticket);
    sched.run();
    return next_reply<backfill_result>(sys, self);
  }

  ids event_ids(const backfill_result& result) {
    ids out;
    for (auto& e : result.events)
      out.push_back(e.event_id);
    return out;
  }

  /// A page asked of the remote pager directly, which must fail: the
  /// sentence its error carries.
  std::string page_error() {
    self->send(pager, page_atom::value, std::string{"!r"}, uint32_t{2});
    sched.run();
    auto err = next_error(self);
    CAF_CHECK_EQUAL(err.category(), errc_category);
    return sys.render(err);
  }
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(remote_pager_tests, remote_pager_fixture)

CAF_TEST(a backfill pages the other nodes timeline and commits its pages there) {
  append("!r", {"e1", "e2", "e3", "e4"});
  auto first = finished(enqueue("!r", 1));
  CAF_CHECK_EQUAL(first.reason, stop_reason::batch_limit_reached);
  CAF_CHECK_EQUAL(event_ids(first), (ids{"e4", "e3"}));
  // The commit moved the other node's position: the next run goes on.
  auto second = finished(enqueue("!r", 0));
  CAF_CHECK_EQUAL(second.reason, stop_reason::reached_timeline_start);
  CAF_CHECK_EQUAL(event_ids(second), (ids{"e2", "e1"}));
  using asked = std::vector<std::pair<std::string, uint16_t>>;
  CAF_CHECK_EQUAL(script->asked, (asked{{"10.0.0.2", 4301}}));
}

CAF_TEST(a node that refuses the connection fails the run and is named) {
  append("!r", {"e1", "e2"});
  script->refusal = make_error(sec::cannot_connect_to_node);
  CAF_CHECK_EQUAL(finished(enqueue("!r", 0)).reason, stop_reason::failed);
  auto sentence = page_error();
  CAF_CHECK(contains(sentence, "cannot connect to the node at 10.0.0.2:4301"));
  // Nothing was committed: once the node serves, the run loads everything.
  script->refusal = error{};
  auto later = finished(enqueue("!r", 0));
  CAF_CHECK_EQUAL(event_ids(later), (ids{"e2", "e1"}));
}

CAF_TEST(a connection that is never answered fails the run at the pager timeout) {
  script->silent = true;
  auto ticket = enqueue("!r", 0);
  sched.advance_time(pager_timeout - 1ms);
  sched.run();
  self->send(scheduler, await_atom::value, ticket);
  sched.run();
  CAF_CHECK(self->mailbox().empty());
  sched.advance_time(1ms);
  sched.run();
  CAF_CHECK_EQUAL(next_reply<backfill_result>(sys, self).reason,
                  stop_reason::failed);
}

CAF_TEST(a waiting request learns that the connection was not answered) {
  script->silent = true;
  self->send(pager, page_atom::value, std::string{"!r"}, uint32_t{2});
  sched.run();
  CAF_CHECK(self->mailbox().empty());
  sched.advance_time(pager_timeout);
  sched.run();
  auto sentence = sys.render(next_error(self));
  CAF_CHECK(contains(sentence, "10.0.0.2:4301 did not answer the connection "
                               "within 2s"));
}

CAF_TEST(requests that arrive while connecting share one connection) {
  append("!r", {"e1", "e2"});
  script->silent = true;
  self->send(pager, page_atom::value, std::string{"!r"}, uint32_t{1});
  self->send(pager, page_atom::value, std::string{"!r"}, uint32_t{2});
  sched.run();
  CAF_CHECK_EQUAL(script->asked.size(), 1u);
  // The connection opens: both pages are answered by the other node.
  self->send(connector, open_atom::value);
  sched.run();
  CAF_CHECK_EQUAL(next_reply<timeline_page>(sys, self).events.size(), 1u);
  CAF_CHECK_EQUAL(next_reply<timeline_page>(sys, self).events.size(), 2u);
}

CAF_TEST(a peer that does not serve pages is refused) {
  script->target = actor_cast<strong_actor_ptr>(connector);
  script->interface = sys.message_types<node_connector_actor>();
  auto sentence = page_error();
  CAF_CHECK(contains(sentence, "the peer at 10.0.0.2:4301 does not serve "
                               "timeline pages"));
}

CAF_TEST(a remote timeline that went down is connected again by the next run) {
  append("!r", {"e1", "e2", "e3", "e4"});
  CAF_CHECK_EQUAL(event_ids(finished(enqueue("!r", 1))), (ids{"e4", "e3"}));
  anon_send_exit(remote_timeline, exit_reason::kill);
  sched.run();
  start_remote_timeline(); // the node restarted over its data
  sched.run();
  CAF_CHECK_EQUAL(event_ids(finished(enqueue("!r", 0))), (ids{"e2", "e1"}));
  CAF_CHECK_EQUAL(script->asked.size(), 2u);
}

CAF_TEST(requests waiting for the connection are answered when it stops) {
  script->silent = true;
  self->send(pager, page_atom::value, std::string{"!r"}, uint32_t{2});
  self->send(pager, commit_atom::value, std::string{"!r"}, page_cursor{});
  sched.run();
  CAF_CHECK(self->mailbox().empty());
  anon_send_exit(pager, exit_reason::kill);
  sched.run();
  for (int i = 0; i < 2; ++i)
    CAF_CHECK_EQUAL(next_error(self),
                    make_error(errc::stopped_before_answer,
                               "the remote pager stopped"));
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST(scheduler_remote_pager must be host and port or empty) {
  auto problem = [](const std::string& address) {
    backfill_scheduler_options options;
    options.remote_pager = address;
    return options.validate();
  };
  CAF_CHECK_EQUAL(problem(""), "");
  CAF_CHECK_EQUAL(problem("127.0.0.1:4301"), "");
  CAF_CHECK_EQUAL(problem("[::1]:4301"), "");
  for (auto bad : {"127.0.0.1", "127.0.0.1:", ":4301", "host:0",
                   "host:65536", "host:43x1", "host:-1"})
    CAF_CHECK(contains(problem(bad), "coalesce.scheduler-remote-pager = \""
                                       + std::string{bad} + "\""));
  auto parsed = parse_node_address("node-b.example:4301");
  CAF_REQUIRE(parsed);
  CAF_CHECK_EQUAL(parsed->host, "node-b.example");
  CAF_CHECK_EQUAL(parsed->port, 4301u);
}
