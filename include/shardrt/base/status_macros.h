// Two macros for absl::Status plumbing, as in Abseil's own code:
//   SHARDRT_RETURN_IF_ERROR(expr);          returns the Status of `expr` if it is not OK.
//   SHARDRT_ASSIGN_OR_RETURN(lhs, expr);    unwraps an absl::StatusOr<T> or returns its Status.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SHARDRT_STATUS_CONCAT_INNER(a, b) a##b
#define SHARDRT_STATUS_CONCAT(a, b) SHARDRT_STATUS_CONCAT_INNER(a, b)

#define SHARDRT_RETURN_IF_ERROR(expr)                 \
  do {                                                \
    ::absl::Status shardrt_status_ = (expr);          \
    if (!shardrt_status_.ok()) return shardrt_status_; \
  } while (0)

#define SHARDRT_ASSIGN_OR_RETURN(lhs, expr) \
  SHARDRT_ASSIGN_OR_RETURN_IMPL(SHARDRT_STATUS_CONCAT(shardrt_statusor_, __LINE__), lhs, expr)

#define SHARDRT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()
