// SHARDRT_EXPORT: marks what the shared libraries (libshardrt.so, libshardrt_llm.so) export.
// They are built with -fvisibility=hidden, so a class or function is visible to programs that
// link them only when its public header (include/shardrt/...) marks it: every class and struct
// declared there, and every free function that is not inline. Private headers (src/, models/)
// carry no mark: what they declare stays inside the library.
//
//   class SHARDRT_EXPORT Runtime { ... };                 // the class, its members, its vtable
//   [[nodiscard]] SHARDRT_EXPORT absl::Status Check();    // one function
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define SHARDRT_EXPORT __attribute__((visibility("default")))
#else
#define SHARDRT_EXPORT
#endif
