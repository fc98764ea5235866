// 10 rows over 4 devices (shards of 3, 3, 3 and 1 rows, padded to 3): y = 2x + 1 keeps the
// uneven sharding; s = column sums of x is replicated.
module @uneven_two_outputs attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<10x3xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"})
      -> (tensor<10x3xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"},
          tensor<3xf32> {mhlo.sharding = "{replicated}"}) {
    %two = stablehlo.constant dense<2.0> : tensor<10x3xf32>
    %one = stablehlo.constant dense<1.0> : tensor<10x3xf32>
    %m = stablehlo.multiply %x, %two : tensor<10x3xf32>
    %y = stablehlo.add %m, %one : tensor<10x3xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<10x3xf32>, tensor<f32>) -> tensor<3xf32>
    return %y, %s : tensor<10x3xf32>, tensor<3xf32>
  }
}
