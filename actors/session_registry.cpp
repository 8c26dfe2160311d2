#include <coalesce/actors/session_registry.hpp>

#include <algorithm>

#include <caf/actor_cast.hpp>
#include <caf/node_id.hpp>

#include <coalesce/messages/errc.hpp>

namespace coalesce {

namespace {

caf::actor_addr address_of(const session_handle_actor& handle) {
  return caf::actor_cast<caf::actor_addr>(handle);
}

template <class T>
bool contains(const std::vector<T>& xs, const T& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

caf::error deleted(const std::string& session) {
  return make_error(errc::session_deleted, "session " + session);
}

} // namespace

// -- lineage ------------------------------------------------------------------

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
    if (x.generation >= deleted_below
        && (result == nullptr || x.generation > result->generation))
      result = &x;
  return result;
}

uint64_t session_registry::lineage::current() const {
  return std::max(next == 0 ? 0 : next - 1, floor);
}

bool session_registry::lineage::retired_alive() const {
  return !named.empty()
         || std::any_of(members.begin(), members.end(), [&](const member& x) {
              return x.generation < deleted_below;
            });
}

// -- generations ----------------------------------------------------------------

const session_registry::lineage*
session_registry::find(const std::string& session) const {
  auto i = lineages_.find(session);
  return i == lineages_.end() ? nullptr : &i->second;
}

bool session_registry::knows_stored(const std::string& session) const {
  const auto* entry = find(session);
  return entry != nullptr && entry->stored_known;
}

void session_registry::learn_stored(const std::string& session,
                                    std::optional<uint64_t> stored,
                                    const std::string& claimant) {
  auto& entry = lineages_[session];
  entry.stored_known = true;
  if (!stored)
    return;
  if (*stored > entry.floor || (*stored == entry.floor && !claimant.empty()))
    entry.claimed_by = claimant;
  entry.floor = std::max(entry.floor, *stored);
  entry.next = std::max(entry.next, *stored + 1);
}

std::string session_registry::claimant_of(const session_handle_actor& handle) {
  auto addr = address_of(handle);
  return std::to_string(addr.id()) + "@" + caf::to_string(addr.node());
}

bool session_registry::adopt(const std::string& session,
                             const session_handle_actor& handle) {
  auto i = lineages_.find(session);
  if (i == lineages_.end())
    return false;
  auto& entry = i->second;
  auto addr = address_of(handle);
  if (entry.claimed_by.empty() || entry.claimed_by != claimant_of(handle)
      || entry.find(addr) != nullptr || contains(entry.named, addr)
      || entry.floor < entry.deleted_below || entry.next != entry.floor + 1)
    return false;
  entry.members.push_back(member{handle, entry.floor});
  auto& sessions = sessions_of_[addr];
  if (!contains(sessions, session))
    sessions.push_back(session);
  return true;
}

bool session_registry::claimed_by_other(
  const std::string& session, const session_handle_actor& handle) const {
  const auto* entry = find(session);
  return entry != nullptr && !entry->claimed_by.empty()
         && entry->find(address_of(handle)) == nullptr
         && entry->claimed_by != claimant_of(handle);
}

void session_registry::forget_stored(const std::string& session) {
  if (auto i = lineages_.find(session); i != lineages_.end())
    i->second.stored_known = false;
}

void session_registry::unregister(const std::string& session,
                                  const session_handle_actor& handle) {
  auto i = lineages_.find(session);
  if (i == lineages_.end())
    return;
  auto addr = address_of(handle);
  auto& members = i->second.members;
  members.erase(std::remove_if(members.begin(), members.end(),
                               [&](const member& x) {
                                 return address_of(x.handle) == addr;
                               }),
                members.end());
  auto j = sessions_of_.find(addr);
  if (j != sessions_of_.end() && !contains(i->second.named, addr)) {
    auto& sessions = j->second;
    sessions.erase(std::remove(sessions.begin(), sessions.end(), session),
                   sessions.end());
    if (sessions.empty())
      sessions_of_.erase(j);
  }
}

std::optional<uint64_t>
session_registry::generation_of(const std::string& session,
                                const session_handle_actor& source) const {
  const auto* entry = find(session);
  if (entry == nullptr)
    return std::nullopt;
  if (const auto* self = entry->find(address_of(source)))
    return self->generation;
  if (!entry->stored_known)
    return std::nullopt;
  return entry->current();
}

caf::expected<uint64_t>
session_registry::register_handle(const std::string& session,
                                  const session_handle_actor& handle) {
  auto& entry = lineages_[session];
  auto addr = address_of(handle);
  if (contains(entry.named, addr))
    return deleted(session);
  auto self = std::find_if(entry.members.begin(), entry.members.end(),
                           [&](const member& x) {
                             return address_of(x.handle) == addr;
                           });
  if (self != entry.members.end()) {
    if (self->generation < entry.deleted_below)
      return deleted(session);
    // One generation per handle: its latest register.
    entry.members.erase(self);
  }
  auto generation = entry.next++;
  entry.members.push_back(member{handle, generation});
  entry.claimed_by.clear(); // a claim of this one, if any, comes after
  auto& sessions = sessions_of_[addr];
  if (!contains(sessions, session))
    sessions.push_back(session);
  return generation;
}

// -- standing -------------------------------------------------------------------

caf::expected<session_handle_actor>
session_registry::source_for(const std::string& session,
                             const session_handle_actor& handle,
                             bool alive) const {
  auto addr = address_of(handle);
  const auto* entry = find(session);
  const member* self = nullptr;
  if (entry != nullptr) {
    if (contains(entry->named, addr))
      return deleted(session);
    self = entry->find(addr);
    if (self != nullptr && self->generation < entry->deleted_below)
      return deleted(session);
  }
  if (self == nullptr && remembered_as_retired(session, addr))
    return deleted(session);
  if (!alive)
    return make_error(errc::handle_gone, "session " + session);
  if (self == nullptr || self->generation + 1 == entry->next)
    return handle;
  const auto* newest = entry->newest_alive();
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

std::optional<session_handle_actor>
session_registry::current_alive(const std::string& session) const {
  const auto* entry = find(session);
  if (entry == nullptr)
    return std::nullopt;
  const auto* newest = entry->newest_alive();
  if (newest == nullptr || newest->generation + 1 != entry->next)
    return std::nullopt;
  return newest->handle;
}

// -- deletes and deaths ----------------------------------------------------------

session_registry::deletion session_registry::delete_session(
  const std::string& session,
  const std::optional<session_handle_actor>& live) {
  auto& entry = lineages_[session];
  if (live) {
    auto addr = address_of(*live);
    if (entry.find(addr) == nullptr && !contains(entry.named, addr)) {
      entry.named.push_back(addr);
      auto& sessions = sessions_of_[addr];
      if (!contains(sessions, session))
        sessions.push_back(session);
    }
  }
  // Above every generation in use (registered or current), so a write
  // from before the delete is refused by the tombstone.
  auto generation = entry.current() + 1;
  entry.deleted_below = generation;
  entry.next = generation;
  entry.floor = generation;
  failed_.erase(session);
  return {generation, entry.retired_alive()};
}

bool session_registry::remembered_as_retired(const std::string& session,
                                             const caf::actor_addr& addr) const {
  return retired_.count({addr, session}) > 0;
}

void session_registry::remember_retired(const std::string& session,
                                        const caf::actor_addr& addr) {
  if (remembered_retired_ == 0 || !retired_.emplace(addr, session).second)
    return;
  retired_order_.emplace_back(addr, session);
  if (retired_order_.size() > remembered_retired_) {
    retired_.erase(retired_order_.front());
    retired_order_.pop_front();
  }
}

session_registry::death
session_registry::handle_down(const caf::actor_addr& handle) {
  death result;
  auto i = sessions_of_.find(handle);
  if (i == sessions_of_.end())
    return result;
  result.sessions = std::move(i->second);
  sessions_of_.erase(i);
  for (const auto& session : result.sessions) {
    auto j = lineages_.find(session);
    if (j == lineages_.end())
      continue;
    auto& entry = j->second;
    bool retired = false;
    auto named = std::find(entry.named.begin(), entry.named.end(), handle);
    if (named != entry.named.end()) {
      entry.named.erase(named);
      retired = true;
    }
    auto self = std::find_if(entry.members.begin(), entry.members.end(),
                             [&](const member& x) {
                               return address_of(x.handle) == handle;
                             });
    if (self != entry.members.end()) {
      retired = retired || self->generation < entry.deleted_below;
      entry.members.erase(self);
    }
    if (!retired)
      continue;
    remember_retired(session, handle);
    if (!entry.retired_alive()) {
      // This was the last retired handle alive: the tombstone fences nothing.
      result.unfenced.emplace_back(session, entry.deleted_below);
    }
  }
  return result;
}

void session_registry::forget_if_idle(const std::string& session) {
  auto i = lineages_.find(session);
  if (i == lineages_.end())
    return;
  const auto& entry = i->second;
  if (entry.members.empty() && entry.named.empty()
      && failed_.count(session) == 0)
    lineages_.erase(i);
}

// -- failed writes ----------------------------------------------------------------

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

std::vector<std::string> session_registry::failed_sessions() const {
  std::vector<std::string> result;
  for (const auto& [session, source] : failed_)
    result.push_back(session);
  return result;
}

session_registry::footprint session_registry::size() const {
  footprint result;
  result.sessions = lineages_.size();
  for (const auto& [session, entry] : lineages_)
    result.handles += entry.members.size() + entry.named.size();
  result.remembered_retired = retired_.size();
  return result;
}

} // namespace coalesce
