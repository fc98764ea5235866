// Integer elementwise and reduction: y = 3x + b (b replicated, broadcast over rows),
// m = column maxima of x.
module @int_ops attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
                         %b: tensor<4xi32> {mhlo.sharding = "{replicated}"})
      -> (tensor<16x4xi32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
          tensor<4xi32> {mhlo.sharding = "{replicated}"}) {
    %three = stablehlo.constant dense<3> : tensor<16x4xi32>
    %m3 = stablehlo.multiply %x, %three : tensor<16x4xi32>
    %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<4xi32>) -> tensor<16x4xi32>
    %y = stablehlo.add %m3, %bb : tensor<16x4xi32>
    %lowest = stablehlo.constant dense<-2147483648> : tensor<i32>
    %m = stablehlo.reduce(%x init: %lowest) applies stablehlo.maximum across dimensions = [0]
        : (tensor<16x4xi32>, tensor<i32>) -> tensor<4xi32>
    return %y, %m : tensor<16x4xi32>, tensor<4xi32>
  }
}
