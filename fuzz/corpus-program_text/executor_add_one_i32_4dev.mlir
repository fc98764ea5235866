// y = x + 1, row-sharded over 4 devices (compiled for devices 0-3 or 4-7 in the tests).
module @executor_add_one_i32_4dev attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xi32> {mhlo.sharding = "{devices=[4,1]<=[4]}"})
      -> (tensor<16x4xi32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}) {
    %one = stablehlo.constant dense<1> : tensor<16x4xi32>
    %y = stablehlo.add %x, %one : tensor<16x4xi32>
    return %y : tensor<16x4xi32>
  }
}
