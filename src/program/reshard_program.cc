#include "program/reshard_program.h"

#include "absl/strings/str_cat.h"
#include "shardrt/base/status_macros.h"
#include "shardrt/program/program_text.h"
#include "shardrt/sharding/text.h"

namespace shardrt {

absl::StatusOr<std::string> ReshardProgram(const ArrayShape& shape, const Sharding& from,
                                           const Sharding& to, int64_t partitions) {
  SHARDRT_ASSIGN_OR_RETURN(const std::string tensor, MlirTensorType(shape));
  return absl::StrCat(
      "module @reshard attributes {mhlo.num_partitions = ", partitions,
      " : i32, mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main(%arg0: ", tensor, " {mhlo.sharding = \"", PrintSharding(from),
      "\"}) -> (", tensor, " {mhlo.sharding = \"", PrintSharding(to),
      "\"}) {\n    return %arg0 : ", tensor, "\n  }\n}\n");
}

}  // namespace shardrt
