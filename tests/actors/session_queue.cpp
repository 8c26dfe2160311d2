#define CAF_SUITE actors.session_queue
#include <caf/test/unit_test.hpp>

#include <coalesce/actors/session_queue.hpp>

#include <coalesce/messages/errc.hpp>

using namespace coalesce;

namespace {

session_update row(const std::string& id) {
  return session_update{id, 1, "note", "p"};
}

std::vector<std::string> ids_of(const session_rows& rows) {
  std::vector<std::string> result;
  for (const auto& x : rows.updates)
    result.push_back(x.id);
  return result;
}

using ids = std::vector<std::string>;
using waiters = std::vector<uint64_t>;

session_rows rows_of(std::vector<session_update> updates, ids removed,
                     uint64_t waiter) {
  session_rows rows;
  rows.updates = std::move(updates);
  rows.removed = std::move(removed);
  rows.waiters.push_back(waiter);
  return rows;
}

session_job job_of(session_job::kind_type kind, uint64_t waiter) {
  session_job job;
  job.kind = kind;
  job.rows.waiters.push_back(waiter);
  return job;
}

} // namespace

CAF_TEST(persists queued behind a running job merge into one write) {
  session_queue queue;
  queue.persist(rows_of({row("a")}, {}, 1));
  auto first = queue.start_next();
  CAF_REQUIRE(first);
  CAF_CHECK(!queue.start_next()); // one job at a time
  queue.persist(rows_of({row("b")}, {}, 2));
  queue.persist(rows_of({row("c")}, {}, 3));
  CAF_CHECK_EQUAL(queue.queued(), 1u);
  queue.finish(caf::none);
  auto second = queue.start_next();
  CAF_REQUIRE(second);
  CAF_CHECK_EQUAL(ids_of(second->rows), (ids{"b", "c"}));
  CAF_CHECK_EQUAL(second->rows.waiters, (waiters{2, 3}));
}

CAF_TEST(a removal cancels a queued row of the same id and is passed on) {
  session_queue queue;
  queue.persist(rows_of({row("a"), row("b")}, {}, 1));
  queue.persist(rows_of({}, {"b", "stored"}, 2));
  auto job = queue.start_next();
  CAF_REQUIRE(job);
  CAF_CHECK_EQUAL(ids_of(job->rows), (ids{"a"}));
  CAF_CHECK_EQUAL(job->rows.removed, (ids{"b", "stored"}));
}

CAF_TEST(the rows of a failed write go out with the next write) {
  session_queue queue;
  queue.persist(rows_of({row("a")}, {}, 1));
  auto job = queue.start_next();
  queue.keep_failed(std::move(job->rows));
  queue.finish(make_error(errc::storage_failed));
  CAF_CHECK(!queue.idle());
  CAF_CHECK(queue.has_kept_rows());
  queue.persist(rows_of({row("b")}, {}, 2));
  auto retry = queue.start_next();
  CAF_REQUIRE(retry);
  CAF_CHECK_EQUAL(ids_of(retry->rows), (ids{"a", "b"}));
  CAF_CHECK_EQUAL(retry->rows.waiters, (waiters{2})); // 1 was answered
  CAF_CHECK(!queue.has_kept_rows());
}

CAF_TEST(a delete drops the queued writes and keeps the other jobs in place) {
  session_queue queue;
  queue.persist(rows_of({row("a")}, {}, 1));
  auto running = queue.start_next();
  queue.persist(rows_of({row("b")}, {}, 2));
  queue.push(job_of(session_job::barrier, 3));
  queue.persist(rows_of({row("c")}, {}, 4));
  CAF_CHECK_EQUAL(queue.drop_writes(), (waiters{2, 4}));
  queue.push(job_of(session_job::erase, 5));
  queue.finish(caf::none);
  auto barrier = queue.start_next();
  CAF_REQUIRE(barrier);
  CAF_CHECK_EQUAL(barrier->kind, session_job::barrier);
  queue.finish(caf::none);
  auto erase = queue.start_next();
  CAF_REQUIRE(erase);
  CAF_CHECK_EQUAL(erase->kind, session_job::erase);
}

CAF_TEST(a persist after a barrier or lease starts a write of its own) {
  session_queue queue;
  queue.persist(rows_of({row("a")}, {}, 1));
  session_job lease = job_of(session_job::lease, 2);
  lease.lease_id = 7;
  queue.push(lease);
  queue.persist(rows_of({row("b")}, {}, 3));
  CAF_CHECK_EQUAL(queue.queued(), 3u);
  CAF_CHECK(queue.remove_lease(7) == std::optional<uint64_t>{2});
  CAF_CHECK(!queue.remove_lease(7));
  CAF_CHECK_EQUAL(queue.queued(), 2u);
}

CAF_TEST(a row written again after its removal in one merged write ends written) {
  session_rows rows = rows_of({row("x")}, {}, 1);
  rows.merge(rows_of({}, {"x"}, 2));
  CAF_CHECK(ids_of(rows).empty());
  CAF_CHECK_EQUAL(rows.removed, (ids{"x"}));
  rows.merge(rows_of({row("x")}, {}, 3));
  CAF_CHECK_EQUAL(ids_of(rows), (ids{"x"}));
  CAF_CHECK(rows.removed.empty());
  // A row written twice is written once, the later one.
  auto later = row("x");
  later.payload = "later";
  rows.merge(rows_of({later}, {}, 4));
  CAF_REQUIRE_EQUAL(rows.updates.size(), 1u);
  CAF_CHECK_EQUAL(rows.updates.front().payload, "later");
}

CAF_TEST(refused queued writes leave the rows of a failed write kept) {
  session_queue queue;
  queue.persist(rows_of({row("a")}, {}, 1));
  auto failed = queue.start_next();
  CAF_REQUIRE(failed);
  queue.keep_failed(std::move(failed->rows));
  queue.finish(make_error(errc::storage_failed));
  queue.persist(rows_of({row("b")}, {}, 2));
  CAF_CHECK_EQUAL(queue.refuse_queued_writes(), (waiters{2}));
  CAF_CHECK(queue.has_kept_rows());
  queue.persist(rows_of({row("c")}, {}, 3));
  auto retry = queue.start_next();
  CAF_REQUIRE(retry);
  CAF_CHECK_EQUAL(ids_of(retry->rows), (ids{"a", "c"}));
}

CAF_TEST(the queue is idle only with nothing queued running or kept) {
  session_queue queue;
  CAF_CHECK(queue.idle());
  queue.persist(rows_of({row("a")}, {}, 1));
  CAF_CHECK(!queue.idle());
  queue.start_next();
  CAF_CHECK(!queue.idle());
  queue.finish(make_error(errc::storage_failed));
  CAF_CHECK(queue.idle());
  CAF_CHECK(queue.last_result());
}
