// One step of a loop with a collective: (x, acc) -> (x + 1, acc + column sums of x). x is
// row-sharded over 8 devices, so the column sums need a cross-device all-reduce; acc is
// replicated.
module @executor_step_allreduce attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
                         %acc: tensor<4xi32> {mhlo.sharding = "{replicated}"})
      -> (tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
          tensor<4xi32> {mhlo.sharding = "{replicated}"}) {
    %one = stablehlo.constant dense<1> : tensor<16x4xi32>
    %next = stablehlo.add %x, %one : tensor<16x4xi32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %sums = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<16x4xi32>, tensor<i32>) -> tensor<4xi32>
    %acc2 = stablehlo.add %acc, %sums : tensor<4xi32>
    return %next, %acc2 : tensor<16x4xi32>, tensor<4xi32>
  }
}
