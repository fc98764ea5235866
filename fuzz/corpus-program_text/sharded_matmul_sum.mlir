// y = sum over rows of (x @ w): x is sharded by rows over 8 devices, w is replicated, so the
// row sum needs a cross-device all-reduce.
module @sharded_matmul_sum attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
                         %w: tensor<4x3xf32> {mhlo.sharding = "{replicated}"})
      -> (tensor<3xf32> {mhlo.sharding = "{replicated}"}) {
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
        : (tensor<16x4xf32>, tensor<4x3xf32>) -> tensor<16x3xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%y init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<16x3xf32>, tensor<f32>) -> tensor<3xf32>
    return %s : tensor<3xf32>
  }
}
