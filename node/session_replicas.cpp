#include <coalesce/node/session_replicas.hpp>

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/capture_stamp.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/node/replica_calls.hpp>

namespace coalesce {

namespace {

/// What a coordinator knows of one session it prepared.
struct coordination {
  bool prepared = false;
  /// The ballot the replicas promised it.
  uint64_t ballot = 0;
  /// The version of this replica's content, which every delta builds on.
  session_version local;
  /// The highest generation a majority showed, and its claimant.
  uint64_t floor = 0;
  std::string claimant;
  /// Whether anything of the session is stored.
  bool stored = false;
  /// The highest ballot seen promised (the next one goes above it).
  uint64_t seen = 0;
  /// The generation of the lists in use it was prepared under: prepared
  /// under other lists, it prepares again.
  uint64_t lists = 0;
};

struct coordinator_state
  : replica_calls::coordinator_base<session_replica_io_actor> {
  static inline const char* name = "session_coordinator";
  /// What the replicas' log lines call the data.
  static inline const char* kind = "sessions";
  std::unordered_map<std::string, coordination> sessions;
  /// Writes to each peer, sent in batches.
  replica_calls::peer_batches<session_delta, replica_answer> batches;
};

using coordinator_pointer
  = session_coordinator_actor::stateful_pointer<coordinator_state>;

/// Sessions a coordinator remembers at most; past it, it forgets the
/// idle ones (a forgotten session is prepared again, which is safe).
constexpr std::size_t max_remembered = 65536;

/// Runs `call` once every earlier call of `session` finished.
void in_turn(coordinator_pointer self, const std::string& session,
             replica_calls::key_queues::call_fn call) {
  self->state.queues.in_turn(session, std::move(call));
}

template <class... Ts>
auto open_call(coordinator_pointer self,
               caf::typed_response_promise<Ts...> promise) {
  return self->state.calls.open(std::move(promise));
}

// -- talking to replicas ---------------------------------------------------------

using replica_calls::lists_in_use;
using replica_calls::lists_generation;
using replica_calls::lists_unknown;
using replica_calls::in_rounds;

replica_calls::replica_set replicas_of(coordinator_pointer self,
                                       const std::string& session) {
  auto view = lists_in_use(self);
  return replica_calls::replicas_under_every_list(
    self, routing_key{key_kind::session, session}, view.get(),
    [self](std::size_t n) { self->state.batches.peers.resize(n); });
}

/// Whether `node` is this one and its replica is catching up: it answers
/// no read.
bool catching_up(coordinator_pointer self, std::size_t node) {
  const auto& settings = self->state.settings;
  return node == settings.self && settings.catching_up != nullptr
         && settings.catching_up->load();
}

using replica_calls::ask;
using replica_calls::make_tally;
using replica_calls::node_text;

caf::error no_quorum(const std::string& session,
                     const std::string& failures) {
  return make_error(errc::no_quorum,
                    "session " + session
                      + ": no majority of its replicas; failed replicas: "
                      + failures);
}

/// A write or claim a majority took while the lists in use changed
/// (`counted_under`, the view's generation when its replicas were chosen,
/// is no longer the current one): the majority it counted may be one the
/// new list's replicas never meet (a peer that restarts under a new list
/// pulls what its peers hold as it learns of them; what they take after
/// that, under a count it has not joined, it would not see). Not answered
/// ok: the persister retries, prepared and counted under the new view.
std::optional<caf::error> lists_changed_during(coordinator_pointer self,
                                               const std::string& session,
                                               uint64_t counted_under) {
  if (!replica_calls::lists_moved_on(self, counted_under))
    return std::nullopt;
  return make_error(errc::no_quorum,
                    "session " + session
                      + ": the cluster lists its replicas serve under "
                        "changed during the write (or this node was paused "
                        "meanwhile); it is written again under the new ones");
}

/// A ballot above every one seen for the session.
uint64_t next_ballot(coordinator_pointer self, const coordination& c) {
  auto& st = self->state;
  return replica_calls::next_ballot(
    st.ballots, st.settings.map.id_of(st.settings.self), c.seen);
}

coordination& coordination_of(coordinator_pointer self,
                              const std::string& session) {
  auto& sessions = self->state.sessions;
  if (sessions.size() >= max_remembered && sessions.count(session) == 0) {
    for (auto i = sessions.begin(); i != sessions.end();)
      if (!self->state.queues.busy(i->first))
        i = sessions.erase(i);
      else
        ++i;
  }
  return sessions[session];
}

// -- prepare ---------------------------------------------------------------------

/// The newest content a round showed and where it is.
struct round_view {
  std::vector<std::optional<replica_answer>> answers;
  std::vector<std::size_t> nodes;

  /// The index in `nodes` of a replica with the newest content.
  std::optional<std::size_t> newest() const {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < answers.size(); ++i)
      if (answers[i]
          && (!best
              || newer_content(answers[i]->version,
                               answers[*best]->version)))
        best = i;
    return best;
  }
};

/// Makes this replica hold `from`'s content (fetching its image), under
/// `ballot`; `done(error)`.
void pull_image(coordinator_pointer self, const std::string& session,
                std::size_t from, uint64_t ballot,
                std::function<void(caf::error)> done) {
  ask<session_image>(
    self, from,
    [self, ballot, done](session_image& image) {
      self
        ->request(self->state.local, caf::infinite, replica_atom::value,
                  install_atom::value, ballot, image)
        .then(
          [done](replica_answer& answer) {
            if (outcome_of(answer) == replica_outcome::applied)
              done(caf::none);
            else
              done(make_error(errc::no_quorum,
                              "this replica took no newer content"));
          },
          [done](caf::error& err) { done(std::move(err)); });
    },
    [self, session, done](const std::string& why) {
      done(make_error(errc::no_quorum, "session " + session
                                         + ": the replica with its newest "
                                           "content "
                                         + why));
    },
    image_atom::value, session);
}

/// Prepares `session` unless it is prepared (or `again`): promises a new
/// ballot at a majority and brings this replica up to the newest content
/// they show. `done(error)`. A majority that promised a higher ballot
/// makes it try once more above that one.
void prepare(coordinator_pointer self, const std::string& session,
             bool again, std::function<void(caf::error)> done,
             int attempts_left = 2) {
  if (auto refusal = lists_unknown(self, "session " + session)) {
    done(std::move(*refusal));
    return;
  }
  auto& c = coordination_of(self, session);
  auto lists = lists_generation(self);
  if (c.prepared && !again && c.lists == lists) {
    done(caf::none);
    return;
  }
  c.prepared = false;
  c.lists = lists;
  auto ballot = next_ballot(self, c);
  auto set = replicas_of(self, session);
  const auto& nodes = set.nodes;
  auto view = std::make_shared<round_view>();
  view->nodes = nodes;
  view->answers.resize(nodes.size());
  auto preempted = std::make_shared<bool>(false);
  auto votes = make_tally(set, [=](bool ok, const std::string& failures) {
    if (!ok) {
      if (*preempted && attempts_left > 0) {
        prepare(self, session, true, done, attempts_left - 1);
        return;
      }
      done(no_quorum(session, failures));
      return;
    }
    auto best = *view->newest();
    const auto& newest = view->answers[best]->version;
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("sessions: {} prepared at ballot {}: newest {} on {}",
                    session, ballot, version_text(newest),
                    node_text(self, nodes[best]));
    auto& c = coordination_of(self, session);
    c.floor = 0;
    c.claimant.clear();
    c.stored = false;
    for (const auto& answer : view->answers) {
      if (!answer)
        continue;
      const auto& v = answer->version;
      if (v.generation > c.floor
          || (v.generation == c.floor && c.claimant.empty()))
        c.floor = v.generation, c.claimant = v.claimant;
      c.stored = c.stored || v.generation > 0 || !v.claimant.empty()
                 || v.content != static_cast<uint8_t>(session_content::none);
    }
    auto self_at = std::find(nodes.begin(), nodes.end(),
                             self->state.settings.self)
                   - nodes.begin();
    auto finish = [=](caf::error err) {
      if (err) {
        // This replica stays behind (its disk may be failing): deltas on
        // the newest version still reach a majority through the others,
        // and it answers them `out_of_sync` until a later prepare.
        spdlog::warn("sessions: this replica could not take the newest "
                     "content of session {}: {}",
                     session, self->system().render(err));
      }
      auto& c = coordination_of(self, session);
      c.prepared = true;
      c.ballot = ballot;
      c.local = newest;
      done(caf::none);
    };
    const auto& mine = view->answers[self_at];
    if (mine && same_content(mine->version, newest)) {
      finish(caf::none);
      return;
    }
    pull_image(self, session, nodes[best], ballot, finish);
  });
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (catching_up(self, nodes[i])) {
      (*votes)->failed(nodes[i], node_text(self, nodes[i]),
                       "is catching up from its peers");
      continue;
    }
    ask<replica_answer>(
      self, nodes[i],
      [=](replica_answer& answer) {
        auto& c = coordination_of(self, session);
        c.seen = std::max(c.seen, answer.version.promised);
        if (outcome_of(answer) == replica_outcome::applied) {
          view->answers[i] = answer;
          (*votes)->succeeded(nodes[i]);
        } else {
          *preempted = true;
          (*votes)->failed(nodes[i], node_text(self, nodes[i]),
                           "promised a newer coordinator");
        }
      },
      [=](const std::string& why) {
        (*votes)->failed(nodes[i], node_text(self, nodes[i]), why);
      },
      prepare_atom::value, session, ballot);
  }
}

// -- writes ----------------------------------------------------------------------

/// What a failed round of a write may do instead of answering its error:
/// true when it made the write once more (`worth_another_round`).
using again_fn
  = std::function<bool(const session_delta&, const caf::error&)>;

/// Sends `delta` to every replica of its session and calls `done` once a
/// majority applied it (the behind ones get the image), or with the error
/// unless `again` takes it.
void replicate_delta(coordinator_pointer self, session_delta delta,
                     std::function<void(caf::error)> done, again_fn again) {
  const auto& session = delta.session;
  auto counted_under = lists_generation(self);
  auto set = replicas_of(self, session);
  const auto& nodes = set.nodes;
  session_version target;
  target.ballot = delta.ballot;
  target.seq = delta.base_seq + 1;
  auto stale = std::make_shared<bool>(false);
  auto preempted = std::make_shared<bool>(false);
  auto local_applied = std::make_shared<bool>(false);
  auto votes = make_tally(set, [=](bool ok, const std::string& failures) {
    auto& c = coordination_of(self, session);
    auto changed = ok ? lists_changed_during(self, session, counted_under)
                      : std::nullopt;
    if (changed) {
      c.prepared = false;
      if (!again(delta, *changed))
        done(std::move(*changed));
      return;
    }
    if (ok && *local_applied) {
      c.local.ballot = target.ballot;
      c.local.seq = target.seq;
      c.local.content = static_cast<uint8_t>(
        delta.erase ? session_content::deleted : session_content::blob);
      c.floor = std::max(c.floor, delta.generation);
      c.stored = true;
      done(caf::none);
      return;
    }
    // Whatever happened, what this replica holds is known no more.
    c.prepared = false;
    if (ok) {
      done(caf::none);
      return;
    }
    if (*stale)
      done(make_error(errc::stale_generation,
                      "session " + session + ": generation "
                        + std::to_string(delta.generation)
                        + " was superseded on a majority of its replicas"));
    else if (auto err = no_quorum(session, failures); !again(delta, err))
      done(std::move(err));
  });
  auto self_index = self->state.settings.self;
  for (auto node : nodes) {
    auto failed = [=](const std::string& why) {
      (*votes)->failed(node, node_text(self, node), why);
    };
    auto took = [=](const replica_answer& answer) {
      if (outcome_of(answer) == replica_outcome::applied
          && same_content(answer.version, target)) {
        if (node == self_index)
          *local_applied = true;
        (*votes)->succeeded(node);
        return true;
      }
      return false;
    };
    auto on_answer = [=](replica_answer& answer) {
        if (took(answer))
          return;
        switch (outcome_of(answer)) {
          case replica_outcome::out_of_sync:
            if (node == self_index) {
              failed("is behind its own coordinator");
              return;
            }
            // This replica missed writes: send it the whole session as
            // this one holds it after the delta.
            self
              ->request(self->state.local, caf::infinite, replica_atom::value,
                        image_atom::value, session)
              .then(
                [=](session_image& image) {
                  if (!same_content(image.version, target)) {
                    failed("is behind, and this replica did not apply the "
                           "write");
                    return;
                  }
                  ask<replica_answer>(
                    self, node,
                    [=](replica_answer& installed) {
                      if (!took(installed))
                        failed("refused the whole session");
                    },
                    failed, install_atom::value, delta.ballot, image);
                },
                [=](caf::error& err) {
                  failed("could not be sent the session: "
                         + self->system().render(err));
                });
            return;
          case replica_outcome::preempted:
            *preempted = true;
            failed("promised a newer coordinator");
            return;
          case replica_outcome::stale:
            *stale = true;
            failed("holds a newer generation");
            return;
          default:
            failed("answered what no replica answers");
        }
      };
    if (node == self_index)
      ask<replica_answer>(self, node, on_answer, failed, write_atom::value,
                          delta);
    else
      replica_calls::ask_batched<replica_answer>(self, node, write_atom::value,
                                                 delta, on_answer, failed);
  }
}

/// A write or delete of the persister: prepared, then a delta on this
/// replica's version (of the generation a majority shows when
/// `from_storage`). Made once more, prepared and counted anew, when a
/// round fails while the lists in use move on (`worth_another_round`): a
/// delta applies on the version it is made from, so a write that reached
/// some replicas before is written again whole, as the persister's own
/// retry would.
void write_call(coordinator_pointer self, session_delta delta,
                bool from_storage, std::function<void(caf::error)> done,
                bool last_round = false) {
  auto session = delta.session;
  auto counted_under = lists_generation(self);
  again_fn again = [=](const session_delta& failed, const caf::error& err) {
    if (last_round
        || !replica_calls::worth_another_round(self, counted_under, err))
      return false;
    spdlog::debug("sessions: session {} is written once more, counted "
                  "under the lists in use now: {}",
                  failed.session, self->system().render(err));
    write_call(self, failed, from_storage, done, true);
    return true;
  };
  prepare(self, session, false,
          [self, delta = std::move(delta), from_storage, done,
           again](caf::error err) mutable {
            if (err) {
              if (!again(delta, err))
                done(std::move(err));
              return;
            }
            const auto& c = coordination_of(self, delta.session);
            if (from_storage)
              delta.generation = c.floor;
            delta.ballot = c.ballot;
            delta.base_ballot = c.local.ballot;
            delta.base_seq = c.local.seq;
            replicate_delta(self, std::move(delta), done, again);
          });
}

/// Answers through `answer` (an open call) the outcome `err`, `ok` when
/// none.
template <class Answer>
auto ok_or(Answer answer) {
  return [answer](caf::error err) mutable {
    if (err)
      answer(std::move(err));
    else
      answer(ok_atom::value);
  };
}

// -- reads and claims -----------------------------------------------------------

/// `load`: the newest content a majority shows.
void load_call(coordinator_pointer self, const std::string& session,
               std::function<void(caf::expected<session_record>)> done) {
  if (auto refusal = lists_unknown(self, "session " + session)) {
    done(std::move(*refusal));
    return;
  }
  auto set = replicas_of(self, session);
  const auto& nodes = set.nodes;
  auto view = std::make_shared<round_view>();
  view->nodes = nodes;
  view->answers.resize(nodes.size());
  auto votes = make_tally(set, [=](bool ok, const std::string& failures) {
    if (!ok) {
      done(no_quorum(session, failures));
      return;
    }
    auto best = *view->newest();
    const auto& newest = view->answers[best]->version;
    if (newest.content != static_cast<uint8_t>(session_content::blob)) {
      done(make_error(errc::not_found,
                      newest.content
                          == static_cast<uint8_t>(session_content::deleted)
                        ? "session " + session + " was deleted"
                        : "no session " + session));
      return;
    }
    ask<session_image>(
      self, nodes[best],
      [=](session_image& image) {
        if (!same_content(image.version, newest)) {
          done(make_error(errc::no_quorum,
                          "session " + session
                            + ": its newest replica changed while read"));
          return;
        }
        done(std::move(image.record));
      },
      [=](const std::string& why) {
        done(make_error(errc::no_quorum,
                        "session " + session + ": the replica with its "
                          "newest content " + why));
      },
      image_atom::value, session);
  });
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (catching_up(self, nodes[i])) {
      (*votes)->failed(nodes[i], node_text(self, nodes[i]),
                       "is catching up from its peers");
      continue;
    }
    ask<replica_answer>(
      self, nodes[i],
      [=](replica_answer& answer) {
        view->answers[i] = answer;
        (*votes)->succeeded(nodes[i]);
      },
      [=](const std::string& why) {
        (*votes)->failed(nodes[i], node_text(self, nodes[i]), why);
      },
      version_atom::value, session);
  }
}

/// `claim`: the generation at a majority for `claimant`.
void claim_call(coordinator_pointer self, const std::string& session,
                uint64_t generation, const std::string& claimant,
                std::function<void(caf::error)> done) {
  prepare(self, session, false, [=](caf::error err) {
    if (err) {
      done(std::move(err));
      return;
    }
    auto counted_under = lists_generation(self);
    auto set = replicas_of(self, session);
    auto ballot = coordination_of(self, session).ballot;
    auto stale = std::make_shared<bool>(false);
    auto votes = make_tally(set, [=](bool ok, const std::string& failures) {
      auto& c = coordination_of(self, session);
      if (ok) {
        if (auto changed = lists_changed_during(self, session,
                                                counted_under)) {
          c.prepared = false;
          done(std::move(*changed));
          return;
        }
        c.floor = std::max(c.floor, generation);
        c.claimant = claimant;
        c.stored = true;
        done(caf::none);
        return;
      }
      c.prepared = false;
      if (*stale)
        done(make_error(errc::stale_generation,
                        "session " + session + ": generation "
                          + std::to_string(generation)
                          + " is taken on a majority of its replicas"));
      else
        done(no_quorum(session, failures));
    });
    for (auto node : set.nodes)
      ask<replica_answer>(
        self, node,
        [=](replica_answer& answer) {
          switch (outcome_of(answer)) {
            case replica_outcome::applied:
              (*votes)->succeeded(node);
              return;
            case replica_outcome::stale:
              *stale = true;
              (*votes)->failed(node, node_text(self, node),
                               "holds a newer generation");
              return;
            default:
              (*votes)->failed(node, node_text(self, node),
                               "promised a newer coordinator");
          }
        },
        [=](const std::string& why) {
          (*votes)->failed(node, node_text(self, node), why);
        },
        claim_atom::value, session, ballot, generation, claimant);
  });
}

session_coordinator_actor::behavior_type
session_coordinator(coordinator_pointer self, session_replica_io_actor local,
                    coordinator_settings settings) {
  auto& st = self->state;
  st.local = std::move(local);
  st.peers.resize(settings.map.size());
  st.failing.resize(settings.map.size(), false);
  st.batches.peers.resize(settings.map.size());
  st.settings = std::move(settings);
  // An exit answers every call still open: CAF 0.17 drops a parked
  // promise silently.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    self->state.calls.fail_all(make_error(errc::stopped_before_answer,
                                          "the session coordinator stopped"));
    self->quit(msg.reason);
  });
  return {
    [self](write_atom, storage::session_write& write) {
      auto promise = self->make_response_promise<ok_atom>();
      auto answer = open_call(self, promise);
      auto session = write.session;
      in_turn(self, session, [self, write = std::move(write),
                              answer](std::function<void()> finish) mutable {
        session_delta delta;
        delta.session = write.session;
        delta.blob = std::move(write.blob);
        delta.updates = std::move(write.updates);
        delta.removed = std::move(write.removed);
        delta.generation = write.generation;
        write_call(self, std::move(delta), write.generation_from_storage,
                   [answer, finish](caf::error err) mutable {
                     ok_or(answer)(std::move(err));
                     finish();
                   });
      });
      return promise;
    },
    [self](erase_atom, const std::string& session, uint64_t generation,
           bool) {
      auto promise = self->make_response_promise<ok_atom>();
      auto answer = open_call(self, promise);
      in_turn(self, session, [=](std::function<void()> finish) {
        session_delta delta;
        delta.session = session;
        delta.generation = generation;
        delta.erase = true; // replicas keep every tombstone
        write_call(self, std::move(delta), false,
                   [answer, finish](caf::error err) mutable {
          ok_or(answer)(std::move(err));
          finish();
        });
      });
      return promise;
    },
    [](purge_atom, const std::string&, uint64_t) {
      // Replicas keep tombstones: see the header.
    },
    [self](load_atom, const std::string& session) {
      auto promise = self->make_response_promise<session_record>();
      auto answer = open_call(self, promise);
      in_turn(self, session, [=](std::function<void()> finish) {
        in_rounds<caf::expected<session_record>>(
          self, "a load",
          [self, session](auto done) { load_call(self, session, done); },
          [answer, finish](caf::expected<session_record> record) {
            if (record)
              answer(std::move(*record));
            else
              answer(std::move(record.error()));
            finish();
          });
      });
      return promise;
    },
    [self](stored_generation_atom, const std::string& session) {
      auto promise
        = self->make_response_promise<bool, uint64_t, std::string>();
      auto answer = open_call(self, promise);
      in_turn(self, session, [=](std::function<void()> finish) {
        in_rounds<caf::error>(
          self, "a generation read",
          [self, session](auto done) { prepare(self, session, true, done); },
          [=](caf::error err) {
            if (err) {
              answer(std::move(err));
            } else {
              const auto& c = coordination_of(self, session);
              answer(c.stored, c.floor, c.claimant);
            }
            finish();
          });
      });
      return promise;
    },
    [self](claim_atom, const std::string& session, uint64_t generation,
           const std::string& claimant) {
      auto promise = self->make_response_promise<ok_atom>();
      auto answer = open_call(self, promise);
      in_turn(self, session, [=](std::function<void()> finish) {
        // A replica that took the claim takes it again alike.
        in_rounds<caf::error>(
          self, "a claim",
          [=](auto done) {
            claim_call(self, session, generation, claimant, done);
          },
          [answer, finish](caf::error err) {
            ok_or(answer)(std::move(err));
            finish();
          });
      });
      return promise;
    },
    [self](stats_atom) {
      return self->delegate(self->state.local, stats_atom::value);
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

session_replica_endpoint_actor::behavior_type
session_replica_endpoint(session_replica_endpoint_actor::pointer self,
                         std::vector<session_replica_io_actor> local,
                         std::shared_ptr<const std::atomic<bool>> catching) {
  auto io_for = [local](const std::string& session) {
    return local[std::hash<std::string>{}(session) % local.size()];
  };
  auto reads_refused = [catching]() -> std::optional<caf::error> {
    if (catching == nullptr || !catching->load())
      return std::nullopt;
    return make_error(errc::catching_up,
                      "this replica of sessions is catching up from its "
                      "peers");
  };
  return {
    // Which lists the coordinator counted is the gateway's to check
    // (`list_stamp`); the I/O actors never see it.
    [=](replica_atom atom, prepare_atom verb, std::string& session,
        uint64_t ballot, const list_stamp&) -> caf::result<replica_answer> {
      if (auto refusal = reads_refused())
        return std::move(*refusal);
      auto io = io_for(session);
      return self->delegate(io, atom, verb, std::move(session), ballot);
    },
    [=](replica_atom atom, claim_atom verb, std::string& session,
        uint64_t ballot, uint64_t generation, std::string& claimant,
        const list_stamp&) {
      auto io = io_for(session);
      return self->delegate(io, atom, verb, std::move(session), ballot,
                            generation, std::move(claimant));
    },
    [=](replica_atom atom, write_atom verb, session_delta& delta,
        const list_stamp&) {
      auto io = io_for(delta.session);
      return self->delegate(io, atom, verb, std::move(delta));
    },
    [=](replica_atom atom, write_atom verb, std::vector<session_delta>& deltas,
        const list_stamp&) -> caf::result<std::vector<replica_answer>> {
      if (deltas.empty())
        return std::vector<replica_answer>{};
      // Each to its session's I/O actor, which groups them into one
      // write as it does any writes that arrive together.
      auto promise = self->make_response_promise<std::vector<replica_answer>>();
      auto answers = std::make_shared<std::vector<replica_answer>>(
        deltas.size());
      auto open = std::make_shared<std::size_t>(deltas.size());
      auto failed = std::make_shared<bool>(false);
      for (std::size_t i = 0; i < deltas.size(); ++i) {
        auto io = io_for(deltas[i].session);
        self->request(io, caf::infinite, atom, verb, std::move(deltas[i]))
          .then(
            [answers, open, failed, promise,
             i](replica_answer& answer) mutable {
              (*answers)[i] = std::move(answer);
              if (--*open == 0 && !*failed)
                promise.deliver(std::move(*answers));
            },
            [failed, promise](caf::error& err) mutable {
              if (*failed)
                return;
              *failed = true;
              promise.deliver(std::move(err));
            });
      }
      return promise;
    },
    [=](replica_atom atom, install_atom verb, uint64_t ballot,
        session_image& image, const list_stamp&) {
      auto io = io_for(image.session);
      return self->delegate(io, atom, verb, ballot, std::move(image));
    },
    [=](replica_atom atom, image_atom verb, std::string& session,
        const list_stamp&) {
      auto io = io_for(session);
      return self->delegate(io, atom, verb, std::move(session));
    },
    [=](replica_atom atom, version_atom verb, std::string& session,
        const list_stamp&) -> caf::result<replica_answer> {
      if (auto refusal = reads_refused())
        return std::move(*refusal);
      auto io = io_for(session);
      return self->delegate(io, atom, verb, std::move(session));
    },
  };
}

} // namespace

std::vector<session_coordinator_actor>
spawn_session_coordinators(caf::actor_system& sys,
                           const std::vector<session_replica_io_actor>& local,
                           const coordinator_settings& settings) {
  std::vector<session_coordinator_actor> result;
  for (const auto& io : local)
    result.push_back(sys.spawn(session_coordinator, io, settings));
  return result;
}

session_replica_endpoint_actor
spawn_session_replica_endpoint(caf::actor_system& sys,
                               std::vector<session_replica_io_actor> local,
                               std::shared_ptr<const std::atomic<bool>>
                                 catching_up) {
  return sys.spawn(session_replica_endpoint, std::move(local),
                   std::move(catching_up));
}

std::vector<caf::actor> replicated_sessions::subscribers() const {
  std::vector<caf::actor> result;
  for (const auto& x : coordinators)
    result.push_back(caf::actor_cast<caf::actor>(x));
  return result;
}

bool replicated_sessions::stop(caf::actor_system& sys, caf::timespan limit) {
  if (!persister)
    return true;
  caf::scoped_actor self{sys};
  bool written = false;
  self
    ->request(persister, limit + std::chrono::seconds{1},
              flush_all_atom::value, limit)
    .receive(
      [&](uint64_t unwritten) {
        written = unwritten == 0;
        if (!written)
          spdlog::error("{} replicated sessions could not be written",
                        unwritten);
      },
      [&](caf::error& err) {
        spdlog::error("the replicated sessions' persister does not answer: "
                      "{}",
                      sys.render(err));
      });
  std::vector<caf::actor> actors{caf::actor_cast<caf::actor>(persister),
                                 caf::actor_cast<caf::actor>(endpoint)};
  for (const auto& x : coordinators)
    actors.push_back(caf::actor_cast<caf::actor>(x));
  for (const auto& x : actors)
    caf::anon_send_exit(x, caf::exit_reason::user_shutdown);
  for (const auto& x : actors)
    self->wait_for(x);
  persister = session_persister_actor{};
  return written;
}

replicated_sessions
start_replicated_sessions(caf::actor_system& sys,
                          const std::vector<session_replica_io_actor>& local,
                          const coordinator_settings& settings,
                          session_persister_options options) {
  replicated_sessions result;
  result.coordinators = spawn_session_coordinators(sys, local, settings);
  result.endpoint = spawn_session_replica_endpoint(sys, local,
                                                   settings.catching_up);
  options.claim_generations = true;
  result.persister = spawn_session_persister_over(
    sys,
    std::vector<session_io_actor>(result.coordinators.begin(),
                                  result.coordinators.end()),
    options);
  return result;
}

} // namespace coalesce
