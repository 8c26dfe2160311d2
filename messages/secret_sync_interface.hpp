#pragma once

#include <cstdint>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/replica_protocol.hpp>
#include <coalesce/messages/secret_entry.hpp>

/// What two replicas of a cluster's secrets exchange to find where they
/// differ and repair it (anti-entropy: coalesce/node/secret_sync.hpp). A
/// node serves them through its gateway; they are between nodes, never a
/// client's.
///
/// The secrets two nodes share (the chats both are replicas of) fall into
/// `secret_sync_buckets` buckets by chat. A bucket's digest sums a hash of
/// each live row's key and merged value (not its local capture time), so
/// two replicas that hold the same rows give the same digests, and only
/// the buckets whose digests differ are exchanged row by row.
namespace coalesce {

constexpr uint32_t secret_sync_buckets = 256;

/// One digest per bucket, `secret_sync_buckets` of them.
struct secret_digest {
  std::vector<uint64_t> buckets;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, secret_digest& x) {
  return f(caf::meta::type_name("secret_digest"), x.buckets);
}

/// Which buckets to send rows of.
struct secret_buckets {
  std::vector<uint32_t> buckets;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, secret_buckets& x) {
  return f(caf::meta::type_name("secret_buckets"), x.buckets);
}

/// Each comparison names the fingerprint of the cluster list the asker
/// serves under (its nodes and their order, `cluster_map::fingerprint`),
/// then the asker (its index in that list): a node serving under another
/// list refuses it (`errc::not_replica`, with its own list), since the
/// index may name another node in its list. The asker then pulls by
/// handoff, naming its whole list.
using secret_sync_requests = caf::typed_actor<
  /// The digests of the live secrets this node shares with node `asker`,
  /// after making everything queued here durable, so that what the buffer
  /// holds counts.
  caf::replies_to<digest_atom, uint64_t, uint64_t>::with<secret_digest>,
  /// The live rows this node shares with node `asker` in the buckets
  /// named, stamps included.
  caf::replies_to<digest_atom, uint64_t, uint64_t, secret_buckets>::with<
    std::vector<secret_entry>>,
  /// The digests of the live rows this node holds of the chats the asker
  /// is a replica of under its list (a handoff), after making everything
  /// queued here durable.
  caf::replies_to<handoff_atom, handoff_asker>::with<secret_digest>,
  /// Those rows, in the buckets named.
  caf::replies_to<handoff_atom, handoff_asker, secret_buckets>::with<
    std::vector<secret_entry>>,
  /// The rows stored here of `keys` (merged, expired ones included), after
  /// making everything queued here durable: a node that holds a chat it no
  /// longer replicates compares its rows with its replicas' before it drops
  /// them (coalesce/node/key_release.hpp).
  caf::replies_to<replica_atom, read_atom, std::vector<secret_key>>::with<
    std::vector<stored_secret>>>;

} // namespace coalesce
