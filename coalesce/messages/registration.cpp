#include "coalesce/messages/registration.hpp"

#include <caf/actor_system_config.hpp>

#include "coalesce/messages/backfill.hpp"
#include "coalesce/messages/errc.hpp"
#include "coalesce/messages/node_stats.hpp"
#include "coalesce/messages/secret_buffer_stats.hpp"
#include "coalesce/messages/secret_entry.hpp"
#include "coalesce/messages/session.hpp"
#include "coalesce/messages/session_persister_interface.hpp"

namespace coalesce {

void register_message_types(caf::actor_system_config& cfg) {
  // add_message_type<T> also registers std::vector<T>.
  cfg.add_message_type<secret_key>("coalesce.secret_key");
  cfg.add_message_type<secret_entry>("coalesce.secret_entry");
  cfg.add_message_type<secret_write>("coalesce.secret_write");
  cfg.add_message_type<secret_lookup>("coalesce.secret_lookup");
  cfg.add_message_type<stored_secret>("coalesce.stored_secret");
  cfg.add_message_type<secret_buffer_stats>("coalesce.secret_buffer_stats");
  cfg.add_message_type<node_stats>("coalesce.node_stats");
  cfg.add_message_type<timeline_event>("coalesce.timeline_event");
  cfg.add_message_type<page_cursor>("coalesce.page_cursor");
  cfg.add_message_type<timeline_page>("coalesce.timeline_page");
  cfg.add_message_type<stop_condition>("coalesce.stop_condition");
  cfg.add_message_type<backfill_request>("coalesce.backfill_request");
  cfg.add_message_type<backfill_ticket>("coalesce.backfill_ticket");
  cfg.add_message_type<backfill_result>("coalesce.backfill_result");
  cfg.add_message_type<scheduler_stats>("coalesce.scheduler_stats");
  cfg.add_message_type<session_update>("coalesce.session_update");
  cfg.add_message_type<session_record>("coalesce.session_record");
  cfg.add_message_type<session_lease>("coalesce.session_lease");
  cfg.add_message_type<persister_stats>("coalesce.persister_stats");
  cfg.add_message_type<session_handle_actor>("coalesce.session_handle");
  cfg.add_error_category(errc_category, render_errc);
}

} // namespace coalesce
