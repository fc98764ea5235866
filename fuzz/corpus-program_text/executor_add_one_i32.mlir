// y = x + 1, row-sharded over 8 devices, no donation: one step of the executor tests' chains.
module @executor_add_one_i32 attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})
      -> (tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
    %one = stablehlo.constant dense<1> : tensor<16x4xi32>
    %y = stablehlo.add %x, %one : tensor<16x4xi32>
    return %y : tensor<16x4xi32>
  }
}
