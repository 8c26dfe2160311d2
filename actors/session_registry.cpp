#include <coalesce/actors/session_registry.hpp>

#include <algorithm>

#include <caf/actor_cast.hpp>

#include <coalesce/messages/errc.hpp>

namespace coalesce {

namespace {

caf::actor_addr address_of(const session_handle_actor& handle) {
  return caf::actor_cast<caf::actor_addr>(handle);
}

} // namespace

const session_registry::member*
session_registry::lineage::find(const caf::actor_addr& addr) const {
  for (const auto& x : members)
    if (address_of(x.handle) == addr)
      return &x;
  return nullptr;
}

const session_registry::member*
session_registry::lineage::newest_alive() const {
  const member* result = nullptr;
  for (const auto& x : members)
    if (x.alive && x.generation >= deleted_below
        && (result == nullptr || x.generation > result->generation))
      result = &x;
  return result;
}

uint64_t session_registry::lineage::current() const {
  return std::max(next == 0 ? 0 : next - 1, floor);
}

bool session_registry::knows_stored(const std::string& session) const {
  auto i = lineages_.find(session);
  return i != lineages_.end() && i->second.stored_known;
}

void session_registry::learn_stored(const std::string& session,
                                    std::optional<uint64_t> stored) {
  auto& entry = lineages_[session];
  entry.stored_known = true;
  if (!stored)
    return;
  entry.floor = std::max(entry.floor, *stored);
  entry.next = std::max(entry.next, *stored + 1);
}

uint64_t
session_registry::generation_of(const std::string& session,
                                const session_handle_actor& handle) const {
  auto i = lineages_.find(session);
  if (i == lineages_.end())
    return 0;
  if (const auto* self = i->second.find(address_of(handle)))
    return self->generation;
  return i->second.current();
}

uint64_t session_registry::register_handle(const std::string& session,
                                           const session_handle_actor& handle) {
  auto& entry = lineages_[session];
  // Dead members of deleted incarnations can no longer decide anything.
  entry.members.erase(std::remove_if(entry.members.begin(),
                                     entry.members.end(),
                                     [&](const member& x) {
                                       return !x.alive
                                              && x.generation
                                                   < entry.deleted_below;
                                     }),
                      entry.members.end());
  auto generation = entry.next++;
  entry.members.push_back(member{handle, generation,
                                 dead_.count(address_of(handle)) == 0});
  sessions_of_[address_of(handle)].push_back(session);
  return generation;
}

bool session_registry::tombstoned(const std::string& session,
                                  const caf::actor_addr& addr) const {
  auto i = tombstones_.find(session);
  return i != tombstones_.end()
         && std::find(i->second.begin(), i->second.end(), addr)
              != i->second.end();
}

caf::expected<session_handle_actor>
session_registry::source_for(const std::string& session,
                             const session_handle_actor& handle,
                             bool alive) const {
  auto addr = address_of(handle);
  if (tombstoned(session, addr))
    return make_error(errc::session_deleted, "session " + session);
  auto i = lineages_.find(session);
  const member* self = i == lineages_.end() ? nullptr : i->second.find(addr);
  if (self != nullptr && self->generation < i->second.deleted_below)
    return make_error(errc::session_deleted, "session " + session);
  alive = alive && (self == nullptr || self->alive);
  bool current = self == nullptr || self->generation + 1 == i->second.next;
  if (current && alive)
    return handle;
  const member* newest = i == lineages_.end() ? nullptr
                                              : i->second.newest_alive();
  if (current) {
    // A dead unregistered handle is written from the newest live one; a
    // dead current handle has no newer one to write from.
    if (self == nullptr && newest != nullptr)
      return newest->handle;
    return make_error(errc::handle_gone, "session " + session);
  }
  if (newest != nullptr && newest->generation > self->generation)
    return newest->handle;
  return make_error(errc::handle_superseded, "session " + session);
}

bool session_registry::is_deleted(const std::string& session,
                                  const session_handle_actor& handle) const {
  auto source = source_for(session, handle, true);
  return !source && source.error().category() == errc_category
         && source.error().code()
              == static_cast<uint8_t>(errc::session_deleted);
}

uint64_t session_registry::delete_session(
  const std::string& session,
  const std::optional<session_handle_actor>& live) {
  if (live) {
    auto& dead = tombstones_[session];
    auto addr = address_of(*live);
    if (std::find(dead.begin(), dead.end(), addr) == dead.end())
      dead.push_back(addr);
  }
  auto& entry = lineages_[session];
  // Above every generation in use (registered or current), so a write
  // from before the delete is refused by the tombstone.
  auto tombstone = entry.current() + 1;
  entry.deleted_below = tombstone;
  entry.next = tombstone;
  entry.floor = tombstone;
  failed_.erase(session);
  return tombstone;
}

void session_registry::handle_down(const caf::actor_addr& handle) {
  dead_.insert(handle);
  auto i = sessions_of_.find(handle);
  if (i == sessions_of_.end())
    return;
  for (const auto& session : i->second)
    for (auto& x : lineages_[session].members)
      if (address_of(x.handle) == handle)
        x.alive = false;
  sessions_of_.erase(i);
}

void session_registry::mark_failed(const std::string& session,
                                   const session_handle_actor& source) {
  failed_[session] = source;
}

void session_registry::mark_written(const std::string& session) {
  failed_.erase(session);
}

bool session_registry::failed(const std::string& session) const {
  return failed_.count(session) > 0;
}

std::optional<session_handle_actor>
session_registry::retry_source(const std::string& session) const {
  auto i = failed_.find(session);
  if (i == failed_.end())
    return std::nullopt;
  auto source = source_for(session, i->second,
                           dead_.count(address_of(i->second)) == 0);
  if (!source)
    return std::nullopt;
  return *source;
}

std::vector<std::string> session_registry::failed_sessions() const {
  std::vector<std::string> result;
  for (const auto& [session, source] : failed_)
    result.push_back(session);
  return result;
}

} // namespace coalesce
