#pragma once

/// What this node was built from, for its log and its metrics
/// (`coalesce_build_info`).
namespace coalesce {

/// The project's version (CMakeLists.txt).
const char* build_version();

/// The commit built: 12 hex digits, with `-dirty` when tracked files had
/// changes; "unknown" outside a git checkout.
const char* build_commit();

} // namespace coalesce
