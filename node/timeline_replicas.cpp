#include <coalesce/node/timeline_replicas.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/messages/capture_stamp.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/node/replica_calls.hpp>

namespace coalesce {

namespace {

using replica_calls::ask;
using replica_calls::make_tally;
using replica_calls::node_text;

/// What a coordinator knows of one room it prepared.
struct room_coordination {
  bool prepared = false;
  /// The ballot the replicas promised it.
  uint64_t ballot = 0;
  /// The room as this replica holds it, the majority's log.
  room_version local;
  /// The highest ballot seen promised (the next one goes above it).
  uint64_t seen = 0;
  /// The generation of the lists in use it was prepared under: prepared
  /// under other lists, it prepares again.
  uint64_t lists = 0;
};

struct coordinator_state
  : replica_calls::coordinator_base<timeline_replica_store_actor> {
  static inline const char* name = "timeline_coordinator";
  /// What the replicas' log lines call the data.
  static inline const char* kind = "rooms";
  std::unordered_map<std::string, room_coordination> rooms;
};

using coordinator_pointer
  = timeline_coordinator_actor::stateful_pointer<coordinator_state>;

/// Rooms a coordinator remembers at most; past it, it forgets the idle
/// ones (a forgotten room is prepared again, which is safe).
constexpr std::size_t max_remembered = 65536;

using done_fn = std::function<void(caf::error)>;

using replica_calls::lists_in_use;

replica_calls::replica_set replicas_of(coordinator_pointer self,
                                       const std::string& room) {
  auto view = lists_in_use(self);
  return replica_calls::replicas_under_every_list(
    self, routing_key{key_kind::room, room}, view.get(), [](std::size_t) {});
}

/// Whether `node` is this one and its replica is catching up.
bool catching_up(coordinator_pointer self, std::size_t node) {
  const auto& settings = self->state.settings;
  return node == settings.self && settings.catching_up != nullptr
         && settings.catching_up->load();
}

room_coordination& coordination_of(coordinator_pointer self,
                                   const std::string& room) {
  auto& rooms = self->state.rooms;
  if (rooms.size() >= max_remembered && rooms.count(room) == 0) {
    for (auto i = rooms.begin(); i != rooms.end();)
      if (!self->state.queues.busy(i->first))
        i = rooms.erase(i);
      else
        ++i;
  }
  return rooms[room];
}

caf::error no_quorum(const std::string& room, const std::string& failures) {
  return make_error(errc::no_quorum,
                    "room " + room
                      + ": no majority of its replicas; failed replicas: "
                      + failures);
}

caf::error taken_over(const std::string& room) {
  return make_error(errc::no_quorum,
                    "room " + room
                      + ": another node coordinates it now (a majority of "
                        "its replicas promised a newer ballot); retry");
}

/// The log `part` ends, as a version.
room_version version_of(const room_suffix& part, const room_version& before) {
  auto result = before;
  result.segments = part.segments;
  result.head = std::max(before.head, part.head());
  if (part.positioned
      && (!result.positioned || part.position < result.position)) {
    result.positioned = true;
    result.position = part.position;
  }
  return result;
}

bool same_log(const room_version& x, const room_version& y) {
  return x.segments == y.segments && x.head == y.head;
}

// -- writing to every replica ---------------------------------------------------

/// Sends `part` under `ballot` to every replica of its room and calls
/// `done` once a majority took it (one that lacks events before it is
/// sent the log from where the two part), or with the error. This
/// replica must take it: the coordinator reads its own.
void replicate(coordinator_pointer self, uint64_t ballot, room_suffix part,
               done_fn done) {
  auto room = part.room;
  auto counted_under = replica_calls::lists_generation(self);
  auto set = replicas_of(self, room);
  const auto& nodes = set.nodes;
  auto target_head = part.head();
  auto target_segments = part.segments;
  auto preempted = std::make_shared<bool>(false);
  // Answered once a majority took the part and this node's replica
  // answered: the coordinator's view of its own replica must be right.
  struct progress {
    bool majority = false;
    bool local_answered = false;
    bool local_took = false;
    bool went_on = false;
  };
  auto round = std::make_shared<progress>();
  auto go_on = [=] {
    if (!round->majority || !round->local_answered || round->went_on)
      return;
    round->went_on = true;
    auto& c = coordination_of(self, room);
    if (round->local_took)
      c.local = version_of(part, c.local);
    else
      // On a majority, but not here: the next call prepares again and
      // brings this replica up to it.
      c.prepared = false;
    done(caf::none);
  };
  // A node asked for a room it keeps no replica of waits for no answer.
  round->local_answered = std::find(nodes.begin(), nodes.end(),
                                    self->state.settings.self)
                          == nodes.end();
  auto votes = make_tally(set, [=](bool ok, const std::string& failures) {
    // Majorities counted under lists that changed meanwhile may be ones the
    // new list's replicas never meet (session_replicas.cpp says how): not
    // answered ok, the next call prepares and counts under the new view.
    auto changed = ok && replica_calls::lists_moved_on(self, counted_under);
    if (ok && !changed) {
      round->majority = true;
      go_on();
      return;
    }
    round->went_on = true;
    // A newer coordinator took the room over, or what the replicas hold is
    // known no more: the next call prepares again.
    coordination_of(self, room).prepared = false;
    if (changed)
      done(make_error(errc::no_quorum,
                      "room " + room
                        + ": the cluster lists its replicas serve under "
                          "changed during the request (or this node was "
                          "paused meanwhile); retry"));
    else if (*preempted)
      done(taken_over(room));
    else
      done(no_quorum(room, failures));
  });
  auto self_index = self->state.settings.self;
  for (auto node : nodes) {
    auto failed = [=](const std::string& why) {
      (*votes)->failed(node, node_text(self, node), why);
    };
    auto took = [=](const room_answer& answer) {
      if (outcome_of(answer) != replica_outcome::applied)
        return false;
      if (node == self_index)
        round->local_took = true;
      (*votes)->succeeded(node);
      return true;
    };
    // Only this node's replica's first answer counts for `go_on`.
    auto local_answered = [=] {
      if (node != self_index)
        return;
      round->local_answered = true;
      go_on();
    };
    auto send_missing = [=](const room_version& theirs) {
      // This replica lacks events, or holds others no majority took: send
      // it the log from where the two part, as this replica holds it now.
      auto from = shared_prefix(theirs.segments, theirs.head,
                                target_segments, target_head);
      self
        ->request(self->state.local, caf::infinite, replica_atom::value,
                  room_atom::value, image_atom::value, room, from)
        .then(
          [=](room_suffix& image) {
            if (image.segments != target_segments
                || image.head() != target_head) {
              failed("is behind, and this replica did not take the write");
              return;
            }
            ask<room_answer>(
              self, node,
              [=](room_answer& answer) {
                if (!took(answer))
                  failed("refused the part of the log it lacks");
              },
              failed, room_atom::value, append_atom::value, ballot, image);
          },
          [=](caf::error& err) {
            failed("could not be sent the log: "
                   + self->system().render(err));
          });
    };
    ask<room_answer>(
      self, node,
      [=](room_answer& answer) {
        if (!took(answer)) {
          switch (outcome_of(answer)) {
            case replica_outcome::out_of_sync:
              if (node == self_index)
                failed("is behind its own coordinator");
              else
                send_missing(answer.version);
              break;
            case replica_outcome::preempted:
              *preempted = true;
              failed("promised a newer coordinator");
              break;
            default:
              failed("answered what no replica answers");
          }
        }
        local_answered();
      },
      [=](const std::string& why) {
        failed(why);
        local_answered();
      },
      room_atom::value, append_atom::value, ballot, part);
  }
}

// -- prepare ---------------------------------------------------------------------

/// What the replicas of one prepare round answered.
struct prepare_view {
  std::vector<std::size_t> nodes;
  /// The groups of `nodes` a majority of each of which counts.
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::optional<room_version>> answers;

  /// The index of a replica with the newest log.
  std::size_t newest() const {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < answers.size(); ++i)
      if (answers[i]
          && (!best
              || newer_log(answers[i]->segments, answers[i]->head,
                           answers[*best]->segments, answers[*best]->head)))
        best = i;
    return *best;
  }

  /// The furthest position any of them holds.
  std::optional<uint64_t> furthest_position() const {
    std::optional<uint64_t> result;
    for (const auto& x : answers)
      if (x && x->positioned && (!result || x->position < *result))
        result = x->position;
    return result;
  }

  /// Whether a majority of every group holds `log` and `position`
  /// already.
  bool settled(const room_version& log,
               std::optional<uint64_t> position) const {
    for (const auto& group : groups) {
      std::size_t holding = 0;
      for (std::size_t i = 0; i < answers.size(); ++i) {
        const auto& x = answers[i];
        if (x && same_log(*x, log) && x->positioned == position.has_value()
            && (!position || x->position == *position)
            && std::find(group.begin(), group.end(), nodes[i]) != group.end())
          ++holding;
      }
      if (holding < group.size() / 2 + 1)
        return false;
    }
    return true;
  }
};

/// Makes this replica hold the newest log and the furthest position of
/// the round, fetching what it lacks from `from_node`; `done(error)`.
void adopt(coordinator_pointer self, const std::string& room,
           uint64_t ballot, const room_version& mine,
           const room_version& newest, std::size_t from_node,
           std::optional<uint64_t> position, done_fn done) {
  auto install = [=](room_suffix part) {
    part.positioned = position.has_value();
    part.position = position.value_or(0);
    self
      ->request(self->state.local, caf::infinite, replica_atom::value,
                room_atom::value, append_atom::value, ballot, part)
      .then(
        [=](room_answer& answer) {
          if (outcome_of(answer) == replica_outcome::applied
              && same_log(answer.version, newest))
            done(caf::none);
          else
            done(make_error(errc::no_quorum,
                            "room " + room
                              + ": this node's replica did not take the "
                                "newest log"));
        },
        [done](caf::error& err) { done(std::move(err)); });
  };
  if (same_log(mine, newest)) {
    room_suffix part;
    part.room = room;
    part.segments = newest.segments;
    part.from = newest.head;
    install(std::move(part));
    return;
  }
  auto from = shared_prefix(mine.segments, mine.head, newest.segments,
                            newest.head);
  ask<room_suffix>(
    self, from_node,
    [=](room_suffix& image) {
      if (!same_log(version_of(image, room_version{}), newest)) {
        done(make_error(errc::no_quorum,
                        "room " + room
                          + ": its newest replica changed while read"));
        return;
      }
      install(std::move(image));
    },
    [=](const std::string& why) {
      done(make_error(errc::no_quorum, "room " + room
                                         + ": the replica with its newest "
                                           "log "
                                         + why));
    },
    room_atom::value, image_atom::value, room, from);
}

/// Prepares `room` unless it is prepared: promises a new ballot at a
/// majority, adopts the newest log and the furthest position they show,
/// and writes both to a majority under the ballot. A majority that
/// promised a higher ballot makes it try once more above that one.
void prepare(coordinator_pointer self, const std::string& room, done_fn done,
             int attempts_left = 2) {
  if (auto refusal = replica_calls::lists_unknown(self, "room " + room)) {
    done(std::move(*refusal));
    return;
  }
  auto view_of_lists = lists_in_use(self);
  auto lists = view_of_lists ? view_of_lists->generation : 0;
  auto& c = coordination_of(self, room);
  if (c.prepared && c.lists == lists) {
    done(caf::none);
    return;
  }
  c.prepared = false;
  c.lists = lists;
  auto& st = self->state;
  if (catching_up(self, st.settings.self)) {
    // Its own replica may lack what it acknowledged: the client takes the
    // room to the next replica (cluster_client.hpp fails over on this).
    done(make_error(errc::catching_up,
                    "room " + room
                      + ": this node's replica is catching up from its "
                        "peers; the next replica serves it"));
    return;
  }
  auto ballot = replica_calls::next_ballot(
    st.ballots, st.settings.map.id_of(st.settings.self), c.seen);
  auto view = std::make_shared<prepare_view>();
  auto set = replicas_of(self, room);
  view->nodes = set.nodes;
  view->groups = set.groups;
  view->answers.resize(view->nodes.size());
  auto preempted = std::make_shared<bool>(false);
  // The round goes on once a majority answered and this node's replica
  // did (or failed): the coordinator reads its own replica.
  struct progress {
    bool majority = false;
    bool own_answered = false;
    bool went_on = false;
    std::string own_failure;
  };
  auto round = std::make_shared<progress>();
  auto own = self->state.settings.self;
  // A node asked for a room it keeps no replica of waits for no answer.
  if (std::find(view->nodes.begin(), view->nodes.end(), own)
      == view->nodes.end()) {
    round->own_answered = true;
    round->own_failure = "is not one of the room's replicas";
  }
  auto go_on = std::make_shared<std::function<void()>>();
  *go_on = [=] {
    if (!round->majority || !round->own_answered || round->went_on)
      return;
    round->went_on = true;
    const auto& nodes = view->nodes;
    auto self_at = static_cast<std::size_t>(
      std::find(nodes.begin(), nodes.end(), self->state.settings.self)
      - nodes.begin());
    if (self_at == nodes.size() || !view->answers[self_at]) {
      // The coordinator reads its own replica: without it, no round.
      done(make_error(errc::no_quorum,
                      "room " + room + ": this node's own replica "
                        + round->own_failure));
      return;
    }
    auto best = view->newest();
    auto newest = *view->answers[best];
    auto position = view->furthest_position();
    auto mine = *view->answers[self_at];
    adopt(self, room, ballot, mine, newest, nodes[best], position,
          [=](caf::error err) {
            if (err) {
              done(std::move(err));
              return;
            }
            auto settled = newest;
            settled.positioned = position.has_value();
            settled.position = position.value_or(0);
            auto finish = [=](caf::error err) {
              if (err) {
                done(std::move(err));
                return;
              }
              auto& c = coordination_of(self, room);
              c.prepared = true;
              c.ballot = ballot;
              c.local = settled;
              done(caf::none);
            };
            if (view->settled(newest, position)) {
              finish(caf::none);
              return;
            }
            // The log a majority will hold from now on.
            room_suffix part;
            part.room = room;
            part.segments = newest.segments;
            part.from = newest.head;
            part.positioned = settled.positioned;
            part.position = settled.position;
            replicate(self, ballot, std::move(part), finish);
          });
  };
  auto votes = make_tally(set, [=](bool ok, const std::string& failures) {
    if (!ok) {
      round->went_on = true;
      if (*preempted && attempts_left > 0) {
        prepare(self, room, done, attempts_left - 1);
        return;
      }
      done(no_quorum(room, failures));
      return;
    }
    round->majority = true;
    (*go_on)();
  });
  for (std::size_t i = 0; i < view->nodes.size(); ++i) {
    auto node = view->nodes[i];
    auto settled = [=](const std::string& why) {
      if (node != own)
        return;
      if (!why.empty())
        round->own_failure = node_text(self, node) + " " + why;
      round->own_answered = true;
      (*go_on)();
    };
    if (catching_up(self, node)) {
      (*votes)->failed(node, node_text(self, node),
                       "is catching up from its peers");
      settled("is catching up from its peers");
      continue;
    }
    ask<room_answer>(
      self, node,
      [=](room_answer& answer) {
        auto& c = coordination_of(self, room);
        c.seen = std::max(c.seen, answer.version.promised);
        if (outcome_of(answer) == replica_outcome::applied) {
          view->answers[i] = std::move(answer.version);
          (*votes)->succeeded(node);
        } else {
          *preempted = true;
          (*votes)->failed(node, node_text(self, node),
                           "promised a newer coordinator");
        }
        settled(view->answers[i] ? "" : "promised a newer coordinator");
      },
      [=](const std::string& why) {
        (*votes)->failed(node, node_text(self, node), why);
        settled(why);
      },
      room_atom::value, prepare_atom::value, room, ballot);
  }
}

/// Runs `call` for `room` in its turn, once it is prepared; `call` gets
/// the error of the prepare, if any, and what ends it.
void prepared_turn(coordinator_pointer self, const std::string& room,
                   std::function<void(caf::error, std::function<void()>)>
                     call) {
  self->state.queues.in_turn(room, [=](std::function<void()> finish) {
    prepare(self, room, [=](caf::error err) { call(std::move(err), finish); });
  });
}

caf::error check_room(const std::string& room) {
  if (room.empty())
    return make_error(errc::invalid_request, "the room name is empty");
  return caf::none;
}

// -- the coordinator -----------------------------------------------------------------

timeline_coordinator_actor::behavior_type
timeline_coordinator(coordinator_pointer self,
                     timeline_replica_store_actor local,
                     coordinator_settings settings) {
  auto& st = self->state;
  st.local = std::move(local);
  st.peers.resize(settings.map.size());
  st.failing.resize(settings.map.size(), false);
  st.settings = std::move(settings);
  self->set_exit_handler([self](caf::exit_msg& msg) {
    self->state.calls.fail_all(make_error(errc::stopped_before_answer,
                                          "the rooms' coordinator stopped"));
    self->quit(msg.reason);
  });
  return {
    [self](page_atom, const std::string& room,
           uint32_t max_events) -> caf::result<timeline_page> {
      if (auto err = check_room(room))
        return err;
      auto promise = self->make_response_promise<timeline_page>();
      auto answer = self->state.calls.open(promise);
      prepared_turn(self, room, [=](caf::error err,
                                    std::function<void()> finish) {
        if (err) {
          answer(std::move(err));
          finish();
          return;
        }
        // This replica holds the majority's log and position.
        self
          ->request(self->state.local, caf::infinite, page_atom::value, room,
                    max_events)
          .then(
            [answer, finish](timeline_page& page) mutable {
              answer(std::move(page));
              finish();
            },
            [answer, finish](caf::error& err) mutable {
              answer(std::move(err));
              finish();
            });
      });
      return promise;
    },
    [self](commit_atom, const std::string& room,
           const page_cursor& cursor) -> caf::result<ok_atom> {
      if (auto err = check_room(room))
        return err;
      if (cursor.next > cursor.read_at)
        return make_error(errc::invalid_request,
                          "a page cursor cannot move the position forwards");
      auto promise = self->make_response_promise<ok_atom>();
      auto answer = self->state.calls.open(promise);
      prepared_turn(self, room, [=](caf::error err,
                                    std::function<void()> finish) {
        if (err) {
          answer(std::move(err));
          finish();
          return;
        }
        // The position as this replica holds it: a repair may have moved
        // it back since the prepare (a commit of another coordinator).
        self
          ->request(self->state.local, caf::infinite, replica_atom::value,
                    room_atom::value, image_atom::value, room,
                    std::numeric_limits<uint64_t>::max())
          .then(
            [=](room_suffix& held) {
              auto& c = coordination_of(self, room);
              if (held.positioned
                  && (!c.local.positioned || held.position < c.local.position)) {
                c.local.positioned = true;
                c.local.position = held.position;
              }
              if (cursor.next == cursor.read_at
                  || (c.local.positioned
                      && c.local.position != cursor.read_at)) {
                // Nothing to move, or stale: committed already.
                answer(ok_atom::value);
                finish();
                return;
              }
              if (cursor.read_at > c.local.head) {
                answer(make_error(
                  errc::invalid_request,
                  "a page cursor read at " + std::to_string(cursor.read_at)
                    + " lies beyond the room's newest event (head "
                    + std::to_string(c.local.head) + ")"));
                finish();
                return;
              }
              room_suffix part;
              part.room = room;
              part.segments = c.local.segments;
              part.from = c.local.head;
              part.positioned = true;
              part.position = cursor.next;
              replicate(self, c.ballot, std::move(part), [=](caf::error err) {
                if (err)
                  answer(std::move(err));
                else
                  answer(ok_atom::value);
                finish();
              });
            },
            [=](caf::error& err) {
              answer(std::move(err));
              finish();
            });
      });
      return promise;
    },
    [self](append_atom, const std::string& room,
           std::vector<timeline_event>& events) -> caf::result<uint64_t> {
      if (auto err = check_room(room))
        return err;
      for (const auto& x : events)
        if (x.event_id.empty())
          return make_error(errc::invalid_request,
                            "an event has an empty event_id");
      if (events.empty())
        return uint64_t{0};
      auto promise = self->make_response_promise<uint64_t>();
      auto answer = self->state.calls.open(promise);
      prepared_turn(self, room, [=, events = std::move(events)](
                                  caf::error err,
                                  std::function<void()> finish) mutable {
        if (err) {
          answer(std::move(err));
          finish();
          return;
        }
        const auto& c = coordination_of(self, room);
        room_suffix part;
        part.room = room;
        part.segments = c.local.segments;
        part.from = c.local.head;
        if (last_ballot(part.segments) != c.ballot)
          part.segments.push_back(timeline_segment{c.ballot, part.from});
        part.positioned = c.local.positioned;
        part.position = c.local.position;
        auto count = static_cast<uint64_t>(events.size());
        part.events = std::move(events);
        replicate(self, c.ballot, std::move(part), [=](caf::error err) {
          if (err)
            answer(std::move(err));
          else
            answer(count);
          finish();
        });
      });
      return promise;
    },
    [self](peer_up_atom, uint64_t index, const node_actor& gateway) {
      if (index < self->state.peers.size())
        self->state.peers[index] = gateway;
    },
    [self](peer_down_atom, uint64_t index) {
      if (index < self->state.peers.size())
        self->state.peers[index] = nullptr;
    },
  };
}

// -- the endpoint ------------------------------------------------------------------

room_replica_endpoint_actor::behavior_type
room_replica_endpoint(room_replica_endpoint_actor::pointer self,
                      timeline_replica_store_actor local,
                      std::shared_ptr<const std::atomic<bool>> catching) {
  auto refused = [catching]() -> std::optional<caf::error> {
    if (catching == nullptr || !catching->load())
      return std::nullopt;
    return make_error(errc::catching_up,
                      "this replica of rooms is catching up from its peers");
  };
  return {
    // Which lists the coordinator counted is the gateway's to check
    // (`list_stamp`); the store never sees it.
    [=](replica_atom a, room_atom r, prepare_atom verb, std::string& room,
        uint64_t ballot, const list_stamp&) -> caf::result<room_answer> {
      if (auto refusal = refused())
        return std::move(*refusal);
      return self->delegate(local, a, r, verb, std::move(room), ballot);
    },
    [=](replica_atom a, room_atom r, append_atom verb, uint64_t ballot,
        room_suffix& part, const list_stamp&) -> caf::result<room_answer> {
      if (auto refusal = refused())
        return std::move(*refusal);
      return self->delegate(local, a, r, verb, ballot, std::move(part));
    },
    [=](replica_atom a, room_atom r, image_atom verb, std::string& room,
        uint64_t from, const list_stamp&) {
      return self->delegate(local, a, r, verb, std::move(room), from);
    },
  };
}

} // namespace

timeline_coordinator_actor
spawn_timeline_coordinator(caf::actor_system& sys,
                           timeline_replica_store_actor local,
                           coordinator_settings settings) {
  return sys.spawn(timeline_coordinator, std::move(local),
                   std::move(settings));
}

room_replica_endpoint_actor
spawn_room_replica_endpoint(caf::actor_system& sys,
                            timeline_replica_store_actor local,
                            std::shared_ptr<const std::atomic<bool>>
                              catching_up) {
  return sys.spawn(room_replica_endpoint, std::move(local),
                   std::move(catching_up));
}

std::vector<caf::actor> replicated_rooms::subscribers() const {
  if (!coordinator)
    return {};
  return {caf::actor_cast<caf::actor>(coordinator)};
}

void replicated_rooms::stop(caf::actor_system& sys, caf::timespan limit) {
  if (!coordinator)
    return;
  caf::scoped_actor self{sys};
  self->request(scheduler, limit, shutdown_atom::value)
    .receive([](ok_atom) {}, [](caf::error&) {});
  std::vector<caf::actor> actors{caf::actor_cast<caf::actor>(scheduler),
                                 caf::actor_cast<caf::actor>(coordinator),
                                 caf::actor_cast<caf::actor>(endpoint)};
  for (const auto& x : actors)
    caf::anon_send_exit(x, caf::exit_reason::user_shutdown);
  for (const auto& x : actors)
    self->wait_for(x);
  coordinator = timeline_coordinator_actor{};
}

replicated_rooms
start_replicated_rooms(caf::actor_system& sys,
                       timeline_replica_store_actor local,
                       const coordinator_settings& settings,
                       backfill_scheduler_options scheduler) {
  replicated_rooms result;
  // A caller in this process may be a cluster client that fails over when
  // this node is slow, its enqueue's answer reaching nobody: like a caller
  // on another node, it claims its ticket before its pages are committed.
  scheduler.local_callers_claim = true;
  result.coordinator = spawn_timeline_coordinator(sys, local, settings);
  result.endpoint = spawn_room_replica_endpoint(sys, local,
                                                settings.catching_up);
  result.scheduler = spawn_backfill_scheduler(
    sys, caf::actor_cast<pager_actor>(result.coordinator),
    std::move(scheduler));
  return result;
}

} // namespace coalesce
