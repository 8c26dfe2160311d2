#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/replica_protocol.hpp>
#include <coalesce/messages/session.hpp>

/// What a session's coordinator and the session's other replicas say to
/// each other (coalesce/node/session_replicas.hpp): between nodes, never a
/// client's. A node serves them through its gateway.
///
/// Each replica keeps, per session, beside its blob and rows:
/// - the session's generation floor and who claimed it (`claim`): a write
///   of a lower generation is refused;
/// - the highest coordinator ballot it promised (`prepare`): a coordinator
///   with a lower one is refused, so two coordinators of a session (one
///   cut off, one its clients failed over to) never both get a majority;
/// - the version of its content, (ballot, seq) of the write that made it:
///   a write applies only on the version it was made on (`base_*`), so the
///   replicas that acknowledged the same version hold the same rows, and a
///   replica that missed writes is sent the whole session instead.
namespace coalesce {

/// Claim a generation for a handle (a register).
using claim_atom = caf::atom_constant<caf::atom("claim")>;

/// What a replica's content is.
enum class session_content : uint8_t { none = 0, blob = 1, deleted = 2 };

/// What a replica holds of a session.
struct session_version {
  /// The generation floor: writes of a lower one are refused.
  uint64_t generation = 0;
  /// Who claimed `generation` (a handle's address); empty when no claim
  /// made it (a write without replicas, or nothing).
  std::string claimant;
  /// The highest coordinator ballot promised.
  uint64_t promised = 0;
  /// The version of the content: the ballot and sequence number of the
  /// write that made it; (0, 0) for none or a write without replicas.
  uint64_t ballot = 0;
  uint64_t seq = 0;
  uint8_t content = static_cast<uint8_t>(session_content::none);
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_version& x) {
  return f(caf::meta::type_name("session_version"), x.generation, x.claimant,
           x.promised, x.ballot, x.seq, x.content);
}

/// Whether `x`'s content is newer than `y`'s.
inline bool newer_content(const session_version& x, const session_version& y) {
  return x.ballot > y.ballot || (x.ballot == y.ballot && x.seq > y.seq);
}

inline bool same_content(const session_version& x, const session_version& y) {
  return x.ballot == y.ballot && x.seq == y.seq;
}

/// "g7/claimant p9 c9.3 blob" (the debug log's traces of a replica).
inline std::string version_text(const session_version& v) {
  static const char* const kinds[] = {"none", "blob", "deleted"};
  return "g" + std::to_string(v.generation) + "/" + v.claimant + " p"
         + std::to_string(v.promised) + " c" + std::to_string(v.ballot) + "."
         + std::to_string(v.seq) + " " + (v.content < 3 ? kinds[v.content] : "?");
}

/// One write (or delete) of a session as its coordinator sends it to each
/// replica: applied only by a replica holding the base version, with a
/// ballot it promised and a generation at or above its floor.
struct session_delta {
  std::string session;
  /// The coordinator's ballot; the new version is (ballot, base_seq + 1).
  uint64_t ballot = 0;
  uint64_t base_ballot = 0;
  uint64_t base_seq = 0;
  uint64_t generation = 0;
  /// A delete: every row goes, a tombstone stays (blob, rows ignored).
  bool erase = false;
  std::string blob;
  std::vector<session_update> updates;
  std::vector<std::string> removed;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_delta& x) {
  return f(caf::meta::type_name("session_delta"), x.session, x.ballot,
           x.base_ballot, x.base_seq, x.generation, x.erase, x.blob,
           x.updates, x.removed);
}

/// A whole session as one replica holds it, to install on another.
struct session_image {
  std::string session;
  session_version version;
  /// The blob and every row (empty unless the content is a blob).
  session_record record;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_image& x) {
  return f(caf::meta::type_name("session_image"), x.session, x.version,
           x.record);
}

/// One session a replica holds, and what of it (anti-entropy).
struct session_listing {
  std::string session;
  session_version version;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_listing& x) {
  return f(caf::meta::type_name("session_listing"), x.session, x.version);
}

/// A replica's answer: how it took the request and what it holds after.
struct replica_answer {
  uint8_t outcome = 0;
  session_version version;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_answer& x) {
  return f(caf::meta::type_name("replica_answer"), x.outcome, x.version);
}

inline replica_outcome outcome_of(const replica_answer& x) {
  return static_cast<replica_outcome>(x.outcome);
}

/// The requests a session's coordinator sends each of the session's
/// replicas (its own node's among them).
using session_replica_requests = caf::typed_actor<
  /// Promise `ballot` (refused `preempted` below the one promised); answers
  /// what the replica holds.
  caf::replies_to<replica_atom, prepare_atom, std::string, uint64_t>::with<
    replica_answer>,
  /// Claim generation G for a claimant, under ballot B (session, B, G,
  /// claimant): refused `stale` when the floor is above G or G was claimed
  /// by another.
  caf::replies_to<replica_atom, claim_atom, std::string, uint64_t, uint64_t,
                  std::string>::with<replica_answer>,
  caf::replies_to<replica_atom, write_atom, session_delta>::with<
    replica_answer>,
  /// Installs the image when its content is newer than the replica's
  /// (under `ballot`, the sender's).
  caf::replies_to<replica_atom, install_atom, uint64_t, session_image>::with<
    replica_answer>,
  caf::replies_to<replica_atom, image_atom, std::string>::with<session_image>,
  caf::replies_to<replica_atom, version_atom, std::string>::with<
    replica_answer>>;

/// Several sessions' `write`s to one replica in one message: a coordinator
/// sends a peer the deltas that queued while its previous batch to that
/// peer was under way. Answered as each `write` alone would be, in order;
/// an error answers the whole batch (each delta counts that replica
/// failed).
using session_replica_batch_requests = caf::typed_actor<
  caf::replies_to<replica_atom, write_atom, std::vector<session_delta>>::with<
    std::vector<replica_answer>>>;

/// What a node serves its peers' coordinators of sessions through its
/// gateway: each request with the lists its coordinator counted.
using session_replica_endpoint_actor
  = stamped_t<session_replica_requests::extend_with<
    session_replica_batch_requests>>;

/// What a replica that catches up or repairs asks each peer
/// (coalesce/node/session_sync.hpp).
using session_listing_requests = caf::typed_actor<
  /// Every session this node holds that node `asker` is a replica of, with
  /// its version. The first number is the fingerprint of the cluster list
  /// the asker serves under (`cluster_map::fingerprint`), the second its
  /// index there: a node under another list refuses (`errc::not_replica`,
  /// with its own list).
  caf::replies_to<replica_atom, digest_atom, uint64_t, uint64_t>::with<
    std::vector<session_listing>>,
  /// The same under the asker's list, whole (a handoff: the asker serves
  /// under another list than this node's).
  caf::replies_to<replica_atom, handoff_atom, handoff_asker>::with<
    std::vector<session_listing>>>;

} // namespace coalesce
