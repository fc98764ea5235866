// Results that depend on where each row sits: y[r][c] = x[r][c] * (r + 1) and s = column sums of
// y. x is split by rows over 8 devices, so a shard placed on the wrong device (or read back from
// the wrong one) is weighted by the wrong rows and changes both results. 18 rows: uneven (3 rows
// per device; devices 6 and 7 hold padding only).
module @position_weighted attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<18x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})
      -> (tensor<18x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
          tensor<4xf32> {mhlo.sharding = "{replicated}"}) {
    %row = stablehlo.iota dim = 0 : tensor<18x4xf32>
    %one = stablehlo.constant dense<1.0> : tensor<18x4xf32>
    %w = stablehlo.add %row, %one : tensor<18x4xf32>
    %y = stablehlo.multiply %x, %w : tensor<18x4xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%y init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<18x4xf32>, tensor<f32>) -> tensor<4xf32>
    return %y, %s : tensor<18x4xf32>, tensor<4xf32>
  }
}
