#define CAF_SUITE storage.session_replica
#include <caf/test/unit_test.hpp>

#include <coalesce/storage/session_store.hpp>

#include <memory>
#include <string>
#include <vector>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>

#include "error_codes.hpp"
#include "session_fixtures.hpp"
#include "temp_dir.hpp"

using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;

namespace {

constexpr uint8_t applied_code = static_cast<uint8_t>(replica_outcome::applied);
constexpr uint8_t out_of_sync_code
  = static_cast<uint8_t>(replica_outcome::out_of_sync);
constexpr uint8_t preempted_code
  = static_cast<uint8_t>(replica_outcome::preempted);
constexpr uint8_t stale_code = static_cast<uint8_t>(replica_outcome::stale);

struct fixture {
  temp_dir dir;
  std::shared_ptr<database> db;

  fixture() {
    open();
  }

  void open() {
    db.reset();
    auto opened = database::open({dir.sub("db"), durability::synced});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
  }

  replica_answer version(const std::string& session) {
    auto answer = replica_version(*db, session);
    CAF_REQUIRE(answer.engaged());
    return *answer;
  }

  replica_answer prepare(const std::string& session, uint64_t ballot) {
    auto answer = replica_prepare(*db, session, ballot);
    CAF_REQUIRE(answer.engaged());
    return *answer;
  }

  replica_answer claim(const std::string& session, uint64_t ballot,
                       uint64_t generation, const std::string& claimant) {
    auto answer = replica_claim(*db, session, ballot, generation, claimant);
    CAF_REQUIRE(answer.engaged());
    return *answer;
  }

  replica_answer apply(const session_delta& delta) {
    auto result = replica_apply_group(*db, {delta});
    CAF_REQUIRE(!result.failure);
    CAF_REQUIRE_EQUAL(result.answers.size(), 1u);
    CAF_REQUIRE(result.answers[0].engaged());
    return *result.answers[0];
  }

  replica_answer install(uint64_t ballot, const session_image& image) {
    auto answer = replica_install(*db, ballot, image);
    CAF_REQUIRE(answer.engaged());
    return *answer;
  }

  session_record load(const std::string& session) {
    auto record = load_session(*db, session);
    CAF_REQUIRE(record.engaged());
    return *record;
  }
};

/// A write of `session` under `ballot` on version (base_ballot, base_seq).
session_delta delta_of(const std::string& session, uint64_t ballot,
                       uint64_t base_ballot, uint64_t base_seq,
                       uint64_t generation, const std::string& blob,
                       std::vector<session_update> updates = {},
                       std::vector<std::string> removed = {}) {
  session_delta delta;
  delta.session = session;
  delta.ballot = ballot;
  delta.base_ballot = base_ballot;
  delta.base_seq = base_seq;
  delta.generation = generation;
  delta.blob = blob;
  delta.updates = std::move(updates);
  delta.removed = std::move(removed);
  return delta;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(session_replica_tests, fixture)

CAF_TEST(a promise is kept across a restart and refuses a lower ballot) {
  CAF_CHECK_EQUAL(version("s").version.promised, 0u);
  CAF_CHECK_EQUAL(prepare("s", 20).outcome, applied_code);
  open();
  auto lower = prepare("s", 10);
  CAF_CHECK_EQUAL(lower.outcome, preempted_code);
  CAF_CHECK_EQUAL(lower.version.promised, 20u);
  CAF_CHECK_EQUAL(prepare("s", 30).outcome, applied_code);
  CAF_CHECK_EQUAL(version("s").version.promised, 30u);
  // A promise alone is no session.
  auto record = load_session(*db, "s");
  CAF_CHECK_EQUAL(code_of(record.error()), code(errc::not_found));
}

CAF_TEST(a generation is claimed once and never below the floor) {
  CAF_CHECK_EQUAL(claim("s", 5, 3, "h1").outcome, applied_code);
  // A repeated claim of the same handle passes; another handle's of the
  // same generation does not, nor a lower one.
  CAF_CHECK_EQUAL(claim("s", 5, 3, "h1").outcome, applied_code);
  CAF_CHECK_EQUAL(claim("s", 5, 3, "h2").outcome, stale_code);
  CAF_CHECK_EQUAL(claim("s", 5, 2, "h2").outcome, stale_code);
  auto held = version("s").version;
  CAF_CHECK_EQUAL(held.generation, 3u);
  CAF_CHECK_EQUAL(held.claimant, "h1");
  // Under a ballot below the promised one nothing is claimed.
  CAF_CHECK_EQUAL(claim("s", 4, 9, "h3").outcome, preempted_code);
  CAF_CHECK_EQUAL(claim("s", 6, 4, "h2").outcome, applied_code);
  CAF_CHECK_EQUAL(version("s").version.claimant, "h2");
  // The storage generation the persister reads is the claim's.
  auto stored = stored_generation(*db, "s");
  CAF_REQUIRE(stored.engaged());
  CAF_CHECK_EQUAL(stored->value_or(0), 4u);
}

CAF_TEST(a delta applies only on its base version) {
  auto first = apply(delta_of("s", 7, 0, 0, 1, "blob 1", {row("a", 1)}));
  CAF_CHECK_EQUAL(first.outcome, applied_code);
  CAF_CHECK_EQUAL(first.version.ballot, 7u);
  CAF_CHECK_EQUAL(first.version.seq, 1u);
  // A delta made on another version is refused and changes nothing.
  auto behind = apply(delta_of("s", 7, 0, 0, 1, "blob x", {row("x", 2)}));
  CAF_CHECK_EQUAL(behind.outcome, out_of_sync_code);
  CAF_CHECK_EQUAL(behind.version.seq, 1u);
  auto second = apply(
    delta_of("s", 7, 7, 1, 1, "blob 2", {row("b", 2)}, {"a"}));
  CAF_CHECK_EQUAL(second.outcome, applied_code);
  CAF_CHECK_EQUAL(second.version.seq, 2u);
  auto record = load("s");
  CAF_CHECK_EQUAL(record.blob, "blob 2");
  CAF_CHECK_EQUAL(ids_of(record), (ids{"b"}));
}

CAF_TEST(a delta below the generation or the promise is refused) {
  CAF_CHECK_EQUAL(claim("s", 9, 4, "h").outcome, applied_code);
  auto stale = apply(delta_of("s", 9, 0, 0, 3, "old"));
  CAF_CHECK_EQUAL(stale.outcome, stale_code);
  auto preempted = apply(delta_of("s", 8, 0, 0, 4, "old"));
  CAF_CHECK_EQUAL(preempted.outcome, preempted_code);
  auto record = load_session(*db, "s");
  CAF_CHECK_EQUAL(code_of(record.error()), code(errc::not_found));
  CAF_CHECK_EQUAL(apply(delta_of("s", 9, 0, 0, 4, "new")).outcome,
                  applied_code);
  CAF_CHECK_EQUAL(load("s").blob, "new");
  // The claimant stays with its generation.
  CAF_CHECK_EQUAL(version("s").version.claimant, "h");
}

CAF_TEST(a delete keeps a tombstone with its version) {
  apply(delta_of("s", 3, 0, 0, 1, "blob", {row("a", 1), row("b", 2)}));
  auto erase = delta_of("s", 3, 3, 1, 2, "");
  erase.erase = true;
  auto erased = apply(erase);
  CAF_CHECK_EQUAL(erased.outcome, applied_code);
  CAF_CHECK_EQUAL(erased.version.content,
                  static_cast<uint8_t>(session_content::deleted));
  CAF_CHECK_EQUAL(erased.version.generation, 2u);
  auto record = load_session(*db, "s");
  CAF_CHECK_EQUAL(code_of(record.error()), code(errc::not_found));
  auto image = replica_image(*db, "s");
  CAF_REQUIRE(image.engaged());
  CAF_CHECK(image->record.updates.empty());
  // Re-created on top of the tombstone: the rows of before stay gone.
  apply(delta_of("s", 3, 3, 2, 2, "again", {row("c", 3)}));
  CAF_CHECK_EQUAL(ids_of(load("s")), (ids{"c"}));
}

CAF_TEST(deltas of one session in one group build on each other) {
  auto result = replica_apply_group(
    *db, {delta_of("s", 2, 0, 0, 1, "one", {row("a", 1)}),
          delta_of("s", 2, 2, 1, 1, "two", {row("b", 2)}),
          delta_of("s", 2, 2, 1, 1, "stale base", {row("x", 3)}),
          delta_of("t", 2, 0, 0, 1, "other")});
  CAF_REQUIRE(!result.failure);
  CAF_REQUIRE_EQUAL(result.answers.size(), 4u);
  CAF_CHECK_EQUAL(result.answers[0]->outcome, applied_code);
  CAF_CHECK_EQUAL(result.answers[1]->outcome, applied_code);
  CAF_CHECK_EQUAL(result.answers[2]->outcome, out_of_sync_code);
  CAF_CHECK_EQUAL(result.answers[3]->outcome, applied_code);
  auto record = load("s");
  CAF_CHECK_EQUAL(record.blob, "two");
  CAF_CHECK_EQUAL(ids_of(record), (ids{"a", "b"}));
  CAF_CHECK_EQUAL(load("t").blob, "other");
}

CAF_TEST(an image replaces older content and leaves newer alone) {
  apply(delta_of("s", 2, 0, 0, 1, "mine", {row("stale", 1)}));
  session_image image;
  image.session = "s";
  image.version.generation = 5;
  image.version.claimant = "h5";
  image.version.ballot = 4;
  image.version.seq = 3;
  image.version.content = static_cast<uint8_t>(session_content::blob);
  image.record.blob = "theirs";
  image.record.updates = {row("a", 1), row("b", 2)};
  auto installed = install(4, image);
  CAF_CHECK_EQUAL(installed.outcome, applied_code);
  CAF_CHECK_EQUAL(installed.version.seq, 3u);
  CAF_CHECK_EQUAL(installed.version.generation, 5u);
  CAF_CHECK_EQUAL(installed.version.claimant, "h5");
  auto record = load("s");
  CAF_CHECK_EQUAL(record.blob, "theirs");
  CAF_CHECK_EQUAL(ids_of(record), (ids{"a", "b"}));
  // The same image again, or an older one, changes nothing.
  image.version.seq = 2;
  image.record.blob = "older";
  CAF_CHECK_EQUAL(install(4, image).version.seq, 3u);
  CAF_CHECK_EQUAL(load("s").blob, "theirs");
  // Below the promised ballot, refused.
  CAF_CHECK_EQUAL(prepare("s", 9).outcome, applied_code);
  image.version.ballot = 8;
  CAF_CHECK_EQUAL(install(8, image).outcome, preempted_code);
  // What the image read gives installs elsewhere as it was.
  auto copy = replica_image(*db, "s");
  CAF_REQUIRE(copy.engaged());
  CAF_CHECK_EQUAL(copy->record.blob, "theirs");
  CAF_CHECK_EQUAL(ids_of(copy->record), (ids{"a", "b"}));
  CAF_CHECK(same_content(copy->version, installed.version));
}

CAF_TEST(a session written without replicas is version zero) {
  session_write write;
  write.session = "s";
  write.blob = "single";
  write.generation = 2;
  write.updates = {row("a", 1)};
  CAF_REQUIRE(!save_session(*db, write));
  auto held = version("s").version;
  CAF_CHECK_EQUAL(held.generation, 2u);
  CAF_CHECK_EQUAL(held.ballot, 0u);
  CAF_CHECK_EQUAL(held.seq, 0u);
  CAF_CHECK_EQUAL(held.content, static_cast<uint8_t>(session_content::blob));
  CAF_CHECK_EQUAL(apply(delta_of("s", 1, 0, 0, 2, "replicated", {row("b", 2)}))
                    .outcome,
                  applied_code);
  auto record = load("s");
  CAF_CHECK_EQUAL(record.blob, "replicated");
  CAF_CHECK_EQUAL(ids_of(record), (ids{"a", "b"}));
}

CAF_TEST(an invalid delta is refused alone) {
  auto result = replica_apply_group(
    *db, {delta_of("", 1, 0, 0, 0, "no id"), delta_of("s", 1, 0, 0, 0, "ok")});
  CAF_REQUIRE(!result.failure);
  CAF_REQUIRE_EQUAL(result.answers.size(), 2u);
  CAF_CHECK_EQUAL(code_of(result.answers[0].error()),
                  code(errc::invalid_request));
  CAF_CHECK_EQUAL(result.answers[1]->outcome, applied_code);
}

CAF_TEST_FIXTURE_SCOPE_END()
