#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

/// The message secrets that travel between coalesce's actors and nodes.
///
/// Times are unix seconds. A secret travels as a byte vector rather than a
/// fixed array so that a wrong length reaches the buffer, which answers it
/// with an error, instead of being cut or padded by the serializer.
namespace coalesce {

/// Bytes a message secret has; anything else is rejected at `queue`.
constexpr std::size_t secret_size = 32;

/// The longest secret a decoder accepts: far above `secret_size`, so a
/// wrong length still reaches the buffer and is answered with its error.
constexpr std::size_t max_decoded_secret = 4096;

/// A byte vector as it crosses nodes, in the wire format of a plain vector.
/// CAF 0.17 sizes a decoded byte vector by the length the peer claims
/// before reading a byte of it, so a claim of 4 GiB allocates 4 GiB (found
/// by fuzz/messages.cpp); this refuses a claim over `limit` first.
struct bounded_bytes {
  std::vector<uint8_t>& bytes;
  std::size_t limit;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, bounded_bytes& x) {
  if constexpr (Inspector::writes_state) {
    std::size_t claimed = 0;
    if (auto err = f.begin_sequence(claimed))
      return err;
    if (claimed > x.limit)
      return caf::make_error(caf::sec::invalid_argument,
                             "a byte field claims more than its limit");
    x.bytes.resize(claimed);
    if (claimed > 0)
      if (auto err = f.apply_raw(claimed, x.bytes.data()))
        return err;
    return f.end_sequence();
  } else {
    return f(x.bytes);
  }
}

/// Names one secret: the chat, the sender, and the message id within them.
struct secret_key {
  std::string chat;
  std::string sender;
  std::string msg_id;

  friend bool operator==(const secret_key& x, const secret_key& y) {
    return x.chat == y.chat && x.sender == y.sender && x.msg_id == y.msg_id;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, secret_key& x) {
  return f(caf::meta::type_name("secret_key"), x.chat, x.sender, x.msg_id);
}

/// One captured secret with its retention metadata.
struct secret_entry {
  std::string chat;
  std::string sender;
  std::string msg_id;
  std::vector<uint8_t> secret;
  /// When the row may be purged; 0 keeps it forever.
  int64_t expires_at = 0;
  /// When the message the secret belongs to was sent; 0 when unknown.
  int64_t message_ts = 0;
  /// Orders two captures of one key with different secrets: the greater
  /// stamp's secret wins wherever they meet, whatever order they arrive in
  /// (0 for a node alone: there the later arrival wins). A cluster's
  /// coordinator stamps each capture it admits (node/secret_replicas.hpp).
  uint64_t stamp = 0;
  /// The stamp of the capture that gave `message_ts` (0 while it is
  /// unknown): of two known message times, the greater stamp's wins.
  uint64_t ts_stamp = 0;

  secret_key key() const {
    return {chat, sender, msg_id};
  }

  friend bool operator==(const secret_entry& x, const secret_entry& y) {
    return x.chat == y.chat && x.sender == y.sender && x.msg_id == y.msg_id
           && x.secret == y.secret && x.expires_at == y.expires_at
           && x.message_ts == y.message_ts && x.stamp == y.stamp
           && x.ts_stamp == y.ts_stamp;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, secret_entry& x) {
  bounded_bytes secret{x.secret, max_decoded_secret};
  return f(caf::meta::type_name("secret_entry"), x.chat, x.sender, x.msg_id,
           secret, x.expires_at, x.message_ts, x.stamp, x.ts_stamp);
}

/// A secret on its way to RocksDB: the entry plus the moment the buffer
/// captured it. The capture time decides whether an older stored row still
/// counts when the two are merged (a row that had already expired then is
/// treated as absent), so the merge never depends on compaction timing.
struct secret_write {
  secret_entry entry;
  int64_t captured_at = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, secret_write& x) {
  return f(caf::meta::type_name("secret_write"), x.entry, x.captured_at);
}

/// Captures on their way from the buffer to the drain worker, shared with the
/// buffer's pending map instead of copied: handing over a batch of thousands
/// costs one pointer copy per entry while `queue` requests wait.
///
/// Local only, never serialized (CAF is told so at the end of this header):
/// it holds pointers into the buffer's memory. That is sound because the
/// drain worker always runs in the buffer's process, detached on its own
/// thread in production, scheduled under the test coordinator, and because a
/// shared capture is never changed: the buffer replaces a recaptured entry's
/// pointer instead of writing through it, so the worker reads its batch while
/// the buffer goes on, and whichever drops the last reference frees it (the
/// counts are atomic). The drain worker's interface is never published.
class secret_batch {
public:
  using shared_write = std::shared_ptr<const secret_write>;

  /// Iterates the captures themselves, not the pointers.
  class const_iterator {
  public:
    using base = std::vector<shared_write>::const_iterator;

    explicit const_iterator(base position) : position_(position) {
      // nop
    }

    const secret_write& operator*() const {
      return **position_;
    }

    const secret_write* operator->() const {
      return position_->get();
    }

    const_iterator& operator++() {
      ++position_;
      return *this;
    }

    friend bool operator==(const const_iterator& x, const const_iterator& y) {
      return x.position_ == y.position_;
    }

    friend bool operator!=(const const_iterator& x, const const_iterator& y) {
      return x.position_ != y.position_;
    }

  private:
    base position_;
  };

  void reserve(std::size_t n) {
    writes_.reserve(n);
  }

  void push_back(shared_write write) {
    writes_.push_back(std::move(write));
  }

  std::size_t size() const {
    return writes_.size();
  }

  bool empty() const {
    return writes_.empty();
  }

  const secret_write& operator[](std::size_t i) const {
    return *writes_[i];
  }

  const secret_write& front() const {
    return *writes_.front();
  }

  /// Free functions, not members: CAF takes a type with member begin/end for
  /// a container it may serialize.
  friend const_iterator begin(const secret_batch& x) {
    return const_iterator{x.writes_.begin()};
  }

  friend const_iterator end(const secret_batch& x) {
    return const_iterator{x.writes_.end()};
  }

private:
  std::vector<shared_write> writes_;
};

/// The answer to a lookup: the secret and its message time, or not found.
/// Expired rows are answered as not found. The stamps are the row's (see
/// `secret_entry`), so that a coordinator merges its replicas' answers the
/// way their rows merge.
struct secret_lookup {
  bool found = false;
  std::vector<uint8_t> secret;
  int64_t message_ts = 0;
  uint64_t stamp = 0;
  uint64_t ts_stamp = 0;

  friend bool operator==(const secret_lookup& x, const secret_lookup& y) {
    return x.found == y.found && x.secret == y.secret
           && x.message_ts == y.message_ts && x.stamp == y.stamp
           && x.ts_stamp == y.ts_stamp;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, secret_lookup& x) {
  bounded_bytes secret{x.secret, max_decoded_secret};
  return f(caf::meta::type_name("secret_lookup"), x.found, secret,
           x.message_ts, x.stamp, x.ts_stamp);
}

/// A row as RocksDB holds it after merging, expired or not; `found` is false
/// when no row exists. Carries the capture time so the buffer can merge a
/// pending entry onto it exactly as the merge operator would.
struct stored_secret {
  bool found = false;
  secret_write row;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stored_secret& x) {
  return f(caf::meta::type_name("stored_secret"), x.found, x.row);
}

struct secret_key_hash {
  std::size_t operator()(const secret_key& x) const noexcept {
    std::hash<std::string> h;
    auto seed = h(x.chat);
    seed ^= h(x.sender) + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
    seed ^= h(x.msg_id) + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
    return seed;
  }
};

} // namespace coalesce

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(coalesce::secret_batch)
