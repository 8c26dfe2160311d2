#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <coalesce/messages/secret_entry.hpp>

/// The text forms of secrets the CLI reads and prints: hex secrets, entry
/// lines (`CHAT SENDER MSG_ID SECRET_HEX [EXPIRES_AT [MESSAGE_TS]]`) and key
/// lines (`CHAT SENDER MSG_ID`), fields separated by spaces.
namespace coalesce {

std::optional<std::vector<uint8_t>> parse_hex(const std::string& text);

std::string to_hex(const std::vector<uint8_t>& bytes);

std::optional<int64_t> parse_int64(const std::string& text);

/// Splits on runs of spaces and tabs.
std::vector<std::string> split_fields(const std::string& line);

/// An entry from its fields; on failure, `error` names the bad field.
std::optional<secret_entry> parse_entry(const std::vector<std::string>& fields,
                                        std::string& error);

/// A key from its fields; on failure, `error` says what is wrong.
std::optional<secret_key> parse_key(const std::vector<std::string>& fields,
                                    std::string& error);

} // namespace coalesce
