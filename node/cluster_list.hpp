#pragma once

#include <cstdint>
#include <string>

#include <caf/expected.hpp>

#include <coalesce/client/cluster_map.hpp>

/// The cluster list a node serves under, as it keeps it in its database:
/// the list, its version and its nodes' ids, and the next id to give. A
/// node's ids stay the same for as long as it is listed and are never given
/// to another node, so that ballots and capture stamps made by different
/// nodes never collide however the list changes.
namespace coalesce {

struct cluster_list_record {
  cluster_map list;
  /// The id the next node added gets.
  uint32_t next_id = 0;
};

/// Text lines, readable with RocksDB's tools: "coalesce-cluster-list 1",
/// "version N", "next-id N", then "ID HOST:PORT" per node in list order.
std::string encode_cluster_list(const cluster_list_record& record);

/// The record `encoded` holds; an error naming what is malformed.
caf::expected<cluster_list_record>
decode_cluster_list(const std::string& encoded);

/// What a node starts under: its configured list (`coalesce.cluster`)
/// against the record it stored (`stored`, empty when none).
struct settled_cluster_list {
  cluster_list_record record;
  /// Whether the list differs from the stored one (store it, log it).
  bool changed = false;
  /// The stored list's text when it changed ("version N: ..."), else empty.
  std::string previous;
  /// Whether the configured list lacks a node the stored one named: this
  /// node may then be a replica of keys it was not one of (by rendezvous,
  /// adding nodes only takes keys from it; removing one gives it some).
  bool dropped_nodes = false;
};

/// - Nothing stored: the configured list as version 1, ids in list order.
/// - The stored list names the same nodes (in any order): the stored
///   record, its version and ids unchanged.
/// - Other nodes: the configured list as the next version; the nodes that
///   stay keep their ids, a new node gets the next id.
/// An error (`errc::invalid_config` naming coalesce.cluster) when the
/// stored record is malformed or the cluster ran out of ids.
caf::expected<settled_cluster_list>
settle_cluster_list(const cluster_map& configured, const std::string& stored);

/// How many passes over every peer a catch-up under `settled` makes: two
/// when this node serves under a list its peers may not know yet (a changed
/// list, or its first: a joining node, a new or wiped directory), so that
/// the second finds what a peer took as a coordinator before the first
/// told it the list (sync_rounds.hpp, `learn_asker_list`); else one.
int catch_up_passes(const settled_cluster_list& settled);

/// Whether a node that started under `settled` catches up from every peer
/// before it serves reads although it stopped cleanly: whenever its stored
/// list changed, whether it gained keys or only lost some. While it was
/// down, its peers may have taken writes as coordinators of the old list
/// alone, on a majority of the old list's replicas that is none of the new
/// list's (old {A, B, C} and new {A, B, D}: a write on {B, C} while A
/// restarts); a catch-up tells each peer the new list (its handoff request)
/// and brings over what they took before they learned it.
bool catches_up_after_change(const settled_cluster_list& settled);

} // namespace coalesce
