// y = 2x on donate_add_one's layout (16x4 f32, row-sharded over 8 devices), without donation.
module @executor_scale_f32 attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})
      -> (tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
    %two = stablehlo.constant dense<2.0> : tensor<16x4xf32>
    %y = stablehlo.multiply %x, %two : tensor<16x4xf32>
    return %y : tensor<16x4xf32>
  }
}
