#include <coalesce/actors/secret_store_actors.hpp>

#include <caf/all.hpp>

#include <coalesce/actors/guarded_write.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/secret_store.hpp>

namespace coalesce {

secret_drain_actor::behavior_type
secret_drain_worker(secret_drain_actor::pointer,
                    std::shared_ptr<storage::database> db) {
  return {
    [db](write_atom, const secret_batch& batch) -> caf::result<ok_atom> {
      // The buffer keeps a batch that failed and retries it.
      if (auto err = guarded_write(
            *db, [&] { return storage::write_secrets(*db, batch); }))
        return err;
      return ok_atom::value;
    },
    [db](drop_atom, const std::vector<secret_write>& rows)
      -> caf::result<uint64_t> {
      auto dropped = guarded_write(
        *db, [&] { return storage::drop_secrets(*db, rows); });
      if (!dropped)
        return std::move(dropped.error());
      return *dropped;
    },
    [db](sync_atom) -> caf::result<ok_atom> {
      if (auto err = guarded_sync(*db))
        return err;
      return ok_atom::value;
    },
  };
}

secret_reader_actor::behavior_type
secret_reader(secret_reader_actor::pointer,
              std::shared_ptr<storage::database> db) {
  return {
    [db](read_atom, const std::vector<secret_key>& keys)
      -> caf::result<std::vector<stored_secret>> {
      auto rows = storage::read_secrets(*db, keys);
      if (!rows)
        return std::move(rows.error());
      return std::move(*rows);
    },
  };
}

} // namespace coalesce
