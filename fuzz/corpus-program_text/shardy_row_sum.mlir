// Shardy annotations: x split by rows over mesh axis "x" (8 devices); y = 2x keeps the split,
// s = column sums is replicated (needs an all-reduce).
module @shardy_row_sum attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @main(%x: tensor<16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
      -> (tensor<16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
          tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
    %two = stablehlo.constant dense<2.0> : tensor<16x4xf32>
    %y = stablehlo.multiply %x, %two : tensor<16x4xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<16x4xf32>, tensor<f32>) -> tensor<4xf32>
    return %y, %s : tensor<16x4xf32>, tensor<4xf32>
  }
}
